"""Where the FX rewrite validator's time goes, in place and hot.

The validator (``pypm_verified/torch/validate_fx.py``, on in every driver
run) costs 19-25 % of a fixpoint (``bench_matchers.py``, this benchmark). This benchmark
splits that cost by part, each timed two ways in the same run:

* **in place**: the call as the fixpoint makes it, among the driver's work
  (the fake-tensor runs, the rule bodies, the re-imports), which evicts
  from the caches the FX nodes and the Python objects the part reads;
* **hot**: the same call repeated at once, on the same inputs, its result
  dropped (for the parts whose calls can be repeated without changing the
  run: the encodings, the images, a template, the checker). The encodings'
  repeat finds the per-node cache their first call filled: for the
  pass-start encoding, hot is the cached walk, not the first reading.

A part whose in-place time is several times its hot time is bound by
reading memory, not by its own work: making its work smaller does not
make it cheaper, reading less does. Parts (inclusive: a part called
inside another is in both):

* ``encode (pass start)`` / ``encode (after the pass)``: ``FxChecker.encode``
  (the graph at the start of the first pass is read at its first firing);
* ``images``: each before node's term (``FxChecker._images``);
* ``correspond``: the before/after correspondence (``Pass.correspond``);
* ``checker (OCaml)``: ``pypm_validate_firings`` (``binding.validate_firings``);
* ``certificate words``: the buffer's tail (``certificate_words``);
* ``substitution``: a firing's match read in the graph before the pass
  (``FxChecker._substitution``): where the root's term changed in the pass,
  without matching again when the FX nodes down to the bindings are the
  same (``_read_unchanged``), else with the proved matcher's re-match; the
  first call reads the images;
* ``template``: a firing's replacement as a template (``FxChecker._template``,
  kept per rule and shape of its calls).

**Windows** (``--windows``): what a validator that reads only the region a
pass changed would read (``window_sizes``, measured on the certificates of
one fixpoint): before the pass, each firing's match from its root down to
its bindings (the interior, ``Pass.firings``' certificates) and the nodes
whose arguments the pass changed; after it, the nodes the pass created and
those changed; each side with its frontier (the arguments of the window's
nodes that are outside it, read as leaves). The projection scales the
whole-graph parts (the two encodings, the images, the correspondence, the
checker) by the window's share of the graph, adds one walk of the node
list at the bare walk's cost (``baselines/walk.py``: finding what changed
needs a look at every node) and keeps the per-firing parts and the rest as
they are: an estimate of where such a design lands, not a measurement of it.
The certificate check itself is measured on the region: ``window_pass``
builds the two windows from the whole encodings (each node a copy or a
frontier leaf under a label of its own, the same on both sides; constants
and lists copies) and the window of the matcher's graph (its frontier
nodes leaves with their operators and attributes), and the pass must be
accepted there too (``theories/Window.v`` says that suffices); its time is
set beside the whole check's, hot. And the end of a pass on its windows is
built and measured (``window_end_parts``, ``window_end.py``): the windows
read from a sweep of the node list, without the whole encoding of the graph
after the pass; fixpoints alternate between it and the validator's end of
pass on the whole graphs, each timed in place by part.

Medians over the fixpoints (the first, warm-up, dropped), of fresh copies
of the exported program, the cyclic GC off during each fixpoint as in
``profile_fixpoint.py``. Writes ``results/validator.md`` and
``validator.json`` (``--out``).

    python bench/bench_validator.py                  # bert, gpt2, llama, 12 layers
    python bench/bench_validator.py --quick          # bert only, fewer runs
    python bench/bench_validator.py --windows        # and the changed region, its check
"""
from __future__ import annotations

import argparse
import copy
import gc
import statistics
import sys
import time

import common  # noqa: F401  (sys.path: python/, examples/)

