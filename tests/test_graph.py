"""Graphs: hash-consing, inputs, constants, attributes, reprs."""
import pytest

import pypm_verified as pm
from pypm_verified import core
from pypm_verified.core import symbols


@pm.op
def Add(x, y):
    return 1


@pm.op
def Neg(x):
    return 1


def test_hash_consing():
    g = pm.Graph()
    a, b = g.input("a"), g.input("b")
    n1 = g.apply(Add, a, b)
    assert g.apply(Add, a, b) is n1
    assert g.apply(Add, b, a) is not n1
    # attributes are part of the key
    n2 = g.apply(Add, a, b, shape=(2,), dtype=pm.f32)
    assert n2 is not n1 and g.apply(Add, a, b, shape=[2], dtype="f32") is n2
    assert [n.id for n in g] == list(range(len(g))) == [0, 1, 2, 3, 4]


def test_node_identity():
    g1, g2 = pm.Graph(), pm.Graph()
    a1, a2 = g1.input("a"), g2.input("a")
    assert a1.id == a2.id == 0
    assert a1 != a2 and a1 == g1[0] and hash(a1) == hash(g1[0])
    assert len({a1, a2, g1[0]}) == 2


def test_inputs_unique_per_name():
    g = pm.Graph()
    a = g.input("a", shape=(2, 3), dtype=pm.f16)
    assert g.input("a", shape=(2, 3), dtype=pm.f16) is a
    with pytest.raises(pm.GraphError, match="already declared"):
        g.input("a", shape=(3, 2), dtype=pm.f16)
    assert g.input("b") is not a
    assert (a.kind, a.name, a.op, a.args, a.shape, a.dtype, a.rank) == (
        "input", "a", None, (), (2, 3), pm.f16, 2)


def test_constants():
    g = pm.Graph()
    two = g.const(2)
    assert g.const(2.0) is two
    assert g.const(True) is not g.const(1)
    assert g.const(False) is not g.const(0)
    assert g.const("2") is not two and g.const(None) is g.const(None)
    assert two.label == symbols.const_symbol(2.0) and two.args == () and two.kind == "const"
    # Python constants in apply become constant leaves
    n = g.apply(Add, g.input("x"), 2)
    assert n.args[1] is two
    assert g.const(float("nan")) is g.const(float("nan"))
    # lists/tuples of constants are one leaf, by their elements (the torch importer's
    # size lists); other objects are rejected
    assert g.const([1, 2]) is g.const((1, 2.0)) and g.const([1]) is not g.const([True])
    assert g.const(pm.f32) is g.const(pm.f32) and g.const(pm.f32) is not g.const(pm.f16)
    with pytest.raises(pm.GraphError):
        g.const([object()])
    with pytest.raises(pm.GraphError):
        g.const({1: 2})


def test_attributes():
    g = pm.Graph()
    a = g.input("a", shape=(4, None, 8), dtype=pm.bf16)
    assert a.attrs == {core.RANK: 3, core.DTYPE: pm.bf16.code,
                       100: 4, 102: 8, 200: 8, 202: 4}
    assert g.input("u").attrs == {}
    assert g.input("s", shape=()).attrs == {core.RANK: 0}


def test_graph_errors():
    g, h = pm.Graph(), pm.Graph()
    a = g.input("a")
    with pytest.raises(pm.GraphError, match="takes 2"):
        g.apply(Add, a)
    with pytest.raises(pm.GraphError, match="another graph"):
        h.apply(Neg, a)
    with pytest.raises(pm.GraphError, match="neither a node nor a constant"):
        g.apply(Neg, [a])
    with pytest.raises(pm.GraphError, match="operator"):
        g.apply("Neg", a)
    with pytest.raises(pm.GraphError, match="maximum"):
        g.input("big", shape=(1,) * 65)
    with pytest.raises(pm.GraphError, match=r"ints in \(-2\^62, 2\^62\)"):
        g.input("f", shape=(2.0,))
    with pytest.raises(pm.GraphError, match=r"ints in \(-2\^62, 2\^62\)"):
        g.input("h", shape=(1 << 62,))
    g.input("edge", shape=((1 << 62) - 1, -(1 << 62) + 1))
    with pytest.raises(pm.GraphError):
        g.input("min_int", shape=(-(1 << 62),))  # OCaml's min_int: abs is negative
    with pytest.raises(ValueError, match="unknown dtype"):
        g.input("d", dtype="f8")


