"""``pm.optional`` and ``has_attr`` against their meaning.

``pm.optional(p, Op, *args)`` is ``Op(p, *args) ‖ p``: a local (wildcard,
``pm.var()``) used both inside the option and outside it is one variable of
the whole alternate, the same node in the option and in its other uses; one
used only inside the option is local to it. ``t.has_attr(k1=v1, k2=v2)`` (or
chained calls) constrains each attribute argument ``k`` of the application
``t`` to the constant ``v``.

The hand-checked cases run on every engine (the ``engine`` fixture); the
random ones compare the lowering with the independent reading: every
pattern written with ``pm.optional``/``has_attr`` against the same pattern
expanded into explicit alternates (one per choice of the options, longer
forms first, in the order the terms are matched: left to right) with the
attributes as match constraints (``v <= 1``), answered by the DSL-level
interpreter of tests/dsl_interpreter.py, which never reads the lowering.
``PYPM_RELAY_CASES`` sets the number of random patterns (default 150).
"""
import inspect
import itertools
import os
from dataclasses import dataclass
from typing import Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pypm_verified as pm
from pypm_verified.engines import binding, declarative
from pypm_verified.errors import EngineUnavailable, PatternError

import dsl_interpreter as di
from strategies import B2, K0, T3, U1, V1


@pm.op
def Mul(x, y): return 1
@pm.op
def Sub(x, y): return 1
@pm.op
def Relu(x): return 1
@pm.op
def Conv(x, w, stride, pad): return 1


def valid(m):
    """A returned match satisfies the declarative relation ``p@θ ≈ t``."""
    if m is not None:
        assert declarative.check(m.pattern.program, m.substitution, m.root, m.fsubstitution)
    return m


def bindings(P, node, engine):
    m = valid(pm.match(P, node, engine=engine))
    return None if m is None else m.bindings


# ------------------------------------------------- optional: shared locals


@pm.pattern
def MulFirstWildcard(x):      # ∃w. Sub(Mul(x, w) ‖ x, w)
    w = pm.wildcard()
    return Sub(pm.optional(x, Mul, w), w)


@pm.pattern
def MulFirstVar(x):
    w = pm.var()
    return Sub(x.optional(Mul, w), w)


@pm.pattern
def MulSecondWildcard(x):     # ∃w. Sub(w, Mul(x, w) ‖ x)
    w = pm.wildcard()
    return Sub(w, pm.optional(x, Mul, w))


@pm.pattern
def MulSecondVar(x):
    w = pm.var()
    return Sub(w, pm.optional(x, Mul, w))


@pm.pattern
def MulFirstSeen(x, seen):    # w's node reported through a match constraint
    w = pm.var()
    w <= seen
    return Sub(pm.optional(x, Mul, w), w)


@pm.pattern
def MulInGuardOnly(x):        # used outside the option only in a guard: not bound when absent
    w = pm.var()
    assert w.rank == 1
    return Relu(pm.optional(x, Mul, w))


@pm.pattern
def MulFirstGuarded(x):       # used in the option, after it and in a guard
    w = pm.var()
    assert w.rank == 1
    return Sub(pm.optional(x, Mul, w), w)


@pm.pattern
def OnlyInOption(x):          # declared before, used only inside the option: local to it
    w = pm.wildcard()
    return Relu(pm.optional(x, Mul, w))


@pm.pattern
def TwiceInOption(x):         # used twice, only inside the option: one node, local to it
    w = pm.var()
    return Relu(pm.optional(x, Sub, Mul(w, w)))


def _graph():
    g = pm.Graph()
    return g, g.input("a"), g.input("b"), g.input("c")


@pytest.mark.parametrize("P", [MulFirstWildcard, MulFirstVar], ids=["wildcard", "var"])
def test_optional_shares_a_local_used_after_it(engine, P):
    g, a, b, c = _graph()
    ab = g.apply(Mul, a, b)
    assert bindings(P, g.apply(Sub, ab, b), engine) == {"x": a}        # Mul(x, w) with w = b
    assert bindings(P, g.apply(Sub, a, b), engine) == {"x": a}         # absent: x = a, w = b
    # Mul(a, b) then c: the option needs w = b = c; absent: x = Mul(a, b), w = c
    assert bindings(P, g.apply(Sub, ab, c), engine) == {"x": ab}
    assert bindings(P, g.apply(Mul, ab, b), engine) is None


