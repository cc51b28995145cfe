"""Matching an FX graph without a Python term graph (pypm_verified.torch.fxmatch).

The native reader's ``engine_graph`` writes the engine's encoding of an FX
graph's term graph itself. Held here to the import it replaces:

* its words are ``TermGraph(graph).build().graph.encode()``, word for word,
  and each FX node's term id is the import's, on exported models (static
  and with dynamic shapes) and random and odd graphs; where it gives up, the
  import made a term it does not write (an opaque call or input);
* the FX graph is left as it was (the import merges duplicates, the reader
  does not);
* :func:`match_fx` gives what the reference engine gives on the Python
  import, and what ``pm.match_all`` gives on the driver's term graph;
* without the extension, or where the writer gives up, the same answers
  through the Python path; bad arguments raise TypeError; malformed input
  to the writer raises or gives up, never crashes.
"""
import copy

import pytest

torch = pytest.importorskip("torch")
fx = torch.fx

from pypm_verified import _native  # noqa: E402
from pypm_verified.torch import fxmatch  # noqa: E402
from pypm_verified.torch.importer import TermGraph  # noqa: E402
from conftest import ZOO  # noqa: E402
from test_fxreader import _odd_program, _random_program, models  # noqa: E402

aten = torch.ops.aten


@pytest.fixture(scope="module")
def native():
    if _native._module is None:
        import os
        if os.environ.get("PYPM_REQUIRE_TOOLS"):
            pytest.fail(f"PYPM_REQUIRE_TOOLS is set but {_native.status()}")
        pytest.skip(_native.status())
    return _native._module


@pytest.fixture(scope="module")
def programs():
    return {"bert": models.export("bert", "small", layers=2),
            "gpt2": models.export("gpt2", "small", layers=2),
            "llama": models.export("llama", "small", layers=2),
            "bert dynamic": models.export_dynamic("bert", "small", layers=2)}


@pytest.fixture(scope="module")
def patterns():
    from pypm_verified.library import default_patterns
    return [p for p in default_patterns() if p.rules and not p.is_multi]


def assert_words_are_the_import(graph, monkeypatch):
    """engine_words of a copy of ``graph``, then TermGraph.build of the same
    copy (an argument without a constant form is an input named by its
    object's id: the same objects on both sides); returns whether the
    native writer read it."""
    monkeypatch.setenv(_native.ENV, "1")
    mine = copy.deepcopy(graph)
    shown = str(mine)
    nodes = list(mine.nodes)
    got = fxmatch.engine_words(nodes)
    assert str(mine) == shown and len(mine.nodes) == len(nodes)  # left as it was
    tg = TermGraph(mine).build()
    if got is None:
        return False
    words, ids, origin = got
    assert list(words) == list(tg.graph.encode())
    assert len(origin) == len(tg.graph) and len(ids) == len(nodes)
    by_name = {n.name: n for n in tg.fx_graph.nodes}
    for n, t in zip(nodes, ids):
        other = by_name.get(n.name)
        if other is not None:  # not a duplicate the import merged away
            assert tg.term[other].id == t, n.name
        o = origin[t]
        if isinstance(o, fx.Node):
            assert tg.fx_of[t].name == o.name
    for t, o in enumerate(origin):
        kind = tg.graph[t].kind
        if o is Ellipsis:
            assert kind == "op" and tg.graph[t].op.name.startswith("list")
        elif not isinstance(o, fx.Node):  # a constant, or an object with no constant form
            assert (kind == "const" and tg.const_values[t] == o) or \
                (kind == "input" and tg.graph[t].name == f"opaque:{id(o)}"), (t, kind, o)
    return True


@pytest.mark.parametrize("name", ["bert", "gpt2", "llama", "bert dynamic"])
def test_model_words_are_the_import_words(native, programs, name, monkeypatch):
    assert assert_words_are_the_import(programs[name].graph_module.graph, monkeypatch)


@pytest.mark.zoo
@pytest.mark.parametrize("name", ZOO)
def test_zoo_words_are_the_import_words(native, lib, zoo_programs, patterns, name, monkeypatch):
    """Zoo models exported with their dynamic shapes (symbolic sizes): the
    same words as the import, and the same matches as the reference engine
    on the Python import."""
    gm = zoo_programs[name].graph_module
    assert assert_words_are_the_import(gm.graph, monkeypatch)
    _same(fxmatch.match_fx(patterns, gm), fxmatch.match_fx(patterns, gm, engine="reference"))


@pytest.mark.parametrize("seed", range(40))
def test_random_graph_words_are_the_import_words(native, seed, monkeypatch):
    assert_words_are_the_import(_random_program(seed), monkeypatch)


