"""The full calculus at the core level (``core.Program``), on both engines:
∃ shadowing, calls aliasing their arguments, match constraints, operator
variables, bounded guard arithmetic, and the declarative checker."""
import pytest

import pypm_verified as pm
from pypm_verified import core
from pypm_verified.engines import declarative, reference
from pypm_verified.core import (
    EAdd, EAttr, EConst, EFAttr, EMul, ESub, GEq, GLt, GNot, GTrue, PAlt, PApp, PCall, PConstr,
    PDef, PExists, PExistsF, PFunVar, PGuard, PVar, Program)


@pm.op(op_class="unary_pointwise")
def U(x):
    return 1


@pm.op
def V(x):
    return 1


@pm.op
def B(x, y):
    return 1


def prog(*defs, root=0):
    return Program(core.infer_binds(defs), root)


def run(p, node, engine, **kw):
    m = pm.match(p, node, engine=engine, **kw)
    if m is not None:
        assert declarative.check(core.as_program(p), m.substitution, node, m.fsubstitution)
    return m


@pytest.fixture
def g():
    g = pm.Graph()
    g.a = g.input("a", shape=(2, 3))
    g.b = g.input("b", shape=(5,))
    return g


def test_exists_shadows_and_is_not_reported(g, engine):
    n = g.apply(B, g.a, g.b)
    # x0 ; (∃x0. B(x0, x1) ≈ x0)... : the inner x0 is a new variable
    p = PConstr(PVar(0), PExists(0, PApp(B.symbol, (PVar(0), PVar(1)))), 0)
    m = run(p, n, engine)
    assert m.substitution == {0: n, 1: g.b}  # the outer x0 is the root, not a
    # a local is never reported
    m = run(PExists(3, PApp(B.symbol, (PVar(3), PVar(1)))), n, engine)
    assert m.substitution == {1: g.b}
    # the outer binding is visible again after the ∃
    p = PApp(B.symbol, (PExists(0, PVar(0)), PVar(0)))
    assert run(p, n, engine).substitution == {0: g.b}
    p = PApp(B.symbol, (PVar(0), PExists(0, PVar(0))))
    assert run(p, n, engine).substitution == {0: g.a}


def test_calls_alias_their_arguments(g, engine):
    same = PDef(2, 0, PApp(B.symbol, (PVar(0), PVar(1))))
    n_aa, n_ab = g.apply(B, g.a, g.a), g.apply(B, g.a, g.b)
    # P(y, y): both parameters are y, so they must match the same node
    p = prog(PDef(1, 0, PCall(1, (0, 0), ())), same)
    assert run(p, n_aa, engine).substitution == {0: g.a}
    assert run(p, n_ab, engine) is None
    # the callee binds the caller's unbound argument; a bound one constrains it
    p = prog(PDef(2, 0, PApp(V.symbol, (PAlt(PCall(2, (1, 0), ()), PVar(0)),))),
             same, PDef(2, 0, PApp(B.symbol, (PVar(1), PVar(0)))))
    assert run(p, g.apply(V, n_ab), engine).substitution == {0: g.a, 1: g.b}
    # the callee sees nothing but its parameters: its variable 1 is its own
    p = prog(PDef(2, 0, PApp(B.symbol, (PVar(1), PCall(1, (0,), ())))),
             PDef(1, 0, PExists(1, PApp(B.symbol, (PVar(0), PVar(1))))))
    inner = g.apply(B, g.b, g.a)
    assert run(p, g.apply(B, g.a, inner), engine).substitution == {0: g.b, 1: g.a}


def test_match_constraints(g, engine):
    n = g.apply(U, g.apply(V, g.a))
    # x1 ; (V(x0) ≈ x1)... with x1 bound by the pattern before it
    p = PConstr(PApp(U.symbol, (PVar(1),)), PApp(V.symbol, (PVar(0),)), 1)
    assert run(p, n, engine).substitution == {0: g.a, 1: n.args[0]}
    p = PConstr(PApp(U.symbol, (PVar(1),)), PApp(U.symbol, (PVar(0),)), 1)
    assert run(p, n, engine) is None
    # the constraint backtracks into the alternates of the pattern before it
    p = PConstr(PAlt(PApp(U.symbol, (PVar(1),)), PVar(1)), PApp(U.symbol, (PVar(0),)), 1)
    assert run(p, n, engine).substitution == {0: n.args[0], 1: n}


