"""Matching semantics, on both engines (``engine`` fixture, see conftest)."""
import pytest

import pypm_verified as pm
from paper_ops import Add, Div, Half, MatMul, MMxyT, Mul, Relu, Trans
from pypm_verified import core
from pypm_verified.engines import declarative, reference
from pypm_verified.core import EAttr, EConst, GEq, PAlt, PApp, PGuard, PVar


@pm.pattern
def Square(x):
    return Mul(x, x)


def valid(m):
    """Every returned match satisfies the declarative relation."""
    prog = m.pattern.program if isinstance(m.pattern, pm.Pattern) else core.as_program(m.pattern)
    assert declarative.check(prog, m.substitution, m.root, m.fsubstitution)
    return m


def test_readme_example(engine):
    g = pm.Graph()
    a = g.input("a", shape=(4, 8), dtype=pm.f32)
    b = g.input("b", shape=(16, 8), dtype=pm.f32)
    t = g.apply(MatMul, a, g.apply(Trans, b))
    m = valid(pm.match(MMxyT, t, engine=engine))
    assert m.bindings == {"x": a, "y": b}
    assert m.pattern is MMxyT and m.root is t and m["y"] is b
    assert m.substitution == {0: a, 1: b}
    assert repr(m) == "<Match MMxyT at %3: x=%0, y=%1>"
    # rank-3 operand: the guard fails
    c = g.input("c", shape=(2, 4, 8))
    assert pm.match(MMxyT, g.apply(MatMul, c, g.apply(Trans, b)), engine=engine) is None
    # structure mismatch
    assert pm.match(MMxyT, g.apply(MatMul, a, b), engine=engine) is None
    assert pm.match(MMxyT, a, engine=engine) is None


def test_half_alternates(engine):
    g = pm.Graph()
    x = g.input("x")
    assert valid(pm.match(Half, g.apply(Div, x, 2), engine=engine)).bindings == {"x": x}
    assert valid(pm.match(Half, g.apply(Div, x, 2.0), engine=engine)).bindings == {"x": x}
    assert valid(pm.match(Half, g.apply(Mul, x, 0.5), engine=engine)).bindings == {"x": x}
    assert pm.match(Half, g.apply(Mul, x, 2), engine=engine) is None
    assert pm.match(Half, g.apply(Div, x, True), engine=engine) is None
    assert pm.match(Half, g.apply(Div, 2, x), engine=engine) is None


def test_nonlinear(engine):
    g = pm.Graph()
    x, y = g.input("x"), g.input("y")
    assert valid(pm.match(Square, g.apply(Mul, x, x), engine=engine)).bindings == {"x": x}
    assert pm.match(Square, g.apply(Mul, x, y), engine=engine) is None
    # hash-consing makes structurally equal subgraphs the same node
    assert pm.match(Square, g.apply(Mul, g.apply(Relu, x), g.apply(Relu, x)),
                    engine=engine) is not None


def test_left_eager_alternates(engine):
    """f(x, y) ‖ f(y, x) on f(c1, c2) yields {x↦c1, y↦c2} (paper §3.1.2)."""
    @pm.pattern
    def Either(x, y):
        return Add(x, y)

    @pm.pattern
    def Either(x, y):  # noqa: F811
        return Add(y, x)
    g = pm.Graph()
    c1, c2 = g.input("c1"), g.input("c2")
    m = valid(pm.match(Either, g.apply(Add, c1, c2), engine=engine))
    assert m.bindings == {"x": c1, "y": c2}


