"""Matcher micro-benchmarks per pattern form: match_all throughput on
synthetic graphs of 10^3 to 10^6 nodes, verified vs reference engine, and the
fixed cost of one call through cffi.

One pattern per form of the language: plain operator application (the
baseline), alternates, guards, an operator variable with an op-class guard,
recursion, a nonlinear pattern (one variable twice) and ∃ with match
constraints. Each form gets its own seeded random graph in which a known set
of nodes are matching roots (the generator records them); both engines must
return exactly that set, with the same bindings, or the script fails.

For the verified engine the one-time costs are measured apart from matching:
encoding the graph to the binary format (Python), loading it into the
library (a handle the Graph caches), and encoding + loading the pattern set.
match_all is then timed with the handles cached: end to end (``pm.match_all``:
the C call, reading and decoding the result, building Match objects), the
same with Python's cyclic GC disabled, and as the bare ``pypm_match_all`` +
result copy through cffi (the engine alone). The reference engine is timed
end to end.

Writes bench/results/forms{,_quick}.json, .md and .png.
Usage: python bench/bench_forms.py [--quick] [--sizes 1000,10000,...]
                                   [--ref-max-nodes N] [--forms plain,guard,...]
  --quick: 10^3 and 10^4 nodes, fewer repeats (~10 s); writes forms_quick.*
  full:    10^3 .. 10^6 nodes (~6 min on 2 cores); writes forms.*
"""
import argparse
import datetime
import gc
import os
import platform
import random
import sys
import time

import common
from common import timed

import pypm_verified as pm
from paper_ops import Add, Div, Gelu, MatMul, Mul, Relu, Softmax, Tanh, Trans
from pypm_verified.engines import binding
from pypm_verified.engines.matching import PreparedPatterns

# ------------------------------------------------------------------- patterns


@pm.pattern
def Plain(x, y):
    return MatMul(x, Trans(y))


@pm.pattern
def Half(x):
    return Div(x, 2)


@pm.pattern
def Half(x):  # noqa: F811
    return Mul(x, 0.5)


@pm.pattern
def Half(x):  # noqa: F811
    return Mul(0.5, x)


@pm.pattern
def Guarded(x, y):
    assert x.shape.rank == 2 and y.shape.rank == 2
    assert x.dtype == pm.f32 and x.shape[-1] == y.shape[-1]
    return MatMul(x, Trans(y))


@pm.pattern
def Pointwise(x, f):
    assert f.op_class == pm.opclass("unary_pointwise")
    return f(x)


@pm.pattern
def Epilog(a, b):
    return Relu(Epilog(a, b))


@pm.pattern
def Epilog(a, b):  # noqa: F811
    return Gelu(Epilog(a, b))


@pm.pattern
def Epilog(a, b):  # noqa: F811
    return MatMul(a, b)


@pm.pattern
def Gram(x):
    return MatMul(x, Trans(x))


@pm.pattern
def ReluOfMM(x, a, b):
    t = pm.var()
    x <= Relu(t)
    t <= MatMul(a, b)
    return x


# --------------------------------------------------------------------- graphs
# Each generator builds about n nodes and returns (graph, ids of the nodes
# where the form's pattern matches, by construction). Every block hangs off
# the previous one (a chain), so hash-consing never merges blocks.

S, F32 = (64, 64), pm.f32


def g_plain(n, rng, p=0.5):
    """MatMul(h, Trans(w)) (match) or MatMul(h, Relu(w)) (fails at the second
    child): 3 nodes a block."""
    g, hits = pm.Graph(), set()
    h = g.input("x", shape=S, dtype=F32)
    i = 0
    while len(g) + 3 <= n:
        w = g.input(f"w{i}", shape=S, dtype=F32)
        ok = rng.random() < p
        t = g.apply(Trans if ok else Relu, w, shape=S, dtype=F32)
        h = g.apply(MatMul, h, t, shape=S, dtype=F32)
        if ok:
            hits.add(h.id)
        i += 1
    return g, hits


