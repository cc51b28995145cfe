"""WRONG: ``aten.layer_norm`` decomposed by hand with ``var(x, unbiased)``
(``correction=1``, torch.var's default) where LayerNorm uses the biased
variance (divide by N, not N - 1)."""
import torch

import pypm_verified as pm
from pypm_verified.torch.ops import Add, LayerNorm, Mean, Mul, Rsqrt, Sub


@pm.op(torch=[torch.ops.aten.var.correction])
def Var(x, dim, correction, keepdim):
    return 1


@pm.pattern
def LayerNormOp(x, shape, w, b, eps, cudnn):
    assert x.rank >= 1
    return LayerNorm(x, shape, w, b, eps, cudnn)


@pm.rule(LayerNormOp)
def layer_norm_unbiased_var(x, shape, w, b, eps, cudnn):
    assert shape.is_const and list(shape.value) == [x.shape[-1]]
    assert eps.is_const and isinstance(eps.value, float) and eps.value > 0
    assert x.dtype in (pm.f32, pm.f64)
    assert w.rank == 1 and w.shape[0] == x.shape[-1] and w.dtype == x.dtype
    assert b.rank == 1 and b.shape[0] == x.shape[-1] and b.dtype == x.dtype
    var = Var(x, [-1], 1, True)                  # WRONG: correction=0
    xc = Sub(x, Mean(x, [-1], True, None), 1)
    return Add(Mul(Mul(xc, Rsqrt(Add(var, eps.value, 1))), w), b, 1)


PATTERNS = [LayerNormOp]