def test_random_graphs_are_all_read_natively(native, monkeypatch):
    """Every kind of node the random graphs hold (calls that fit no schema,
    Python callables, impure calls, nodes without metadata, tuples and
    getitem, kwargs and defaults) is written natively."""
    read = [assert_words_are_the_import(_random_program(s), monkeypatch) for s in range(40)]
    assert all(read), [s for s, r in enumerate(read) if not r]


def test_odd_graphs(native, monkeypatch):
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        fake = torch.empty(2, 3)
    objs = {"fake": fake, "thing": object(), "tensor": torch.ones(3), "fn": lambda *a: a}
    # nested lists holding nodes, metadata that is not a tensor, a method and
    # a module call, a Python callable: written natively
    assert assert_words_are_the_import(_odd_program(objs), monkeypatch)
    # a tensor, an object, a list holding one as an argument: the import's
    # opaque input of the object (one per object), written natively
    for bad in (objs["tensor"], objs["thing"], [1, objs["tensor"]]):
        g = fx.Graph()
        x = g.placeholder("x")
        g.output((g.call_function(aten.add.Tensor, (x, bad)),
                  g.call_function(aten.mul.Tensor, (x, bad))))
        assert assert_words_are_the_import(g, monkeypatch)
    # lists holding nodes (list<n>), nested constant lists, kwargs and
    # defaults, a duplicate and None: read natively
    g = fx.Graph()
    x = g.placeholder("x")
    x.meta["val"] = fake
    a = g.call_function(aten.add.Tensor, (x, 2.5))
    b = g.call_function(aten.cat.default, ([x, a], 0))
    c = g.call_function(aten.add.Tensor, (x, x), {"alpha": 1})
    d = g.call_function(aten.add.Tensor, (x, x))  # the same term as c
    e = g.call_function(aten.sum.dim_IntList, (x, [0, 1]), {"keepdim": True})
    f = g.call_function(aten.clone.default, (x,), {"memory_format": torch.contiguous_format})
    for n in (a, b, c, d, e, f):
        n.meta["val"] = fake
    g.output((a, b, c, d, e, f, None, [x, (a, 3)]))
    assert assert_words_are_the_import(g, monkeypatch)


def _same(found, want):
    assert [(m.pattern, m.root.name) for m in found] == [(m.pattern, m.root.name) for m in want]
    for m, w in zip(found, want):
        assert m.functions == w.functions
        assert set(m.bindings) == set(w.bindings)
        for k, v in m.bindings.items():
            u = w.bindings[k]
            if isinstance(v, fx.Node):
                assert isinstance(u, fx.Node) and u.name == v.name, k
            else:
                assert v == u, k


@pytest.mark.parametrize("name", ["bert", "gpt2", "llama", "bert dynamic"])
def test_match_fx_is_the_reference(native, lib, programs, patterns, name, monkeypatch):
    """Native words and the verified engine, against the Python import and
    the reference engine; and the roots pm.match_all finds on the driver's
    term graph."""
    import pypm_verified as pm
    monkeypatch.setenv(_native.ENV, "1")
    gm = programs[name].graph_module
    found = fxmatch.match_fx(patterns, gm)
    assert found and all(m.pattern in patterns for m in found)
    _same(found, fxmatch.match_fx(patterns, gm.graph, engine="reference"))
    tg = TermGraph(copy.deepcopy(gm.graph)).build()
    roots = [(p, tg.fx_of[r.id].name) for p, r, _ in pm.match_all(patterns, tg.graph)]
    assert roots == [(m.pattern, m.root.name) for m in found]


def test_match_fx_without_the_reader(lib, programs, patterns, monkeypatch):
    """The Python path (no extension, or a graph it does not read) answers
    alike."""
    gm = programs["bert"].graph_module
    monkeypatch.setenv(_native.ENV, "1")
    want = fxmatch.match_fx(patterns, gm)
    monkeypatch.setenv(_native.ENV, "0")
    assert fxmatch.engine_words(list(gm.graph.nodes)) is None
    _same(fxmatch.match_fx(patterns, gm), want)
    # a node the writer does not write (a call whose arguments do not fit
    # its operator's arity: the import raises there), on the Python path
    monkeypatch.setenv(_native.ENV, "1")
    monkeypatch.setattr(fxmatch._Learner, "learn_target", staticmethod(
        lambda node, real=fxmatch._Learner.learn_target: real(node)[:3] + (-1,)))
    for t in fxmatch._TABLES[:5]:
        t.clear()
    try:
        assert fxmatch.engine_words(list(gm.graph.nodes)) is None
        _same(fxmatch.match_fx(patterns, gm), want)
    finally:
        for t in fxmatch._TABLES[:5]:
            t.clear()


