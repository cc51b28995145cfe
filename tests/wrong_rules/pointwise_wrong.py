"""WRONG on purpose (tests/test_check_rules_pointwise.py): pointwise rules
that are not identities.

* ``silu_as_gelu``: ``y * sigmoid(y)`` is SiLU, not GELU;
* ``sigmoid_as_tanh``: ``sigmoid(x)`` is not ``tanh(x)`` (it is
  ``(1 + tanh(x / 2)) / 2``);
* ``wide_clamp_as_identity``: ``clamp(x, -1e4, 1e4)`` is ``x`` only on
  [-1e4, 1e4]; the inputs drawn (normal, or scaled by 100) never leave it, so the instances
  agree and only the symbolic check's counterexample (a value z3 picks
  outside the interval, confirmed by torch) shows the rule wrong.
"""
import pypm_verified as pm
from pypm_verified.torch.ops import Clamp, Gelu, Mul, Sigmoid, Tanh


@pm.pattern
def SiluWritten(y):
    return Mul(y, Sigmoid(y))


@pm.rule(SiluWritten)
def silu_as_gelu(y):
    assert y.dtype in (pm.f32, pm.f64)
    return Gelu(y, "none")


@pm.pattern
def SigmoidOf(x):
    return Sigmoid(x)


@pm.rule(SigmoidOf)
def sigmoid_as_tanh(x):
    assert x.dtype in (pm.f32, pm.f64)
    return Tanh(x)


@pm.pattern
def ClampWide(x, lo, hi):
    return Clamp(x, lo, hi)


@pm.rule(ClampWide)
def wide_clamp_as_identity(x, lo, hi):
    assert x.dtype in (pm.f32, pm.f64)
    assert lo.is_const and hi.is_const and lo.value == -1e4 and hi.value == 1e4
    return Mul(x, 1)


PATTERNS = [SiluWritten, SigmoidOf, ClampWide]
