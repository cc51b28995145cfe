"""WRONG: ``x * a - y * b`` factored as ``(x - y) * a`` -- ``b`` taken as
``a`` (the rule author's pattern should have used one variable for both
factors)."""
import pypm_verified as pm
from pypm_verified.torch.ops import Mul, Sub


@pm.pattern
def DiffOfProducts(x, a, y, b):
    return Sub(Mul(x, a), Mul(y, b), 1)


@pm.rule(DiffOfProducts)
def factor_out(x, a, y, b):
    assert x.dtype in (pm.f32, pm.f64)
    assert all(not t.is_const and t.dtype == x.dtype for t in (a, y, b))
    assert tuple(a.shape) == tuple(b.shape)  # not: a is b
    return Mul(Sub(x, y, 1), a)  # WRONG: b may differ from a


PATTERNS = [DiffOfProducts]
