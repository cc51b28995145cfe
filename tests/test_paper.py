"""The paper's examples (Figures 1, 2, 3, 4 and 14), written as the paper
writes them (examples/paper_ops.py declares them), with hand-checked matches
on both engines. Every match is also checked against the declarative
relation."""
import pytest

import pypm_verified as pm
from paper_ops import (SQRT2, Add, Div, Erf, Gelu, GeluPat, Half, MatMul, MatMulEpilog, MMxyT,
                       Mul, Neg, P, Plus, Relu, Trans, UnaryChain, cublasMM_xyT_f32,
                       cublasMM_xyT_i8, cublasrule)
from pypm_verified import core
from pypm_verified.engines import declarative


def valid(m):
    if m is not None:
        prog = m.pattern.program if isinstance(m.pattern, pm.Pattern) \
            else core.as_program(m.pattern)
        assert declarative.check(prog, m.substitution, m.root, m.fsubstitution), m
    return m


# ------------------------------------------------------------------ Figure 1

def test_figure1_match_and_rule(engine):
    g = pm.Graph()
    a = g.input("a", shape=(4, 8), dtype=pm.f32)
    b = g.input("b", shape=(16, 8), dtype=pm.f32)
    c = g.input("c", shape=(4, 8), dtype=pm.i8)
    d = g.input("d", shape=(16, 8), dtype=pm.i8)
    f32 = MatMul(a, Trans(b))
    i8 = MatMul(c, Trans(d))
    mixed = MatMul(a, Trans(d))
    m = valid(pm.match(MMxyT, f32, engine=engine))
    assert m.bindings == {"x": a, "y": b} and m.functions == {}
    assert cublasrule.fire(m.values, g) is g.apply(cublasMM_xyT_f32, a, b)
    assert cublasrule.fire(valid(pm.match(MMxyT, i8, engine=engine)).values, g) is \
        g.apply(cublasMM_xyT_i8, c, d)
    # matches, but the rule's assertion fails: the rule does not fire
    m = valid(pm.match(MMxyT, mixed, engine=engine))
    assert m.bindings == {"x": a, "y": d} and cublasrule.fire(m.values, g) is None
    # rank 3: the pattern's guard fails
    e = g.input("e", shape=(2, 4, 8), dtype=pm.f32)
    assert pm.match(MMxyT, MatMul(e, Trans(b)), engine=engine) is None
    assert MMxyT.rules == [cublasrule]


def test_figure1_rewrite(engine):
    g = pm.Graph()
    a = g.input("a", shape=(4, 8), dtype=pm.f32)
    b = g.input("b", shape=(16, 8), dtype=pm.f32)
    c = g.input("c", shape=(4, 8), dtype=pm.i8)
    d = g.input("d", shape=(16, 8), dtype=pm.i8)
    e = g.input("e", shape=(2, 4, 8), dtype=pm.f32)
    out = Add(Add(MatMul(a, Trans(b)), MatMul(c, Trans(d))),
              Add(MatMul(a, Trans(d)), MatMul(e, Trans(b))))
    g.output(out)
    report = pm.rewrite(g, [MMxyT], engine=engine)
    assert report.firings == {"cublasrule": 2} and report.total == 2
    assert report.iterations == 2 and not report.cap_hit
    (new_out,) = g.outputs
    expected = Add(Add(cublasMM_xyT_f32(a, b), cublasMM_xyT_i8(c, d)),
                   Add(MatMul(a, Trans(d)), MatMul(e, Trans(b))))
    assert new_out is expected
    # a second run finds nothing to fire
    again = pm.rewrite(g, [MMxyT], engine=engine)
    assert again.total == 0 and again.iterations == 1


# ------------------------------------------------------------------ Figure 2

def test_figure2_alternate_gelu(engine):
    g = pm.Graph()
    a, b = g.input("a"), g.input("b")
    tail = Plus(1, Erf(Div(a, SQRT2)))
    by_div, by_mul = Mul(Div(a, 2), tail), Mul(Mul(a, 0.5), tail)
    for n in (by_div, by_mul):
        assert valid(pm.match(GeluPat, n, engine=engine)).bindings == {"x": a}
    # x must be the same node in Half(x) and in Div(x, √2)
    assert pm.match(GeluPat, Mul(Div(b, 2), tail), engine=engine) is None
    assert pm.match(GeluPat, Mul(Div(a, 3), tail), engine=engine) is None
    assert pm.match(GeluPat, Mul(Div(a, 2), Plus(1, Erf(Div(a, 1.41)))), engine=engine) is None
    assert GeluPat.program.defs[1].body == Half.core  # Half is called, not inlined


# ------------------------------------------------------------------ Figure 3

@pytest.mark.parametrize("length", [1, 2, 3, 4, 5])
def test_figure3_unary_chain(engine, length):
    g = pm.Graph()
    a = g.input("a")
    n = a
    for _ in range(length):
        n = Relu(n)
    m = valid(pm.match(UnaryChain, n, engine=engine))
    assert m.bindings == {"x": a} and m.functions == {"f": Relu}
    assert m.fsubstitution == {0: Relu.symbol}
    # under a different operator, the chain stops where the operator changes
    top = Neg(n)
    m = valid(pm.match(UnaryChain, top, engine=engine))
    assert m.bindings == {"x": n} and m.functions == {"f": Neg}
    # a chain over a chain: f is the outer operator, x the first other node
    m = valid(pm.match(UnaryChain, Neg(Neg(n)), engine=engine))
    assert m.bindings == {"x": n} and m.functions == {"f": Neg}


