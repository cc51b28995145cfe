"""The fixpoint's fast paths give what the slow paths give.

* the importer's per-overload schema normalization and purity cache;
* the driver's ``meta["val"]`` reuse for calls with arguments of the same
  metadata, against a fresh fake-tensor run;
* ``PatternSet`` through ``binding.SetMatcher`` (one handle per table,
  shared by the driver runs) against the reference engine on every node of
  a model graph (differential);
* the profile of bench/profile_fixpoint.py adds up to its total.
"""
import copy
import os
import sys

import pytest

torch = pytest.importorskip("torch")

import pypm_verified as pm  # noqa: E402
from pypm_verified.engines import matching  # noqa: E402
from pypm_verified.library import default_patterns  # noqa: E402
from pypm_verified.torch import driver as D  # noqa: E402
from pypm_verified.torch import metadata  # noqa: E402
from pypm_verified.torch.importer import TermGraph, is_pure, positional_args  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import models  # noqa: E402

aten = torch.ops.aten


@pytest.fixture(scope="module")
def bert2():
    return models.export("bert", "base", layers=2)


def _fx_graph():
    return torch.fx.Graph()


# ------------------------------------------------------------------ importer

def test_positional_args_fill_defaults_kwargs_and_refuse_misfits():
    g = _fx_graph()
    x = g.placeholder("x")
    n = g.call_function(aten.softmax.int, (x, -1))
    assert positional_args(n) == [x, -1, None]
    n = g.call_function(aten.softmax.int, (x,), {"dim": 1, "dtype": torch.float32})
    assert positional_args(n) == [x, 1, torch.float32]
    n = g.call_function(aten.sum.dim_IntList, (x, [0]), {"keepdim": True})
    assert positional_args(n) == [x, [0], True, None]
    # keyword-only arguments (to.dtype's memory_format) are filled from kwargs or defaults
    n = g.call_function(aten.to.dtype, (x, torch.float16), {"memory_format": None})
    assert positional_args(n)[:2] == [x, torch.float16] and len(positional_args(n)) == 5
    with pytest.raises(TypeError, match="do not fit"):
        positional_args(g.call_function(aten.softmax.int, (x, -1), {"bogus": 1}))
    with pytest.raises(TypeError, match="do not fit"):
        positional_args(g.call_function(aten.softmax.int, (x, -1, None, 7)))
    with pytest.raises(TypeError, match="do not fit"):  # given twice
        positional_args(g.call_function(aten.softmax.int, (x, -1), {"dim": 0}))
    with pytest.raises(TypeError, match="missing argument 'dim'"):
        positional_args(g.call_function(aten.softmax.int, (x,)))


def test_purity_is_cached_per_overload_and_stays_right():
    g = _fx_graph()
    x = g.placeholder("x")
    for _ in range(2):  # the second time from the cache
        assert is_pure(g.call_function(aten.relu.default, (x,)))
        assert not is_pure(g.call_function(aten.relu_.default, (x,)))  # mutates
        assert not is_pure(g.call_function(aten.native_dropout.default, (x, 0.5, True)))
        assert not is_pure(g.call_function(aten.rand.default, ([2],)))


def test_constants_are_told_apart_by_type():
    g = _fx_graph()
    x = g.placeholder("x")
    a = g.call_function(aten.mul.Tensor, (x, 2))
    b = g.call_function(aten.mul.Tensor, (x, 2.0))
    c = g.call_function(aten.mul.Tensor, (x, True))
    g.output((a, b, c))
    tg = TermGraph(g).build()
    # numbers by value (as Graph.const: x*2 and x*2.0 are one node), bools apart
    assert tg.merged == 1 and b not in tg.term
    ka, kc = tg.term[a].args[1], tg.term[c].args[1]
    assert kc is not ka
    assert type(tg.const_values[ka.id]) is int and tg.const_values[kc.id] is True


# ------------------------------------------------------------------ meta[val]

def _meta(t):
    return (tuple(t.shape), t.stride(), t.storage_offset(), t.dtype, t.device,
            t.requires_grad)


