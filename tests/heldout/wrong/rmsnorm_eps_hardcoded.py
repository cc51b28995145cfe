"""WRONG: LLaMA's RMSNorm ``w * (x * rsqrt(mean(x^2) + eps))`` rewritten to
``aten.rms_norm`` with a hard-coded ``1e-6`` instead of the model's eps (the
rule author's model used 1e-6; others use 1e-5 or 1e-2)."""
import pypm_verified as pm
from pypm_verified.torch.ops import Add, Mean, Mul, PowScalar, RmsNorm, Rsqrt


@pm.pattern
def RmsNormWritten(x, w, two, eps):
    """w * (x * rsqrt(mean(x ** 2, [-1], keepdim) + eps))."""
    return Mul(w, Mul(x, Rsqrt(Add(Mean(PowScalar(x, two), [-1], True, None), eps, 1))))


@pm.rule(RmsNormWritten)
def rms_norm_eps_hardcoded(x, w, two, eps):
    assert two.is_const and two.value == 2
    assert eps.is_const and isinstance(eps.value, float) and eps.value > 0
    assert x.dtype in (pm.f32, pm.f64) and w.dtype == x.dtype
    assert w.rank == 1 and w.shape[0] == x.shape[-1]
    return RmsNorm(x, [x.shape[-1]], w, 1e-6)  # WRONG: eps.value


PATTERNS = [RmsNormWritten]
