"""WRONG: ``aten.layer_norm`` decomposed by hand (for a backend without it)
with the epsilon added to the mean instead of the variance: ``(x - (mean +
eps)) / sqrt(var) * w + b``."""
import pypm_verified as pm
from pypm_verified.torch.ops import Add, Div, LayerNorm, Mean, Mul, Sqrt, Sub


@pm.pattern
def LayerNormOp(x, shape, w, b, eps, cudnn):
    assert x.rank >= 1
    return LayerNorm(x, shape, w, b, eps, cudnn)


@pm.rule(LayerNormOp)
def layer_norm_eps_on_mean(x, shape, w, b, eps, cudnn):
    assert shape.is_const and list(shape.value) == [x.shape[-1]]
    assert eps.is_const and isinstance(eps.value, float) and eps.value > 0
    assert x.dtype in (pm.f32, pm.f64)
    assert w.rank == 1 and w.shape[0] == x.shape[-1] and w.dtype == x.dtype
    assert b.rank == 1 and b.shape[0] == x.shape[-1] and b.dtype == x.dtype
    mu = Mean(x, [-1], True, None)
    xc = Sub(x, Add(mu, eps.value, 1), 1)       # WRONG: eps belongs to the variance
    var = Mean(Mul(Sub(x, mu, 1), Sub(x, mu, 1)), [-1], True, None)
    return Add(Mul(Div(xc, Sqrt(var)), w), b, 1)


PATTERNS = [LayerNormOp]