def test_meta_val_reuse_equals_a_fresh_fake_run(bert2):
    ep = copy.deepcopy(bert2)
    d = D.Driver(ep.graph_module, default_patterns(), "reference", "cpu",
                 check_profitability=False)
    nodes = {n.name: n for n in ep.graph.nodes}
    x = next(n for n in ep.graph.nodes if n.op == "call_function"
             and n.target == aten.linear.default)
    q = next(n for n in ep.graph.nodes if n.target == aten.transpose.int
             and n.meta["val"].dim() == 4)  # (batch, heads, seq, head dim)
    calls = [(aten.relu.default, [x], {}), (aten.mul.Tensor, [x, 2], {}),
             (aten.mul.Tensor, [x, 2.0], {}), (aten.add.Tensor, [x, x], {"alpha": 1}),
             (aten.scaled_dot_product_attention.default, [q, q, q], {}),
             (aten.sum.dim_IntList, [x, [-1], True], {})]
    for target, pos, kw in calls:
        first = d.meta_val(target, pos, kw)
        assert metadata.meta_key(target, pos, kw) in d.metadata.cache
        again = d.meta_val(target, pos, kw)  # from the cache
        fake = torch.fx.node.map_arg((tuple(pos), kw), lambda n: n.meta["val"])
        with d.fake_mode:
            fresh = target(*fake[0], **fake[1])
        assert _meta(again) == _meta(first) == _meta(fresh)
        assert type(again) is type(fresh) and again.fake_mode is d.fake_mode
        assert again.untyped_storage()._cdata != first.untyped_storage()._cdata  # own storage
    assert nodes  # the graph was read
    # an int and a float scalar are different keys (type promotion differs)
    key = metadata.meta_key
    assert key(aten.mul.Tensor, [x, 2], {}) != key(aten.mul.Tensor, [x, 2.0], {})
    # views and in-place ops are never cached (the result aliases an input)
    assert metadata.meta_key(aten.permute.default, [x, [0, 2, 1]], {}) is None
    assert metadata.meta_key(aten.view.default, [x, [-1]], {}) is None
    assert metadata.meta_key(aten.relu_.default, [x], {}) is None
    # one cache for the process: another driver finds the entries, and makes
    # its own fake tensors from them
    ep2 = copy.deepcopy(bert2)
    d2 = D.Driver(ep2.graph_module, default_patterns(), "reference", "cpu",
                  check_profitability=False)
    x2 = next(n for n in ep2.graph.nodes if n.name == x.name)
    assert d2.metadata.cache is d.metadata.cache and d2.metadata is not d.metadata
    assert key(aten.relu.default, [x2], {}) == key(aten.relu.default, [x], {})
    assert key(aten.relu.default, [x2], {}) in d2.metadata.cache
    got = d2.meta_val(aten.relu.default, [x2], {})
    assert got.fake_mode is d2.fake_mode and _meta(got) == _meta(x2.meta["val"])
    assert got is not x2.meta["val"]
    # a call without a tensor argument (a factory) reads the default device
    zeros = (aten.zeros.default, [[2, 3]], {})
    on_cpu = key(*zeros)
    torch.set_default_device("meta")
    try:
        assert key(*zeros) != on_cpu
    finally:
        torch.set_default_device(None)
    assert key(*zeros) == on_cpu


def test_metadata_cache_is_bounded(bert2, monkeypatch):
    """The process's metadata cache drops its oldest entry past its bound."""
    ep = copy.deepcopy(bert2)
    d = D.Driver(ep.graph_module, default_patterns(), "reference", "cpu",
                 check_profitability=False)
    x = next(n for n in ep.graph.nodes if n.op == "call_function"
             and n.target == aten.linear.default)
    cache = d.metadata.cache
    d.meta_val(aten.relu.default, [x], {})
    monkeypatch.setattr(metadata, "_RESULTS_SIZE", len(cache))
    oldest = next(iter(cache))
    d.meta_val(aten.mul.Tensor, [x, 3.5], {})  # a key no other test makes
    assert metadata.meta_key(aten.mul.Tensor, [x, 3.5], {}) in cache
    assert oldest not in cache and len(cache) == metadata._RESULTS_SIZE


# ------------------------------------------------------------------ engines

