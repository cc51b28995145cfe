"""WRONG: the erf GELU with ``x * sqrt(2)`` inside the erf (a user who
mixed up ``/ sqrt(2)`` and ``* sqrt(2)``), ``x * 0.5 * (1 + erf(x *
1.41421))``, rewritten to ``gelu(x)``, whose argument is ``x * 0.70711``."""
import math

import pypm_verified as pm
from pypm_verified.torch.ops import Add, Erf, Gelu, Mul


def _is(c, want):
    return c.is_const and isinstance(c.value, (int, float)) and abs(c.value - want) <= 1e-6


@pm.pattern
def GeluErfMul(x, h, one, c):
    """x * 0.5 * (1 + erf(x * c))."""
    return Mul(Mul(x, h), Add(Erf(Mul(x, c)), one, 1))


@pm.rule(GeluErfMul)
def gelu_erf_sqrt2(x, h, one, c):
    assert _is(h, 0.5) and _is(one, 1.0)
    assert _is(c, math.sqrt(2.0))  # WRONG: GELU's is 1 / sqrt(2)
    assert x.dtype in (pm.f32, pm.f16, pm.bf16, pm.f64)
    return Gelu(x, "none")


PATTERNS = [GeluErfMul]
