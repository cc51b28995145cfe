"""RIGHT: LayerNorm written with ``rsqrt`` -- ``(x - mean) * rsqrt(mean((x
- mean)^2) + eps) * w + b`` over the last axis -- rewritten to
``aten.layer_norm(x, [D], w, b, eps)``; every size and dtype tied."""
import pypm_verified as pm
from pypm_verified.torch.ops import Add, LayerNorm, Mean, Mul, Rsqrt, Sub


@pm.pattern
def LayerNormRsqrt(x, w, b, eps):
    xc = pm.var()
    xc <= Sub(x, Mean(x, [-1], True, None), 1)
    var = Mean(Mul(xc, xc), [-1], True, None)
    return Add(Mul(Mul(xc, Rsqrt(Add(var, eps, 1))), w), b, 1)


@pm.rule(LayerNormRsqrt)
def layer_norm_rsqrt(x, w, b, eps):
    assert eps.is_const and isinstance(eps.value, float) and eps.value > 0
    assert x.dtype in (pm.f32, pm.f16, pm.bf16, pm.f64)
    assert w.rank == 1 and w.shape[0] == x.shape[-1] and w.dtype == x.dtype
    assert b.rank == 1 and b.shape[0] == x.shape[-1] and b.dtype == x.dtype
    return LayerNorm(x, [x.shape[-1]], w, b, eps.value, False)


PATTERNS = [LayerNormRsqrt]
