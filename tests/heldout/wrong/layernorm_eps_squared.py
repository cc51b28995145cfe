"""WRONG: LayerNorm written with ``rsqrt(var + eps)`` rewritten to
``aten.layer_norm`` with ``eps ** 2`` (a user who thought layer_norm takes
the epsilon of the standard deviation); the difference shows on rows of
small variance."""
import pypm_verified as pm
from pypm_verified.torch.ops import Add, LayerNorm, Mean, Mul, Rsqrt, Sub


@pm.pattern
def LayerNormRsqrt(x, w, b, eps):
    """(x - mean) * rsqrt(mean((x - mean)^2) + eps) * w + b, last axis."""
    xc = pm.var()
    xc <= Sub(x, Mean(x, [-1], True, None), 1)
    var = Mean(Mul(xc, xc), [-1], True, None)
    return Add(Mul(Mul(xc, Rsqrt(Add(var, eps, 1))), w), b, 1)


@pm.rule(LayerNormRsqrt)
def layer_norm_eps_squared(x, w, b, eps):
    assert eps.is_const and isinstance(eps.value, float) and eps.value > 0
    assert x.dtype in (pm.f32, pm.f16, pm.bf16, pm.f64)
    assert w.rank == 1 and w.shape[0] == x.shape[-1] and w.dtype == x.dtype
    assert b.rank == 1 and b.shape[0] == x.shape[-1] and b.dtype == x.dtype
    return LayerNorm(x, [x.shape[-1]], w, b, eps.value ** 2, False)  # WRONG: eps.value


PATTERNS = [LayerNormRsqrt]
