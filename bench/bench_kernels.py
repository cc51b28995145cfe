"""Kernel profitability: each rule's fused kernel vs the subgraph it replaces.

For every rule of the library, every size and dtype, on one device, times the
original subgraph (the eager aten ops HuggingFace models produce at the export
IR) and the fused kernel side by side in one process, alternating samples, and
reports ratio = median time(original) / median time(fused): > 1 means the
rewrite pays off. Rules:

  attention    explicit matmul / scale / mask / softmax / matmul (BERT's additive
               mask, GPT-2's causal ``where``) vs F.scaled_dot_product_attention
  gelu         the erf formula and GPT-2's tanh formula vs aten.gelu
  linear_act   F.linear + activation vs torch.ops.pypm.linear_act
  rms_norm     LLaMA's pow / mean / rsqrt / mul vs aten.rms_norm
  matmul_t     matmul(x, w.transpose) vs aten.linear (the paper's Figure 1 rule)

Writes bench/results/kernels.json and bench/results/kernels.md;
``--write-table`` also regenerates python/pypm_verified/torch/profitability.json
(thresholds for this device's target) from the measurements. Timings are
medians; the minimum of the samples is kept too, and the table requires both
ratios to clear its margin, so one scheduling hiccup cannot make a rule fire.

Usage: python bench/bench_kernels.py [--quick] [--device cpu|cuda] [--write-table]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import common
from common import RESULTS, ROOT

import pypm_verified.torch.kernels  # noqa: F401  (registers torch.ops.pypm)
from pypm_verified.torch import profitability

# -- original subgraphs, as the HF models' eager code produces them ----------


def attn_eager_mask(q, k, v, mask, scale):
    """BERT/RoBERTa: matmul(q, k^T) * scale + additive mask, softmax, (dropout p=0), matmul."""
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    s = s + mask
    p = torch.softmax(s, dim=-1)
    return torch.matmul(p, v)


def attn_eager_causal(q, k, v, causal, scale):
    """GPT-2: scores masked with where(causal, s, finfo.min), softmax, matmul."""
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    s = torch.where(causal, s, torch.finfo(s.dtype).min)
    p = torch.softmax(s, dim=-1)
    return torch.matmul(p, v)


def gelu_erf(x):
    """The paper's Figure 2 / BERT's written-out GELU."""
    return x * 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    """GPT-2's NewGELUActivation."""
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * torch.pow(x, 3.0))))


def rms_norm_eager(x, w, eps):
    """LLaMA/Qwen2 RMSNorm: statistics in float32, cast back, scale."""
    h = x.to(torch.float32)
    var = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(var + eps)
    return w * h.to(x.dtype)


_ACT = {"relu": torch.relu, "gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
        "silu": F.silu}

# -- timing ------------------------------------------------------------------


def _sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def time_pair(f_orig, f_fused, device, budget_s, min_samples, max_samples):
    """Median seconds per call of each function, sampled alternately (ABAB...)
    so that background load hits both alike; each sample runs enough calls to
    last >= 1 ms. Returns dicts with median, p25, p75, samples."""
    with torch.inference_mode():
        for f in (f_orig, f_fused):  # warm up (oneDNN primitive caches, allocator)
            for _ in range(2):
                f()
        _sync(device)
        t0 = time.perf_counter()
        f_orig()
        f_fused()
        _sync(device)
        pair = max(time.perf_counter() - t0, 1e-7)
        inner = max(1, int(2e-3 / pair))
        n = int(budget_s / (pair * inner))
        n = max(min_samples, min(max_samples, n))
        out = {"orig": [], "fused": []}
        for _ in range(n):
            for name, f in (("orig", f_orig), ("fused", f_fused)):
                _sync(device)
                t = time.perf_counter()
                for _ in range(inner):
                    f()
                _sync(device)
                out[name].append((time.perf_counter() - t) / inner)
    res = {}
    for name, xs in out.items():
        q = statistics.quantiles(xs, n=4) if len(xs) >= 2 else [xs[0]] * 3
        res[name] = {"median": statistics.median(xs), "p25": q[0], "p75": q[2], "min": min(xs),
                     "samples": len(xs)}
    return res


