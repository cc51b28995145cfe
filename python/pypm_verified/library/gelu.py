"""GELU written out -> ``aten.gelu``.

* erf form (the paper's Figure 2): ``x * 0.5 * (1 + erf(x / sqrt(2)))``, the
  half as ``x * 0.5`` or ``x / 2`` (alternates, as the paper's ``Half``),
  ``1/sqrt(2)`` as a division by ``sqrt(2)`` or a multiplication by
  ``1/sqrt(2)`` -> ``gelu(x)``;
* tanh form (GPT-2's ``NewGELUActivation``):
  ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))`` ->
  ``gelu(x, approximate="tanh")``.

Every constant is bound and checked by the rule (to 1e-6 relative: the
graph stores Python doubles, the model computes in at most float32).
"""
from __future__ import annotations

import math

import pypm_verified as pm
from ..torch.ops import Add, Div, Erf, Gelu, Mul, PowScalar, Tanh

from .sizes import numel


def _is(c, want: float, rel: float = 1e-6) -> bool:
    return (c is not None and c.is_const and not isinstance(c.value, bool)
            and isinstance(c.value, (int, float)) and abs(c.value - want) <= rel * abs(want))


@pm.pattern
def Half(x, h):
    """x / 2, as ``x * h`` (h = 0.5) or ``x / h`` (h = 2)."""
    return Mul(x, h)


@pm.pattern
def Half(x, h):  # noqa: F811
    return Mul(h, x)


@pm.pattern
def Half(x, h):  # noqa: F811
    return Div(x, h)


@pm.pattern
def ErfArg(x, r2m, r2d):
    """x / sqrt(2): ``x * r2m`` or ``x / r2d``."""
    return Mul(x, r2m)


@pm.pattern
def ErfArg(x, r2m, r2d):  # noqa: F811
    return Div(x, r2d)


@pm.pattern
def OnePlusErf(x, one, r2m, r2d):
    return Add(Erf(ErfArg(x, r2m, r2d)), one, 1)


@pm.pattern
def GeluErf(x, h, one, r2m, r2d, hx):
    """half(x) * (1 + erf(x / sqrt 2)), factors in either order."""
    hx <= Half(x, h)
    return Mul(hx, OnePlusErf(x, one, r2m, r2d))


@pm.pattern
def GeluErf(x, h, one, r2m, r2d, hx):  # noqa: F811
    hx <= Half(x, h)
    return Mul(OnePlusErf(x, one, r2m, r2d), hx)


@pm.pattern
def GeluErf(x, h, one, r2m, r2d, hx):  # noqa: F811
    """x * (0.5 * (1 + erf(...))): the half applied to the erf term."""
    e = pm.var()
    hx <= Half(e, h)
    e <= OnePlusErf(x, one, r2m, r2d)
    return Mul(x, hx)


@pm.rule(GeluErf)
def gelu_erf(x, h, one, r2m, r2d, hx, ctx):
    """-> aten.gelu(x) (exact, erf)."""
    assert hx.fx is not None
    # Half's constant: 0.5 multiplied, or 2 divided by
    assert (hx.fx.target.__name__.startswith("mul") and _is(h, 0.5)) or \
        (hx.fx.target.__name__.startswith("div") and _is(h, 2.0))
    assert _is(one, 1.0)
    assert _is(r2m, math.sqrt(0.5)) if r2m is not None else _is(r2d, math.sqrt(2.0))
    assert x.dtype in (pm.f32, pm.f16, pm.bf16, pm.f64)
    assert ctx.profitable("gelu", dtype=x.torch_dtype, variant="erf",
                      numel=numel(x.shape))
    return Gelu(x, "none")


@pm.pattern
def Cubic(x, c3, a):
    """x + a * x**3 (either order of the product)."""
    return Add(x, Mul(PowScalar(x, c3), a), 1)


@pm.pattern
def Cubic(x, c3, a):  # noqa: F811
    return Add(x, Mul(a, PowScalar(x, c3)), 1)


@pm.pattern
def GeluTanh(x, h, one, c3, a, b):
    """(0.5 * x) * (1 + tanh(b * (x + a * x**3)))."""
    return Mul(Mul(x, h), Add(Tanh(Mul(Cubic(x, c3, a), b)), one, 1))


@pm.pattern
def GeluTanh(x, h, one, c3, a, b):  # noqa: F811
    return Mul(Mul(h, x), Add(Tanh(Mul(Cubic(x, c3, a), b)), one, 1))


@pm.pattern
def GeluTanh(x, h, one, c3, a, b):  # noqa: F811
    return Mul(Mul(x, h), Add(Tanh(Mul(b, Cubic(x, c3, a))), one, 1))


@pm.rule(GeluTanh)
def gelu_tanh(x, h, one, c3, a, b, ctx):
    """-> aten.gelu(x, approximate="tanh")."""
    assert _is(h, 0.5) and _is(one, 1.0) and _is(c3, 3.0, 0.0)
    assert _is(a, 0.044715) and _is(b, math.sqrt(2.0 / math.pi))
    assert x.dtype in (pm.f32, pm.f16, pm.bf16, pm.f64)
    assert ctx.profitable("gelu", dtype=x.torch_dtype, variant="tanh",
                      numel=numel(x.shape))
    return Gelu(x, "tanh")


PATTERNS = [GeluErf, GeluTanh]
