"""RIGHT: GPT-2's tanh GELU, ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x +
0.044715 x^3)))``, rewritten to ``gelu(x, "tanh")``; every constant
checked."""
import math

import pypm_verified as pm
from pypm_verified.torch.ops import Add, Gelu, Mul, PowScalar, Tanh


def _is(c, want):
    return c.is_const and isinstance(c.value, (int, float)) and abs(c.value - want) <= 1e-6


@pm.pattern
def GeluTanhWritten(x, h, one, c3, a, b):
    return Mul(Mul(x, h), Add(Tanh(Mul(Add(x, Mul(PowScalar(x, c3), a), 1), b)), one, 1))


@pm.rule(GeluTanhWritten)
def gelu_tanh_written(x, h, one, c3, a, b):
    assert _is(h, 0.5) and _is(one, 1.0) and _is(c3, 3.0)
    assert _is(a, 0.044715) and _is(b, math.sqrt(2.0 / math.pi))
    assert x.dtype in (pm.f32, pm.f64)
    return Gelu(x, "tanh")


PATTERNS = [GeluTanhWritten]