def test_backtracking_into_later_alternate(engine):
    """The first alternate of Half matches the inner node but the guard fails;
    the match backtracks into the other alternate of the outer position."""
    @pm.pattern
    def Tricky(x, y):
        assert x.dtype == pm.f16
        return Add(Half(x), y)

    @pm.pattern
    def Pick(x, y):
        return Add(x, y)

    @pm.pattern
    def Pick(x, y):  # noqa: F811
        return Add(y, x)

    @pm.pattern
    def Later(x, y):
        assert y.rank == 1
        return Relu(Pick(x, y))
    g = pm.Graph()
    a = g.input("a", dtype=pm.f32)
    b = g.input("b", shape=(3,))
    assert pm.match(Tricky, g.apply(Add, g.apply(Div, a, 2), b), engine=engine) is None
    h = g.input("h", dtype=pm.f16)
    m = valid(pm.match(Tricky, g.apply(Add, g.apply(Mul, h, 0.5), b), engine=engine))
    assert m.bindings == {"x": h, "y": b}
    # guard fails with the first alternate's bindings, holds with the second's
    m = valid(pm.match(Later, g.apply(Relu, g.apply(Add, b, a)), engine=engine))
    assert m.bindings == {"x": a, "y": b}


def test_guard_semantics(engine):
    @pm.pattern
    def IsF32(x):
        assert x.dtype == pm.f32
        return Relu(x)

    @pm.pattern
    def LastIs8(x):
        assert x.shape[-1] == 8
        return Relu(x)

    @pm.pattern
    def FirstNot4(x):
        assert x.shape[0] != 4
        return Relu(x)

    @pm.pattern
    def NotF32(x):
        assert not x.dtype == pm.f32
        return Relu(x)

    @pm.pattern
    def RankOr(x):
        assert x.rank == 1 or x.dtype == pm.i8
        return Relu(x)

    @pm.pattern
    def Arith(x, y):
        assert x.shape[0] * y.shape[-1] - 1 == x.shape[1] + 2
        return Add(x, y)

    g = pm.Graph()
    f = g.input("f", shape=(2, 8), dtype=pm.f32)
    h = g.input("h", shape=(4, 3), dtype=pm.f16)
    u = g.input("u")  # nothing known
    part = g.input("p", shape=(None, 8))  # rank known, shape[0] unknown

    def ok(p, n):
        m = pm.match(p, n, engine=engine)
        if m is not None:
            valid(m)
        return m is not None
    R = lambda n: g.apply(Relu, n)  # noqa: E731
    assert ok(IsF32, R(f)) and not ok(IsF32, R(h)) and not ok(IsF32, R(u))
    assert ok(LastIs8, R(f)) and ok(LastIs8, R(part)) and not ok(LastIs8, R(h))
    assert not ok(LastIs8, R(u))  # unknown shape fails
    assert ok(FirstNot4, R(f)) and not ok(FirstNot4, R(h))
    assert not ok(FirstNot4, R(u)) and not ok(FirstNot4, R(part))  # != on unknown fails
    assert ok(NotF32, R(h)) and not ok(NotF32, R(f)) and not ok(NotF32, R(u))
    assert ok(RankOr, R(g.input("v", shape=(5,), dtype=pm.u8))) and not ok(RankOr, R(f))
    assert ok(RankOr, R(g.input("v8", shape=(2, 2), dtype=pm.i8)))
    assert not ok(RankOr, R(u))  # unknown ∨ unknown is unknown
    # strict: true ∨ unknown is unknown too, so the guard does not hold
    assert not ok(RankOr, R(g.input("v1", shape=(5,))))
    # 2 * 3 - 1 == 3 + 2 ; unknown operand makes the whole guard unknown
    w = g.input("w", shape=(2, 3))
    assert ok(Arith, g.apply(Add, w, g.input("z", shape=(7, 3))))
    assert not ok(Arith, g.apply(Add, w, g.input("z2", shape=(7, 4))))
    assert not ok(Arith, g.apply(Add, w, u))


def test_core_pattern_directly(engine):
    g = pm.Graph()
    x = g.input("x", shape=(3,))
    n = g.apply(Relu, x)
    p = PGuard(PApp(Relu.symbol, (PVar(4),)), GEq(EAttr(4, 0), EConst(1)))
    m = valid(pm.match(p, n, engine=engine))
    assert m.bindings == {4: x} and m.pattern is p
    with pytest.raises(pm.PatternError, match="ill-formed"):
        pm.match(PGuard(PVar(0), GEq(EAttr(1, 0), EConst(1))), n, engine=engine)


