"""WRONG: ``x - mean(x, -1, keepdim=True)`` rewritten with ``keepdim=False``
(the author thought keepdim only matters for the printed shape): the mean
then broadcasts along the wrong axis -- a shape error, or, for a square
``x``, silently wrong values."""
import pypm_verified as pm
from pypm_verified.torch.ops import Mean, Sub


@pm.pattern
def Centred(x):
    assert x.rank == 2
    return Sub(x, Mean(x, [-1], True, None), 1)


@pm.rule(Centred)
def centred_no_keepdim(x):
    assert x.dtype in (pm.f32, pm.f64)
    assert x.shape[0] == x.shape[1]  # the author's test case was square
    return Sub(x, Mean(x, [-1], False, None), 1)  # WRONG: keepdim=True


PATTERNS = [Centred]
