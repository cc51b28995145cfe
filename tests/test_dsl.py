"""Lowering of the DSL to exact core terms."""
import os

import pytest

import pypm_verified as pm
from paper_ops import Div, Half, MatMul, MMxyT, Mul, Relu, Trans
from pypm_verified.core import symbols
from pypm_verified import core
from pypm_verified.core import (
    EAdd, EAttr, EConst, EFAttr, EMul, ESub, GAnd, GEq, GLt, GNot, GOr, GTrue, PAlt, PApp,
    PCall, PConstr, PDef, PExists, PExistsF, PFunVar, PGuard, PVar, DTYPE, OPCLASS, RANK)


@pm.op
def Split(x):
    return 2


@pm.op
def Zero():
    return 1


def c(v):
    """The constant-leaf pattern of ``v``."""
    return PApp(symbols.const_symbol(v), ())


MM, TR, DIV, MUL = MatMul.symbol, Trans.symbol, Div.symbol, Mul.symbol


@pm.pattern
def UsesLater(x):
    return Relu(DefinedLater(x))


@pm.pattern
def DefinedLater(x):
    return Trans(x)


def test_op_declaration():
    assert (MatMul.name, MatMul.arity, MatMul.n_outputs, MatMul.op_class) == ("MatMul", 2, 1, None)
    assert Relu.op_class == "unary_pointwise" and Relu.op_class is pm.opclass("unary_pointwise")
    assert isinstance(Relu.op_class, pm.OpClass) and Relu.op_class.code >= 1
    assert pm.opclass("some_new_class").code != Relu.op_class.code
    assert Split.n_outputs == 2
    assert Zero.arity == 0
    assert repr(MatMul) == "<op MatMul/2>"
    assert symbols.lookup(MatMul.symbol) is MatMul


def test_op_errors():
    with pytest.raises(pm.PatternError, match="return its output arity"):
        @pm.op
        def NoArity(x):
            return None
    with pytest.raises(pm.PatternError, match="plain positional"):
        @pm.op
        def Variadic(*xs):
            return 1
    with pytest.raises(pm.PatternError, match="takes 2 argument"):
        MatMul(1)
    with pytest.raises(pm.PatternError, match="output arity failed: TypeError"):
        @pm.op
        def UsesArgs(x):
            return x + 1
    with pytest.raises(pm.PatternError, match="op_class must be a string"):
        pm.op(op_class=3)(lambda x: 1)


def test_mmxyt_lowering():
    g = GAnd(GEq(EAttr(0, RANK), EConst(2)), GEq(EAttr(1, RANK), EConst(2)))
    assert MMxyT.core == PGuard(PApp(MM, (PVar(0), PApp(TR, (PVar(1),)))), g)
    assert MMxyT.params == ("x", "y")
    assert MMxyT.name == "MMxyT"


def test_half_alternates():
    assert len(Half.definitions) == 2
    assert Half.alternates == (PApp(DIV, (PVar(0), c(2))), PApp(MUL, (PVar(0), c(0.5))))
    assert Half.core == PAlt(*Half.alternates)


def test_same_object_for_every_definition():
    @pm.pattern
    def P(x):
        return Trans(x)
    first = P

    @pm.pattern
    def P(x):  # noqa: F811
        return Relu(x)

    @pm.pattern
    def P(x):  # noqa: F811
        return x
    assert P is first
    # three alternates, right-nested in definition order
    assert P.core == PAlt(PApp(TR, (PVar(0),)), PAlt(PApp(Relu.symbol, (PVar(0),)), PVar(0)))


def test_redefinition_by_reexecution_replaces():
    def make(k):
        @pm.pattern
        def Again(x):
            assert x.rank == k
            return Trans(x)
        return Again
    p1 = make(1)
    p2 = make(2)
    assert p1 is p2 and len(p2.definitions) == 1
    assert p2.core == PGuard(PApp(TR, (PVar(0),)), GEq(EAttr(0, RANK), EConst(2)))


def test_forward_reference_lowered_lazily():
    assert UsesLater.core == PApp(Relu.symbol, (PCall(1, (0,), ()),))
    assert UsesLater.program.defs[1].body == PApp(TR, (PVar(0),))


