"""Matcher cost on real models: the rule set run to a fixpoint by each system,
side by side in one process.

For each model (BERT, GPT-2, LLaMA from examples/models.py: BERT-base-like
hidden 768, 12 heads, sequence 128, batch 1, random weights, offline) and each
number of layers, the model is exported once (``torch.export.export`` then
``run_decompositions({})``; not timed) and every system rewrites a fresh copy
of the graph (the copy is not timed) until no rule fires. Systems:

``bare_walk``             a loop over ``graph.nodes`` with a target check: the floor
``handwritten``           the rules as hand-written Python over ``node.args``
``inductor_pattern``      Inductor ``register_graph_pattern`` + ``CallFunction`` patterns
``inductor_replacement``  Inductor ``register_replacement`` (search functions traced
                          at the export IR)
``fx``                    ``torch.fx.subgraph_rewriter.replace_pattern_with_filters``
``pypm_verified``         the pypm driver with the Coq-extracted matcher
``pypm_reference``        the pypm driver with the Python reference matcher
``pypm_match_verified``   matching alone (no rule runs): every rule pattern at every
                          node, verified engine, the FX graph read natively into the
                          engine's encoding (``fxmatch.match_fx``, no Python term graph)
``pypm_match_reference``  the same with the reference engine, the graph imported as a
                          term graph by the Python reader

(the pypm systems are skipped, with a note, while ``pypm_verified.torch`` is
missing; see ``run_pypm``). Systems are interleaved per repetition (rotated
order) so machine noise hits all alike; times are medians of ``--repeats``
runs after one untimed run that is also checked: rewrites counted from the
result graph against the number of attention blocks etc., and the rewritten
graph run on the example inputs against the original (max abs difference).

    python bench/bench_matchers.py [--quick] [--models bert,gpt2,llama]
                                   [--layers 1,2,4,8,12,16,32] [--repeats N]
                                   [--systems ...] [--profile bert:12]

With ``--profile MODEL:LAYERS`` (default bert:12) the pypm fixpoint of that
model is also timed by phase (bench/profile_fixpoint.py: import, engine
calls, rule bodies, fake-tensor propagation, DCE, ...), after the timed runs.

Writes bench/results/matchers.json, matchers.md and matchers.png (matchers_quick.*
with --quick).
"""
from __future__ import annotations

import argparse
import copy
import functools
import gc
import json
import os
import platform
import statistics
import sys
import time

import common
from common import RESULTS, timed
SYSTEMS = ("bare_walk", "handwritten", "inductor_pattern", "inductor_replacement", "fx",
           "pypm_verified", "pypm_reference", "pypm_match_verified", "pypm_match_reference")
MATCH_ONLY = ("bare_walk", "pypm_match_verified", "pypm_match_reference")  # no rewriting
SIZE = "base"


# --------------------------------------------------------------------------------------
# The pypm adapter: the one place that knows the driver's API.

def run_pypm(ep, engine: str):
    """Rewrite ``ep`` (an ExportedProgram, already a private copy) with the pypm
    rule library to a fixpoint. Returns ``(program, report)``: the rewritten
    ExportedProgram (or a ``torch.fx.GraphModule`` whose placeholders follow
    ``ep.graph_signature``) and the driver's report (anything
    JSON-serialisable, or None).

    The library's rules are device-aware -- on ``target="cpu"`` a guard may
    decline SDPA at sequence 128 where it is slower -- while the baselines
    rewrite unconditionally; so the driver runs with
    ``check_profitability=False`` (every other guard -- axes, constants,
    dtypes -- stays): both sides then do the same rewrites, and the timing
    compares matching. Raises ImportError while ``pypm_verified.torch`` is
    not importable.
    """
    # The driver rewrites ep's graph module in place (ep is a private copy).
    from pypm_verified.library import default_patterns  # noqa: WPS433 (lazy on purpose)
    from pypm_verified.torch.driver import Driver
    # no final recompile: like the Inductor passes, the time is the rewriting
    # (the equivalence check recompiles before running the graph)
    driver = Driver(ep.graph_module, default_patterns(), engine=engine, target="cpu",
                    recompile=False, check_profitability=False)
    report = driver.run()
    # the rewrite validation of every pass (rewriting/validate.py), inside total_s
    validation = getattr(driver, "validation", None)
    return ep.graph_module, {"firings": dict(report.firings), "iterations": report.iterations,
                             "match_s": report.match_s, "total_s": report.total_s,
                             "attempts": report.attempts,
                             "validate_s": validation.seconds if validation else None}


