"""The model section of bench/bench_search.py: greedy vs search on the
example models, predicted cost (pypm_verified.torch.cost) and measured
eager latency, and the cost model's rank correlation with latency.

Per model (examples/models.py, ``bench`` width, 1 layer, its example
inputs), the variants: the original program; greedy with the rule library
as shipped (``guarded``: profitability guards read the measured table);
greedy with every rule forced (``check_profitability=False``); beam and
best-first search over the driver's choices with the rules forced
(pypm_verified.torch.search; 16 driver runs, beam width 4, depth 4). Each
variant's outputs are compared with the original's (``check_numerics``),
and its latency measured eagerly on 1 thread, the variants interleaved in
rotated order each round (medians).
"""
from __future__ import annotations

import statistics
import time
from typing import List, Optional

import torch

import common  # noqa: F401

import models as M
from pypm_verified.torch.cost import CostModel, calibrate
from pypm_verified.torch.loader import load_model
from pypm_verified.torch.pipeline import check_numerics, rewrite_program
from pypm_verified.torch.search import search_program


def ranks(xs: List[float]) -> List[float]:
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    r = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2.0
        i = j + 1
    return r


def spearman(a: List[float], b: List[float]) -> Optional[float]:
    if len(a) < 3:
        return None
    ra, rb = ranks(a), ranks(b)
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra) ** 0.5
    vb = sum((y - mb) ** 2 for y in rb) ** 0.5
    return None if va == 0 or vb == 0 else cov / (va * vb)


def latencies(progs, args, kwargs, rounds: int, warmup: int = 3):
    """(median, min) seconds per program, the programs interleaved in
    rotated order each round."""
    mods = [p.module() for p in progs]
    times = [[] for _ in mods]
    with torch.inference_mode():
        for m in mods:
            for _ in range(warmup):
                m(*args, **kwargs)
        for r in range(rounds):
            for k in range(len(mods)):
                i = (k + r) % len(mods)
                t0 = time.perf_counter()
                mods[i](*args, **kwargs)
                times[i].append(time.perf_counter() - t0)
    return [(statistics.median(t), min(t)) for t in times]


