"""RIGHT: ``softmax(x + c, -1)`` rewritten to ``softmax(x, -1)`` where ``c``
is constant along the softmax axis (its last size is 1) and broadcasts to
``x`` without enlarging it."""
import pypm_verified as pm
from pypm_verified.torch.ops import Add, Softmax


@pm.pattern
def SoftmaxShifted(x, c, dim):
    return Softmax(Add(x, c, 1), dim, None)


@pm.rule(SoftmaxShifted)
def softmax_drop_shift(x, c, dim):
    assert not x.is_const and x.rank is not None
    assert dim.is_const and dim.value in (-1, x.rank - 1)
    assert x.dtype in (pm.f32, pm.f64) and not c.is_const and c.dtype == x.dtype
    assert 1 <= c.rank <= x.rank and c.shape[-1] == 1
    assert all(a in (1, s) for a, s in zip(reversed(c.shape), reversed(x.shape)))
    return Softmax(x, dim.value, None)


PATTERNS = [SoftmaxShifted]