def g_alternates(n, rng, p=0.5):
    """A chain of one-node blocks: Div(h, 2), Mul(h, 0.5), Mul(0.5, h) (match
    the first, second, third alternate) or Mul(h, 0.25), Div(h, 3) (fail every
    alternate at the constant)."""
    g, hits = pm.Graph(), set()
    h = g.input("x", shape=S, dtype=F32)
    while len(g) + 2 <= n:  # +1 for a constant leaf created on first use
        if rng.random() < p:
            k = rng.randrange(3)
            args = ((Div, h, 2), (Mul, h, 0.5), (Mul, 0.5, h))[k]
            h = g.apply(*args, shape=S, dtype=F32)
            hits.add(h.id)
        else:
            args = ((Mul, h, 0.25), (Div, h, 3))[rng.randrange(2)]
            h = g.apply(*args, shape=S, dtype=F32)
    return g, hits


def g_guard(n, rng, p=0.5):
    """Independent MatMul(a, Trans(b)) blocks of 4 nodes (fresh inputs a, b):
    the structure always matches, the guard decides. Passing: a (64, k) f32,
    b (32, k); failing: a of rank 3, a in f16, or b's last dim != a's."""
    g, hits = pm.Graph(), set()
    i = 0
    while len(g) + 4 <= n:
        k = rng.choice((16, 32, 64))
        ok = rng.random() < p
        ashape, adt, bshape = (64, k), F32, (32, k)
        if not ok:
            why = rng.randrange(3)
            if why == 0:
                ashape = (8, 64, k)
            elif why == 1:
                adt = pm.f16
            else:
                bshape = (32, 2 * k)
        a = g.input(f"a{i}", shape=ashape, dtype=adt)
        b = g.input(f"b{i}", shape=bshape, dtype=F32)
        t = g.apply(Trans, b, shape=bshape[::-1], dtype=F32)
        m = g.apply(MatMul, a, t, shape=(ashape[0], bshape[0]), dtype=adt)
        if ok:
            hits.add(m.id)
        i += 1
    return g, hits


def g_opvar(n, rng, p=0.5):
    """A chain of one-node blocks: Relu/Gelu/Tanh(h) (unary pointwise: match),
    Softmax(h) (unary, fails the op-class guard) or Add(h, 1.0) (binary: fails
    the operator variable's arity)."""
    g, hits = pm.Graph(), set()
    h = g.input("x", shape=S, dtype=F32)
    while len(g) + 2 <= n:
        if rng.random() < p:
            h = g.apply(rng.choice((Relu, Gelu, Tanh)), h, shape=S, dtype=F32)
            hits.add(h.id)
        elif rng.random() < 0.5:
            h = g.apply(Softmax, h, shape=S, dtype=F32)
        else:
            h = g.apply(Add, h, 1.0, shape=S, dtype=F32)
    return g, hits


def g_recursion(n, rng, max_chain=8, p_tanh=0.15):
    """Blocks MatMul(h, w) then 0..max_chain unary ops (Relu/Gelu, or Tanh
    with probability p_tanh), sometimes a Softmax. A node matches iff it is a
    MatMul or a Relu/Gelu over a Relu/Gelu-only chain down to a MatMul
    (recursion depth up to max_chain)."""
    g, hits = pm.Graph(), set()
    h = g.input("x", shape=S, dtype=F32)
    i = 0
    while len(g) + max_chain + 3 <= n:
        w = g.input(f"w{i}", shape=S, dtype=F32)
        h = g.apply(MatMul, h, w, shape=S, dtype=F32)
        hits.add(h.id)
        ok = True
        for _ in range(rng.randint(0, max_chain)):
            if rng.random() < p_tanh:
                op, ok = Tanh, False
            else:
                op = rng.choice((Relu, Gelu))
            h = g.apply(op, h, shape=S, dtype=F32)
            if ok:
                hits.add(h.id)
        if rng.random() < 0.3:
            h = g.apply(Softmax, h, shape=S, dtype=F32)
        i += 1
    return g, hits


