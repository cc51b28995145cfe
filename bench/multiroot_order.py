"""Root order and candidates of multi-root patterns (issue 16): the same
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

    PYTHONPATH=python python bench/multiroot_order.py
"""
from __future__ import annotations

import os
import random
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
    lines += ["", "Command: `PYTHONPATH=python .venv/bin/python bench/multiroot_order.py`."]
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