# (part, module, qualified name, repeatable): the functions timed
PARTS = (
    ("encode", "pypm_verified.torch.validate_fx", "FxChecker.encode", True),
    ("images", "pypm_verified.torch.validate_fx", "FxChecker._images", True),
    ("correspond", "pypm_verified.rewriting.validate", "Pass.correspond", False),
    ("certificate words", "pypm_verified.rewriting.validate", "certificate_words", True),
    ("checker (OCaml)", "pypm_verified.engines.binding", "validate_firings", True),
    ("substitution", "pypm_verified.torch.validate_fx", "FxChecker._substitution", True),
    ("template", "pypm_verified.torch.validate_fx", "FxChecker._template", True),
)


class _Recorder:
    """Wraps the parts' functions; ``rec[part]`` lists ``(in place, hot)``
    seconds per call (hot None where the call is not repeated)."""

    def __init__(self):
        self.rec = {}
        self.saved = []

    def __enter__(self):
        from profile_fixpoint import _resolve
        for part, mod, qual, repeat in PARTS:
            owner, name = _resolve(mod, qual)
            fn = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
            self.saved.append((owner, name, fn))
            setattr(owner, name, self._wrap(part, fn, repeat))
        return self

    def __exit__(self, *exc):
        for owner, name, fn in reversed(self.saved):
            setattr(owner, name, fn)

    def _wrap(self, part, fn, repeat):
        rec = self.rec

        def wrapped(*args, **kw):
            if part == "encode":  # the pass-start encoding has no ``before``
                before = args[1] if len(args) > 1 else kw.get("before")
                key = "encode (pass start)" if before is None else "encode (after the pass)"
            else:
                key = part
            t0 = time.perf_counter()
            out = fn(*args, **kw)
            t1 = time.perf_counter()
            hot = None
            if repeat:
                fn(*args, **kw)
                hot = time.perf_counter() - t1
            rec.setdefault(key, []).append((t1 - t0, hot))
            return out
        return wrapped


def measure(ep, runs: int):
    """Per part: median ms per call in place and hot, calls per fixpoint;
    and the medians of the fixpoint and of the validator's own clock
    (without the hot repeats: measured in separate, unwrapped runs).
    ``runs`` fixpoints of each kind, after one warm-up."""
    from bench_matchers import run_pypm
    totals, vals = [], []
    parts = {}
    for k in range(2 * runs + 1):  # a warm-up, then plain and timed-by-part alternately
        e = copy.deepcopy(ep)
        gc.collect()
        gc.disable()
        try:
            if k % 2:  # plain runs: the fixpoint and the validator's share
                t0 = time.perf_counter()
                _, info = run_pypm(e, "verified")
                totals.append(time.perf_counter() - t0)
                vals.append(info["validate_s"])
            else:
                with _Recorder() as r:
                    run_pypm(e, "verified")
                if k > 0:
                    for key, calls in r.rec.items():
                        parts.setdefault(key, []).append(calls)
        finally:
            gc.enable()
    rows = []
    for key, per_run in parts.items():
        flat = [c for calls in per_run for c in calls]
        place = statistics.median(c[0] for c in flat) * 1e3
        hots = [c[1] for c in flat if c[1] is not None]
        hot = statistics.median(hots) * 1e3 if hots else None
        n = statistics.median(len(calls) for calls in per_run)
        # per fixpoint: the median of each fixpoint's sum (a part's calls can
        # differ: the median call times the calls would hide the costly few)
        per_fixpoint = statistics.median(sum(c[0] for c in calls) for calls in per_run) * 1e3
        rows.append({"part": key, "calls": n, "in_place_ms": place, "hot_ms": hot,
                     "per_fixpoint_ms": per_fixpoint})
    total = statistics.median(totals) * 1e3
    val = statistics.median(vals) * 1e3
    return {"fixpoint_ms": total, "validator_ms": val,
            "validator_pct": statistics.median(100 * v / t for v, t in zip(vals, totals)),
            "parts": rows}


# the parts read over the whole graph: (part, the side whose window scales it)
WHOLE_GRAPH = (("encode (pass start)", "before"), ("images", "before"),
               ("encode (after the pass)", "after"), ("correspond", "both"),
               ("checker (OCaml)", "both"))


