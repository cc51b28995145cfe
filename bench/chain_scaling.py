"""Chain scaling: PwChain (Figure 14: a recursive pattern over a chain of
unary pointwise ops ending at a MatMul) on chains of growing depth.

1. The reference engine's single match at the top of the chain: peak memory
   growth (VmHWM, in a subprocess under a 6 GB address-space limit) and time,
   before (the version at ``--before``, which copied the substitution at
   every binding) and after (this checkout: one store per search and a
   trail undone on backtracking).
2. The reference engine's ``match_all`` loop (a search per node), before and
   after, on short chains.
3. The verified engine's ``match_all``: time at n nodes, and the steps per
   root (the least fuel that answers, by bisection; the reference engine's
   exact count beside it). Each root's search walks the chain to the
   MatMul, so the steps grow linearly with the root's depth and the n
   searches take about n^2/2 times the steps per level: the quadratic is
   the one-search-per-root contract, and time / steps shows whether
   anything else grows.

All measured side by side in one run; on a shared machine read the ratios.
Writes bench/results/chain_scaling.json and .md (chain_scaling_quick.* with
--quick).
Usage: python bench/chain_scaling.py [--quick] [--before REV]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

import common

REF_PATH = "python/pypm_verified/engines/reference.py"
# the last version that copied the substitution at every binding
DEFAULT_BEFORE = "f3ce0c1"
LIMIT_MB = 6144


def chain(depth):
    """MatMul(a, b) under ``depth`` Relu: the top node."""
    import pypm_verified as pm
    import paper_ops as po
    g = pm.Graph()
    x = po.MatMul(g.input("a"), g.input("b"))
    for _ in range(depth):
        x = po.Relu(x)
    return g, x


def load_reference(path):
    """The reference module at ``path`` (a file), or this checkout's."""
    if path is None:
        from pypm_verified.engines import reference
        return reference
    spec = importlib.util.spec_from_file_location("pypm_verified.engines._reference_before", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def hwm_mb():
    with open("/proc/self/status") as f:
        return int([ln for ln in f if ln.startswith("VmHWM:")][0].split()[1]) / 1024


def child(path, depth):
    """One single match in this (fresh) process: prints a JSON line."""
    import resource
    lim = LIMIT_MB << 20
    resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    import paper_ops as po
    ref = load_reference(path)
    g, x = chain(depth)
    base = hwm_mb()
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        sol = ref.first_solution(po.PwChain.program, x, fuel=1 << 40)
        answer = "match" if sol is not None and sol[0][0] is x else repr(sol)
    except MemoryError:
        answer = "MemoryError"
    cpu, dt = time.process_time() - c0, time.perf_counter() - t0
    print(json.dumps({"answer": answer, "s": cpu, "wall_s": dt, "growth_mb": hwm_mb() - base}))


def run_child(path, depth):
    args = [sys.executable, __file__, "--child", path or "-", str(depth)]
    r = subprocess.run(args, capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        return {"answer": "failed: " + r.stderr.strip().splitlines()[-1]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def steps_verified(node):
    """The least fuel with which the verified engine answers at ``node``."""
    import pypm_verified as pm
    import paper_ops as po
    lo, hi = 1, 1 << 26
    while lo < hi:
        mid = (lo + hi) // 2
        try:
            pm.match(po.PwChain, node, fuel=mid)
            hi = mid
        except pm.OutOfFuel:
            lo = mid + 1
    return lo


def steps_reference(node):
    """The reference engine's exact count (ST-SUCCESS included)."""
    import paper_ops as po
    from pypm_verified.engines import reference
    big = 1 << 40
    f = reference.Fuel(big)
    next(reference.solutions(po.PwChain.program, node, fuel=f))
    return big - f.left + 1


def ratio(a, b):
    return f"{a / b:.2f}x" if b else "-"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--before", default=DEFAULT_BEFORE,
                    help="git revision of the reference engine to compare with")
    ap.add_argument("--child", nargs=2, metavar=("PATH", "DEPTH"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(None if args.child[0] == "-" else args.child[0], int(args.child[1]))
        return 0

    import pypm_verified as pm
    import paper_ops as po

    depths = (1000, 3000) if args.quick else (1000, 3000, 10000)
    ref_ns = (150, 300) if args.quick else (250, 500)
    ver_ns = (300, 600, 900) if args.quick else (1000, 2000, 3000)

    src = common.git("show", f"{args.before}:{REF_PATH}")
    tmp = tempfile.mkdtemp(prefix="chain_scaling_")
    before_path = None
    if src is not None:
        before_path = os.path.join(tmp, "reference_before.py")
        with open(before_path, "w") as f:
            f.write(src + "\n")
    before_rev = common.git("rev-parse", "--short", args.before) if src else None

    # 1. single match, memory and time, each in its own process
    single = []
    for d in depths:
        row = {"depth": d, "after": run_child(None, d)}
        if before_path:
            row["before"] = run_child(before_path, d)
        single.append(row)
        print("single", json.dumps(row), flush=True)

    # 2. the reference engine's match_all loop, before and after
    after_ref = load_reference(None)
    before_ref = load_reference(before_path) if before_path else None
    ref_all = []
    for n in ref_ns:
        g, _ = chain(n - 3)
        row = {"nodes": n}
        for name, mod in (("after", after_ref), ("before", before_ref)):
            if mod is None:
                continue
            t0 = time.process_time()
            found = sum(mod.first_solution(po.PwChain.program, v) is not None for v in g.nodes)
            row[name + "_s"] = time.process_time() - t0
            row[name + "_matches"] = found
        ref_all.append(row)
        print("reference match_all", json.dumps(row), flush=True)

    # 3. the verified match_all: time, and steps per root
    ver = []
    for n in ver_ns:
        g, top = chain(n - 3)
        pm.match(po.PwChain, top)  # warm: the graph's handle
        t0, c0 = time.perf_counter(), time.process_time()
        res = pm.match_all([po.PwChain], g)
        median, wall = time.process_time() - c0, time.perf_counter() - t0
        relus = [v for v in g.nodes if v.label == top.label]
        probes = [relus[len(relus) // 4], relus[len(relus) // 2], relus[-1]]
        per_root = []
        for v in probes:
            k = relus.index(v) + 1  # Relus below and including v
            per_root.append({"depth": k, "verified": steps_verified(v),
                             "reference": steps_reference(v)})
        mm = g.nodes[2]
        s_mm = steps_verified(mm)
        (k1, s1), (k2, s2) = [(p["depth"], p["verified"]) for p in (per_root[0], per_root[-1])]
        a = (s2 - s1) / (k2 - k1)
        b = s1 - a * k1
        linear = all(abs(a * p["depth"] + b - p["verified"]) < 1 for p in per_root)
        total = s_mm + sum(a * k + b for k in range(1, len(relus) + 1))
        row = {"nodes": n, "matches": len(res), "s": median, "wall_s": wall, "per_root": per_root,
               "matmul_steps": s_mm, "per_level": a, "offset": b, "linear": linear,
               "total_steps": int(total)}
        ver.append(row)
        print("verified match_all", json.dumps(row), flush=True)

    data = {"when": common.when(), "commit": common.git_commit(short=True),
            "dirty": common.git_dirty(), "machine": common.machine(),
            "loadavg": common.loadavg(), "before": before_rev,
            "single": single, "reference_match_all": ref_all, "verified_match_all": ver}
    out = common.results_dir()
    stem = common.stem("chain_scaling", args.quick)
    common.write_json(out / f"{stem}.json", data)

    la = data["loadavg"]
    lines = [
        "# Chain scaling: PwChain over a chain of pointwise ops",
        "",
        f"{data['when']}, commit {data['commit']}{' (dirty)' if data['dirty'] else ''}, "
        f"{data['machine']}; load average "
        + (" / ".join(f"{v:.1f}" for v in la) if la else "n/a")
        + " (1 / 5 / 15 min): a shared machine, so read the ratios, not the seconds. "
        "Times are the process's CPU seconds (less sensitive to the other processes than "
        "wall time; the JSON has both).",
        "",
        "`bench/chain_scaling.py`: `MatMul(a, b)` under d `Relu`; `PwChain` (Figure 14) binds "
        "x at the top and a, b at the MatMul's inputs.",
        "",
        "## Reference engine, one match at the top (each in a fresh process)",
        "",
        f"before: the reference engine at {before_rev or 'n/a'} (copied the substitution at "
        "every binding, and every choice point kept its copy); after: one store per search, "
        "bindings on a trail undone on backtracking. Growth: VmHWM after the match minus "
        f"before it, under a {LIMIT_MB // 1024} GB address-space limit.",
        "",
        "| depth | before MB | after MB | before/after | before s | after s | before/after |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in single:
        a_, b_ = r["after"], r.get("before", {})
        if "growth_mb" in b_:
            lines.append(f"| {r['depth']} | {b_['growth_mb']:.0f} | {a_['growth_mb']:.0f} | "
                         f"{ratio(b_['growth_mb'], a_['growth_mb'])} | {b_['s']:.2f} | "
                         f"{a_['s']:.2f} | {ratio(b_['s'], a_['s'])} |")
        else:
            lines.append(f"| {r['depth']} | {b_.get('answer', 'n/a')} | {a_['growth_mb']:.0f} "
                         f"| - | - | {a_['s']:.2f} | - |")
    d0, d1 = single[0], single[-1]
    k = d1["depth"] / d0["depth"]
    lines += ["", f"Depth x{k:.0f} ({d0['depth']} to {d1['depth']}): after, memory "
              f"{ratio(d1['after']['growth_mb'], d0['after']['growth_mb'])} and time "
              f"{ratio(d1['after']['s'], d0['after']['s'])} (linear: {k:.0f}x)"]
    if "growth_mb" in d1.get("before", {}):
        lines[-1] += (f"; before, memory {ratio(d1['before']['growth_mb'], d0['before']['growth_mb'])}"
                      f" and time {ratio(d1['before']['s'], d0['before']['s'])} "
                      f"(quadratic: {k * k:.0f}x)")
    lines[-1] += "."
    lines += ["", "## Reference engine, a search per node (match_all's loop)", "",
              "| nodes | matches | before s | after s | before/after |", "|---|---|---|---|---|"]
    for r in ref_all:
        bs = r.get("before_s")
        lines.append(f"| {r['nodes']} | {r['after_matches']} | "
                     f"{'-' if bs is None else f'{bs:.2f}'} | {r['after_s']:.2f} | "
                     f"{'-' if bs is None else ratio(bs, r['after_s'])} |")
    if len(ref_all) > 1:
        r0, r1 = ref_all[0], ref_all[-1]
        k = r1["nodes"] / r0["nodes"]
        lines += ["", f"Nodes x{k:.0f}: after {ratio(r1['after_s'], r0['after_s'])} "
                  f"(quadratic: {k * k:.0f}x)"
                  + (f", before {ratio(r1['before_s'], r0['before_s'])} (cubic: {k ** 3:.0f}x)"
                     if "before_s" in r0 else "") + "."]
    lines += ["", "## Verified engine, match_all", "",
              "Steps per root: the least fuel that answers (bisection); the reference engine "
              "counts the same steps exactly. Total steps: the sum over every node, from the "
              "per-root line (checked at the probed roots; the MatMul measured).", "",
              "| nodes | matches | s | steps per root (depth: verified / reference) | "
              "steps per level | total steps | us per step |",
              "|---|---|---|---|---|---|---|"]
    for r in ver:
        probes = ", ".join(f"{p['depth']}: {p['verified']} / {p['reference']}"
                           for p in r["per_root"])
        lines.append(f"| {r['nodes']} | {r['matches']} | {r['s']:.2f} | {probes} | "
                     f"{r['per_level']:g}{'' if r['linear'] else ' (not linear)'} | "
                     f"{r['total_steps']} | {r['s'] / r['total_steps'] * 1e6:.2f} |")
    v0 = ver[0]
    lines += ["", "| nodes | time ratio | total steps ratio | (n/n0)^2 |", "|---|---|---|---|"]
    for r in ver:
        lines.append(f"| {r['nodes']} | {ratio(r['s'], v0['s'])} | "
                     f"{ratio(r['total_steps'], v0['total_steps'])} | "
                     f"{(r['nodes'] / v0['nodes']) ** 2:.2f}x |")
    v1 = ver[-1]
    per_step = (v1["s"] / v1["total_steps"]) / (v0["s"] / v0["total_steps"])
    lines += ["", "Each root's search is linear in its depth ("
              + ("a fixed number of steps per level at every probed root"
                 if all(r["linear"] for r in ver) else "NOT at every probed root")
              + ") and walks to the MatMul, so n searches take about (steps per level) x "
              "n^2 / 2 steps: the quadratic is inherent to one search per root. Time per "
              f"step, {v1['nodes']} nodes against {v0['nodes']}: {per_step:.2f}x."]
    for ln in common.write_md(out / f"{stem}.md", lines):
        print(ln)
    return 0


if __name__ == "__main__":
    sys.exit(main())
