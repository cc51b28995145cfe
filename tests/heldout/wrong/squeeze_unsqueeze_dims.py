"""WRONG: ``squeeze(unsqueeze(x, a), b)`` dropped as a no-op without
checking ``a == b``: squeezing another size-1 axis changes the shape."""
import pypm_verified as pm
from pypm_verified.torch.ops import Squeeze, Unsqueeze


@pm.pattern
def SqueezeUnsqueeze(x, a, b):
    return Squeeze(Unsqueeze(x, a), b)


@pm.rule(SqueezeUnsqueeze)
def squeeze_unsqueeze_noop(x, a, b):
    assert a.is_const and b.is_const
    # missing: a.value == b.value (each as a list or modulo the rank)
    return x


PATTERNS = [SqueezeUnsqueeze]