def test_set_matcher_agrees_with_the_reference_engine_on_every_node(bert2, lib):
    ep = copy.deepcopy(bert2)
    tg = TermGraph(ep.graph).build()
    pats = [p for p in default_patterns() if p.rules and not p.is_multi]
    sets = {e: matching.PatternSet(pats, e) for e in ("verified", "reference")}
    hits = 0
    for t in tg.graph.nodes:
        cand = sets["verified"].candidates(t.label)
        assert cand == sets["reference"].candidates(t.label)
        at = sets["verified"].candidates_at(t)  # the shapes index: what the driver tries
        assert at == sets["reference"].candidates_at(t) and set(at) <= set(cand)
        for i in range(len(pats)):  # every pattern, not only the candidates
            mv = sets["verified"].match(i, t)
            mr = sets["reference"].match(i, t)
            assert (mv is None) == (mr is None), (pats[i].name, t)
            if mv is not None:
                assert i in at
                assert mv.substitution == mr.substitution
                assert mv.fsubstitution == mr.fsubstitution
                hits += 1
    assert hits >= 4  # 2 attention + 2 linear_act, at least
    # a second set on the same patterns shares the loaded table and the matcher
    again = matching.PatternSet(pats, "verified")
    assert again._owner is sets["verified"]._owner
    assert again._owner.engine_handle is not None


@pytest.mark.parametrize("native", ["1", "0"])
def test_first_match_is_the_first_of_the_matches_in_turn(bert2, lib, native, monkeypatch):
    """``PatternSet.first_match`` (the driver's matching at a node: one call
    into the engine for a run of patterns, from C with the native reader)
    gives, from every start, the first pattern of the run that ``match``
    finds, with the same match, on every node of a model and every run of
    patterns (not only the candidates)."""
    from pypm_verified import _native
    monkeypatch.setenv(_native.ENV, native)
    tg = TermGraph(copy.deepcopy(bert2).graph).build()
    pats = [p for p in default_patterns() if p.rules and not p.is_multi]
    ps = matching.PatternSet(pats, "verified")
    runs = [tuple(range(len(pats))), tuple(reversed(range(len(pats))))]
    found = 0
    for t in tg.graph.nodes:
        for run in runs + [ps.candidates(t.label)]:
            each = [ps.match(i, t) for i in run]
            for start in range(len(run) + 1):
                want = next(((k, m) for k, m in enumerate(each) if k >= start and m is not None),
                            None)
                got = ps.first_match(run, t, start)
                assert (got is None) == (want is None), (t, run, start)
                if got is not None:
                    assert got[0] == want[0]
                    assert got[1].substitution == want[1].substitution
                    assert got[1].fsubstitution == want[1].fsubstitution
                    found += 1
    assert found > 10


def test_native_first_match_refuses_malformed_calls(bert2, lib):
    from pypm_verified import _native
    from pypm_verified.engines import binding, serialize
    native = _native.reader()
    if native is None:
        pytest.skip("the native reader is not built")
    tg = TermGraph(copy.deepcopy(bert2).graph).build()
    pats = [p for p in default_patterns() if p.rules and not p.is_multi]
    ps = matching.PatternSet(pats, "verified")
    sm = ps._set_matcher()
    gh = binding.graph_handle(sm.lib, tg.graph)
    fn = int(binding.ffi.cast("uintptr_t", sm._call))
    ok = (fn, gh.value, sm._pv, 0, 0, (0,), 0, serialize.STATUS_NO_MATCH, sm._cap)
    assert native.first_match(*ok) is None  # the first node is an input: no pattern's root
    for i, bad in ((0, 0), (5, [0]), (5, (-1,)), (5, ("x",)), (6, -1), (8, 0)):
        with pytest.raises((TypeError, ValueError)):
            native.first_match(*ok[:i], bad, *ok[i + 1:])
    # a bad handle is the engine's error code: the caller's path asks again and raises
    assert native.first_match(fn, 10 ** 9, sm._pv, 0, 0, (0,), 0,
                              serialize.STATUS_NO_MATCH, sm._cap) == (0, None)
    with pytest.raises(binding.EngineError):
        ps.first_match((0,), type("N", (), {"graph": tg.graph, "id": 10 ** 9})())


def test_driver_runs_agree_and_reuse_the_table(bert2, lib):
    counts = []
    for engine in ("verified", "reference", "verified"):
        ep = copy.deepcopy(bert2)
        r = D.rewrite_graph_module(ep.graph_module, default_patterns(), engine=engine,
                                   target="cpu", check_profitability=False)
        counts.append((dict(r.firings), [str(n.target) for n in ep.graph.nodes]))
    assert counts[0] == counts[1] == counts[2]
    assert sum(counts[0][0].values()) == 4


