"""RIGHT: ``sqrt(x * x)`` rewritten to ``abs(x)`` (float64, where ``x * x``
neither overflows nor underflows for the inputs a model holds)."""
import pypm_verified as pm
from pypm_verified.torch.ops import Abs, Mul, Sqrt


@pm.pattern
def SqrtSquare(x):
    return Sqrt(Mul(x, x))


@pm.rule(SqrtSquare)
def sqrt_square_abs(x):
    assert x.dtype == pm.f64
    return Abs(x)


PATTERNS = [SqrtSquare]
