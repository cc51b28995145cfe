"""User errors raise PatternError naming the pattern, file:line and problem."""
import os

import pytest

import pypm_verified as pm
from conftest import line_of


@pm.op
def F(x):
    return 1


@pm.op
def G(x, y):
    return 1


HERE = os.path.abspath(__file__)


def expect(pattern_fn, name, marker, *problem):
    """Lowering ``pattern_fn()`` fails naming ``name``, the line marked
    ``MARK-<marker>`` and every ``problem`` fragment."""
    with pytest.raises(pm.PatternError) as ei:
        p = pattern_fn()
        p.core
    msg = str(ei.value)
    assert f"pattern {name!r}" in msg, msg
    assert f"{HERE}:{line_of(HERE, 'MARK-' + marker)}" in msg, msg
    for frag in problem:
        assert frag in msg, msg
    return msg


def test_unknown_name():
    def mk():
        @pm.pattern
        def UnknownName(x):
            return Missing(x)  # noqa: F821  #MARK-unknown
        return UnknownName
    expect(mk, "UnknownName", "unknown", "unknown name 'Missing'")


def test_arity_mismatch():
    def mk():
        @pm.pattern
        def Arity(x):
            y = F(x)
            return G(y)  # MARK-arity
        return Arity
    expect(mk, "Arity", "arity", "operator G takes 2 argument(s), got 1")


@pytest.mark.parametrize("construct", ["if", "for", "while", "try", "with", "lambda",
                                       "listcomp", "cond-expr", "walrus", "nested def"])
def test_unsupported_constructs(construct):
    def mk():
        if construct == "if":
            @pm.pattern
            def Bad(x):
                if x.rank == 2:  # MARK-if
                    return F(x)
                return x
        elif construct == "for":
            @pm.pattern
            def Bad(x):
                for _ in range(2):  # MARK-for
                    x = F(x)
                return x
        elif construct == "while":
            @pm.pattern
            def Bad(x):
                while False:  # MARK-while
                    pass
                return x
        elif construct == "try":
            @pm.pattern
            def Bad(x):
                try:  # MARK-try
                    return F(x)
                except Exception:
                    return x
        elif construct == "with":
            @pm.pattern
            def Bad(x):
                with open(os.devnull):  # MARK-with
                    return F(x)
        elif construct == "lambda":
            @pm.pattern
            def Bad(x):
                h = lambda y: F(y)  # noqa: E731  MARK-lambda
                return h(x)
        elif construct == "listcomp":
            @pm.pattern
            def Bad(x):
                return [F(y) for y in (x,)][0]  # MARK-listcomp
        elif construct == "cond-expr":
            @pm.pattern
            def Bad(x):
                return F(x) if True else x  # MARK-cond-expr
        elif construct == "walrus":
            @pm.pattern
            def Bad(x):
                assert (r := x.rank) == 2  # MARK-walrus
                return x
        else:
            @pm.pattern
            def Bad(x):
                def helper(y):  # MARK-nested def
                    return F(y)
                return helper(x)
        return Bad
    expect(mk, "Bad", construct, "unsupported Python construct in a pattern body")


def test_bool_of_symbolic_guard():
    def mk():
        @pm.pattern
        def Truthy(x):
            assert bool(x.rank == 2)  # MARK-bool
            return F(x)
        return Truthy
    expect(mk, "Truthy", "bool", "x.rank == 2", "Python truth value")


def test_guard_in_helper_function_is_reported():
    def is_matrix(v):
        return v.rank == 2 and v.dtype == pm.f32  # `and` is not rewritten here

    def mk():
        @pm.pattern
        def Helper(x):
            assert is_matrix(x)  # MARK-helper
            return F(x)
        return Helper
    expect(mk, "Helper", "helper", "Python truth value")


def test_assert_on_non_comparison():
    def mk():
        @pm.pattern
        def NotCmp(x):
            assert x.rank  # MARK-notcmp
            return F(x)
        return NotCmp
    expect(mk, "NotCmp", "notcmp", "assert needs a comparison")


def test_guard_on_unbound_variable():
    def mk():
        @pm.pattern
        def Unbound(x, y):
            assert x.rank == 2
            assert y.dtype == pm.f32  # MARK-unbound
            return F(x)
        return Unbound
    expect(mk, "Unbound", "unbound", "'y'", "does not bind")


