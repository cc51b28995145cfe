"""WRONG on purpose (tests/test_check_rules.py): GPT-2's tanh GELU with a
mistyped constant (0.04715 for 0.044715) rewritten to ``gelu(x, "tanh")``
anyway."""
import math

import pypm_verified as pm
from pypm_verified.torch.ops import Add, Gelu, Mul, PowScalar, Tanh


def _is(c, want):
    return c.is_const and isinstance(c.value, (int, float)) and abs(c.value - want) <= 1e-6


@pm.pattern
def GeluTanhTypo(x, h, one, c3, a, b):
    """(x * h) * (1 + tanh((x + x**c3 * a) * b))."""
    return Mul(Mul(x, h), Add(Tanh(Mul(Add(x, Mul(PowScalar(x, c3), a), 1), b)), one, 1))


@pm.rule(GeluTanhTypo)
def gelu_tanh_typo(x, h, one, c3, a, b):
    assert _is(h, 0.5) and _is(one, 1.0) and _is(c3, 3.0)
    assert _is(a, 0.04715) and _is(b, math.sqrt(2.0 / math.pi))  # 0.044715 in GPT-2
    assert x.dtype in (pm.f32, pm.f16, pm.bf16, pm.f64)
    return Gelu(x, "tanh")


PATTERNS = [GeluTanhTypo]
