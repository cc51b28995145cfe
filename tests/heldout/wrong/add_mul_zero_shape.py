"""WRONG: ``x * 0 + y`` rewritten to ``y`` on integers (no NaN there) without
checking shapes: where ``x`` is larger than ``y``, the sum broadcasts ``y``
to ``x``'s shape and ``y`` alone has the wrong shape."""
import pypm_verified as pm
from pypm_verified.torch.ops import Add, Mul


@pm.pattern
def AddZeroTimes(x, z, y):
    return Add(Mul(x, z), y, 1)


@pm.rule(AddZeroTimes)
def add_zero_times(x, z, y):
    assert z.is_const and z.value == 0 and not isinstance(z.value, bool)
    assert x.dtype == pm.i64 and y.dtype == pm.i64
    # missing: x broadcasts to y (x.rank <= y.rank, each size 1 or y's)
    return y


PATTERNS = [AddZeroTimes]
