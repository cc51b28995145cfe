"""RIGHT: RMSNorm written out, ``x * rsqrt(mean(x * x, -1, keepdim) + eps)
* w``, rewritten to ``aten.rms_norm`` only for the hidden sizes a fused
kernel supports (``x.shape[-1] in (64, 128)``): the rule is right at those
sizes, and check-rules must find instances that have them."""
import pypm_verified as pm
from pypm_verified.torch.ops import Add, Mean, Mul, RmsNorm, Rsqrt


@pm.pattern
def RmsNormWritten(x, w, eps):
    return Mul(Mul(x, Rsqrt(Add(Mean(Mul(x, x), [-1], True, None), eps, 1))), w)


@pm.rule(RmsNormWritten)
def rms_norm_kernel_sizes(x, w, eps):
    assert eps.is_const and isinstance(eps.value, float) and eps.value > 0
    assert x.dtype in (pm.f32, pm.f64) and w.dtype == x.dtype
    assert w.rank == 1 and w.shape[0] == x.shape[-1]
    assert x.shape[-1] in (64, 128)  # the kernel's hidden sizes
    return RmsNorm(x, [x.shape[-1]], w, eps.value)


PATTERNS = [RmsNormWritten]
