"""RIGHT: ``reshape(x, s)`` dropped where ``s`` is ``x``'s own shape."""
import pypm_verified as pm
from pypm_verified.torch.ops import Reshape


@pm.pattern
def Reshaped(x, s):
    return Reshape(x, s)


@pm.rule(Reshaped)
def reshape_noop(x, s):
    assert s.is_const and list(s.value) == list(x.shape)
    return x


PATTERNS = [Reshaped]
