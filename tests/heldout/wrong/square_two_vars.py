"""WRONG: a rule meant for ``x * x`` whose pattern binds two variables,
``x * y``, rewritten to ``x ** 2``; the guard checks that ``x`` and ``y``
have one shape and dtype, not that they are one tensor."""
import pypm_verified as pm
from pypm_verified.torch.ops import Mul, PowScalar


@pm.pattern
def Product(x, y):
    return Mul(x, y)


@pm.rule(Product)
def product_as_square(x, y):
    assert not x.is_const and not y.is_const
    assert x.dtype in (pm.f32, pm.f64) and y.dtype == x.dtype
    assert tuple(x.shape) == tuple(y.shape)  # not: x is y
    return PowScalar(x, 2)


PATTERNS = [Product]
