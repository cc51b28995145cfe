"""Model speed: eager inference latency of the original vs the rewritten models.

For each model of examples/models.py (BERT, RoBERTa, DistilBERT, GPT-2, LLaMA,
Qwen2; random weights, offline) at the ``base`` width (hidden 768, 12 heads,
FFN 3072; LLaMA/Qwen2 4 KV heads) but with few layers (``--layers``, default 2:
per-layer speedups are what matter, and a run must fit the time budget), and
each configuration batch x sequence (default 1,8 x 128,512), the model is
exported with the project's loader (``pypm_verified.torch.loader.load_model``:
``torch.export.export`` then ``run_decompositions({})``) and rewritten twice
with ``pypm_verified.torch.pipeline.rewrite_program(prog, target="cpu",
engine="verified", check=True)``:

``guarded``  the rule library as shipped: the device-aware profitability guards
             read the measured CPU table
             (python/pypm_verified/torch/profitability.json)
``forced``   the same, with the driver's ``check_profitability=False``: every
             profitability guard answers True (as in bench/bench_matchers.py;
             every other guard -- axes, constants, dtypes, device -- stays), so
             every rule that matches fires

(``target="cuda"`` would not do for ``forced``: the CUDA table declines
``linear_act`` with exact GELU/SiLU and ``matmul_t``.) Each program's
``ep.module()`` then runs eagerly under ``torch.inference_mode`` on the example
inputs: warm-up runs, then interleaved timed repetitions (the variants in
rotated order within each repetition, so machine noise hits all alike).
Reported: median and IQR per variant, speedup = median(original) /
median(rewritten) (and the IQR of the per-repetition paired ratios), rewrite
counts per rule from the driver's report, the rewrite check's numerics and the
max abs difference of the timed outputs against the original's. A rewritten
program whose graph is identical to another variant's (e.g. ``guarded`` fired
nothing, or the same rules as ``forced``) is not timed twice: it shares those
timings, and the tables say so.

Baseline users would pick: each model is also built with HF's own
``attn_implementation="sdpa"`` (``set_attn_implementation("sdpa")``), exported
the same way and timed in the same interleaved repetitions, as exported
(``sdpa``) and rewritten by the shipped rules (``sdpa_guarded``): what the
rewrite still brings on a model that already uses SDPA (``--no-sdpa`` leaves
it out).

A model that fails to export, rewrite or run is recorded with its error and
the benchmark goes on.

    python bench/bench_models.py [--quick] [--models bert,gpt2,...] [--layers 2]
                                 [--batches 1,8] [--seqs 128,512] [--threads 2 | 1,2]
                                 [--budget S] [--results-name NAME]

``--threads 1,2`` runs the whole benchmark once per thread count and reports
the runs in one file (``make bench`` does so for BERT-base at 12 layers:
``models_bert12.*``, linked from models.md).

On a GPU machine: ``--device cuda --dtype float16`` (or bfloat16) times the
same on the GPU with the CUDA profitability table (``target="cuda"``), and
``--compile`` wraps every program (original and rewritten) in
``torch.compile`` before timing, so the speedup is original+compile vs
rewritten+compile.

Writes bench/results/models.json, models.md and models.png (``--quick``:
models_quick.*; other devices, dtypes and ``--compile`` add a suffix, e.g.
models_cuda_float16_compile.*; ``--results-name`` overrides). ``--quick`` uses the ``bench``
width (hidden 256), 1 layer, batch 1,2 and fewer repetitions (~1-2 minutes);
the full run is held to ~7-8 minutes on the project's 2-core CPU machine
(``--time-limit``: repetitions are cut to fit; more on a loaded machine).
"""
from __future__ import annotations

import argparse
import gc
import math
import os
import platform
import statistics
import sys
import time
import traceback
import warnings

import common
from common import RESULTS
MIN_REPEATS_FLOOR = 3  # repetitions per item even when --time-limit is short
MODELS = ("bert", "roberta", "distilbert", "gpt2", "llama", "qwen2")
VARIANTS = ("guarded", "forced")  # besides "original"
# baselines users would pick: HF's attn_implementation="sdpa" model as exported, and
# that model rewritten by the shipped rules (guarded); timed with the others
BASELINES = ("sdpa", "sdpa_guarded")
LABELS = {"guarded": "guarded (target=cpu)", "forced": "forced (every rule)"}
DEVICE = "cpu"  # --device: where models run and what the rewrite targets
DTYPE = "float32"  # --dtype


def set_device(device: str, dtype: str) -> None:
    global DEVICE, DTYPE
    DEVICE, DTYPE = device, dtype
    LABELS["guarded"] = f"guarded (target={device})"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------
# Rewriting


def rule_names():
    from pypm_verified.library import default_patterns
    return [getattr(r, "name", str(r)) for p in default_patterns() for r in p.rules]


def _err(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:500]


def export(model: str, size: str, attn: str = "eager"):
    """``(Program, export seconds)``: the model built by examples/models.py and
    exported with the project's loader, inputs passed by keyword. ``attn="sdpa"``:
    HF's own SDPA attention (``set_attn_implementation("sdpa")``) instead of the
    eager attention examples/models.py builds."""
    from examples import models
    from pypm_verified.torch.loader import load_model
    t0 = time.perf_counter()
    import torch
    m, inputs = models.build(model, size)
    if attn != "eager":
        m.set_attn_implementation(attn)
    m = m.to(device=DEVICE, dtype=getattr(torch, DTYPE))
    kwargs = {k: v.to(DEVICE) for k, v in models.input_kwargs(inputs).items()}
    prog = load_model(m, (), kwargs)
    return prog, time.perf_counter() - t0