def run_pypm_match(gm, engine: str) -> int:
    """Matching alone: every rule pattern at every node of ``gm``'s graph, no
    rule run. The verified engine reads the FX graph natively into the
    engine's encoding (``pypm_verified.torch.fxmatch.match_fx``: no Python
    term graph) and makes one ``pypm_match_all`` call (the proved root
    index inside); the reference engine imports the graph as a term graph
    with the Python reader, as the driver's reference engine does
    (``pypm_verified._native.paths``), and runs ``pm.match_all``. Returns
    the number of matches."""
    import pypm_verified as pm
    from pypm_verified import _native
    from pypm_verified.library import default_patterns
    from pypm_verified.torch.fxmatch import match_fx
    from pypm_verified.torch.importer import TermGraph
    pats = [p for p in default_patterns() if p.rules and not p.is_multi]
    if engine == "verified":
        return len(match_fx(pats, gm))
    with _native.paths(False):
        tg = TermGraph(gm.graph).build()
        return len(pm.match_all(pats, tg.graph, engine))


def _pypm_available():
    try:
        import pypm_verified.torch.driver as _t  # noqa: F401
        return hasattr(_t, "rewrite_graph_module"), None
    except Exception as e:  # ImportError, or the C library not built
        return False, f"{type(e).__name__}: {e}"


# --------------------------------------------------------------------------------------

def make_systems(names, note):
    from baselines import walk, fx_rewriter, inductor_rewriter
    systems, setup = {}, {}
    for name in names:
        t0 = time.perf_counter()
        if name == "bare_walk":
            fn = ("gm", walk.bare_walk, 0)
        elif name == "handwritten":
            fn = ("gm", walk.handwritten, 0)
        elif name == "fx":
            r = fx_rewriter.FxRewriter()
            fn = ("gm", r, r.n_patterns)
        elif name == "inductor_replacement":
            r = inductor_rewriter.InductorReplacement()
            fn = ("gm", r, r.n_patterns)
        elif name == "inductor_pattern":
            r = inductor_rewriter.InductorGraphPattern()
            fn = ("gm", r, r.n_patterns)
        elif name.startswith("pypm_"):
            ok, why = _pypm_available()
            if not ok:
                note(f"skipping {name}: pypm_verified.torch.driver not importable"
                     + (f" ({why})" if why else "") + " -- wire run_pypm() when it lands")
                continue
            engine = name.rsplit("_", 1)[1]
            if name.startswith("pypm_match_"):
                fn = ("gm", (lambda gm, engine=engine: run_pypm_match(gm, engine)), None)
            else:
                fn = ("ep", (lambda ep, engine=engine: run_pypm(ep, engine)), None)
        else:
            raise ValueError(f"unknown system {name!r}")
        setup[name] = time.perf_counter() - t0
        systems[name] = fn
    return systems, setup


def export_model(model, layers):
    from examples import models
    t0 = time.perf_counter()
    ep = models.export(model, SIZE, layers=layers)
    return ep, time.perf_counter() - t0


def _fresh(kind, ep):
    return copy.deepcopy(ep) if kind == "ep" else copy.deepcopy(ep.graph_module)