def test_figure3_non_chains(engine):
    g = pm.Graph()
    a, b = g.input("a"), g.input("b")
    assert pm.match(UnaryChain, a, engine=engine) is None
    assert pm.match(UnaryChain, Add(a, b), engine=engine) is None
    m = valid(pm.match(UnaryChain, Relu(Add(a, b)), engine=engine))
    assert m.bindings == {"x": Add(a, b)} and m.functions == {"f": Relu}


# ------------------------------------------------------------------ Figure 4

def test_figure4_locals_and_constraints(engine):
    assert P.term_params == ("x",) and P.op_params == ("f", "g")
    assert P.definition.pbinds == (0,) and P.definition.pfbinds == ()
    gr = pm.Graph()
    a, b = gr.input("a"), gr.input("b")
    # x is bound to the root, f and g to the operators of the tree
    root = Relu(Add(Relu(a), b))
    m = valid(pm.match(P, root, engine=engine))
    assert m.bindings == {"x": root} and m.functions == {"f": Relu, "g": Add}
    m = valid(pm.match(P, a, engine=engine))
    assert m.bindings == {"x": a} and m.functions == {}
    m = valid(pm.match(P, Add(a, b), engine=engine))
    assert m.bindings == {"x": Add(a, b)} and m.functions == {"g": Add}
    # one unary operator only: under Relu, Neg(a) is a leaf (third alternate)
    m = valid(pm.match(P, Relu(Neg(a)), engine=engine))
    assert m.bindings == {"x": Relu(Neg(a))} and m.functions == {"f": Relu}
    # and one binary operator: under Add, Mul(a, b) is a leaf
    t = Add(Mul(a, b), Relu(Add(a, Relu(b))))
    m = valid(pm.match(P, t, engine=engine))
    assert m.bindings == {"x": t} and m.functions == {"f": Relu, "g": Add}


# ----------------------------------------------------------------- Figure 14

def test_figure14_matmul_epilog(engine):
    g = pm.Graph()
    a, b = g.input("a"), g.input("b")
    mm = MatMul(a, b)
    for n in (mm, Relu(mm), Gelu(Relu(mm)), Relu(Gelu(Relu(Gelu(mm))))):
        m = valid(pm.match(MatMulEpilog, n, engine=engine))
        assert m.bindings == {"x": n, "a": a, "b": b} and m.functions == {}
    # a unary operator that is not pointwise breaks the chain
    assert pm.match(MatMulEpilog, Relu(Neg(mm)), engine=engine) is None
    assert pm.match(MatMulEpilog, Neg(Relu(mm)), engine=engine) is None
    # so does a binary one, or a chain over something else
    assert pm.match(MatMulEpilog, Relu(Add(mm, a)), engine=engine) is None
    assert pm.match(MatMulEpilog, Relu(Trans(a)), engine=engine) is None
    # non-linear: PwChain binds a and b of the one MatMul at the bottom
    m = valid(pm.match(MatMulEpilog, Relu(MatMul(a, a)), engine=engine))
    assert m.bindings == {"x": Relu(MatMul(a, a)), "a": a, "b": a}


def test_figure14_as_printed_passes_a_pattern_to_a_call():
    """The printed MatMulEpilog calls PwSubgraph(MatMul(a, b)); calls take
    variables (μP(x)[y]), so the frontend rejects it."""
    @pm.pattern
    def PwSubgraph(x):
        return x

    @pm.pattern
    def MatMulEpilogPrinted(x):
        a = pm.var()
        b = pm.var()
        x <= PwSubgraph(MatMul(a, b))
        return x
    with pytest.raises(pm.PatternError, match="pattern calls take variables"):
        MatMulEpilogPrinted.core


# ----------------------------------------------------------- non-termination

@pm.pattern
def Loop(x):
    return Loop(x)


@pm.pattern
def LeftRec(x):
    return LeftRec(x)


@pm.pattern
def LeftRec(x):  # noqa: F811
    return x


@pm.pattern
def RightRec(x):
    return x


@pm.pattern
def RightRec(x):  # noqa: F811
    return RightRec(x)


@pm.pattern
def SelfConstr(x):
    x <= SelfConstr(x)
    return x


def test_non_terminating_recursion(engine):
    """Loop(x) = Loop(x) has no (finite) derivation: its root-operator index
    is empty, so both engines answer "no match" whatever the fuel (a proved
    no: RootIndex.root_index_sound). LeftRec's root may be anything (its
    alternate ``x``), and the machine, trying the recursion first, never
    finishes: out of fuel (tests/test_entry_points.py has more cases)."""
    g = pm.Graph()
    n = Relu(g.input("a"))
    for fuel in (1, 5000, None):
        assert pm.match(Loop, n, engine=engine, fuel=fuel) is None
    assert pm.match_all([Loop], g, engine=engine, fuel=5000) == []
    with pytest.raises(pm.OutOfFuel):
        pm.match(LeftRec, n, engine=engine, fuel=5000)
    with pytest.raises(pm.OutOfFuel):
        pm.match_all([LeftRec], g, engine=engine, fuel=5000)
    # the first alternate succeeds before the recursion is needed
    assert valid(pm.match(RightRec, n, engine=engine, fuel=5000)).bindings == {"x": n}


def test_non_terminating_recursion_with_the_default_fuel(lib):
    """x ; (SelfConstr(x) ≈ x) unfolds forever in constant memory."""
    g = pm.Graph()
    n = Relu(g.input("a"))
    assert pm.match(Loop, n, engine="verified") is None  # the index: no step taken
    with pytest.raises(pm.OutOfFuel):  # 2^26 steps, quickly spent by the library
        pm.match(SelfConstr, n, engine="verified")