def test_operator_variables(g, engine):
    n = g.apply(U, g.apply(U, g.a))
    p = PFunVar(0, (PFunVar(0, (PVar(0),)),))  # F(F(x))
    m = run(p, n, engine)
    assert m.substitution == {0: g.a} and m.fsubstitution == {0: U.symbol}
    assert m.functions == {0: U}
    assert run(p, g.apply(U, g.apply(V, g.a)), engine) is None
    # arity is checked: F(x) does not match a binary node, F() matches a leaf
    assert run(PFunVar(0, (PVar(0),)), g.apply(B, g.a, g.a), engine) is None
    m = run(PFunVar(1, ()), g.a, engine)
    assert m.fsubstitution == {1: g.a.label} and m.substitution == {}
    # ∃F: a local operator variable, not reported
    m = run(PExistsF(0, PFunVar(0, (PVar(0),))), n, engine)
    assert m.substitution == {0: n.args[0]} and m.fsubstitution == {}


def test_op_class_guards(g, engine):
    unary = EConst(pm.opclass("unary_pointwise").code)
    p = PGuard(PFunVar(0, (PVar(0),)), GEq(EFAttr(0, core.OPCLASS), unary))
    assert run(p, g.apply(U, g.a), engine).functions == {0: U}
    assert run(p, g.apply(V, g.a), engine) is None  # V has no class: unknown
    p_not = PGuard(PFunVar(0, (PVar(0),)), GNot(GEq(EFAttr(0, core.OPCLASS), unary)))
    assert run(p_not, g.apply(V, g.a), engine) is None  # ¬unknown is unknown
    assert run(p_not, g.apply(U, g.a), engine) is None
    p_other = PGuard(PFunVar(0, (PVar(0),)), GEq(EFAttr(0, 7), EConst(0)))  # no such attribute
    assert run(p_other, g.apply(U, g.a), engine) is None


@pytest.mark.parametrize("expr,known", [
    (EAdd(EConst((1 << 61) - 1), EConst(-(1 << 61) + 1)), True),
    (EAdd(EConst(1 << 61), EConst(0)), False),
    (ESub(EConst(0), EConst(-(1 << 61))), False),
    (ESub(EConst(-(1 << 61) + 1), EConst((1 << 61) - 1)), True),
    (EMul(EConst((1 << 31) - 1), EConst(-(1 << 31) + 1)), True),
    (EMul(EConst(1 << 31), EConst(1)), False),
    (EMul(EConst(1), EConst(-(1 << 31))), False),
    (EMul(EMul(EConst(1 << 30), EConst(2)), EConst(1)), False),  # 2^31 as an operand
    (EAdd(EMul(EConst((1 << 30) - 1), EConst((1 << 30) + 5)), EAttr(0, core.RANK)), True),
    # a known product can be too big for the sum that uses it: (2^31-1)^2 > 2^61
    (EAdd(EMul(EConst((1 << 31) - 1), EConst((1 << 31) - 1)), EConst(0)), False),
])
def test_bounded_guard_arithmetic(g, engine, expr, known):
    """+ and - are known when both operands are below 2^61 in magnitude, *
    when both are below 2^31 (Declarative.option_map2); unknown otherwise,
    so both e = e and ¬(e = e) fail."""
    for guard, holds in ((GEq(expr, expr), known), (GNot(GEq(expr, expr)), False)):
        assert (run(PGuard(PVar(0), guard), g.a, engine) is not None) == holds
    assert reference.guard_value(GLt(expr, expr), {0: g.a}) is (False if known else None)


def test_only_parameters_are_reported(g, engine):
    # three term parameters, one unbound on the alternate taken
    p = prog(PDef(3, 1, PAlt(PFunVar(0, (PVar(0),)), PApp(B.symbol, (PVar(1), PVar(2))))))
    m = run(p, g.apply(U, g.a), engine)
    assert m.substitution == {0: g.a} and m.fsubstitution == {0: U.symbol}
    m = run(p, g.apply(B, g.a, g.b), engine)
    assert m.substitution == {1: g.a, 2: g.b} and m.fsubstitution == {}


