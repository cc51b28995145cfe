"""Every entry point gives the same answer: ``pm.match`` (both
engines, and the simulated one), ``pm.match_all``, ``PatternSet`` (what the
PyTorch driver uses) and the driver itself.

The answer for a root that cannot have a node's operator is "no match", a
proved no (``RootIndex.root_index_sound``; the library's ``Entry.match_root``
and the reference engine's ``first_solution`` consult the root-operator index
before matching), even where the search would never end:
``P(x) = P(x) ‖ Relu(x)`` at a MatMul. Where the index lets the root match,
the machine decides, and a search that never ends is ``OutOfFuel`` everywhere.

Also: the index of ``core.root_symbols`` is the Coq function's
(``tests/machine.py``'s transcription of ``RootIndex.root_index``), and the
library's candidates (``pypm_candidates``, ``Entry.set_candidates``) are both.
"""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pypm_verified as pm
from pypm_verified import core
from pypm_verified.core import PApp, PCall, PDef, PVar, Program
from pypm_verified.engines import binding
from pypm_verified.engines.matching import PatternSet
import machine
from strategies import chain_graphs, graphs, programs

FUEL = 2000


@pm.op
def MatMul(x, y):
    return 1


@pm.op
def Relu(x):
    return 1


@pm.op
def Neg(x):
    return 1


# P(x) = P(x) ‖ Relu(x): the case (left recursion under an alternate)
@pm.pattern
def P(x):
    return P(x)


@pm.pattern
def P(x):  # noqa: F811
    return Relu(x)


# right recursion: Relu(x) ‖ RightP(x)
@pm.pattern
def RightP(x):
    return Relu(x)


@pm.pattern
def RightP(x):  # noqa: F811
    return RightP(x)


# mutual recursion at the root: A = B ‖ Relu, B = A ‖ Neg
@pm.pattern
def A(x):
    return B(x)


@pm.pattern
def A(x):  # noqa: F811
    return Relu(x)


@pm.pattern
def B(x):
    return A(x)


@pm.pattern
def B(x):  # noqa: F811
    return Neg(x)


# a call at the root
@pm.pattern
def JustRelu(x):
    return Relu(x)


@pm.pattern
def CallsRelu(x):
    return JustRelu(x)


# a guard over the recursive alternate
@pm.pattern
def Guarded(x):
    assert x.rank == 2
    return Guarded(x)


@pm.pattern
def Guarded(x):  # noqa: F811
    return Relu(x)


# an operator variable at the root: the root may be any operator
@pm.pattern
def OpRec(x, f):
    return OpRec(x, f)


@pm.pattern
def OpRec(x, f):  # noqa: F811
    return f(x)


# a variable at the root, recursion first
@pm.pattern
def LeftRec(x):
    return LeftRec(x)


@pm.pattern
def LeftRec(x):  # noqa: F811
    return x


# the loop: no derivation at all
@pm.pattern
def Loop(x):
    return Loop(x)


OOF = "out of fuel"


def graph():
    g = pm.Graph()
    a, b = g.input("a", shape=(2, 2)), g.input("b", shape=(2, 2))
    mm = g.apply(MatMul, a, b)
    relu = g.apply(Relu, mm)
    neg = g.apply(Neg, relu)
    return g, {"input": a, "MatMul": mm, "Relu": relu, "Neg": neg}


# pattern -> {node kind: expected answer}; None = no match, OOF = out of fuel,
# a dict = the bindings
CASES = {
    P: {"MatMul": None, "Neg": None, "input": None, "Relu": OOF},
    RightP: {"MatMul": None, "Neg": None, "input": None, "Relu": {"x": "MatMul"}},
    A: {"MatMul": None, "input": None, "Relu": OOF, "Neg": OOF},
    B: {"MatMul": None, "input": None, "Relu": OOF, "Neg": OOF},
    CallsRelu: {"MatMul": None, "Neg": None, "Relu": {"x": "MatMul"}},
    Guarded: {"MatMul": None, "Neg": None, "Relu": OOF},
    OpRec: {"MatMul": OOF, "Relu": OOF, "Neg": OOF, "input": OOF},
    LeftRec: {"MatMul": OOF, "Relu": OOF, "input": OOF},
    Loop: {"MatMul": None, "Relu": None, "Neg": None, "input": None},
}


