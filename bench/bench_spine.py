"""Spine benchmarks: cost of one call through cffi, and match_all throughput
on a 100k-node graph, verified vs reference engine, measured side by side.

Writes bench/results/spine.json and bench/results/spine.md (spine_quick.*
with --quick).
Usage: python bench/bench_spine.py [--quick]
"""
import argparse

import common
from common import timed

import pypm_verified as pm
from paper_ops import MatMul, MMxyT, Trans


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
        t, _, _ = timed(lambda: [pm.match(MMxyT, root, engine=engine) for _ in range(calls)],
                        repeat)
        per_call[engine] = t / calls * 1e6

    # the bare C call through cffi, handles already loaded (no Python wrapping)
    from pypm_verified.engines import binding
    lib = binding.open_engine_library()
    from pypm_verified.engines.matching import PreparedPatterns
    s = PreparedPatterns([MMxyT])
    gh = binding.graph_handle(lib, g)
    ph = binding.pattern_set_handle(lib, s.defs, s.roots)
    out = binding.ffi.new("int64_t[]", 16)
    out_len = binding.ffi.new("size_t *")
    call = lib.pypm_match
    t, _, _ = timed(lambda: [call(gh.value, ph.value, 0, root.id, 0, out, 16, out_len)
                             for _ in range(calls)], repeat)
    raw = t / calls * 1e6

    res = {}
    for engine in ("verified", "reference"):
        t, _, found = timed(lambda: pm.match_all([MMxyT], g, engine=engine), repeat)
        res[engine] = {"seconds": t, "matches": len(found), "matches_per_s": len(found) / t,
                       "nodes_per_s": len(g) / t}
    assert res["verified"]["matches"] == res["reference"]["matches"]

    out = {
        "machine": common.machine(),
        "nodes": len(g),
        "pm_match_us_per_call": per_call,
        "raw_cffi_us_per_call": raw,
        "match_all": res,
        "match_all_speedup_verified_over_reference":
            res["reference"]["seconds"] / res["verified"]["seconds"],
    }
    results, stem = common.results_dir(), common.stem("spine", args.quick)
    common.write_json(results / f"{stem}.json", out)
    md = [f"# Spine benchmark ({len(g)} nodes, medians of {repeat} runs, one process)", "",
          "| measure | verified | reference |", "|---|---|---|",
          f"| `pm.match` per call (µs) | {per_call['verified']:.1f} | {per_call['reference']:.1f} |",
          f"| bare `pypm_match` through cffi (µs) | {raw:.2f} | – |",
          f"| `match_all` time (ms) | {res['verified']['seconds']*1e3:.1f} | {res['reference']['seconds']*1e3:.1f} |",
          f"| `match_all` matches/s | {res['verified']['matches_per_s']:,.0f} | {res['reference']['matches_per_s']:,.0f} |",
          "", f"verified/reference speedup on match_all: {out['match_all_speedup_verified_over_reference']:.1f}x"]
    print("\n".join(common.write_md(results / f"{stem}.md", md)))


if __name__ == "__main__":
    main()
