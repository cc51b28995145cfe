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

Targets: ``"cpu"`` entries are measured on the project's 2-core CPU machine:
kernel timings from ``bench/results/kernels_1thread.json`` (``results``, or
``kernel_results`` once the entry is calibrated on whole models, below). That machine was shared with other CPU-bound jobs while measuring
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

Model-level calibration: ``python bench/calibrate_cpu.py
--write-table`` replaces the ``"cpu"`` thresholds of the variants it measures
(those the benchmark models contain) by what pays *in whole models*: each
model x configuration is rewritten with every rule firing, and again with one
(rule, variant) declined, timed paired and interleaved at 1 and 2 threads;
the variant pays at that size unless the model without it was more than 2%
faster by both the paired median ratio and the ratio of the fastest samples
(each a geometric mean over the thread counts; :func:`model_thresholds`). The
entry's ``calibrated`` field names those variants and ``provenance`` records date, threads, load, models and configurations;
its other variants keep the kernel-level thresholds (``kernel_results``).

How a threshold generalizes to sizes not measured: it is the smallest
measured size from which the rule paid at *every* measured size at or above
it (the fused kernels' advantage grows with the size in every measurement
here), so a size between two measured ones is treated like the smaller
measured one, a size above the largest measured one fires, and a size below
the threshold (in particular below the smallest measured size) declines.
The guards stay functions of the match's sizes and dtypes only.

