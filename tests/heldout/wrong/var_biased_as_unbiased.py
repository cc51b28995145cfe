"""WRONG: the biased variance written out, ``mean((x - mean(x))^2)``,
rewritten to ``torch.var(x, -1, keepdim=True)`` whose default is unbiased
(``correction=1``): off by a factor N / (N - 1)."""
import torch

import pypm_verified as pm
from pypm_verified.torch.ops import Mean, Mul, Sub


@pm.op(torch=[torch.ops.aten.var.correction])
def Var(x, dim, correction, keepdim):
    return 1


@pm.pattern
def VarWritten(x):
    """mean((x - mean(x, -1)) ** 2, -1), keepdim."""
    xc = pm.var()
    xc <= Sub(x, Mean(x, [-1], True, None), 1)
    return Mean(Mul(xc, xc), [-1], True, None)


@pm.rule(VarWritten)
def var_biased_as_unbiased(x):
    assert x.dtype in (pm.f32, pm.f64)
    return Var(x, [-1], 1, True)  # WRONG: correction=0


PATTERNS = [VarWritten]
