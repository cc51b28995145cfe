"""WRONG: RMSNorm written with the epsilon outside the root, ``x /
(sqrt(mean(x^2)) + eps) * w``, rewritten to ``aten.rms_norm(x, [D], w,
eps)``, which computes ``x * rsqrt(mean(x^2) + eps) * w``. They differ where
``mean(x^2)`` is not large against eps (rows near zero)."""
import pypm_verified as pm
from pypm_verified.torch.ops import Add, Div, Mean, Mul, RmsNorm, Sqrt


@pm.pattern
def RmsNormEpsOutside(x, w, eps):
    """x / (sqrt(mean(x * x, [-1], keepdim)) + eps) * w."""
    return Mul(Div(x, Add(Sqrt(Mean(Mul(x, x), [-1], True, None)), eps, 1)), w)


@pm.rule(RmsNormEpsOutside)
def rms_norm_eps_outside(x, w, eps):
    assert eps.is_const and isinstance(eps.value, float) and eps.value > 0
    assert x.dtype in (pm.f32, pm.f16, pm.bf16, pm.f64) and w.dtype == x.dtype
    assert w.rank == 1 and w.shape[0] == x.shape[-1]
    return RmsNorm(x, [x.shape[-1]], w, eps.value)  # WRONG: eps was outside the root


PATTERNS = [RmsNormEpsOutside]
