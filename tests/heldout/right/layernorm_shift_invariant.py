"""RIGHT: ``layer_norm(x + c)`` rewritten to ``layer_norm(x)`` where ``c``
is constant along the normalized (last) axis and broadcasts to ``x``
without enlarging it: the mean absorbs the shift."""
import pypm_verified as pm
from pypm_verified.torch.ops import Add, LayerNorm


@pm.pattern
def LayerNormShifted(x, c, shape, w, b, eps, cudnn):
    return LayerNorm(Add(x, c, 1), shape, w, b, eps, cudnn)


@pm.rule(LayerNormShifted)
def layer_norm_drop_shift(x, c, shape, w, b, eps, cudnn):
    assert not x.is_const and x.rank is not None and x.rank >= 1
    assert shape.is_const and list(shape.value) == [x.shape[-1]]
    assert eps.is_const and isinstance(eps.value, float) and eps.value > 0
    assert x.dtype in (pm.f32, pm.f64) and not c.is_const and c.dtype == x.dtype
    assert 1 <= c.rank <= x.rank and c.shape[-1] == 1
    assert all(a in (1, s) for a, s in zip(reversed(c.shape), reversed(x.shape)))
    return LayerNorm(x, shape.value, w, b, eps.value, False)


PATTERNS = [LayerNormShifted]
