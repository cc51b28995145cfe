"""The native FX reader gives what the Python reader gives.

``pypm_verified._native._fxreader`` (a CPython C extension, built in place
by ``make venv``) walks an FX graph's node list once and builds the term
graph (:meth:`TermGraph.build`), and writes the engine's graph encoding
(:func:`pypm_verified.engines.serialize.encode_graph`). Held equal here to
the Python reader (``PYPM_NATIVE=0``), on the same FX graph copied twice:

* every column of the term graph (labels, child ids, attributes), every
  term node (kind, operator, shape, dtype, name, value), the hash-consing
  index and the inputs table;
* the maps: FX node -> term, term -> FX node, the constants' values, the
  re-import recipes and cached positional arguments, the merged count;
* the FX graph left behind (duplicates merged alike);
* the encoding, word for word, native and Python, of whole graphs and of
  extensions;
* the rewrite validator's encodings of the FX graph (``encode_fx``), column
  by column, before and after every pass of a rewrite;

on exported models (BERT and GPT-2, static and with dynamic shapes, and
models of the zoo), and on random graphs of ATen calls with duplicates,
constants, kwargs, defaults, tuples, impure calls and missing metadata.
Malformed input to the extension raises, never crashes.

Skipped when the extension is not built, except under
``PYPM_REQUIRE_TOOLS=1`` (``make test``, after ``make venv`` built it).
"""
import copy
import operator
import os
import random
import sys
from array import array

import pytest

torch = pytest.importorskip("torch")
fx = torch.fx

from pypm_verified import _native  # noqa: E402
from pypm_verified.engines import serialize  # noqa: E402
from pypm_verified.torch.importer import TermGraph, is_pure  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import models  # noqa: E402
from conftest import ZOO  # noqa: E402

aten = torch.ops.aten


@pytest.fixture(scope="module")
def native():
    mod = _native._module  # built (each test turns it on and off itself)
    if mod is None:
        msg = _native.status()
        if os.environ.get("PYPM_REQUIRE_TOOLS"):
            pytest.fail(f"PYPM_REQUIRE_TOOLS is set but {msg}")
        pytest.skip(msg)
    return mod


def _build(fx_graph, native_on: bool, monkeypatch, size_hints=False):
    monkeypatch.setenv(_native.ENV, "1" if native_on else "0")
    tg = TermGraph(fx_graph, size_hints=size_hints).build()
    monkeypatch.delenv(_native.ENV)
    return tg


def _names(x):
    """``x`` with FX nodes replaced by their names (nested lists, tuples)."""
    if isinstance(x, fx.Node):
        return ("fx", x.name)
    if isinstance(x, (list, tuple)):
        return type(x).__name__, [_names(e) for e in x]
    return x


def snapshot(tg):
    """Everything a term graph built from an FX graph holds, FX nodes by name
    (two copies of one FX graph are compared)."""
    g = tg.graph
    nodes = [(n.id, n.label, n.kind, n.op, n.args and tuple(a.id for a in n.args), n.shape,
              n.dtype, n.name, n.value) for n in g.nodes]
    assert [type(n.args) for n in g.nodes] == [tuple] * len(g.nodes)
    index = sorted((repr(k), v.id) for k, v in g._index.items())
    recipes = {n.name: (type(r[0]).__name__, getattr(r[0], "shape", None),
                        getattr(r[0], "dtype", None), r[1], r[2], r[3], r[4], r[5])
               for n, r in tg._recipe.items()}
    for n, r in tg._recipe.items():
        assert r[0] is n.meta.get("val"), n  # the node's own metadata object
    calls = {n.name: (_names(c[3]), c[0] is n._args, c[1] is n._kwargs, c[2] is n.target)
             for n, c in tg._calls.items()}
    return {
        "columns": (g._labels, g._children, g._attrs),
        "nodes": nodes,
        "index": index,
        "inputs": sorted((k, v.id) for k, v in g._inputs.items()),
        "term": {n.name: t.id for n, t in tg.term.items()},
        "fx_of": {i: n.name for i, n in tg.fx_of.items()},
        "const_values": {i: _names(v) for i, v in tg.const_values.items()},
        "consts": sorted((repr(k), v.id) for k, v in tg._consts.items()),
        "recipes": recipes,
        "calls": calls,
        "merged": tg.merged,
        "fx_graph": str(tg.fx_graph),
        "encoding": list(g.encode()),
    }


def assert_same_import(fx_graph, monkeypatch, size_hints=False):
    a, b = copy.deepcopy(fx_graph), copy.deepcopy(fx_graph)
    py = _build(a, False, monkeypatch, size_hints)
    nat = _build(b, True, monkeypatch, size_hints)
    sp, sn = snapshot(py), snapshot(nat)
    for k in sp:
        assert sn[k] == sp[k], f"native and Python readers differ in {k}"
    return py, nat