def test_return_variable_and_constants():
    @pm.pattern
    def Id(x):
        return x

    @pm.pattern
    def Consts(x):
        return MatMul(Div(x, True), Mul(None, "s"))
    assert Id.core == PVar(0)
    assert Consts.core == PApp(MM, (PApp(DIV, (PVar(0), c(True))), PApp(MUL, (c(None), c("s")))))
    assert c(2) == c(2.0) and c(True) != c(1) and c(0) != c(False)


def test_nullary_op():
    @pm.pattern
    def Z(x):
        return MatMul(x, Zero())
    assert Z.core == PApp(MM, (PVar(0), PApp(Zero.symbol, ())))


def test_calls_pass_variables_in_signature_order():
    @pm.pattern
    def Inner(a, b):
        assert a.dtype == pm.f32
        return MatMul(a, Trans(b))

    @pm.pattern
    def Outer(x, y):
        return Relu(Inner(y, x))

    @pm.pattern
    def Diag(x):
        return Inner(x, x)

    inner = PGuard(PApp(MM, (PVar(0), PApp(TR, (PVar(1),)))),
                   GEq(EAttr(0, DTYPE), EConst(pm.f32.code)))
    assert Inner.core == inner
    assert Outer.core == PApp(Relu.symbol, (PCall(1, (1, 0), ()),))
    assert Outer.program.defs[1] == PDef(2, 0, inner, (0, 1), ())
    assert Diag.core == PCall(1, (0, 0), ())


def test_call_keyword_arguments_and_alternates():
    @pm.pattern
    def Outer(x):
        return Trans(Half(x=x))
    assert Outer.core == PApp(TR, (PCall(1, (0,), ()),))
    assert Outer.program.defs[1].body == Half.core


def test_operator_parameters():
    """A parameter applied to arguments is an operator variable; term and
    operator parameters are numbered separately in signature order."""
    @pm.pattern
    def UnaryChain(x, f):
        return f(UnaryChain(x, f))

    @pm.pattern
    def UnaryChain(x, f):  # noqa: F811
        return f(x)

    @pm.pattern
    def Mixed(g, x, f, y):
        assert g.op_class == pm.opclass("unary_pointwise")
        return g(MatMul(x, UnaryChain(y, f)))

    assert UnaryChain.term_params == ("x",) and UnaryChain.op_params == ("f",)
    assert UnaryChain.definition == PDef(1, 1, PAlt(PFunVar(0, (PCall(0, (0,), (0,)),)),
                                                    PFunVar(0, (PVar(0),))), (0,), (0,))
    # f is only passed on: it takes UnaryChain's kind
    assert Mixed.term_params == ("x", "y") and Mixed.op_params == ("g", "f")
    unary = EConst(pm.opclass("unary_pointwise").code)
    assert Mixed.core == PGuard(PFunVar(0, (PApp(MM, (PVar(0), PCall(1, (1,), (1,)))),)),
                                GEq(EFAttr(0, OPCLASS), unary))
    assert Mixed.var_names == {0: "x", 1: "y"}


def test_locals_constraints_and_lowering_order():
    """return, then each `x <= q` in statement order, then the guards, all
    under ∃ of the alternate's locals (first declared outermost)."""
    @pm.pattern
    def PwChain(x, a, b):
        UnaryOp = pm.Op(1, 1)
        assert UnaryOp.op_class == pm.opclass("unary_pointwise")
        y = pm.var()
        x <= UnaryOp(PwChain(y, a, b))
        return x

    @pm.pattern
    def PwChain(x, a, b):  # noqa: F811
        x <= MatMul(a, b)
        return x

    unary = EConst(pm.opclass("unary_pointwise").code)
    alt1 = PExistsF(0, PExists(3, PGuard(
        PConstr(PVar(0), PFunVar(0, (PCall(0, (3, 1, 2), ()),)), 0),
        GEq(EFAttr(0, OPCLASS), unary))))
    alt2 = PConstr(PVar(0), PApp(MM, (PVar(1), PVar(2))), 0)
    assert PwChain.alternates == (alt1, alt2)
    assert PwChain.definition == PDef(3, 0, PAlt(alt1, alt2), (0, 1, 2), ())
    assert core.wf_defs(PwChain.program.defs)

    @pm.pattern
    def Two(x, z):
        p = pm.var()
        q = pm.var()
        x <= Trans(p)
        p <= Relu(q)
        assert q.rank == 1
        return MatMul(x, z)
    assert Two.core == PExists(2, PExists(3, PGuard(
        PConstr(PConstr(PApp(MM, (PVar(0), PVar(1))), PApp(TR, (PVar(2),)), 0),
                PApp(Relu.symbol, (PVar(3),)), 2),
        GEq(EAttr(3, RANK), EConst(1)))))