def test_guard_on_variable_bound_on_one_alternate_only():
    def mk():
        @pm.pattern
        def OneSide(x, y):
            return G(x, y)

        @pm.pattern
        def OneSide(x, y):  # noqa: F811
            return F(x)

        @pm.pattern
        def UsesOneSide(x, y):
            assert y.rank == 1  # MARK-oneside
            return OneSide(x, y)
        return UsesOneSide
    expect(mk, "UsesOneSide", "oneside", "'y'", "every alternate")


def test_non_pattern_return_values():
    def mk_const():
        @pm.pattern
        def RetConst(x):
            return 3  # MARK-retconst
        return RetConst

    def mk_guard():
        @pm.pattern
        def RetGuard(x):
            return x.rank == 2  # MARK-retguard
        return RetGuard

    def mk_none():
        @pm.pattern
        def RetNone(x):  # MARK-retnone
            F(x)
        return RetNone
    expect(mk_const, "RetConst", "retconst", "returned 3, not a pattern term")
    expect(mk_guard, "RetGuard", "retguard", "not a pattern term")
    expect(mk_none, "RetNone", "retnone", "no return statement")


def test_pattern_call_with_non_variable():
    def mk():
        @pm.pattern
        def Callee(x):
            return F(x)

        @pm.pattern
        def Caller(x):
            return Callee(F(x))  # MARK-nonvar
        return Caller
    expect(mk, "Caller", "nonvar", "pattern calls take variables", "F(x)")


def test_pattern_call_arity():
    def mk():
        @pm.pattern
        def Callee2(x):
            return F(x)

        @pm.pattern
        def Caller2(x, y):
            return Callee2(x, y)  # MARK-callarity
        return Caller2
    expect(mk, "Caller2", "callarity", "takes 1 argument(s), got 2")


def test_recursive_pattern_is_a_call():
    @pm.pattern
    def Rec(x):
        return F(Rec(x))
    assert Rec.core == pm.core.PApp(F.symbol, (pm.core.PCall(0, (0,), ()),))


def test_parameter_used_as_term_and_operator():
    def mk():
        @pm.pattern
        def Both(x, f):
            y = f(x)
            return G(f, y)  # MARK-both
        return Both
    expect(mk, "Both", "both", "parameter 'f' is used as a term variable here",
           "as an operator variable on line")


def test_call_argument_of_the_wrong_kind():
    def mk():
        @pm.pattern
        def Chain(x, f):
            return f(x)

        @pm.pattern
        def Wrong(x, y):
            return G(y, Chain(x, y))  # MARK-wrongkind
        return Wrong
    expect(mk, "Wrong", "wrongkind", "argument 'y' of Chain must be an operator variable",
           "parameter 'f' of Chain")

    def mk_local():
        @pm.pattern
        def Chain2(x, f):
            return f(x)

        @pm.pattern
        def WrongLocal(x):
            z = pm.var()
            x <= Chain2(z, z)  # MARK-wronglocal
            return x
        return WrongLocal
    expect(mk_local, "WrongLocal", "wronglocal", "argument 'z' of Chain2 must be an operator")


def test_local_kinds_are_checked_at_once():
    def mk_apply():
        @pm.pattern
        def ApplyTerm(x):
            y = pm.var()
            return y(x)  # MARK-applyterm
        return ApplyTerm

    def mk_term():
        @pm.pattern
        def OpAsTerm(x):
            U = pm.Op(1, 1)
            return G(x, U)  # MARK-opasterm
        return OpAsTerm

    def mk_arity():
        @pm.pattern
        def OpArity(x):
            U = pm.Op(1, 1)
            return U(x, x)  # MARK-oparity
        return OpArity
    expect(mk_apply, "ApplyTerm", "applyterm", "y is a term variable", "cannot be applied")
    expect(mk_term, "OpAsTerm", "opasterm", "U is an operator variable", "used as a term")
    expect(mk_arity, "OpArity", "oparity", "operator variable U takes 1 argument(s), got 2")


def test_constraint_before_its_variable_is_bound():
    def mk():
        @pm.pattern
        def Order(x):
            y = pm.var()
            z = pm.var()
            y <= F(z)  # MARK-order
            x <= G(y, y)
            return x
        return Order
    expect(mk, "Order", "order", "match constraint on 'y'", "earlier constraint")


def test_local_never_bound():
    def mk():
        @pm.pattern
        def Unused(x):
            z = pm.var()  # MARK-unusedvar
            return F(x)
        return Unused

    def mk_op():
        @pm.pattern
        def UnusedOp(x):
            U = pm.Op(1, 1)  # MARK-unusedop
            return F(x)
        return UnusedOp

    def mk_alt():
        @pm.pattern
        def Side(a, b):
            return G(a, b)

        @pm.pattern
        def Side(a, b):  # noqa: F811
            return F(a)

        @pm.pattern
        def UsesSide(x):
            w = pm.var()  # MARK-side
            x <= Side(x, w)
            return x
        return UsesSide
    expect(mk, "Unused", "unusedvar", "local variable 'z' is not bound by every match")
    expect(mk_op, "UnusedOp", "unusedop", "local operator variable 'U'")
    expect(mk_alt, "UsesSide", "side", "local variable 'w'", "every alternate")