def bench_one(model, layers, systems, repeats, log, profile_at=None):
    from baselines import common as C
    ep, export_s = export_model(model, layers)
    base_gm = ep.graph_module
    flat = C.flat_inputs(ep)
    ref = C.run_graph(copy.deepcopy(base_gm), flat)
    expected = C.expected_rewrites(model, layers)
    row = {"model": model, "layers": layers, "nodes": C.count_nodes(base_gm),
           "export_s": round(export_s, 3), "expected": expected, "systems": {}}
    log(f"{model} x{layers}: {row['nodes']} nodes, export {export_s:.1f}s")
    names = list(systems)
    # Untimed first run of each: the check.
    for name in names:
        kind, fn, _ = systems[name]
        arg = _fresh(kind, ep)
        dt, _, out = timed(functools.partial(fn, arg), gc_off=True, collect=True)
        entry = {"first_s": dt}
        if name in MATCH_ONLY:  # a count (roots, matches), the graph is not rewritten
            entry.update(roots=out, nodes_after=row["nodes"])
        else:
            inputs = flat
            gm = arg
            if kind == "ep":
                prog, report = out
                entry["report"] = _jsonable(report)
                if hasattr(prog, "graph_signature"):  # an ExportedProgram: its own inputs
                    gm, inputs = prog.graph_module, C.flat_inputs(prog)
                else:
                    gm = prog
            got = C.count_rewrites(gm)
            outs = C.run_graph(gm, inputs)
            entry.update(rewrites=got, rewrites_ok=(got == expected),
                         nodes_after=C.count_nodes(gm), max_abs_diff=C.max_abs_diff(ref, outs),
                         equivalent=C.equivalent(ref, outs))
            if not entry["rewrites_ok"] or not entry["equivalent"]:
                log(f"  ! {name}: rewrites {got} (expected {expected}), "
                    f"max |diff| {entry['max_abs_diff']:.2e}")
        row["systems"][name] = entry
    times = {n: [] for n in names}
    validate_s = {n: [] for n in names}  # the pypm drivers' rewrite validation, per run
    for rep in range(repeats):
        order = names[rep % len(names):] + names[:rep % len(names)]
        for name in order:
            kind, fn, _ = systems[name]
            arg = _fresh(kind, ep)
            dt, _, out = timed(functools.partial(fn, arg), gc_off=True, collect=True)
            times[name].append(dt)
            if kind == "ep" and isinstance(out, tuple) and isinstance(out[1], dict) \
                    and out[1].get("validate_s") is not None:
                validate_s[name].append(out[1]["validate_s"])
            del arg
            del out
    if profile_at == (model, layers):
        # where the time goes, by phase (bench/profile_fixpoint.py), after the timed runs
        import profile_fixpoint
        row["profile"] = {}
        for name in names:
            if name in ("pypm_verified", "pypm_reference"):
                engine = name.split("_", 1)[1]
                profile_fixpoint.profile(ep, engine, repeats=1, run=run_pypm)  # warm-up
                row["profile"][engine] = profile_fixpoint.profile(ep, engine, repeats, run=run_pypm)
    walk_ms = statistics.median(times["bare_walk"]) * 1e3 if "bare_walk" in times else None
    for name in names:
        ms = statistics.median(times[name]) * 1e3
        e = row["systems"][name]
        e.update(ms=ms, runs_ms=[t * 1e3 for t in times[name]],
                 ratio_to_walk=(ms / walk_ms) if walk_ms else None)
        val = ""
        if validate_s[name]:
            # share of the same runs' fixpoint (median of the per-run shares)
            e["validate_ms"] = statistics.median(validate_s[name]) * 1e3
            e["validate_pct"] = statistics.median(
                100 * v / t for v, t in zip(validate_s[name], times[name]))
            val = f"  validate {e['validate_ms']:.2f} ms ({e['validate_pct']:.1f}%)"
        log(f"  {name:22s} {ms:10.3f} ms  x{e['ratio_to_walk'] or 0:9.1f}  "
            f"{e.get('rewrites', '')}{val}")
    del ep, base_gm, flat, ref
    gc.collect()
    return row


def _jsonable(x):
    try:
        json.dumps(x)
        return x
    except TypeError:
        return repr(x)[:2000]


# --------------------------------------------------------------------------------------

def _load_note(load) -> str:
    if not load or None in load:
        return ""
    return (f" Load average (1 min) {load[0][0]:.1f} at the start, {load[1][0]:.1f} at the "
            "end (other work shared the machine: compare ratios within a row, not times "
            "across runs).")


