"""``pm.dominates``: the proved checker (``theories/Dominates.v``, called
through ``pypm_dominates`` by the verified engine) against the reference
engine's Python walk (``engines/dominates.py``), on hypothesis-generated
graphs: both must agree at every node (match or not, the parent, the path
nodes). Also the C API's validation as seen from Python."""
import pytest
from hypothesis import given, settings, strategies as st

import pypm_verified as pm
from pypm_verified.engines import binding, serialize
from pypm_verified.engines.dominates import node_flags
from pypm_verified.errors import EngineError


@pm.op
def Prod(x, w): return 1
@pm.op
def Un(x): return 1
@pm.op
def Bin(x, y): return 1
@pm.op
def Scale(x, alpha): return 1


@pm.pattern
def Parent():
    return Prod(pm.wildcard(), pm.wildcard())


@pm.pattern
def Path():
    return Un(pm.wildcard())
@pm.pattern
def Path(): # noqa: F811
    return Scale(pm.wildcard(), pm.wildcard())
@pm.pattern
def Path(): # noqa: F811
    return Bin(pm.wildcard(), pm.wildcard())


@pm.pattern
def UnaryPath():
    return Un(pm.wildcard())


@pm.pattern
def Child():
    return Bin(pm.wildcard(), pm.wildcard())


PATTERNS = [pm.dominates(Parent, Path, Child), pm.dominates(Parent, UnaryPath, Child),
            pm.dominates(Parent, Path, Path)]

# a graph: a few inputs, then each step applies an operator to earlier nodes
# (or a literal, a constant leaf); some nodes are outputs. 
step = st.tuples(st.sampled_from(["prod", "un", "un", "bin", "bin", "scale", "lit"]),
                 st.integers(0, 10 ** 6), st.integers(0, 10 ** 6), st.integers(0, 3))


def build(inputs, steps, outs):
    g = pm.Graph()
    nodes = [g.input(f"x{i}") for i in range(inputs)]
    nodes.append(g.apply(Prod, nodes[0], nodes[-1]))  # a parent to start from
    for kind, a, b, lit in steps:
        # mostly recent nodes: chains and diamonds, where dominance is decided
        x = nodes[max(0, len(nodes) - 1 - a % 3)]
        y = nodes[max(0, len(nodes) - 2 - b % 4)] if b % 4 else nodes[b % len(nodes)]
        if kind == "prod":
            nodes.append(g.apply(Prod, x, y))
        elif kind == "un":
            nodes.append(g.apply(Un, x))
        elif kind == "bin":
            nodes.append(g.apply(Bin, x, y))
        elif kind == "scale":
            nodes.append(g.apply(Scale, x, lit))
        else:
            nodes.append(g.const(lit))
    for o in outs:  # o = 0: the last node (live ones are the users that count)
        g.output(nodes[-1 - o % len(nodes)])
    return g


def summary(m):
    return None if m is None else (m.root.id, m.parent_node.id, sorted(n.id for n in m.path))


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 3), st.lists(step, min_size=1, max_size=14),
       st.lists(st.sampled_from([0, 0, 1, 2, 3, 5, 8]), max_size=3))
def test_verified_agrees_with_reference(lib, inputs, steps, outs):
    g = build(inputs, steps, outs)
    for d in PATTERNS:
        ref = [summary(d.match(n, engine="reference")) for n in g.nodes]
        ver = [summary(d.match(n, engine="verified")) for n in g.nodes]
        assert ver == ref
        assert [summary(m) for m in d.match_all(g, engine="verified")] == \
            [s for s in ref if s is not None]


def diamond():
    g = pm.Graph()
    p = g.apply(Prod, g.input("x"), g.input("w"))
    a = g.apply(Un, g.apply(Un, p))
    out = g.output(g.apply(Bin, a, g.apply(Scale, p, 2)))
    return g, p, out


def test_diamond_both_engines(lib):
    g, p, out = diamond()
    for engine in ("reference", "verified"):
        m = pm.match(PATTERNS[0], out, engine=engine)
        assert m is not None and m.parent_node is p and len(m.path) == 3
        assert m.child.root is out and m.parent.root is p
    # the parent used outside the region: not dominated, in both engines
    g.output(g.apply(Un, p))
    for engine in ("reference", "verified"):
        assert pm.match(PATTERNS[0], out, engine=engine) is None


def test_dead_end_refused(lib):
    """A path node whose inputs are all constants is a way up that never
    reaches the parent."""
    g = pm.Graph()
    p = g.apply(Prod, g.input("x"), g.input("w"))
    out = g.output(g.apply(Bin, g.apply(Un, p), g.apply(Scale, g.const(1), 2)))
    for engine in ("reference", "verified"):
        assert pm.match(PATTERNS[0], out, engine=engine) is None


def test_spec_validation(lib):
    g, p, out = diamond()
    s = PATTERNS[0]._set()
    flags = node_flags(g)
    with pytest.raises(EngineError, match="node count"):
        binding.dominates(g, s.defs, s.roots, serialize.encode_dominates_spec(0, 1, 2, flags[:-1]),
                          out.id)
    with pytest.raises(EngineError, match="path pattern index 7"):
        binding.dominates(g, s.defs, s.roots, serialize.encode_dominates_spec(0, 7, 2, flags),
                          out.id)
    bad = serialize.encode_dominates_spec(0, 1, 2, flags)
    bad[5] = 9
    with pytest.raises(EngineError, match="flags of node 1"):
        binding.dominates(g, s.defs, s.roots, bad, out.id)
    with pytest.raises(serialize.EncodeError, match="bits 0..2"):
        serialize.encode_dominates_spec(0, 1, 2, [8])


@pytest.mark.parametrize("engine", ["reference", "verified"])
def test_match_all_accepts_dominates(lib, engine):
    g, p, out = diamond()
    d = PATTERNS[0]
    got = pm.match_all([Parent, d, Child], g, engine=engine)
    kinds = [(pat, node.id) for pat, node, _ in got]
    # by node, then pattern order: the Prod (Parent), then the root (Child, then d)
    assert kinds == [(Parent, p.id), (d, out.id), (Child, out.id)]
    m = got[1][2]
    assert m.parent_node is p and m.root is out
    assert pm.match_all([d], g, engine=engine)[0][2].nodes == m.nodes
    with pytest.raises(TypeError):
        pm.match_all(d, g, engine=engine)
