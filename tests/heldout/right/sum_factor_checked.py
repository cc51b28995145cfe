"""RIGHT: ``sum(x, -1, keepdim) * y`` rewritten to ``sum(x * y, -1,
keepdim)`` where ``y`` is constant along the summed axis (last size 1)."""
import pypm_verified as pm
from pypm_verified.torch.ops import Mul, SumDim


@pm.pattern
def SumTimes(x, y):
    return Mul(SumDim(x, [-1], True, None), y)


@pm.rule(SumTimes)
def sum_times_inside(x, y):
    assert x.dtype in (pm.f32, pm.f64) and not x.is_const and x.rank >= 1
    assert not y.is_const and y.dtype == x.dtype
    assert 1 <= y.rank <= x.rank and y.shape[-1] == 1
    return SumDim(Mul(x, y), [-1], True, None)


PATTERNS = [SumTimes]