def test_locals_are_numbered_per_definition():
    @pm.pattern
    def Loc(x):
        a = pm.var()
        x <= Trans(a)
        return x

    @pm.pattern
    def Loc(x):  # noqa: F811
        a = pm.var()
        F = pm.Op(2, 1)
        x <= F(a, a)
        return x
    assert Loc.alternates == (
        PExists(1, PConstr(PVar(0), PApp(TR, (PVar(1),)), 0)),
        PExists(2, PExistsF(0, PConstr(PVar(0), PFunVar(0, (PVar(2), PVar(2))), 0))))


def test_le_in_assert_stays_a_comparison():
    @pm.pattern
    def Le(x):
        assert x.rank <= 2
        x.rank <= 3  # a statement that is not a constraint: evaluated, discarded
        return Trans(x)
    assert Le.core == PGuard(PApp(TR, (PVar(0),)), GNot(GLt(EConst(2), EAttr(0, RANK))))


def test_comparison_operators():
    @pm.pattern
    def Cmp(x, y):
        assert x.rank == 1
        assert x.rank != 2
        assert x.rank < 3
        assert x.rank <= 4
        assert x.rank > 5
        assert x.rank >= 6
        return MatMul(x, y)
    r = EAttr(0, RANK)
    gs = [GEq(r, EConst(1)), GNot(GEq(r, EConst(2))), GLt(r, EConst(3)),
          GNot(GLt(EConst(4), r)), GLt(EConst(5), r), GNot(GLt(r, EConst(6)))]
    expected = gs[-1]
    for g in reversed(gs[:-1]):
        expected = GAnd(g, expected)
    assert Cmp.core == PGuard(PApp(MM, (PVar(0), PVar(1))), expected)


def test_reflected_comparisons_and_arithmetic():
    @pm.pattern
    def Arith(x, y):
        assert 2 < x.shape[0] + 1
        assert x.shape[-1] * 2 - y.shape[1] == 3 - y.rank
        assert -x.rank == x.rank * -1
        return MatMul(x, y)
    g1 = GLt(EConst(2), EAdd(EAttr(0, 100), EConst(1)))
    g2 = GEq(ESub(EMul(EAttr(0, 200), EConst(2)), EAttr(1, 101)), ESub(EConst(3), EAttr(1, RANK)))
    g3 = GEq(ESub(EConst(0), EAttr(0, RANK)), EMul(EAttr(0, RANK), EConst(-1)))
    assert Arith.core == PGuard(PApp(MM, (PVar(0), PVar(1))), GAnd(g1, GAnd(g2, g3)))


def test_boolean_connectives_and_chains():
    @pm.pattern
    def Bool(x, y):
        assert (x.dtype == pm.f32 and y.dtype == pm.f32) or (x.dtype == pm.i8 and
                                                           not y.dtype == pm.i8)
        assert 1 <= x.rank < 4
        return MatMul(x, y)
    dt = lambda v, d: GEq(EAttr(v, DTYPE), EConst(d.code))  # noqa: E731
    g1 = GOr(GAnd(dt(0, pm.f32), dt(1, pm.f32)), GAnd(dt(0, pm.i8), GNot(dt(1, pm.i8))))
    g2 = GAnd(GNot(GLt(EAttr(0, RANK), EConst(1))), GLt(EAttr(0, RANK), EConst(4)))
    assert Bool.core == PGuard(PApp(MM, (PVar(0), PVar(1))), GAnd(g1, g2))


