"""The FX import's tables give what a straightforward import gives.

``TermGraph.build`` reads each FX node once through shared tables (per
overload, per static tensor type, per constant, per call shape of a
schema) and appends to the term graph's columns directly. Checked here
against a straightforward import written from the definitions (every
schema argument in order, ``tensor_info`` per node, ``Graph.input`` /
``Graph.const`` / ``Graph.apply`` per node, no table) on exported models,
static and with dynamic shapes:

* the same term graph: labels, children and attributes of every term
  (so the same ids), the same encoding, the same shapes and dtypes;
* each FX node the term the straightforward import gives it, and the same
  duplicates merged (hash-consing: one term id, one structure);
* constant leaves keep the first value seen;
* a re-import of every pure node changes nothing.
"""
import copy
import math
import operator
import os
import sys

import pytest

torch = pytest.importorskip("torch")
fx = torch.fx

import pypm_verified as pm  # noqa: E402
from pypm_verified.core.graph import Graph, TensorShape, attrs_of  # noqa: E402
from pypm_verified.errors import GraphError  # noqa: E402
from pypm_verified.torch.importer import (  # noqa: E402
    TORCH_TO_PM, TermGraph, is_pure, op_for, positional_args, tensor_info)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import models  # noqa: E402

aten = torch.ops.aten


@pytest.fixture(scope="module")
def programs():
    return {"bert": models.export("bert", "small", layers=2),
            "gpt2": models.export("gpt2", "small", layers=2),
            "bert dynamic": models.export_dynamic("bert", "small", layers=2)}


def _positional(node):
    """The call's arguments in schema order, defaults filled in, from the
    schema alone (None when they do not fit)."""
    if node.target is operator.getitem:
        return list(node.args)
    schema = node.target._schema
    out, used = [], 0
    for i, a in enumerate(schema.arguments):
        if i < len(node.args) and not a.kwarg_only:
            out.append(node.args[i])
        elif a.name in node.kwargs:
            out.append(node.kwargs[a.name])
            used += 1
        elif a.has_default_value():
            out.append(a.default_value)
        else:
            return None
    n_pos = sum(1 for a in schema.arguments if not a.kwarg_only)
    return out if len(node.args) <= n_pos and used == len(node.kwargs) else None