@pytest.mark.parametrize("P", [MulSecondWildcard, MulSecondVar], ids=["wildcard", "var"])
def test_optional_shares_a_local_used_before_it(engine, P):
    g, a, b, c = _graph()
    ab = g.apply(Mul, a, b)
    assert bindings(P, g.apply(Sub, b, ab), engine) == {"x": a}        # w = b, Mul(x, w)
    assert bindings(P, g.apply(Sub, c, ab), engine) == {"x": ab}       # w = c: only absent
    assert bindings(P, g.apply(Sub, a, b), engine) == {"x": b}
    assert bindings(P, g.apply(Sub, a, a), engine) == {"x": a}


def test_optional_shared_local_is_one_node(engine):
    g, a, b, c = _graph()
    ab = g.apply(Mul, a, b)
    assert bindings(MulFirstSeen, g.apply(Sub, ab, b), engine) == {"x": a, "seen": b}
    assert bindings(MulFirstSeen, g.apply(Sub, ab, c), engine) == {"x": ab, "seen": c}
    assert bindings(MulFirstSeen, g.apply(Sub, a, c), engine) == {"x": a, "seen": c}
    got = [(n, m.bindings) for _, n, m in pm.match_all([MulFirstSeen], g, engine=engine)]
    assert got == [(g.apply(Sub, ab, b), {"x": a, "seen": b}),
                   (g.apply(Sub, ab, c), {"x": ab, "seen": c}),
                   (g.apply(Sub, a, c), {"x": a, "seen": c})]


def test_optional_shared_local_in_a_guard(engine):
    g = pm.Graph()
    a, v, m = g.input("a"), g.input("v", shape=(3,)), g.input("m", shape=(3, 3))
    assert bindings(MulFirstGuarded, g.apply(Sub, g.apply(Mul, a, v), v), engine) == {"x": a}
    am = g.apply(Mul, a, m)
    assert bindings(MulFirstGuarded, g.apply(Sub, am, m), engine) is None
    assert bindings(MulFirstGuarded, g.apply(Sub, am, v), engine) == {"x": am}


def test_optional_local_only_inside_stays_inside(engine):
    g, a, b, _ = _graph()
    assert bindings(OnlyInOption, g.apply(Relu, g.apply(Mul, a, b)), engine) == {"x": a}
    assert bindings(OnlyInOption, g.apply(Relu, b), engine) == {"x": b}
    sab = g.apply(Sub, a, g.apply(Mul, a, b))          # Mul(a, b): not Mul(w, w)
    assert bindings(TwiceInOption, g.apply(Relu, sab), engine) == {"x": sab}
    sbb = g.apply(Sub, a, g.apply(Mul, b, b))
    assert bindings(TwiceInOption, g.apply(Relu, sbb), engine) == {"x": a}


def test_optional_local_in_a_guard_must_be_bound():
    with pytest.raises(PatternError, match="guard reads variable 'w'"):
        MulInGuardOnly.program


def test_optional_local_unbound_on_some_branch_is_refused():
    @pm.pattern
    def Siblings(x, y):       # both absent: nothing binds w
        w = pm.wildcard()
        return Sub(pm.optional(x, Mul, w), pm.optional(y, Mul, w))

    @pm.pattern
    def Nested(x):            # Sub(Mul(x, w) ‖ x, w) ‖ Mul(x, w) ‖ x: x alone binds no w
        w = pm.var()
        return Relu(x.optional(Mul, w).optional(Sub, w))

    @pm.pattern
    def SiblingsInside(x, y):  # w local to the outer option, unbound when both inner are absent
        w = pm.wildcard()
        return pm.optional(x, Conv, pm.optional(y, Mul, w), pm.optional(y, Sub, w), 0)

    for P, msg in ((Siblings, "'w' is not bound by every match of the pattern"),
                   (Nested, "'w' is not bound by every match of the pattern"),
                   (SiblingsInside, "'w', used only inside an optional part .pm.optional., "
                                    "is not bound by every match of that part")):
        with pytest.raises(PatternError, match=msg):
            P.program


# ------------------------------------------------------------- has_attr


@pm.pattern
def ConvOneCall(x, w):
    return Conv(x, w, pm.wildcard(), pm.wildcard()).has_attr(stride=1, pad=0)


