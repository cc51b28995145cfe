"""RIGHT: the biased variance written out, ``mean((x - mean(x))^2)`` over
the last axis with keepdim, rewritten to ``var(x, [-1], correction=0,
keepdim=True)``."""
import torch

import pypm_verified as pm
from pypm_verified.torch.ops import Mean, Mul, Sub


@pm.op(torch=[torch.ops.aten.var.correction])
def Var(x, dim, correction, keepdim):
    return 1


@pm.pattern
def VarWritten(x):
    xc = pm.var()
    xc <= Sub(x, Mean(x, [-1], True, None), 1)
    return Mean(Mul(xc, xc), [-1], True, None)


@pm.rule(VarWritten)
def var_biased(x):
    assert x.dtype in (pm.f32, pm.f64)
    return Var(x, [-1], 0, True)


PATTERNS = [VarWritten]
