"""WRONG: ``mean(mean(x, [0]), [1])`` (keepdim False, rank 3) rewritten to
``mean(x, [0, 1])``: after axis 0 is reduced away, axis 1 of the result is
axis 2 of ``x``, so the mean is over ``x``'s axes 0 and 2."""
import pypm_verified as pm
from pypm_verified.torch.ops import Mean


@pm.pattern
def MeanOfMean(x):
    assert x.rank == 3
    return Mean(Mean(x, [0], False, None), [1], False, None)


@pm.rule(MeanOfMean)
def mean_of_mean(x):
    assert x.dtype in (pm.f32, pm.f64)
    return Mean(x, [0, 1], False, None)  # WRONG: [0, 2]


PATTERNS = [MeanOfMean]