@pm.pattern
def ConvChained(x, w):
    return Conv(x, w, pm.wildcard(), pm.wildcard()).has_attr(stride=1).has_attr(pad=0)


@pm.pattern
def ConvFunction(x, w):
    return pm.has_attr(Conv(x, w, pm.var(), pm.wildcard()), pad=0).has_attr(stride=1)


@pm.pattern
def ConvVariables(x, w, s, p):
    return Conv(x, w, s, p).has_attr(stride=1, pad=0)


@pm.pattern
def ConvMixed(x, w, s):       # a variable, then pm.is_constant(): replaced by the literal
    return Conv(x, w, s, pm.is_constant()).has_attr(stride=1, pad=0)


@pm.pattern
def ConvSeparately(x, w):     # the meaning: each k=v a constraint of its own
    s = pm.var()
    p = pm.var()
    s <= 1
    p <= 0
    return Conv(x, w, s, p)


ATTR_PATTERNS = [ConvOneCall, ConvChained, ConvFunction, ConvVariables, ConvMixed]


@pytest.mark.parametrize("P", ATTR_PATTERNS, ids=lambda P: P.name)
def test_has_attr_two_attributes(engine, P):
    g, a, b, c = _graph()
    expect = {"x": a, "w": b}
    good = g.apply(Conv, a, b, 1, 0)
    assert bindings(P, good, engine) == expect | (
        {"s": g.const(1), "p": g.const(0)} if P is ConvVariables else
        {"s": g.const(1)} if P is ConvMixed else {})
    for stride, pad in ((1, 1), (0, 0), (0, 1), (2, 0), (1, c), (c, 0), (0.0, 1)):
        node = g.apply(Conv, a, b, stride, pad)
        assert bindings(P, node, engine) is None
        assert bindings(ConvSeparately, node, engine) is None
    assert bindings(ConvSeparately, good, engine) == expect
    found = [n for _, n, _ in pm.match_all([P], g, engine=engine)]
    assert found == [n for _, n, _ in pm.match_all([ConvSeparately], g, engine=engine)] == [good]


def test_has_attr_same_argument_twice(engine):
    @pm.pattern
    def Both(x, w):           # one wildcard for both attributes: 1 and 0 at once, never
        v = pm.wildcard()
        return Conv(x, w, v, v).has_attr(stride=1, pad=0)

    @pm.pattern
    def Again(x, w):          # the same attribute twice: as once
        return Conv(x, w, pm.wildcard(), 0).has_attr(stride=1, pad=0).has_attr(stride=1)

    g, a, b, _ = _graph()
    assert bindings(Both, g.apply(Conv, a, b, 1, 0), engine) is None
    assert bindings(Both, g.apply(Conv, a, b, 1, 1), engine) is None
    assert bindings(Again, g.apply(Conv, a, b, 1, 0), engine) == {"x": a, "w": b}
    assert bindings(Again, g.apply(Conv, a, b, 0, 0), engine) is None


def test_has_attr_errors():
    @pm.pattern
    def OnOption(x, w):
        return pm.optional(Conv(x, w, pm.wildcard(), 0), Relu).has_attr(stride=1)

    @pm.pattern
    def Clash(x, w):
        return Conv(x, w, pm.wildcard(), 0).has_attr(stride=1).has_attr(pad=1)

    @pm.pattern
    def OnPattern(x, w):
        return Conv(x, w, Relu(x), 0).has_attr(pad=0).has_attr(stride=1)

    for P, msg in ((OnOption, "applies to an operator application"),
                   (Clash, "already the constant 0"),
                   (OnPattern, "is a pattern, not a variable or wildcard")):
        with pytest.raises(PatternError, match=msg):
            P.program


# ------------------------------------------------ random: the two readings
#
# A surface term: a variable (parameter x, y or local w0..w2), a constant, an
# application, an option, or an application with attributes (its attribute
# arguments variables). ``expand`` is the independent reading.


@dataclass(frozen=True)
class V:
    name: str


@dataclass(frozen=True)
class C:
    value: int


@dataclass(frozen=True)
class A:
    op: object
    args: tuple


@dataclass(frozen=True, eq=False)
class Opt:  # pm.optional(base, op, *args); method: base.optional(op, *args)
    base: object
    op: object
    args: tuple
    method: bool