def window(p) -> dict:
    """The window of checked pass ``p`` (a :class:`Pass` after
    ``correspond``), as sets of node indices: ``interior`` and ``bindings``
    (the matches, before the pass), ``new`` and ``changed`` (after it),
    ``before`` / ``after`` (the window's nodes on each side) and
    ``frontier_before`` / ``frontier_after`` (their arguments outside it)."""
    b, a = p.before, p.after
    interior, bindings = set(), set()
    for f in p.firings:
        c = f.certificate
        if c is None:
            continue
        bound = {b.index[key] for _x, key in c.substitution if key in b.index}
        bindings |= bound
        stack = [f.root]
        while stack:  # the match from its root down to its bindings
            u = stack.pop()
            if u not in interior and u not in bound:
                interior.add(u)
                stack.extend(b.args[u])
    new = {h for h in range(len(a)) if p.amap[h] < 0}
    changed = {h for h in range(len(a)) if p.amap[h] >= 0 and (
        a.labels[h] != b.labels[p.amap[h]] or any(x in new for x in a.args[h])
        or tuple(p.image[x] for x in b.args[p.amap[h]]) != tuple(a.args[h]))}
    wb = interior | {p.amap[h] for h in changed}
    wa = new | changed
    return {"interior": interior, "bindings": bindings, "new": new, "changed": changed,
            "before": wb, "after": wa,
            "frontier_before": {x for u in wb for x in b.args[u] if x not in wb},
            "frontier_after": {x for u in wa for x in a.args[u] if x not in wa}}


def window_pass(p, graph, labels, images):
    """Pass ``p`` (checked on the whole graphs, after ``correspond``) as
    the region-only validator would check it (``theories/Window.v``): the
    windows of the graphs before and after it, each node a copy of its node
    or a frontier leaf (a kept node the region reads, under a label of its
    own, the same on both sides), the windows' outputs the changed nodes
    and the graph's outputs the pass touched; the window of the matcher's
    graph, each frontier node a leaf with its operator and attributes, and
    each window node's image in it (``graph``, ``labels`` and ``images``:
    what the whole check reads). Returns ``(pass, window graph, images)``
    for ``Pass.check_certified``, or None for a pass with a merge of equal
    nodes or a graph output it cannot pair (left to the whole graphs). Built in Python from the whole
    encodings: a measurement of the checker on the region, not the
    validator's path."""
    from pypm_verified.rewriting.validate import Encoding, Firing, Pass
    from pypm_verified.torch.validate_fx import _fx_resolve
    if any(f.rule is None for f in p.firings):
        return None
    b, a = p.before, p.after
    w = window(p)
    roots = {f.root for f in p.firings}
    ident = {h: g for h, g in p.identity.items() if g not in roots}
    changed, new = w["changed"], w["new"]
    kept = {h: g for h, g in ident.items() if h not in changed}
    kept_b = set(kept.values())

    def spec(key):  # a constant or a list (keys ("c", ..), ("l", ..)): a copy wherever read
        return type(key) is tuple

    cb = set(w["interior"]) | {ident[h] for h in changed if h in ident}
    ca = set(new) | set(changed)
    pairs = [(h, ident[h]) for h in sorted(changed) if h in ident]
    if len(a.outputs) != len(b.outputs):
        return None
    for ho, go in zip(a.outputs, b.outputs):  # the graph's outputs the pass touched
        if kept.get(ho) == go and go not in cb:
            continue
        if ho not in kept and ho not in ca:
            return None
        if go not in cb and go not in kept_b:
            return None
        pairs.append((ho, go))
    grew = True
    while grew:  # copies on both sides, to a fixpoint
        grew = False
        for g in list(cb):  # a copy's arguments: frontier if kept, else copies
            for x in b.args[g]:
                if x not in cb and (x not in kept_b or spec(b.keys[x])):
                    cb.add(x)
                    grew = True
        for h in list(ca) + [ho for ho, _g in pairs]:
            for x in ([h] if h not in ca else a.args[h]):
                if x in ca:
                    continue
                if x not in kept:
                    raise ValueError(f"after node {x} is neither kept nor in the window")
                if kept[x] in cb or spec(a.keys[x]):  # a kept copy: a copy on both sides
                    ca.add(x)
                    if kept[x] not in cb:
                        cb.add(kept[x])
                    grew = True
    fa = {x for h in ca for x in a.args[h] if x not in ca}
    fa |= {ho for ho, _g in pairs if ho not in ca}
    fb = {x for g in cb for x in b.args[g] if x not in cb}
    fb |= {kept[h] for h in fa} | {go for _h, go in pairs if go not in cb}
    front = {}  # FX key -> frontier number (one label per frontier node)

    def build(enc, copies, leaves):
        out, idx = Encoding(), {}
        for i in sorted(copies | leaves):
            key = enc.keys[i]
            if i in copies:
                lab, args = enc.labels[i], tuple(idx[x] for x in enc.args[i])
                merge = enc.mergeable[i]
            else:
                k = front.setdefault(key, len(front))
                lab, args, merge = labels((enc.syms[i], "frontier", k)), (), False
            idx[i] = out.add(key, lab, args, enc.names[i], merge)
            out.syms.append(enc.syms[i])
        return out, idx

    wb, ib = build(b, cb, fb)
    wa, ia = build(a, ca, fa)
    wb.outputs = [ib[go] for _h, go in pairs]
    wa.outputs = [ia[ho] for ho, _g in pairs]
    identity = {ia[h]: ib[g] for h, g in ident.items() if h in ia and g in ib}
    firings = [Firing(f.rule, ib[f.root], f.replacement, f.root_name, f.replacement_name,
                      f.certificate) for f in p.firings]
    pw = Pass("FX driver (window)", p.number, wb, wa, firings, identity, _fx_resolve)
    # the window of the matcher's graph: a frontier node is a leaf
    from window_end import load, matcher_window
    wg, wimages = matcher_window(graph, images, sorted(ib), cb)
    load(wg)
    return pw, wg, wimages


