"""WRONG: ``2 * sigmoid(x) - 1`` rewritten to ``tanh(x)``: the identity is
``tanh(x) = 2 * sigmoid(2 x) - 1`` (``2 sigmoid(x) - 1`` is ``tanh(x / 2)``)."""
import pypm_verified as pm
from pypm_verified.torch.ops import Mul, Sigmoid, Sub, Tanh


@pm.pattern
def SigmoidScaled(x, two, one):
    return Sub(Mul(Sigmoid(x), two), one, 1)


@pm.rule(SigmoidScaled)
def sigmoid_scaled_as_tanh(x, two, one):
    assert two.is_const and two.value == 2 and one.is_const and one.value == 1
    assert x.dtype in (pm.f32, pm.f64)
    return Tanh(x)  # WRONG: Tanh(x / 2)


PATTERNS = [SigmoidScaled]
