"""WRONG: ``sum(x, -1) / n`` rewritten to ``mean(x, -1)`` checking only that
``n`` is a constant number, not that it is the size of the summed axis."""
import pypm_verified as pm
from pypm_verified.torch.ops import Div, Mean, SumDim


@pm.pattern
def SumOverN(x, n):
    return Div(SumDim(x, [-1], False, None), n)


@pm.rule(SumOverN)
def sum_over_n_as_mean(x, n):
    assert n.is_const and isinstance(n.value, (int, float)) and n.value > 0
    assert x.dtype in (pm.f32, pm.f64)
    # missing: n.value == x.shape[-1]
    return Mean(x, [-1], False, None)


PATTERNS = [SumOverN]