def assert_same_encoding(graph, monkeypatch):
    """Native and Python encodings of ``graph`` and of its extensions."""
    n = len(graph)
    for base in sorted({0, n // 3, n // 2, n}):
        words = {}
        for on in (False, True):
            monkeypatch.setenv(_native.ENV, "1" if on else "0")
            whole = serialize.encode_graph(graph)
            ext = serialize.encode_graph_extension(graph, base)
            assert isinstance(whole, array) and whole.typecode == "q"
            words[on] = (list(whole), list(ext))
        monkeypatch.delenv(_native.ENV)
        assert words[True] == words[False]


# ------------------------------------------------------------------ models

@pytest.fixture(scope="module")
def programs():
    return {"bert": (models.export("bert", "small", layers=2), False),
            "gpt2": (models.export("gpt2", "small", layers=2), False),
            "llama": (models.export("llama", "small", layers=2), False),
            "bert dynamic": (models.export_dynamic("bert", "small", layers=2), True)}


@pytest.mark.parametrize("name", ["bert", "gpt2", "llama", "bert dynamic"])
def test_models_read_alike(native, programs, name, monkeypatch):
    ep, dynamic = programs[name]
    py, nat = assert_same_import(ep.graph_module.graph, monkeypatch, size_hints=dynamic)
    assert len(py.graph) > 100 and py.merged > 0  # duplicates merged, by both
    assert_same_encoding(py.graph, monkeypatch)
    # a re-import of every pure node after the native build (its recipes
    # read back): nothing changes (an impure node is new on every import)
    before = list(nat.graph.encode())
    pure = [x for x in nat.fx_graph.nodes if x.op == "placeholder"
            or (x.op == "call_function" and is_pure(x))]
    assert len(pure) > 0.8 * len(nat.fx_graph.nodes)
    for node in pure:
        assert nat.reimport(node) == (None, []), node.name
    assert list(nat.graph.encode()) == before


@pytest.mark.zoo
@pytest.mark.parametrize("name", ZOO)
def test_zoo_models_read_alike(native, zoo_programs, name, monkeypatch):
    """Zoo models exported with their dynamic shapes (symbolic sizes), read
    with and without size hints."""
    graph = zoo_programs[name].graph_module.graph
    for hints in (False, True):
        py, _ = assert_same_import(graph, monkeypatch, size_hints=hints)
    assert_same_encoding(py.graph, monkeypatch)


def test_the_driver_rewrites_alike(native, programs, monkeypatch):
    """The fixpoint on a natively read graph: the same firings and the same
    rewritten program as with the Python reader."""
    from pypm_verified.library import default_patterns
    from pypm_verified.torch.driver import Driver
    ep, _ = programs["bert"]
    out = {}
    for on in ("0", "1"):
        monkeypatch.setenv(_native.ENV, on)
        gm = copy.deepcopy(ep.graph_module)
        rep = Driver(gm, default_patterns(), target="cpu", recompile=False,
                     check_profitability=False).run()
        out[on] = (dict(rep.firings), str(gm.graph))
    assert out["0"] == out["1"]
    assert sum(out["1"][0].values()) >= 2


def _validator_encodings_alike(gm, monkeypatch):
    """Rewrite ``gm`` with the rule library, the rewrite validator on; each
    of its encodings of the FX graph is made twice, natively and in Python,
    each with empty caches, and held equal column by column, node
    information by node information. Returns (encodings, nodes the native
    walk read without :meth:`FxChecker._node`, nodes read)."""
    from pypm_verified.library import default_patterns
    from pypm_verified.torch import validate_fx
    from pypm_verified.torch.driver import Driver
    encode = validate_fx.FxChecker.encode
    seen = {"encodings": 0, "native": 0, "read": 0}

    def both(self, before=None):
        got = {}
        for on in ("0", "1"):
            monkeypatch.setenv(_native.ENV, on)
            self.cache.clear()
            self._const_specs.clear()
            asked = []
            self._node = lambda n, _ask=validate_fx.FxChecker._node.__get__(self): (
                asked.append(n), _ask(n))[1]
            try:
                enc = encode(self, before)
            finally:
                del self._node
            got[on] = (enc, {n: hit[3] for n, hit in self.cache.items()}, len(asked))
        (py, py_info, _), (nat, nat_info, asked) = got["0"], got["1"]
        for column in ("labels", "args", "names", "keys", "mergeable", "syms", "outputs",
                       "anchors", "index"):
            assert getattr(py, column) == getattr(nat, column), column
        assert py_info == nat_info
        seen["encodings"] += 1
        seen["native"] += len(nat_info) - asked
        seen["read"] += len(nat_info)
        return nat

    read_images = validate_fx.FxChecker._images

    def images_both(self):
        got = {}
        for on in ("0", "1"):
            monkeypatch.setenv(_native.ENV, on)
            read_images(self)
            got[on] = (list(self.images), dict(self.inverse))
        assert got["0"] == got["1"]
        seen["images"] += sum(1 for t in got["1"][0] if t >= 0)

    from pypm_verified.rewriting import validate as rv
    correspond = rv.Pass.correspond

    def correspond_both(self):
        # the Python walk on a copy, the native one on the pass itself
        py = copy.copy(self)
        py.image, py.firings = [], list(self.firings)
        monkeypatch.setenv(_native.ENV, "0")
        correspond(py)
        monkeypatch.setenv(_native.ENV, "1")
        correspond(self)
        assert self.image == py.image and self.amap == py.amap
        assert self._inverse == py._inverse
        assert [(f.rule, f.root, f.replacement) for f in self.firings] == \
            [(f.rule, f.root, f.replacement) for f in py.firings]
        seen["passes"] += 1

    seen["images"] = seen["passes"] = 0
    monkeypatch.setattr(rv.Pass, "correspond", correspond_both)
    monkeypatch.setattr(validate_fx.FxChecker, "encode", both)
    monkeypatch.setattr(validate_fx.FxChecker, "_images", images_both)
    monkeypatch.setattr(validate_fx, "enabled", lambda: True)
    Driver(gm, default_patterns(), target="cpu", recompile=False,
           check_profitability=False).run()
    return seen


@pytest.mark.parametrize("name", ["bert", "gpt2", "llama", "bert dynamic"])
def test_the_validator_encodes_alike(native, programs, name, monkeypatch):
    """The rewrite validator's encodings of the FX graph before and after
    each pass (``FxChecker.encode``): native (``encode_fx``, with its common
    case of ``_node``) and Python give the same columns and node
    information; most nodes are read natively. The images of the nodes in
    the matcher's term graph (``FxChecker._images``) alike too."""
    ep, _ = programs[name]
    seen = _validator_encodings_alike(copy.deepcopy(ep.graph_module), monkeypatch)
    assert seen["encodings"] >= 2  # before and after a pass that fired
    assert seen["native"] > 0.5 * seen["read"], seen
    assert seen["images"] > 100  # the images of the nodes before a pass that fired
    assert seen["passes"] >= 1  # the correspondence of a pass that fired, both ways


# ------------------------------------------------------------ random graphs

def _random_program(seed):
    """A random FX graph of ATen calls with fake-tensor metadata: duplicates
    (merged), constants and lists, kwargs and omitted defaults, tuple outputs
    with getitem, random (impure) calls, calls that fit no schema, Python
    callables, get_attr leaves, nodes without metadata."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    rng = random.Random(seed)
    g = fx.Graph()
    val = {}
    mode = FakeTensorMode()
    dtype = rng.choice([torch.float32, torch.float16])
    shape = rng.choice([(4, 8), (2, 4, 8), (8, 8)])
    with mode:
        tensors = []
        for i in range(rng.randint(1, 3)):
            p = g.placeholder(f"x{i}")
            p.meta["val"] = val[p] = torch.empty(shape, dtype=dtype)
            tensors.append(p)
        if rng.random() < 0.5:
            a = g.get_attr(f"w{seed}")
            a.meta["val"] = val[a] = torch.empty(shape, dtype=dtype)
            tensors.append(a)
        calls = []
        for _ in range(rng.randint(3, 25)):
            x, y = rng.choice(tensors), rng.choice(tensors)
            r = rng.random()
            if calls and r < 0.15:  # a duplicate of an earlier call
                target, args, kwargs = rng.choice(calls)
            elif r < 0.3:
                target, args, kwargs = rng.choice([aten.relu.default, aten.neg.default,
                                                   aten.exp.default, aten.sigmoid.default]), (x,), {}
            elif r < 0.4:
                target, args, kwargs = aten.add.Tensor, (x, y), rng.choice(
                    [{}, {"alpha": 2}, {"alpha": 1}])
            elif r < 0.5:
                target, args, kwargs = aten.mul.Tensor, (x, rng.choice([y, 2, 0.5, True, 0.0, -0.0])), {}
            elif r < 0.6:
                dim = rng.choice([0, -1])
                target, args, kwargs = aten.sum.dim_IntList, rng.choice(
                    [(x, [dim]), (x, [dim], True)]), rng.choice([{}, {"dtype": torch.float32}])
                if len(args) == 3 and kwargs:
                    kwargs = {}
            elif r < 0.65:
                target, args, kwargs = aten.cat.default, ([x, y], rng.choice([0, -1])), {}
            elif r < 0.7:
                target, args, kwargs = aten.split.Tensor, (x, 2), rng.choice([{}, {"dim": -1}])
            elif r < 0.75:
                target, args, kwargs = aten.rand_like.default, (x,), {}
            elif r < 0.8:
                target, args, kwargs = aten.clone.default, (x,), rng.choice(
                    [{}, {"memory_format": torch.contiguous_format}])
            elif r < 0.85:
                target, args, kwargs = aten.transpose.int, (x, 0, -1), {}
            elif r < 0.9:
                target, args, kwargs = aten.relu.default, (x,), {"bogus": 1}  # fits no schema
            elif r < 0.95:
                target, args, kwargs = operator.add, (x, y), {}  # a Python callable: opaque
            else:
                target, args, kwargs = aten._to_copy.default, (x,), {"dtype": torch.float64}
            calls.append((target, args, kwargs))
            n = g.call_function(target, args, kwargs)
            try:
                v = target(*fx.node.map_arg(args, lambda a: val[a]),
                           **fx.node.map_arg(kwargs, lambda a: val[a]))
            except Exception:
                v = None
            if v is not None and rng.random() < 0.9:
                n.meta["val"] = val[n] = v
            if isinstance(v, (list, tuple)):  # a tuple output: its items by getitem
                for i in range(len(v)):
                    if rng.random() < 0.7:
                        gi = g.call_function(operator.getitem, (n, i))
                        gi.meta["val"] = val[gi] = v[i]
                        tensors.append(gi)
            elif n in val and isinstance(v, torch.Tensor) and v.shape == val[x].shape \
                    and v.dtype == dtype:
                tensors.append(n)
        outs = [n for n in g.nodes if n.op == "call_function"][-2:] or tensors[:1]
        g.output(tuple(outs))
    return g


@pytest.mark.parametrize("seed", range(40))
def test_random_graphs_read_alike(native, seed, monkeypatch):
    g = _random_program(seed)
    py, _ = assert_same_import(g, monkeypatch)
    assert_same_encoding(py.graph, monkeypatch)
    # the validator's encoding of the graph (a stand-in driver: the graph
    # and its import), native and Python, each with empty caches
    from types import SimpleNamespace
    from pypm_verified.torch.validate_fx import FxChecker
    g = copy.deepcopy(g)
    got = []
    for on in ("0", "1"):
        monkeypatch.setenv(_native.ENV, on)
        checker = FxChecker(SimpleNamespace(gm=SimpleNamespace(graph=g), tg=TermGraph(g).build(),
                                            firings=[]))
        enc = checker.encode()
        got.append(([getattr(enc, c) for c in ("labels", "args", "names", "mergeable", "syms",
                                               "outputs", "anchors")],
                    [k if isinstance(k, fx.Node) else k[0] for k in enc.keys]))
    assert got[0] == got[1] and len(got[1][1]) > 0


def _rewires(g):
    """Name pairs ``(u, v)``: replacing the uses of call ``u`` by the earlier
    call or input ``v`` of the same tensor metadata (a rewrite upstream of
    ``u``'s users)."""
    order = {n: i for i, n in enumerate(g.nodes)}
    tensor = [n for n in g.nodes if n.op != "output"
              and isinstance(n.meta.get("val"), torch.Tensor)]
    pairs = []
    for u in tensor:
        if u.op != "call_function" or not u.users:
            continue
        for v in tensor:
            if order[v] < order[u] and v.meta["val"].shape == u.meta["val"].shape \
                    and v.meta["val"].dtype == u.meta["val"].dtype and v not in u.all_input_nodes:
                pairs.append((u.name, v.name))
                break
    return pairs[::2]


@pytest.mark.parametrize("seed", range(40))
def test_reimports_alike(native, seed, monkeypatch):
    """Re-imports after rewrites upstream (TermGraph.refresh, the driver's
    lazy re-import): the native path (``import_again``, a call re-read from
    its recipe) leaves the term graph as the Python path (``import_node``)
    does, merges included."""
    g = _random_program(seed)
    pairs = _rewires(g)
    snaps, natives = [], []
    for on in ("0", "1"):
        monkeypatch.setenv(_native.ENV, on)
        h = copy.deepcopy(g)
        tg = TermGraph(h).build()
        byname = {n.name: n for n in h.nodes}
        for u, v in pairs:
            u, v = byname.get(u), byname.get(v)
            if u not in tg.term or v not in tg.term:
                continue  # merged away (by the import or an earlier refresh)
            users = list(u.users)
            u.replace_all_uses_with(v)
            tg.refresh(users)
        natives.append(tg._native)
        snaps.append(snapshot(tg))
    monkeypatch.delenv(_native.ENV)
    assert not natives[0]  # the Python path (None: no re-import happened)
    assert natives[1] is None or natives[1][0] is native
    for k in snaps[0]:
        assert snaps[1][k] == snaps[0][k], f"native and Python re-imports differ in {k}"


def _walk_trace(g, seed, native_walk, monkeypatch):
    """The rewrite driver's walk over ``g`` with rewires for firings: each
    node the walk tries is recorded and, when it is the ``u`` of a rewire
    (:func:`_rewires`), its uses go to ``v`` and its users become stale,
    as a firing leaves them; which operators may root a pattern is drawn at
    random per label. Returns the tries, the re-imports made in Python and
    the term graph after the run."""
    from pypm_verified.library import default_patterns
    from pypm_verified.torch import driver as drv, validate_fx
    g = copy.deepcopy(g)
    byname = {n.name: n for n in g.nodes}
    rewire = dict(_rewires(g))
    rng = random.Random(seed)
    tried, python_reimports = [], [0]

    def fake_try(self, node):
        tried.append(node.name)
        v = byname.get(rewire.pop(node.name, None))
        if v is None or v not in self.tg.term or node not in self.tg.term:
            return None
        users = list(node.users)
        node.replace_all_uses_with(v)
        self.stale.update(users)
        return [v]  # matched again in the next pass

    answers = {}

    def root_labels(self):
        def may_root(label):
            if label not in answers:
                answers[label] = rng.random() < 0.7
            seen[label] = answers[label]
            return answers[label]
        seen = {}
        may_root.seen = seen
        return may_root

    from pypm_verified.torch.importer import TermGraph
    reimport = TermGraph.reimport

    def counted(self, node, merge=True):
        python_reimports[0] += 1
        return reimport(self, node, merge)

    root = torch.nn.Module()
    for n in g.nodes:
        if n.op == "get_attr":
            v = n.meta.get("val")
            root.register_buffer(n.target, torch.zeros(
                tuple(v.shape), dtype=v.dtype) if isinstance(v, torch.Tensor) else torch.zeros(1))
    with monkeypatch.context() as mp:
        mp.setattr(drv.Driver, "_try", fake_try)
        mp.setattr(drv.Driver, "_root_labels", root_labels)
        mp.setattr(TermGraph, "reimport", counted)
        mp.setattr(validate_fx, "enabled", lambda: False)  # firings are fake
        if not native_walk:
            mp.setattr(drv.Driver, "_native_walk", lambda self: None)
        d = drv.Driver(fx.GraphModule(root, g), default_patterns(), target="cpu",
                       recompile=False, check_profitability=False)
        d.run()
    return tried, python_reimports[0], snapshot(d.tg)


@pytest.mark.parametrize("seed", range(30))
def test_the_native_walk_is_the_python_walk(native, seed, monkeypatch):
    """The driver's walk with the reader's ``walk`` (stale nodes re-imported
    natively on the way to the next node to try) tries the same nodes in the
    same order and leaves the same term graph as the Python walk, merges
    and re-imports the method makes included."""
    g = _random_program(seed)
    monkeypatch.setenv(_native.ENV, "1")
    py = _walk_trace(g, seed, False, monkeypatch)
    nat = _walk_trace(g, seed, True, monkeypatch)
    assert nat[0] == py[0]
    for k in py[2]:
        assert nat[2][k] == py[2][k], f"the walks leave different term graphs in {k}"
    assert nat[1] <= py[1]


def test_the_native_walk_reimports_itself(native, monkeypatch):
    """Over the random programs the native walk re-imports most stale nodes
    itself and hands the uncommon ones (a merge, a call off its recipe) to
    the method."""
    monkeypatch.setenv(_native.ENV, "1")
    py = nat = tries = 0
    for seed in range(30):
        g = _random_program(seed)
        a = _walk_trace(g, seed, False, monkeypatch)
        b = _walk_trace(g, seed, True, monkeypatch)
        py, nat, tries = py + a[1], nat + b[1], tries + len(a[0])
    assert tries > 200 and py > 100 and 0 < nat < py / 2, (tries, py, nat)


def test_reimports_cover_the_cases(native, monkeypatch):
    """The rewires above re-import calls from their recipes (term changed)
    and merge nodes, most of them through the native path."""
    kinds = {"changed": 0, "merged": 0, None: 0}
    from pypm_verified.torch import importer
    reimport = importer.TermGraph.reimport
    again = native.import_again
    answers = {"term": 0, "method": 0}

    def counted_again(state, node):
        t = again(state, node)
        answers["method" if t is None else "term"] += 1
        return t

    monkeypatch.setattr(native, "import_again", counted_again)

    def counted(self, node, merge=True):
        kind, users = reimport(self, node, merge)
        kinds[kind] += 1
        return kind, users

    monkeypatch.setattr(importer.TermGraph, "reimport", counted)
    monkeypatch.setenv(_native.ENV, "1")
    for seed in range(40):
        g = _random_program(seed)
        tg = TermGraph(g).build()
        byname = {n.name: n for n in g.nodes}
        for u, v in _rewires(g):
            u, v = byname.get(u), byname.get(v)
            if u in tg.term and v in tg.term:
                users = list(u.users)
                u.replace_all_uses_with(v)
                tg.refresh(users)
    assert kinds["changed"] > 100 and kinds["merged"] >= 3, kinds
    assert answers["term"] > answers["method"] > 0, answers


def test_random_graphs_cover_the_cases(native, monkeypatch):
    """The random graphs reach every case the reader hands to Python and the
    common ones: merges, opaque calls, impure calls, tuples, kwargs."""
    merged = opaque = impure = getitems = 0
    for seed in range(40):
        g = _random_program(seed)
        tg = _build(copy.deepcopy(g), True, monkeypatch)
        merged += tg.merged
        names = [t.op.name for t in tg.graph.nodes if t.op is not None]
        opaque += sum(n.startswith("opaque:") for n in names)
        impure += sum(r[5] for r in tg._recipe.values())
        getitems += sum(1 for n in tg.fx_graph.nodes if n.target is operator.getitem)
    assert merged > 10 and opaque > 10 and impure > 5 and getitems > 5


# ---------------------------------------------------------- bad input

def test_malformed_input_raises(native):
    g = fx.Graph()
    tg = TermGraph(g)
    from pypm_verified.torch.importer import _native_ctx
    ctx = _native_ctx()
    with pytest.raises(TypeError):
        native.build(tg, (), ctx)  # not a list
    with pytest.raises(TypeError):
        native.build(tg, [], ctx[:3])
    with pytest.raises(TypeError):
        native.build(tg, [], (1,) * 7)
    with pytest.raises(AttributeError):
        native.build(object(), [], ctx)
    with pytest.raises(AttributeError):
        native.build(tg, [1, "x", None], ctx)  # not FX nodes
    broken = TermGraph(g)
    broken.term = []  # not a dict
    with pytest.raises(TypeError):
        native.build(broken, [], ctx)
    # the re-import: a malformed state raises; a node without a recipe is
    # left to the method (None)
    from pypm_verified.torch.importer import _native_state
    state = _native_state(tg)[1]
    with pytest.raises(TypeError):
        native.import_again(state[:15], g.placeholder("y"))
    with pytest.raises(TypeError):
        native.import_again(state[:2] + ([],) + state[3:], g.placeholder("z"))
    with pytest.raises(TypeError):
        native.import_again(state[:15] + ((1,) * 7,), g.placeholder("w"))
    assert native.import_again(state, g.placeholder("v")) is None
    assert native.import_again(state, "not a node") is None
    # the walk: malformed arguments raise; nodes without a term are passed
    walk = native.walk
    with pytest.raises(TypeError):
        walk(state[:15], [], 0, set(), set(), set(), {})
    with pytest.raises(TypeError):
        walk(state, (), 0, set(), set(), set(), {})  # not a list
    with pytest.raises(TypeError):
        walk(state, [], 0, [], set(), set(), {})  # stale not a set
    with pytest.raises(TypeError):
        walk(state, [], 0, set(), set(), set(), [])  # not a dict
    with pytest.raises(TypeError):
        walk(state, [[1]], 0, set(), set(), set(), {})  # unhashable
    assert walk(state, [1, "x", None, g.placeholder("u")], -5, set(), set(), set(), {}) == \
        (4, None, 0)
    enc = native.encode_columns
    assert array("q", enc([1, 2], [5], [(1, 2)], [((0, 3),)], [0])) == array(
        "q", [1, 2, 5, 2, 1, 2, 1, 0, 3, 0])
    with pytest.raises(ValueError):
        enc([], [1, 2], [()], [()], [])
    with pytest.raises(TypeError):
        enc([], [1], [[1]], [()], [])
    with pytest.raises(TypeError):
        enc([], [1], [()], [((1, 2, 3),)], [])
    with pytest.raises(TypeError):
        enc([], ["a"], [()], [()], [])
    with pytest.raises(OverflowError):
        enc([], [1 << 64], [()], [()], [])
    with pytest.raises(TypeError):
        enc(None, [], [], [], [])
    # the validator's encoding: malformed tables and node information
    efx = native.encode_fx
    node = g.placeholder("x")
    ok = ([node], fx.Node, {}, lambda n: (0, [], False, (), None), None, lambda n: [], None,
          set(), {}, lambda t: (0, 0), lambda k: (0, 0), None)
    labels, args, names, keys = efx(*ok)[:4]
    assert (labels, args, names, keys) == ([0], [()], ["x"], [node])
    for i, bad in ((0, (node,)), (1, 3), (2, []), (6, []), (8, []), (11, (1, 2))):
        with pytest.raises(TypeError):
            efx(*ok[:i], bad, *ok[i + 1:])
    for info in (None, (0, [], False), (0, (), False, (), None), (0, [], False, [], None),
                 (0, [], False, (("c",),), None), (0, [], False, (("q", 1),), None)):
        with pytest.raises(TypeError):
            efx(*ok[:3], lambda n, _i=info: _i, *ok[4:])
    with pytest.raises(ZeroDivisionError):  # an error of node_info is raised
        efx(*ok[:3], lambda n: 1 // 0, *ok[4:])
    # the images in the term graph: a list's node is found by its children
    im = native.images
    keys, syms, args = [("c", 0), ("l", ()), node], [7, 9, 8], [(), (0,), (1,)]
    terms = ({node: type("T", (), {"id": 2})()}, [7, 9, 8], [(), (0,), (1,)])
    index = {(9, (0,), None): type("T", (), {"id": 1})()}
    assert im(keys, syms, args, fx.Node, *terms, index, None) == ([0, 1, 2], {0: 0, 1: 1, 2: 2})
    assert im(keys, syms, [(), (0,), (0,)], fx.Node, *terms, index, None)[0] == [0, 1, -1]
    for i, bad in ((0, ()), (1, [7]), (2, [(), [0], (1,)]), (4, []), (5, None)):
        with pytest.raises((TypeError, ValueError)):
            im(*(keys, syms, args, fx.Node, *terms, index, None)[:i], bad,
               *(keys, syms, args, fx.Node, *terms, index, None)[i + 1:])


def test_encoding_overflow_is_an_encode_error(native, monkeypatch):
    import pypm_verified as pm
    graph = pm.Graph()
    graph.input("a", shape=(4,), dtype=pm.f32)
    graph._labels[0] = 1 << 63  # out of int64: both paths refuse it alike
    for on in ("0", "1"):
        monkeypatch.setenv(_native.ENV, on)
        with pytest.raises(serialize.EncodeError):
            serialize.encode_graph(graph)


def test_env_var_turns_the_reader_off(native, monkeypatch):
    monkeypatch.setenv(_native.ENV, "0")
    assert _native.reader() is None and "turned off" in _native.status()
    monkeypatch.setenv(_native.ENV, "1")
    assert _native.reader() is native


def test_paths_context_turns_the_reader_off(native, monkeypatch):
    monkeypatch.delenv(_native.ENV, raising=False)
    with _native.paths(False):
        assert _native.reader() is None
        with _native.paths(True):
            assert _native.reader() is native
        assert _native.reader() is None
    assert _native.reader() is native
    monkeypatch.setenv(_native.ENV, "0")
    with _native.paths(True):  # the variable still turns it off
        assert _native.reader() is None


_ENTRY_POINTS = ("build", "import_again", "encode_fx", "images", "pass_words",
                 "encode_columns", "first_match", "read_unchanged")


def test_the_reference_engine_runs_the_python_paths(native, programs, monkeypatch):
    """The driver's reference engine calls none of the extension's entry
    points (the independent configuration: reference matcher, Python
    reader); the verified engine calls them, and both rewrite alike."""
    from pypm_verified.library import default_patterns
    from pypm_verified.torch.driver import Driver
    monkeypatch.delenv(_native.ENV, raising=False)
    called = []
    for name in _ENTRY_POINTS:
        f = getattr(native, name)
        monkeypatch.setattr(native, name,
                            lambda *a, _f=f, _n=name, **k: (called.append(_n), _f(*a, **k))[1])
    ep, _ = programs["gpt2"]
    out = {}
    for engine in ("reference", "verified"):
        called.clear()
        gm = copy.deepcopy(ep.graph_module)
        rep = Driver(gm, default_patterns(), engine=engine, target="cpu", recompile=False,
                     check_profitability=False).run()
        assert rep.validation.validated and rep.validation.certified > 0, rep.validation
        out[engine] = (dict(rep.firings), str(gm.graph), set(called))
    assert out["reference"][2] == set()
    assert {"build", "encode_fx", "pass_words", "first_match", "read_unchanged"} <= \
        out["verified"][2]
    assert out["reference"][:2] == out["verified"][:2]
    assert sum(out["verified"][0].values()) >= 2


_TINY = """
import json, sys
if sys.argv[1] == "hidden":
    sys.modules["pypm_verified._native._fxreader"] = None  # as if it were not built
import torch
from pypm_verified import _native
from pypm_verified.torch.importer import TermGraph

class M(torch.nn.Module):
    def forward(self, x, y):
        a = torch.relu(x @ y.t())
        return a + torch.relu(x @ y.t()), a.sum(-1, keepdim=True)

ep = torch.export.export(M(), (torch.randn(4, 8), torch.randn(6, 8))).run_decompositions({})
tg = TermGraph(ep.graph_module.graph).build()
print(json.dumps({"status": _native.status(), "native": _native.reader() is not None,
                  "terms": [repr(n) for n in tg.graph.nodes], "merged": tg.merged,
                  "words": len(tg.graph.encode())}))
"""


def test_without_the_extension_the_python_reader_reads():
    """A process where the extension cannot be imported (a wheel, no C
    compiler) reads with Python, and reads the same terms."""
    import json
    import subprocess
    env = dict(os.environ)
    env.pop(_native.ENV, None)
    env["PYTHONPATH"] = os.path.join(ROOT, "python") + os.pathsep + env.get("PYTHONPATH", "")
    out = {}
    for how in ("hidden", "as built"):
        r = subprocess.run([sys.executable, "-c", _TINY, how], capture_output=True, text=True,
                           env=env, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        out[how] = json.loads(r.stdout.strip().splitlines()[-1])
    hidden, built = out["hidden"], out["as built"]
    assert not hidden["native"] and "not built" in hidden["status"]
    assert hidden["merged"] >= 1 and len(hidden["terms"]) > 5  # the repeated x @ y.t()
    if built["native"]:
        assert (built["terms"], built["merged"], built["words"]) == (
            hidden["terms"], hidden["merged"], hidden["words"])


def _odd_program(objs):
    """An FX graph of what exported programs seldom hold: nested lists holding
    nodes, metadata that is not a tensor, a node without meta, a call_method,
    a call_module, a Python callable, kwargs and defaults that make two calls
    equal (``objs`` shared, so two builds see the same objects)."""
    g = fx.Graph()
    x = g.placeholder("x")
    x.meta["val"] = objs["fake"]
    y = g.placeholder("y")
    y.meta["val"] = objs["thing"]  # not a tensor
    a = g.call_function(aten.add.Tensor, (x, 2.5))
    b = g.call_function(aten.cat.default, ([x, [a, 1]], 0))
    d = g.call_function(aten.add.Tensor, (x, x), {"alpha": 2.5})
    e = g.call_method("view", (x, -1))
    f = g.call_module("sub", (x,), {"k": [a, (b, 3)]})
    h = g.call_function(aten.add.Tensor, (x, x), {"alpha": 1})
    i = g.call_function(aten.add.Tensor, (x, x))  # merged into h (alpha's default is 1)
    j = g.call_function(aten.sum.dim_IntList, (x, [0, 1.5, None, True]))
    k = g.call_function(objs["fn"], (x, 7), {"z": "s"})
    m = g.call_function(operator.getitem, (e, 0))
    g.output((a, b, d, e, f, h, i, j, k, m, y))
    for n in (a, b, d, h, i, j):
        n.meta["val"] = objs["fake"]
    return g


def test_odd_graphs_read_alike(native, monkeypatch):
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        fake = torch.empty(2, 3)
    objs = {"fake": fake, "thing": object(), "tensor": torch.ones(3), "fn": lambda *a: a}
    snaps = {}
    for on in (False, True):
        tg = _build(_odd_program(objs), on, monkeypatch)
        snaps[on] = snapshot(tg)
    for key in snaps[False]:
        assert snaps[True][key] == snaps[False][key], key
    assert snaps[True]["merged"] == 1
    # a tensor or an object as an argument has no constant form: both
    # readers make it an opaque input (it was a GraphError, the exception
    # the importer meant to catch)
    for bad in (objs["tensor"], objs["thing"]):
        g = fx.Graph()
        x = g.placeholder("x")
        g.output(g.call_function(aten.add.Tensor, (x, bad)))
        for on in (False, True):
            tg = _build(copy.deepcopy(g), on, monkeypatch)
            add = next(n for n in tg.fx_graph.nodes if n.op == "call_function")
            other = tg.term[add].args[1]
            assert other.kind == "input" and other.name.startswith("opaque:"), other


def test_correspondence_is_the_python_one(native, monkeypatch):
    """The correspondence of a pass's nodes (``Pass.correspond``), native
    and Python, on random passes: the same images, map, inverse and merges
    (claimed as rebuilt or not); a replacement the resolver does not find
    is refused alike; lists that do not fit the graphs raise."""
    from pypm_verified.rewriting.validate import (Encoding, Firing, Pass,
                                                  RewriteRejected)
    rng = random.Random(11)
    shapes = 0
    for trial in range(300):
        nb, na = rng.randrange(0, 25), rng.randrange(0, 25)
        labels = [rng.randrange(0, 4) for _ in range(max(nb, na))]

        def enc(n):
            e = Encoding()
            e.labels = [labels[i] for i in range(n)]
            e.args = [tuple(rng.randrange(0, i) for _ in range(rng.randrange(0, 3))) if i
                      else () for i in range(n)]
            e.names = [f"n{i}" for i in range(n)]
            e.mergeable = [rng.random() < 0.7 for _ in range(n)]
            return e
        before, after = enc(nb), enc(na)
        if trial % 3 == 0:  # after: before with its nodes kept (so merges are found)
            after.labels, after.args = list(before.labels), list(before.args)
            after.names, na = list(before.names), nb
        pairs = list(zip(rng.sample(range(na), min(na, nb) // 2),
                         rng.sample(range(nb), min(na, nb) // 2)))
        identity = dict(pairs)
        roots = rng.sample(sorted(set(range(nb)) - set(identity.values())),
                           min(2, nb - len(identity)))
        firings = [Firing("r", g, rng.choice([rng.randrange(0, na) if na else None, None,
                                              ("gone",)]), f"n{g}", "x") for g in roots]

        def resolve(rep, p):
            return rep if isinstance(rep, int) or rep is None else None
        got = {}
        for on in ("0", "1"):
            monkeypatch.setenv(_native.ENV, on)
            p = Pass("test", 1, before, after, list(firings), dict(identity), resolve,
                     claim_rebuilt=bool(trial % 2))
            try:
                p.correspond()
                got[on] = (p.image, p.amap, p._inverse,
                           [(f.rule, f.root, f.replacement) for f in p.firings])
            except RewriteRejected as e:
                got[on] = ("rejected", str(e))
        assert got["0"] == got["1"], trial
        shapes += got["1"][0] != "rejected" and len(got["1"][3]) > len(firings)
    assert shapes > 10  # merges were found
    def args(n_before=1, identity=None):
        return (n_before, identity or {}, {}, [True], [0], [()], [0], [()], False, None,
                None, [], [-1], {})
    with pytest.raises(ValueError):
        native.correspond(*args(n_before=2))
    assert native.correspond(*args()) == [(0, 0)]  # gone, and equal to after node 0
    with pytest.raises(IndexError):
        native.correspond(*args(identity={5: 0}))


def test_pass_words_are_the_python_words(native, monkeypatch):
    """The validator's buffer of a pass (``encode_words``), native and
    Python: word for word; malformed lists raise."""
    from pypm_verified.rewriting.validate import Encoding, encode_words
    rng = random.Random(7)
    for _ in range(50):
        encs = []
        for _g in range(2):
            e = Encoding()
            n = rng.randrange(0, 30)
            e.labels = [rng.randrange(0, 1 << 40) for _ in range(n)]
            e.args = [tuple(rng.randrange(0, max(i, 1)) for _ in range(rng.randrange(0, 4)))
                      if rng.random() < 0.8 else [rng.randrange(0, 5)] for i in range(n)]
            e.outputs = [rng.randrange(0, max(n, 1)) for _ in range(rng.randrange(0, 4))]
            encs.append(e)
        fs = [(rng.randrange(0, 9), rng.randrange(0, 9)) for _ in range(rng.randrange(0, 5))]
        amap = [rng.randrange(-1, 9) for _ in range(len(encs[1].labels))]
        words = {}
        for on in ("0", "1"):
            monkeypatch.setenv(_native.ENV, on)
            words[on] = list(encode_words(encs[0], encs[1], fs, amap))
        assert words["0"] == words["1"]
    monkeypatch.setenv(_native.ENV, "1")
    pw = native.pass_words
    ok = ([5], [(0,)], [0], [6], [()], [0], [(0, 0)], [0])
    assert array("q", pw(*ok)) == array("q", [1, 5, 1, 0, 1, 0, 1, 6, 0, 1, 0, 1, 0, 0, 0])
    for i, bad in ((0, [5, 6]), (1, [7]), (6, [(0,)]), (7, ["x"]), (2, [1 << 64]), (3, None)):
        with pytest.raises((TypeError, ValueError, OverflowError)):
            pw(*ok[:i], bad, *ok[i + 1:])
