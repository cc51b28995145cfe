"""WRONG on purpose (tests/test_check_rules_coverage.py): LayerNorm written
out with the epsilon *outside* the root -- ``(x - mean) / (sqrt(var) + eps)
* w + b``, the form some hand-written norms use -- rewritten to
``aten.layer_norm``, which computes ``(x - mean) / sqrt(var + eps)``. The
two agree where the variance is large against eps; they differ on rows of
small variance (a near-constant row), over a normalized axis of size >= 2."""
import pypm_verified as pm
from pypm_verified.torch.ops import Add, Div, LayerNorm, Mean, Mul, Sqrt, Sub


@pm.pattern
def LayerNormEpsOutside(x, w, b, eps):
    """(x - mean(x)) / (sqrt(mean((x - mean(x))**2)) + eps) * w + b, last axis."""
    xc = pm.var()
    xc <= Sub(x, Mean(x, [-1], True, None), 1)
    var = Mean(Mul(xc, xc), [-1], True, None)
    return Add(Mul(Div(xc, Add(Sqrt(var), eps, 1)), w), b, 1)


@pm.rule(LayerNormEpsOutside)
def layer_norm_eps_outside(x, w, b, eps):
    assert eps.is_const and isinstance(eps.value, float) and eps.value > 0
    assert x.dtype in (pm.f32, pm.f16, pm.bf16, pm.f64)
    assert w.rank == 1 and w.shape[0] == x.shape[-1]
    assert b.rank == 1 and b.shape[0] == x.shape[-1]
    assert w.dtype == x.dtype and b.dtype == x.dtype
    return LayerNorm(x, [x.shape[-1]], w, b, eps.value, False)  # WRONG: eps was outside


PATTERNS = [LayerNormEpsOutside]