def answer(pattern, node, engine, fuel=FUEL):
    try:
        m = pm.match(pattern, node, engine=engine, fuel=fuel)
    except pm.OutOfFuel:
        return OOF
    return None if m is None else m.bindings


@pytest.mark.parametrize("pattern", list(CASES), ids=lambda p: p.name)
def test_match(engine, pattern):
    g, nodes = graph()
    for kind, want in CASES[pattern].items():
        got = answer(pattern, nodes[kind], engine)
        if isinstance(want, dict):
            want = {k: nodes[v] for k, v in want.items()}
        assert got == want, (pattern.name, kind)


@pytest.mark.parametrize("pattern", [P, RightP, A, CallsRelu, Guarded, Loop],
                         ids=lambda p: p.name)
def test_no_match_needs_no_fuel(engine, pattern):
    """The index answers before the machine: the same "no match" with one
    step of fuel, or with the default 2^26."""
    g, nodes = graph()
    for kind, want in CASES[pattern].items():
        if want is None:
            for fuel in (1, None):
                assert answer(pattern, nodes[kind], engine, fuel) is None


def test_match_all(engine):
    """match_all lists exactly the nodes where match answers, and raises
    OutOfFuel exactly where match does."""
    g, nodes = graph()
    kind_of = {n.id: k for k, n in nodes.items()}
    for pattern, cases in CASES.items():
        if OOF in cases.values():
            with pytest.raises(pm.OutOfFuel):
                pm.match_all([pattern], g, engine=engine, fuel=FUEL)
            continue
        found = pm.match_all([pattern], g, engine=engine, fuel=FUEL)
        got = {kind_of[r.id] for _, r, _ in found}
        assert got == {k for k, v in cases.items() if v is not None}, pattern.name
    # the graph: no Relu, so P never runs out of fuel
    h = pm.Graph()
    h.apply(MatMul, h.input("a"), h.input("b"))
    assert pm.match_all([P, RightP, A, B, Guarded, Loop], h, engine=engine) == []


def test_pattern_set(engine):
    """PatternSet (the driver's matcher): candidates are the patterns whose
    index admits the label, and skipping the others loses nothing."""
    g, nodes = graph()
    pats = list(CASES)
    pset = PatternSet(pats, engine=engine, fuel=FUEL)
    for kind, node in nodes.items():
        cands = pset.candidates(node.label)
        for i, p in enumerate(pats):
            want = CASES[p].get(kind, "skip")
            if want == "skip":
                continue
            if i not in cands:
                assert want is None, (p.name, kind)
                continue
            try:
                m = pset.match(i, node)
                got = None if m is None else m.bindings
            except pm.OutOfFuel:
                got = OOF
            exp = {k: nodes[v] for k, v in want.items()} if isinstance(want, dict) else want
            assert got == exp, (p.name, kind)
    mm = nodes["MatMul"].label
    assert pset.candidates(mm) == (pats.index(OpRec), pats.index(LeftRec))


def test_torch_driver(lib):
    """The PyTorch driver on a model with a matmul and no relu: P is never
    tried (not a candidate at any node) and nothing fires; with either
    engine."""
    torch = pytest.importorskip("torch")
    from pypm_verified.torch import ops
    from pypm_verified.torch.driver import Driver
    from pypm_verified.torch.pipeline import copy_program

    @pm.pattern
    def TP(x):
        return TP(x)

    @pm.pattern
    def TP(x):  # noqa: F811
        return ops.Relu(x)

    @pm.rule(TP)
    def never(x):
        return None

    class M(torch.nn.Module):
        def forward(self, x, w):
            return torch.mm(x, w)

    with torch.no_grad():
        ep = torch.export.export(M(), (torch.randn(3, 4), torch.randn(4, 5)))
        ep = ep.run_decompositions({})
    for engine in ("verified", "reference"):
        gm = copy_program(ep).graph_module
        report = Driver(gm, [TP], engine=engine).run()
        assert report.firings == {} and report.matches == {}
        assert report.attempts == 0
        mm = [n for n in gm.graph.nodes if n.target == torch.ops.aten.mm.default]
        assert len(mm) == 1


# ------------------------------------------------------------- the index


