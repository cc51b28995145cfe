"""RIGHT: ``x * 1`` rewritten to ``x`` on floating-point tensors (exact in
IEEE arithmetic too: ``-0.0 * 1`` is ``-0.0``, NaN stays NaN); the 1 is a
number, so the product has ``x``'s shape and dtype."""
import pypm_verified as pm
from pypm_verified.torch.ops import Mul


@pm.pattern
def TimesOne(x, one):
    return Mul(x, one)


@pm.rule(TimesOne)
def mul_one(x, one):
    assert not x.is_const and x.dtype in (pm.f32, pm.f16, pm.bf16, pm.f64)
    assert one.is_const and isinstance(one.value, (int, float)) and not isinstance(one.value, bool)
    assert one.value == 1
    return x


PATTERNS = [TimesOne]
