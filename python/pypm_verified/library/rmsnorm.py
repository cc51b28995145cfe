"""RMSNorm written out (LLaMA/Qwen2's ``RMSNorm`` in float32) ->
``aten.rms_norm``::

    w * (x * rsqrt(mean(x ** 2, [-1], keepdim=True) + eps))

Guards: the power is 2, the mean is over the last axis only and keeps it,
``eps`` is a non-negative number, ``w`` is 1-D of ``x``'s last size, all of
one floating dtype; profitability per target (hidden size).
"""
from __future__ import annotations

import pypm_verified as pm
from ..torch.ops import Add, Mean, Mul, PowScalar, RmsNorm, Rsqrt

from .sizes import numel


@pm.pattern
def Normed(x, eps):
    """x * rsqrt(mean(x**2, [-1], keepdim) + eps), either product order."""
    return Mul(x, Rsqrt(Add(Mean(PowScalar(x, 2), [-1], True, None), eps, 1)))


@pm.pattern
def Normed(x, eps):  # noqa: F811
    return Mul(Rsqrt(Add(Mean(PowScalar(x, 2), [-1], True, None), eps, 1)), x)


@pm.pattern
def RMSNorm(x, w, eps):
    """w * normed(x), either order; w is x's last axis, 1-D."""
    n = pm.var()
    n <= Normed(x, eps)
    assert w.rank == 1 and x.shape[-1] == w.shape[0]
    assert x.dtype == w.dtype
    return Mul(w, n)


@pm.pattern
def RMSNorm(x, w, eps):  # noqa: F811
    n = pm.var()
    n <= Normed(x, eps)
    assert w.rank == 1 and x.shape[-1] == w.shape[0]
    assert x.dtype == w.dtype
    return Mul(n, w)


@pm.rule(RMSNorm)
def rms_norm(x, w, eps, ctx):
    """-> aten.rms_norm(x, [D], w, eps)."""
    assert eps.is_const and not isinstance(eps.value, bool)
    assert isinstance(eps.value, (int, float)) and eps.value >= 0
    assert x.dtype in (pm.f32, pm.f16, pm.bf16, pm.f64)
    assert not w.is_const
    d = x.shape[-1]
    assert d is not None
    assert ctx.profitable("rms_norm", dtype=x.torch_dtype, numel=numel(x.shape))
    return RmsNorm(x, [d], w, float(eps.value))


PATTERNS = [RMSNorm]