def write_markdown(res, path):
    systems = [s for s in SYSTEMS if s in res["systems"]]
    L = ["# Matcher cost: the rule set to a fixpoint, side by side", "",
         f"Generated by `bench/bench_matchers.py{' --quick' if res['quick'] else ''}` "
         f"on {res['machine']} ({res['cpus']} CPUs), torch {res['torch']}; "
         f"{res['repeats']} timed repetitions per system (systems interleaved), "
         "median shown; the graph copy and the export are not timed."
         + _load_note(res.get("loadavg")), "",
         "Models: examples/models.py `base` size (hidden 768, 12 heads, seq 128, batch 1; "
         "LLaMA 4 KV heads), random weights, exported with `torch.export.export(...)"
         ".run_decompositions({})`.", "",
         "Cell: median ms (× bare walk) [rewrites: attention/gelu_tanh/rms_norm/linear_act]; "
         "✗ marks a wrong rewrite count or a numerical mismatch. Column validate: the "
         "pypm_verified fixpoint's rewrite validation (every pass checked by the verified "
         "validator, python/pypm_verified/rewriting/validate.py), median ms and its median "
         "share of the same runs' fixpoint time (included in it).", ""]
    left = [s for s in SYSTEMS if s not in res["systems"]]
    full = [1, 2, 4, 8, 12, 16, 32]
    if not res["quick"] and (left or res["layers"] != full):
        L.append(f"> Reduced run: layers {','.join(map(str, res['layers']))}"
                 + (f"; systems not run: {', '.join(left)}" if left else "")
                 + " (the full run: `python bench/bench_matchers.py`, about 10 min on an "
                 "idle 2-core machine).")
    for n in res["notes"]:
        L.append(f"> {n}")
    if res["notes"] or (not res["quick"] and (left or res["layers"] != full)):
        L.append("")
    L.append("| model | layers | nodes | " + " | ".join(systems) + " | validate |")
    L.append("|---|---:|---:|" + "---:|" * (len(systems) + 1))
    for row in res["rows"]:
        cells = []
        for s in systems:
            e = row["systems"].get(s)
            if e is None:
                cells.append("—")
                continue
            c = f"{e['ms']:.3g} ms"
            if s != "bare_walk" and e.get("ratio_to_walk"):
                c += f" (×{e['ratio_to_walk']:.0f})"
            if s in MATCH_ONLY[1:] and "roots" in e:
                c += f" [{e['roots']} matches]"
            if "rewrites" in e:
                r = e["rewrites"]
                c += f" [{r['attention']}/{r['gelu_tanh']}/{r['rms_norm']}/{r['linear_act']}]"
                if not (e["rewrites_ok"] and e["equivalent"]):
                    c += " ✗"
            cells.append(c)
        v = row["systems"].get("pypm_verified", {})
        cells.append(f"{v['validate_ms']:.3g} ms ({v['validate_pct']:.1f}%)"
                     if v.get("validate_ms") is not None else "—")
        L.append(f"| {row['model']} | {row['layers']} | {row['nodes']} | " + " | ".join(cells) + " |")
    L += headline(res)
    L += ["", "Expected rewrites per model with L layers: BERT L attention + L linear_act "
          "(intermediate dense + GELU); GPT-2 L attention + L gelu_tanh (its MLP is `addmm`, "
          "so no linear_act); LLaMA L attention (GQA) + 2L+1 rms_norm + L linear_act (gate + SiLU).",
          ""]
    # growth
    L += ["## Growth with layers", "",
          "Median ms at the largest vs the smallest layer count measured, per model "
          "(≈ linear growth gives a factor close to the ratio of node counts).", "",
          "| model | nodes (min→max layers) | " + " | ".join(systems) + " |",
          "|---|---|" + "---:|" * len(systems)]
    for model in res["models"]:
        rows = [r for r in res["rows"] if r["model"] == model]
        if len(rows) < 2:
            continue
        a, b = rows[0], rows[-1]
        cells = []
        for s in systems:
            if s in a["systems"] and s in b["systems"]:
                cells.append(f"×{b['systems'][s]['ms'] / a['systems'][s]['ms']:.1f}")
            else:
                cells.append("—")
        L.append(f"| {model} | {a['nodes']}→{b['nodes']} ({a['layers']}→{b['layers']}) | "
                 + " | ".join(cells) + " |")
    for row in res["rows"]:
        if row.get("profile"):
            import profile_fixpoint
            L += [""] + profile_fixpoint.markdown(
                [(row["model"], row["layers"], engine, row["nodes"], prof)
                 for engine, prof in row["profile"].items()],
                f"bench/profile_fixpoint.py, called by bench_matchers.py "
                f"--profile {row['model']}:{row['layers']}")
    L += ["", "## Setup (once per process, not in the table)", "",
          "| system | patterns | setup s |", "|---|---:|---:|"]
    for s in systems:
        L.append(f"| {s} | {res['patterns'].get(s) if res['patterns'].get(s) is not None else '—'} "
                 f"| {res['setup_s'][s]:.3f} |")
    L += ["", "## What each system can express", "", EXPRESSIVENESS, ""]
    if res.get("linear_act_placeholder"):
        L += ["Note: `pypm_verified.torch.kernels` was not importable on this branch, so the "
              "linear_act replacement is a placeholder custom op `pypm_bench::linear_act` "
              "(F.linear + activation, same schema): the rewrite and the matching are real, "
              "the kernel fuses nothing.", ""]
    if path.exists():  # the before/after sections of earlier changes stay
        old = path.read_text()
        i = old.find(KEPT)
        if i >= 0:
            L += ["", old[i:].rstrip("\n")]
    common.write_md(path, L)


