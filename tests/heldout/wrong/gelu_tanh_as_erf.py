"""WRONG: GPT-2's tanh GELU, ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x +
0.044715 x^3)))``, rewritten to the exact ``gelu(x)`` (approximate="none"):
the approximation is not the erf function it approximates."""
import math

import pypm_verified as pm
from pypm_verified.torch.ops import Add, Gelu, Mul, PowScalar, Tanh


def _is(c, want):
    return c.is_const and isinstance(c.value, (int, float)) and abs(c.value - want) <= 1e-6


@pm.pattern
def GeluTanhWritten(x, h, one, c3, a, b):
    """(x * 0.5) * (1 + tanh((x + x**3 * 0.044715) * sqrt(2/pi)))."""
    return Mul(Mul(x, h), Add(Tanh(Mul(Add(x, Mul(PowScalar(x, c3), a), 1), b)), one, 1))


@pm.rule(GeluTanhWritten)
def gelu_tanh_as_erf(x, h, one, c3, a, b):
    assert _is(h, 0.5) and _is(one, 1.0) and _is(c3, 3.0)
    assert _is(a, 0.044715) and _is(b, math.sqrt(2.0 / math.pi))
    assert x.dtype in (pm.f32, pm.f16, pm.bf16, pm.f64)
    return Gelu(x, "none")  # WRONG: should be Gelu(x, "tanh")


PATTERNS = [GeluTanhWritten]
