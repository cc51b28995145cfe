"""Hypothesis strategies: small random graphs and well-formed core patterns."""
from hypothesis import strategies as st

import pypm_verified as pm
from pypm_verified import core, symbols
from pypm_verified.core import (EAdd, EAttr, EConst, EMul, ESub, GAnd, GEq, GLt, GNot, GOr,
                                GTrue, PAlt, PApp, PGuard, PVar)


@pm.op
def K0():
    return 1


@pm.op
def U1(x):
    return 1


@pm.op
def V1(x):
    return 1


@pm.op
def B2(x, y):
    return 1


@pm.op
def T3(x, y, z):
    return 1


OPS = (K0, U1, V1, B2, T3)
CONSTS = (0, 1)
ATTRS = (core.RANK, core.DTYPE, 100, 101, 200, 201)
N_VARS = 3

shapes = st.one_of(st.none(), st.lists(st.one_of(st.none(), st.integers(0, 3)), max_size=2))
dtypes = st.one_of(st.none(), st.sampled_from([pm.f32, pm.i8]))


@st.composite
def graphs(draw, max_nodes=9):
    """A graph of inputs, constants and operator nodes (all reachable ids)."""
    g = pm.Graph()
    for i in range(draw(st.integers(1, 3))):
        g.input(f"in{i}", shape=draw(shapes), dtype=draw(dtypes))
    for _ in range(draw(st.integers(0, max_nodes))):
        if draw(st.integers(0, 5)) == 0:
            g.const(draw(st.sampled_from(CONSTS)))
            continue
        op = draw(st.sampled_from(OPS))
        args = [g.nodes[draw(st.integers(0, len(g) - 1))] for _ in range(op.arity)]
        g.apply(op, *args, shape=draw(shapes), dtype=draw(dtypes))
    return g


def exprs(vs):
    leaves = [st.integers(-2, 4).map(EConst)]
    if vs:
        leaves.append(st.builds(EAttr, st.sampled_from(sorted(vs)), st.sampled_from(ATTRS)))
    return st.recursive(
        st.one_of(leaves),
        lambda e: st.one_of(st.builds(EAdd, e, e), st.builds(ESub, e, e), st.builds(EMul, e, e)),
        max_leaves=3)


def guards(vs):
    e = exprs(vs)
    base = st.one_of(st.just(GTrue()), st.builds(GEq, e, e), st.builds(GLt, e, e))
    return st.recursive(
        base,
        lambda g: st.one_of(st.builds(GAnd, g, g), st.builds(GOr, g, g), st.builds(GNot, g)),
        max_leaves=3)


leaves = st.one_of(
    st.integers(0, N_VARS - 1).map(PVar),
    st.sampled_from(CONSTS).map(lambda c: PApp(symbols.const_symbol(c), ())),
    st.just(PApp(K0.symbol, ())))


def _apps(children_st):
    """PApp of an operator of arity >= 1 over the right number of children."""
    return st.builds(lambda op, kids: PApp(op.symbol, tuple(kids[:op.arity])),
                     st.sampled_from([o for o in OPS if o.arity]),
                     st.lists(children_st, min_size=3, max_size=3))


def _guarded(p_st):
    """``p ; guard(g)`` where g only reads variables p binds (well-formed)."""
    return p_st.flatmap(lambda p: guards(core.binds(p)).map(lambda g: PGuard(p, g)))


variables = st.integers(0, N_VARS - 1).map(PVar)

patterns = st.recursive(
    leaves,
    lambda p: st.one_of(_apps(p), st.builds(PAlt, p, p), _guarded(p)),
    max_leaves=8)


@st.composite
def patterns_for(draw, node, depth=3):
    """A pattern shaped like the term at ``node`` (so it often matches), with
    variables, alternates and guards mixed in."""
    choice = draw(st.integers(0, 9))
    if choice <= 2 or depth == 0:
        return draw(variables) if choice != 2 else draw(patterns)
    if node.kind == "op":
        p = PApp(node.label, tuple(draw(patterns_for(c, depth - 1)) for c in node.args))
    else:
        p = PApp(node.label, ()) if choice < 8 else draw(variables)
    if choice == 8:
        p = PAlt(draw(patterns), p) if draw(st.booleans()) else PAlt(p, draw(patterns))
    if choice == 9:
        p = PGuard(p, draw(guards(core.binds(p))))
    return p
