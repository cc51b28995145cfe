"""RIGHT: ``clamp_min(x, 0)`` rewritten to ``relu(x)`` on floats."""
import pypm_verified as pm
from pypm_verified.torch.ops import ClampMin, Relu


@pm.pattern
def ClampAtZero(x, lo):
    return ClampMin(x, lo)


@pm.rule(ClampAtZero)
def clamp_min_relu(x, lo):
    assert lo.is_const and isinstance(lo.value, (int, float)) and lo.value == 0
    assert not x.is_const and x.dtype in (pm.f32, pm.f64)
    return Relu(x)


PATTERNS = [ClampAtZero]
