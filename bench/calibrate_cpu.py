"""Calibrate the CPU profitability table on whole models.

For each model of examples/models.py and configuration batch x sequence, the
exported program is rewritten with every rule firing wherever its other guards
allow (the ``all`` table: every CPU threshold 1), recording the sizes each
profitability guard read (``profitability.use_table(..., seen=...)``); then,
for each (rule, dtype, variant) whose guard was asked, rewritten again with
that variant declined (its threshold null). The programs are timed eagerly
under ``torch.inference_mode``, paired and interleaved (rotated order within
each repetition; bench/bench_models.py's ``time_variants``), at each thread
count of ``--threads``. A row per (model, configuration, variant) records the
size the guard read and, per thread count, the median of the paired ratios
time(without the variant) / time(with it) and the ratio of the fastest
samples; ``ratio`` is the geometric mean of the paired medians over the
thread counts. ``--write-table`` writes the thresholds these rows give
(:func:`pypm_verified.torch.profitability.write_calibration`: the smallest
measured size from which no row at or above it was slower beyond a 2% noise
band by both estimates) into
python/pypm_verified/torch/profitability.json, with the provenance (date,
threads, load, models, configurations, repetitions) in the entry.

    python bench/calibrate_cpu.py [--quick] [--models bert,gpt2,llama] [--layers 2]
        [--batches 1,8] [--seqs 128,512] [--threads 1,2] [--budget S] [--write-table]

Writes bench/results/calibrate_cpu.json and .md (``--quick``: calibrate_cpu_quick.*,
never written into the table).
"""
from __future__ import annotations

import argparse
import copy
import gc
import math
import statistics
import sys
import time
import warnings

import common
import bench_models as BM
from common import RESULTS

MODELS = ("bert", "gpt2", "llama")  # attention (mask), linear_act gelu/silu, gelu tanh, rms_norm


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def _gmean(xs):
    xs = list(xs)
    return math.exp(statistics.fmean(math.log(x) for x in xs))


def pays(row):
    """Whether the row's variant paid (:func:`profitability.model_thresholds`'
    criterion: not slower by both estimates)."""
    from pypm_verified.torch.profitability import MODEL_MIN_RATIO
    return max(row["ratio"], row.get("ratio_min", row["ratio"])) >= MODEL_MIN_RATIO


def all_table(base, dtype="float32"):
    """``base`` with every CPU threshold of ``dtype`` set to 1: every rule fires
    wherever its other guards allow (the driver's check_profitability=False,
    but the guards still ask, so the sizes they read are recorded)."""
    from pypm_verified.torch.profitability import RULES
    t = copy.deepcopy(base)
    for rule, (variants, key) in RULES.items():
        e = t["table"].setdefault(rule, {}).setdefault("cpu", {"size": key, "thresholds": {}})
        e["thresholds"][dtype] = {v: 1 for v in variants}
    return t


def without(tab, rule, dtype, variant):
    t = copy.deepcopy(tab)
    t["table"][rule]["cpu"]["thresholds"][dtype][variant] = None
    return t


def rewrite(prog, tab, seen=None, check=False):
    from pypm_verified.torch import profitability
    from pypm_verified.torch.pipeline import rewrite_program
    with profitability.use_table(tab, seen):
        return rewrite_program(prog, target="cpu", engine="verified", check=check, n_random=0)