def check_windows(p, graph, labels, operator_of, image, fuel=None, check=None):
    """Check pass ``p`` on its windows (:func:`window_pass`) with ``check``
    (``Pass.check_certified`` unless given): a rejection raises. Returns
    ``(pass, window graph, images)``, or None when the pass has no windows."""
    got = window_pass(p, graph, labels, image)
    if got is not None:
        pw, wg, wimages = got
        pw.correspond()
        (check or type(pw).check_certified)(pw, wg, labels, operator_of, wimages, fuel=fuel)
    return got


def _hot(fn, repeats: int = 7) -> float:
    """Median ms of ``fn()`` called ``repeats`` times in a row."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def window_sizes(ep) -> list:
    """Per checked pass of one fixpoint of ``ep``: the sizes of the graphs
    before and after it and of its :func:`window`; the certificate check
    (``Pass.check_certified``: the buffer and ``pypm_validate_firings``) on
    the whole graphs and on the windows (:func:`window_pass`, which must be
    accepted too), hot."""
    from bench_matchers import run_pypm
    from pypm_verified.rewriting import validate as V
    passes = []
    check = V.Pass.check_certified

    def wrapped(self, graph, labels, operator_of, image, fuel=None):
        w = window(self)
        row = {"before": len(self.before), "after": len(self.after),
               "firings": len(self.firings),
               **{k: len(w[k]) for k in ("interior", "bindings", "new", "changed")},
               "window_before": len(w["before"]) + len(w["frontier_before"]),
               "window_after": len(w["after"]) + len(w["frontier_after"])}
        out = check(self, graph, labels, operator_of, image, fuel=fuel)  # rejects, or passes
        row["check_ms"] = _hot(lambda: check(self, graph, labels, operator_of, image,
                                             fuel=fuel))
        # the same pass checked on its windows (theories/Window.v): accepted
        # too (a rejection raises), and the check's time there
        got = check_windows(self, graph, labels, operator_of, image, fuel=fuel, check=check)
        if got is not None:
            pw, wg, wimages = got
            row["window_check_ms"] = _hot(lambda: check(pw, wg, labels, operator_of, wimages,
                                                        fuel=fuel))
            row["window_nodes"] = [len(pw.before), len(pw.after), len(wg)]
        passes.append(row)
        return out

    V.Pass.check_certified = wrapped
    try:
        run_pypm(copy.deepcopy(ep), "verified")
    finally:
        V.Pass.check_certified = check
    return passes


def window_end_parts(ep, runs: int) -> dict:
    """The end of a pass on the whole graphs (the validator's) and on its
    windows (``window_end.check_window``) side by side: fixpoints of fresh
    copies of ``ep``, the two ways alternating, ``runs`` each after a
    warm-up of each. Per way: medians of the fixpoint, the validator's
    clock and the ends of its passes (``FxChecker.end``); for the windows,
    the median of each part per fixpoint and the passes they covered."""
    from bench_matchers import run_pypm
    from pypm_verified.torch import validate_fx as VF
    import window_end as W
    orig_end = VF.FxChecker.end
    state = {"window": False, "end_s": 0.0, "clock": {}, "covered": 0}

    def end(self, number, final=True):
        t0 = time.perf_counter()
        try:
            fired = self.driver.firings[self.start:]
            if state["window"] and final and self.before is not None and fired:
                self.in_pass = False
                ok = W.check_window(self, number, fired, state["clock"])
                self.seconds += time.perf_counter() - t0
                if ok:
                    self.certified += len(fired)
                    self.before = None  # read at the next pass's first firing
                    self.segments += 1
                    self.passes += 1
                    state["covered"] += 1
                    return None
            return orig_end(self, number, final)
        finally:
            state["end_s"] += time.perf_counter() - t0

    rows = {False: [], True: []}
    VF.FxChecker.end = end
    try:
        for k in range(2 * runs + 2):
            state.update(window=bool(k % 2), end_s=0.0, clock={}, covered=0)
            e = copy.deepcopy(ep)
            gc.collect()
            gc.disable()
            try:
                t0 = time.perf_counter()
                _, info = run_pypm(e, "verified")
                total = time.perf_counter() - t0
            finally:
                gc.enable()
            if k >= 2:
                rows[state["window"]].append((total, info["validate_s"], state["end_s"],
                                              dict(state["clock"]), state["covered"]))
    finally:
        VF.FxChecker.end = orig_end
    out = {}
    for way, rs in rows.items():
        med = lambda i: statistics.median(r[i] for r in rs) * 1e3  # noqa: E731
        out["windows" if way else "whole"] = {
            "fixpoint_ms": med(0), "validator_ms": med(1), "end_ms": med(2),
            "validator_pct": statistics.median(100 * r[1] / r[0] for r in rs),
            "covered": min(r[4] for r in rs),
            "parts": {p: statistics.median(r[3].get(p, 0.0) for r in rs) * 1e3
                      for p in (rs[0][3] if way else {})}}
    return out


def walk_ms(ep, runs: int) -> float:
    """The bare walk's median ms on fresh copies of ``ep``."""
    from baselines import walk
    times = []
    for _ in range(runs):
        gm = copy.deepcopy(ep).graph_module
        t0 = time.perf_counter()
        walk.bare_walk(gm)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def projection(r: dict) -> dict:
    """The region-only validator's estimated cost (module docstring)."""
    ws = r["windows"]
    nb = sum(p["before"] for p in ws)
    na = sum(p["after"] for p in ws)
    share = {"before": sum(p["window_before"] for p in ws) / nb,
             "after": sum(p["window_after"] for p in ws) / na}
    share["both"] = (share["before"] * nb + share["after"] * na) / (nb + na)
    parts = {row["part"]: row["per_fixpoint_ms"] for row in r["parts"]}
    whole = sum(parts.get(p, 0.0) for p, _ in WHOLE_GRAPH)
    scaled = sum(parts.get(p, 0.0) * share[side] for p, side in WHOLE_GRAPH)
    val = r["validator_ms"] - whole + scaled + r["walk_ms"]
    fix = r["fixpoint_ms"] - r["validator_ms"] + val
    return {"share": share, "whole_ms": whole, "scaled_ms": scaled, "validator_ms": val,
            "pct": 100 * val / fix}


def markdown(results, cmd, when):
    L = ["# The validator's cost by part, in place and hot", "",
         f"`{cmd}` ({when}). Fixpoint and validator: medians of plain runs (the "
         "validator's own clock, `validate_s`); parts: medians per call of other runs "
         "of the same process, in place (as the fixpoint makes the call) and hot (the "
         "call repeated at once on the same inputs). Inclusive: the substitution "
         "contains the images and its re-matches, the checker runs inside the pass's "
         "check. See the module docstring of `bench/bench_validator.py`.", ""]
    for model, layers, nodes, r in results:
        L += [f"**{model}-{layers} ({nodes} nodes): fixpoint {r['fixpoint_ms']:.1f} ms, "
              f"validator {r['validator_ms']:.2f} ms ({r['validator_pct']:.1f} %)**", "",
              "| part | calls per fixpoint | in place, ms per call | hot, ms per call | "
              "in place / hot | in place, ms per fixpoint (median of the sums) |",
              "|---|---:|---:|---:|---:|---:|"]
        for row in sorted(r["parts"], key=lambda x: -x["per_fixpoint_ms"]):
            hot = row["hot_ms"]
            L.append(f"| {row['part']} | {row['calls']:g} | {row['in_place_ms']:.3f} | "
                     + (f"{hot:.3f} | {row['in_place_ms'] / hot:.1f}× | " if hot else "— | — | ")
                     + f"{row['per_fixpoint_ms']:.2f} |")
        L.append("")
    if any("windows" in r for *_x, r in results):
        L += ["## The changed region and a validator that reads only it (a projection)", "",
              "Per checked pass: nodes of the encodings before and after it; the "
              "matches' interiors (root down to the bindings, before the pass) and their "
              "bindings; the nodes the pass created and those whose arguments it changed "
              "(after it); the window on each side with its frontier, and its share of "
              "the graph. Projection: the whole-graph parts scaled by the window's share, "
              "plus a walk of the node list at the bare walk's cost; the rest as measured "
              "(the module docstring).", "",
              "| model | pass: before / after nodes | firings | interiors / bindings | "
              "created / changed | window before (share) | window after (share) | "
              "whole-graph parts, ms now → scaled | bare walk ms | validator ms now → "
              "projected | share of the fixpoint now → projected |",
              "|---|---|---:|---|---|---:|---:|---|---:|---|---|"]
        for model, layers, _n, r in results:
            if "windows" not in r:
                continue
            pj = projection(r)
            for k, p in enumerate(r["windows"]):
                last = k == len(r["windows"]) - 1
                L.append(
                    f"| {model}-{layers} | {p['before']} / {p['after']} | {p['firings']} | "
                    f"{p['interior']} / {p['bindings']} | {p['new']} / {p['changed']} | "
                    f"{p['window_before']} ({100 * p['window_before'] / p['before']:.0f} %) | "
                    f"{p['window_after']} ({100 * p['window_after'] / p['after']:.0f} %) | "
                    + (f"{pj['whole_ms']:.2f} → {pj['scaled_ms']:.2f} | {r['walk_ms']:.3f} | "
                       f"{r['validator_ms']:.2f} → {pj['validator_ms']:.2f} | "
                       f"{r['validator_pct']:.1f} % → {pj['pct']:.1f} % |" if last
                       else "| | | |"))
        L.append("")
        L += ["The certificate check of each pass (`Pass.check_certified`: the buffer "
              "and `pypm_validate_firings`), hot (median of 7 in a row), on the whole "
              "graphs and on the windows built from them (`window_pass`: each node a "
              "copy or a frontier leaf, constants and lists copies, the window of the "
              "matcher's graph with its frontier nodes as leaves). Every pass was "
              "accepted on its windows too (a rejection stops the benchmark).", "",
              "| model | window nodes: before / after / matcher's | check, whole graphs ms | "
              "check, windows ms | windows / whole |",
              "|---|---|---:|---:|---:|"]
        for model, layers, _n, r in results:
            for p in r.get("windows", []):
                if "window_check_ms" not in p:
                    continue
                nb, na, ng = p["window_nodes"]
                L.append(f"| {model}-{layers} | {nb} / {na} / {ng} | {p['check_ms']:.2f} | "
                         f"{p['window_check_ms']:.2f} | "
                         f"{p['window_check_ms'] / p['check_ms']:.2f} |")
        L.append("")
    if any("window_end" in r for *_x, r in results):
        parts = ("sweep", "reading the region", "the windows", "the matcher's window",
                 "loading it", "correspond", "check")
        L += ["## The end of a pass on its windows, built and measured", "",
              "`bench/window_end.py` builds the windows at the end of each pass without "
              "the whole encoding of the graph after it (a sweep of the node list finds "
              "the created and changed nodes; the rest of the graph before the pass is "
              "kept) and checks the pass there; fixpoints alternate between it and the "
              "validator's end of pass on the whole graphs (`FxChecker.end`), "
              "in place, medians. End of pass: every `FxChecker.end` of the fixpoint; "
              "the parts: the window way's, per fixpoint.", "",
              "| model | passes on windows | end of pass ms: whole → windows | "
              + " | ".join(parts) + " | validator ms: whole → windows | "
              "share of the fixpoint: whole → windows |",
              "|---|---:|---|" + "---:|" * len(parts) + "---|---|"]
        for model, layers, _n, r in results:
            we = r.get("window_end")
            if we is None:
                continue
            a, b = we["whole"], we["windows"]
            L.append(f"| {model}-{layers} | {b['covered']} | {a['end_ms']:.2f} → "
                     f"{b['end_ms']:.2f} | "
                     + " | ".join(f"{b['parts'].get(p, 0.0):.2f}" for p in parts)
                     + f" | {a['validator_ms']:.2f} → {b['validator_ms']:.2f} | "
                     f"{a['validator_pct']:.1f} % → {b['validator_pct']:.1f} % |")
        L.append("")
    return L


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="bert,gpt2,llama")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument("--windows", action="store_true",
                    help="also the changed region's size and the projection (docstring)")
    args = ap.parse_args(argv)
    models_ = ["bert"] if args.quick else args.models.split(",")
    runs = 3 if args.quick else args.runs
    from examples import models
    from baselines import common as C
    results = []
    for model in models_:
        ep = models.export(model, "base", layers=args.layers)
        r = measure(ep, runs)
        if args.windows:
            r["windows"] = window_sizes(ep)
            r["walk_ms"] = walk_ms(ep, max(runs, 5))
            r["window_end"] = window_end_parts(ep, runs)
        results.append((model, args.layers, C.count_nodes(ep.graph_module), r))
        print(f"{model}-{args.layers}: fixpoint {r['fixpoint_ms']:.1f} ms, validator "
              f"{r['validator_ms']:.2f} ms ({r['validator_pct']:.1f} %)", flush=True)
    out = common.results_dir(args.out)
    name = common.stem("validator", args.quick)
    cmd = "python bench/bench_validator.py " + " ".join(
        common.display_argv(sys.argv[1:] if argv is None else argv))
    common.write_json(out / f"{name}.json", {
        "when": common.when(), "commit": common.git_commit(), "machine": common.machine(),
        "loadavg": common.loadavg(), "results": [
            {"model": m, "layers": n, "nodes": k, **r} for m, n, k, r in results]})
    common.write_md(out / f"{name}.md", markdown(results, cmd.strip(), common.when()))
    print("\n".join(markdown(results, cmd.strip(), common.when())))


if __name__ == "__main__":
    main()
