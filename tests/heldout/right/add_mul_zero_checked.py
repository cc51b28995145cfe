"""RIGHT: ``x * 0 + y`` rewritten to ``y`` on integers where ``x``
broadcasts to ``y`` (the sum then has ``y``'s shape), with an integer 0 (a
float zero, ``0.0`` or ``-0.0``, makes the sum a float tensor)."""
import pypm_verified as pm
from pypm_verified.torch.ops import Add, Mul


@pm.pattern
def AddZeroTimes(x, z, y):
    return Add(Mul(x, z), y, 1)


@pm.rule(AddZeroTimes)
def add_zero_times(x, z, y):
    assert z.is_const and type(z.value) is int and z.value == 0
    assert not x.is_const and not y.is_const
    assert x.dtype == pm.i64 and y.dtype == pm.i64
    assert x.rank <= y.rank
    assert all(a in (1, s) for a, s in zip(reversed(x.shape), reversed(y.shape)))
    return y


PATTERNS = [AddZeroTimes]