def rewrite(prog, variant: str, n_random: int):
    """``(Result, seconds)``: ``prog`` rewritten for DEVICE by the rule
    library, numerics checked; ``forced`` with the profitability guards off."""
    from pypm_verified.torch.pipeline import rewrite_program
    t0 = time.perf_counter()
    res = rewrite_program(prog, target=DEVICE, engine="verified", check=True,
                          n_random=n_random, check_profitability=variant != "forced")
    return res, time.perf_counter() - t0


# --------------------------------------------------------------------------------------
# Timing


def _tensors(out):
    import torch
    import torch.utils._pytree as pytree
    return [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]


def max_abs_diff(ref, got) -> float:
    a, b = _tensors(ref), _tensors(got)
    if len(a) != len(b):
        return float("nan")
    m = 0.0
    for x, y in zip(a, b):
        if x.shape != y.shape:
            return float("nan")
        if x.is_floating_point():
            m = max(m, float((x.double() - y.double()).abs().max())) if x.numel() else m
        elif not bool((x == y).all()):
            return float("inf")
    return m


def _call(mod, kwargs):
    import torch
    sync = torch.cuda.synchronize if DEVICE == "cuda" else (lambda: None)
    with torch.inference_mode():
        sync()
        t0 = time.perf_counter()
        out = mod(**kwargs)
        sync()
        return time.perf_counter() - t0, out


def _quartiles(xs):
    if len(xs) < 2:
        return xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[2]


def time_variants(mods, kwargs, warmup, budget, min_rep, max_rep, share=None):
    """``mods``: {name: callable}. Warm-up (the first run's outputs are kept),
    then repetitions with the names in rotated order; the number of
    repetitions fits ``budget`` seconds, within [min_rep, max_rep]. ``share``
    (seconds left for this item under --time-limit, warm-up included) caps the
    budget, and lowers the minimum to MIN_REPEATS_FLOOR when even min_rep
    rounds would not fit."""
    names = list(mods)
    outs, warm = {}, {n: [] for n in names}
    t0 = time.perf_counter()
    for i in range(warmup):
        for n in names:
            dt, out = _call(mods[n], kwargs)
            warm[n].append(dt)
            if i == 0:
                outs[n] = out
            del out
    per_round = max(sum(min(v) for v in warm.values()), 1e-9)
    if share is not None:
        left = share - (time.perf_counter() - t0)
        budget = min(budget, left)
        if left < min_rep * per_round:
            min_rep = min(min_rep, MIN_REPEATS_FLOOR)
    reps = max(min_rep, min(max_rep, int(budget / per_round)))
    times = {n: [] for n in names}
    gc.collect()  # once: a full collection costs ~0.2 s here; none during the loop
    gc.disable()
    try:
        for r in range(reps):
            order = names[r % len(names):] + names[:r % len(names)]
            for n in order:
                dt, _ = _call(mods[n], kwargs)
                times[n].append(dt)
    finally:
        gc.enable()
    return times, outs, reps


def _compiled(module):
    """``torch.compile`` of an exported program's module (--compile)."""
    import torch
    return torch.compile(module)


def summarize(ts):
    q1, q3 = _quartiles(ts)
    return {"median_ms": statistics.median(ts) * 1e3, "q1_ms": q1 * 1e3, "q3_ms": q3 * 1e3,
            "min_ms": min(ts) * 1e3, "runs_ms": [round(t * 1e3, 4) for t in ts]}


# --------------------------------------------------------------------------------------