# -- configurations ----------------------------------------------------------


def configs(quick, device, dtypes):
    """Yield (rule, variant, dtype, sizes, make) where make() returns (f_orig, f_fused)."""
    dev = device
    full = not quick
    seqs = [32, 128, 512] + ([1024] if full else [])
    for dt in dtypes:
        # (a) attention
        for variant in ("mask", "causal"):
            for b in ([1, 8] if full else [1]):
                for h in ([4, 12] if full else [12]):
                    for s in seqs:
                        if s == 1024 and b * h > 12:  # keep the 2-core budget
                            continue
                        if s >= 512 and b * h > 32 and dev == "cpu" and quick:
                            continue
                        yield ("attention", variant, dt, {"batch": b, "heads": h, "head_dim": 64,
                                                          "seq": s},
                               _mk_attention(variant, b, h, s, 64, dt, dev))
        # (b) gelu
        for variant in ("erf", "tanh"):
            for t in ([1, 128, 512, 2048] if full else [1, 128, 2048]):
                hid = 3072
                yield ("gelu", variant, dt, {"tokens": t, "hidden": hid, "numel": t * hid},
                       _mk_gelu(variant, t, hid, dt, dev))
        # (c) linear + activation
        dims = [(256, 1024), (768, 3072)] + ([(3072, 768)] if full else [])
        toks = [1, 8, 32, 128, 512, 2048] if full else [1, 32, 128, 512]
        for act in ("relu", "gelu", "gelu_tanh", "silu"):
            for (i, o) in dims:
                for t in toks:
                    if quick and t * i * o > 512 * 768 * 3072:
                        continue
                    yield ("linear_act", act, dt, {"tokens": t, "in": i, "out": o},
                           _mk_linear(act, t, i, o, dt, dev))
        # (d) RMSNorm
        for hid in (768, 4096):
            for t in ([1, 32, 128, 512, 2048] if full else [1, 128, 2048]):
                yield ("rms_norm", "default", dt, {"tokens": t, "hidden": hid, "numel": t * hid},
                       _mk_rms(t, hid, dt, dev))
        # (e) matmul with a transposed operand
        for t in ([32, 128, 512] if full else [128]):
            yield ("matmul_t", "default", dt, {"tokens": t, "in": 768, "out": 768},
                   _mk_matmul_t(t, 768, 768, dt, dev))


def _g(seed):
    return torch.Generator().manual_seed(seed)


def _rand(shape, dt, dev, seed=0):
    return torch.randn(shape, generator=_g(seed)).to(dtype=dt, device=dev)


def _mk_attention(variant, b, h, s, d, dt, dev):
    def make():
        q, k, v = (_rand((b, h, s, d), dt, dev, i) for i in range(3))
        scale = 1.0 / math.sqrt(d)
        if variant == "mask":
            keep = torch.ones(b, s, dtype=torch.bool)
            keep[:, s - s // 4:] = False  # padded tail
            mask = torch.zeros(b, 1, 1, s, dtype=dt).masked_fill(~keep[:, None, None, :],
                                                                  torch.finfo(dt).min).to(dev)
            return (lambda: attn_eager_mask(q, k, v, mask, scale),
                    lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale))
        causal = torch.ones(s, s, dtype=torch.bool, device=dev).tril()[None, None]
        return (lambda: attn_eager_causal(q, k, v, causal, scale),
                lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale))
    return make


def _mk_gelu(variant, t, hid, dt, dev):
    def make():
        x = _rand((t, hid), dt, dev)
        if variant == "erf":
            return (lambda: gelu_erf(x), lambda: torch.ops.aten.gelu(x))
        return (lambda: gelu_tanh(x), lambda: torch.ops.aten.gelu(x, approximate="tanh"))
    return make