def test_shape_aliases_and_tuple_comparison():
    @pm.pattern
    def Shp(x):
        assert x.rank == x.shape.rank
        assert x.elType == x.dtype
        assert x.shape == (4, None, 8)
        assert x.shape != (1,)
        return Trans(x)
    s = lambda i: EAttr(0, 100 + i)  # noqa: E731
    g3 = GAnd(GEq(EAttr(0, RANK), EConst(3)), GAnd(GEq(s(0), EConst(4)), GEq(s(2), EConst(8))))
    g4 = GNot(GAnd(GEq(EAttr(0, RANK), EConst(1)), GEq(s(0), EConst(1))))
    expected = GAnd(GEq(EAttr(0, RANK), EAttr(0, RANK)),
                    GAnd(GEq(EAttr(0, DTYPE), EAttr(0, DTYPE)), GAnd(g3, g4)))
    assert Shp.core == PGuard(PApp(TR, (PVar(0),)), expected)


def test_concrete_python_values_keep_python_semantics():
    flag, k = True, 3

    @pm.pattern
    def Conc(x):
        assert flag
        assert flag and x.rank == k
        assert not flag or x.rank == 1
        assert x.rank == 2 and flag
        assert 1 < 2 < 3
        return Trans(x)
    r = EAttr(0, RANK)
    assert Conc.core == PGuard(PApp(TR, (PVar(0),)),
                               GAnd(GEq(r, EConst(3)), GAnd(GEq(r, EConst(1)),
                                                            GEq(r, EConst(2)))))

    @pm.pattern
    def Never(x):
        assert x.rank == 2 and False
        return Trans(x)
    assert Never.core == PGuard(PApp(TR, (PVar(0),)), GNot(GTrue()))


def test_closure_and_globals_are_live():
    box = {"k": 1}

    @pm.pattern
    def Live(x):
        assert x.rank == box["k"]
        return Trans(x)
    box["k"] = 5
    assert Live.core == PGuard(PApp(TR, (PVar(0),)), GEq(EAttr(0, RANK), EConst(5)))


def test_dsl_reprs():
    seen = {}

    @pm.pattern
    def Show(x, y):
        seen["term"] = repr(MatMul(x, Trans(y)))
        seen["guard"] = repr(x.shape[-1] + 1 == y.rank)
        return x
    Show.core
    assert seen == {"term": "MatMul(x, Trans(y))", "guard": "(x.shape[-1] + 1) == y.rank"}
    assert repr(Show) == "<pattern Show(x, y), 1 alternate(s)>"


def test_guard_operators_outside_bodies():
    @pm.pattern
    def Ops(x):
        assert (x.rank == 1) | ~(x.rank == 2) & (x.dtype == pm.f16)
        return Trans(x)
    r = EAttr(0, RANK)
    assert Ops.core == PGuard(PApp(TR, (PVar(0),)), GOr(
        GEq(r, EConst(1)), GAnd(GNot(GEq(r, EConst(2))), GEq(EAttr(0, DTYPE), EConst(2)))))


def test_op_call_on_nodes_builds_graph():
    g = pm.Graph()
    a = g.input("a")
    n = MatMul(a, Trans(a), shape=(2, 2))
    assert n is g.apply(MatMul, a, g.apply(Trans, a), shape=(2, 2))


@pm.pattern
def Even(x):
    return x


@pm.pattern
def Even(x):  # noqa: F811
    return Relu(Odd(x))


@pm.pattern
def Odd(x):
    return Relu(Even(x))


def test_mutual_recursion():
    assert Even.program.defs == (
        PDef(1, 0, PAlt(PVar(0), PApp(Relu.symbol, (PCall(1, (0,), ()),))), (0,), ()),
        PDef(1, 0, PApp(Relu.symbol, (PCall(0, (0,), ()),)), (0,), ()))
    # each pattern is the root (index 0) of its own program
    assert Odd.core == PApp(Relu.symbol, (PCall(1, (0,), ()),))


