"""The import's shared tables: per-overload and per-tensor-type entries, the
positional form of a call kept for the rewrite validator, and the graph's
public label counts (what the multi-root planner reads).

* nodes of one static tensor type share one ``(shape, dtype, attributes)``
  entry, and a node whose metadata changed gets its new type;
* ``TermGraph.call_args`` is the positional form of the call, reused while
  the node's argument objects are the same and recomputed when they change;
  the FX rewrite validator labels nodes from it;
* the validator's label of a call stands for its target: equal for equal
  targets (equal strings that are distinct objects included), different
  for different ones;
* ``Graph.label_counts`` counts each label's nodes and follows the graph's
  growth.
"""
import collections

import pytest

torch = pytest.importorskip("torch")

import pypm_verified as pm  # noqa: E402
from pypm_verified.torch import validate_fx  # noqa: E402
from pypm_verified.torch.importer import TermGraph, positional_args  # noqa: E402

aten = torch.ops.aten


def _fake(shape, dtype=torch.float32):
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        return torch.empty(shape, dtype=dtype)


def _graph():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    x.meta["val"] = _fake((2, 3))
    a = g.call_function(aten.relu.default, (x,))
    a.meta["val"] = _fake((2, 3))
    b = g.call_function(aten.neg.default, (a,))
    b.meta["val"] = _fake((2, 3))
    c = g.call_function(aten.softmax.int, (b, -1))
    c.meta["val"] = _fake((2, 3))
    g.output((c,))
    return g, x, a, b, c


def _checker(g, tg=None):
    """The FX validator's reader over ``g`` (and its import ``tg``), with a
    stand-in for the driver: the fields the reader reads."""
    class Driver:
        pass

    d = Driver()
    d.gm, d.firings = torch.fx.GraphModule(torch.nn.Module(), g), []
    if tg is not None:
        d.tg = tg
    return validate_fx.FxChecker(d)


def test_nodes_of_one_tensor_type_share_its_entry_and_a_new_type_is_read():
    g, x, a, b, c = _graph()
    tg = TermGraph(g).build()
    ta, tb, tc = tg.term[a], tg.term[b], tg.term[c]
    assert ta.shape == tb.shape == tc.shape == (2, 3) and ta.dtype == pm.f32
    assert ta.shape.rank == 2  # a TensorShape, as rule bodies read it
    assert ta.shape is tb.shape  # one entry per (sizes, dtype)
    assert tg.graph.attr_map(ta.id) == tg.graph.attr_map(tc.id)
    b.meta["val"] = _fake((2, 3), torch.float16)  # another type: read again
    tg.import_node(b)
    assert tg.term[b].dtype == pm.f16 and tg.term[b].shape == (2, 3)
    assert tg.term[b] is not tb


def test_call_args_are_kept_while_the_arguments_are_the_same_objects():
    g, x, a, b, c = _graph()
    tg = TermGraph(g).build()
    first = tg.call_args(c)
    assert first == [b, -1, None] == positional_args(c)
    assert tg.call_args(c) is first  # same argument objects: the import's list
    c.args = (a, 0)  # FX gives the node new argument objects
    again = tg.call_args(c)
    assert again == [a, 0, None] and again is not first
    bad = g.call_function(aten.softmax.int, (b, -1), {"bogus": 1})
    assert tg.call_args(bad) is None  # does not fit the schema


def test_the_validator_reads_the_positional_form_the_import_computed(monkeypatch):
    from pypm_verified.torch import validate_fx
    # a checker that has not seen these targets yet (the table is the
    # process's): its first read of each goes through _node
    monkeypatch.setattr(validate_fx, "_TARGETS", {})
    g, x, a, b, c = _graph()
    tg = TermGraph(g).build()
    seen = []
    real = tg.call_args
    monkeypatch.setattr(tg, "call_args", lambda n: seen.append(n) or real(n))
    checker = _checker(g, tg)
    enc = checker.encode()
    assert set(seen) == {a, b, c}
    # softmax(b, -1) and softmax(b, -1, None) are one call, one label
    with g.inserting_before(list(g.nodes)[-1]):
        c2 = g.call_function(aten.softmax.int, (b, -1, None))
    assert checker._node(c2)[0] == enc.labels[enc.index[c]]