def calibrate_one(model, batch, seq, args, key, base):
    """Rows for one model x configuration (an ``error`` row if it fails)."""
    from pypm_verified.torch.profitability import RULES
    import torch
    tag = f"{model} b{batch} s{seq}"
    prog, _ = BM.export(model, key)
    tab = all_table(base)
    seen = []
    full = rewrite(prog, tab, seen, check=True)
    if full.numerics is not None and not full.numerics.ok:
        raise RuntimeError(f"{tag}: the all-rules rewrite fails its numerics check")
    asked = {}  # (rule, dtype, variant) -> sizes its guard read
    for rule, target, dt, variant, sizes in seen:
        if target == "cpu" and rule in RULES:
            asked.setdefault((rule, dt, variant), set()).add(sizes.get(RULES[rule][1]))
    mods = {"all": full.ep.module()}
    code = full.ep.graph_module.code
    firings = {"all": dict(full.report.firings)}
    for (rule, dt, variant) in sorted(asked):
        name = f"{rule}:{variant}:{dt}"
        res = rewrite(prog, without(tab, rule, dt, variant))
        if res.ep.graph_module.code == code:  # asked, but nothing it could change
            continue
        mods[name] = res.ep.module()
        firings[name] = dict(res.report.firings)
    rows, timing = [], {}
    for th in args.threads:
        torch.set_num_threads(th)
        load = common.loadavg()[0]
        times, _, reps = BM.time_variants(mods, prog.kwargs, 1, args.budget,
                                          args.min_repeats, args.max_repeats)
        timing[th] = (times, reps, load)
    for name in mods:
        if name == "all":
            continue
        rule, variant, dt = name.split(":")
        per = {}
        for th, (times, reps, load) in timing.items():
            a, w = times["all"], times[name]
            paired = sorted(x / y for x, y in zip(w, a))
            q1, q3 = BM._quartiles(paired)
            per[str(th)] = {"ratio": statistics.median(paired), "q1": q1, "q3": q3,
                            "ratio_of_mins": min(w) / min(a), "reps": reps, "load": load,
                            "all_ms": statistics.median(a) * 1e3,
                            "without_ms": statistics.median(w) * 1e3}
        g = _gmean(p["ratio"] for p in per.values())
        for size in sorted(s for s in asked[(rule, dt, variant)] if s is not None):
            rows.append({"model": model, "batch": batch, "seq": seq, "rule": rule,
                         "dtype": dt, "variant": variant, "sizes": {RULES[rule][1]: size},
                         "ratio": g, "ratio_min": _gmean(p["ratio_of_mins"] for p in per.values()),
                         "threads": per, "firings_all": firings["all"],
                         "firings_without": firings[name]})
        log(f"{tag}: {rule}/{variant} size {sorted(asked[(rule, dt, variant)])}: "
            + "  ".join(f"t{t} x{p['ratio']:.3f} (min x{p['ratio_of_mins']:.3f}, "
                        f"{p['reps']} reps, load {p['load']:.1f})" for t, p in per.items())
            + f"  -> geomean x{g:.3f} (mins x{rows[-1]['ratio_min']:.3f})")
    del mods, prog
    gc.collect()
    return rows


