"""WRONG: ``rms_norm(x, [D], None, eps) * w`` rewritten to ``rms_norm(x * w,
[D], None, eps)`` -- scaling before normalizing is undone by the
normalization (unless ``w`` is constant)."""
import pypm_verified as pm
from pypm_verified.torch.ops import Mul, RmsNorm


@pm.pattern
def RmsNormThenScale(x, shape, eps, w):
    return Mul(RmsNorm(x, shape, None, eps), w)


@pm.rule(RmsNormThenScale)
def rms_norm_weight_inside(x, shape, eps, w):
    assert x.rank is not None and x.rank >= 1
    assert shape.is_const and list(shape.value) == [x.shape[-1]]
    assert eps.is_const and isinstance(eps.value, float) and eps.value > 0
    assert x.dtype in (pm.f32, pm.f64) and not w.is_const and w.dtype == x.dtype
    assert w.rank == 1 and w.shape[0] == x.shape[-1]
    return RmsNorm(Mul(x, w), [x.shape[-1]], None, eps.value)  # WRONG


PATTERNS = [RmsNormThenScale]
