"""Fused kernels the rule library rewrites to, registered with
``torch.library`` so rewritten programs save and load (``torch.export``).

``torch.ops.pypm.linear_act(x, weight, bias, act) -> Tensor``:
``act(linear(x, weight, bias))`` for ``act`` in "relu", "gelu" (erf),
"gelu_tanh", "silu". CPU: oneDNN's ``mkldnn._linear_pointwise`` (the GEMM
with the activation fused in its epilogue); CUDA: ``_addmm_activation``
(cuBLASLt epilogue) for relu and gelu_tanh, else linear then the activation;
other devices, or CPUs without oneDNN: linear then the activation.

Importing this module registers the op (a program using it must import
``pypm_verified.kernels`` before ``torch.export.load``).
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

ACTS = ("relu", "gelu", "gelu_tanh", "silu")
_MKLDNN = {"relu": ("relu", ""), "gelu": ("gelu", "none"), "gelu_tanh": ("gelu", "tanh"),
           "silu": ("swish", "")}


def _check(act: str) -> None:
    if act not in ACTS:
        raise ValueError(f"pypm::linear_act: unknown activation {act!r}; expected one of {ACTS}")


def reference(x, weight, bias, act: str):
    """``act(linear(x, weight, bias))`` with unfused ATen ops."""
    _check(act)
    y = F.linear(x, weight, bias)
    if act == "relu":
        return F.relu(y)
    if act == "gelu":
        return F.gelu(y)
    if act == "gelu_tanh":
        return F.gelu(y, approximate="tanh")
    return F.silu(y)


@torch.library.custom_op("pypm::linear_act", mutates_args=())
def linear_act(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
               act: str) -> torch.Tensor:
    """``act(linear(x, weight, bias))`` in one fused kernel where there is one."""
    _check(act)
    if x.device.type == "cpu" and torch.backends.mkldnn.is_available() and \
            x.dtype in (torch.float32, torch.bfloat16) and weight.dtype == x.dtype:
        attr, alg = _MKLDNN[act]
        return torch.ops.mkldnn._linear_pointwise(x, weight, bias, attr, [], alg)
    if x.device.type == "cuda" and act in ("relu", "gelu_tanh") and bias is not None \
            and x.dim() >= 2:
        x2 = x.reshape(-1, x.shape[-1])
        y = torch._addmm_activation(bias, x2, weight.t(), use_gelu=act == "gelu_tanh")
        return y.reshape(*x.shape[:-1], weight.shape[0])
    return reference(x, weight, bias, act)


@linear_act.register_fake
def _(x, weight, bias, act):
    _check(act)
    return x.new_empty((*x.shape[:-1], weight.shape[0]))