def g_nonlinear(n, rng, p=0.5):
    """MatMul(h, Trans(h)) (match: x twice) or MatMul(h, Trans(w)) with a fresh
    input w (fails on the second occurrence of x)."""
    g, hits = pm.Graph(), set()
    h = g.input("x", shape=S, dtype=F32)
    i = 0
    while len(g) + 3 <= n:
        if rng.random() < p:
            h = g.apply(MatMul, h, g.apply(Trans, h, shape=S, dtype=F32), shape=S, dtype=F32)
            hits.add(h.id)
        else:
            w = g.input(f"w{i}", shape=S, dtype=F32)
            h = g.apply(MatMul, h, g.apply(Trans, w, shape=S, dtype=F32), shape=S, dtype=F32)
        i += 1
    return g, hits


def g_constraint(n, rng, p=0.7):
    """Blocks w, MatMul(h, w) or Add(h, w), then Relu or Tanh of it: the Relu
    over a MatMul matches (~p² of the blocks), Tanh fails the first constraint,
    Relu(Add) the second."""
    g, hits = pm.Graph(), set()
    h = g.input("x", shape=S, dtype=F32)
    i = 0
    while len(g) + 3 <= n:
        w = g.input(f"w{i}", shape=S, dtype=F32)
        mm = rng.random() < p
        m = g.apply(MatMul if mm else Add, h, w, shape=S, dtype=F32)
        relu = rng.random() < p
        h = g.apply(Relu if relu else Tanh, m, shape=S, dtype=F32)
        if mm and relu:
            hits.add(h.id)
        i += 1
    return g, hits


FORMS = {
    "plain": (Plain, g_plain,
              "`Plain(x, y) = MatMul(x, Trans(y))` (operator application only)"),
    "alternates": (Half, g_alternates,
                   "`Half(x) = Div(x, 2) | Mul(x, 0.5) | Mul(0.5, x)` (three alternates)"),
    "guard": (Guarded, g_guard,
              "`MatMul(x, Trans(y))` with `assert x.shape.rank == 2 and y.shape.rank == 2` "
              "and `assert x.dtype == f32 and x.shape[-1] == y.shape[-1]`"),
    "opvar": (Pointwise, g_opvar,
              "`Pointwise(x, f) = f(x)` with `assert f.op_class == unary_pointwise` "
              "(an operator-variable parameter)"),
    "recursion": (Epilog, g_recursion,
                  "`Epilog(a, b) = Relu(Epilog(a, b)) | Gelu(Epilog(a, b)) | MatMul(a, b)` "
                  "(recursive, depth ≤ 8 in the graph)"),
    "nonlinear": (Gram, g_nonlinear, "`Gram(x) = MatMul(x, Trans(x))` (x twice)"),
    "constraint": (ReluOfMM, g_constraint,
                   "`ReluOfMM(x, a, b)`: `t = pm.var(); x <= Relu(t); t <= MatMul(a, b); "
                   "return x` (∃ and two match constraints)"),
}


# -------------------------------------------------------------------- helpers


def per_call_us(fn, calls, repeat=5):
    """Microseconds per call: the best of ``repeat`` loops of ``calls`` calls
    (the minimum, as timeit reports: the least disturbed by other jobs)."""
    _, ts, _ = timed(lambda: [fn() for _ in range(calls)], repeat, collect=True)
    return min(ts) / calls * 1e6


def canon(found):
    """Sorted (root, bindings, operator bindings) of a match_all answer."""
    return sorted((r.id, tuple(sorted((k, v.id) for k, v in m.bindings.items())),
                   tuple(sorted((k, f.name) for k, f in m.functions.items())))
                  for _, r, m in found)


def raw_match_all(lib, gh, ph):
    """The bare C calls of the verified match_all: pypm_match_all, then the
    result copied out and released (no decoding); returns the words."""
    ffi = binding.ffi
    result = ffi.new("int64_t *")
    length = ffi.new("size_t *")
    binding.check(lib, lib.pypm_match_all(gh.value, ph.value, 0, result, length),
                  "pypm_match_all")
    n = length[0]
    out = ffi.new("int64_t[]", max(n, 1))
    try:
        binding.check(lib, lib.pypm_result_read(result[0], out, n), "pypm_result_read")
    finally:
        lib.pypm_release(result[0])
    return n


