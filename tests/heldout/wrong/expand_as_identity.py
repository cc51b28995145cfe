"""WRONG: ``expand(x, s)`` dropped as a no-op (it only makes a view) without
checking that ``s`` is ``x``'s own shape: an expand that broadcasts a size-1
axis changes the shape."""
import pypm_verified as pm
from pypm_verified.torch.ops import Expand


@pm.pattern
def Expanded(x, s, implicit):
    return Expand(x, s, implicit)


@pm.rule(Expanded)
def expand_noop(x, s, implicit):
    assert s.is_const and len(s.value) == x.rank  # same rank: "just a view"
    # missing: all(n in (-1, m) for n, m in zip(s.value, x.shape))
    return x


PATTERNS = [Expanded]