Unknown sizes (``None``, e.g. symbolic dimensions), dtypes or variants absent
from the table answer ``False``: a guard that cannot decide keeps the original.
:func:`refusal` says why in one line (the threshold and the size seen); the
driver shows it as the reason a rule did not fire (``rewrite``'s summary).
"""
from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

__all__ = ["RULES", "TARGETS", "TABLE_PATH", "MODEL_MIN_RATIO", "profitable", "refusal", "table",
           "load_table", "validate", "use_table", "thresholds_from_rows", "model_thresholds",
           "write_table",
           "write_calibration"]

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

#: A (rule, variant) is declined at a size only when the model without it was
#: faster by more than this noise band by both estimates (:func:`model_thresholds`):
#: the calibration's paired ratios have interquartile ranges of +-5-10% on the
#: shared machine, and a focused 12-repetition re-run of BERT-12 b1 s128 measured
#: the fused linear+gelu 1.05x where a 1.0 threshold had declined it.
MODEL_MIN_RATIO = 0.98

_cache: Optional[Dict[str, Any]] = None
_override: List[Dict[str, Any]] = []  # use_table's stack
_observers: List[list] = []  # use_table(seen=...): every refusal() question


def validate(data: Any, where: str = "profitability table") -> Dict[str, Any]:
    """``data`` if it is a well-formed table, else :class:`ValueError` naming
    the first problem: ``{"min_ratio": float, "table": {rule: {target:
    {"size": keyword, "thresholds": {dtype: {variant: int >= 1 or null}}}}}}``
    with the rules, targets, size keywords and variants of :data:`RULES` /
    :data:`TARGETS`."""
    def bad(msg):
        raise ValueError(f"{where}: {msg}")
    if not isinstance(data, dict) or not isinstance(data.get("table"), dict):
        bad('expected an object with a "table" object')
    mr = data.get("min_ratio")
    if not isinstance(mr, (int, float)) or isinstance(mr, bool) or not mr > 0:
        bad(f'"min_ratio" must be a positive number, got {mr!r}')
    for rule, per_target in data["table"].items():
        if rule not in RULES:
            bad(f"unknown rule {rule!r}; known: {', '.join(RULES)}")
        variants, key = RULES[rule]
        if not isinstance(per_target, dict):
            bad(f"{rule}: expected an object of targets")
        for target, entry in per_target.items():
            if target not in TARGETS:
                bad(f"{rule}: unknown target {target!r}; expected one of {TARGETS}")
            at = f"{rule}/{target}"
            if not isinstance(entry, dict) or entry.get("size") != key:
                bad(f"{at}: \"size\" must be {key!r}")
            th = entry.get("thresholds")
            if not isinstance(th, dict):
                bad(f'{at}: "thresholds" must be an object of dtypes')
            for dt, per_var in th.items():
                if not isinstance(per_var, dict):
                    bad(f"{at}/{dt}: expected an object of variants")
                for v, t in per_var.items():
                    if v not in variants:
                        bad(f"{at}/{dt}: unknown variant {v!r}; expected some of {variants}")
                    if t is not None and (isinstance(t, bool) or not isinstance(t, int)
                                          or t < 1):
                        bad(f"{at}/{dt}/{v}: threshold must be an integer >= 1 or null, "
                            f"got {t!r}")
    return data


def load_table(path) -> Dict[str, Any]:
    """The table in the JSON file ``path``, validated (:func:`validate`);
    :class:`ValueError` naming the file and the problem otherwise."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except OSError as e:
        raise ValueError(f"profitability table {path}: cannot read it ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"profitability table {path}: not JSON ({e})") from None
    return validate(data, f"profitability table {path}")


def table(reload: bool = False) -> Dict[str, Any]:
    """The table the guards answer from: ``profitability.json`` (loaded,
    validated and cached; ``reload=True`` re-reads it), or the one
    :func:`use_table` put in place."""
    global _cache
    if _override:
        return _override[-1]
    if _cache is None or reload:
        _cache = load_table(TABLE_PATH)
    return _cache


@contextlib.contextmanager
def use_table(data: Dict[str, Any], seen: Optional[list] = None) -> Iterator[Dict[str, Any]]:
    """Within the ``with`` block, answer from ``data`` (validated) instead of
    ``profitability.json`` (the calibration and tests use it to make chosen
    rules fire or decline). ``seen``: a list to which every question asked of
    :func:`refusal` is appended as ``(rule, target, dtype name, variant,
    sizes)``, i.e. the sizes each guard read."""
    _override.append(validate(data))
    if seen is not None:
        _observers.append(seen)
    try:
        yield data
    finally:
        _override.pop()
        if seen is not None:
            _observers.remove(seen)


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
    for obs in _observers:
        obs.append((rule, target, dt, variant, dict(sizes)))
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


def thresholds_from_rows(rows, min_ratio: float,
                         combine=min) -> Dict[str, Dict[str, Dict[str, Optional[int]]]]:
    """{rule: {dtype: {variant: min size or None}}} from benchmark rows: the
    smallest measured size S such that every row with size >= S has
    ``combine(ratio, ratio_min) >= min_ratio`` (None if even the largest size
    fails): with ``min`` (kernel timings) both the ratio of median times and
    (where the row has one) the ratio of minimum times must clear the margin;
    with ``max`` (:func:`model_thresholds`) either may."""
    groups: Dict[tuple, list] = {}
    for r in rows:
        if r["rule"] not in RULES:
            continue
        key = RULES[r["rule"]][1]
        ratio = combine(r["ratio"], r.get("ratio_min", r["ratio"]))
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


def _write(data, path: Path) -> None:
    """Write ``data`` to ``path`` whole (a temporary file renamed) and reload."""
    validate(data, f"profitability table {path}")
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)
    table(reload=True)


def model_thresholds(rows) -> Dict[str, Dict[str, Dict[str, Optional[int]]]]:
    """Thresholds from model-level rows (``bench/calibrate_cpu.py``): a
    variant pays at a size unless the model without it was faster, beyond
    :data:`MODEL_MIN_RATIO`'s noise band, by both estimates, the paired median
    ratio (``ratio``) and the ratio of the fastest samples (``ratio_min``),
    each a geometric mean over the thread counts. Under other jobs' load a small effect is noise;
    only a slowdown both estimates agree on declines (keeping the fused kernel,
    as every rule does where it pays, when they disagree)."""
    return thresholds_from_rows(rows, MODEL_MIN_RATIO, combine=max)


def write_table(rows, meta, path: Path = TABLE_PATH) -> Path:
    """Replace the ``meta["device"]`` entries of the rules measured in ``rows``
    (kernel timings, ``bench/bench_kernels.py``) with thresholds derived from
    them; other entries are kept, and so are the variants an entry says were
    calibrated on whole models (its ``calibrated`` field: see
    :func:`write_calibration`), whose kernel file is then ``kernel_results``."""
    data = json.loads(path.read_text())
    target = meta["device"]
    derived = thresholds_from_rows(rows, data["min_ratio"])
    results = meta.get("results", "bench/results/kernels.json")
    for rule, per_dtype in derived.items():
        old = data["table"].get(rule, {}).get(target) or {}
        new = {
            "size": RULES[rule][1],
            "results": results,
            "source": (f"measured: {results} ({meta['machine']}, "
                       f"{meta['threads']} threads, torch {meta['torch']}, {meta['when']}"
                       f"{', quick mode' if meta.get('quick') else ''})"),
            "thresholds": per_dtype,
        }
        if old.get("calibrated"):  # model-level values win; keep them and their provenance
            for dt, variants in old["calibrated"].items():
                for v in variants:
                    per_dtype.setdefault(dt, {})[v] = old["thresholds"][dt][v]
            new.update({k: old[k] for k in ("calibrated", "provenance", "results", "source")},
                       kernel_results=results)
        data["table"].setdefault(rule, {})[target] = new
    _write(data, path)
    return path


def write_calibration(rows, meta, path: Path = TABLE_PATH) -> Path:
    """Set the ``"cpu"`` thresholds of every (rule, dtype, variant) measured in
    ``rows`` (model-level rows of ``bench/calibrate_cpu.py``: ``rule``,
    ``dtype``, ``variant``, ``sizes`` and ``ratio``, the model's time without
    the variant over its time with it) to the smallest measured size from
    which every row at or above it pays (:func:`model_thresholds`); the
    entry records them in ``calibrated`` and ``meta`` (date, threads, load, models, configurations) in
    ``provenance``; its other variants keep their kernel-level thresholds
    (``kernel_results`` names where those come from)."""
    data = json.loads(path.read_text())
    derived = model_thresholds(rows)
    results = meta.get("results", "bench/results/calibrate_cpu.json")
    for rule, per_dtype in derived.items():
        entry = data["table"].setdefault(rule, {}).setdefault(
            "cpu", {"size": RULES[rule][1], "thresholds": {}})
        if not entry.get("calibrated") and "results" in entry:
            entry["kernel_results"] = entry["results"]
        cal = entry.setdefault("calibrated", {})
        for dt, per_var in per_dtype.items():
            entry["thresholds"].setdefault(dt, {}).update(per_var)
            cal[dt] = sorted(set(cal.get(dt, [])) | set(per_var))
        entry["results"] = results
        entry["provenance"] = dict(meta)
        entry["source"] = (f"calibrated on whole models: {results} ({meta.get('when')}, "
                           f"threads {meta.get('threads')}, load {meta.get('loadavg')}); "
                           "variants not in 'calibrated' from "
                           f"{entry.get('kernel_results', 'kernel timings')}")
    _write(data, path)
    return path
