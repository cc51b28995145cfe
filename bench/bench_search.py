"""Cost-guided search vs greedy rewriting: Knossos' arithmetic
benchmark and the example models.

**Knossos' benchmark** (``pypm_verified.library.knossos``): Table 3's
arithmetic rules as PyPM rules, Appendix E's expressions (Table 6, Table 5's
training and test sets) as hash-consed graphs, its cost model (add/sub 1,
mul/div 2, exp/log 4, a shared node once). Per expression: the cost of the
expression written as a tree (every occurrence counted, Knossos' start
before any ``let``), of its hash-consed graph (the search's start), and
the cost reached by greedy (the driver's policy), beam and best-first
search (``pypm_verified.rewriting.search``; ordered by cost, no heuristic),
each within the stated budget, and
the optimum within Knossos' search depth (10 steps) from exhaustive
breadth-first search where it finishes within its budget ("--" where it
does not).

**Models** (``--models``): see :mod:`pypm_verified.torch.search` and the
model section of the results.

    python bench/bench_search.py [--quick] [--no-models] [--models bert,gpt2]

Writes bench/results/search.md and search.json (``--quick``:
search_quick.*).
"""
from __future__ import annotations

import argparse
import sys
import time

import common  # noqa: F401  (sys.path)

from pypm_verified.library import knossos as K
from pypm_verified.rewriting.search import SearchSpace, search

DEPTH = 10  # Knossos' search depth for the arithmetic expressions


def tree_cost(node) -> float:
    return K.cost(node) + sum(tree_cost(a) for a in node.args)


def knossos_rows(sets, budgets, width, log=print):
    rows = []
    for set_name in sets:
        for i, text in enumerate(K.EXPRESSIONS[set_name]):
            g = K.graph_of(text)
            space = SearchSpace(g, K.PATTERNS, K.cost)
            row = {"set": set_name, "index": i, "expression": text,
                   "tree_cost": tree_cost(g.outputs[0]), "start_cost": space.cost(space.start)}
            for strat in ("greedy", "beam", "best_first", "exhaustive"):
                r = search(g, K.PATTERNS, strat, space=space, max_expansions=budgets[strat],
                           max_depth=DEPTH, beam_width=width)
                row[strat] = r.as_dict()
                if strat == "best_first":
                    row["best_first_best"] = K.show(r.outputs()[0])
            ex = row["exhaustive"]
            row["optimum"] = ex["cost"] if ex["exhausted"] else None
            rows.append(row)
            log(f"  {set_name}[{i}] start {row['start_cost']:g}: greedy "
                f"{row['greedy']['cost']:g} beam {row['beam']['cost']:g} best-first "
                f"{row['best_first']['cost']:g} optimum {row['optimum']}", flush=True)
    return rows


def knossos_md(rows, budgets, width):
    out = ["## Knossos' arithmetic benchmark", "",
           "Rules: Knossos' Table 3 (28 arithmetic rules, `pypm_verified/library/knossos.py`; "
           "the 5 binding rules are the identity on hash-consed graphs, see the module). "
           "Cost: add/sub 1, mul/div 2, exp/log 4, leaves 0, a shared node counted once. "
           f"Depth {DEPTH} (Knossos' search depth). Budgets (states expanded): greedy "
           f"{budgets['greedy']}, beam {budgets['beam']} (width {width}), best-first "
           f"{budgets['best_first']} (ordered by cost, no heuristic), exhaustive "
           f"{budgets['exhaustive']}. "
           "`tree` is the expression's cost written as a tree (Knossos' start, before any "
           "`let`), `start` its hash-consed graph's (every repeated subterm already shared). "
           "`optimum` is the least cost within the depth from exhaustive breadth-first "
           "search, -- where it did not finish within its budget. `BF at` is the "
           "expansion at which best-first search first reached its answer.", ""]
    out += ["| set | # | expression | tree | start | greedy | beam | best-first | BF at | "
            "optimum | BF = opt |", "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    n_known = n_hit = 0
    for r in rows:
        opt = r["optimum"]
        ok = "" if opt is None else ("yes" if r["best_first"]["cost"] == opt else "**no**")
        if opt is not None:
            n_known += 1
            n_hit += r["best_first"]["cost"] == opt
        out.append(f"| {r['set']} | {r['index']} | `{r['expression']}` | {r['tree_cost']:g} | "
                   f"{r['start_cost']:g} | {r['greedy']['cost']:g} | {r['beam']['cost']:g} | "
                   f"{r['best_first']['cost']:g} | {r['best_first']['best_at']} | "
                   f"{'--' if opt is None else format(opt, 'g')} | {ok} |")
    better = sum(r["best_first"]["cost"] < r["greedy"]["cost"] for r in rows)
    improved = sum(r["best_first"]["cost"] < r["start_cost"] for r in rows)
    out += ["", f"Best-first search reached the optimum on {n_hit} of the {n_known} "
                f"expressions where exhaustive search finished (of {len(rows)}); below greedy "
                f"on {better}, below the start on {improved}.", ""]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="Table 6 and Table 5's test set, smaller budgets, one small model")
    ap.add_argument("--no-models", action="store_true", help="the Knossos table only")
    ap.add_argument("--models", default=None, help="comma-separated example models")
    ap.add_argument("--out", default=None, help="results directory")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.quick:
        sets = ("table6", "table5_test")
        budgets = {"greedy": 100, "beam": 500, "best_first": 2000, "exhaustive": 3000}
    else:
        sets = ("table6", "table5_train", "table5_test")
        budgets = {"greedy": 100, "beam": 1000, "best_first": 5000, "exhaustive": 15000}
    width = 16
    print("Knossos' arithmetic benchmark", flush=True)
    rows = knossos_rows(sets, budgets, width)
    md = ["# Search vs greedy rewriting", "",
          f"{common.machine()}; {common.when()}; commit {common.git_commit(short=True)}"
          f"{' (dirty)' if common.git_dirty() else ''}; `python bench/bench_search.py"
          f"{' --quick' if args.quick else ''}`.", ""]
    md += knossos_md(rows, budgets, width)
    data = {"knossos": {"depth": DEPTH, "budgets": budgets, "beam_width": width, "rows": rows}}
    if not args.no_models:
        from search_models import model_section
        names = args.models.split(",") if args.models else None
        mdata, mmd = model_section(args.quick, names)
        data["models"] = mdata
        md += mmd
    md.append(f"Total time {time.perf_counter() - t0:.0f} s.")
    out = common.results_dir(args.out)
    name = common.stem("search", args.quick)
    common.write_json(out / f"{name}.json", data)
    common.write_md(out / f"{name}.md", md)
    print(f"wrote {out / name}.md", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