def chain(n):
    """Definition i calls i+1 at the root; the last is Neg(x)."""
    defs = [PDef(1, 0, PCall(i + 1, (0,)), (0,)) for i in range(n - 1)]
    defs.append(PDef(1, 0, PApp(Neg.symbol, (PVar(0),)), (0,)))
    return tuple(defs)


def test_index_rounds(engine):
    """Kleene iteration for at most 64 rounds (RootIndex.index_rounds): a
    chain of 64 calls at the root converges, a longer one gets "any" in
    every engine; the answers are the same either way."""
    assert core.INDEX_ROUNDS == machine.INDEX_ROUNDS == 64
    assert core.root_symbols(chain(64))[0] == {Neg.symbol}
    assert core.root_symbols(chain(65)) == (None,) * 65
    g, nodes = graph()
    for n in (64, 65):
        prog = Program(chain(n), 0)
        assert pm.match(prog, nodes["MatMul"], engine=engine) is None
        assert pm.match(prog, nodes["Neg"], engine=engine).substitution == {0: nodes["Relu"]}
        if engine == "verified" and binding.available():
            ps = PatternSet([prog], engine="verified")
            assert ps.candidates(nodes["MatMul"].label) == (() if n == 64 else (0,))


def _as_sets(idx, n):
    out = []
    for i in range(n):
        r = idx.get(i, machine.ANY)
        out.append(None if r == machine.ANY else frozenset(r[1]) | frozenset(r[2]))
    return tuple(out)


def test_index_examples():
    r, a, m = Relu.symbol, MatMul.symbol, Neg.symbol
    defs = (
        # P0 = Relu(x) ‖ P1(x); P1 = P1(x) ‖ Neg(x); P2 = F(x); P3 = P3(x); P4 = P0 ‖ MatMul
        PDef(1, 0, core.PAlt(PApp(r, (PVar(0),)), PCall(1, (0,)))),
        PDef(1, 0, core.PAlt(PCall(1, (0,)), PApp(m, (PVar(0),)))),
        PDef(1, 1, core.PFunVar(0, (PVar(0),))),
        PDef(1, 0, PCall(3, (0,))),
        PDef(2, 0, core.PAlt(PCall(0, (0,)), PApp(a, (PVar(0), PVar(1))))),
    )
    want = (frozenset({r, m}), frozenset({m}), None, frozenset(), frozenset({r, m, a}))
    assert core.root_symbols(defs) == want
    assert _as_sets(machine.root_index(defs), len(defs)) == want


@settings(max_examples=400, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(programs())
def test_index_is_the_coq_function(prog):
    """core.root_symbols (the reference engine's pre-check) is the
    transcription of RootIndex.root_index."""
    assert core.root_symbols(prog.defs) == _as_sets(machine.root_index(prog.defs),
                                                    len(prog.defs))


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.one_of(graphs(), chain_graphs()), programs())
def test_library_candidates(lib, g, prog):
    """The library's candidates (pypm_candidates) are the index's, for every
    root of a set and every label of a graph; and a non-candidate answers no
    match in both engines."""
    items = [Program(prog.defs, r) for r in range(len(prog.defs))]
    ver = PatternSet(items, engine="verified", fuel=FUEL)
    ref = PatternSet(items, engine="reference", fuel=FUEL)
    idx = core.root_symbols(prog.defs)
    for node in g.nodes:
        attrs = core.node_attrs(node)
        want = tuple(i for i in range(len(items)) if core.admits(idx[i], node.label, attrs))
        assert ver.candidates(node.label, g) == ref.candidates(node.label, g) == want
        for i in range(len(items)):
            if i not in want:
                assert ver.match(i, node) is None and ref.match(i, node) is None


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.one_of(graphs(), chain_graphs()), programs())
def test_library_candidates_at(lib, g, prog):
    """The library's shapes index (pypm_candidates_at, the extracted
    ``KidIndex.kid_index``) and its transcription (``core.kid_symbols``, the
    reference engine's) give the same candidates at every node; they are
    among the root index's; and a root left out has no match at the node
    in either engine (``Entry.candidates_at_sound``)."""
    items = [Program(prog.defs, r) for r in range(len(prog.defs))]
    ver = PatternSet(items, engine="verified", fuel=FUEL)
    ref = PatternSet(items, engine="reference", fuel=FUEL)
    for node in g.nodes:
        got = ver.candidates_at(node)
        assert got == ref.candidates_at(node)
        assert set(got) <= set(ver.candidates(node.label, g))
        for i in range(len(items)):
            if i not in got:  # no match (the matcher may run out of fuel first)
                assert _no_match(ver, i, node) and _no_match(ref, i, node)


