"""WRONG: ``x - linear(y, w, b)`` (a residual subtraction) rewritten to
``addmm(b - x, ...)``-style ``linear(y, w, b) - x`` -- the subtraction's
operands swapped (a user who assumed ``sub`` commutes like ``add``)."""
import pypm_verified as pm
from pypm_verified.torch.ops import Linear, Sub


@pm.pattern
def ResidualSub(x, y, w, b):
    assert w.rank == 2
    return Sub(x, Linear(y, w, b), 1)


@pm.rule(ResidualSub)
def residual_sub_swapped(x, y, w, b):
    assert x.dtype in (pm.f32, pm.f64) and y.dtype == x.dtype and w.dtype == x.dtype
    return Sub(Linear(y, w, b), x, 1)  # WRONG: sub does not commute


PATTERNS = [ResidualSub]
