"""Where each rule's kernel is faster than what it replaces: minimum sizes
per ``(rule, target)``. The one place rule guards read thresholds from
(:func:`threshold`); ``bench/bench_kernels.py`` regenerates the table from
measurements.

Provenance of the current numbers (2-core CPU of the development machine,
float32, median of repeated runs):

* attention, cpu: SDPA vs explicit attention 0.86x at sequence 128 (head
  dim 64), 1.09x at 512, 1.28x causal at 512 -> from sequence 512 on.
* linear_act, cpu: oneDNN ``_linear_pointwise`` vs linear+GELU: 0.90x at
  K=64 (T=32..128, N=128), 3.0x at K=256/N=1024, 4.8x at K=768/N=3072 ->
  from 256 input features on.
* rms_norm, cpu: ``aten.rms_norm`` vs the written-out form: 0.99x at hidden
  64, 1.05x at 256, 1.12x at 768 -> from hidden 256 on.
* gelu, transpose_matmul: fewer kernels and no intermediate tensor: always.
* cuda: the fused kernels' home (FlashAttention / cuDNN SDPA, cuBLASLt
  epilogues); not measured here: always, except linear_act, whose CUDA
  kernel fuses only relu and gelu_tanh (other activations fall back to
  linear + activation, no gain).
"""
from __future__ import annotations

from typing import Dict, Tuple

# (rule, target) -> {size name: minimum}; a missing size has no minimum.
THRESHOLDS: Dict[Tuple[str, str], Dict[str, int]] = {
    ("attention", "cpu"): {"seq": 512},
    ("attention", "cuda"): {},
    ("linear_act", "cpu"): {"in_features": 256},
    ("linear_act", "cuda"): {},
    ("rms_norm", "cpu"): {"hidden": 256},
    ("rms_norm", "cuda"): {},
    ("gelu", "cpu"): {},
    ("gelu", "cuda"): {},
    ("transpose_matmul", "cpu"): {},
    ("transpose_matmul", "cuda"): {},
}

# Activations linear_act fuses per target (others are not rewritten).
FUSED_ACTS = {"cpu": ("relu", "gelu", "gelu_tanh", "silu"), "cuda": ("relu", "gelu_tanh")}


def threshold(rule: str, target: str) -> Dict[str, int]:
    """The minimum sizes for ``rule`` on ``target`` (KeyError if the table has
    no entry: a rule without a measured entry never fires)."""
    return THRESHOLDS[(rule, target)]


def profitable(rule: str, target: str, **sizes) -> bool:
    """Whether every given size (None = unknown) reaches ``rule``'s minimum on
    ``target``. An unknown size fails a minimum (guards fail, never lie)."""
    mins = THRESHOLDS.get((rule, target))
    if mins is None:
        return False
    for name, minimum in mins.items():
        v = sizes.get(name)
        if v is None or v < minimum:
            return False
    return True
