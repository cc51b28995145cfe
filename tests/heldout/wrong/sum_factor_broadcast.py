"""WRONG: ``sum(x, -1, keepdim) * y`` rewritten to ``sum(x * y, -1,
keepdim)`` -- pulling a factor into a sum is right only when the factor is
constant along the summed axis (``y.shape[-1] == 1``); unchecked here."""
import pypm_verified as pm
from pypm_verified.torch.ops import Mul, SumDim


@pm.pattern
def SumTimes(x, y):
    return Mul(SumDim(x, [-1], True, None), y)


@pm.rule(SumTimes)
def sum_times_inside(x, y):
    assert x.dtype in (pm.f32, pm.f64) and y.dtype == x.dtype and not y.is_const
    assert y.rank <= x.rank
    # missing: y.shape[-1] == 1
    return SumDim(Mul(x, y), [-1], True, None)


PATTERNS = [SumTimes]
