"""Where each rewrite rule's fused kernel is faster than what it replaces.

The rules' device-aware guards call :func:`profitable`::

    profitable("attention", "cpu", dtype=torch.float32, variant="causal", seq=512)

The table, ``{rule: {target: thresholds}}``, is data: ``profitability.json``
next to this file, regenerated from measurements by
``python bench/bench_kernels.py --write-table`` (on the target device; the
measurements behind it are in ``bench/results/kernels.md`` / ``kernels.json``).
For each rule, target, dtype and variant it holds the smallest size from which
the kernel was measured at least ``min_ratio`` (1.05) times faster than the
original subgraph at *every* measured size at or above it, over all the other
dimensions measured (batch, heads, hidden sizes); ``null`` means it never was,
so the rule must not fire.

========== ======================================= ===========================
rule       variants                                size keyword
========== ======================================= ===========================
attention  ``mask`` (additive mask), ``causal``    ``seq`` (sequence length)
gelu       ``erf``, ``tanh``                       ``numel`` (elements)
linear_act ``relu``, ``gelu``, ``gelu_tanh``,      ``tokens`` (product of x's
           ``silu``                                leading dims)
rms_norm   ``default``                             ``numel``
matmul_t   ``default``                             ``tokens``
========== ======================================= ===========================

Targets: ``"cpu"`` entries are measured on the project's 2-core CPU machine,
from ``bench/results/kernels_1thread.json`` (each entry's ``results`` names
its file). That machine was shared with other CPU-bound jobs while measuring
(load average 3-4.5 on 2 cores): with 2 threads every multi-threaded op waits
for a descheduled sibling thread, so the 2-thread run
(``bench/results/kernels.md``) mostly measures scheduler stalls -- 53 of its
242 rows have median and best-sample ratios more than 30% apart, against 18
at 1 thread, and it shows SDPA 3-5x faster at sizes where a quiet 2-thread
run measured 0.86x. The 1-thread table is the reproducible one; re-measure
on a quiet machine with ``--write-table`` to replace it.
``"cuda"`` entries are *defaults pending GPU measurement* (their ``source``
says so): fused kernels are taken as profitable at every size in float16,
bfloat16 and float32 (FlashAttention / memory-efficient SDPA, one GELU or
RMSNorm kernel instead of a chain of elementwise ones, cuBLASLt's epilogue),
except where the CUDA implementation is only the unfused fallback
(``linear_act`` with exact ``gelu`` or ``silu``) or the same cuBLAS call
(``matmul_t``), which gain nothing. Running the benchmark with
``--device cuda --write-table`` on a GPU replaces them with measurements.

Unknown sizes (``None``, e.g. symbolic dimensions), dtypes or variants absent
from the table answer ``False``: a guard that cannot decide keeps the original.
:func:`refusal` says why in one line (the threshold and the size seen); the
driver shows it as the reason a rule did not fire (``rewrite``'s summary).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Optional

__all__ = ["RULES", "TARGETS", "TABLE_PATH", "profitable", "refusal", "table", "thresholds_from_rows",
           "write_table"]

TABLE_PATH = Path(__file__).with_name("profitability.json")

#: rule -> (variants, size keyword the thresholds are in).
RULES: Dict[str, tuple] = {
    "attention": (("mask", "causal"), "seq"),
    "gelu": (("erf", "tanh"), "numel"),
    "linear_act": (("relu", "gelu", "gelu_tanh", "silu"), "tokens"),
    "rms_norm": (("default",), "numel"),
    "matmul_t": (("default",), "tokens"),
}
TARGETS = ("cpu", "cuda")

_DTYPE_ALIASES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "f64": "float64",
                  "float": "float32", "half": "float16", "double": "float64"}

_cache: Optional[Dict[str, Any]] = None


def table(reload: bool = False) -> Dict[str, Any]:
    """The parsed ``profitability.json`` (cached; ``reload=True`` re-reads it)."""
    global _cache
    if _cache is None or reload:
        _cache = json.loads(TABLE_PATH.read_text())
    return _cache


def _dtype_name(dtype) -> str:
    # torch.float32 -> "float32"; pm.f32 -> "f32" -> "float32"; "bf16" -> "bfloat16"
    name = getattr(dtype, "name", None) if not isinstance(dtype, str) else dtype
    if name is None:
        name = str(dtype)
    name = name.replace("torch.", "")
    return _DTYPE_ALIASES.get(name, name)


def profitable(rule: str, target: str, *, dtype, variant: str = "default", **sizes) -> bool:
    """Whether ``rule``'s kernel beats the original on ``target`` for ``dtype``
    (a ``torch.dtype``, a :class:`pypm_verified.core.DType` or its name),
    ``variant`` and the rule's size keyword (see the module docstring), e.g.
    ``seq=512``. Extra size keywords are ignored; a missing or ``None`` size,
    or a dtype/variant not in the table, gives ``False``. Raises
    :class:`KeyError` for an unknown rule and :class:`ValueError` for an
    unknown target. :func:`refusal` says why it is ``False``."""
    return refusal(rule, target, dtype=dtype, variant=variant, **sizes) is None


#: How a size keyword reads in a reason.
SIZE_WORDS = {"seq": "sequence length", "numel": "elements", "tokens": "tokens"}


def refusal(rule: str, target: str, *, dtype, variant: str = "default",
            **sizes) -> Optional[str]:
    """Why :func:`profitable` answers ``False`` for these arguments, as one
    line (None when it answers ``True``): the measured threshold and the size
    seen (``not profitable on cpu: attention (mask, float32) needs sequence
    length >= 512, saw 128``), a threshold that is never reached ("never
    profitable"), an unknown size, or no entry in the table."""
    if rule not in RULES:
        raise KeyError(f"profitable: unknown rule {rule!r}; known: {', '.join(RULES)}")
    if target not in TARGETS:
        raise ValueError(f"profitable: unknown target {target!r}; expected one of {TARGETS}")
    dt = _dtype_name(dtype)
    head = f"not profitable on {target}: {rule} ({variant}, {dt})"
    entry = table()["table"].get(rule, {}).get(target)
    if entry is None:
        return f"not profitable on {target}: no {target} entry for {rule} in the table"
    key = entry["size"]
    word = SIZE_WORDS.get(key, key)
    per_dtype = entry["thresholds"].get(dt)
    if per_dtype is None or variant not in per_dtype:
        return f"{head}: not in the table (no measurement)"
    threshold = per_dtype[variant]
    if threshold is None:
        return f"{head}: never profitable (slower at every measured size)"
    size = sizes.get(key)
    if size is None:
        return f"{head} needs {word} >= {threshold}, size unknown (symbolic or missing)"
    if int(size) < threshold:
        return f"{head} needs {word} >= {threshold}, saw {int(size)}"
    return None


def thresholds_from_rows(rows, min_ratio: float) -> Dict[str, Dict[str, Dict[str, Optional[int]]]]:
    """{rule: {dtype: {variant: min size or None}}} from benchmark rows: the
    smallest measured size S such that every row with size >= S has
    ratio >= min_ratio, for both the ratio of median times and (where the row
    has one) the ratio of minimum times (None if even the largest size fails)."""
    groups: Dict[tuple, list] = {}
    for r in rows:
        if r["rule"] not in RULES:
            continue
        key = RULES[r["rule"]][1]
        # both the ratio of medians and the ratio of best times must clear the margin
        ratio = min(r["ratio"], r.get("ratio_min", r["ratio"]))
        groups.setdefault((r["rule"], r["dtype"], r["variant"]), []).append(
            (r["sizes"][key], ratio))
    out: Dict[str, Dict[str, Dict[str, Optional[int]]]] = {}
    for (rule, dt, variant), pts in groups.items():
        best = None
        for s in sorted({s for s, _ in pts}, reverse=True):
            if all(ratio >= min_ratio for size, ratio in pts if size >= s):
                best = s
            else:
                break
        out.setdefault(rule, {}).setdefault(dt, {})[variant] = best
    return out


def write_table(rows, meta, path: Path = TABLE_PATH) -> Path:
    """Replace the ``meta["device"]`` entries of the rules measured in ``rows``
    with thresholds derived from them; other entries are kept."""
    data = json.loads(path.read_text())
    target = meta["device"]
    derived = thresholds_from_rows(rows, data["min_ratio"])
    for rule, per_dtype in derived.items():
        data["table"].setdefault(rule, {})[target] = {
            "size": RULES[rule][1],
            "results": meta.get("results", "bench/results/kernels.json"),
            "source": (f"measured: {meta.get('results', 'bench/results/kernels.json')} "
                       f"({meta['machine']}, "
                       f"{meta['threads']} threads, torch {meta['torch']}, {meta['when']}"
                       f"{', quick mode' if meta.get('quick') else ''})"),
            "thresholds": per_dtype,
        }
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)
    table(reload=True)
    return path
