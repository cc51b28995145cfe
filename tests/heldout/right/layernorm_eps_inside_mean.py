"""RIGHT (though it looks wrong): LayerNorm whose epsilon is added inside
the variance's mean, ``mean((x - mean)^2 + eps)``, which over the reals is
``mean((x - mean)^2) + eps``; rewritten to ``aten.layer_norm``."""
import pypm_verified as pm
from pypm_verified.torch.ops import Add, Div, LayerNorm, Mean, Mul, Sqrt, Sub


@pm.pattern
def LayerNormEpsInMean(x, w, b, eps):
    xc = pm.var()
    xc <= Sub(x, Mean(x, [-1], True, None), 1)
    var = Mean(Add(Mul(xc, xc), eps, 1), [-1], True, None)
    return Add(Mul(Div(xc, Sqrt(var)), w), b, 1)


@pm.rule(LayerNormEpsInMean)
def layer_norm_eps_in_mean(x, w, b, eps):
    assert eps.is_const and isinstance(eps.value, float) and eps.value > 0
    assert x.dtype in (pm.f32, pm.f64)
    assert w.rank == 1 and w.shape[0] == x.shape[-1] and w.dtype == x.dtype
    assert b.rank == 1 and b.shape[0] == x.shape[-1] and b.dtype == x.dtype
    return LayerNorm(x, [x.shape[-1]], w, b, eps.value, False)


PATTERNS = [LayerNormEpsInMean]
