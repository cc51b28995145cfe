"""RIGHT: ``x - 0`` rewritten to ``x`` on floating-point tensors (unlike
``x + 0``, exact for ``-0.0`` too: ``-0.0 - 0`` is ``-0.0``). Not for the
constant ``-0.0``, which equals 0: ``x - (-0.0)`` is ``x + 0.0``."""
import math

import pypm_verified as pm
from pypm_verified.torch.ops import Sub


@pm.pattern
def MinusZero(x, z, alpha):
    return Sub(x, z, alpha)


@pm.rule(MinusZero)
def sub_zero(x, z, alpha):
    assert not x.is_const and x.dtype in (pm.f32, pm.f16, pm.bf16, pm.f64)
    assert z.is_const and isinstance(z.value, (int, float)) and not isinstance(z.value, bool)
    assert z.value == 0 and math.copysign(1.0, z.value) > 0
    assert alpha.is_const and alpha.value == 1
    return x


PATTERNS = [MinusZero]
