"""Linear followed by a pointwise activation -> ``pypm.linear_act`` (a GEMM
with the activation fused in its epilogue; :mod:`pypm_verified.torch.kernels`).

The activation is an *operator variable* ``f`` guarded to the unary
pointwise class (the paper's ``MatMulEpilog``), so one alternate covers
ReLU and SiLU; GELU takes its ``approximate`` argument and has its own.
The rule maps the bound operator to the kernel's activation name; a
pointwise operator the kernel does not fuse (tanh, exp, ...) blocks it.
Guards: 2-D weight, bias absent or 1-D of the output size, one floating
dtype, the activation fused on the target, profitability (input features).
"""
from __future__ import annotations

import torch

import pypm_verified as pm
from ..torch.ops import Gelu, Linear, Relu, Silu

from ..torch import kernels  # noqa: F401 -- registers torch.ops.pypm.linear_act
from .sizes import tokens



@pm.op(torch=[torch.ops.pypm.linear_act.default])
def LinearAct(x, weight, bias, act):
    """pypm::linear_act(x, weight, bias, act) (pypm_verified.torch.kernels)."""
    return 1


ACT_NAMES = {Relu: "relu", Silu: "silu"}


@pm.pattern
def LinearEpilog(x, w, b, f, approx):
    """f(linear(x, w, b)) for a unary pointwise operator f."""
    assert f.op_class == pm.opclass("unary_pointwise")
    assert w.rank == 2
    return f(Linear(x, w, b))


@pm.pattern
def LinearEpilog(x, w, b, f, approx):  # noqa: F811
    """gelu(linear(x, w, b), approximate)."""
    assert w.rank == 2
    return Gelu(Linear(x, w, b), approx)


@pm.rule(LinearEpilog)
def linear_act(x, w, b, f, approx, ctx):
    """-> pypm.linear_act(x, w, b, act)."""
    if f is not None:
        act = ACT_NAMES.get(f)
    else:
        assert approx.is_const
        act = {"none": "gelu", "tanh": "gelu_tanh"}.get(approx.value)
    assert act is not None
    target = ctx.target
    assert x.dtype == w.dtype and x.dtype in (pm.f32, pm.bf16)
    assert x.shape is not None and x.shape[-1] == w.shape[-1]
    bias = None
    if b is not None and not b.is_const:
        assert b.rank == 1 and b.shape[0] == w.shape[0] and b.dtype == x.dtype
        bias = b
    else:
        assert b is None or b.value is None
    if target == "cpu":
        assert x.device is not None and x.device.type == "cpu"
    assert ctx.profitable("linear_act", dtype=x.torch_dtype, variant=act,
                          tokens=tokens(x.shape))
    return LinearAct(x, w, bias, act)


PATTERNS = [LinearEpilog]
