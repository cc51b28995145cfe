"""WRONG: ``mean(x, [-2])`` rewritten to ``mean(x, [-1])`` for square
``x`` (the author checked that the shapes agree, not the values): the
result has the right shape and the wrong values."""
import pypm_verified as pm
from pypm_verified.torch.ops import Mean


@pm.pattern
def MeanRows(x):
    assert x.rank == 2
    return Mean(x, [-2], False, None)


@pm.rule(MeanRows)
def mean_rows_as_cols(x):
    assert x.dtype in (pm.f32, pm.f64) and x.shape[0] == x.shape[1]
    return Mean(x, [-1], False, None)  # WRONG: the axis


PATTERNS = [MeanRows]
