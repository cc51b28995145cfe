"""WRONG: RMSNorm written out with its eps rewritten to ``aten.rms_norm``
with ``eps=None`` (torch then uses the dtype's machine epsilon, 1.2e-7 in
float32, not the model's eps). They differ on rows whose mean square is
not large against eps."""
import pypm_verified as pm
from pypm_verified.torch.ops import Add, Mean, Mul, RmsNorm, Rsqrt


@pm.pattern
def RmsNormWritten(x, w, eps):
    """w * (x * rsqrt(mean(x * x, [-1], keepdim) + eps))."""
    return Mul(w, Mul(x, Rsqrt(Add(Mean(Mul(x, x), [-1], True, None), eps, 1))))


@pm.rule(RmsNormWritten)
def rms_norm_eps_dropped(x, w, eps):
    assert eps.is_const and isinstance(eps.value, float) and eps.value > 0
    assert x.dtype in (pm.f32, pm.f64) and w.dtype == x.dtype
    assert w.rank == 1 and w.shape[0] == x.shape[-1]
    return RmsNorm(x, [x.shape[-1]], w, None)  # WRONG: eps.value dropped


PATTERNS = [RmsNormWritten]