def _mk_linear(act, t, i, o, dt, dev):
    def make():
        x = _rand((t, i), dt, dev, 0)
        w = _rand((o, i), dt, dev, 1) / math.sqrt(i)
        b = _rand((o,), dt, dev, 2)
        a = _ACT[act]
        return (lambda: a(F.linear(x, w, b)),
                lambda: torch.ops.pypm.linear_act(x, w, b, act))
    return make


def _mk_rms(t, hid, dt, dev):
    def make():
        x = _rand((t, hid), dt, dev)
        w = _rand((hid,), dt, dev, 1)
        return (lambda: rms_norm_eager(x, w, 1e-6),
                lambda: torch.ops.aten.rms_norm(x, [hid], w, 1e-6))
    return make


def _mk_matmul_t(t, i, o, dt, dev):
    def make():
        x = _rand((t, i), dt, dev)
        w = _rand((o, i), dt, dev, 1)
        return (lambda: torch.matmul(x, w.transpose(0, 1)), lambda: F.linear(x, w))
    return make


def check_numerics(f_orig, f_fused, dt):
    """Max |orig - fused| relative to max |orig|: each pair must compute the same function."""
    with torch.inference_mode():
        a, b = f_orig().float(), f_fused().float()
    return ((a - b).abs().max() / a.abs().max().clamp_min(1e-12)).item()


# -- reporting ---------------------------------------------------------------


def _fmt_sizes(sz):
    return ", ".join(f"{k}={v}" for k, v in sz.items() if k != "numel")