@dataclass(frozen=True)
class Attr:  # app.has_attr(**groups[0]).has_attr(**groups[1])...; function: pm.has_attr(app, ...)
    app: A
    groups: Tuple[Tuple[Tuple[str, int], ...], ...]
    function: bool


PARAMS = ("x", "y")
LOCALS = ("w0", "w1", "w2")
NAMES = PARAMS + LOCALS
CASES = int(os.environ.get("PYPM_RELAY_CASES", "150"))


def _params(op):
    return list(inspect.signature(op.fn).parameters)


@st.composite
def terms(draw, depth):
    kinds = ["var", "var", "const"] + (["app", "opt", "opt", "attr"] if depth > 0 else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "var":
        return V(draw(st.sampled_from(NAMES)))
    if kind == "const":
        return C(draw(st.sampled_from([0, 1])))
    if kind == "app":
        op = draw(st.sampled_from([K0, U1, V1, B2, T3]))
        return A(op, tuple(draw(terms(depth - 1)) for _ in range(op.arity)))
    if kind == "opt":
        base = draw(terms(depth - 1))
        op = draw(st.sampled_from([U1, B2, T3]))
        args = tuple(draw(terms(depth - 1)) for _ in range(op.arity - 1))
        return Opt(base, op, args, not isinstance(base, C) and draw(st.booleans()))
    op = draw(st.sampled_from([B2, T3]))
    names = _params(op)
    keys = draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
    args = tuple(V(draw(st.sampled_from(NAMES))) if n in keys else draw(terms(depth - 1))
                 for n in names)
    attrs = [(k, draw(st.sampled_from([0, 1]))) for k in keys]
    cuts = sorted(draw(st.sets(st.integers(1, len(attrs) - 1))) if len(attrs) > 1 else [])
    groups = tuple(tuple(attrs[i:j]) for i, j in zip([0] + cuts, cuts + [len(attrs)]))
    return Attr(A(op, args), groups, draw(st.booleans()))


def expand(t):
    """The independent reading: ``(term, constraints, options taken)`` for
    each choice of the options, in matching order (an option's longer form
    first; arguments left to right, the first varying slowest)."""
    if isinstance(t, V):
        return [(di.Var(t.name), (), frozenset())]
    if isinstance(t, C):
        return [(di.Const(t.value), (), frozenset())]
    if isinstance(t, A):
        out = []
        for combo in itertools.product(*(expand(a) for a in t.args)):
            out.append((di.App(t.op, tuple(c[0] for c in combo)),
                        sum((c[1] for c in combo), ()),
                        frozenset().union(*(c[2] for c in combo))))
        return out
    if isinstance(t, Opt):
        longer = [(term, cs, taken | {t}) for term, cs, taken
                  in expand(A(t.op, (t.base,) + t.args))]
        return longer + expand(t.base)
    names = _params(t.app.op)
    attrs = tuple((t.app.args[names.index(k)].name, v) for grp in t.groups for k, v in grp)
    return [(term, cs + attrs, taken) for term, cs, taken in expand(t.app)]


def uses(t, around=(), out=None):
    """Each local's uses, with the options whose longer form holds them."""
    out = {} if out is None else out
    if isinstance(t, V) and t.name in LOCALS:
        out.setdefault(t.name, []).append(around)
    elif isinstance(t, A):
        for a in t.args:
            uses(a, around, out)
    elif isinstance(t, Opt):
        uses(A(t.op, (t.base,) + t.args), around + (t,), out)
        uses(t.base, around, out)
    elif isinstance(t, Attr):
        uses(t.app, around, out)
    return out


def refused(t, alternates) -> bool:
    """Whether the DSL must refuse ``t``: a local is bound at the innermost
    option whose longer form holds all its uses (else by the alternate),
    and some choice of the options that includes that scope does not use
    it (``pm.optional`` gives no local that is unbound on one branch)."""
    for name, ws in uses(t).items():
        common = set(ws[0]).intersection(*ws[1:])
        scope = next((o for o in reversed(ws[0]) if o in common), None)
        for term, _, taken in alternates:
            if (scope is None or scope in taken) and name not in _vars(term):
                return True
    return False


def _vars(term):
    if isinstance(term, di.Var):
        return {term.name}
    return set().union(*(_vars(a) for a in getattr(term, "args", ())))


def source(t, declare, inline) -> str:
    """The pattern ``P(x, y)`` returning ``t`` as ``@pm.pattern`` source."""
    def src(t):
        if isinstance(t, V):
            return "pm.wildcard()" if t.name in inline else t.name
        if isinstance(t, C):
            return repr(t.value)
        if isinstance(t, A):
            return f"{t.op.name}({', '.join(src(a) for a in t.args)})"
        if isinstance(t, Opt):
            rest = "".join(f", {src(a)}" for a in t.args)
            return (f"{src(t.base)}.optional({t.op.name}{rest})" if t.method
                    else f"pm.optional({src(t.base)}, {t.op.name}{rest})")
        calls = [", ".join(f"{k}={v}" for k, v in grp) for grp in t.groups]
        head = (f"pm.has_attr({src(t.app)}, {calls[0]})" if t.function
                else f"{src(t.app)}.has_attr({calls[0]})")
        return head + "".join(f".has_attr({c})" for c in calls[1:])
    lines = ["import pypm_verified as pm",
             "from strategies import B2, K0, T3, U1, V1", "", "",
             "@pm.pattern", "def P(x, y):"]
    lines += [f"    {n} = pm.{how}()" for n, how in sorted(declare.items())]
    return "\n".join(lines + [f"    return {src(t)}", ""])


def program(alternates) -> di.Program:
    alts = []
    for term, cs, _ in alternates:
        local = sorted(_vars(term) & set(LOCALS))
        alts.append(tuple([di.DeclVar(n) for n in local] + [di.Constrain(x, di.Const(v))
                                                           for x, v in cs] + [di.Return(term)]))
    d = di.PatternDef("P", (di.Param("x"), di.Param("y")), alts)
    return di.Program({"P": d}, [("P", i) for i in range(len(alts))])


@st.composite
def shaped(draw, alternates):
    """A graph holding an instance of one alternate (constrained variables
    mostly the constant they need), and a few other nodes."""
    g = pm.Graph()
    pool = [g.input("a"), g.input("b"), g.const(0), g.const(1)]
    term, cs, _ = draw(st.sampled_from(alternates))
    env = {x: g.const(v) for x, v in cs if draw(st.integers(0, 4))}

    def build(t):
        if isinstance(t, di.Var):
            if t.name not in env:
                env[t.name] = draw(st.sampled_from(pool))
            return env[t.name]
        if isinstance(t, di.Const):
            return g.const(t.value)
        return g.apply(t.op, *(build(a) for a in t.args))
    build(term)
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from([U1, V1, B2, T3]))
        g.apply(op, *(draw(st.sampled_from(g.nodes)) for _ in range(op.arity)))
    return g