# ------------------------------------------------------------------ the profile

def test_profile_phases_add_up(bert2, lib):
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import profile_fixpoint as P
    import bench_matchers as B
    prof = P.profile(bert2, "verified", repeats=1, run=B.run_pypm)
    total = sum(ms for _, ms, _ in prof["phases"])
    assert abs(total - prof["total_ms"]) < 1e-6 * max(1.0, prof["total_ms"]) + 1e-3
    names = {n for n, _, _ in prof["phases"]}
    assert {"import (whole graph, once)", "engine: call + decoding (verified)",
            "rule bodies (guards, building)"} <= names
    # the wrappers are removed afterwards
    from pypm_verified.torch.importer import TermGraph as TG
    assert TG.build.__name__ == "build" and not hasattr(TG.build, "__wrapped__")


def test_set_matcher_is_safe_across_threads(bert2, lib):
    import threading
    ep = copy.deepcopy(bert2)
    tg = TermGraph(ep.graph).build()
    pats = [p for p in default_patterns() if p.rules and not p.is_multi]
    ps = matching.PatternSet(pats, "verified")
    pairs = [(i, t) for t in tg.graph.nodes for i in ps.candidates(t.label)]
    ps.match(*pairs[0])  # the graph loaded once before the threads start
    want = [ps.match(i, t) for i, t in pairs]
    got = {}

    def work(k):
        got[k] = [matching.PatternSet(pats, "verified").match(i, t) for i, t in pairs]
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for k in range(4):
        assert [None if m is None else (m.substitution, m.fsubstitution) for m in got[k]] == \
            [None if m is None else (m.substitution, m.fsubstitution) for m in want]