def bench_one(model, batch, seq, args, size_key, n_layers, share=None):
    """One model x configuration; never raises (errors are recorded).
    ``share``: seconds this item may take under --time-limit (None: no limit)."""
    t_item = time.perf_counter()
    row = {"model": model, "batch": batch, "seq": seq, "layers": n_layers, "error": None,
           "variants": {}}
    tag = f"{model} b{batch} s{seq}"
    try:
        prog, export_s = export(model, size_key)
    except Exception as e:
        row["error"] = f"export: {_err(e)}"
        log(f"{tag}: ! {row['error']}")
        return row
    row["export_s"] = round(export_s, 2)
    from pypm_verified.torch.driver import count_calls
    row["nodes"] = count_calls(prog.ep.graph_module.graph)
    wrap = _compiled if args.compile else (lambda m: m)
    mods, code = {"original": wrap(prog.ep.module())}, {"original": prog.ep.graph_module.code}
    row["variants"] = {v: {"error": None} for v in VARIANTS}
    for v in ("forced", "guarded"):  # forced first: an identical guarded graph says "=forced"
        e = row["variants"][v]
        try:
            res, rw_s = rewrite(prog, v, args.n_random)
        except Exception as ex:
            e["error"] = f"rewrite: {_err(ex)}"
            log(f"{tag}: ! {v} {e['error']}")
            continue
        rep = res.report
        e.update(rewrite_s=round(rw_s, 3), firings=dict(rep.firings), rewrites=rep.total,
                 report={k: rep.as_dict()[k] for k in ("iterations", "cap_hit", "nodes_before",
                                                        "nodes_after", "merged", "match_s",
                                                        "total_s", "attempts")},
                 numerics=res.numerics.as_dict() if res.numerics is not None else None)
        c = res.ep.graph_module.code
        same = next((k for k, kc in code.items() if kc == c), None)
        if same is not None:
            e["same_graph_as"] = same  # timed once, under that name
        else:
            code[v] = c
            try:
                mods[v] = wrap(res.ep.module())
            except Exception as ex:
                e["error"] = f"module(): {_err(ex)}"
                log(f"{tag}: ! {v} {e['error']}")
    row["baselines"] = {b: {"error": None} for b in BASELINES}
    if not args.no_sdpa:
        add_sdpa_baseline(model, size_key, row, mods, code, wrap, args, tag)
    kwargs = prog.kwargs
    try:
        left = None if share is None else share - (time.perf_counter() - t_item)
        times, outs, reps = time_variants(mods, kwargs, args.warmup, args.budget,
                                          args.min_repeats, args.max_repeats, left)
    except Exception as ex:
        row["error"] = f"run: {_err(ex)}"
        log(f"{tag}: ! {row['error']}")
        log(traceback.format_exc(limit=3))
        return row
    row["repeats"] = reps
    row["original"] = summarize(times["original"])
    orig = times["original"]
    for v in VARIANTS:
        e = row["variants"][v]
        if e["error"]:
            continue
        src = e.get("same_graph_as", v)
        ts = times[src]
        e.update(summarize(ts))
        e["speedup"] = statistics.median(orig) / statistics.median(ts)
        e["speedup_of_mins"] = min(orig) / min(ts)
        if src == "original":
            e["speedup_q1"] = e["speedup_q3"] = 1.0
            e["max_abs_diff"] = 0.0
        else:
            q1, q3 = _quartiles([a / b for a, b in zip(orig, ts)])
            e["speedup_q1"], e["speedup_q3"] = q1, q3
            e["max_abs_diff"] = max_abs_diff(outs["original"], outs[src])
        if e["numerics"] is not None and not e["numerics"]["ok"]:
            log(f"{tag}: ! {v} numerics check failed: {e['numerics']['failures'][:2]}")
    for b in BASELINES:
        e = row["baselines"][b]
        src = e.get("same_graph_as", b)
        if e["error"] or src not in times:
            continue
        e.update(summarize(times[src]))
        e["speedup"] = statistics.median(orig) / statistics.median(times[src])
        e["max_abs_diff"] = max_abs_diff(outs["original"], outs[src])
    sg = row["baselines"]["sdpa_guarded"]
    sg_src = sg.get("same_graph_as", "sdpa_guarded")
    if "sdpa" in times and sg_src in times and not sg["error"]:
        q1, q3 = _quartiles([a / b for a, b in zip(times["sdpa"], times[sg_src])])
        sg.update(vs_sdpa=statistics.median(times["sdpa"]) / statistics.median(times[sg_src]),
                  vs_sdpa_q1=q1, vs_sdpa_q3=q3)
    if "sdpa" in times:
        src = row["variants"]["guarded"].get("same_graph_as", "guarded")
        if src in times:
            row["baselines"]["sdpa"]["guarded_vs_sdpa"] = \
                statistics.median(times["sdpa"]) / statistics.median(times[src])
    g, f = row["variants"]["guarded"], row["variants"]["forced"]

    def cell(e):
        if e["error"]:
            return "ERROR"
        fire = ",".join(f"{k}{n}" for k, n in sorted(e["firings"].items())) or "-"
        return f"x{e['speedup']:.3f} [{fire}]"
    log(f"{tag}: orig {row['original']['median_ms']:.1f} ms  guarded {cell(g)}  "
        f"forced {cell(f)}  ({reps} reps, {row['nodes']} nodes)")
    del mods, prog, outs
    gc.collect()
    return row


def add_sdpa_baseline(model, size_key, row, mods, code, wrap, args, tag):
    """HF's ``attn_implementation="sdpa"`` model (exported like the others) and
    that model rewritten with the shipped rules (guarded): added to ``mods``
    as "sdpa" and "sdpa_guarded", recorded in ``row["baselines"]``."""
    bl = row["baselines"]
    try:
        sprog, _ = export(model, size_key, attn="sdpa")
    except Exception as ex:
        for b in BASELINES:
            bl[b]["error"] = f"export: {_err(ex)}"
        log(f"{tag}: ! sdpa baseline {bl['sdpa']['error']}")
        return
    mods["sdpa"] = wrap(sprog.ep.module())
    try:
        res, rw_s = rewrite(sprog, "guarded", args.n_random)
    except Exception as ex:
        bl["sdpa_guarded"]["error"] = f"rewrite: {_err(ex)}"
        log(f"{tag}: ! sdpa_guarded {bl['sdpa_guarded']['error']}")
        return
    rep = res.report
    bl["sdpa_guarded"].update(
        rewrite_s=round(rw_s, 3), firings=dict(rep.firings), rewrites=rep.total,
        report={"merged": rep.merged},
        numerics=res.numerics.as_dict() if res.numerics is not None else None)
    if not res.changed:
        bl["sdpa_guarded"]["same_graph_as"] = "sdpa"  # timed once, as "sdpa"
        return
    mods["sdpa_guarded"] = wrap(res.ep.module())


# --------------------------------------------------------------------------------------
# Reporting


