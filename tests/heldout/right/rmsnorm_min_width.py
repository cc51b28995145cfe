"""RIGHT: RMSNorm written out, ``x * rsqrt(mean(x * x, -1, keepdim) + eps)
* w``, rewritten to ``aten.rms_norm`` only for rows of at least 16 elements
(where the fused kernel pays off): right at every such size, and
check-rules must find instances that have them."""
import pypm_verified as pm
from pypm_verified.torch.ops import Add, Mean, Mul, RmsNorm, Rsqrt


@pm.pattern
def RmsNormWritten(x, w, eps):
    return Mul(Mul(x, Rsqrt(Add(Mean(Mul(x, x), [-1], True, None), eps, 1))), w)


@pm.rule(RmsNormWritten)
def rms_norm_min_width(x, w, eps):
    assert eps.is_const and isinstance(eps.value, float) and eps.value > 0
    assert x.dtype in (pm.f32, pm.f64) and w.dtype == x.dtype
    assert w.rank == 1 and w.shape[0] == x.shape[-1]
    assert x.shape[-1] >= 16  # wide rows only
    return RmsNorm(x, [x.shape[-1]], w, eps.value)


PATTERNS = [RmsNormWritten]
