"""Where each millisecond of one pypm fixpoint goes.

The driver's phases are timed by wrapping the functions that implement them
(exclusive time: a phase called inside another is subtracted from it, so
the rows add up to the total). Used by ``bench_matchers.py`` (the section
"Where the time goes" of bench/results/matchers.md) and runnable alone:

    python bench/profile_fixpoint.py [--model bert] [--layers 12] [--engine verified]
                                     [--repeats 5]

The numerics check of the benchmark is not in this path (nor in the timed
path of the benchmark: it runs after the untimed first run only).
"""
from __future__ import annotations

import argparse
import copy
import functools
import gc
import statistics
import sys
import time

import common  # noqa: F401 (sys.path)

# (phase, module, qualified name): the functions whose exclusive time is the phase
PHASES = (
    ("import (whole graph, once)", "pypm_verified.torch.importer", "TermGraph.build"),
    ("re-import after rewrites", "pypm_verified.torch.importer", "TermGraph.reimport"),
    # the verified engine's walk is the native reader's: its re-imports are in it
    ("walk: passing nodes (native: and re-importing)", "pypm_verified.torch.driver",
     "Driver._walk_natively"),
    ("walk: passing nodes (native: and re-importing)", "pypm_verified.torch.driver",
     "Driver._walk"),
    ("import of created nodes", "pypm_verified.torch.importer", "TermGraph.add"),
    ("candidate selection (root index)", "pypm_verified.engines.matching",
     "PatternSet.candidates"),
    ("engine: graph encoding (once)", "pypm_verified.core.graph", "Graph.encode"),
    ("engine: graph decoding + load (once)", "pypm_verified.engines.binding", "load_graph"),
    ("engine: graph extension (new nodes)", "pypm_verified.engines.binding", "graph_handle"),
    ("engine: call + decoding (verified)", "pypm_verified.engines.binding", "SetMatcher.match"),
    ("engine: call + decoding (verified)", "pypm_verified.engines.binding", "SetMatcher.first"),
    ("engine: reference matcher", "pypm_verified.engines.reference", "first_solution"),
    ("binding values for rules", "pypm_verified.torch.driver", "Driver.bound_value"),
    ("rule bodies (guards, building)", "pypm_verified.dsl.rules", "Rule.fire"),
    ("meta[val] (fake-tensor propagation)", "pypm_verified.torch.driver", "Driver.meta_val"),
    ("graph surgery (replace uses)", "torch.fx.node", "Node.replace_all_uses_with"),
    ("dead-code elimination", "pypm_verified.torch.driver", "Driver.remove_dead"),
    ("pattern set preparation", "pypm_verified.engines.matching", "PatternSet.__init__"),
    ("rewrite validation: snapshot", "pypm_verified.torch.validate_fx", "FxChecker.begin"),
    ("rewrite validation: encode + check", "pypm_verified.torch.validate_fx", "FxChecker.end"),
    ("rewrite validation: per firing (its match, its template)",
     "pypm_verified.torch.validate_fx", "FxChecker.attempt"),
    ("rewrite validation: per firing (its match, its template)",
     "pypm_verified.torch.validate_fx", "FxChecker.fired"),
    ("a firing's bookkeeping (builder, report, replacing)", "pypm_verified.torch.firing",
     "Firing.fire_single"),
    ("trying a node (matches, the rules' values)", "pypm_verified.torch.driver", "Driver._try"),
)
OTHER = "driver walk and the rest"


class _Clock:
    def __init__(self):
        self.acc = {}
        self.calls = {}
        self.stack = []  # [phase, start of the current exclusive slice]

    def wrap(self, phase, fn):
        clock = self

        @functools.wraps(fn)
        def timed(*a, **k):
            t = time.perf_counter()
            st = clock.stack
            if st:
                top = st[-1]
                clock.acc[top[0]] = clock.acc.get(top[0], 0.0) + t - top[1]
            st.append([phase, t])
            clock.calls[phase] = clock.calls.get(phase, 0) + 1
            try:
                return fn(*a, **k)
            finally:
                t2 = time.perf_counter()
                p = st.pop()
                clock.acc[p[0]] = clock.acc.get(p[0], 0.0) + t2 - p[1]
                if st:
                    st[-1][1] = t2
        return timed