def test_match_all_order(engine):
    g = pm.Graph()
    a = g.input("a", shape=(4, 8))
    b = g.input("b", shape=(16, 8))
    t = g.apply(MatMul, a, g.apply(Trans, b))  # %3
    h1 = g.apply(Div, t, 2)                    # %5 (const 2 is %4)
    sq = g.apply(Mul, h1, h1)                  # %6
    h2 = g.apply(Mul, a, 0.5)                  # %8

    @pm.pattern
    def Any(x):
        return Mul(x, x)

    @pm.pattern
    def Any(x):  # noqa: F811
        return MatMul(x, x)

    @pm.pattern
    def Any(x):  # noqa: F811
        return Div(x, 2)
    found = pm.match_all([Square, MMxyT, Half, Any], g, engine=engine)
    got = [(p.name, root.id, m.bindings) for p, root, m in found]
    assert got == [
        ("MMxyT", t.id, {"x": a, "y": b}),
        ("Half", h1.id, {"x": t}),
        ("Any", h1.id, {"x": t}),
        ("Square", sq.id, {"x": h1}),
        ("Any", sq.id, {"x": h1}),
        ("Half", h2.id, {"x": a}),
    ]
    for _, root, m in found:
        assert m.root is root
        valid(m)
    assert pm.match_all([], g, engine=engine) == []
    with pytest.raises(TypeError):
        pm.match_all(Half, g, engine=engine)


def test_out_of_fuel(engine):
    # 2^12 combinations of alternates, each failing the guard
    @pm.pattern
    def Bit(x):
        return Relu(x)

    @pm.pattern
    def Bit(x):  # noqa: F811
        return x

    @pm.op
    def Wide(a, b, c, d, e, f, g, h, i, j, k, l):  # noqa: E741
        return 1

    @pm.pattern
    def Explode(a, b, c, d, e, f, g, h, i, j, k, l):  # noqa: E741
        assert a.rank == 99
        return Wide(Bit(a), Bit(b), Bit(c), Bit(d), Bit(e), Bit(f),
                    Bit(g), Bit(h), Bit(i), Bit(j), Bit(k), Bit(l))
    g = pm.Graph()
    x = g.input("x", shape=(1,))
    r = g.apply(Relu, x)
    n = g.apply(Wide, *([r] * 12))
    with pytest.raises(pm.OutOfFuel):
        pm.match(Explode, n, engine=engine, fuel=1000)
    with pytest.raises(pm.OutOfFuel):
        pm.match_all([Explode], g, engine=engine, fuel=1000)
    assert pm.match(Explode, n, engine=engine) is None  # the default fuel suffices
    assert not issubclass(pm.OutOfFuel, pm.PatternError)


def test_argument_errors():
    g = pm.Graph()
    with pytest.raises(ValueError, match="unknown engine"):
        pm.match(Half, g.input("a"), engine="fast")
    with pytest.raises(TypeError, match="graph node"):
        pm.match(Half, 3, engine="reference")
    with pytest.raises(TypeError, match="pattern"):
        pm.match("Half", g.input("a"), engine="reference")


def test_reference_solutions_enumerates_in_order():
    g = pm.Graph()
    c1, c2 = g.input("c1"), g.input("c2")
    n = g.apply(Add, c1, c2)
    p = PAlt(PApp(Add.symbol, (PVar(0), PVar(1))),
             PAlt(PApp(Add.symbol, (PVar(1), PVar(0))), PVar(0)))
    sols = list(reference.solutions(p, n))
    assert sols == [({0: c1, 1: c2}, {}), ({1: c1, 0: c2}, {}), ({0: n}, {})]
    assert list(reference.solutions(PVar(0), n, {0: c1})) == []
    assert list(reference.solutions(PVar(0), n, {0: n})) == [({0: n}, {})]
    for theta, phi in sols:
        assert declarative.check(p, theta, n, phi)
