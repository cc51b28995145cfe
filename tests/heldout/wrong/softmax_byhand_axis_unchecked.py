"""WRONG: softmax written out with the max shift, ``exp(x - amax(x, d)) /
sum(exp(x - amax(x, d)), d)``, rewritten to ``softmax(x, -1)`` without
checking that ``d`` is the last axis."""
import torch

import pypm_verified as pm
from pypm_verified.torch.ops import Div, Exp, Softmax, Sub, SumDim


@pm.op(torch=[torch.ops.aten.amax.default])
def Amax(x, dim, keepdim):
    return 1


@pm.pattern
def SoftmaxWritten(x, d):
    e = pm.var()
    e <= Exp(Sub(x, Amax(x, d, True), 1))
    return Div(e, SumDim(e, d, True, None))


@pm.rule(SoftmaxWritten)
def softmax_written_any_axis(x, d):
    assert d.is_const and len(d.value) == 1
    assert x.dtype in (pm.f32, pm.f64)
    # missing: d.value[0] in (-1, x.rank - 1)
    return Softmax(x, -1, None)


PATTERNS = [SoftmaxWritten]
