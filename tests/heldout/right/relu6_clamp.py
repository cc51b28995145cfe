"""RIGHT: ``clamp(x, 0, 6)`` rewritten to ``aten.relu6(x)``, both bounds
checked."""
import torch

import pypm_verified as pm
from pypm_verified.torch.ops import Clamp


@pm.op(torch=[torch.ops.aten.relu6.default])
def Relu6(x):
    return 1


@pm.pattern
def Relu6Written(x, lo, hi):
    return Clamp(x, lo, hi)


@pm.rule(Relu6Written)
def clamp_as_relu6(x, lo, hi):
    assert lo.is_const and lo.value == 0 and hi.is_const and hi.value == 6
    assert x.dtype in (pm.f32, pm.f64)
    return Relu6(x)


PATTERNS = [Relu6Written]