def test_reprs():
    g = pm.Graph()
    a = g.input("a", shape=(4, None), dtype=pm.f32)
    n = g.apply(Add, a, 0.5)
    assert repr(a) == "<Node %0 = input 'a' : f32[4, ?]>"
    assert repr(n.args[1]) == "<Node %1 = const 0.5>"
    assert repr(n) == "<Node %2 = Add(%0, %1)>"
    assert repr(g.apply(Neg, n, dtype=pm.i8)) == "<Node %3 = Neg(%2) : i8[?]>"
    assert repr(g) == "<Graph with 4 nodes>"


def test_encode_cache_invalidated_by_new_nodes():
    g = pm.Graph()
    a = g.input("a")
    w1 = g.encode()
    assert g.encode() is w1
    g.apply(Neg, a)
    w2 = g.encode()
    assert w2 is not w1 and w2[2] == 2
    g.apply(Neg, a)  # hash-consed: no new node, cache kept
    assert g.encode() is w2


def test_shape_values_for_rules():
    g = pm.Graph()
    a = g.input("a", shape=(4, None, 8), dtype=pm.f32)
    assert isinstance(a.shape, pm.TensorShape) and a.shape == (4, None, 8)
    assert a.shape.rank == a.rank == 3 and a.shape[-1] == 8
    assert a.elType is a.dtype is pm.f32
    u = g.input("u")
    assert u.shape is None and u.rank is None and u.elType is None


def test_outputs_and_live():
    g = pm.Graph()
    a, b = g.input("a"), g.input("b")
    n = g.apply(Add, a, b)
    dead = g.apply(Neg, a)
    assert g.outputs == () and g.live() == list(g.nodes)  # no outputs: everything
    assert g.output(n) is n and g.output(n) is n
    assert g.outputs == (n,)
    assert g.live() == [a, b, n] and dead not in g.live()
    with pytest.raises(pm.GraphError, match="not a node of this graph"):
        g.output(pm.Graph().input("z"))


def test_replace_rebuilds_users():
    g = pm.Graph()
    a, b = g.input("a", shape=(2,)), g.input("b")
    x = g.apply(Neg, a)
    s = g.apply(Add, x, b, shape=(2,), dtype=pm.f32)
    t = g.apply(Add, s, x)
    g.output(t)
    g.output(b)
    g.replace(x, b)
    (t2, b2) = g.outputs
    assert b2 is b
    # every occurrence of x is now b; shapes and dtypes are kept
    s2 = g.apply(Add, b, b, shape=(2,), dtype=pm.f32)
    assert t2 is g.apply(Add, s2, b)
    assert t2.args[0].shape == (2,) and t2.args[0].dtype is pm.f32
    assert x not in g.live() and t not in g.live()
    # the old nodes are unchanged (nodes are immutable)
    assert t.args == (s, x)


def test_replace_with_a_term_containing_the_old_node():
    g = pm.Graph()
    a = g.input("a")
    x = g.apply(Neg, a)
    out = g.apply(Add, x, x)
    g.output(out)
    wrapped = g.apply(Neg, x)  # Neg(Neg(a)) contains x
    g.replace(x, wrapped)
    assert g.outputs == (g.apply(Add, wrapped, wrapped),)
    assert g.outputs[0].args[0].args[0] is x  # inserted as is
    # replacing an output itself
    g.replace(g.outputs[0], a)
    assert g.outputs == (a,) and g.live() == [a]


def test_replace_needs_outputs():
    g = pm.Graph()
    a = g.input("a")
    with pytest.raises(pm.GraphError, match="outputs"):
        g.replace(a, g.apply(Neg, a))