class Mlp(torch.nn.Module):
    """``silu(linear(relu(linear(x))))`` on one token: the sizes where the
    kernel measurements say both ``linear_act`` fusions are slower than
    linear + activation on this CPU (greedy with the rules forced fires
    them; the cost model says not to)."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(256, 1024)
        self.b = torch.nn.Linear(1024, 256)

    def forward(self, x):
        return torch.nn.functional.silu(self.b(torch.relu(self.a(x))))


def _build(name):
    if name == "mlp":
        torch.manual_seed(0)
        return load_model(Mlp(), (torch.randn(1, 256),))
    m, inputs = M.build(name, "bench", 1)
    return load_model(m, (), M.input_kwargs(inputs))


def model_section(quick: bool, names=None):
    torch.set_num_threads(1)
    names = names or (["bert", "gpt2", "llama", "mlp"] if quick else list(M.MODELS) + ["mlp"])
    rounds = 15 if quick else 41
    machine = calibrate("cpu")
    cm = CostModel("cpu", machine=machine)
    data, rows = [], []
    for name in names:
        print(f"model {name}", flush=True)
        try:
            prog = _build(name)
        except Exception as e:  # noqa: BLE001 -- recorded, the benchmark goes on
            data.append({"model": name, "error": f"{type(e).__name__}: {e}"})
            continue
        variants = [("original", prog.ep, {}, None, None)]
        g = rewrite_program(prog, check=False)
        variants.append(("greedy (guarded)", g.ep, g.report.firings, None, None))
        for strat in ("greedy", "beam", "best_first"):
            s = search_program(prog, None, strat, check_profitability=False, max_expansions=16,
                               beam_width=4, max_depth=4, cost=cm)
            variants.append((f"{strat.replace('_', '-')} (forced)", s.result.ep,
                             s.result.report.firings, sorted(s.skipped), s))
        lat = latencies([v[1] for v in variants], prog.args, prog.kwargs, rounds)
        for (label, ep, firings, skipped, s), (t, t_min) in zip(variants, lat):
            num = None
            if label != "original":
                n, _ = check_numerics(prog, ep, 1)
                num = bool(n.ok)
            row = {"model": name, "variant": label, "predicted_s": cm.graph_cost(
                ep.graph_module.graph), "measured_s": t, "measured_min_s": t_min, "firings": firings,
                "skipped": skipped, "numerics_ok": num,
                "search": None if s is None else s.as_dict()}
            rows.append(row)
            data.append(row)
    md = ["## Example models: greedy vs search", "",
          "Each model of `examples/models.py` at the `bench` width, 1 layer, its example "
          "inputs, CPU, 1 thread, and `mlp`: `silu(linear(relu(linear(x))))` on one token "
          "(256 -> 1024 -> 256), where the kernel measurements say both `linear_act` fusions "
          "are slower than linear + activation. Variants: the original; greedy with the rules as shipped "
          "(`guarded`: the profitability guards read the measured table); greedy with every "
          "rule forced (`check_profitability=False`); beam and best-first search (ordered by "
          "predicted cost, no heuristic) over the driver's choices "
          "(`pypm_verified.torch.search`: a state is the set of firings the driver skips) "
          "with the rules forced, 16 driver runs, beam width 4, depth 4. `predicted` is the "
          "cost model's (`pypm_verified.torch.cost`, roofline plus the measured kernel "
          "profiles, machine constants calibrated at the start of the run: "
          f"{machine['flops'] / 1e9:.1f} GFLOP/s GEMM, {machine['bandwidth'] / 1e9:.1f} GB/s, "
          f"{machine['overhead'] * 1e6:.1f} us per kernel, exp = {machine['transcendental']:.0f} "
          "FLOPs), `measured` the median and minimum eager latency (variants interleaved, "
          f"{rounds} rounds; the machine is shared, the minimum is the steadier). `numerics` compares the variant's outputs with the original's "
          "(example and one random input set).", "",
          "| model | variant | predicted ms | measured ms (median) | measured ms (min) | "
          "firings | skipped by search | numerics |", "|---|---|---:|---:|---:|---|---|---|"]
    for r in data:
        if "error" in r:
            md.append(f"| {r['model']} | error: {r['error'][:120]} | | | | | | |")
            continue
        fir = ", ".join(f"{k} {v}" for k, v in sorted(r["firings"].items())) or "--"
        sk = ", ".join(f"{a}@{b}" for a, b in r["skipped"]) if r["skipped"] else ""
        md.append(f"| {r['model']} | {r['variant']} | {r['predicted_s'] * 1e3:.3f} | "
                  f"{r['measured_s'] * 1e3:.3f} | {r['measured_min_s'] * 1e3:.3f} | {fir} | {sk} | "
                  f"{'' if r['numerics_ok'] is None else ('ok' if r['numerics_ok'] else 'FAIL')} |")
    md.append("")
    rho = spearman([r["predicted_s"] for r in rows], [r["measured_min_s"] for r in rows])
    rho_med = spearman([r["predicted_s"] for r in rows], [r["measured_s"] for r in rows])
    per = {}
    for name in dict.fromkeys(r["model"] for r in rows):
        rs = [r for r in rows if r["model"] == name]
        per[name] = spearman([r["predicted_s"] for r in rs], [r["measured_min_s"] for r in rs])
    md.append("Rank correlation (Spearman) of predicted cost with measured latency (min): "
              + ("n/a" if rho is None else f"{rho:.2f}") + f" over all {len(rows)} rows ("
              + ("n/a" if rho_med is None else f"{rho_med:.2f}") + " with the medians); "
              "within each model: " + ", ".join(
                  f"{k} {'n/a' if v is None else format(v, '.2f')}" for k, v in per.items())
              + " (within a model the variants differ by a few percent, inside the "
              "machine's noise, so those are weak).")
    better = [r for r in rows if r["variant"] in ("beam (forced)", "best-first (forced)")
              and r["skipped"]]
    if better:
        md.append("")
        md.append("Where search skipped a firing greedy made (same rules, same cost model): "
                  + "; ".join(f"{r['model']} {r['variant']}: predicted "
                              f"{r['search']['greedy_cost'] * 1e3:.3f} -> "
                              f"{r['search']['cost'] * 1e3:.3f} ms" for r in better) + ".")
    md.append("")
    return {"rows": data, "machine": machine, "spearman": rho, "spearman_median": rho_med,
            "spearman_per_model": per}, md
