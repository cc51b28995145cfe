"""WRONG: ``x[..., start:end]`` along the last axis dropped as a no-op
checking only that it starts at 0: the end may cut the axis short."""
import pypm_verified as pm
from pypm_verified.torch.ops import Slice


@pm.pattern
def Sliced(x, dim, start, end, step):
    return Slice(x, dim, start, end, step)


@pm.rule(Sliced)
def slice_noop(x, dim, start, end, step):
    assert x.rank is not None and x.rank >= 1
    assert dim.is_const and dim.value in (-1, x.rank - 1)
    assert start.is_const and start.value in (0, None) and step.is_const and step.value == 1
    # missing: end.value is None or end.value >= x.shape[-1]
    return x


PATTERNS = [Sliced]
