"""The DSL-level interpreter (tests/dsl_interpreter.py) against both engines.

Random programs of the surface language (tests/dsl_strategies.py) are
written out as Python ``@pm.pattern`` source and imported, so the real
frontend traces and lowers them; the interpreter reads the same programs
directly, without the lowering. At every node of a random graph and for
every pattern of the program the two must give the same answer:

* the same match (the same bindings of the term parameters and the same
  operators for the operator parameters: the first solution in the order
  alternates are defined, terms left to right, constraints in statement
  order), or both no match, or both out of fuel;
* every match the engines return is a match in the interpreter's sense
  (``check_binding``, a search started from the engines' bindings);
* ``pm.match_all`` of all the patterns returns exactly the matches.

Both sides answer "no match" where the root-operator index excludes the
node (the interpreter computes its own index on the surface syntax, and
checks it: a match its search finds there is reported as a disagreement).

Fuel is counted differently by the interpreter (steps and call depth of the
surface program) and by the engines (machine steps of the lowered program),
so an answer decided within one budget is checked against the other with
the budgets rescaled: a search the interpreter decides in ``s`` steps is
given ``1000 + 100 s`` machine steps (then ``RETRY_FUEL`` if that is not
enough); when the interpreter runs out, the engines must too at
``OOF_FUEL`` steps, and if one of them decides the search after all, the
interpreter must decide it the same way with a much larger budget.

Also: hand-checked answers of the interpreter (the paper's Figures 3 and 4,
PwChain, left recursion, three-valued guards, one program with every form),
and ill-formed programs, which the frontend must refuse.

Cases: ``PYPM_DSL_CASES`` (default 2,000 programs, each with one graph)
split over the three random tests below (plus 5% for the ill-formed ones); e.g. ``PYPM_DSL_CASES=10000 pytest
tests/test_dsl_interpreter.py``. ``PYPM_DSL_STATS=1`` prints how the answers
were distributed. Long runs fan out: with ``PYPM_DSL_JOBS=N`` (local worker
processes) or ``PYPM_DSL_RAY=auto|ADDRESS`` (a Ray cluster) the cases are
split into batches of ``BATCH_CASES``, each a run of the random tests with
its own hypothesis seed (batch i: seed i), on ``pypm_verified.parallel``.
"""
import collections
import itertools
import os
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pypm_verified as pm
from pypm_verified.engines import binding
from pypm_verified.errors import EngineUnavailable

from dsl_interpreter import (
    OP, OUT_OF_FUEL, AliasRef, And, App, Assert, Bin, Call, Chain, ClassConst, ClassOf, Cmp,
    Const, Constrain, DTypeConst, DTypeOf, DeclOp, DeclVar, Dim, FunApp, Interpreter,
    InterpOutOfFuel, Let, Neg, Not, Num, Or, Param, PatternDef, Program, Rank, Return, ShapeIs,
    Var, load, to_source)
from dsl_strategies import problems, programs, shaped_graphs
from strategies import B2, K0, T3, U1, V1, chain_graphs, graphs

CASES = int(os.environ.get("PYPM_DSL_CASES", "2000"))
JOBS = int(os.environ.get("PYPM_DSL_JOBS", "1"))
RAY = os.environ.get("PYPM_DSL_RAY") or None
#: the random tests run in seeded batches on the executor (not in this process)
FAN_OUT = (JOBS > 1 or RAY is not None) and not os.environ.get("PYPM_DSL_IN_BATCH")
BATCH_CASES = 500
RANDOM_TESTS = "random_programs or many_alternates or ill_formed"
in_batches = pytest.mark.skipif(FAN_OUT, reason="run in seeded batches by "
                                "test_random_cases_in_batches (PYPM_DSL_JOBS or PYPM_DSL_RAY)")
# machine steps the engines get where the interpreter ran out (the reference
# engine spends about 6 microseconds a step, the verified one far less)
OOF_FUEL = {"reference": 1_000, "verified": 20_000}
RETRY_FUEL = 1 << 22  # for a search the interpreter decided but the first budget did not
BIG_FUEL, BIG_DEPTH = 2_000_000, 150  # the interpreter's second chance
STATS = collections.Counter()
_names = itertools.count()


