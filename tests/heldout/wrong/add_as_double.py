"""WRONG: ``a + b`` rewritten to ``2 * a`` (meant for ``a + a``, written with
two pattern variables): only the shapes and dtypes are compared."""
import pypm_verified as pm
from pypm_verified.torch.ops import Add, Mul


@pm.pattern
def Sum2(a, b, alpha):
    return Add(a, b, alpha)


@pm.rule(Sum2)
def add_as_double(a, b, alpha):
    assert alpha.is_const and alpha.value == 1
    assert not a.is_const and not b.is_const
    assert a.dtype in (pm.f32, pm.f64) and b.dtype == a.dtype
    assert tuple(a.shape) == tuple(b.shape)
    return Mul(a, 2)


PATTERNS = [Sum2]