def write_md(path, meta, rows):
    cmd = meta.get("argv") or (f"{' --quick' if meta['quick'] else ''} --device {meta['device']}"
                               f" --threads {meta['threads']}")
    load = ""
    if meta.get("loadavg_start") and meta.get("loadavg_end"):
        load = (f" 1-minute load average {meta['loadavg_start'][0]:.1f} at the start, "
                f"{meta['loadavg_end'][0]:.1f} at the end, {meta.get('wall_s', '?')} s.")
    lines = [
        "# Kernel profitability: fused kernel vs the subgraph it replaces",
        "",
        f"Generated by `python bench/bench_kernels.py {cmd.strip()}` on {meta['machine']} "
        f"({meta['threads']} threads), torch {meta['torch']}, {meta['when']}.{load}",
        "",
        "ratio = median time(original eager subgraph) / median time(fused kernel), measured "
        "side by side in one process with alternating samples; > 1 means the rewrite is "
        "faster; `ratio of mins` compares the best samples. `iqr` columns are the "
        "25th-75th percentile of the per-call times. "
        "Caveat: other jobs shared this machine's cores during the run, so single ratios "
        "within about ±10% of 1 are noise; the thresholds in "
        "`python/pypm_verified/torch/profitability.json` require a margin.",
        "",
    ]
    rules = []
    for r in rows:
        if r["rule"] not in rules:
            rules.append(r["rule"])
    for rule in rules:
        lines += [f"## {rule}", "",
                  "| variant | dtype | sizes | original (µs) | fused (µs) | ratio | ratio of mins "
                  "| orig iqr (µs) | fused iqr (µs) | rel. diff |",
                  "|---|---|---|---:|---:|---:|---:|---|---|---:|"]
        for r in rows:
            if r["rule"] != rule:
                continue
            o, f = r["orig"], r["fused"]
            lines.append(
                f"| {r['variant']} | {r['dtype']} | {_fmt_sizes(r['sizes'])} "
                f"| {o['median'] * 1e6:.1f} | {f['median'] * 1e6:.1f} | **{r['ratio']:.2f}** "
                f"| {r['ratio_min']:.2f} "
                f"| {o['p25'] * 1e6:.1f}–{o['p75'] * 1e6:.1f} "
                f"| {f['p25'] * 1e6:.1f}–{f['p75'] * 1e6:.1f} | {r['rel_diff']:.1e} |")
        lines.append("")
    common.write_md(path, lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer sizes and samples (~1 min on CPU)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--dtypes", default=None,
                    help="comma-separated (default: cpu float32[,bfloat16 in full mode]; "
                         "cuda float16,bfloat16)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(),
                    help="torch.set_num_threads (default: the machine's cores)")
    ap.add_argument("--rules", default=None, help="comma-separated subset of rules")
    ap.add_argument("--out", default=None, help="results stem (default bench/results/kernels, kernels_quick with --quick)")
    ap.add_argument("--write-table", action="store_true",
                    help="regenerate pypm_verified/torch/profitability.json for this device "
                         "from the results")
    ap.add_argument("--from-json", default=None,
                    help="no timing: rewrite the Markdown of a results JSON (and, with "
                         "--write-table, derive the table from it)")
    args = ap.parse_args(argv)

    if args.from_json:
        src = Path(args.from_json)
        data = json.loads(src.read_text())
        write_md(src.with_suffix(".md"), data["meta"], data["rows"])
        print(f"wrote {src.with_suffix('.md')}")
        if args.write_table:
            print(f"wrote {profitability.write_table(data['rows'], data['meta'])}")
        return 0

    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: no CUDA device available")
    torch.set_num_threads(args.threads)
    if args.dtypes:
        dtypes = [getattr(torch, d) for d in args.dtypes.split(",")]
    elif args.device == "cuda":
        dtypes = [torch.float16, torch.bfloat16]
    else:
        dtypes = [torch.float32] + ([] if args.quick else [torch.bfloat16])
    wanted = set(args.rules.split(",")) if args.rules else None
    budget, mins, maxs = (0.15, 5, 15) if args.quick else (0.4, 7, 31)

    meta = {
        "device": args.device, "quick": args.quick, "threads": torch.get_num_threads(),
        "torch": torch.__version__, "python": platform.python_version(),
        "machine": (torch.cuda.get_device_name() if args.device == "cuda"
                    else f"{common.machine()}, {os.cpu_count()} cores"),
        "when": common.when(),
        "mkldnn": torch.backends.mkldnn.is_available(),
        "loadavg_start": common.loadavg(),
        "argv": " ".join(common.display_argv(sys.argv[1:])),
    }
    rows = []
    t_start = time.perf_counter()
    for rule, variant, dt, sizes, make in configs(args.quick, args.device, dtypes):
        if wanted and rule not in wanted:
            continue
        f_orig, f_fused = make()
        rel = check_numerics(f_orig, f_fused, dt)
        t = time_pair(f_orig, f_fused, args.device, budget, mins, maxs)
        row = {"rule": rule, "variant": variant, "dtype": str(dt).replace("torch.", ""),
               "sizes": sizes, "orig": t["orig"], "fused": t["fused"],
               "ratio": t["orig"]["median"] / t["fused"]["median"],
               "ratio_min": t["orig"]["min"] / t["fused"]["min"], "rel_diff": rel}
        rows.append(row)
        print(f"{rule:10s} {variant:9s} {row['dtype']:8s} {_fmt_sizes(sizes):42s} "
              f"orig {t['orig']['median'] * 1e6:9.1f}us fused {t['fused']['median'] * 1e6:9.1f}us "
              f"ratio {row['ratio']:5.2f} (min {row['ratio_min']:5.2f})  rel {rel:.1e}", flush=True)
    meta["wall_s"] = round(time.perf_counter() - t_start, 1)
    meta["loadavg_end"] = common.loadavg()

    common.results_dir()
    stem = Path(args.out).resolve() if args.out else RESULTS / common.stem("kernels", args.quick)
    try:
        meta["results"] = str(stem.with_suffix(".json").relative_to(ROOT))
    except ValueError:
        meta["results"] = str(stem.with_suffix(".json"))
    common.write_json(stem.with_suffix(".json"), {"meta": meta, "rows": rows}, indent=1)
    write_md(stem.with_suffix(".md"), meta, rows)
    print(f"wrote {stem.with_suffix('.json')} and {stem.with_suffix('.md')} "
          f"({meta['wall_s']} s)")
    if args.write_table:
        print(f"wrote {profitability.write_table(rows, meta)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