def _no_match(ps, i, node) -> bool:
    try:
        return ps.match(i, node) is None
    except pm.OutOfFuel:
        return True


def test_shapes_index_examples():
    """The shapes index keeps alternatives apart and reads constraints:
    ``Neg(Relu(x)) ‖ MatMul(x, y)`` admits a ``Neg`` only over a ``Relu``
    (a position-wise union would admit any), and ``Neg(x) ; (Relu(y) ≈ x)``
    narrows its argument to ``Relu``; ``P = P(x)`` has no shape; a call
    reads its callee's shapes. Both implementations, both engines."""
    r, a, m = Relu.symbol, MatMul.symbol, Neg.symbol
    defs = (
        PDef(2, 0, core.PAlt(PApp(m, (PApp(r, (PVar(0),)),)), PApp(a, (PVar(0), PVar(1))))),
        PDef(2, 0, core.PConstr(PApp(m, (PVar(0),)), PApp(r, (PVar(1),)), 0)),
        PDef(1, 0, PCall(2, (0,))),
        PDef(2, 0, PCall(0, (0, 1))),
    )
    shapes = core.kid_symbols(defs)
    assert shapes[0] == ((frozenset({m}), (frozenset({r}),)), (frozenset({a}), (None, None)))
    assert shapes[1] == ((frozenset({m}), (frozenset({r}),)),)
    assert shapes[2] == ()
    assert shapes[3] == shapes[0]
    g = pm.Graph()
    x = g.input("x")
    neg_relu, neg_x = g.apply(Neg, g.apply(Relu, x)), g.apply(Neg, x)
    mm = g.apply(MatMul, x, x)
    items = [Program(defs, i) for i in range(len(defs))]
    engines = ["reference"] + (["verified"] if binding.available() else [])
    for engine in engines:
        ps = PatternSet(items, engine=engine, fuel=FUEL)
        assert ps.candidates(neg_x.label, g) == (0, 1, 3)
        assert ps.candidates_at(neg_x) == ()
        assert ps.candidates_at(neg_relu) == (0, 1, 3)
        assert ps.candidates_at(mm) == (0, 3)
        assert ps.match(0, neg_relu) is not None and ps.match(1, neg_relu) is not None


def test_class_guarded_root():
    """An operator variable at the root guarded by its class
    (``F(x) ; guard(F.op_class = c ∧ …)``, as ``LinearEpilog``): the index is
    the operators of class c (``RootIndex.guard_class``), in both engines
    and the transcription; the candidates of a node read its operator's
    class in the graph; a node of another class is no candidate and has no
    match, one of class c is and matches."""
    from strategies import B2, U1, V1
    unary = pm.opclass("unary_pointwise").code
    cond = core.GAnd(core.GTrue(), core.GEq(core.EConst(unary), core.EFAttr(0, core.OPCLASS)))
    by_class = core.PExistsF(0, core.PGuard(core.PFunVar(0, (PVar(0),)), cond))
    defs = (PDef(1, 0, by_class),
            PDef(2, 0, core.PAlt(by_class, PApp(B2.symbol, (PVar(0), PVar(1))))))
    want = (frozenset({(core.OPCLASS, unary)}), frozenset({B2.symbol, (core.OPCLASS, unary)}))
    assert core.root_symbols(defs) == want
    assert _as_sets(machine.root_index(defs), len(defs)) == want
    g = pm.Graph()
    x = g.input("x")
    u, v, b = g.apply(U1, x), g.apply(V1, x), g.apply(B2, x, x)
    items = [Program(defs, 0), Program(defs, 1)]
    engines = ["reference"] + (["verified"] if binding.available() else [])
    for engine in engines:
        ps = PatternSet(items, engine=engine, fuel=FUEL)
        assert ps.candidates(u.label, g) == (0, 1)
        assert ps.candidates(v.label, g) == ()
        assert ps.candidates(b.label, g) == (1,)
        assert ps.candidates(x.label, g) == ()
        assert ps.match(0, u) is not None and ps.match(1, u) is not None
        assert ps.match(0, v) is None and ps.match(1, v) is None
        assert ps.match(1, b) is not None