def _const_key(v):
    if isinstance(v, torch.dtype):
        return TORCH_TO_PM.get(v) or repr(v)
    if isinstance(v, (torch.device, torch.layout, torch.memory_format)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return [_const_key(e) for e in v]
    return v


def _straightforward(fx_graph, size_hints=False):
    """``(graph, FX node -> term, const_values)`` with no table and no FX
    merging (the graph's own hash-consing shares equal terms)."""
    g, term, values = Graph(), {}, {}

    def arg(a):
        if isinstance(a, fx.Node):
            return term[a]
        if isinstance(a, (list, tuple)) and any(isinstance(e, fx.Node) for e in a):
            from pypm_verified.torch.importer import list_op
            return g.apply(list_op(len(a)), *[arg(e) for e in a])
        n = g.const(_const_key(a))
        values.setdefault(n.id, a)
        return n

    for node in fx_graph.nodes:
        shape, dtype = tensor_info(node.meta.get("val"), size_hints)
        if node.op in ("placeholder", "get_attr"):
            term[node] = g.input(f"{node.op}:{node.name}", shape=shape, dtype=dtype)
            continue
        assert node.op in ("call_function", "output"), node.format_node()
        args = _positional(node) if node.op == "call_function" else None
        assert args is not None or node.op == "output", node.format_node()
        if node.op == "output":
            continue  # opaque, never shared: compared apart
        term[node] = g.apply(op_for(node.target), *[arg(a) for a in args], shape=shape,
                             dtype=dtype, distinct=not is_pure(node))
    return g, term, values


@pytest.mark.parametrize("name,size_hints", [("bert", False), ("gpt2", False),
                                             ("bert dynamic", False),
                                             ("bert dynamic", True)])
def test_the_import_is_the_straightforward_import(programs, name, size_hints):
    gm = programs[name].graph_module
    ref_gm = copy.deepcopy(gm)
    ref, ref_term, ref_values = _straightforward(ref_gm.graph, size_hints)
    fast_gm = copy.deepcopy(gm)
    by_name = {n.name: n for n in ref_gm.graph.nodes}
    tg = TermGraph(fast_gm.graph, size_hints=size_hints).build()
    n_ref = len(ref)
    # the output node comes last: an opaque node of its own, after the others
    assert tg.graph.columns(0)[0][:n_ref] == ref.columns(0)[0]
    assert tg.graph.columns(0)[1][:n_ref] == ref.columns(0)[1]
    assert tg.graph.columns(0)[2][:n_ref] == ref.columns(0)[2]
    assert len(tg.graph) == n_ref + 1
    for t, r in zip(tg.graph, ref):
        assert (t.kind, t.op, t.shape, t.dtype, t.name, t.value) == \
            (r.kind, r.op, r.shape, r.dtype, r.name, r.value)
    # the encoding carries these columns, node by node
    node_words = []
    for label, kids, attrs in zip(*tg.graph.columns(0)):
        node_words += [label, len(kids), *kids, len(attrs), *[x for av in attrs for x in av]]
    assert list(tg.graph.encode())[3:3 + len(node_words)] == node_words
    # each FX node the straightforward term; duplicates merged into the first
    first = {}
    dups = set()
    for n in ref_gm.graph.nodes:
        if n.op == "output":
            continue
        t = ref_term[n].id
        if t in first:
            dups.add(n.name)
        else:
            first[t] = n.name
    kept = {n.name: n for n in fast_gm.graph.nodes if n.op != "output"}
    assert set(by_name) - {"output"} - set(kept) == dups and tg.merged == len(dups)
    for nm, n in kept.items():
        assert tg.term[n].id == ref_term[by_name[nm]].id, nm
    assert tg.const_values == ref_values


def test_models_have_duplicates_to_merge(programs):
    # the check of merges above compares something: GPT-2 has duplicate
    # pure nodes (its layers repeat index computations)
    tg = TermGraph(copy.deepcopy(programs["gpt2"].graph_module).graph).build()
    assert tg.merged > 0


def test_reimporting_every_pure_node_changes_nothing(programs):
    gm = copy.deepcopy(programs["bert"].graph_module)
    tg = TermGraph(gm.graph).build()
    n = len(tg.graph)
    terms = dict(tg.term)
    pure = [x for x in gm.graph.nodes if x.op == "placeholder"
            or (x.op == "call_function" and is_pure(x))]
    assert len(pure) > len(gm.graph.nodes) - 20
    for node in pure:  # (an impure node is a new node on every import)
        assert tg.reimport(node) == (None, []), node.name
    assert len(tg.graph) == n and tg.term == terms


def test_symbolic_sizes_stay_out_of_the_type_table(programs):
    # a dynamic program first, then a static one: each node its own sizes
    dyn = TermGraph(copy.deepcopy(programs["bert dynamic"].graph_module).graph).build()
    assert any(t.shape is not None and None in t.shape for t in dyn.graph)
    hinted = TermGraph(copy.deepcopy(programs["bert dynamic"].graph_module).graph,
                       size_hints=True).build()
    for t, h in zip(dyn.graph, hinted.graph):
        assert (t.shape is None) == (h.shape is None)
        if t.shape is not None:
            assert all(d is None or d == e for d, e in zip(t.shape, h.shape))
            assert None not in h.shape


def _fake(shape, dtype=torch.float32):
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        return torch.empty(shape, dtype=dtype)


def test_defaults_filled_in_once_per_call_shape_do_not_take_kwargs():
    g = fx.Graph()
    x = g.placeholder("x")
    x.meta["val"] = _fake((2, 3))
    a = g.call_function(aten.softmax.int, (x, -1))
    b = g.call_function(aten.softmax.int, (x, -1), {"dtype": torch.float16})
    c = g.call_function(aten.softmax.int, (x, 0))
    assert positional_args(a) == [x, -1, None]
    assert positional_args(b) == [x, -1, torch.float16]
    assert positional_args(c) == [x, 0, None]
    assert positional_args(a) == [x, -1, None]
    d = g.call_function(aten.softmax.int, (x,))
    with pytest.raises(TypeError, match="missing argument 'dim'"):
        positional_args(d)


def test_constant_lists_keep_their_element_types():
    g = fx.Graph()
    x = g.placeholder("x")
    x.meta["val"] = _fake((2, 3))
    g.output((x,))
    tg = TermGraph(g).build()
    ints, mixed = tg.arg([1, 1]), tg.arg([1, True])
    assert ints is not mixed  # True is a bool constant, not 1
    assert tg.arg([1, 1]) is ints and tg.arg([2.0, [3, None]]) is tg.arg([2.0, [3, None]])
    floats = tg.arg([1.0, 1.0])  # numbers compare by value: the same leaf...
    assert floats is ints
    assert tg.const_values[ints.id] == [1, 1]  # ...keeping the first value seen
    assert type(tg.const_values[ints.id][0]) is int



@pytest.mark.parametrize("native", [True, False])
def test_negative_zero_is_another_constant(native):
    """-0.0 equals 0.0 and hashes alike, but x * -0.0 is not x * 0.0 (its
    sign differs, and 1 / it is -inf): the import keeps them two nodes, on
    both readers, in lists too."""
    import math
    from pypm_verified import _native
    with _native.paths(native):
        g = fx.Graph()
        x = g.placeholder("x")
        x.meta["val"] = _fake((2, 3))
        a = g.call_function(aten.mul.Scalar, (x, 0.0))
        b = g.call_function(aten.mul.Scalar, (x, -0.0))
        c = g.call_function(aten.mul.Scalar, (x, -0.0))  # b's duplicate: merged into b
        for n in (a, b, c):
            n.meta["val"] = _fake((2, 3))
        g.output((a, b, c))
        tg = TermGraph(g).build()
        assert list(g.nodes) == [x, a, b, g.output_node()]
        assert tg.term[a] is not tg.term[b] and tg.merged == 1
        zero, neg = tg.arg(0.0), tg.arg(-0.0)
        assert zero is not neg and tg.arg(-0.0) is neg and tg.arg(0) is zero
        assert math.copysign(1.0, tg.const_values[neg.id]) == -1.0
        assert tg.arg([0.0, -0.0]) is not tg.arg([0.0, 0.0])
        assert tg.arg([-0.0, 1]) is tg.arg([-0.0, 1])


def test_negative_zero_survives_a_rewrite():
    """A program computing 1 / (x * 0.0) and 1 / (x * -0.0) keeps +inf and
    -inf through the driver (the import's merging of equal nodes)."""
    class M(torch.nn.Module):
        def forward(self, x):
            return 1 / (x * 0.0), 1 / (x * -0.0)
    ep = torch.export.export(M(), (torch.ones(3),)).run_decompositions({})
    from pypm_verified.torch.driver import rewrite_graph_module
    from pypm_verified.library import default_patterns
    rewrite_graph_module(ep.graph_module, default_patterns(), check_profitability=False)
    pos, neg = ep.module()(torch.ones(3))
    assert torch.equal(pos, torch.full((3,), math.inf))
    assert torch.equal(neg, torch.full((3,), -math.inf))

def test_input_typed_is_input():
    g = Graph()
    shape = TensorShape((2, 3))
    a = g.input("a", shape=(2, 3), dtype=pm.f32)
    assert g.input_typed("a", shape, pm.f32, attrs_of(shape, pm.f32)) is a
    b = g.input_typed("b", shape, pm.f32, attrs_of(shape, pm.f32))
    assert g.input("b", shape=(2, 3), dtype=pm.f32) is b
    assert g.attr_map(b.id) == g.attr_map(a.id) and b.label != a.label
    with pytest.raises(GraphError, match="already declared"):
        g.input_typed("b", None, None, attrs_of(None, None))
