"""WRONG: ``softmax(transpose(x, -2, -1), -1)`` rewritten to
``transpose(softmax(x, -1), -2, -1)``: moving the softmax through the
transpose must move its axis too (``softmax(x, -2)``)."""
import pypm_verified as pm
from pypm_verified.torch.ops import Softmax, Transpose


@pm.pattern
def SoftmaxOfTransposed(x):
    assert x.rank >= 2
    return Softmax(Transpose(x, -2, -1), -1, None)


@pm.rule(SoftmaxOfTransposed)
def softmax_through_transpose(x):
    assert x.dtype in (pm.f32, pm.f64)
    return Transpose(Softmax(x, -1, None), -2, -1)  # WRONG: Softmax(x, -2, None)


PATTERNS = [SoftmaxOfTransposed]
