"""RIGHT: ``mean(mean(x, [0]), [1])`` (keepdim False, rank 3) rewritten to
``mean(x, [0, 2])``: once axis 0 is gone, axis 1 is ``x``'s axis 2, and a
mean of equal-size means is the mean of all."""
import pypm_verified as pm
from pypm_verified.torch.ops import Mean


@pm.pattern
def MeanOfMean(x):
    assert x.rank == 3
    return Mean(Mean(x, [0], False, None), [1], False, None)


@pm.rule(MeanOfMean)
def mean_of_mean(x):
    assert x.dtype in (pm.f32, pm.f64)
    return Mean(x, [0, 2], False, None)


PATTERNS = [MeanOfMean]
