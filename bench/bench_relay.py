"""Commutative operators: how much the alternate over argument orders costs.

``@pm.op(commutative=True)`` lowers every application ``f(a, b)`` to
``f(a, b) ‖ f(b, a)`` (python/pypm_verified/dsl/relay.py), so a pattern with
``k`` commutative applications has up to ``2^k`` argument orders; the DSL
refuses more than ``MAX_COMMUTATIVE`` (8) in one alternate. This measures,
for ``k`` commutative applications,

* the size of the lowered pattern (nodes of the core term),
* how many orders match a graph of the same shape (``solutions``: every
  match the reference enumeration finds, no guard),
* the machine steps (the reference engine's fuel, which counts the steps of
  ``Interpreter.run``) and the time, in both engines, to answer "no match"
  when a final guard fails -- the whole search, the worst case --

against the same pattern over a non-commutative operator, in two shapes:
``chain`` (``Add(Add(Add(x0, x1), x2), x3)``: the graph's shape fixes the
order at every level but the innermost, so the cost grows linearly) and
``tree`` (a balanced tree of additions over variables: every order matches
structurally, the worst case, ``2^k``).

    python bench/bench_relay.py [--quick]

Writes bench/results/commutative.md and .json (``commutative_quick.*``).
"""
from __future__ import annotations

import argparse
import linecache
import sys
import time

import common  # noqa: F401 -- sys.path

import pypm_verified as pm
from pypm_verified import core
from pypm_verified.engines import reference
from pypm_verified.dsl import relay


@pm.op(commutative=True)
def CAdd(x, y): return 1


@pm.op
def OAdd(x, y): return 1


def _chain(op, k):
    expr = "x0"
    for i in range(1, k + 1):
        expr = f"{op}({expr}, x{i})"
    return expr, k + 1


def _tree(op, depth):
    n = [0]

    def build(d):
        if d == 0:
            n[0] += 1
            return f"x{n[0] - 1}"
        return f"{op}({build(d - 1)}, {build(d - 1)})"
    return build(depth), n[0]


def _pattern(name, expr, nvars, fail):
    params = ", ".join(f"x{i}" for i in range(nvars))
    guard = "    assert x0.rank == 99\n" if fail else ""
    code = f"@pm.pattern\ndef {name}({params}):\n{guard}    return {expr}\n"
    fname = f"<bench-relay-{name}>"
    linecache.cache[fname] = (len(code), None, code.splitlines(True), fname)
    ns = {"pm": pm, "CAdd": CAdd, "OAdd": OAdd}
    exec(compile(code, fname, "exec"), ns)
    return ns[name]


def _graph(shape, size, swap):
    """The pattern's shape; ``swap``: the chain's arguments in the other order
    at every other level (what only a commutative pattern matches)."""
    g = pm.Graph()
    if shape == "chain":
        t = g.input("y0", shape=(2,))
        for i in range(1, size + 1):
            t = g.apply(OAdd, g.input(f"y{i}", shape=(2,)), t) if swap and i % 2 else \
                g.apply(OAdd, t, g.input(f"y{i}", shape=(2,)))
        return t
    n = [0]

    def build(d):
        if d == 0:
            n[0] += 1
            return g.input(f"y{n[0]}", shape=(2,))
        return g.apply(OAdd, build(d - 1), build(d - 1))
    return build(size)


def _relabel(g_root, op):
    """The same graph with ``op`` at every application (commutative or not)."""
    g = pm.Graph()
    memo = {}

    def copy(n):
        if n.id in memo:
            return memo[n.id]
        out = g.input(n.name, shape=n.shape) if n.kind == "input" else \
            g.apply(op, *[copy(a) for a in n.args])
        memo[n.id] = out
        return out
    return copy(g_root)


def _count(P, node):
    start = 1 << 40
    fuel = reference.Fuel(start)
    sols = sum(1 for _ in reference.solutions(P.program, node, fuel=fuel))
    return sols, start - fuel.left