#: the line from which a results file's hand-written before/after sections
#: follow; a new run keeps them
KEPT = "<!-- before/after sections: kept by new runs -->"

HEADLINE_VS = (("pypm_reference", "reference engine"), ("inductor_pattern", "Inductor hand-built"),
               ("inductor_replacement", "Inductor register_replacement"),
               ("fx", "fx replace_pattern"), ("handwritten", "hand-written walk"))


def headline(res):
    """The verified engine against every other system, at BERT-base (12 layers)
    and at the largest layer count of each model: other / verified (> 1: the
    verified engine is faster), and verified / bare walk."""
    rows = [r for r in res["rows"] if "pypm_verified" in r["systems"]]
    top = {}
    for r in rows:
        if r["layers"] >= top.get(r["model"], (0, None))[0]:
            top[r["model"]] = (r["layers"], r)
    picked = [r for r in rows if r["model"] == "bert" and r["layers"] == 12]
    picked += [r for _, r in top.values() if r not in picked]
    if not picked:
        return []
    vs = [(k, name) for k, name in HEADLINE_VS if k in res["systems"]]
    out = ["", "## Headline ratios", "",
           "Time of each system divided by the verified engine's, same process "
           "(> 1: the verified engine is faster), and the verified engine's time "
           "over the bare walk (the floor). *match ms* is the time the driver spent in "
           "the matcher (its report's `match_s`, last repetition), verified / reference: the "
           "rest of pypm's time is importing the graph and firing the rules, the same code "
           "for both engines. *Matching alone*: `pypm_match_*` (import + every pattern at "
           "every node, no rule) over the bare walk, and reference over verified. In "
           "brackets: the lowest and highest ratio of a single repetition (the systems of "
           "one repetition run one after the other): how far one run's ratio can stray "
           "from the median's.", "",
           "| model | layers | pypm verified | " + " | ".join(f"{n} / verified" for _, n in vs)
           + " | verified / bare walk | match ms | matching alone: verified / bare walk "
           "| matching alone: reference / verified |",
           "|---|---:|---:|" + "---:|" * (len(vs) + 4)]
    for r in picked:
        sy = r["systems"]
        v = sy["pypm_verified"]["ms"]
        cells = [f"{sy[k]['ms'] / v:.2f}" + _spread(sy[k], sy["pypm_verified"])
                 if k in sy else "—" for k, _ in vs]
        walk = f"{v / sy['bare_walk']['ms']:.0f}" if "bare_walk" in sy else "—"
        ms = [((sy.get(k) or {}).get("report") or {}).get("match_s")
              for k in ("pypm_verified", "pypm_reference")]
        match = " / ".join("—" if x is None else f"{x * 1e3:.1f}" for x in ms)
        mv, mr = sy.get("pypm_match_verified"), sy.get("pypm_match_reference")
        alone = f"{mv['ms'] / sy['bare_walk']['ms']:.0f}" if mv and "bare_walk" in sy else "—"
        alone_r = f"{mr['ms'] / mv['ms']:.2f}" if mv and mr else "—"
        out.append(f"| {r['model']} | {r['layers']} | {v:.3g} ms | " + " | ".join(cells)
                   + f" | {walk} | {match} | {alone} | {alone_r} |")
    return out