def write_markdown(res, path, derived, before):
    L = ["# CPU profitability calibrated on whole models", "",
         f"Generated by `python bench/calibrate_cpu.py {' '.join(res['argv'])}` on "
         f"{res['env']['machine']} (torch {res['env']['torch']}), {res['env']['when']}; "
         f"1-minute load average {res['env']['loadavg_start']:.1f} at the start, "
         f"{res['env']['loadavg_end']:.1f} at the end (2 cores shared with other jobs); "
         f"{res['wall_s']:.0f} s.", "",
         f"Models: examples/models.py `{res['size']}` width, {res['layers']} layer(s), "
         f"random weights, float32; configurations batch {res['batches']} x sequence "
         f"{res['seqs']}; threads {res['threads']}. Per model x configuration: the program "
         "rewritten with every rule firing (**all**) and, per (rule, variant) whose guard "
         "was asked, with that variant declined (**without**); timed eagerly, paired and "
         f"interleaved, {res['min_repeats']}-{res['max_repeats']} repetitions "
         f"(as many as fit {res['budget']:.0f} s) per thread count. **ratio** = median over "
         "repetitions of time(without) / time(all): > 1 means the variant makes the model "
         "faster; (min …) is the ratio of the fastest samples. **geomean** is the geometric "
         "mean over the thread counts of the paired medians (of the ratios of mins): the "
         "variant pays at that size unless both are below "
         f"{res['min_ratio']} (under other jobs' load, only a slowdown beyond that noise "
         "band that both estimates agree on declines).", "",
         "| model | batch | seq | rule / variant | size the guard read | "
         + " | ".join(f"{t} thread(s): ratio [q1–q3] (min) | reps, load" for t in res["threads"])
         + " | geomean (of mins) | pays |",
         "|---|---:|---:|---|---:|" + "---:|---:|" * len(res["threads"]) + "---:|---|"]
    for r in res["rows"]:
        (k, v), = r["sizes"].items()
        cells = [r["model"], str(r["batch"]), str(r["seq"]), f"{r['rule']} / {r['variant']}",
                 f"{k} {v}"]
        for t in res["threads"]:
            p = r["threads"][str(t)]
            cells += [f"{p['ratio']:.3f} [{p['q1']:.2f}–{p['q3']:.2f}] "
                      f"(min {p['ratio_of_mins']:.2f})", f"{p['reps']}, {p['load']:.1f}"]
        cells += [f"**{r['ratio']:.3f}** ({r['ratio_min']:.3f})", "yes" if pays(r) else "no"]
        L.append("| " + " | ".join(cells) + " |")
    L += ["", "## Thresholds (float32, CPU)", "",
          "| rule | variant | size keyword | kernel-level (before) | model-level (calibrated) |",
          "|---|---|---|---:|---:|"]
    from pypm_verified.torch.profitability import RULES
    for rule, per_dt in sorted(derived.items()):
        for dt, per_v in sorted(per_dt.items()):
            for v, t in sorted(per_v.items()):
                b = before.get(rule, {}).get(dt, {}).get(v, "—")
                L.append(f"| {rule} | {v} | {RULES[rule][1]} | {b} | {t} |")
    L += ["", "A threshold is the smallest measured size from which the variant paid at every "
          "measured size at or above it (null: it did not pay at the largest); sizes between "
          "measured ones are treated like the next smaller measured size, sizes above the "
          "largest fire, sizes below the threshold decline. Variants no model here contains "
          "keep their kernel-level thresholds (bench/results/kernels_1thread.md).", ""]
    common.write_md(path, L)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="bench width (hidden 256), 1 layer, batch 1, seq 128, 1 thread")
    ap.add_argument("--models", help="comma-separated (default " + ",".join(MODELS) + ")")
    ap.add_argument("--layers", type=int, help="layers per model (default 2)")
    ap.add_argument("--batches", help="default 1,8")
    ap.add_argument("--seqs", help="default 128,512")
    ap.add_argument("--threads", help="comma-separated thread counts (default 1,2)")
    ap.add_argument("--budget", type=float, default=12.0,
                    help="seconds of timed repetitions per configuration and thread count")
    ap.add_argument("--min-repeats", type=int, default=5)
    ap.add_argument("--max-repeats", type=int, default=20)
    ap.add_argument("--write-table", action="store_true",
                    help="write the thresholds into profitability.json (not with --quick)")
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--from-json", metavar="FILE",
                    help="measure nothing: derive the thresholds (and with --write-table the "
                         "table) from a calibrate_cpu.json written before; rewrites its .md")
    args = ap.parse_args(argv)
    if args.from_json:
        return from_json(args)
    q = args.quick
    if q and args.write_table:
        ap.error("--write-table needs a full run (not --quick)")
    size = "bench" if q else "base"
    layers = args.layers or (1 if q else 2)
    models_ = (args.models or ",".join(MODELS)).split(",")
    batches = BM._ints(args.batches or ("1" if q else "1,8"))
    seqs = BM._ints(args.seqs or ("128" if q else "128,512"))
    args.threads = BM._ints(args.threads or ("1" if q else "1,2"))
    if not args.threads or min(args.threads) < 1:
        ap.error("--threads: positive integers")
    import torch
    import transformers
    from examples import models as M
    from pypm_verified.torch import profitability
    import pypm_verified.torch.kernels  # noqa: F401  (registers torch.ops.pypm)
    for m in models_:
        if m not in M.MODELS:
            ap.error(f"unknown model {m!r}; expected some of {','.join(M.MODELS)}")
    warnings.filterwarnings("ignore")
    transformers.logging.set_verbosity_error()
    base = profitability.table(reload=True)
    before = {r: {dt: dict(pv) for dt, pv in e["cpu"]["thresholds"].items()}
              for r, e in base["table"].items() if "cpu" in e}
    hidden, _, heads, kv, inter = M.SIZES[size][:5]
    t0, load0 = time.perf_counter(), common.loadavg()[0]
    rows, errors = [], []
    for b in batches:
        for s in seqs:
            for m in models_:
                key = f"_calibrate_b{b}_s{s}_l{layers}_{size}"
                M.SIZES[key] = (hidden, layers, heads, kv, inter, s, b)
                try:
                    rows += calibrate_one(m, b, s, args, key, base)
                except Exception as e:  # recorded; the run goes on
                    errors.append(f"{m} b{b} s{s}: {BM._err(e)}")
                    log(f"! {errors[-1]}")
    env = {"torch": torch.__version__, "machine": common.machine(), "when": common.when(),
           "loadavg_start": load0, "loadavg_end": common.loadavg()[0],
           "git": BM._git_commit()}
    res = {"benchmark": "calibrate_cpu", "quick": q,
           "argv": common.display_argv(argv if argv is not None else sys.argv[1:]),
           "size": size, "layers": layers, "models": models_, "batches": batches,
           "seqs": seqs, "threads": args.threads, "budget": args.budget,
           "min_repeats": args.min_repeats, "max_repeats": args.max_repeats,
           "min_ratio": profitability.MODEL_MIN_RATIO, "env": env, "rows": rows,
           "errors": errors, "wall_s": round(time.perf_counter() - t0, 1)}
    derived = profitability.model_thresholds(rows)
    res["thresholds"] = derived
    out = common.results_dir(args.out)
    name = common.stem("calibrate_cpu", q)
    common.write_json(out / f"{name}.json", res, indent=1)
    write_markdown(res, out / f"{name}.md", derived, before)
    log(f"thresholds: {derived}")
    log(f"wrote {out / name}.json, .md ({res['wall_s']} s)")
    if args.write_table:
        if errors:
            log("not writing the table: the run had errors")
            return 1
        write_table(res, f"bench/results/{name}.json")
    return 1 if errors else 0


