"""RIGHT: ``x - x`` rewritten to ``zeros_like(x)`` on integer tensors (on
floats it is wrong for inf and NaN); ``zeros_like`` keeps ``x``'s shape and
dtype."""
import pypm_verified as pm
from pypm_verified.torch.ops import Sub, ZerosLike


@pm.pattern
def MinusSelf(x, alpha):
    return Sub(x, x, alpha)


@pm.rule(MinusSelf)
def sub_self_int(x, alpha):
    assert alpha.is_const and alpha.value == 1
    assert not x.is_const and x.dtype in (pm.i64, pm.i32)
    return ZerosLike(x, None, None, None, None, None)


PATTERNS = [MinusSelf]