def _time(P, node, engine, reps):
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        pm.match(P, node, engine=engine)
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    reps = 3 if args.quick else 15
    cases = [("chain", k, k) for k in range(1, relay.MAX_COMMUTATIVE + 1)]
    cases += [("tree", 2 ** d - 1, d) for d in (1, 2, 3)]
    rows = []
    for shape, k, size in cases:
        row = {"shape": shape, "k": k}
        for kind, op in (("ordered", "OAdd"), ("commutative", "CAdd")):
            expr, nvars = (_chain if shape == "chain" else _tree)(op, size)
            tag = f"{shape}{k}{kind}"
            P = _pattern(f"P_{tag}", expr, nvars, fail=False)
            F = _pattern(f"F_{tag}", expr, nvars, fail=True)
            node = _graph(shape, size, kind == "commutative")
            node = _relabel(node, CAdd if kind == "commutative" else OAdd)
            row[f"{kind}_size"] = sum(1 for _ in core.walk(P.core))
            row[f"{kind}_solutions"], _ = _count(P, node)
            _, row[f"{kind}_steps"] = _count(F, node)
            row[f"{kind}_verified_us"] = _time(F, node, "verified", reps) * 1e6
            row[f"{kind}_reference_us"] = _time(F, node, "reference", reps) * 1e6
            assert pm.match(F, node) is None and pm.match(P, node) is not None
        row["step_ratio"] = row["commutative_steps"] / row["ordered_steps"]
        rows.append(row)
        print(row, flush=True)
    data = {"when": common.when(), "machine": common.machine(), "loadavg": common.loadavg(),
            "commit": common.git_commit(short=True), "max_commutative": relay.MAX_COMMUTATIVE,
            "rows": rows}
    out = common.results_dir(args.out)
    stem = common.stem("commutative", args.quick)
    common.write_json(out / f"{stem}.json", data)
    lines = [
        "# Commutative operators: the cost of matching either argument order",
        "",
        f"{data['when']}, {data['machine']}, load average {data['loadavg']}, commit "
        f"{data['commit']}; `python bench/bench_relay.py{' --quick' if args.quick else ''}`.",
        "",
        "k commutative applications, lowered to `f(a, b) ‖ f(b, a)` each (at most "
        f"{relay.MAX_COMMUTATIVE} per alternate). Size: nodes of the lowered term. "
        "Solutions: matches the reference enumeration finds on a graph of the pattern's "
        "shape. Steps: machine steps (fuel) to answer 'no match' when a final guard "
        "fails, i.e. the whole search. Time: best of the runs, microseconds, per engine "
        "(including the call's overhead).",
        "",
        "| shape | k | size ordered → comm. | solutions | steps ordered → comm. | "
        "step ratio | verified µs ordered → comm. | reference µs ordered → comm. |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['shape']} | {r['k']} | {r['ordered_size']} → {r['commutative_size']} "
            f"| {r['ordered_solutions']} → {r['commutative_solutions']} "
            f"| {r['ordered_steps']} → {r['commutative_steps']} | {r['step_ratio']:.1f} "
            f"| {r['ordered_verified_us']:.0f} → {r['commutative_verified_us']:.0f} "
            f"| {r['ordered_reference_us']:.0f} → {r['commutative_reference_us']:.0f} |")
    lines += ["", "The lowered term doubles at every nesting level (each alternate repeats "
              "its arguments), so its size grows as 2^depth; the search only pays for the "
              "orders the graph lets through.", "",
              "The bound: a chain's search grows linearly in k (the graph fixes the order "
              "at every level but the innermost); a balanced tree of k applications over "
              "variables is the worst case, 2^k orders, each a solution. At k = 8, at most "
              "2^8 = 256 orders: the DSL refuses a ninth commutative application in one "
              "alternate (split the pattern into patterns that call each other, each "
              "bounded alike)."]
    print("\n".join(common.write_md(out / f"{stem}.md", lines)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
