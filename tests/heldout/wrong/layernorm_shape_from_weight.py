"""WRONG: LayerNorm written over the last axis rewritten to
``layer_norm(x, w.shape, w, b, eps)`` -- the normalized shape taken from the
weight, which is not tied to the axis the pattern normalizes: a 2-D
weight ``(S, D)`` (it broadcasts in the pattern) makes layer_norm
normalize over the last two axes."""
import pypm_verified as pm
from pypm_verified.torch.ops import Add, Div, LayerNorm, Mean, Mul, Sqrt, Sub


@pm.pattern
def LayerNormWritten(x, w, b, eps):
    """(x - mean(x)) / sqrt(mean((x - mean(x))**2) + eps) * w + b, last axis."""
    xc = pm.var()
    xc <= Sub(x, Mean(x, [-1], True, None), 1)
    var = Mean(Mul(xc, xc), [-1], True, None)
    return Add(Mul(Div(xc, Sqrt(Add(var, eps, 1))), w), b, 1)


@pm.rule(LayerNormWritten)
def layer_norm_shape_of_weight(x, w, b, eps):
    assert eps.is_const and isinstance(eps.value, float) and eps.value > 0
    assert x.dtype in (pm.f32, pm.f64)
    assert w.dtype == x.dtype and b.dtype == x.dtype and w.rank >= 1
    assert tuple(b.shape) == tuple(w.shape)
    assert tuple(x.shape[-w.rank:]) == tuple(w.shape)
    # missing: w.rank == 1 (the pattern normalizes the last axis only)
    return LayerNorm(x, list(w.shape), w, b, eps.value, False)


PATTERNS = [LayerNormWritten]