def geomean(xs):
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def speedups(res, v):
    return [r["variants"][v]["speedup"] for r in res["rows"]
            if not r["error"] and not r["variants"][v]["error"]]


def summary(res, v):
    s = speedups(res, v)
    if not s:
        return None
    of_mins = [r["variants"][v]["speedup_of_mins"] for r in res["rows"]
               if not r["error"] and not r["variants"][v]["error"]]
    return {"n": len(s), "geomean": geomean(s), "min": min(s), "max": max(s),
            "median": statistics.median(s), "geomean_of_mins": geomean(of_mins),
            "slowdowns_5pct": sum(1 for x in s if x < 0.95),
            "speedups_5pct": sum(1 for x in s if x > 1.05)}


def _fire(e):
    out = ", ".join(f"{k}×{n}" for k, n in sorted(e["firings"].items())) or "none"
    merged = (e.get("report") or {}).get("merged")
    return out + (f" (+{merged} merged)" if merged else "")


#: where the BERT-base 12-layer table of `make bench` is (linked from models.md)
BERT12 = ("BERT-base at 12 layers (batch 1/8 x sequence 128/512, 1 and 2 threads, guarded vs "
          "forced vs eager; the goal of 1.3x over eager): [models_bert12.md](models_bert12.md).")


def write_markdown(res, path):
    extra = ["", BERT12, ""] if path.name == "models.md" else []
    common.write_md(path, markdown_lines(res) + extra)


def write_markdown_threads(runs, path, title):
    """One Markdown file for runs at several thread counts: ``title``, then
    each run's report (:func:`markdown_lines`) with its headings one level down."""
    L = [f"# {title}", ""]
    for res in runs:
        for line in markdown_lines(res):
            L.append("#" + line if line.startswith("#") else line)
    common.write_md(path, L)


