"""The driver's incremental re-import gives what a from-scratch
import gives.

After rules fire, the driver re-imports only the FX nodes whose arguments'
terms changed, reusing each node's import recipe (metadata, operator,
purity) and, with ``Driver.lookahead`` (off by default), re-importing the
stale nodes ahead of the walk in one batch. Checked here on multi-layer
models:

* every live FX node's term, after the fixpoint, is structurally the term a
  from-scratch import of the final FX graph gives it (and that import finds
  no duplicate left to merge);
* look-ahead on and off give the same final graph and the same firings, on
  both engines; the engine's graph is extended only when a match needs it
  (at most once per engine call), and the look-ahead never adds one;
* a recipe is not reused once a node's metadata changed, and a node is
  never merged into one whose *current* term differs.
"""
import copy

import pytest

torch = pytest.importorskip("torch")

from pypm_verified.engines import binding  # noqa: E402
from pypm_verified.library import default_patterns  # noqa: E402
from pypm_verified.torch import driver as D  # noqa: E402
from pypm_verified.torch.importer import TermGraph  # noqa: E402

aten = torch.ops.aten


def _canon(tg):
    """FX node -> a structural id of its term (equal ids iff equal terms,
    across term graphs: label, attributes and children, recursively)."""
    table, memo = {}, {}

    def cid(t):
        c = memo.get(t.id)
        if c is None:
            key = (t.label, tg.graph._attrs[t.id], tuple(cid(a) for a in t.args))
            c = memo[t.id] = table.setdefault(key, len(table))
        return c

    return {n: cid(t) for n, t in tg.term.items()}, table


def _run(ep, engine, lookahead):
    ep = copy.deepcopy(ep)
    d = D.Driver(ep.graph_module, default_patterns(), engine=engine, target="cpu",
                 recompile=False, check_profitability=False)
    d.lookahead = lookahead
    rep = d.run()
    return ep.graph_module, d, rep


@pytest.mark.parametrize("name", ["bert", "gpt2", "llama"])
def test_incremental_terms_equal_a_from_scratch_import(base_programs, name, lib):
    gm, d, rep = _run(base_programs[name], "verified", D.Driver.lookahead)
    assert sum(rep.firings.values()) > 0  # the rewrites re-imported something
    incr, _ = _canon(d.tg)
    # the term of every live node, re-derived from the final FX graph alone
    fresh_tg = TermGraph(gm.graph).build()
    assert fresh_tg.merged == 0  # no duplicate left: the incremental path merged them
    fresh, _ = _canon(fresh_tg)
    live = [n for n in gm.graph.nodes]
    assert set(incr) == set(live) == set(fresh)
    # structural ids of both graphs share one table: compare through terms
    table, memo = {}, {}

    def sid(tg, t):
        key = (id(tg), t.id)
        c = memo.get(key)
        if c is None:
            k = (t.label, tg.graph._attrs[t.id], tuple(sid(tg, a) for a in t.args))
            c = memo[key] = table.setdefault(k, len(table))
        return c

    for n in live:
        assert sid(d.tg, d.tg.term[n]) == sid(fresh_tg, fresh_tg.term[n]), n.name


@pytest.mark.parametrize("name", ["bert", "gpt2", "llama"])
def test_lookahead_gives_the_same_rewrites(base_programs, name, lib, monkeypatch):
    calls, engine_calls = [], []
    real = binding.extend_graph
    monkeypatch.setattr(binding, "extend_graph", lambda *a: (calls.append(1), real(*a))[1])
    for meth in ("first", "match"):
        f = getattr(binding.SetMatcher, meth)
        monkeypatch.setattr(binding.SetMatcher, meth,
                            lambda *a, _f=f, **k: (engine_calls.append(1), _f(*a, **k))[1])
    out = {}
    for engine, k in (("verified", 0), ("verified", 64), ("reference", 64), ("reference", 0)):
        calls.clear()
        engine_calls.clear()
        gm, d, rep = _run(base_programs[name], engine, k)
        out[engine, k] = (str(gm.graph), dict(rep.firings), rep.iterations, len(calls),
                          len(engine_calls))
    base = out["verified", 0]
    for key, got in out.items():
        assert got[:3] == base[:3], key
    assert base[1]  # something fired
    # extended only when a match needs it; the look-ahead never adds an extension
    assert 0 < base[3] <= base[4]
    assert out["verified", 64][3] <= base[3]


def _fake(shape):
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        return torch.empty(shape)


def test_recipe_is_not_reused_after_the_metadata_changed():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    x.meta["val"] = _fake((2, 3))
    r = g.call_function(aten.relu.default, (x,))
    r.meta["val"] = _fake((2, 3))
    g.output(r)
    tg = TermGraph(g).build()
    assert tg.term[r].shape == (2, 3)
    assert tg.reimport(r) == (None, [])  # same arguments, same metadata: same term
    y = g.placeholder("y")
    y.meta["val"] = _fake((4, 5))
    tg.import_node(y)
    r.args = (y,)
    r.meta["val"] = _fake((4, 5))  # a new value object: the recipe is stale
    kind, _ = tg.reimport(r)
    assert kind == "changed" and tg.term[r].shape == (4, 5)
    assert tg.term[r].args == (tg.term[y],)


def test_no_merge_into_a_node_whose_term_moved_on():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    x.meta["val"] = _fake((2,))
    y = g.placeholder("y")
    y.meta["val"] = _fake((2,))
    a = g.call_function(aten.relu.default, (x,))
    a.meta["val"] = _fake((2,))
    out = g.output((a,))
    tg = TermGraph(g).build()
    old_a = tg.term[a]
    a.args = (y,)  # a's term moves on: fx_of still names a for relu(x)
    assert tg.reimport(a)[0] == "changed"
    with g.inserting_before(out):
        c = g.call_function(aten.relu.default, (x,))  # relu(x) again, after a
        d = g.call_function(aten.relu.default, (x,))
    c.meta["val"] = _fake((2,))
    d.meta["val"] = _fake((2,))
    kind, _ = tg.reimport(c)
    assert tg.term[c] is old_a and kind == "changed" and c.graph is g  # not merged into a
    assert tg.add(d) is c  # an equal node created later is merged into c, not a
    # a look-ahead re-import that would merge leaves the node as it was
    with g.inserting_before(out):
        e = g.call_function(aten.neg.default, (x,))
    e.meta["val"] = _fake((2,))
    tg.import_node(e)
    before = tg.term[e]
    e.target = aten.relu.default
    e.args = (y,)  # now equal to a's current term
    assert tg.reimport(e, merge=False) == ("would merge", [])
    assert tg.term[e] is before and e.graph is g
    assert tg.reimport(e)[0] == "merged" and e not in tg.term
