"""WRONG: ``reshape(x, s)`` dropped as a no-op without checking that ``s``
is ``x``'s own shape."""
import pypm_verified as pm
from pypm_verified.torch.ops import Reshape


@pm.pattern
def Reshaped(x, s):
    return Reshape(x, s)


@pm.rule(Reshaped)
def reshape_noop(x, s):
    assert s.is_const and len(s.value) == x.rank  # same rank: "same shape"
    # missing: list(s.value) == list(x.shape)
    return x


PATTERNS = [Reshaped]