def test_local_operator_passed_to_a_call():
    @pm.pattern
    def Chain(x, f):
        return f(Chain(x, f))

    @pm.pattern
    def Chain(x, f):  # noqa: F811
        return f(x)

    @pm.pattern
    def LocalOp(x, r):
        G = pm.Op(1, 1)
        y = pm.var()
        r <= G(y)
        y <= Chain(x, G)
        return r
    assert LocalOp.term_params == ("x", "r") and LocalOp.op_params == ()
    assert LocalOp.core == PExistsF(0, PExists(2, PConstr(
        PConstr(PVar(1), PFunVar(0, (PVar(2),)), 1), PCall(1, (0,), (0,)), 2)))
    g = pm.Graph()
    a = g.input("a")
    t = Trans(Trans(Trans(a)))
    m = pm.match(LocalOp, t, engine="reference")
    assert m.bindings == {"x": a, "r": t} and m.functions == {}


# ------------------------------------------------- patterns without source

SOURCELESS = '''
import pypm_verified as pm

@pm.op
def MatMul(x, y): return 1
@pm.op
def Trans(x): return 1

@pm.pattern
def MMxyT(x, y):
    assert x.shape.rank == 2
    assert not y.shape.rank == 3
    assert (x.rank == 2) & ((y.dtype == pm.f32) | (y.dtype == pm.f16))
    yt = pm.var()
    yt <= Trans(y)
    return MatMul(x, yt)

@pm.pattern
def UsesAnd(x):
    assert x.rank == 2 and x.rank == 3
    return Trans(x)
'''


def _sourceless_module():
    """The patterns above compiled from a string: inspect.getsource fails, as
    in the REPL or ``python - < file``."""
    ns = {"__name__": "sourceless_patterns"}
    exec(compile(SOURCELESS, "<stdin>", "exec"), ns)  # noqa: S102
    return ns


@pytest.mark.parametrize("engine", ["verified", "reference"])
def test_sourceless_pattern_traced(engine, request):
    if engine == "verified":
        request.getfixturevalue("lib")  # skips without the library, fails under PYPM_REQUIRE_LIB
    ns = _sourceless_module()
    MatMul, Trans, MMxyT = ns["MatMul"], ns["Trans"], ns["MMxyT"]
    g = pm.Graph()
    a = g.input("a", shape=(4, 8), dtype=pm.f32)
    b = g.input("b", shape=(16, 8), dtype=pm.f32)
    c = g.input("c", shape=(16, 8), dtype=pm.i8)
    m = pm.match(MMxyT, g.apply(MatMul, a, g.apply(Trans, b)), engine=engine)
    assert m.bindings == {"x": a, "y": b}
    # the `|` guard on y's dtype refuses i8; `assert not` refuses rank 3
    assert pm.match(MMxyT, g.apply(MatMul, a, g.apply(Trans, c)), engine=engine) is None
    d = g.input("d", shape=(2, 2, 2), dtype=pm.f32)
    assert pm.match(MMxyT, g.apply(MatMul, a, g.apply(Trans, d)), engine=engine) is None
    # every guard and the constraint were recorded (5 comparisons, one ¬, one ≈)
    body = MMxyT.alternates[0]
    guards = [q.g for q in core.walk(body) if isinstance(q, core.PGuard)]

    def leaves(g):
        if isinstance(g, (core.GAnd, core.GOr)):
            return leaves(g.g1) + leaves(g.g2)
        return leaves(g.g) + ["not"] if isinstance(g, core.GNot) else [type(g).__name__]
    atoms = [a for g in guards for a in leaves(g)]
    assert atoms.count("GEq") == 5 and "not" in atoms
    assert sum(isinstance(q, core.PConstr) for q in core.walk(body)) == 1


def test_sourceless_pattern_refuses_and_with_the_construct_named():
    ns = _sourceless_module()
    g = pm.Graph()
    with pytest.raises(pm.PatternError, match=r"<stdin>:\d+.*`and`/`or`.*define the pattern "
                                              r"in a file"):
        pm.match(ns["UsesAnd"], g.input("a", shape=(2, 2)), engine="reference")


def test_pattern_from_standard_input(tmp_path):
    """``python - < script`` defines and matches a pattern."""
    import subprocess
    import sys
    script = SOURCELESS + '''
g = pm.Graph()
a = g.input("a", shape=(4, 8), dtype=pm.f32)
b = g.input("b", shape=(16, 8), dtype=pm.f32)
m = pm.match(MMxyT, g.apply(MatMul, a, g.apply(Trans, b)), engine="reference")
print(sorted(m.bindings))
'''
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-"], input=script, capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['x', 'y']"