def test_bindings_name_fx_nodes_constants_lists_and_objects(lib, monkeypatch):
    """A binding is the FX node, a constant's value, a list's elements, or
    the object itself for an argument with no constant form: alike on the
    native and the Python paths."""
    import pypm_verified as pm
    from pypm_verified.torch import ops

    @pm.pattern
    def AddAny(x, y, a):
        return ops.Add(x, y, a)

    @pm.pattern
    def CatAny(xs, d):
        return ops.Cat(xs, d)

    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        fake = torch.empty(2, 3)
    weight = torch.ones(3)
    g = fx.Graph()
    x = g.placeholder("x")
    x.meta["val"] = fake
    a = g.call_function(aten.add.Tensor, (x, weight), {"alpha": 2})
    b = g.call_function(aten.add.Tensor, (x, 1.5))
    c = g.call_function(aten.cat.default, ([x, a, b], -1))
    for n in (a, b, c):
        n.meta["val"] = fake
    g.output((a, b, c))
    monkeypatch.setenv(_native.ENV, "1")
    assert fxmatch.engine_words(list(g.nodes)) is not None
    found = fxmatch.match_fx([AddAny, CatAny], g)
    got = [(m.pattern.name, m.root, m.bindings) for m in found]
    assert got == [("AddAny", a, {"x": x, "y": weight, "a": 2}),
                   ("AddAny", b, {"x": x, "y": 1.5, "a": 1}),
                   ("CatAny", c, {"xs": (x, a, b), "d": -1})]
    assert got[0][2]["y"] is weight
    assert got == [(m.pattern.name, m.root, m.bindings)
                   for m in fxmatch.match_fx([AddAny, CatAny], g, engine="reference")]


def test_match_fx_refuses_bad_arguments(patterns):
    with pytest.raises(TypeError, match="Graph or GraphModule"):
        fxmatch.match_fx(patterns, "graph")
    with pytest.raises(TypeError, match="single-root"):
        fxmatch.match_fx([object()], fx.Graph())
    with pytest.raises(ValueError):
        fxmatch.match_fx(patterns, fx.Graph(), engine="nope")
    assert fxmatch.match_fx([], fx.Graph()) == []


def test_malformed_input_to_the_writer_raises(native):
    """engine_graph checks what it is given: wrong tables or context raise,
    a helper that answers nonsense makes it give up (None), never a crash."""
    from pypm_verified.core import graph as graph_mod
    from pypm_verified.core.encoding import MAGIC_GRAPH, VERSION
    from pypm_verified.torch import importer
    g = fx.Graph()
    x = g.placeholder("x")
    g.output(g.call_function(aten.relu.default, (x,)))
    nodes = list(g.nodes)
    ctx = importer._native_ctx()
    tail = (graph_mod._LEAF_CLASS, fxmatch._op_class, MAGIC_GRAPH, VERSION, 2)
    ok = native.engine_graph(nodes, ctx, fxmatch._TABLES, fxmatch._LEARNER, *tail)
    assert ok is not None and len(ok[1]) == 3
    with pytest.raises(TypeError):
        native.engine_graph(nodes, ctx, ({},) * 5, fxmatch._LEARNER, *tail)
    with pytest.raises(TypeError):
        native.engine_graph(nodes, ctx, ({},) * 5 + ([],), fxmatch._LEARNER, *tail)
    with pytest.raises(TypeError):
        native.engine_graph(nodes, ctx[:6], fxmatch._TABLES, fxmatch._LEARNER, *tail)
    with pytest.raises(TypeError):
        native.engine_graph(tuple(nodes), ctx, fxmatch._TABLES, fxmatch._LEARNER, *tail)
    with pytest.raises(Exception):
        native.engine_graph([1, 2], ctx, fxmatch._TABLES, fxmatch._LEARNER, *tail)

    class Nonsense(fxmatch._Learner):
        @staticmethod
        def learn_target(node):
            return ("not", "a", "target")

        @staticmethod
        def learn_input(name):
            return "not a symbol"

    fresh = ({}, {}, {}, {}, {}, {})
    assert native.engine_graph(nodes, ctx, fresh, Nonsense(), *tail) is None
    # arguments that do not fit the operator's arity: given up (the import
    # raises there)
    class Misfit(fxmatch._Learner):
        @staticmethod
        def learn_target(node):
            t, sym, pure, arity = fxmatch._Learner.learn_target(node)
            return (t, sym, pure, arity + 2)

    assert native.engine_graph(nodes, ctx, ({}, {}, {}, {}, {}, {}), Misfit(), *tail) is None