def markdown_lines(res):
    env = res["env"]
    how = "torch.compile" if res.get("compile") else "eager"
    dev = res.get("device", "cpu")
    L = [f"# Model speed: original vs rewritten models ({how}, {dev.upper()}, "
         f"{res.get('dtype', 'float32')}, {env['threads']} thread(s))", "",
         f"Generated by `{('python bench/bench_models.py ' + ' '.join(res['argv'])).strip()}` "
         f"on {env['platform']} ({env['cpus']} CPUs, torch {env['torch']} with "
         f"{env['threads']} intra-op threads, transformers {env['transformers']}), "
         f"{env['when']}; 1-minute load average {env['loadavg_start']:.1f} at the start, "
         f"{env['loadavg_end']:.1f} at the end; {res['wall_s']:.0f} s.", "",
         f"Models: examples/models.py, `{res['size']}` width "
         f"(hidden {res['dims']['hidden']}, {res['dims']['heads']} heads, FFN "
         f"{res['dims']['inter']}; LLaMA/Qwen2 {res['dims']['kv_heads']} KV heads) with "
         f"**{res['layers']} layer(s)**, random weights, exported by "
         "`pypm_verified.torch.loader.load_model`; first sequence padded by a quarter "
         "(the attention mask matters). Each rewritten by `rewrite_program(prog, "
         f"target=\"{dev}\", engine=\"verified\", check=True)`: **guarded** = the shipped "
         f"rules ({dev.upper()} profitability table), **forced** = profitability guards forced "
         "True (the driver's `check_profitability=False`: every rule that matches fires).", "",
         f"Latency: `ep.module()` run {'under torch.compile' if res.get('compile') else 'eagerly'}"
         f" under `torch.inference_mode`, {res['warmup']} "
         "warm-up run(s) per program, then repetitions with the programs interleaved "
         f"(rotated order); {res['min_repeats']}-{res['max_repeats']} repetitions, as many as "
         f"fit {res['budget']:.0f} s per model × configuration"
         + (f" and the run's {res['time_limit']:.0f} s limit (down to {MIN_REPEATS_FLOOR} "
            "when behind; the `reps` column)" if res.get("time_limit") else "")
         + ". Speedup = median(original) / "
         "median(rewritten), > 1 is faster; [q1–q3] is the interquartile range of the "
         "per-repetition paired ratios; (min …) is the ratio of the fastest samples, "
         "less sensitive to other jobs' load. A rewritten graph identical to another program's "
         "is timed once and shares its timings (marked =orig / =forced); (+N merged) counts "
         "duplicate pure nodes the driver merged (hash-consing), so a program with no "
         "rewrite can still differ from the original. max |Δ| is the "
         "largest abs difference of the outputs on the example inputs (the rewrite's "
         "numerics check agrees; ✗ marks a failed check).", ""]
    if env["loadavg_start"] > env["cpus"] * 0.5 or env["loadavg_end"] > env["cpus"] * 0.5:
        L += ["> Caveat: the machine was shared with other jobs during the run (see the load "
              "averages above); ratios within about ±10% of 1 are noise.", ""]
    L += ["## Summary", ""]
    L += ["| variant | model × config | geomean speedup | median | min | max | "
          "< 0.95 | > 1.05 | geomean ratio of mins |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for v in VARIANTS:
        s = res["summary"][v]
        if s is None:
            L.append(f"| {LABELS[v]} | 0 | — | — | — | — | — | — | — |")
            continue
        L.append(f"| {LABELS[v]} | {s['n']} | **{s['geomean']:.3f}** | {s['median']:.3f} | "
                 f"{s['min']:.3f} | {s['max']:.3f} | {s['slowdowns_5pct']} | "
                 f"{s['speedups_5pct']} | {s['geomean_of_mins']:.3f} |")
    L.append("")
    for v in VARIANTS:
        s = res["summary"][v]
        if s:
            L.append(f"- **{LABELS[v]}**: geometric-mean speedup {s['geomean']:.3f} over "
                     f"{s['n']} model × configuration pairs (min {s['min']:.3f}, "
                     f"max {s['max']:.3f}).")
    L.append("")
    # the speedup matrix
    cfgs = res["configs"]
    L += ["### Speedup per model × configuration (guarded / forced)", "",
          "| model | " + " | ".join(f"b{b} s{s}" for b, s in cfgs) + " |",
          "|---|" + "---:|" * len(cfgs)]
    for model in res["models"]:
        cells = []
        for b, s in cfgs:
            r = _row(res, model, b, s)
            if r is None or r["error"]:
                cells.append("error")
                continue
            cells.append(" / ".join("err" if r["variants"][v]["error"] else
                                    f"{r['variants'][v]['speedup']:.2f}" for v in VARIANTS))
        L.append(f"| {model} | " + " | ".join(cells) + " |")
    L.append("")
    # rules
    L += ["### Rewrites per rule (summed over configurations)", "",
          "| rule | " + " | ".join(LABELS[v] for v in VARIANTS) + " |",
          "|---|" + "---:|" * len(VARIANTS)]
    for rule in res["rules"]:
        L.append(f"| {rule} | " + " | ".join(str(res["rule_totals"][v].get(rule, 0))
                                              for v in VARIANTS) + " |")
    never = [r for r in res["rules"] if not res["rule_totals"]["forced"].get(r)]
    if never:
        L += ["", f"Never fired on these models, even forced: {', '.join(never)} (no match: "
              "the models' graphs do not contain the pattern)."]
    L.append("")
    # per model
    L += ["## Per model", ""]
    for model in res["models"]:
        L += [f"### {model}", "",
              "| batch | seq | original ms [IQR] | guarded ms | guarded speedup [q1–q3] | "
              "guarded rewrites | forced ms | forced speedup [q1–q3] | forced rewrites | "
              "max \\|Δ\\| (g / f) | reps |",
              "|---:|---:|---:|---:|---:|---|---:|---:|---|---:|---:|"]
        for b, s in cfgs:
            r = _row(res, model, b, s)
            if r is None:
                continue
            if r["error"]:
                L.append(f"| {b} | {s} | error: {_md(r['error'])} |" + " |" * 8)
                continue
            o = r["original"]
            cells = [str(b), str(s), f"{o['median_ms']:.1f} [{o['q1_ms']:.1f}–{o['q3_ms']:.1f}]"]
            diffs = []
            for v in VARIANTS:
                e = r["variants"][v]
                if e["error"]:
                    cells += [f"error: {_md(e['error'])}", "—", "—"]
                    diffs.append("—")
                    continue
                same = {"original": " (=orig)", "forced": " (=forced)", "guarded": " (=guarded)"}.get(
                    e.get("same_graph_as"), "")
                cells += [f"{e['median_ms']:.1f}{same}",
                          f"**{e['speedup']:.3f}** [{e['speedup_q1']:.2f}–{e['speedup_q3']:.2f}] "
                          f"(min {e['speedup_of_mins']:.2f})",
                          _fire(e)]
                bad = "" if (e["numerics"] is None or e["numerics"]["ok"]) else " ✗"
                diffs.append(f"{e['max_abs_diff']:.1e}{bad}")
            cells += [" / ".join(diffs), str(r["repeats"])]
            L.append("| " + " | ".join(cells) + " |")
        L.append("")
    L += sdpa_section(res)
    errs = [(r, v) for r in res["rows"] for v in (None,) + VARIANTS
            if (r["error"] if v is None else (not r["error"] and r["variants"][v]["error"]))]
    if errs:
        L += ["## Errors", ""]
        for r, v in errs:
            msg = r["error"] if v is None else r["variants"][v]["error"]
            L.append(f"- {r['model']} b{r['batch']} s{r['seq']}"
                     f"{'' if v is None else ' ' + v}: `{msg}`")
        L.append("")
    return L


def sdpa_section(res):
    """The HF sdpa baseline: what the rewrite brings on a model already using SDPA."""
    rows = [r for r in res["rows"] if not r["error"] and r.get("baselines")
            and not r["baselines"]["sdpa"]["error"] and "median_ms" in r["baselines"]["sdpa"]]
    if not rows:
        return []
    L = ["## Baseline: HF `attn_implementation=\"sdpa\"`", "",
         "The same models built with HF's own SDPA attention "
         "(`model.set_attn_implementation(\"sdpa\")`), exported the same way, as exported "
         "(**HF sdpa**) and rewritten by the shipped rules (**HF sdpa + rewrite**, "
         f"`rewrite_program(target=\"{res.get('device', 'cpu')}\")`, guarded), timed "
         "interleaved with the programs above. Speedups against the eager-attention "
         "original; **sdpa / sdpa+rewrite** is what the rewrite still brings on a model "
         "that already uses SDPA (paired per-repetition ratios' IQR in brackets); "
         "**sdpa / guarded** compares HF's SDPA model with the rewritten eager model.", "",
         "| model | batch | seq | original ms | HF sdpa ms | HF sdpa speedup | "
         "sdpa + rewrite ms | **sdpa / sdpa+rewrite** [q1–q3] | rewrites on the sdpa model | "
         "sdpa / guarded | max \\|Δ\\| (sdpa / +rewrite) |",
         "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|"]
    ratios = []
    for r in rows:
        s, g = r["baselines"]["sdpa"], r["baselines"]["sdpa_guarded"]
        if g["error"] or "median_ms" not in g:
            gcells = [f"error: {_md(g['error'])}", "—", "—"]
            gd = "—"
        else:
            same = " (=sdpa)" if g.get("same_graph_as") else ""
            gcells = [f"{g['median_ms']:.1f}{same}",
                      f"**{g['vs_sdpa']:.3f}** [{g['vs_sdpa_q1']:.2f}–{g['vs_sdpa_q3']:.2f}]",
                      _fire(g)]
            gd = f"{g['max_abs_diff']:.1e}"
            ratios.append(g["vs_sdpa"])
        gv = s.get("guarded_vs_sdpa")
        L.append(f"| {r['model']} | {r['batch']} | {r['seq']} | "
                 f"{r['original']['median_ms']:.1f} | {s['median_ms']:.1f} | "
                 f"{s['speedup']:.3f} | " + " | ".join(gcells)
                 + f" | {'—' if gv is None else f'{gv:.3f}'} | {s['max_abs_diff']:.1e} / {gd} |")
    if ratios:
        L += ["", f"Rewrite on the HF sdpa model: geomean {geomean(ratios):.3f} "
                  f"(min {min(ratios):.3f}, max {max(ratios):.3f}) over {len(ratios)} "
                  "model × configuration pairs."]
    return L + [""]


def _md(s):
    return str(s).replace("|", "\\|").replace("\n", " ")[:200]


def _row(res, model, b, s):
    return next((r for r in res["rows"] if r["model"] == model and r["batch"] == b
                 and r["seq"] == s), None)


def plot(res, path):
    """Speedup distributions (cf. the PyPM paper's Figures 10-11): a box plot
    per variant over all model x configuration pairs, points per model; and
    per configuration."""
    plt = common.pyplot()
    if plt is None:
        return False
    models, cfgs = res["models"], res["configs"]
    colors = {m: plt.get_cmap("tab10")(i) for i, m in enumerate(models)}
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, 4.8),
                                 gridspec_kw={"width_ratios": [1, 2.4]})
    data = [speedups(res, v) for v in VARIANTS]
    if any(data):
        a1.boxplot([d or [float("nan")] for d in data], widths=0.5, showfliers=False,
                   medianprops={"color": "black"})
        a1.set_xticks([1, 2], [LABELS[v] for v in VARIANTS], fontsize=8)
    for i, v in enumerate(VARIANTS):
        rows = [r for r in res["rows"] if not r["error"] and not r["variants"][v]["error"]]
        for j, r in enumerate(rows):
            x = i + 1 + (j / max(len(rows) - 1, 1) - 0.5) * 0.35
            a1.scatter(x, r["variants"][v]["speedup"], s=16, color=colors[r["model"]],
                       zorder=3, label=r["model"] if i == 0 else None)
    a1.axhline(1.0, color="grey", lw=0.8, ls="--")
    a1.set_ylabel("speedup (original / rewritten), median")
    a1.set_title(f"all models × configs (geomean: " + ", ".join(
        f"{v} {res['summary'][v]['geomean']:.2f}" for v in VARIANTS if res["summary"][v])
        + ")", fontsize=9)
    handles, labels = a1.get_legend_handles_labels()
    uniq = dict(zip(labels, handles))
    a1.legend(uniq.values(), uniq.keys(), fontsize=7, loc="best")
    # per configuration: guarded and forced side by side
    pos, ticks, tl = 0, [], []
    for b, s in cfgs:
        for k, v in enumerate(VARIANTS):
            d = [r["variants"][v]["speedup"] for r in res["rows"]
                 if r["batch"] == b and r["seq"] == s and not r["error"]
                 and not r["variants"][v]["error"]]
            x = pos + k
            if d:
                bp = a2.boxplot([d], positions=[x], widths=0.6, showfliers=False,
                                patch_artist=True, medianprops={"color": "black"})
                bp["boxes"][0].set_facecolor(("#9ecae1", "#fdae6b")[k])
                for r in res["rows"]:
                    if r["batch"] == b and r["seq"] == s and not r["error"] \
                            and not r["variants"][v]["error"]:
                        a2.scatter(x + (models.index(r["model"]) - 2.5) * 0.06,
                                   r["variants"][v]["speedup"], s=12,
                                   color=colors[r["model"]], zorder=3)
        ticks.append(pos + 0.5)
        tl.append(f"batch {b}\nseq {s}")
        pos += 3
    a2.set_xticks(ticks, tl, fontsize=8)
    a2.axhline(1.0, color="grey", lw=0.8, ls="--")
    from matplotlib.patches import Patch
    a2.legend([Patch(facecolor="#9ecae1"), Patch(facecolor="#fdae6b")],
              [LABELS[v] for v in VARIANTS], fontsize=8, loc="best")
    a2.set_title("per configuration", fontsize=9)
    for a in (a1, a2):
        a.grid(True, axis="y", alpha=0.3)
    env = res["env"]
    how = "torch.compile" if res.get("compile") else "Eager"
    fig.suptitle(f"{how} inference speedup of rewritten models, "
                 f"{res.get('device', 'cpu').upper()} {res.get('dtype', 'float32')} "
                 f"({env['threads']} threads, "
                 f"{res['size']} width, {res['layers']} layer(s), torch {env['torch']})",
                 fontsize=10)
    common.save_figure(fig, path)
    return True


