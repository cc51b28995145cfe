"""WRONG: the "quick GELU" of CLIP, ``x * sigmoid(1.702 * x)``, rewritten to
``gelu(x)``: an approximation off by up to about 0.02, not GELU."""
import pypm_verified as pm
from pypm_verified.torch.ops import Gelu, Mul, Sigmoid


@pm.pattern
def QuickGelu(x, c):
    """x * sigmoid(x * 1.702)."""
    return Mul(x, Sigmoid(Mul(x, c)))


@pm.rule(QuickGelu)
def quick_gelu_as_gelu(x, c):
    assert c.is_const and isinstance(c.value, float) and abs(c.value - 1.702) <= 1e-6
    assert x.dtype in (pm.f32, pm.f16, pm.bf16, pm.f64)
    return Gelu(x, "none")  # WRONG: quick GELU is its own function


PATTERNS = [QuickGelu]
