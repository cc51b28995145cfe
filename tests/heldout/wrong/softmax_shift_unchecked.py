"""WRONG: ``softmax(x + c, -1)`` rewritten to ``softmax(x, -1)`` (softmax
is invariant under a shift) without checking that ``c`` is constant along
the softmax axis: a bias of shape ``(..., n)`` changes the result."""
import pypm_verified as pm
from pypm_verified.torch.ops import Add, Softmax


@pm.pattern
def SoftmaxShifted(x, c, dim):
    return Softmax(Add(x, c, 1), dim, None)


@pm.rule(SoftmaxShifted)
def softmax_drop_shift(x, c, dim):
    assert not x.is_const and x.rank is not None and x.rank >= 1
    assert dim.is_const and dim.value in (-1, x.rank - 1)
    assert x.dtype in (pm.f32, pm.f64) and not c.is_const and c.dtype == x.dtype
    assert c.rank <= x.rank  # the shape of the result is x's
    # missing: c.shape[-1] == 1 (constant along the softmax axis)
    return Softmax(x, dim.value, None)


PATTERNS = [SoftmaxShifted]