# --------------------------------------------------------------------------------------


def _git_commit():
    c = common.git_commit(short=True)
    return c + ("+dirty" if common.git_dirty() else "") if c else None


def _weight(batch, seq):
    """Rough relative cost of one model x configuration: a fixed part (export,
    rewriting, the check; a few seconds) plus eager CPU latency, which grows
    with the tokens, and attention with the sequence again."""
    return 1000 + batch * seq * (1 + seq / 512)


def _ints(s):
    return [int(x) for x in s.split(",") if x.strip()]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="bench width (hidden 256), 1 layer, batch 1,2, fewer repetitions "
                         "(~1-2 minutes)")
    ap.add_argument("--models", help="comma-separated subset of " + ",".join(MODELS))
    ap.add_argument("--size", help="examples/models.py width: small, bench or base "
                                   "(default base; quick bench)")
    ap.add_argument("--layers", type=int, help="layers per model (default 2; quick 1)")
    ap.add_argument("--batches", help="comma-separated batch sizes (default 1,8; quick 1,2)")
    ap.add_argument("--seqs", help="comma-separated sequence lengths (default 128,512)")
    ap.add_argument("--threads", default="2",
                    help="torch intra-op threads (default 2); comma-separated for one run per "
                         "thread count, reported in one file (e.g. 1,2)")
    ap.add_argument("--warmup", type=int, help="warm-up runs per program (default 1; the "
                                              "rewrite check has run each program once too)")
    ap.add_argument("--budget", type=float,
                    help="seconds of timed repetitions per model x configuration "
                         "(default 7; quick 1)")
    ap.add_argument("--min-repeats", type=int, help="(default 5; quick 3)")
    ap.add_argument("--max-repeats", type=int, help="(default 30; quick 10)")
    ap.add_argument("--time-limit", type=float,
                    help="seconds for the whole run (default 420; quick 90; 0: none): the "
                         "repetitions are cut (to no fewer than "
                         f"{MIN_REPEATS_FLOOR} per item) to fit, each item getting a share "
                         "of the time left by its expected cost; export, rewriting and "
                         "the check are not cut, so a loaded machine can still overrun")
    ap.add_argument("--n-random", type=int, default=0,
                    help="random input sets the rewrite check tries besides the example "
                         "inputs (rewrite_program's n_random; default 0)")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                    help="where the models run; also the rewrite's target (default cpu)")
    ap.add_argument("--dtype", choices=("float32", "float16", "bfloat16"), default="float32",
                    help="model weights' dtype (default float32)")
    ap.add_argument("--compile", action="store_true",
                    help="time torch.compile of the original and of the rewritten programs")
    ap.add_argument("--no-sdpa", action="store_true",
                    help="leave out the HF attn_implementation=\"sdpa\" baseline")
    ap.add_argument("--out", default=str(RESULTS), help="results directory")
    ap.add_argument("--results-name", help="file stem (default models; quick models_quick)")
    args = ap.parse_args(argv)
    q = args.quick
    args.size = args.size or ("bench" if q else "base")
    args.layers = args.layers or (1 if q else 2)
    args.warmup = args.warmup or 1
    args.budget = args.budget if args.budget is not None else (1.0 if q else 7.0)
    args.min_repeats = args.min_repeats or (3 if q else 5)
    if args.time_limit is None:
        args.time_limit = 90.0 if q else 420.0
    args.max_repeats = max(args.max_repeats or (10 if q else 30), args.min_repeats)
    models_ = (args.models or ",".join(MODELS)).split(",")
    batches = _ints(args.batches or ("1,2" if q else "1,8"))
    seqs = _ints(args.seqs or "128,512")
    suffix = "".join(f"_{x}" for x in (
        args.device if args.device != "cpu" else None,
        args.dtype if args.dtype != "float32" else None,
        "compile" if args.compile else None) if x)
    name = args.results_name or common.stem("models" + suffix, q)
    set_device(args.device, args.dtype)
    try:
        import torch
    except ImportError:
        log("bench_models: torch is not installed; skipping")
        return 0
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning)
    try:
        import transformers
        transformers.logging.set_verbosity_error()
    except ImportError:
        log("bench_models: transformers is not installed; skipping")
        return 0
    from examples import models as M
    for m in models_:
        if m not in M.MODELS:
            ap.error(f"unknown model {m!r}; expected some of {','.join(MODELS)}")
    threads = _ints(args.threads)
    if not threads or min(threads) < 1:
        ap.error("--threads: positive integers")
    import pypm_verified.torch.kernels  # noqa: F401  (registers torch.ops.pypm)
    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: torch sees no CUDA device")
    t_all = time.perf_counter()
    runs = []
    for k, th in enumerate(threads):
        limit = args.time_limit and (args.time_limit - (time.perf_counter() - t_all)) / (
            len(threads) - k)  # the time left, shared by the thread counts left
        runs.append(run(args, argv, th, limit, models_, batches, seqs, q))
    out = common.results_dir(args.out)
    wrote = [out / f"{name}.json", out / f"{name}.md"]
    if len(runs) == 1:
        res = runs[0]
        common.write_json(out / f"{name}.json", res, indent=1)
        write_markdown(res, out / f"{name}.md")
        if plot(res, out / f"{name}.png"):
            wrote.append(out / f"{name}.png")
    else:
        common.write_json(out / f"{name}.json", {"benchmark": "models", "threads": threads,
                                                 "runs": runs}, indent=1)
        title = (f"Model speed at {','.join(map(str, threads))} thread(s): "
                 f"{', '.join(models_)}, {args.layers} layer(s)")
        write_markdown_threads(runs, out / f"{name}.md", title)
        for res in runs:
            png = out / f"{name}_t{res['env']['threads']}.png"
            if plot(res, png):
                wrote.append(png)
    for res in runs:
        for v in VARIANTS:
            s = res["summary"][v]
            if s:
                log(f"{res['env']['threads']} thread(s), {LABELS[v]}: geomean speedup "
                    f"{s['geomean']:.3f} (min {s['min']:.3f}, max {s['max']:.3f}, n={s['n']})")
        if res["errors"]:
            log(f"{res['errors']} error(s): see {name}.md")
    log(f"wrote {', '.join(map(str, wrote))} ({time.perf_counter() - t_all:.0f} s)")
    return 0


