"""WRONG: ``clamp(x, 0, hi)`` rewritten to ``relu6(x)`` checking only the
lower bound: any other upper bound (``clamp(x, 0, 1)``, ``clamp(x, 0, 3)``)
is rewritten too."""
import torch

import pypm_verified as pm
from pypm_verified.torch.ops import Clamp


@pm.op(torch=[torch.ops.aten.relu6.default])
def Relu6(x):
    return 1


@pm.pattern
def ClampZero(x, lo, hi):
    return Clamp(x, lo, hi)


@pm.rule(ClampZero)
def clamp_as_relu6(x, lo, hi):
    assert lo.is_const and lo.value == 0 and hi.is_const and hi.value is not None
    assert x.dtype in (pm.f32, pm.f64)
    # missing: assert hi.value == 6
    return Relu6(x)


PATTERNS = [ClampZero]