def environment():
    lib = binding.engine_library_path()
    st = os.stat(lib) if os.path.exists(lib) else None
    try:
        import cffi
        cffi_version = cffi.__version__
    except Exception:
        cffi_version = None
    return {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": common.machine(),
        "cpu_count": os.cpu_count(),
        "loadavg_at_start": common.loadavg(),
        "cffi": cffi_version,
        "git_commit": common.git_commit(),
        "git_dirty": common.git_dirty(),
        "library": common.display_path(lib) if lib else lib,
        "library_mtime": (datetime.datetime.fromtimestamp(st.st_mtime).isoformat(timespec="seconds")
                          if st else None),
        "library_bytes": st.st_size if st else None,
        "format_version": binding.serialize.VERSION,
    }


# ----------------------------------------------------------------- fixed cost


def fixed_cost(quick):
    """Per-call costs on a 3-node graph: the cffi floor, pypm_match on a root
    that fails at once, pm.match (failing and matching root) and
    pm.match_all on a 1-node graph, per engine."""
    lib = binding.open_engine_library()
    calls = 2_000 if quick else 10_000
    g = pm.Graph()
    a = g.input("a", shape=S, dtype=F32)
    b = g.input("b", shape=S, dtype=F32)
    m = g.apply(MatMul, a, g.apply(Trans, b, shape=S, dtype=F32), shape=S, dtype=F32)
    s = PreparedPatterns([Plain])
    gh = binding.graph_handle(lib, g)
    ph = binding.pattern_set_handle(lib, s.defs, s.roots, s.owner)
    out = binding.ffi.new("int64_t[]", 16)
    out_len = binding.ffi.new("size_t *")
    assert pm.match(Plain, a) is None and pm.match(Plain, m) is not None
    assert pm.match(Plain, a, engine="reference") is None
    assert pm.match(Plain, m, engine="reference") is not None
    version = lib.pypm_format_version
    call = lib.pypm_match
    res = {
        "calls_per_measure": calls,
        "cffi_floor_us": per_call_us(version, calls),
        "raw_pypm_match_fail_us": per_call_us(
            lambda: call(gh.value, ph.value, 0, a.id, 0, out, 16, out_len), calls),
        "raw_pypm_match_hit_us": per_call_us(
            lambda: call(gh.value, ph.value, 0, m.id, 0, out, 16, out_len), calls),
    }
    for engine in ("verified", "reference"):
        res[f"pm_match_fail_{engine}_us"] = per_call_us(
            lambda: pm.match(Plain, a, engine=engine), calls)
        res[f"pm_match_hit_{engine}_us"] = per_call_us(
            lambda: pm.match(Plain, m, engine=engine), calls)
    g1 = pm.Graph()
    g1.input("only", shape=S, dtype=F32)
    pm.match_all([Plain], g1)
    gh1 = binding.graph_handle(lib, g1)
    ph1 = binding.pattern_set_handle(lib, s.defs, s.roots)
    res["raw_pypm_match_all_1node_us"] = per_call_us(lambda: raw_match_all(lib, gh1, ph1),
                                                     calls // 4)
    for engine in ("verified", "reference"):
        res[f"pm_match_all_1node_{engine}_us"] = per_call_us(
            lambda: pm.match_all([Plain], g1, engine=engine), calls // 4)
    return res


# ---------------------------------------------------------------- throughput


def repeats(n, quick):
    """Timed runs per (size, measure): verified end to end, verified with the
    GC off, the bare C call, reference."""
    if quick:
        r = (15, 7) if n <= 1_000 else (7, 3)
    elif n <= 1_000:
        r = (21, 9)
    elif n <= 10_000:
        r = (9, 5)
    elif n <= 100_000:
        r = (3, 3)
    else:
        r = (1, 1)
    return {"verified": r[0], "verified_gc_off": max(1, r[0] // 2), "raw_c": max(3, r[0]),
            "reference": r[1]}


def bench_form(name, size, quick, ref_max, lib, log):
    t_row = time.perf_counter()
    pattern, gen, _ = FORMS[name]
    rng = random.Random(f"{name}-{size}")
    gc.disable()  # building is not measured: no collections over the growing graph
    try:
        t_build, _, (g, hits) = timed(lambda: gen(size, rng))
    finally:
        gc.enable()
    n = len(g)
    row = {"form": name, "pattern": pattern.name, "target_nodes": size, "nodes": n,
           "expected_matches": len(hits), "match_fraction": len(hits) / n,
           "build_s": t_build}
    # one-time costs of the verified engine on the fresh graph: encode (Python),
    # load (pypm_graph_load, the handle is cached on the Graph), and the
    # pattern set's encode + load (a fresh handle, released again)
    t_enc, _, words = timed(g.encode)
    t_load, _, gh = timed(lambda: binding.graph_handle(lib, g))
    s = PreparedPatterns([pattern])
    t_pat, _, h = timed(lambda: binding.load_patterns(
        lib, binding.serialize.encode_patterns(s.defs, s.roots)))
    h.release()
    ph = binding.pattern_set_handle(lib, s.defs, s.roots)  # what match_all uses
    row["verified_once"] = {"encode_s": t_enc, "encode_words": len(words),
                            "load_s": t_load, "pattern_set_s": t_pat}
    words = None
    rep = repeats(size, quick)
    ce = n <= 200_000  # a full collection costs ~1 s at 10^6 nodes: once per series there
    t, ts, found = timed(lambda: pm.match_all([pattern], g, engine="verified"), rep["verified"],
                         collect=True, collect_each=ce)
    got = canon(found)
    if {r for r, _, _ in got} != hits:
        raise SystemExit(f"{name} @ {n}: verified engine found {len(got)} matches, "
                         f"expected {len(hits)} (roots differ)")
    n_found = len(found)
    found = None
    # the collector is off, or the call allocates next to nothing in Python: no
    # collection needed before these (the previous result is freed by refcount)
    t_off, ts_off, _ = timed(lambda: len(pm.match_all([pattern], g, engine="verified")),
                             rep["verified_gc_off"], gc_off=True, collect_each=ce, collect=ce)
    t_raw, ts_raw, _ = timed(lambda: raw_match_all(lib, gh, ph), rep["raw_c"],
                             collect_each=ce, collect=ce)
    row["verified"] = {"seconds": t, "runs": ts, "gc_off_seconds": t_off, "gc_off_runs": ts_off,
                       "raw_c_seconds": t_raw, "raw_c_runs": ts_raw,
                       "matches": n_found, "matches_per_s": n_found / t,
                       "nodes_per_s": n / t, "gc_off_matches_per_s": n_found / t_off,
                       "raw_c_matches_per_s": n_found / t_raw, "raw_c_nodes_per_s": n / t_raw}
    if n <= ref_max:
        t, ts, found = timed(lambda: pm.match_all([pattern], g, engine="reference"),
                             rep["reference"], collect=True, collect_each=ce)
        ref = canon(found)
        if ref != got:
            diff = sorted(set(ref) ^ set(got))[:5]
            raise SystemExit(f"{name} @ {n}: engines disagree ({len(ref)} reference vs "
                             f"{len(got)} verified matches); first differences: {diff}")
        row["reference"] = {"seconds": t, "runs": ts, "matches": len(found),
                            "matches_per_s": len(found) / t, "nodes_per_s": n / t}
        row["speedup_reference_over_verified"] = t / row["verified"]["seconds"]
        found = ref = None
    else:
        row["reference"] = None
        row["speedup_reference_over_verified"] = None
    row["row_wall_s"] = time.perf_counter() - t_row
    log(f"{name:>10} {n:>8} nodes {len(hits):>7} matches  build {t_build:5.2f}s "
        f"enc {t_enc*1e3:6.1f}ms load {t_load*1e3:6.1f}ms  "
        f"verified {row['verified']['seconds']*1e3:7.1f}ms (GC off {t_off*1e3:7.1f}, "
        f"C {t_raw*1e3:6.1f})  [{row['row_wall_s']:.0f}s]  "
        + (f"reference {row['reference']['seconds']*1e3:8.1f}ms  "
           f"x{row['speedup_reference_over_verified']:.2f}" if row["reference"]
           else "reference skipped"))
    return row


# -------------------------------------------------------------------- outputs


def fmt_rate(x):
    return "–" if x is None else f"{x:,.0f}"


def write_md(path, out):
    fc = out["fixed_cost"]
    q = out["quick"]
    md = [f"# Matcher micro-benchmarks per pattern form{' (quick)' if q else ''}", "",
          f"`python bench/bench_forms.py{' --quick' if q else ''}` — "
          f"{out['environment']['date']}, {out['environment']['cpu_count']} CPUs "
          f"({out['environment']['machine']}, shared machine), Python "
          f"{out['environment']['python']}, one process. Total wall time "
          f"{out['wall_s']:.0f} s.", "",
          "## Fixed cost of one call", "",
          f"Per call, best of 5 loops of {fc['calls_per_measure']} calls, on a 3-node graph "
          "with `Plain`, handles already loaded.", "",
          "| call | verified (µs) | reference (µs) |", "|---|---|---|",
          f"| cffi floor: `pypm_format_version()` | {fc['cffi_floor_us']:.2f} | – |",
          f"| bare `pypm_match` through cffi, root fails at its label | "
          f"{fc['raw_pypm_match_fail_us']:.2f} | – |",
          f"| bare `pypm_match` through cffi, root matches | "
          f"{fc['raw_pypm_match_hit_us']:.2f} | – |",
          f"| `pm.match`, root fails at its label | {fc['pm_match_fail_verified_us']:.1f} | "
          f"{fc['pm_match_fail_reference_us']:.1f} |",
          f"| `pm.match`, root matches | {fc['pm_match_hit_verified_us']:.1f} | "
          f"{fc['pm_match_hit_reference_us']:.1f} |",
          f"| bare `pypm_match_all` + `pypm_result_read` + release through cffi, "
          f"1-node graph | {fc['raw_pypm_match_all_1node_us']:.2f} | – |",
          f"| `pm.match_all` on a 1-node graph | {fc['pm_match_all_1node_verified_us']:.1f} | "
          f"{fc['pm_match_all_1node_reference_us']:.1f} |", "",
          "## match_all throughput", "",
          "Medians of repeated `pm.match_all([P], g)` calls with the graph handle cached "
          "(runs verified / reference per size: "
          + ", ".join(f"{int(k):,}: {v['verified']}/{v['reference']}"
                      for k, v in out["repeats"].items()) + "). "
          "*verified* is end to end, as a user calls it (the C call, then decoding the "
          "result and building one `Match` per match in Python, with the cyclic garbage "
          "collector on); *GC off* is the same call with `gc.disable()`; *C* is the bare "
          "`pypm_match_all` + result copy through cffi (the engine alone). "
          "*speedup* is reference time / verified time, both end to end "
          "(> 1: the verified engine is faster).", "",
          "| form | nodes | matches (fraction) | verified (ms) | GC off (ms) | C (ms) | "
          "reference (ms) | verified matches/s | reference matches/s | verified nodes/s | "
          "reference nodes/s | speedup |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in out["rows"]:
        v, ref = r["verified"], r["reference"]
        ref_ms = "–" if ref is None else f"{ref['seconds'] * 1e3:.1f}"
        speedup = "–" if ref is None else f"{r['speedup_reference_over_verified']:.2f}x"
        md.append(
            f"| {r['form']} | {r['nodes']:,} | {v['matches']:,} ({r['match_fraction']:.0%}) | "
            f"{v['seconds']*1e3:.1f} | {v['gc_off_seconds']*1e3:.1f} | "
            f"{v['raw_c_seconds']*1e3:.1f} | {ref_ms} | "
            f"{fmt_rate(v['matches_per_s'])} | {fmt_rate(ref and ref['matches_per_s'])} | "
            f"{fmt_rate(v['nodes_per_s'])} | {fmt_rate(ref and ref['nodes_per_s'])} | "
            f"{speedup} |")
    md += ["", "## One-time costs of the verified engine", "",
           "On the fresh graph: building it in Python (`pm.Graph`, both engines need it; "
           "timed with the GC off), encoding it to the binary format (`Graph.encode`, "
           "Python), loading it into the library (`pypm_graph_load`; the Graph caches the "
           "handle, so only the first `match_all` on a graph pays encode + load), and "
           "encoding + loading the pattern set (cached too). A first call costs about "
           "encode + load + warm.", "",
           "| form | nodes | build (ms) | encode (ms) | load (ms) | pattern set (ms) | "
           "warm match_all (ms) |", "|---|---:|---:|---:|---:|---:|---:|"]
    for r in out["rows"]:
        o = r["verified_once"]
        md.append(f"| {r['form']} | {r['nodes']:,} | {r['build_s']*1e3:.1f} | "
                  f"{o['encode_s']*1e3:.1f} | {o['load_s']*1e3:.1f} | "
                  f"{o['pattern_set_s']*1e3:.2f} | {r['verified']['seconds']*1e3:.1f} |")
    md += ["", "## Patterns and graphs", ""]
    for name, (_, gen, desc) in FORMS.items():
        if name in out["forms"]:
            md.append(f"* **{name}** — {desc}. Graph: {' '.join(gen.__doc__.split())}")
    md += ["", "Each graph is seeded (`random.Random(f'{form}-{size}')`); the generator records "
           "the nodes that must match, and both engines returned exactly those roots with "
           "identical bindings and operator bindings (checked on every row)."]
    if out["notes"]:
        md += ["", "## Notes", ""] + [f"* {n}" for n in out["notes"]]
    return common.write_md(path, md)


def write_png(path, out):
    """The throughput plots; False without matplotlib."""
    plt = common.pyplot()
    if plt is None:
        return False
    forms = out["forms"]
    ncols = 4
    nrows = (len(forms) + 1 + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(4 * ncols, 3.4 * nrows), squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax, name in zip(flat, forms):
        rows = [r for r in out["rows"] if r["form"] == name]
        xs = [r["nodes"] for r in rows]
        ax.plot(xs, [r["verified"]["matches_per_s"] for r in rows], "o-", label="verified")
        ax.plot(xs, [r["verified"]["gc_off_matches_per_s"] for r in rows],
                "d--", color="C0", alpha=0.7, label="verified, GC off")
        ax.plot(xs, [r["verified"]["raw_c_matches_per_s"] for r in rows],
                "s:", color="C0", alpha=0.5, label="verified, C call only")
        rr = [r for r in rows if r["reference"]]
        ax.plot([r["nodes"] for r in rr], [r["reference"]["matches_per_s"] for r in rr],
                "^-", color="C3", label="reference")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{name} ({FORMS[name][0].name})")
        ax.set_xlabel("graph nodes")
        ax.set_ylabel("matches / s")
        ax.grid(True, which="both", alpha=0.3)
    ax = flat[len(forms)]
    for i, name in enumerate(forms):
        rows = [r for r in out["rows"] if r["form"] == name and r["reference"]]
        ax.plot([r["nodes"] for r in rows], [r["speedup_reference_over_verified"] for r in rows],
                "o-", color=f"C{i}", label=name)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_title("speedup: reference time / verified time")
    ax.set_xlabel("graph nodes")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    for ax in flat[len(forms) + 1:]:
        ax.axis("off")
    flat[0].legend(fontsize=7)
    fig.suptitle("pypm_verified match_all throughput per pattern form"
                 + (" (quick)" if out["quick"] else ""))
    common.save_figure(fig, path)
    return True


def main():
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--quick", action="store_true", help="10^3 and 10^4 nodes, few repeats")
    ap.add_argument("--sizes", help="comma-separated node counts (default 10^3..10^6, "
                                    "10^3,10^4 with --quick)")
    ap.add_argument("--ref-max-nodes", type=int, default=None,
                    help="skip the reference engine above this many nodes (default: none)")
    ap.add_argument("--forms", help="comma-separated subset of " + ",".join(FORMS))
    ap.add_argument("--out", help="output basename in bench/results "
                                  "(default forms, forms_quick with --quick)")
    args = ap.parse_args()
    t_start = time.perf_counter()
    sizes = ([int(float(s)) for s in args.sizes.split(",")] if args.sizes
             else [1_000, 10_000] if args.quick else [1_000, 10_000, 100_000, 1_000_000])
    forms = args.forms.split(",") if args.forms else list(FORMS)
    for f in forms:
        if f not in FORMS:
            ap.error(f"unknown form {f!r}; expected some of {','.join(FORMS)}")
    ref_max = args.ref_max_nodes if args.ref_max_nodes is not None else 10 ** 9
    lib = binding.open_engine_library()
    env = environment()

    def log(msg):
        print(msg, flush=True)

    log(f"fixed cost of one call ({'quick' if args.quick else 'full'}) ...")
    fc = fixed_cost(args.quick)
    log("  " + ", ".join(f"{k}={v:.2f}" for k, v in fc.items() if k.endswith("_us")))
    rows = []
    for size in sizes:
        for name in forms:
            rows.append(bench_form(name, size, args.quick, ref_max, lib, log))
            gc.collect()
    notes = []
    if any(r["reference"] is None for r in rows):
        notes.append(f"The reference engine was not run above {ref_max:,} nodes "
                     "(--ref-max-nodes).")
    singles = [s for s in sizes if repeats(s, args.quick)["verified"] == 1]
    if singles:
        notes.append("At " + ", ".join(f"{s:,}" for s in singles) + " nodes each measure "
                     "is a single run (verified end to end, GC off, reference; the bare C call "
                     "takes the median of 3), to keep the full run near 6 minutes.")
    if any(repeats(s, args.quick)["reference"] == 1 for s in sizes if s not in singles):
        notes.append("Rows with one reference run are single runs, not medians.")
    slower = [f"{r['form']} @ {r['nodes']:,}" for r in rows
              if r["speedup_reference_over_verified"] is not None
              and r["speedup_reference_over_verified"] < 1]
    if slower:
        notes.append("The verified engine was slower than the reference on: "
                     + ", ".join(slower) + ".")
    notes.append("Timings are wall-clock on a shared 2-core machine (other jobs ran "
                 "beside this one: see the load averages in the JSON). The cyclic garbage "
                 "collector stays enabled except in the *GC off* column, so the Python side "
                 "of both engines pays for collections over the large live graph, as a user "
                 "would; a full collection runs before each timed call (above 200,000 "
                 "nodes, where one costs about a second, before the end-to-end and the "
                 "reference series only). Graph building is timed with the GC off.")
    out = {
        "benchmark": "forms",
        "quick": args.quick,
        "environment": env,
        "sizes": sizes,
        "forms": forms,
        "patterns": {k: FORMS[k][2] for k in forms},
        "repeats": {str(s): repeats(s, args.quick) for s in sizes},
        "ref_max_nodes": args.ref_max_nodes,
        "fixed_cost": fc,
        "rows": rows,
        "notes": notes,
    }
    out["wall_s"] = time.perf_counter() - t_start
    out["environment"]["loadavg_at_end"] = common.loadavg()
    base = args.out or common.stem("forms", args.quick)
    results = common.results_dir()
    common.write_json(results / f"{base}.json", out)
    md = write_md(results / f"{base}.md", out)
    png = write_png(results / f"{base}.png", out)
    print("\n".join(md))
    print(f"wrote {results / base}.{{json,md{',png' if png else ''}}} in {out['wall_s']:.0f} s")


if __name__ == "__main__":
    main()
