"""Root order and candidates of multi-root patterns: the same
pattern searched three ways by ``match_all`` (verified engine), on graphs
where the written first root's operator is frequent:

* ``index``: written order, later roots' candidates by the root-operator
  index alone (``Multi.match_all_multi_idx``, the previous version);
* ``users``: written order, candidates by upward traversal — the users of
  a node bound by the earlier roots (``Multi.match_all_multi``);
* ``optimal``: upward traversal in the order ``multi.root_order`` picks.

``Multi.mmatches_perm`` proves any order finds the same sets of nodes; the
benchmark checks that all three report the same sets. Runs are interleaved
(each repetition times the three in turn) and the table gives ratios.

    PYTHONPATH=python python bench/multiroot_order.py [--before-lib OLD.so]

A second table gives the cost of reporting *every* set of nodes
(``Multi.match_all_multi`` now: every tuple at each first root) against the
first tuple per node only (the previous ``match_all``, which lost sets):
the reference engine both ways in this process (the previous loop is kept
below as the baseline), and the verified engine before/after when
``--before-lib`` names a library built from the previous commit (run in a
subprocess with ``PYPM_VERIFIED_LIB``).
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time

import pypm_verified as pm
from pypm_verified.engines import multi

HERE = os.path.dirname(os.path.abspath(__file__))


@pm.op
def Relu(x): return 1


@pm.op
def Lin(x, w, b): return 1


@pm.op
def Mul(x, y): return 1


@pm.op
def Neg(x): return 1


@pm.pattern
def R2(x, w, b):
    return Relu(x), Lin(x, w, b)


@pm.pattern
def R3(x, w, b, v):
    return Relu(x), Lin(x, w, b), Mul(x, v)


@pm.pattern
def R4(x, w, b, v):
    return Relu(x), Lin(x, w, b), Mul(x, v), Neg(x)


def graph(n_frequent: int, n_rare: int, seed: int = 0) -> pm.Graph:
    rnd = random.Random(seed)
    g = pm.Graph()
    xs = [g.input(f"x{i}") for i in range(n_frequent)]
    w, b = g.input("w"), g.input("b")
    for x in xs:
        g.apply(Relu, x)
    for x in rnd.sample(xs, n_rare):
        g.apply(Lin, x, w, b)
        g.apply(Mul, x, w)
        g.apply(Neg, x)
    return g


@pm.pattern
def QK(x, wq, bq, wk, bk):
    return Lin(x, wq, bq), Lin(x, wk, bk)


@pm.pattern
def QKV(x, wq, bq, wk, bk, wv, bv):
    return Lin(x, wq, bq), Lin(x, wk, bk), Lin(x, wv, bv)


def heads(groups: int, per: int) -> pm.Graph:
    """``groups`` inputs, each read by ``per`` Lins (siblings)."""
    g = pm.Graph()
    b = g.input("b")
    for i in range(groups):
        x = g.input(f"x{i}")
        for j in range(per):
            g.apply(Lin, x, g.input(f"w{i}_{j}"), b)
    return g


def first_tuples(pat, g):
    """The previous ``match_all`` (reference engine): the first tuple at
    each node, a set already seen dropped. Loses sets; the baseline."""
    prog = multi.program(pat)
    prog = prog.reordered(multi.root_order(prog, g))
    cands = multi._candidates(prog, g)
    out, seen = [], set()
    for node in g.nodes:
        r = multi._first(prog, node, multi._fuel(None), cands)
        if r is not None and frozenset(t.id for t in r[0]) not in seen:
            seen.add(frozenset(t.id for t in r[0]))
            out.append(r)
    return out


CASES = (("QK", "heads", (200, 2)), ("QK", "heads", (200, 4)), ("QKV", "heads", (200, 3)),
         ("QKV", "heads", (100, 6)), ("R3", "graph", (2000, 20)), ("R3", "graph", (10000, 50)))


def case_graph(kind, args):
    return heads(*args) if kind == "heads" else graph(*args)


def time_verified(reps):
    """Best-of-``reps`` ms of the verified ``match_all`` on every case (run
    in a subprocess for the library before the change) and the sets."""
    out = []
    for name, kind, args in CASES:
        pat, g = globals()[name], case_graph(kind, args)
        found = multi.match_all_multi(pat, g, "verified")
        best = float("inf")
        for _ in range(reps):
            t = time.perf_counter()
            multi.match_all_multi(pat, g, "verified")
            best = min(best, time.perf_counter() - t)
        out.append((best * 1e3, len(found)))
    return out


def every_set_table(reps, before_lib):
    before = None
    if before_lib:
        # another commit's library: another build id, which only the override loads
        env = dict(os.environ, PYPM_VERIFIED_LIB=before_lib, PYPM_ALLOW_BUILD_MISMATCH="1")
        r = subprocess.run([sys.executable, __file__, "--verified-times", str(reps)], env=env,
                           capture_output=True, text=True, check=True)
        before = json.loads(r.stdout.strip().splitlines()[-1])
    after = time_verified(reps)
    rows = []
    for i, (name, kind, args) in enumerate(CASES):
        pat, g = globals()[name], case_graph(kind, args)
        every = multi.match_all_multi(pat, g, "reference")
        first = first_tuples(pat, g)
        assert {frozenset(t.id for t in r[0]) for r in first} <= \
            {frozenset(t.id for t in m.roots) for m in every}
        best = {"every": float("inf"), "first": float("inf")}
        for _ in range(reps):
            t = time.perf_counter()
            multi.match_all_multi(pat, g, "reference")
            best["every"] = min(best["every"], time.perf_counter() - t)
            t = time.perf_counter()
            first_tuples(pat, g)
            best["first"] = min(best["first"], time.perf_counter() - t)
        rows.append((name, f"{kind}{args}", len(g), len(first), len(every),
                     best["first"] * 1e3, best["every"] * 1e3,
                     None if before is None else before[i], after[i]))
        print(rows[-1], flush=True)
    lines = ["", "## Every set vs the first tuple per node", "",
             "`match_all` used to keep, at each node, only the first tuple (sets lost: the"
             " `first` columns); it now walks every tuple at each first root, skipping a set"
             " already reported before its last run (`every`). `heads(G, L)`: G inputs each"
             " read by L sibling `Lin`s (QK: C(L,2) sets per input; QKV: C(L,3)); `graph`: the"
             " R3 graphs above (one set per rare input either way). Reference engine in this"
             " process, best of each; verified before (the previous commit's library, in a"
             " subprocess) and after, best of each. Sets: what each reports.", "",
             "| pattern | graph | nodes | sets (first) | sets (every) | reference first ms |"
             " reference every ms | every/first | verified before ms | verified after ms |"
             " after/before |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, gname, n, nf, ne, rf, re_, b, a in rows:
        bcol = "n/a" if b is None else f"{b[0]:.1f}"
        ratio = "n/a" if b is None else f"{a[0] / b[0]:.2f}x"
        lines.append(f"| {name} | {gname} | {n} | {nf} | {ne} | {rf:.1f} | {re_:.1f} |"
                     f" {re_ / rf:.2f}x | {bcol} | {a[0]:.1f} | {ratio} |")
    return lines


def variants(pat, g):
    prog = multi.program(pat)
    return {
        "index": prog.reordered(prog.order, index_only=True),
        "users": prog.reordered(prog.order, index_only=False),
        "optimal": prog.reordered(multi.root_order(prog, g), index_only=False),
    }


def sets(ms):
    return {frozenset(x.id for x in m.roots) for m in ms}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--verified-times"]:
        print(json.dumps(time_verified(int(argv[1]))))
        return 0
    before_lib = argv[argv.index("--before-lib") + 1] if "--before-lib" in argv else None
    reps = 3
    sizes = ((2000, 20), (10000, 50))
    rows = []
    for pat in (R2, R3, R4):
        for n_freq, n_rare in sizes:
            g = graph(n_freq, n_rare)
            vs = variants(pat, g)
            found = {k: sets(multi.match_all_multi(p, g, "verified", order="written"))
                     for k, p in vs.items()}  # warm-up: graph and pattern sets loaded
            assert len({frozenset(s) for s in found.values()}) == 1, "the sets differ"
            best = {k: float("inf") for k in vs}
            best["order"] = float("inf")
            for _ in range(reps):
                t = time.perf_counter()
                multi.root_order(multi.program(pat), g)
                best["order"] = min(best["order"], time.perf_counter() - t)
                for k, p in vs.items():
                    t = time.perf_counter()
                    multi.match_all_multi(p, g, "verified", order="written")
                    best[k] = min(best[k], time.perf_counter() - t)
            rows.append((pat.name, len(vs["index"].roots), len(g), n_freq, n_rare,
                         len(found["index"]), best, vs["optimal"].order))
            print(rows[-1], flush=True)
    load = os.getloadavg()
    lines = ["# Multi-root candidates and root order (match_all, verified engine, this CPU)", "",
             f"Best of {reps}, the three variants interleaved in each repetition; load average"
             f" {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1 / 5 / 15 min) on a shared 2-core"
             " machine, so read the ratios, not the milliseconds.", "",
             "* index: written order (frequent `Relu` first), later roots' candidates = every"
             " node the root-operator index admits (`Multi.match_all_multi_idx`, the previous"
             " version);",
             "* users: written order, candidates = users of a bound node (`Multi.match_all_multi`);",
             "* optimal: users, roots in `multi.root_order`'s order (rarest anchored root first).",
             "", "All three report the same sets of nodes (checked; `Multi.mmatches_perm`).", "",
             "| pattern | roots | nodes | frequent | rare | matches | index ms | users ms |"
             " optimal ms | order | root_order ms | index/users | users/optimal | index/optimal |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, k, n, nf, nr, nm, b, order in rows:
        i, u, o = b["index"] * 1e3, b["users"] * 1e3, b["optimal"] * 1e3
        lines.append(f"| {name} | {k} | {n} | {nf} | {nr} | {nm} | {i:.1f} | {u:.1f} | {o:.1f} |"
                     f" {order} | {b['order'] * 1e3:.1f} | {i / u:.1f}x | {u / o:.1f}x | {i / o:.1f}x |")
    lines += every_set_table(reps, before_lib)
    lines += ["", "Command: `PYTHONPATH=python .venv/bin/python bench/multiroot_order.py"
              " [--before-lib OLD.so]`."]
    out = os.path.join(HERE, "results", "multiroot_order.md")
    text = "\n".join(lines) + "\n"
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, out)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