def _spread(other: dict, verified: dict) -> str:
    """`` [lo-hi]``: the range of other / verified over the repetitions
    (paired by repetition), or nothing without the runs."""
    a, b = other.get("runs_ms"), verified.get("runs_ms")
    if not a or not b or len(a) != len(b):
        return ""
    r = [x / y for x, y in zip(a, b)]
    return f" [{min(r):.2f}-{max(r):.2f}]"


EXPRESSIVENESS = """\
All four rules are expressed by every baseline here, at the export IR, with the
same guards (shared code in `bench/baselines/common.py`); what differs is how:

* **fx `replace_pattern_with_filters`** — patterns are fixed graphs: every
  alternate is another pattern (attention: `mul`/`div` scale × `clone`/`dropout`
  × 2-/3-argument `softmax` × GQA or not = 16 patterns; linear_act: 4
  activations × bias or not = 8), and each pattern is a full `SubgraphMatcher`
  pass plus a module `recompile` per call, every fixpoint round. Constants can
  be bound (a pattern placeholder matches a literal) and guarded in
  `match_filters`, but a replacement is traced once: a value computed from a
  bound constant (`1/c`, `x.shape[-1]`) stays Python/`sym_size` code in the
  graph rather than a folded literal. Patterns must be written with
  `torch.ops.aten` overloads (tracing `torch.matmul`/`F.softmax` records
  functions that never occur at the export IR).
* **Inductor `register_replacement`** — the default trace function decomposes
  search functions to core ATen (GELU → erf formula, softmax → `_softmax`,
  matmul → bmm) and then matches nothing at the export IR; with a pre-dispatch
  `make_fx` trace function and no decompositions (`same_ir_trace`) it matches.
  A traced search function is one graph, so operator alternates and the two
  spellings of the transpose axes ((2,3) vs (-1,-2)) are separate patterns (32
  for attention); constants other than `scalar_workaround` arguments must equal
  the traced ones (softmax axis -1, not 3). Every match re-traces the search
  function and traces the replacement (two `make_fx` runs per match).
* **Inductor `register_graph_pattern`** — hand-built `CallFunction`/`KeywordArg`
  patterns; `CallFunction([mul, div], …)` gives alternates among same-arity
  operators, guards are Python (`extra_check`); alternates of different shape
  (`clone` vs `dropout`, softmax arity, GQA, bias, `approximate=`) are separate
  patterns (8 for attention).
* **hand-written walk** — anything, as code: every alternate, guard and
  binding is an `if`.
* None of the baselines expresses variable-length chains or recursion
  (e.g. any number of view-like ops between two nodes) or operator variables
  over an open set of operators; the rules above do not need them. fx and
  Inductor both reject a match whose inner values have other users, so
  export's `_assert_tensor_metadata` nodes (GPT-2 asserts on the softmax
  output, LLaMA inside RMSNorm) are removed first, in every baseline's timed
  work.
* Not covered by any baseline (nor needed by these models): attention
  without a mask (ViT), `masked_fill` masks (DistilBERT), softmax in float32
  with a cast back (half-precision LLaMA), the GELU erf formula."""


