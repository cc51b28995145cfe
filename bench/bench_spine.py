"""Spine benchmarks: cost of one call through cffi, and match_all throughput
on a 100k-node graph, verified vs reference engine, measured side by side.

Writes bench/results/spine.json and bench/results/spine.md (spine_quick.*
with --quick).
Usage: python bench/bench_spine.py [--quick]
"""
import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import pypm_verified as pm

from bench_ops import MatMul, Trans


@pm.pattern
def MMxyT(x, y):
    assert x.shape.rank == 2 and y.shape.rank == 2
    return MatMul(x, Trans(y))


def chain_graph(n_nodes):
    """MatMul(prev, Trans(w_i)) chains: a third of the nodes are MMxyT roots."""
    g = pm.Graph()
    prev = g.input("x", shape=(64, 64), dtype=pm.f32)
    i = 0
    while len(g) + 3 <= n_nodes:
        w = g.input(f"w{i}", shape=(64, 64), dtype=pm.f32)
        prev = g.apply(MatMul, prev, g.apply(Trans, w, shape=(64, 64), dtype=pm.f32),
                       shape=(64, 64), dtype=pm.f32)
        i += 1
    return g, prev


def timed(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    n_nodes = 10_000 if args.quick else 100_000
    repeat = 3 if args.quick else 5

    g, root = chain_graph(n_nodes)
    # warm both engines (graph encoding and handle caching happen once)
    pm.match(MMxyT, root, engine="verified")
    pm.match(MMxyT, root, engine="reference")

    calls = 2_000 if args.quick else 20_000
    per_call = {}
    for engine in ("verified", "reference"):
        t, _ = timed(lambda: [pm.match(MMxyT, root, engine=engine) for _ in range(calls)], repeat)
        per_call[engine] = t / calls * 1e6

    # the bare C call through cffi, handles already loaded (no Python wrapping)
    from pypm_verified.engines import binding
    lib = binding.open_library()
    from pypm_verified.engines.matching import PreparedPatterns
    s = PreparedPatterns([MMxyT])
    gh = binding.graph_handle(lib, g)
    ph = binding.pattern_set_handle(lib, s.defs, s.roots)
    out = binding.ffi.new("int64_t[]", 16)
    out_len = binding.ffi.new("size_t *")
    call = lib.pypm_match
    t, _ = timed(lambda: [call(gh.value, ph.value, 0, root.id, 0, out, 16, out_len)
                          for _ in range(calls)], repeat)
    raw = t / calls * 1e6

    res = {}
    for engine in ("verified", "reference"):
        t, found = timed(lambda: pm.match_all([MMxyT], g, engine=engine), repeat)
        res[engine] = {"seconds": t, "matches": len(found), "matches_per_s": len(found) / t,
                       "nodes_per_s": len(g) / t}
    assert res["verified"]["matches"] == res["reference"]["matches"]

    out = {
        "machine": platform.processor() or platform.machine(),
        "nodes": len(g),
        "pm_match_us_per_call": per_call,
        "raw_cffi_us_per_call": raw,
        "match_all": res,
        "match_all_speedup_verified_over_reference":
            res["reference"]["seconds"] / res["verified"]["seconds"],
    }
    results = Path(__file__).parent / "results"
    results.mkdir(exist_ok=True)
    suffix = "_quick" if args.quick else ""
    (results / f"spine{suffix}.json").write_text(json.dumps(out, indent=2))
    md = [f"# Spine benchmark ({len(g)} nodes, medians of {repeat} runs, one process)", "",
          "| measure | verified | reference |", "|---|---|---|",
          f"| `pm.match` per call (µs) | {per_call['verified']:.1f} | {per_call['reference']:.1f} |",
          f"| bare `pypm_match` through cffi (µs) | {raw:.2f} | – |",
          f"| `match_all` time (ms) | {res['verified']['seconds']*1e3:.1f} | {res['reference']['seconds']*1e3:.1f} |",
          f"| `match_all` matches/s | {res['verified']['matches_per_s']:,.0f} | {res['reference']['matches_per_s']:,.0f} |",
          "", f"verified/reference speedup on match_all: {out['match_all_speedup_verified_over_reference']:.1f}x"]
    (results / f"spine{suffix}.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
