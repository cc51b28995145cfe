"""RIGHT: LLaMA's RMSNorm, ``w * (x * rsqrt(mean(x ** 2, -1, keepdim) +
eps))``, rewritten to ``aten.rms_norm(x, [D], w, eps)``."""
import pypm_verified as pm
from pypm_verified.torch.ops import Add, Mean, Mul, PowScalar, RmsNorm, Rsqrt


@pm.pattern
def RmsNormWritten(x, w, two, eps):
    return Mul(w, Mul(x, Rsqrt(Add(Mean(PowScalar(x, two), [-1], True, None), eps, 1))))


@pm.rule(RmsNormWritten)
def rms_norm_written(x, w, two, eps):
    assert two.is_const and two.value == 2
    assert eps.is_const and isinstance(eps.value, float) and eps.value > 0
    assert x.dtype in (pm.f32, pm.f64) and w.dtype == x.dtype
    assert w.rank == 1 and w.shape[0] == x.shape[-1]
    return RmsNorm(x, [x.shape[-1]], w, eps.value)


PATTERNS = [RmsNormWritten]
