"""Full-calculus benchmark: the paper's MatMulEpilog (recursion, a local
operator variable with an op-class guard, a local term variable, match
constraints) and UnaryChain (an operator-variable parameter) over a graph of
MatMul → pointwise chains, verified vs reference engine, side by side.

Writes bench/results/calculus.json and bench/results/calculus.md (calculus_quick.*
with --quick).
Usage: python bench/bench_calculus.py [--quick] [--nodes N]
"""
import argparse
import random

import common
from common import timed

import pypm_verified as pm
from paper_ops import Gelu, MatMul, MatMulEpilog, Relu, Softmax, Tanh, UnaryChain


def epilog_graph(n_nodes, max_chain=8, seed=0):
    """Blocks MatMul(h, w) → k pointwise ops (k uniform in 0..max_chain, ops
    drawn from Relu/Gelu/Tanh) → sometimes a Softmax; each block feeds the
    next, so chains are long and every node is a candidate root."""
    rng = random.Random(seed)
    g = pm.Graph()
    h = g.input("x", shape=(64, 64), dtype=pm.f32)
    i = 0
    while len(g) + max_chain + 3 <= n_nodes:
        w = g.input(f"w{i}", shape=(64, 64), dtype=pm.f32)
        h = g.apply(MatMul, h, w, shape=(64, 64), dtype=pm.f32)
        for _ in range(rng.randint(0, max_chain)):
            h = g.apply(rng.choice((Relu, Gelu, Tanh)), h, shape=(64, 64), dtype=pm.f32)
        if rng.random() < 0.3:
            h = g.apply(Softmax, h, shape=(64, 64), dtype=pm.f32)
        i += 1
    return g


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--nodes", type=int, default=10_000)
    args = ap.parse_args()
    repeat = 3 if args.quick else 7
    g = epilog_graph(args.nodes)
    rows = {}
    for name, pats in (("MatMulEpilog", [MatMulEpilog]), ("UnaryChain", [UnaryChain])):
        for engine in ("verified", "reference"):
            pm.match_all(pats, g, engine=engine)  # warm: handles, lowering
        res = {}
        for engine in ("verified", "reference"):
            t, _, found = timed(lambda: pm.match_all(pats, g, engine=engine), repeat)
            res[engine] = {"seconds": t, "matches": len(found),
                           "bindings": sorted((r.id, tuple(sorted((k, v.id) for k, v in
                                                                   m.bindings.items())))
                                              for _, r, m in found)}
        # same matches, same bindings, from both engines
        assert res["verified"]["bindings"] == res["reference"]["bindings"], name
        rows[name] = {"matches": res["verified"]["matches"],
                      "verified_ms": res["verified"]["seconds"] * 1e3,
                      "reference_ms": res["reference"]["seconds"] * 1e3,
                      "speedup": res["reference"]["seconds"] / res["verified"]["seconds"]}
    out = {"nodes": len(g), "repeat": repeat, "patterns": rows}
    results, stem = common.results_dir(), common.stem("calculus", args.quick)
    common.write_json(results / f"{stem}.json", out)
    md = [f"# Full-calculus benchmark: match_all over {len(g)} nodes of MatMul → pointwise "
          f"chains (medians of {repeat} runs, one process)", "",
          "| pattern | matches | verified (ms) | reference (ms) | reference / verified |",
          "|---|---|---|---|---|"]
    for name, r in rows.items():
        md.append(f"| {name} | {r['matches']} | {r['verified_ms']:.1f} | {r['reference_ms']:.1f} "
                  f"| {r['speedup']:.2f}x |")
    md += ["", "Both engines return the same matches with the same bindings (checked)."]
    print("\n".join(common.write_md(results / f"{stem}.md", md)))


if __name__ == "__main__":
    main()
