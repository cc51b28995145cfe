"""WRONG: hardswish written without the ``+ 3`` shift, ``x * clamp(x, 0, 6)
/ 6``, rewritten to ``aten.hardswish(x)`` (``x * clamp(x + 3, 0, 6) / 6``)."""
import torch

import pypm_verified as pm
from pypm_verified.torch.ops import Clamp, Div, Mul


@pm.op(torch=[torch.ops.aten.hardswish.default])
def Hardswish(x):
    return 1


def _is(c, want):
    return c.is_const and isinstance(c.value, (int, float)) and c.value == want


@pm.pattern
def HardswishNoShift(x, lo, hi, six):
    """x * clamp(x, 0, 6) / 6."""
    return Div(Mul(x, Clamp(x, lo, hi)), six)


@pm.rule(HardswishNoShift)
def hardswish_no_shift(x, lo, hi, six):
    assert _is(lo, 0) and _is(hi, 6) and _is(six, 6)
    assert x.dtype in (pm.f32, pm.f64)
    return Hardswish(x)  # WRONG: the pattern has no x + 3


PATTERNS = [HardswishNoShift]