def test_programs_in_match_all(g, engine):
    uc = PDef(1, 1, PAlt(PFunVar(0, (PCall(0, (0,), (0,)),)), PFunVar(0, (PVar(0),))))
    chain = Program(core.infer_binds([uc, PDef(1, 0, PApp(V.symbol, (PVar(0),)))]), 0)
    other_root = Program(chain.defs, 1)
    u2 = g.apply(U, g.apply(U, g.a))
    v1 = g.apply(V, g.b)
    found = pm.match_all([chain, other_root, PVar(0)], g, engine=engine)
    got = [(p is chain, p is other_root, r, m.substitution, m.fsubstitution) for p, r, m in found]
    assert got == [
        (False, False, g.a, {0: g.a}, {}),
        (False, False, g.b, {0: g.b}, {}),
        (True, False, u2.args[0], {0: g.a}, {0: U.symbol}),
        (False, False, u2.args[0], {0: u2.args[0]}, {}),
        (True, False, u2, {0: g.a}, {0: U.symbol}),
        (False, False, u2, {0: u2}, {}),
        (True, False, v1, {0: g.b}, {0: V.symbol}),
        (False, True, v1, {0: g.b}, {}),
        (False, False, v1, {0: v1}, {}),
    ]


def test_ill_formed_or_unscoped_programs_are_rejected(g, engine):
    bad = [
        Program((PDef(1, 0, PVar(1)),)),  # not in scope
        Program((PDef(1, 0, PExists(1, PVar(0))),)),  # ∃ does not bind
        Program((PDef(1, 0, PVar(0), (0,)), ), 1),  # no root 1
        Program((PDef(2, 0, PVar(0), (0, 1)),)),  # wrong pbinds claim
        Program((PDef(1, 0, PCall(0, (0, 0), ())),)),  # call arity
        PConstr(PApp(B.symbol, ()), PVar(0), 0),  # x not bound before the constraint
        PCall(0, (), ()),  # a call without a table
    ]
    for p in bad:
        with pytest.raises(pm.PatternError, match="ill-formed"):
            pm.match(p, g.a, engine=engine)


# ------------------------------------------------------ the declarative checker

def test_checker_decides_recursion(g):
    loop = prog(PDef(1, 0, PCall(0, (0,), ())))
    assert not declarative.check(loop, {0: g.a}, g.a)  # no finite derivation
    left = prog(PDef(1, 0, PAlt(PCall(0, (0,), ()), PVar(0))))
    assert declarative.check(left, {0: g.a}, g.a)
    assert not declarative.check(left, {0: g.b}, g.a)
    uc = prog(PDef(1, 1, PAlt(PFunVar(0, (PCall(0, (0,), (0,)),)), PFunVar(0, (PVar(0),)))))
    n = g.apply(U, g.apply(U, g.apply(U, g.a)))
    for leaf in (g.a, n.args[0], n.args[0].args[0]):
        assert declarative.check(uc, {0: leaf}, n, {0: U.symbol})  # every solution
    assert not declarative.check(uc, {0: n}, n, {0: U.symbol})
    assert not declarative.check(uc, {0: g.a}, n, {0: V.symbol})
    # the reference enumerates exactly these, left to right (deepest first)
    sols = list(reference.solutions(uc, n))
    assert sols == [({0: g.a}, {0: U.symbol}), ({0: n.args[0].args[0]}, {0: U.symbol}),
                    ({0: n.args[0]}, {0: U.symbol})]


def test_checker_searches_witnesses(g):
    n = g.apply(B, g.a, g.b)
    assert declarative.check(PExists(5, PApp(B.symbol, (PVar(5), PVar(0)))), {0: g.b}, n)
    assert not declarative.check(PExists(5, PApp(B.symbol, (PVar(5), PVar(0)))), {0: g.a}, n)
    # the witness shadows: the outer 0 is ignored inside
    assert declarative.check(PExists(0, PApp(B.symbol, (PVar(0), PVar(1)))), {0: n, 1: g.b}, n)
    assert declarative.check(PExistsF(2, PFunVar(2, (PVar(0), PVar(1)))), {0: g.a, 1: g.b}, n)
    assert not declarative.check(PExistsF(2, PFunVar(2, (PVar(0),))), {0: g.a}, n)
    assert declarative.guard_holds(GTrue(), {})
