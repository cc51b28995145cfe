"""WRONG: RMSNorm written out (no mean subtracted) rewritten to
``aten.layer_norm`` without a bias: LayerNorm centres the row first."""
import pypm_verified as pm
from pypm_verified.torch.ops import Add, LayerNorm, Mean, Mul, Rsqrt


@pm.pattern
def RmsNormWritten(x, w, eps):
    """w * (x * rsqrt(mean(x * x, [-1], keepdim) + eps))."""
    return Mul(w, Mul(x, Rsqrt(Add(Mean(Mul(x, x), [-1], True, None), eps, 1))))


@pm.rule(RmsNormWritten)
def rms_norm_as_layer_norm(x, w, eps):
    assert eps.is_const and isinstance(eps.value, float) and eps.value > 0
    assert x.dtype in (pm.f32, pm.f64) and w.dtype == x.dtype
    assert w.rank == 1 and w.shape[0] == x.shape[-1]
    return LayerNorm(x, [x.shape[-1]], w, None, eps.value, False)  # WRONG: centres x


PATTERNS = [RmsNormWritten]
