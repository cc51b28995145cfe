"""WRONG: ``clamp(x + 3, 0, 6) / 6`` is hardsigmoid; this rule rewrites it
to ``aten.hardswish(x)`` (which multiplies by ``x`` too)."""
import torch

import pypm_verified as pm
from pypm_verified.torch.ops import Add, Clamp, Div


@pm.op(torch=[torch.ops.aten.hardswish.default])
def Hardswish(x):
    return 1


def _is(c, want):
    return c.is_const and isinstance(c.value, (int, float)) and c.value == want


@pm.pattern
def HardsigmoidWritten(x, three, lo, hi, six):
    """clamp(x + 3, 0, 6) / 6."""
    return Div(Clamp(Add(x, three, 1), lo, hi), six)


@pm.rule(HardsigmoidWritten)
def hardsigmoid_as_hardswish(x, three, lo, hi, six):
    assert _is(three, 3) and _is(lo, 0) and _is(hi, 6) and _is(six, 6)
    assert x.dtype in (pm.f32, pm.f64)
    return Hardswish(x)  # WRONG: should be aten.hardsigmoid(x)


PATTERNS = [HardsigmoidWritten]
