"""Where a rewritten model's time goes: a per-operator profile.

Each model x configuration is exported and rewritten like bench/bench_models.py
does (``guarded``: the shipped CPU table), then run eagerly under
``torch.profiler`` (one warm-up run, then ``--runs`` profiled runs); the
operators' self CPU time is grouped into classes (GEMMs, the fused GEMM +
activation, attention, normalization, element-wise, copies, other), for the
original and the rewritten program, so one can read which part bounds the
speedup (the GEMMs take the same time before and after a rewrite that leaves
them alone).

    python bench/profile_models.py [--models bert] [--layers 12] [--batches 1,8]
        [--seqs 128,512] [--threads 1] [--runs 2] [--results-name NAME]

Writes bench/results/NAME.json and .md (default profile_bert12).
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings

import common
import bench_models as BM

#: operator name (aten::x / pypm::x / mkldnn::x) -> class; the first prefix that matches
CLASSES = (
    ("GEMM (addmm/mm/linear)", ("aten::addmm", "aten::mm", "mkl::_mkl_linear")),
    ("fused GEMM+activation (linear_act)", ("mkldnn::_linear_pointwise",)),
    ("attention (SDPA, bmm, softmax)", ("aten::_scaled_dot_product", "aten::bmm",
                                        "aten::_softmax", "aten::_safe_softmax",
                                        "aten::baddbmm")),
    ("layer/RMS norm", ("aten::native_layer_norm", "aten::_fused_rms_norm",
                        "aten::rms_norm")),
    ("copies (clone/contiguous/copy_)", ("aten::copy_", "aten::clone", "aten::contiguous")),
    ("element-wise", ("aten::add", "aten::mul", "aten::div", "aten::gelu", "aten::tanh",
                      "aten::silu", "aten::rsqrt", "aten::pow", "aten::mean", "aten::where",
                      "aten::sub", "aten::erf", "aten::neg", "aten::masked_fill")),
)


def classify(name: str) -> str:
    for cls, prefixes in CLASSES:
        if any(name == p or name.startswith(p) for p in prefixes):
            return cls
    return "other"


def profile(mod, kwargs, runs):
    """{class: self CPU ms per run} and the wall ms per run (median) of ``mod``."""
    import torch
    from torch.profiler import ProfilerActivity, profile as prof
    with torch.inference_mode():
        mod(**kwargs)
        walls = []
        with prof(activities=[ProfilerActivity.CPU]) as p:
            for _ in range(runs):
                t0 = time.perf_counter()
                mod(**kwargs)
                walls.append(time.perf_counter() - t0)
    out = {}
    for e in p.key_averages():
        c = classify(e.key)
        out[c] = out.get(c, 0.0) + e.self_cpu_time_total / 1e3 / runs
    return out, sorted(walls)[len(walls) // 2] * 1e3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="bert")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--seqs", default="128,512")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--results-name", default="profile_bert12")
    ap.add_argument("--out", default=str(common.RESULTS))
    args = ap.parse_args(argv)
    import torch
    import transformers
    from examples import models as M
    import pypm_verified.torch.kernels  # noqa: F401
    warnings.filterwarnings("ignore")
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(args.threads)
    hidden, _, heads, kv, inter = M.SIZES["base"][:5]
    load0, t0 = common.loadavg()[0], time.perf_counter()
    rows = []
    for m in args.models.split(","):
        for b in BM._ints(args.batches):
            for s in BM._ints(args.seqs):
                key = f"_profile_b{b}_s{s}_l{args.layers}"
                M.SIZES[key] = (hidden, args.layers, heads, kv, inter, s, b)
                prog, _ = BM.export(m, key)
                res, _ = BM.rewrite(prog, "guarded", 0)
                row = {"model": m, "batch": b, "seq": s, "firings": dict(res.report.firings)}
                for name, mod in (("original", prog.ep.module()), ("guarded", res.ep.module())):
                    row[name], row[name + "_wall_ms"] = profile(mod, prog.kwargs, args.runs)
                BM.log(f"{m} b{b} s{s}: " + "  ".join(
                    f"{n} {row[n + '_wall_ms']:.0f} ms" for n in ("original", "guarded")))
                rows.append(row)
    res = {"benchmark": "profile_models", "argv": common.display_argv(argv if argv is not None
                                                                     else sys.argv[1:]),
           "layers": args.layers, "threads": args.threads, "runs": args.runs, "rows": rows,
           "env": {"when": common.when(), "loadavg_start": load0,
                   "loadavg_end": common.loadavg()[0], "torch": torch.__version__,
                   "machine": common.machine()},
           "wall_s": round(time.perf_counter() - t0, 1)}
    out = common.results_dir(args.out)
    common.write_json(out / f"{args.results_name}.json", res, indent=1)
    classes = [c for c, _ in CLASSES] + ["other"]
    L = [f"# Where the time goes: {args.models}, {args.layers} layers, {args.threads} thread(s)",
         "", f"Generated by `python bench/profile_models.py {' '.join(res['argv'])}`, "
         f"{res['env']['when']}, torch {res['env']['torch']}; 1-minute load average "
         f"{load0:.1f} at the start, {res['env']['loadavg_end']:.1f} at the end (2 shared "
         f"cores). `torch.profiler` self CPU time per operator class, ms per run (mean of "
         f"{args.runs} profiled runs after a warm-up), and its share of the total; "
         "**guarded** is the program rewritten with the shipped CPU table "
         "(`rewrite_program(target=\"cpu\")`).", ""]
    for r in rows:
        L += [f"## {r['model']} batch {r['batch']} seq {r['seq']}", "",
              f"Rewrites: {', '.join(f'{k}×{n}' for k, n in sorted(r['firings'].items())) or 'none'}; "
              f"wall per profiled run: original {r['original_wall_ms']:.0f} ms, guarded "
              f"{r['guarded_wall_ms']:.0f} ms.", "",
              "| operator class | original ms | share | guarded ms | share |",
              "|---|---:|---:|---:|---:|"]
        tot = {n: sum(r[n].values()) or 1.0 for n in ("original", "guarded")}
        for c in classes:
            o, g = r["original"].get(c, 0.0), r["guarded"].get(c, 0.0)
            L.append(f"| {c} | {o:.1f} | {100 * o / tot['original']:.0f}% | {g:.1f} | "
                     f"{100 * g / tot['guarded']:.0f}% |")
        L += [f"| total | {tot['original']:.1f} | | {tot['guarded']:.1f} | |", ""]
    common.write_md(out / f"{args.results_name}.md", L)
    BM.log(f"wrote {out / args.results_name}.json, .md ({res['wall_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
