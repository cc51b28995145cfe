"""Fused kernels that the rewrite rules target, registered with ``torch.library``.

``torch.ops.pypm.linear_act(x, weight, bias, act)`` computes
``act(x @ weight.T + bias)`` -- a linear layer with its pointwise activation
fused into the GEMM's epilogue -- where ``act`` is one of :data:`ACTS`:

====================  ==========================================
``"relu"``            ``relu``
``"gelu"``            ``gelu`` (exact, erf form)
``"gelu_tanh"``       ``gelu(approximate="tanh")`` (GPT-2's form)
``"silu"``            ``silu`` (``x * sigmoid(x)``, LLaMA's MLP)
``"none"``            identity (a plain linear)
====================  ==========================================

``x`` is ``(..., in)``, ``weight`` ``(out, in)``, ``bias`` ``(out,)`` or
``None``; the result is ``(..., out)`` in ``x``'s dtype. Any other ``act``
raises :class:`ValueError` (eagerly, and at trace time through the fake impl).

Implementations, chosen per call:

* CPU: oneDNN's ``torch.ops.mkldnn._linear_pointwise`` (GEMM with post-op)
  for float32, and bfloat16 where oneDNN supports it on this CPU; otherwise
  (float64, float16 on CPUs without AVX512-FP16, sparse layouts, oneDNN not
  built) ``F.linear`` followed by the activation.
* CUDA: ``torch._addmm_activation`` (cuBLASLt's ``RELU_BIAS``/``GELU_BIAS``
  epilogue) for ``relu`` and ``gelu_tanh`` with a bias -- on CUDA its GELU is
  the tanh approximation (PyTorch's own addmm tests expect
  ``approximate="tanh"`` there), so exact ``gelu`` is not routed there;
  leading dimensions are flattened to a 2-D GEMM. Everything else falls back
  to ``F.linear`` + activation (cuBLAS already fuses the bias add).
* Anything else (the ``CompositeExplicitAutograd`` default): ``F.linear`` +
  activation.

A fake (meta) implementation makes the op traceable by ``torch.export``. The op
has no autograd formula: it is an inference kernel (``DIFFERENTIABLE`` in
:mod:`.inductor` says so: ``pm.inductor_pass()`` declines ``linear_act`` in
training graphs, and ``pm.backend`` passes training graphs through).

Saving and loading: an ``ExportedProgram`` containing ``pypm.linear_act``
saves with ``torch.export.save`` as usual, but ``torch.export.load`` needs the
op registered first -- ``import pypm_verified.torch.kernels`` (importing is
idempotent) before loading a rewritten program.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

__all__ = ["ACTS", "linear_act", "reference", "mkldnn_supports"]

#: Activations ``pypm::linear_act`` accepts.
ACTS = ("relu", "gelu", "gelu_tanh", "silu", "none")

# act -> (oneDNN post-op attr, algorithm); oneDNN calls SiLU "swish".
_MKLDNN_ATTR = {
    "relu": ("relu", "none"),
    "gelu": ("gelu", "none"),
    "gelu_tanh": ("gelu", "tanh"),
    "silu": ("swish", "none"),
    "none": ("none", "none"),
}

_OP_NAME = "pypm::linear_act"


def _check_act(act: str) -> None:
    if act not in ACTS:
        raise ValueError(
            f"pypm::linear_act: unknown activation {act!r}; expected one of {', '.join(ACTS)}")


def _apply_act(y: torch.Tensor, act: str) -> torch.Tensor:
    if act == "relu":
        return torch.relu(y)
    if act == "gelu":
        return F.gelu(y)
    if act == "gelu_tanh":
        return F.gelu(y, approximate="tanh")
    if act == "silu":
        return F.silu(y)
    return y


def reference(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
              act: str) -> torch.Tensor:
    """``act(F.linear(x, weight, bias))`` with plain aten ops: the unfused
    computation the op replaces, and every implementation's fallback."""
    _check_act(act)
    return _apply_act(F.linear(x, weight, bias), act)


def _mkldnn_bf16() -> bool:
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def mkldnn_supports(x: torch.Tensor, weight: torch.Tensor,
                    bias: Optional[torch.Tensor]) -> bool:
    """Whether the CPU implementation takes oneDNN's fused path for these
    arguments (dense CPU tensors of one dtype: float32, or bfloat16 where
    oneDNN supports it on this CPU)."""
    if not torch.backends.mkldnn.is_available():
        return False
    ts = (x, weight) if bias is None else (x, weight, bias)
    if any(t.device.type != "cpu" or t.layout != torch.strided for t in ts):
        return False
    if any(t.dtype != x.dtype for t in ts) or weight.dim() != 2 or x.dim() < 1:
        return False
    if x.dtype == torch.float32:
        return True
    return x.dtype == torch.bfloat16 and _mkldnn_bf16()


def _cpu_impl(x, weight, bias, act):
    _check_act(act)
    if mkldnn_supports(x, weight, bias):
        attr, algorithm = _MKLDNN_ATTR[act]
        return torch.ops.mkldnn._linear_pointwise(x, weight, bias, attr, [], algorithm)
    return reference(x, weight, bias, act)


def _cuda_impl(x, weight, bias, act):
    _check_act(act)
    if act in ("relu", "gelu_tanh") and bias is not None and x.dim() >= 1 \
            and x.dtype == weight.dtype == bias.dtype and bias.dim() == 1:
        x2 = x.reshape(-1, x.shape[-1])
        y = torch._addmm_activation(bias, x2, weight.t(), use_gelu=(act == "gelu_tanh"))
        return y.reshape(*x.shape[:-1], weight.shape[0])
    return reference(x, weight, bias, act)


def _fake_impl(x, weight, bias, act):
    _check_act(act)
    torch._check(weight.dim() == 2, lambda: "pypm::linear_act: weight must be 2-D")
    torch._check(x.dim() >= 1, lambda: "pypm::linear_act: x must have at least 1 dim")
    torch._check(x.shape[-1] == weight.shape[1],
                 lambda: f"pypm::linear_act: x's last dim {x.shape[-1]} != weight's "
                         f"in-features {weight.shape[1]}")
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


def _registered() -> bool:
    try:
        torch.ops.pypm.linear_act.default
        return True
    except (AttributeError, RuntimeError):
        return False


if _registered():
    # Already defined in this process (e.g. this file imported under a second
    # module name, or importlib.reload): defining it twice is an error.
    linear_act = torch.ops.pypm.linear_act
else:
    @torch.library.custom_op(_OP_NAME, mutates_args=())
    def linear_act(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                   act: str) -> torch.Tensor:
        """``act(x @ weight.T + bias)``; see the module docstring."""
        return reference(x, weight, bias, act)

    linear_act.register_kernel("cpu")(_cpu_impl)
    linear_act.register_kernel("cuda")(_cuda_impl)
    linear_act.register_fake(_fake_impl)
