"""RIGHT (tests/test_check_rules_coverage.py): LayerNorm written out -- mean
over the last axis, centred, variance, ``sqrt(var + eps)``, scaled by ``w``
and shifted by ``b`` -- rewritten to ``aten.layer_norm`` with the same eps.
The control of tests/wrong_rules/layernorm_eps.py: ``check-rules`` must not
refute it, on near-constant rows and in half precision included."""
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
def layer_norm_written(x, w, b, eps):
    assert eps.is_const and isinstance(eps.value, float) and eps.value > 0
    assert x.dtype in (pm.f32, pm.f16, pm.bf16, pm.f64)
    assert w.rank == 1 and w.shape[0] == x.shape[-1]
    assert b.rank == 1 and b.shape[0] == x.shape[-1]
    assert w.dtype == x.dtype and b.dtype == x.dtype
    return LayerNorm(x, [x.shape[-1]], w, b, eps.value, False)


PATTERNS = [LayerNormWritten]