def plot(res, path):
    plt = common.pyplot()
    if plt is None:
        return False
    models = res["models"]
    systems = [s for s in SYSTEMS if s in res["systems"]]
    fig, axes = plt.subplots(1, len(models), figsize=(5.2 * len(models), 4.2), squeeze=False)
    for ax, model in zip(axes[0], models):
        rows = [r for r in res["rows"] if r["model"] == model]
        for s in systems:
            xs = [r["layers"] for r in rows if s in r["systems"]]
            ys = [r["systems"][s]["ms"] for r in rows if s in r["systems"]]
            ax.plot(xs, ys, marker="o", label=s)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("layers")
        ax.set_ylabel("ms to fixpoint (median)")
        ax.set_title(model)
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle("Rule set to a fixpoint on the export IR (CPU, one process)")
    common.save_figure(fig, path)
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="bert,gpt2 at 1,2 layers, 3 repetitions (a couple of minutes)")
    ap.add_argument("--models", help="comma-separated (default bert,gpt2,llama)")
    ap.add_argument("--layers", help="comma-separated (default 1,2,4,8,12,16,32; 12 = BERT-base)")
    ap.add_argument("--repeats", type=int, help="timed repetitions per system (default 5; quick 3)")
    ap.add_argument("--systems", help="comma-separated subset of " + ",".join(SYSTEMS))
    ap.add_argument("--out", default=str(RESULTS), help="results directory")
    ap.add_argument("--profile", default="bert:12",
                    help="MODEL:LAYERS whose pypm fixpoint is also profiled by phase "
                         "(bench/profile_fixpoint.py; default bert:12, 'none' for no profile)")
    args = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("bench_matchers: torch is not installed (pip install -e '.[torch]' "
              "-c requirements/constraints.txt); skipping")
        return 0
    models = (args.models or ("bert,gpt2" if args.quick else "bert,gpt2,llama")).split(",")
    layers = [int(x) for x in (args.layers or ("1,2" if args.quick else "1,2,4,8,12,16,32")).split(",")]
    repeats = args.repeats or (3 if args.quick else 5)
    names = (args.systems or ",".join(SYSTEMS)).split(",")
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    notes = []

    def note(msg):
        notes.append(msg)
        print("note:", msg, flush=True)

    def log(msg):
        print(msg, flush=True)

    t_start = time.perf_counter()
    load_start = common.loadavg()
    systems, setup = make_systems(names, note)
    from baselines import common as C
    C.linear_act_op()
    if C.LINEAR_ACT_IS_PLACEHOLDER:
        note("pypm_verified.torch.kernels not importable: linear_act rewrites to the placeholder "
             "op pypm_bench::linear_act (F.linear + activation, same schema)")
    profile_at = None
    if args.profile and args.profile != "none":
        pm_, _, pl = args.profile.partition(":")
        try:
            profile_at = (pm_, int(pl))
        except ValueError:
            ap.error(f"--profile {args.profile!r}: expected MODEL:LAYERS, e.g. bert:12")
    rows = []
    for model in models:
        for n in layers:
            rows.append(bench_one(model, n, systems, repeats, log, profile_at))
    res = {
        "benchmark": "matchers", "quick": args.quick, "models": models, "layers": layers,
        "repeats": repeats, "size": SIZE, "systems": list(systems),
        "patterns": {k: v[2] for k, v in systems.items()}, "setup_s": setup,
        "linear_act_placeholder": C.LINEAR_ACT_IS_PLACEHOLDER, "notes": notes,
        "machine": platform.machine() + " " + platform.processor(), "cpus": os.cpu_count(),
        "python": platform.python_version(), "torch": torch.__version__,
        "wall_s": None, "rows": rows, "loadavg": [load_start, common.loadavg()],
    }
    out = common.results_dir(args.out)
    res["wall_s"] = round(time.perf_counter() - t_start, 1)
    stem = common.stem("matchers", args.quick)
    common.write_json(out / f"{stem}.json", res, indent=1)
    write_markdown(res, out / f"{stem}.md")
    if plot(res, out / f"{stem}.png"):
        print(f"wrote {out / (stem + '.png')}")
    print(f"wrote {out / (stem + '.json')}, {out / (stem + '.md')} ({res['wall_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