def _resolve(modname, qual):
    import importlib
    mod = importlib.import_module(modname)
    parts = qual.split(".")
    owner = mod
    for p in parts[:-1]:
        owner = getattr(owner, p)
    return owner, parts[-1]


class instrumented:
    """Context manager: the phases' functions wrapped with one clock."""

    def __init__(self):
        self.clock = _Clock()
        self.saved = []

    def __enter__(self):
        for phase, modname, qual in PHASES:
            owner, name = _resolve(modname, qual)
            fn = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
            self.saved.append((owner, name, fn))
            setattr(owner, name, self.clock.wrap(phase, fn))
        return self.clock

    def __exit__(self, *exc):
        for owner, name, fn in reversed(self.saved):
            setattr(owner, name, fn)
        self.saved.clear()


def profile(ep, engine, repeats=5, run=None):
    """Median ms per phase over ``repeats`` fixpoints of fresh copies of
    ``ep``: ``{"total_ms", "phases": [(phase, ms, calls)]}``; ``run(ep,
    engine)`` is the benchmark's adapter (default ``bench_matchers.run_pypm``)."""
    if run is None:
        from bench_matchers import run_pypm as run
    per = []
    for _ in range(repeats):
        e = copy.deepcopy(ep)
        gc.collect()
        gc.disable()
        try:
            with instrumented() as clock:
                t0 = time.perf_counter()
                run(e, engine)
                total = time.perf_counter() - t0
        finally:
            gc.enable()
        acc = dict(clock.acc)
        acc[OTHER] = total - sum(acc.values())
        per.append((total, acc, dict(clock.calls)))
    total = statistics.median(t for t, _, _ in per)
    names = list(dict.fromkeys(p for p, _, _ in PHASES)) + [OTHER]  # a phase may wrap several
    rows = []
    for name in names:
        ms = statistics.median(a.get(name, 0.0) for _, a, _ in per) * 1e3
        calls = per[-1][2].get(name, 0)
        if ms > 0 or calls:
            rows.append((name, ms, calls))
    return {"total_ms": total * 1e3, "phases": rows}


def markdown(results, cmd):
    """The section of matchers.md: ``results`` is ``[(model, layers, engine,
    nodes, profile)]``."""
    L = ["## Where the time goes (one fixpoint, by phase)", "",
         f"`{cmd}`: each phase's exclusive time (a phase called inside another is "
         "subtracted from it), median over the repetitions, with instrumentation "
         "(so the total is a little above the table's); calls = number of calls in the "
         "last repetition. The benchmark's numerics check is not in the timed path.", ""]
    for model, layers, engine, nodes, prof in results:
        L += [f"**{model}, {layers} layers ({nodes} nodes), {engine} engine: "
              f"{prof['total_ms']:.1f} ms**", "",
              "| phase | ms | % | calls |", "|---|---:|---:|---:|"]
        for name, ms, calls in sorted(prof["phases"], key=lambda r: -r[1]):
            L.append(f"| {name} | {ms:.2f} | {100 * ms / prof['total_ms']:.0f} | {calls} |")
        L.append("")
    return L


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="bert")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--engine", default="verified,reference")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    from examples import models
    from baselines import common as C
    ep = models.export(args.model, "base", layers=args.layers)
    out = []
    for engine in args.engine.split(","):
        profile(ep, engine, repeats=1)  # warm-up
        out.append((args.model, args.layers, engine, C.count_nodes(ep.graph_module),
                    profile(ep, engine, args.repeats)))
    print("\n".join(markdown(out, "python bench/profile_fixpoint.py " + " ".join(
        sys.argv[1:] if argv is None else argv))))


if __name__ == "__main__":
    main()
