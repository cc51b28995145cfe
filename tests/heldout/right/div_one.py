"""RIGHT: ``x / 1`` rewritten to ``x`` on floating-point tensors (the 1 a
number, so shape and dtype are ``x``'s)."""
import pypm_verified as pm
from pypm_verified.torch.ops import Div


@pm.pattern
def OverOne(x, one):
    return Div(x, one)


@pm.rule(OverOne)
def div_one(x, one):
    assert not x.is_const and x.dtype in (pm.f32, pm.f16, pm.bf16, pm.f64)
    assert one.is_const and isinstance(one.value, (int, float)) and not isinstance(one.value, bool)
    assert one.value == 1
    return x


PATTERNS = [OverOne]
