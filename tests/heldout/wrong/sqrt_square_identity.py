"""WRONG: ``sqrt(x * x)`` rewritten to ``x``: it is ``|x|``."""
import pypm_verified as pm
from pypm_verified.torch.ops import Mul, Sqrt


@pm.pattern
def SqrtSquare(x):
    return Sqrt(Mul(x, x))


@pm.rule(SqrtSquare)
def sqrt_square_identity(x):
    assert x.dtype in (pm.f32, pm.f64)
    return x  # WRONG: Abs(x)


PATTERNS = [SqrtSquare]