def test_validator_labels_stand_for_targets():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    m1 = g.call_method("view", (x, 6))
    m2 = g.call_method("".join(["vi", "ew"]), (x, 6))  # an equal string, another object
    assert m1.target == m2.target and m1.target is not m2.target
    r = g.call_function(aten.relu.default, (x,))
    n = g.call_function(aten.neg.default, (x,))
    r2 = g.call_function(aten.relu.default, (x,))
    g.output((m1, m2, r, n, r2))
    checker = _checker(g)
    label = {v: checker._node(v)[0] for v in (m1, m2, r, n, r2)}
    assert label[m1] == label[m2]
    assert label[r] == label[r2] != label[n]


def test_label_counts_follow_the_graph():
    G = pm.Graph()
    a = G.input("a", shape=(2,), dtype=pm.f32)
    b = G.input("b", shape=(2,), dtype=pm.f32)

    @pm.op
    def Add(x, y):
        return 1

    G.apply(Add, a, b)
    G.apply(Add, b, a)
    counts = G.label_counts()
    assert counts == collections.Counter(n.label for n in G)
    assert counts[Add.symbol] == 2 and counts[-1] == 0
    G.apply(Add, a, a)
    assert G.label_counts()[Add.symbol] == 3


def test_validator_constant_specs_are_the_import_leaves_per_type_and_value():
    # the checker caches a constant's spec by (type, value): 2 and 2.0, True
    # and 1, 0.0 and -0.0 must each still get the leaf the import gives them
    g = torch.fx.Graph()
    x = g.placeholder("x")
    x.meta["val"] = _fake((2, 3))
    consts = [2, 2.0, True, 1, 0.0, -0.0, None, "a", torch.float16, 2, 2.0]
    outs = []
    for k in consts:
        n = g.call_function(aten.add.Tensor, (x, k)) if not isinstance(k, (str, type(None),
                                                                          torch.dtype)) \
            else g.call_function(aten.mul.Tensor, (x, 1))
        n.meta["val"] = _fake((2, 3))
        outs.append(n)
    g.output(tuple(outs))
    tg = TermGraph(g).build()
    checker = _checker(g, tg)
    specs = [checker._spec(k, []) for k in consts]
    assert specs == [("c", tg.arg(k).id) for k in consts]
    # cached per type: the import decides whether 2 and 2.0 are one leaf
    assert {(int, 2), (float, 2.0), (bool, True), (int, 1)} <= set(checker._const_specs)
    # zeros too, -0.0 apart from 0.0 (they are equal and hash alike)
    assert {(float, 0.0), (float, "-0.0")} <= set(checker._const_specs)
    assert specs[4] != specs[5]
    assert [checker._spec(k, []) for k in consts] == specs  # read again from the cache
    assert specs[0] == specs[-2] and specs[1] == specs[-1]


def test_a_target_changed_in_place_is_read_again():
    # FX replaces args and kwargs on every change, but a pass may set
    # node.target in place: neither the import's positional form nor the
    # validator's reading of the node may be the old target's
    g, x, a, b, c = _graph()
    tg = TermGraph(g).build()
    checker = _checker(g, tg)
    relu_label = checker._node(a)[0]
    neg_label = checker._node(b)[0]
    sm = tg.call_args(c)
    assert sm == [b, -1, None]  # softmax.int(self, dim, dtype=None)
    a.target = aten.neg.default  # same args object, another target
    assert checker._node(a)[0] == neg_label != relu_label
    c.target = aten._softmax.default  # (self, dim, half_to_float): no default
    assert tg.call_args(c) is None  # (b, -1) does not fit it; not the old form
