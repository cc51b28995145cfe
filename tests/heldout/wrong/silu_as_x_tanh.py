"""WRONG: ``x * tanh(x)`` (a user misremembering SiLU as x times tanh)
rewritten to ``silu(x)``, which is ``x * sigmoid(x)``."""
import pypm_verified as pm
from pypm_verified.torch.ops import Mul, Silu, Tanh


@pm.pattern
def XTanhX(x):
    return Mul(x, Tanh(x))


@pm.rule(XTanhX)
def x_tanh_as_silu(x):
    assert x.dtype in (pm.f32, pm.f16, pm.bf16, pm.f64)
    return Silu(x)  # WRONG: silu(x) = x * sigmoid(x) = x * (1 + tanh(x/2)) / 2


PATTERNS = [XTanhX]
