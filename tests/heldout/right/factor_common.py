"""RIGHT: ``x * a - y * a`` factored as ``(x - y) * a`` -- one pattern
variable for the common factor, so both products share it."""
import pypm_verified as pm
from pypm_verified.torch.ops import Mul, Sub


@pm.pattern
def DiffOfProducts(x, a, y):
    return Sub(Mul(x, a), Mul(y, a), 1)


@pm.rule(DiffOfProducts)
def factor_out(x, a, y):
    assert x.dtype in (pm.f32, pm.f64)
    assert all(not t.is_const and t.dtype == x.dtype for t in (x, a, y))
    return Mul(Sub(x, y, 1), a)


PATTERNS = [DiffOfProducts]
