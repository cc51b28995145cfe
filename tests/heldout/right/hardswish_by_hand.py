"""RIGHT: hardswish written out as in MobileNetV3 code, ``x * clamp(x + 3,
0, 6) / 6``, rewritten to ``aten.hardswish(x)`` (which is exactly
``x * relu6(x + 3) / 6``); every constant checked."""
import torch

import pypm_verified as pm
from pypm_verified.torch.ops import Add, Clamp, Div, Mul


@pm.op(torch=[torch.ops.aten.hardswish.default])
def Hardswish(x):
    return 1


def _is(c, want):
    return c.is_const and isinstance(c.value, (int, float)) and c.value == want


@pm.pattern
def HardswishWritten(x, three, lo, hi, six):
    """x * clamp(x + 3, 0, 6) / 6."""
    return Div(Mul(x, Clamp(Add(x, three, 1), lo, hi)), six)


@pm.rule(HardswishWritten)
def hardswish_by_hand(x, three, lo, hi, six):
    assert _is(three, 3) and _is(lo, 0) and _is(hi, 6) and _is(six, 6)
    assert x.dtype in (pm.f32, pm.f64)
    return Hardswish(x)


PATTERNS = [HardswishWritten]