def test_validator_bench_times_every_part(bert2, lib):
    """bench_validator.py's parts are the validator's calls of a real
    fixpoint, each timed in place and (where repeatable) hot, and its
    wrappers are removed afterwards."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import bench_validator as BV
    r = BV.measure(bert2, runs=2)
    parts = {row["part"]: row for row in r["parts"]}
    assert {"encode (pass start)", "encode (after the pass)", "images", "correspond",
            "checker (OCaml)", "certificate words", "substitution", "template"} <= set(parts)
    # one certified pass; a template per firing (2 layers x (GELU, attention))
    assert parts["checker (OCaml)"]["calls"] == 1 and parts["template"]["calls"] == 4
    assert parts["substitution"]["calls"] >= 4
    assert parts["correspond"]["hot_ms"] is None  # not repeatable: it fills the pass
    for name, row in parts.items():
        assert row["in_place_ms"] > 0 and (name == "correspond" or row["hot_ms"] > 0)
        # per fixpoint: the median of each fixpoint's sum of its calls
        assert row["per_fixpoint_ms"] > 0
        if row["calls"] == 1:
            assert row["per_fixpoint_ms"] == pytest.approx(row["in_place_ms"])
    assert 0 < r["validator_ms"] < r["fixpoint_ms"]
    assert r["validator_pct"] == pytest.approx(100 * r["validator_ms"] / r["fixpoint_ms"],
                                               rel=0.5)
    from pypm_verified.torch.validate_fx import FxChecker
    assert FxChecker.encode.__name__ == "encode" and FxChecker._template.__name__ == "_template"


def _window_ends(monkeypatch, mutate=None):
    """Make every end of an FX pass that fired the end on its windows
    (``bench/window_end.py``), ``mutate(checker)`` first when given; returns
    the list of ``(pass, matcher's window)`` checked."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import window_end as W
    from pypm_verified.torch import validate_fx as VF
    checked = []
    build, orig_end = W._windows, VF.FxChecker.end

    def windows(*a):
        got = build(*a)
        checked.append(got[:2])
        return got

    def end(self, number, final=True):
        fired = self.driver.firings[self.start:]
        if fired and self.before is not None and final:
            self.in_pass = False
            if mutate is not None:
                mutate(self)
            assert W.check_window(self, number, fired)  # covered (a rejection raises)
            self.before = None
            return None
        return orig_end(self, number, final)

    monkeypatch.setattr(W, "_windows", windows)
    monkeypatch.setattr(VF.FxChecker, "end", end)
    return checked


def test_window_end_checks_the_pass_on_its_region(bert2, lib, monkeypatch):
    """bench/window_end.py's end of pass (windows built from a sweep of the
    node list, not from the whole graph after the pass) covers the library's
    pass on BERT and accepts it, on windows smaller than the graphs; its
    parts are timed side by side with the whole graphs'; and a change behind
    the driver's back outside every firing (a kept node's arguments swapped)
    is found by the sweep and refused on the windows."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    from bench_matchers import run_pypm
    from pypm_verified.rewriting import validate as V
    from pypm_verified.rewriting.validate import RewriteRejected
    whole, check = [], V.Pass.check_certified

    def whole_check(self, *a, **k):
        whole.append(self)
        return check(self, *a, **k)

    monkeypatch.setattr(V.Pass, "check_certified", whole_check)
    run_pypm(copy.deepcopy(bert2), "verified")
    monkeypatch.undo()
    assert len(whole) == 1
    checked = _window_ends(monkeypatch)
    run_pypm(copy.deepcopy(bert2), "verified")
    assert len(checked) == 1
    p, wg = checked[0]
    rules = [f for f in p.firings if f.rule is not None]
    assert len(rules) == 4 and all(f.certificate is not None for f in rules)
    # the same merges as the whole graphs' (an erased node equal to a created one)
    assert [(f.root_name, f.replacement_name) for f in p.firings] == \
        [(f.root_name, f.replacement_name) for f in whole[0].firings]
    assert 0 < len(p.before) < 200 and 0 < len(p.after) < 200 and 0 < len(wg) < 200
    monkeypatch.undo()

    def swap(ck):  # a kept node with two node arguments: its arguments swapped
        kept = [n for n in ck.driver.gm.graph.nodes if n in ck.before.index
                and ck.cache[n][0] is n.args and n.op == "call_function"
                and len(n.args) == 2 and all(type(a) is type(n) for a in n.args)
                and n.args[0] is not n.args[1]]
        assert kept
        n = kept[-1]
        n.args = (n.args[1], n.args[0])

    _window_ends(monkeypatch, swap)
    with pytest.raises(RewriteRejected):
        run_pypm(copy.deepcopy(bert2), "verified")
    monkeypatch.undo()
    import bench_validator as BV
    r = BV.window_end_parts(bert2, runs=1)
    assert r["windows"]["covered"] == 1 and r["whole"]["covered"] == 0
    assert set(r["windows"]["parts"]) == {"sweep", "reading the region", "the windows",
                                          "the matcher's window", "loading it",
                                          "correspond", "check"}
    assert all(v > 0 for v in r["windows"]["parts"].values())
    for way in ("whole", "windows"):
        assert 0 < r[way]["end_ms"] < r[way]["validator_ms"] < r[way]["fixpoint_ms"]
    from pypm_verified.torch.validate_fx import FxChecker
    assert FxChecker.end.__name__ == "end" and FxChecker.end.__module__.endswith("validate_fx")


def test_checker_profile_sorts_the_library_samples(lib):
    """bench/profile_checker.py: its recorded call is a certified pass the
    checker accepts (the hot loop asserts it), and it sorts a perf listing
    of the engine library's symbols into runtime, proved code, glue and the
    standard library, in % of the listed samples."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import profile_checker as P
    call = P.record("bert", 1)
    assert call[0][3] and P.hot_loop(call, 2) > 0
    listing = """# Samples
     30.00%  [.] caml_oldify_one.localalias
     10.00%  [.] mark_slice_darken.constprop.0
     20.00%  [.] Matcher.find_519
     15.00%  [.] Pypm_core.Decode_rewrite.fun_1529
      5.00%  [.] Stdlib.List.rev_append_122
     20.00%  [.] bf_allocate
"""
    got = P.shares(listing)
    assert got["runtime (allocation, collector)"] == pytest.approx(60.0)
    assert got["proved code (Matcher)"] == pytest.approx(20.0)
    assert got["glue (decoding)"] == pytest.approx(15.0)
    assert got["standard library"] == pytest.approx(5.0) and got["other"] == 0.0


def test_validator_bench_window_is_the_changed_region(bert2, lib):
    """bench_validator.py's window (what a region-only validator would
    read) holds every firing's match and every node the pass created or
    changed; outside it, each node of the graph before the pass is dead or
    kept as it was (its label, its arguments' images); the certificate
    checker accepts the pass on the windows (theories/Window.v: copies and
    frontier leaves, against a window of the matcher's graph) and refuses it
    there when a replacement is not the rule's; and the projection scales
    the whole-graph parts by the window's share."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import bench_validator as BV
    from bench_matchers import run_pypm
    from pypm_verified.rewriting import validate as V
    seen = []
    check = V.Pass.check_certified

    def wrapped(self, *a, **k):
        seen.append((self, BV.window(self), a, k))
        return check(self, *a, **k)

    V.Pass.check_certified = wrapped
    try:
        run_pypm(copy.deepcopy(bert2), "verified")
    finally:
        V.Pass.check_certified = check
    assert len(seen) == 1
    p, w, args, kw = seen[0]
    b, a = p.before, p.after
    rules = [f for f in p.firings if f.rule is not None]
    assert len(rules) == 4
    for f in rules:
        assert f.root in w["interior"]  # each root is in its match
        assert p.image[f.root] in w["new"]  # its replacement was created
    assert w["interior"] <= w["before"] and not (w["before"] & w["frontier_before"])
    assert {h for h in range(len(a)) if p.amap[h] < 0} <= w["after"]
    for g in range(len(b)):
        if g in w["before"] or p.image[g] is None:
            continue
        h = p.image[g]
        assert a.labels[h] == b.labels[g]
        assert tuple(a.args[h]) == tuple(p.image[x] for x in b.args[g])
    assert 0 < len(w["before"]) < len(b) and 0 < len(w["after"]) < len(a)
    # the certificate checker accepts the pass on its windows (Window.v)...
    graph, labels, operator_of, image = args
    pw, wg, wimages = BV.check_windows(p, graph, labels, operator_of, image, check=check, **kw)
    assert len(pw.before) < len(b) and len(pw.after) < len(a) and 0 < len(wg) < len(graph)
    key_of = {v: k for k, v in labels.table.items()}
    frontier = [i for i, lab in enumerate(pw.after.labels) if key_of[lab][1:2] == ("frontier",)]
    assert frontier and all(not pw.after.args[i] for i in frontier)
    # ... and refuses it when a replacement on the window is not the rule's
    pw, wg, wimages = BV.window_pass(p, graph, labels, image)
    r = pw.after.index[p.firings[0].replacement]
    pw.after.labels[r] = next(lab for lab in pw.after.labels if lab != pw.after.labels[r])
    pw.correspond()
    with pytest.raises(V.RewriteRejected, match="TEMPLATE"):
        check(pw, wg, labels, operator_of, wimages, **kw)
    sizes = BV.window_sizes(bert2)
    assert len(sizes) == 1 and sizes[0]["firings"] == len(p.firings)
    assert sizes[0]["window_before"] == len(w["before"]) + len(w["frontier_before"])
    assert 0 < sizes[0]["window_check_ms"] and 0 < sizes[0]["check_ms"]
    r = {"windows": [{"before": 100, "after": 50, "window_before": 25, "window_after": 10}],
         "parts": [{"part": "encode (pass start)", "per_fixpoint_ms": 1.0},
                   {"part": "encode (after the pass)", "per_fixpoint_ms": 1.0},
                   {"part": "checker (OCaml)", "per_fixpoint_ms": 1.5},
                   {"part": "template", "per_fixpoint_ms": 0.5}],
         "validator_ms": 5.0, "fixpoint_ms": 20.0, "walk_ms": 0.1}
    pj = BV.projection(r)
    assert pj["share"]["before"] == 0.25 and pj["share"]["after"] == 0.2
    assert pj["share"]["both"] == pytest.approx(35 / 150)
    assert pj["whole_ms"] == 3.5
    assert pj["scaled_ms"] == pytest.approx(0.25 + 0.2 + 1.5 * 35 / 150)
    assert pj["validator_ms"] == pytest.approx(5.0 - 3.5 + pj["scaled_ms"] + 0.1)
    assert pj["pct"] == pytest.approx(100 * pj["validator_ms"] / (15.0 + pj["validator_ms"]))
