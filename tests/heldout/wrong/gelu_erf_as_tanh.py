"""WRONG: the exact (erf) GELU of BERT, ``x * 0.5 * (1 + erf(x / sqrt(2)))``,
rewritten to the tanh approximation ``gelu(x, "tanh")``. The two differ by
up to about 5e-4 (near |x| = 2): a different function, not a rounding."""
import math

import pypm_verified as pm
from pypm_verified.torch.ops import Add, Div, Erf, Gelu, Mul


def _is(c, want):
    return c.is_const and isinstance(c.value, (int, float)) and abs(c.value - want) <= 1e-6


@pm.pattern
def GeluErfWritten(x, h, one, r2):
    """x * 0.5 * (1 + erf(x / sqrt(2)))."""
    return Mul(Mul(x, h), Add(Erf(Div(x, r2)), one, 1))


@pm.rule(GeluErfWritten)
def gelu_erf_as_tanh(x, h, one, r2):
    assert _is(h, 0.5) and _is(one, 1.0) and _is(r2, math.sqrt(2.0))
    assert x.dtype in (pm.f32, pm.f16, pm.bf16, pm.f64)
    return Gelu(x, "tanh")  # WRONG: the erf form is approximate="none"


PATTERNS = [GeluErfWritten]
