"""Partitioning: eager vs ``pm.partition`` vs whole-model ``torch.compile``.

For each model of examples/models.py (random weights, offline; ``--size``,
default ``small``; ``--layers`` overrides the size's layer count), exported at the rewriter's IR (``examples/models.py``
``export``), three programs run the example inputs on the CPU:

``eager``        ``ep.module()``, as exported
``partitioned``  ``pm.partition(ep)``: the rule library's patterns (the
                 verified engine) outlined into submodules, each compiled by
                 ``torch.compile`` with Inductor (C++ on this CPU); the rest
                 of the program runs eagerly
``compiled``     ``torch.compile(ep.module())`` with Inductor, the whole model

Compile time is the first call's time minus an eager call's (Inductor's
cache is a fresh directory per run, so it is a cold compile; dynamo is
reset between programs); partition time is matching and outlining. The
partitioned program is also saved and reloaded (``pm.load_partitioned``,
the plan replayed; its compile is then warm from the on-disk cache) and its
outputs, like the partitioned and compiled programs', are checked against
eager. Latency: warm-up, then interleaved timed repetitions (median and
IQR), ``torch.set_num_threads(--threads)``.

    python bench/bench_partition.py [--quick] [--models bert,gpt2] [--size small]
                                    [--layers N] [--reps 30] [--threads 1]

Writes bench/results/partition.md and .json (``partition_quick.*`` with
``--quick``: BERT and GPT-2, fewer repetitions; ``partition_<size>[_<N>l].*``
for another size or a layer count, so the small run's table stays).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import traceback

import common  # noqa: F401 -- sys.path

ALL = ("bert", "roberta", "distilbert", "gpt2", "llama", "qwen2")


def _iqr(xs):
    if len(xs) < 4:
        return 0.0
    q = statistics.quantiles(xs, n=4)
    return q[2] - q[0]


def run_model(name, size, reps, tmpdir, layers=None):
    import torch
    import models
    import pypm_verified as pm
    from pypm_verified.torch.partition import outputs_agree

    row = {"model": name, "size": size, "layers": models.layers(size, layers)}
    ep = models.export(name, size, layers)
    _, inputs = models.build(name, size, layers)
    kw = models.input_kwargs(inputs)
    eager = ep.module()
    with torch.no_grad():
        ref = eager(**kw)
        t0 = time.perf_counter()
        eager(**kw)
        eager_once = time.perf_counter() - t0

    torch._dynamo.reset()
    part = pm.partition(ep, backend="inductor")
    row["partition_s"] = part.partition_s
    row["submodules"] = [s.name for s in part.submodules]
    row["refused"] = len(part.refused)
    row["partitioned_compile_s"] = part.warmup(**kw) - eager_once
    with torch.no_grad():
        row["partitioned_agrees"] = outputs_agree(ref, part(**kw))
    path = os.path.join(tmpdir, f"{name}.pypm.pt")
    part.save(path)
    t0 = time.perf_counter()
    again = pm.load_partitioned(path)
    again.warmup(**kw)
    row["reload_s"] = time.perf_counter() - t0
    with torch.no_grad():
        row["reloaded_agrees"] = outputs_agree(ref, again(**kw))

    torch._dynamo.reset()
    whole = torch.compile(ep.module(), backend="inductor")
    with torch.no_grad():
        t0 = time.perf_counter()
        out = whole(**kw)
        row["compiled_compile_s"] = time.perf_counter() - t0 - eager_once
        row["compiled_agrees"] = outputs_agree(ref, out)

    progs = {"eager": eager, "partitioned": part, "compiled": whole}
    times = {k: [] for k in progs}
    with torch.no_grad():
        for _ in range(3):
            for p in progs.values():
                p(**kw)
        order = list(progs)
        for i in range(reps):
            for k in order[i % 3:] + order[:i % 3]:
                t0 = time.perf_counter()
                progs[k](**kw)
                times[k].append(time.perf_counter() - t0)
    for k, ts in times.items():
        row[f"{k}_ms"] = statistics.median(ts) * 1e3
        row[f"{k}_iqr_ms"] = _iqr(ts) * 1e3
        row[f"{k}_min_ms"] = min(ts) * 1e3
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--models")
    ap.add_argument("--size", default="small")
    ap.add_argument("--layers", type=int, help="override the size's number of layers")
    ap.add_argument("--reps", type=int)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    names = args.models.split(",") if args.models else (("bert", "gpt2") if args.quick else ALL)
    reps = args.reps or (10 if args.quick else 30)
    tmpdir = tempfile.mkdtemp(prefix="pypm_partition_")
    # a cold Inductor cache for this run: compile times are compiles, not cache hits
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(tmpdir, "inductor")
    import torch
    torch.set_num_threads(args.threads)
    # Inductor's one-time start (its imports, the C++ toolchain probe) is not
    # charged to the first model: compile a small function once, untimed
    torch.compile(lambda t: (t * 2).relu(), backend="inductor")(torch.randn(4))
    torch._dynamo.reset()
    rows = []
    for name in names:
        t0 = time.perf_counter()
        try:
            row = run_model(name, args.size, reps, tmpdir, args.layers)
        except Exception as e:  # recorded, the benchmark goes on
            traceback.print_exc()
            row = {"model": name, "size": args.size, "error": f"{type(e).__name__}: {e}"}
        row["wall_s"] = time.perf_counter() - t0
        rows.append(row)
        print(row, flush=True)
    data = {"when": common.when(), "machine": common.machine(), "threads": args.threads,
            "loadavg": common.loadavg(), "commit": common.git_commit(short=True),
            "dirty": common.git_dirty(), "torch": torch.__version__, "reps": reps,
            "rows": rows}
    out = common.results_dir(args.out)
    stem = common.stem("partition", args.quick)
    if args.size != "small" or args.layers is not None:
        stem += f"_{args.size}" + (f"_{args.layers}l" if args.layers is not None else "")
    cmd = "`python bench/bench_partition.py" + (" --quick" if args.quick else "") + \
        (f" --size {args.size}" if args.size != "small" else "") + \
        (f" --layers {args.layers}" if args.layers is not None else "") + \
        (f" --models {args.models}" if args.models else "") + \
        (f" --reps {args.reps}" if args.reps else "") + "`"
    common.write_json(out / f"{stem}.json", data)
    lines = [
        "# Partitioning: eager vs pm.partition vs whole-model torch.compile",
        "",
        f"{data['when']}, {data['machine']}, torch {data['torch']}, {args.threads} thread(s), "
        f"load average {data['loadavg']}, commit {data['commit']}"
        f"{' (dirty)' if data['dirty'] else ''}; size `{args.size}`"
        + (f", {args.layers} layers" if args.layers is not None else "")
        + f", {reps} repetitions; {cmd}.",
        "",
        "Partitioned: the rule library's patterns outlined into submodules compiled by "
        "Inductor, the rest eager. Compile: first call minus an eager call, cold "
        "Inductor cache (Inductor's one-time start excluded); reload: "
        "`pm.load_partitioned` + first call (warm cache). Latency: median (IQR) / min ms "
        "(on a shared, loaded machine the minimum is the steadier figure); the ratios are "
        "of the minima, measured side by side (interleaved repetitions).",
        "",
        "| model | layers | submodules | eager ms | partitioned ms | compiled ms | "
        "partitioned / eager | compiled / eager | partition s | "
        "partitioned compile s | whole compile s | reload s | outputs agree |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | | error: {r['error']} | | | | | | | | | | |")
            continue
        agree = all(r[k] for k in ("partitioned_agrees", "reloaded_agrees", "compiled_agrees"))
        lines.append(
            f"| {r['model']} | {r['layers']} | {len(r['submodules'])} "
            f"| {r['eager_ms']:.2f} ({r['eager_iqr_ms']:.2f}) / {r['eager_min_ms']:.2f} "
            f"| {r['partitioned_ms']:.2f} ({r['partitioned_iqr_ms']:.2f}) / "
            f"{r['partitioned_min_ms']:.2f} "
            f"| {r['compiled_ms']:.2f} ({r['compiled_iqr_ms']:.2f}) / {r['compiled_min_ms']:.2f} "
            f"| {r['partitioned_min_ms'] / r['eager_min_ms']:.2f} "
            f"| {r['compiled_min_ms'] / r['eager_min_ms']:.2f} "
            f"| {r['partition_s']:.2f} "
            f"| {r['partitioned_compile_s']:.1f} | {r['compiled_compile_s']:.1f} "
            f"| {r['reload_s']:.1f} | {'yes' if agree else 'NO'} |")
    lines += ["", "Submodules per model: " + "; ".join(
        f"{r['model']}: {', '.join(r.get('submodules', []))}" for r in rows)]
    print("\n".join(common.write_md(out / f"{stem}.md", lines)))
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