def write_table(res, results):
    """Write the thresholds of ``res`` (a calibrate_cpu result) into profitability.json."""
    from pypm_verified.torch import profitability
    env = res["env"]
    meta = {"results": results, "when": env["when"], "threads": res["threads"],
            "loadavg": [round(env["loadavg_start"], 1), round(env["loadavg_end"], 1)],
            "models": res["models"], "size": res["size"], "layers": res["layers"],
            "batches": res["batches"], "seqs": res["seqs"],
            "repetitions": [res["min_repeats"], res["max_repeats"]],
            "torch": env["torch"], "machine": env["machine"]}
    log(f"wrote {profitability.write_calibration(res['rows'], meta)}")


def from_json(args) -> int:
    """--from-json: re-derive from saved rows (filling ``ratio_min`` from the
    per-thread ratios of mins where a row lacks it); rewrite the JSON and .md."""
    import json
    from pathlib import Path
    from pypm_verified.torch import profitability
    path = Path(args.from_json)
    res = json.loads(path.read_text())
    if res.get("benchmark") != "calibrate_cpu":
        raise SystemExit(f"{path}: not a calibrate_cpu result")
    for r in res["rows"]:
        r.setdefault("ratio_min", _gmean(p["ratio_of_mins"] for p in r["threads"].values()))
    before = {r: {dt: dict(pv) for dt, pv in e["cpu"]["thresholds"].items()}
              for r, e in profitability.table(reload=True)["table"].items() if "cpu" in e}
    for rule, e in profitability.table()["table"].items():  # calibrated: show the kernel-level
        if e.get("cpu", {}).get("calibrated") and e["cpu"].get("kernel_results"):
            kern = json.loads((Path(__file__).resolve().parent.parent
                               / e["cpu"]["kernel_results"]).read_text())
            before[rule] = profitability.thresholds_from_rows(
                kern["rows"], profitability.table()["min_ratio"]).get(rule, before[rule])
    res["thresholds"] = profitability.model_thresholds(res["rows"])
    res["min_ratio"] = profitability.MODEL_MIN_RATIO
    common.write_json(path, res, indent=1)
    write_markdown(res, path.with_suffix(".md"), res["thresholds"], before)
    log(f"thresholds: {res['thresholds']}")
    if args.write_table:
        if res["errors"] or res["quick"]:
            log("not writing the table: the run had errors or was --quick")
            return 1
        write_table(res, f"bench/results/{path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
