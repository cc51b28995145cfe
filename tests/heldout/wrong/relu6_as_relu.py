"""WRONG: ``clamp(x, 0, 6)`` (relu6) rewritten to ``relu(x)``: they differ
only above 6, which normal(0, 1) inputs seldom reach; large inputs (or the
symbolic check) show it."""
import pypm_verified as pm
from pypm_verified.torch.ops import Clamp, Relu


@pm.pattern
def Relu6Written(x, lo, hi):
    return Clamp(x, lo, hi)


@pm.rule(Relu6Written)
def relu6_as_relu(x, lo, hi):
    assert lo.is_const and lo.value == 0 and hi.is_const and hi.value == 6
    assert x.dtype in (pm.f32, pm.f64)
    return Relu(x)  # WRONG: relu has no upper bound


PATTERNS = [Relu6Written]