def test_constraint_syntax_errors():
    def mk_left():
        @pm.pattern
        def Left(x):
            F(x) <= G(x, x)  # MARK-left
            return x
        return Left

    def mk_expr():
        @pm.pattern
        def NotStmt(x):
            c = x <= F(x)  # MARK-notstmt
            return x
        return NotStmt
    expect(mk_left, "Left", "left", "left side of a match constraint must be a variable")
    expect(mk_expr, "NotStmt", "notstmt", "must be a statement")


def test_op_class_compared_with_a_string():
    def mk():
        @pm.pattern
        def Str(x, f):
            assert f.op_class == "unary_pointwise"  # MARK-str
            return f(x)
        return Str
    expect(mk, "Str", "str", "pm.opclass('unary_pointwise')")


def test_locals_outside_pattern_bodies():
    with pytest.raises(pm.PatternError, match="inside a pattern body"):
        pm.var()
    with pytest.raises(pm.PatternError, match="inside a pattern body"):
        pm.Op(1, 1)


def test_rule_errors():
    @pm.pattern
    def Pat(x, y):
        return G(x, y)
    with pytest.raises(pm.PatternError, match="'z' is not a parameter of pattern 'Pat'"):
        @pm.rule(Pat)
        def bad(x, z):
            return x
    with pytest.raises(pm.PatternError, match="takes a @pm.pattern"):
        pm.rule(F)

    @pm.rule(Pat)
    def returns_junk(x):
        return 3
    g = pm.Graph()
    a = g.input("a")
    g.output(g.apply(G, a, a))
    with pytest.raises(pm.PatternError, match="returned 3"):
        pm.rewrite(g, [Pat], engine="reference")


def test_unsupported_operation():
    def mk():
        @pm.pattern
        def Divide(x):
            assert x.rank / 2 == 1  # MARK-div
            return F(x)
        return Divide
    expect(mk, "Divide", "div", "unsupported operation", "/")


def test_bad_guard_operands():
    def mk_float():
        @pm.pattern
        def FloatGuard(x):
            assert x.rank == 2.5  # MARK-float
            return F(x)
        return FloatGuard

    def mk_var():
        @pm.pattern
        def VarGuard(x):
            assert x.rank == x  # MARK-varguard
            return F(x)
        return VarGuard

    def mk_term_eq():
        @pm.pattern
        def TermEq(x, y):
            assert x == y  # MARK-termeq
            return G(x, y)
        return TermEq

    def mk_attr_of_term():
        @pm.pattern
        def TermAttr(x):
            assert F(x).rank == 1  # MARK-termattr
            return F(x)
        return TermAttr

    def mk_index():
        @pm.pattern
        def BigIndex(x):
            assert x.shape[64] == 1  # MARK-bigindex
            return F(x)
        return BigIndex
    expect(mk_float, "FloatGuard", "float", "must be integers")
    expect(mk_var, "VarGuard", "varguard", "use x.rank")
    expect(mk_term_eq, "TermEq", "termeq", "cannot be compared")
    expect(mk_attr_of_term, "TermAttr", "termattr", "only be read from pattern variables")
    expect(mk_index, "BigIndex", "bigindex", "out of range")


def test_alternates_need_same_parameters():
    def mk():
        @pm.pattern
        def Params(x):
            return F(x)

        @pm.pattern
        def Params(y):  # noqa: F811  MARK-params
            return F(y)
        return Params
    expect(mk, "Params", "params", "same parameters", "(y)", "(x)")


def test_unsupported_parameters():
    def mk():
        @pm.pattern
        def Star(*xs):  # MARK-star
            return F(xs[0])
        return Star
    expect(mk, "Star", "star", "plain positional parameter")


def test_pattern_called_outside_a_body():
    @pm.pattern
    def Outside(x):
        return F(x)
    with pytest.raises(pm.PatternError, match="only be called inside another pattern"):
        Outside(1)


def test_error_is_raised_again_on_next_use():
    @pm.pattern
    def Again(x):
        return Nope(x)  # noqa: F821
    for _ in range(2):
        with pytest.raises(pm.PatternError, match="unknown name 'Nope'"):
            Again.core