def _settings(share):
    return settings(max_examples=max(1, round(CASES * share)), deadline=None, database=None,
                    print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


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
    return tmp_path_factory.mktemp("dsl_programs")


@pytest.fixture(scope="module", autouse=True)
def _print_stats():
    yield
    if os.environ.get("PYPM_DSL_STATS") and STATS:
        print("\nDSL interpreter vs engines:", dict(sorted(STATS.items())))


# ------------------------------------------------------------- comparison


def engine_outcome(pattern, node, engine, fuel):
    try:
        m = pm.match(pattern, node, engine=engine, fuel=fuel)
    except pm.OutOfFuel:
        return (OUT_OF_FUEL,)
    return ("no match",) if m is None else ("match", m.bindings, m.functions)


def _engine_index_admits(pattern, node) -> bool:
    """Whether the engines' root-operator index (``core.root_admits``, the
    transcription of the proved ``RootIndex.root_index``) lets ``pattern``
    match at ``node``."""
    from pypm_verified import core
    prog = pattern.program
    return core.root_admits(prog.defs, prog.root, node)


def _show(outcome):
    if outcome[0] != "match":
        return outcome[0]
    b = {k: f"%{n.id}" for k, n in outcome[1].items()}
    f = {k: getattr(o, "name", o) for k, o in outcome[2].items()}
    return f"match {b} {f}"


def _report(source, g, name, node, what):
    nodes = "\n".join(f"  {n!r}" for n in g.nodes)
    return (f"{what}\npattern {name} at %{node.id}\ngraph:\n{nodes}\nprogram:\n{source}")


def compare(prog: Program, g, engines, directory) -> None:
    """Every pattern of ``prog`` at every node of ``g``: the interpreter and
    each engine agree (see the module docstring)."""
    source = to_source(prog)
    mod = load(source, directory, f"pypm_dsl_case_{os.getpid()}_{next(_names)}")
    interp = Interpreter(prog)
    names = sorted(prog.patterns)
    expected, decided = [], True
    for node in g.nodes:
        for name in names:
            P = getattr(mod, name)
            want = interp.outcome(name, node)
            steps = interp.steps
            STATS[want[0]] += 1
            if want[0] == OUT_OF_FUEL:
                decided = False
            elif want[0] == "match":
                expected.append((name, node.id, want[1], want[2]))
            for e in engines:
                if want[0] == OUT_OF_FUEL:
                    got = engine_outcome(P, node, e, OOF_FUEL[e])
                    if got[0] == OUT_OF_FUEL:
                        continue
                    # the engine decided it: so must the interpreter, given more
                    STATS["interpreter second chance"] += 1
                    again = Interpreter(prog, fuel=BIG_FUEL, max_depth=BIG_DEPTH)
                    want2 = again.outcome(name, node)
                    if want2[0] == OUT_OF_FUEL and got[0] == "no match" and \
                            not _engine_index_admits(P, node):
                        # a search that never ends, at a node the engines' root
                        # index excludes: "no match" is a decided answer there
                        # (no derivation exists: RootIndex.root_index_sound,
                        # Entry.candidates_at_sound); the interpreter's own
                        # index is coarser (it does not read a class guard on
                        # an operator variable, F() ; assert F.op_class == c)
                        STATS["engine index decided"] += 1
                        continue
                    assert want2 == got, _report(
                        source, g, name, node,
                        f"{e}: {_show(got)} (fuel {OOF_FUEL[e]}); interpreter: out of fuel, "
                        f"then {_show(want2)}")
                    continue
                got = engine_outcome(P, node, e, 1000 + 100 * steps)
                if got[0] == OUT_OF_FUEL:
                    STATS["engine second chance"] += 1
                    got = engine_outcome(P, node, e, RETRY_FUEL)
                assert got == want, _report(
                    source, g, name, node,
                    f"{e}: {_show(got)}; interpreter ({steps} steps): {_show(want)}")
                if got[0] == "match":
                    assert interp.check_binding(name, node, got[1], got[2]), _report(
                        source, g, name, node, f"{e}'s match is not a match: {_show(got)}")
    if decided:
        pats = [getattr(mod, n) for n in names]
        for e in engines:
            found = [(p.name, n.id, m.bindings, m.functions)
                     for p, n, m in pm.match_all(pats, g, engine=e)]
            assert found == expected, (f"match_all ({e}) differs:\n{found}\n{expected}\n"
                                       f"program:\n{source}")


# ------------------------------------------------------------ random cases


@pytest.mark.skipif(not FAN_OUT, reason="long mode only: PYPM_DSL_JOBS=N or PYPM_DSL_RAY "
                    "fan the cases out in batches")
def test_random_cases_in_batches():
    from pypm_verified.parallel import executor, run_command
    n = -(-CASES // BATCH_CASES)
    sizes = [CASES // n + (i < CASES % n) for i in range(n)]
    cmd = [sys.executable, "-m", "pytest", os.path.abspath(__file__), "-q", "-x",
           "-p", "no:cacheprovider", "-k", RANDOM_TESTS]
    tasks = [(cmd + [f"--hypothesis-seed={i}"],
              {"PYPM_DSL_CASES": str(k), "PYPM_DSL_IN_BATCH": "1"},
              os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
             for i, k in enumerate(sizes)]
    with executor(jobs=JOBS, ray=RAY) as ex:
        done = ex.run(run_command, tasks, labels=[f"batch {i} (seed {i})" for i in range(n)],
                      what="DSL cases")
    failed = [f"batch {i} (--hypothesis-seed={i}, PYPM_DSL_CASES={sizes[i]}):\n{out}"
              for i, (rc, out) in enumerate(done) if rc != 0]
    assert not failed, "\n\n".join(failed)


@pytest.mark.slow
@in_batches
@_settings(0.6)
@given(st.data())
def test_random_programs_on_shaped_graphs(engines, gendir, data):
    prog = data.draw(programs(), label="program")
    g = data.draw(shaped_graphs(prog), label="graph")
    compare(prog, g, engines, gendir)


@in_batches
@_settings(0.25)
@given(st.data())
def test_random_programs_on_random_graphs(engines, gendir, data):
    prog = data.draw(programs(), label="program")
    g = data.draw(st.one_of(graphs(max_nodes=8), chain_graphs()), label="graph")
    compare(prog, g, engines, gendir)


@in_batches
@_settings(0.15)
@given(st.data())
def test_one_pattern_many_alternates(engines, gendir, data):
    prog = data.draw(programs(max_patterns=1, max_alternates=4), label="program")
    g = data.draw(shaped_graphs(prog), label="graph")
    compare(prog, g, engines, gendir)


# -------------------------------------------------- the interpreter itself


def P(name, params, *alternates):
    ps = tuple(Param(p[1:], OP, int(p[0])) if p[0].isdigit() else Param(p) for p in params)
    return PatternDef(name, ps, [tuple(a) for a in alternates])


def program(*defs):
    order = [(d.name, i) for d in defs for i in range(len(d.alternates))]
    prog = Program({d.name: d for d in defs}, order)
    assert problems(prog) == []
    return prog


def test_paper_figures_by_the_interpreter(engines, gendir):
    """Figures 3 and 4 and the PwChain of the README, answers checked by hand,
    then against the engines."""
    unary_chain = P("UnaryChain", ("x", "1f"),
                    [Return(FunApp("f", (Call("UnaryChain", ("x", "f")),)))],
                    [Return(FunApp("f", (Var("x"),)))])
    fig4 = P("Fig4", ("x", "1f", "2g"),
             [DeclVar("y"), Constrain("x", FunApp("f", (Call("Fig4", ("y", "f", "g")),))),
              Return(Var("x"))],
             [DeclVar("y"), DeclVar("z"),
              Constrain("x", FunApp("g", (Call("Fig4", ("y", "f", "g")),
                                          Call("Fig4", ("z", "f", "g"))))),
              Return(Var("x"))],
             [Return(Var("x"))])
    pw = P("PwChain", ("x", "a", "b"),
           [DeclOp("UnaryOp", 1), Assert(Cmp("==", ClassOf("UnaryOp"),
                                             ClassConst("unary_pointwise"))),
            DeclVar("y"), Constrain("x", FunApp("UnaryOp", (Call("PwChain", ("y", "a", "b")),))),
            Return(Var("x"))],
           [Constrain("x", App(B2, (Var("a"), Var("b")))), Return(Var("x"))])
    prog = program(unary_chain, fig4, pw)
    g = pm.Graph()
    a, b = g.input("a", shape=(2,)), g.input("b")
    mm = g.apply(B2, a, b)
    u1 = g.apply(U1, mm)
    u2 = g.apply(U1, u1)
    v = g.apply(V1, u2)
    it = Interpreter(prog)
    # f(UnaryChain(x, f)) first: the tower is taken as deep as it goes
    assert it.match("UnaryChain", u2) == ({"x": mm}, {"f": U1})
    assert it.match("UnaryChain", v) == ({"x": u2}, {"f": V1})
    assert it.match("UnaryChain", a) is None
    assert it.match("Fig4", u2) == ({"x": u2}, {"f": U1, "g": B2})
    assert it.match("Fig4", a) == ({"x": a}, {})
    assert it.match("PwChain", u2) == ({"x": u2, "a": a, "b": b}, {})
    assert it.match("PwChain", v) is None  # V1 is not unary_pointwise
    assert it.check_binding("UnaryChain", u2, {"x": u1}, {"f": U1})
    assert not it.check_binding("UnaryChain", u2, {"x": a}, {"f": U1})
    compare(prog, g, engines, gendir)


def test_left_recursion(engines, gendir):
    """``P(x) = P(x) || U1(x)``, left recursion: the search never ends, so at a U1
    node the answer is out of fuel; at any other node the root-operator
    index answers no match (no derivation can exist there). ``Q(x) =
    Q(x)`` has no match anywhere."""
    prog = program(P("Loop", ("x",), [Return(Call("Loop", ("x",)))],
                     [Return(App(U1, (Var("x"),)))]),
                   P("Never", ("x",), [Return(Call("Never", ("x",)))]))
    g = pm.Graph()
    x = g.input("x")
    u = g.apply(U1, x)
    b = g.apply(B2, u, x)
    it = Interpreter(prog)
    assert it.root_operators() == {"Loop": frozenset({U1}), "Never": frozenset()}
    assert it.outcome("Loop", u) == (OUT_OF_FUEL,)
    assert it.outcome("Loop", x) == it.outcome("Loop", b) == ("no match",)
    assert all(it.outcome("Never", n) == ("no match",) for n in g.nodes)
    with pytest.raises(InterpOutOfFuel):
        it.match("Loop", b)  # the search alone does not end
    compare(prog, g, engines, gendir)


def test_left_recursion_beside_a_class_guarded_operator(engines, gendir):
    """``P(x) = P(x) || F() ; assert F.op_class == unary_pointwise`` (a case
    the random tests found): at an input the search never ends, so the
    interpreter, whose index does not read the class guard, runs out of
    fuel; the engines' index (``RootIndex``, class-guarded) excludes the
    input and both engines answer no match, a decided answer ``compare``
    accepts there and only there."""
    prog = program(P("P0", ("x",), [Return(Call("P0", ("x",)))],
                     [DeclOp("F", 0, 1), Let("t", FunApp("F", ())),
                      Assert(Cmp("==", ClassOf("F"), ClassConst("unary_pointwise")), False),
                      Return(AliasRef("t"))]))
    g = pm.Graph()
    x = g.input("x")
    assert Interpreter(prog).outcome("P0", x) == (OUT_OF_FUEL,)
    mod = load(to_source(prog), gendir, f"pypm_dsl_case_{os.getpid()}_{next(_names)}")
    assert not _engine_index_admits(mod.P0, x)
    assert all(engine_outcome(mod.P0, x, e, 1000) == ("no match",) for e in engines)
    compare(prog, g, engines, gendir)


def test_guards_are_three_valued_and_strict(engines, gendir):
    def guarded(name, guard, negated=False):
        return P(name, ("x",), [Assert(guard, negated), Return(App(U1, (Var("x"),)))])
    rank1 = Cmp("==", Rank("x"), Num(1))
    is_f32 = Cmp("==", DTypeOf("x"), DTypeConst("f32"))
    prog = program(
        guarded("Rank1OrF32", Or(rank1, is_f32)),
        guarded("NotF32", is_f32, negated=True),
        guarded("ShapeNot", ShapeIs("x", (None, 3), negated=True)),
        guarded("Big", Cmp("<", Bin("*", Rank("x"), Num(1 << 31)), Num(5))),
        guarded("BigSum", Cmp("<=", Bin("+", Rank("x"), Num((1 << 61) - 1)), Num(1 << 61))),
        guarded("TrueOr", Or(Cmp("<", Num(1), Num(2)), rank1)),
        guarded("Chain", Chain(Num(0), (("<", Rank("x")), ("<=", Dim("x", -1)),
                                        ("!=", Neg(Rank("x")))))),
    )
    g = pm.Graph()
    r = {k: g.apply(U1, g.input(k, shape=s, dtype=d)) for k, s, d in [
        ("known", (2, 3), pm.f32), ("nothing", None, None), ("rank1", (5,), None),
        ("i8", (4,), pm.i8), ("partial", (None, 3), pm.f16), ("wide", (5, 1), None)]}
    it = Interpreter(prog)

    def ok(name, key):
        return it.match(name, r[key]) is not None
    assert ok("Rank1OrF32", "known") and ok("Rank1OrF32", "i8")
    assert not ok("Rank1OrF32", "rank1")  # true or unknown is unknown
    assert not ok("Rank1OrF32", "nothing")
    assert ok("NotF32", "i8") and not ok("NotF32", "known") and not ok("NotF32", "nothing")
    assert not ok("ShapeNot", "known") and ok("ShapeNot", "wide") and not ok("ShapeNot", "partial")
    assert not ok("ShapeNot", "rank1")  # rank == 2 is false but shape[1] is unknown: strict
    assert not ok("Big", "known")  # 2 * 2^31: * out of range is unknown
    assert ok("BigSum", "rank1") and not ok("BigSum", "known")
    assert ok("TrueOr", "nothing")  # Python decides `1 < 2 or g` when tracing
    assert ok("Chain", "known") and not ok("Chain", "wide")  # 0 < 2 <= 3 != -2; 2 <= 1
    compare(prog, g, engines, gendir)


def test_every_form_renders_and_imports(engines, gendir):
    """One program with every form; the frontend accepts it and the text is
    what the data says."""
    prog = program(
        P("Q", ("x", "1f"), [Return(FunApp("f", (Var("x"),)))]),
        P("All", ("x", "y", "1f"),
          [DeclVar("v"), DeclOp("G", 2, 2), Let("t", App(T3, (Var("x"), Const(0), App(K0, ())))),
           Let("a", Var("y")),
           Assert(And(Not(Cmp(">=", Bin("-", Dim("x", 0), Num(1)), Rank("a", True))),
                      Or(Cmp("!=", DTypeOf("v", True), DTypeConst("i8")),
                         Cmp("<=", ClassOf("f"), ClassConst("other"))))),
           Constrain("a", FunApp("G", (AliasRef("t"), Var("v")))),
           Assert(ShapeIs("y", (2, None)), negated=True),
           Constrain("v", Call("Q", ("x", "f"), positional=1)),
           Return(App(B2, (FunApp("f", (Var("x"),)), Var("y"))))]),
    )
    src = to_source(prog)
    assert "G = pm.Op(2, 2)" in src and "a <= G(t, v)" in src and "v <= Q(x, f=f)" in src
    assert "assert not (y.shape == (2, None))" in src
    assert "(v.elType != pm.i8)" in src and "a.shape.rank" in src
    g = pm.Graph()
    x = g.input("x", shape=(2, 2), dtype=pm.f32)
    v = g.apply(U1, x, dtype=pm.f32)  # v <= Q(x, f): v = f(x)
    y = g.apply(B2, g.apply(T3, x, 0, g.apply(K0)), v, shape=(4, 7))  # a = y <= G(t, v)
    root = g.apply(B2, v, y)  # return B2(f(x), y)
    it = Interpreter(prog)
    assert it.match("All", root) == ({"x": x, "y": y}, {"f": U1})
    assert it.match("All", g.apply(B2, v, g.apply(B2, x, v))) is None
    compare(prog, g, engines, gendir)


# ------------------------------------------- what the language refuses

_BAD = {
    "guard reads a local nothing binds": lambda: [
        DeclVar("bad"), Assert(Cmp("==", Rank("bad"), Num(1)))],
    "constraint on a variable nothing bound yet": lambda: [
        DeclVar("bad"), Constrain("bad", App(K0, ()))],
    "operator local never applied": lambda: [
        DeclOp("bad", 1), Assert(Cmp("==", ClassOf("bad"), ClassConst("other")))],
}


@in_batches
@_settings(0.05)
@given(st.data())
def test_ill_formed_programs_are_refused(gendir, data):
    """A random well-formed program with one statement the language forbids
    (by the rules tests/dsl_strategies.py checks on the surface syntax)
    inserted into one alternate: the frontend refuses it with a
    PatternError naming the pattern and the file, when that pattern is
    matched."""
    prog = data.draw(programs(templates=False), label="program")
    name = data.draw(st.sampled_from(sorted(prog.patterns)), label="pattern")
    d = prog.patterns[name]
    i = data.draw(st.integers(0, len(d.alternates) - 1), label="alternate")
    what = data.draw(st.sampled_from(sorted(_BAD)), label="violation")
    d.alternates[i] = tuple(_BAD[what]()) + d.alternates[i]
    assert problems(prog), what
    source = to_source(prog)
    mod = load(source, gendir, f"pypm_dsl_bad_{os.getpid()}_{next(_names)}")
    g = pm.Graph()
    with pytest.raises(pm.PatternError) as e:
        pm.match(getattr(mod, name), g.input("a"), engine="reference")
    assert "bad" in str(e.value) and mod.__file__ in str(e.value), (str(e.value), source)