@pytest.fixture(scope="module")
def engines():
    try:
        binding.open_engine_library()
        return ("reference", "verified")
    except EngineUnavailable as e:
        if os.environ.get("PYPM_REQUIRE_LIB"):
            pytest.fail(f"PYPM_REQUIRE_LIB is set but the library is unavailable: {e}")
        return ("reference",)


@pytest.fixture(scope="module")
def gendir(tmp_path_factory):
    return tmp_path_factory.mktemp("relay_forms")


_names = itertools.count()


@settings(max_examples=CASES, deadline=None, database=None, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_random_optional_and_has_attr_against_expansion(engines, gendir, data):
    t = data.draw(terms(3).filter(lambda u: not isinstance(u, (V, C))), label="term")
    alternates = expand(t)
    counts = {n: len(ws) for n, ws in uses(t).items()}
    declare = {n: data.draw(st.sampled_from(["wildcard", "var"]), label=n) for n in counts}
    inline = {n for n, k in counts.items() if k == 1 and data.draw(st.booleans(), label=n)}
    for n in inline:
        declare.pop(n)
    text = source(t, declare, inline)
    mod = di.load(text, gendir, f"pypm_relay_case_{os.getpid()}_{next(_names)}")
    if refused(t, alternates):
        with pytest.raises(PatternError, match="not bound by every match"):
            mod.P.program
        return
    interp = di.Interpreter(program(alternates))
    g = data.draw(shaped(alternates), label="graph")
    for node in g.nodes:
        sol = interp.match("P", node)
        want = None if sol is None else sol[0]
        for e in engines:
            got = bindings(mod.P, node, e)
            assert got == want, (f"{e} at {node!r}: {got} != {want}\n{text}\n"
                                 + "\n".join(map(repr, g.nodes)))