def run(args, argv, threads, time_limit, models_, batches, seqs, q):
    """One benchmark run at ``threads`` intra-op threads: the results dict."""
    import torch
    import transformers
    from examples import models as M
    torch.set_num_threads(threads)

    t_start = time.perf_counter()
    load0 = common.loadavg()[0]
    base = M.SIZES[args.size]
    hidden, _, heads, kv, inter = base[:5]
    configs = [(b, s) for b in batches for s in seqs]
    log(f"bench_models: {len(models_)} models x {len(configs)} configs, {args.size} width, "
        f"{args.layers} layer(s), {torch.get_num_threads()} threads, load {load0:.1f}")
    if load0 > 0.5 and torch.get_num_threads() > 1:
        log(f"warning: 1-minute load average {load0:.1f}: with other jobs on the cores, "
            "multi-threaded timings mostly measure scheduler stalls (consider --threads 1)")
    rows = []
    items = [(b, s, m) for b, s in configs for m in models_]
    deadline = t_start + time_limit if time_limit else None
    for i, (b, s, m) in enumerate(items):
        # a size entry of examples/models.py for this configuration (in-process only):
        # max_position_embeddings follows the sequence length
        key = f"_bench_models_b{b}_s{s}_l{args.layers}_{args.size}"
        M.SIZES[key] = (hidden, args.layers, heads, kv, inter, s, b)
        share = None
        if deadline is not None:  # the time left, shared by the items' expected cost
            rest = sum(_weight(bb, ss) for bb, ss, _ in items[i:])
            share = max(0.0, deadline - time.perf_counter()) * _weight(b, s) / rest
        rows.append(bench_one(m, b, s, args, key, args.layers, share))
    rules = rule_names()
    env = {"torch": torch.__version__, "transformers": transformers.__version__,
           "threads": torch.get_num_threads(), "interop_threads": torch.get_num_interop_threads(),
           "platform": platform.platform(), "machine": platform.machine(),
           "processor": platform.processor(), "python": platform.python_version(),
           "cpus": os.cpu_count(), "loadavg_start": load0, "loadavg_end": common.loadavg()[0],
           "when": common.when(), "git": _git_commit()}
    res = {"benchmark": "models", "quick": q,
           "argv": common.display_argv(argv if argv is not None else sys.argv[1:]),
           "size": args.size, "layers": args.layers, "device": args.device,
           "dtype": args.dtype, "compile": args.compile,
           "dims": {"hidden": hidden, "heads": heads, "kv_heads": kv, "inter": inter},
           "models": models_, "configs": configs, "batches": batches, "seqs": seqs,
           "warmup": args.warmup, "budget": args.budget, "min_repeats": args.min_repeats,
           "max_repeats": args.max_repeats, "n_random": args.n_random,
           "time_limit": time_limit,
           "variants": {"original": "as exported",
                        "guarded": f"rewrite_program(target={args.device!r}, "
                                   "engine='verified')",
                        "forced": "same, check_profitability=False"},
           "env": env, "rules": rules, "rows": rows}
    res["summary"] = {v: summary(res, v) for v in VARIANTS}
    vs = [r["baselines"]["sdpa_guarded"]["vs_sdpa"] for r in rows if not r["error"]
          and "vs_sdpa" in (r.get("baselines") or {}).get("sdpa_guarded", {})]
    res["sdpa_baseline"] = {"n": len(vs), "geomean_sdpa_over_sdpa_rewritten": geomean(vs),
                            "min": min(vs, default=None), "max": max(vs, default=None)}
    res["rule_totals"] = {v: {} for v in VARIANTS}
    for r in rows:
        for v in VARIANTS:
            for k, n in (r["variants"].get(v, {}).get("firings") or {}).items():
                res["rule_totals"][v][k] = res["rule_totals"][v].get(k, 0) + n
    res["errors"] = sum(1 for r in rows if r["error"]) + sum(
        1 for r in rows if not r["error"] for v in VARIANTS if r["variants"][v]["error"])
    res["wall_s"] = round(time.perf_counter() - t_start, 1)
    return res


if __name__ == "__main__":
    sys.exit(main())
