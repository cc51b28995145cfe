"""Fuel that suffices (theories/Fuel.v).

``Fuel.match_root_fuel``: a descending table (every cycle of calls under an
operator application) at a node of depth at most N never runs out of
``fuel_bound N`` steps. ``core.fuel`` transcribes the class and the bound;
these tests check the transcription against the machines: with exactly
``fuel_bound(depth(node))`` steps, the verified engine, the reference engine
and the transcribed machine (tests/machine.py, ``match_pattern`` without the
root index, which the theorem covers too) all answer, on random tables and
graphs; and the class is the one the user is told about.
"""
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import pypm_verified as pm
from pypm_verified import core
from pypm_verified.core import fuel
import paper_ops as po
from machine import OUT_OF_FUEL, match_pattern
from strategies import U1, chain_graphs, graphs, programs

SETTINGS = settings(max_examples=400, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def depth(node, memo=None):
    """Edges on the longest downward path from ``node`` (``Fuel.depth_le``)."""
    memo = {} if memo is None else memo
    if node.id not in memo:
        memo[node.id] = 1 + max((depth(c, memo) for c in node.args), default=-1)
    return memo[node.id]


def in_class(prog):
    d, body = prog.defs, prog.root_def.body
    return fuel.descending(d) and fuel.ug(d, len(d), body) and fuel.args_ok(d, body)


# ------------------------------------------------------------ the paper's


def test_paper_patterns_are_classified():
    for P in (po.MMxyT, po.GeluPat):
        t = pm.termination(P)
        assert t.descending and not t.recursive and t.depth_limit is None
        assert t.fuel_bound(t.nesting) == t.fuel_bound(t.nesting + 7)  # the bound stops growing
    for P in (po.UnaryChain, po.PwChain, po.MatMulEpilog):
        t = pm.termination(P)
        assert t.descending and t.recursive
        assert t.depth_limit is not None and t.depth_limit >= 1000
        assert t.fuel_bound(t.depth_limit) <= fuel.DEFAULT_FUEL
        if t.depth_limit < fuel.MAX_DEPTH:
            assert t.fuel_bound(t.depth_limit + 1) > fuel.DEFAULT_FUEL
        assert "descends" in str(t)
    # Figure 4's trees: exponential bound, so a small proved depth
    t = pm.termination(po.P)
    assert t.descending and 1 <= t.depth_limit < 10


@pm.pattern
def Loop(x):
    return Loop(x)


@pm.pattern
def Loop(x):  # noqa: F811
    return po.Relu(x)


def test_unguarded_recursion_is_named():
    t = pm.termination(Loop)
    assert not t.descending and t.cycle == ("Loop", "Loop")
    with pytest.raises(ValueError):
        t.fuel_bound(3)
    g = pm.Graph()
    r = po.Relu(g.input("a"))
    for engine in pm.ENGINES:  # outside the class, OutOfFuel is possible, and says why
        with pytest.raises(pm.OutOfFuel, match="not descending.*Loop -> Loop"):
            pm.match(Loop, r, engine=engine, fuel=1000)


def test_chain_answers_within_the_bound_and_not_much_less():
    """A Relu chain of depth 60 under PwChain: the proved bound suffices in
    both engines; the engines need fewer steps (the bound is an upper one)."""
    g = pm.Graph()
    x = po.MatMul(g.input("a"), g.input("b"))
    for _ in range(60):
        x = po.Relu(x)
    t = pm.termination(po.MatMulEpilog)
    bound = t.fuel_bound(depth(x))
    for engine in pm.ENGINES:
        m = pm.match(po.MatMulEpilog, x, engine=engine, fuel=bound)
        assert m is not None and m.bindings["x"] is x
    assert match_pattern(po.MatMulEpilog.program, x, bound) != OUT_OF_FUEL


def test_saturation_is_exact_below_the_cap():
    prog = po.P.program
    c = fuel.Costs(prog.defs, prog.root_def.body)
    assert c.fuel_bound(3) == 5813 and c.fuel_bound(40) == fuel.SAT


# ------------------------------------------------------------ random tables


@SETTINGS
@given(st.data())
def test_unguarded_cycle_iff_not_descending(data):
    prog = data.draw(programs(max_defs=4))
    assert (fuel.unguarded_cycle(prog.defs) is None) == fuel.descending(prog.defs)


@st.composite
def problems(draw):
    g = draw(st.one_of(graphs(max_nodes=12), chain_graphs()))
    root = g.nodes[draw(st.integers(0, len(g) - 1))]
    return g, root, draw(programs(root))


@SETTINGS
@given(problems())
def test_fuel_bound_suffices(prob):
    """``Fuel.match_pattern_fuel`` / ``match_root_fuel`` on random tables:
    with ``fuel_bound(depth)`` steps nothing runs out of fuel."""
    g, root, prog = prob
    if not in_class(prog):
        event("outside the class")
        return
    event("descending, recursive" if fuel._call_cycle(prog.defs) else "descending")
    bound = fuel.fuel_bound(prog.defs, depth(root), prog.root_def.body)
    assert match_pattern(prog, root, bound) != OUT_OF_FUEL
    for engine in pm.ENGINES:
        pm.match(prog, root, engine=engine, fuel=bound)  # raises OutOfFuel if it runs out


def test_random_tables_reach_the_class():
    """The random tables above are in the class often enough to mean
    something, recursive ones included."""
    seen = {"in": 0, "recursive": 0}

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(problems())
    def count(prob):
        prog = prob[2]
        if in_class(prog):
            seen["in"] += 1
            seen["recursive"] += fuel._call_cycle(prog.defs)

    count()
    assert seen["in"] >= 60 and seen["recursive"] >= 10, seen


def test_depth_of_a_chain():
    g = pm.Graph()
    a = g.input("a")
    assert depth(a) == 0 and depth(U1(U1(a))) == 2


def test_shipped_library_never_runs_out_of_fuel():
    """The driver matches the library's patterns through one combined table;
    it is descending and every root's proved bound stops growing far below
    the default fuel, so ``Fuel.match_root_fuel`` rules out OutOfFuel on any
    model (checked here at depth 10,000, beyond any exported model)."""
    from pypm_verified.engines.matching import PreparedPatterns
    from pypm_verified.library import default_patterns
    patterns = list(default_patterns())
    s = PreparedPatterns(patterns)
    assert fuel.descending(s.defs)
    for P, r in zip(patterns, s.roots):
        t = pm.termination(P)
        assert t.descending and t.depth_limit is None, str(t)
        deep = fuel.fuel_bound(s.defs, 10_000, s.defs[r].body)
        assert deep == t.fuel_bound(t.nesting) <= fuel.DEFAULT_FUEL


# ------------------------------------------------------------ multi-root


def test_multi_root_bound_is_the_chain_over_the_roots():
    """``Multi.multi_fuel_bound``: one run of the machine per candidate
    prefix, each chaining the roots' costs, then the guard and ST-SUCCESS.
    On three linears over one input the bound is exactly what both engines
    need; the first root's own bound (what a multi-root pattern was once
    told) runs out."""
    from test_multi import QKV, qkv_graph
    from pypm_verified.errors import OutOfFuel
    t = pm.termination(QKV)
    assert t.descending and t.depth_limit is None and "every depth" in str(t)
    _, outs = qkv_graph(n_layers=1, extra=False)
    q = outs[0][0]
    bound = t.fuel_bound(t.nesting)
    linked = QKV.linked
    first = fuel.fuel_bound(linked.defs, t.nesting, linked.defs[linked.multi[QKV].roots[0]].body)
    assert first < bound == fuel.multi_fuel_bound(
        linked.defs, 10, [linked.defs[r].body for r in linked.multi[QKV].roots])
    for engine in pm.ENGINES:
        assert pm.match(QKV, q, engine=engine, fuel=bound) is not None
        with pytest.raises(OutOfFuel):
            pm.match(QKV, q, engine=engine, fuel=bound - 1)
        with pytest.raises(OutOfFuel):
            pm.match(QKV, q, engine=engine, fuel=first)


@SETTINGS
@given(st.data())
def test_multi_fuel_bound_suffices(data):
    """``Multi.match_multi_fuel`` on random multi-root tables: with
    ``multi_fuel_bound`` at the graph's depth, no engine runs out of fuel."""
    from test_multi import multi_problems
    from pypm_verified.engines import multi
    g, root, prog = data.draw(multi_problems())
    if not fuel.descending(prog.defs):
        event("outside the class")
        return
    dp = max(depth(n) for n in g.nodes)
    bound = fuel.multi_fuel_bound(prog.defs, dp, [prog.defs[r].body for r in prog.roots])
    for engine in pm.ENGINES:
        multi.match_multi(prog, root, engine, bound)  # raises OutOfFuel if it runs out
