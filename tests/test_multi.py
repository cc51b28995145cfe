"""Multi-root patterns (theories/Multi.v): the DSL (a pattern returning a
tuple of roots), both engines with identical answers, the declarative
relation ``Multi.mmatches`` checked on every match, and "every match once"
for ``match_all`` — on hand-written examples (QKV, gate/up) and on random
tables and graphs (differential)."""
import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pypm_verified.core import PVar

import pypm_verified as pm
from pypm_verified import core
from pypm_verified.engines import multi
from pypm_verified.errors import OutOfFuel, PatternError
from strategies import _fix_guard, graphs, guards, programs

ENGINES = ("verified", "reference")
SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pm.op
def Lin(x, w, b): return 1


@pm.op
def Relu(x): return 1


@pm.op
def Mul(x, y): return 1


@pm.pattern
def QKV(x, wq, bq, wk, bk, wv, bv):
    assert wq.shape[0] == wk.shape[0]      # cross-root: no single root binds wq and wk
    assert x.shape.rank == 2               # root 1's own guard
    return Lin(x, wq, bq), Lin(x, wk, bk), Lin(x, wv, bv)


@pm.pattern
def Act(y):
    return Relu(y)


@pm.pattern
def Act(y):                                 # an alternate, inside a root
    F = pm.Op(1, 1)
    assert F.op_class == pm.opclass("unary_pointwise")
    return F(y)


@pm.pattern
def GateUp(x, wg, wu, g, u):
    a = pm.var()                            # a local shared by the roots
    g <= Lin(x, wg, a)
    u <= Lin(x, wu, a)
    return Mul(Act(g), u), g


def qkv_graph(n_layers=2, extra=True):
    g = pm.Graph()
    x = g.input("x", shape=(4, 8), dtype=pm.f32)
    outs = []
    for layer in range(n_layers):
        ws = [g.input(f"w{layer}{i}", shape=(8, 8), dtype=pm.f32) for i in range(3)]
        bs = [g.input(f"b{layer}{i}", shape=(8,), dtype=pm.f32) for i in range(3)]
        ls = [g.apply(Lin, x, w, b, shape=(4, 8), dtype=pm.f32) for w, b in zip(ws, bs)]
        outs.append(ls)
        x = g.apply(Relu, g.apply(Mul, ls[0], g.apply(Mul, ls[1], ls[2])), shape=(4, 8),
                    dtype=pm.f32)
        if extra:  # a Lin that shares no input with the others
            g.apply(Lin, g.apply(Relu, x, shape=(4, 8), dtype=pm.f32), ws[0], bs[0],
                    shape=(4, 8), dtype=pm.f32)
    return g, outs


@pytest.mark.parametrize("engine", ENGINES)
def test_qkv_three_roots(engine):
    g, layers = qkv_graph()
    prog = multi.program(QKV)
    assert len(prog.roots) == 3 and prog.guard != core.GTrue()
    for ls in layers:
        m = pm.match(QKV, ls[0], engine=engine)
        assert m is not None and m.roots == tuple(ls)
        assert m.bindings["x"] is ls[0].args[0]
        assert [m.bindings[k] for k in ("wq", "wk", "wv")] == [n.args[1] for n in ls]
        assert multi.check(prog, m)
    # the Lin over the layer output has no partner sharing its input
    lone = [n for n in g.nodes if n.label == Lin.symbol and n not in sum(layers, [])]
    assert lone and all(pm.match(QKV, n, engine=engine) is None for n in lone)


def test_qkv_engines_agree_everywhere():
    g, _ = qkv_graph(3)
    for node in g.nodes:
        a = pm.match(QKV, node, engine="verified")
        b = pm.match(QKV, node, engine="reference")
        assert a == b
        if a is not None:
            assert multi.check(multi.program(QKV), a)


@pytest.mark.parametrize("engine", ENGINES)
def test_match_all_each_set_once(engine):
    """The pattern is symmetric (any permutation of a layer's three Lins
    matches); match_all reports each layer once."""
    g, layers = qkv_graph(3)
    found = pm.match_all([QKV], g, engine=engine)
    assert [m.roots for _, _, m in found] == [tuple(ls) for ls in layers]
    # each of the other two Lins of a layer, visited first, also matches
    for ls in layers:
        for n in ls[1:]:
            m = pm.match(QKV, n, engine=engine)
            assert m is not None and set(m.roots) == set(ls)


@pytest.mark.parametrize("engine", ENGINES)
def test_cross_root_guard(engine):
    g = pm.Graph()
    x = g.input("x", shape=(4, 8), dtype=pm.f32)
    ws = [g.input(f"w{i}", shape=(s, 8), dtype=pm.f32) for i, s in enumerate((8, 6, 8))]
    b = g.input("b", shape=(8,), dtype=pm.f32)
    ls = [g.apply(Lin, x, w, b) for w in ws]
    m = pm.match(QKV, ls[0], engine=engine)
    # wq.shape[0] == wk.shape[0]: root 2 cannot be ls[1] (6 rows)
    assert m is not None and m.roots == (ls[0], ls[2], ls[1])


@pytest.mark.parametrize("engine", ENGINES)
def test_gate_up_locals_alternates_calls(engine):
    g = pm.Graph()
    x = g.input("x", shape=(4, 8), dtype=pm.f32)
    b = g.input("b", shape=(8,), dtype=pm.f32)
    wg, wu = g.input("wg", shape=(8, 8)), g.input("wu", shape=(8, 8))
    gate = g.apply(Lin, x, wg, b)
    up = g.apply(Lin, x, wu, b)
    out = g.apply(Mul, g.apply(Relu, gate), up)
    m = pm.match(GateUp, out, engine=engine)
    assert m is not None and m.roots == (out, gate)
    assert m.bindings == {"x": x, "wg": wg, "wu": wu, "g": gate, "u": up}
    assert multi.check(multi.program(GateUp), m)
    assert pm.match(GateUp, gate, engine=engine) is None


def test_verified_equals_reference_on_gate_up():
    g = pm.Graph()
    x = g.input("x", shape=(4, 8))
    b = g.input("b", shape=(8,))
    ws = [g.input(f"w{i}") for i in range(4)]
    lins = [g.apply(Lin, x, w, b) for w in ws]
    outs = [g.apply(Mul, g.apply(U, lins[i]), lins[j])
            for U, (i, j) in ((Relu, (0, 1)), (Relu, (2, 3)), (Relu, (1, 0)))]
    for node in g.nodes:
        assert pm.match(GateUp, node) == pm.match(GateUp, node, engine="reference")
    assert [m.roots for _, _, m in pm.match_all([GateUp], g)] == \
        [m.roots for _, _, m in pm.match_all([GateUp], g, engine="reference")]


def test_multi_root_errors():
    @pm.pattern
    def One(x):
        return (Relu(x),)

    with pytest.raises(PatternError, match="at least two roots"):
        One.program

    @pm.pattern
    def Two(x, y):
        return Relu(x), Relu(y)

    @pm.pattern
    def Caller(x, y):
        return Mul(Two(x, y), x)

    with pytest.raises(PatternError, match="cannot be called"):
        Caller.program


# ------------------------------------------------------------ differential


@st.composite
def multi_problems(draw):
    g = draw(graphs(max_nodes=8))
    root = g.nodes[draw(st.integers(0, len(g) - 1))]
    prog = draw(programs(root))
    k = draw(st.integers(2, 3))
    roots = [prog.root] + [draw(st.integers(0, len(prog.defs) - 1)) for _ in range(k - 1)]
    n = max(prog.defs[r].nparams for r in roots)
    m = max(prog.defs[r].nfparams for r in roots)
    b = frozenset().union(*(core.binds(prog.defs[r].body, prog.defs) for r in roots))
    fb = frozenset().union(*(core.fbinds(prog.defs[r].body, prog.defs) for r in roots))
    guard = _fix_guard(draw(guards(range(n), range(m))), b, fb)
    return g, root, multi.MultiProgram(defs=prog.defs, roots=roots, n=n, m=m, guard=guard)


FUEL = 20_000


def outcome(f):
    try:
        return f()
    except OutOfFuel:
        return "out of fuel"


@SETTINGS
@given(multi_problems())
def test_engines_agree_on_random_multi_root(prob):
    g, root, prog = prob
    a = outcome(lambda: multi.match_multi(prog, root, "verified", FUEL))
    b = outcome(lambda: multi.match_multi(prog, root, "reference", FUEL))
    assert a == b
    if isinstance(a, multi.MultiMatch):
        assert a.root is root and multi.check(prog, a)


@pytest.mark.slow
@SETTINGS
@given(multi_problems())
def test_no_match_means_no_tuple(prob):
    """Failure soundness, checked by brute force over every tuple of
    distinct nodes (first root at the visited node) and every assignment of
    the shared variables the roots' bindings can take."""
    g, root, prog = prob
    a = outcome(lambda: multi.match_multi(prog, root, "verified", FUEL))
    if a is not None:
        return
    k = len(prog.roots)
    others = [n for n in g.nodes if n is not root]
    # declarative search: a tuple matches iff some solution of the roots in
    # sequence satisfies the guard (reference.solutions enumerates them all)
    for rest in itertools.permutations(others, k - 1):
        ts = [root, *rest]
        try:
            s = multi._run(prog, ts, True, 10 * FUEL)
        except OutOfFuel:
            continue  # undecided within the budget
        assert s is None, (ts, s)


@SETTINGS
@given(multi_problems())
def test_match_all_every_set_once(prob):
    g, _, prog = prob
    a = outcome(lambda: multi.match_all_multi(prog, g, "verified", FUEL, order="written"))
    b = outcome(lambda: multi.match_all_multi(prog, g, "reference", FUEL, order="written"))
    assert a == b
    # root_order's order: the same sets (Multi.mmatches_perm), in both engines
    c = outcome(lambda: multi.match_all_multi(prog, g, "verified", FUEL))
    d = outcome(lambda: multi.match_all_multi(prog, g, "reference", FUEL))
    assert c == d
    if isinstance(a, list) and isinstance(c, list):
        assert {frozenset(t.id for t in m.roots) for m in a} == \
            {frozenset(t.id for t in m.roots) for m in c}
        assert all(multi.check(prog, m) for m in c)
    if isinstance(a, list):
        sets = [frozenset(t.id for t in m.roots) for m in a]
        assert len(sets) == len(set(sets))          # Multi.match_all_multi_once
        for m in a:
            assert multi.check(prog, m)
        # Multi.match_all_multi_sets: every node's match is reported or
        # has the set of an entry of an earlier node
        for node in g.nodes:
            r = multi.match_multi(prog, node, "verified", FUEL)
            if r is not None:
                s = frozenset(t.id for t in r.roots)
                assert any(e == r for e in a) or any(
                    frozenset(t.id for t in e.roots) == s and e.root.id < node.id for e in a)


@SETTINGS
@given(multi_problems())
def test_upward_traversal_agrees_with_index_candidates(prob):
    """Upward traversal (``Multi.match_multi``: later roots among the users
    of bound nodes) and the index-only search (``Multi.match_multi_idx``)
    give the same answer at every node, in both engines: both try
    candidates in id order and the users candidates contain every node that
    can match (``Multi.up_cands_complete``)."""
    g, _, prog = prob
    idx = prog.reordered(prog.order, index_only=True)
    for node in g.nodes:
        a = outcome(lambda: multi.match_multi(prog, node, "verified", FUEL))
        b = outcome(lambda: multi.match_multi(idx, node, "verified", FUEL))
        c = outcome(lambda: multi.match_multi(idx, node, "reference", FUEL))
        assert a == b == c


def test_anchor_and_users():
    """``Multi.anchor`` finds a later root's shared argument below an
    earlier root; the candidates are that node's users; a root sharing no
    variable with the earlier ones has no anchor (index fallback)."""
    @pm.pattern
    def Pair(x, w, b, v):
        return Relu(Lin(x, w, b)), Mul(x, v)

    prog = multi.program(Pair)
    a = multi.anchor(prog.bodies[:1], prog.bodies[1])
    assert a is not None and a[0] == 0 and a[2] == 0
    g = pm.Graph()
    x, w, b, v = (g.input(s) for s in "xwbv")
    r = g.apply(Relu, g.apply(Lin, x, w, b))
    m1, m2 = g.apply(Mul, x, v), g.apply(Mul, v, x)
    us = multi.users(g)
    assert [g.nodes[u] for u in us[x.id]] == [n for n in g.nodes if x in n.args]
    for engine in ("verified", "reference"):
        m = pm.match(Pair, r, engine=engine)
        assert m is not None and m.roots == (r, m1)
    assert multi.anchor([core.PApp(0, (core.PVar(1),))], core.PApp(0, (core.PVar(2),))) is None


def test_spec_candidates_mode_word():
    """The spec's optional last word selects the candidates (0: upward
    traversal, 1: index only); anything else is a malformed spec."""
    from pypm_verified.engines import binding
    from pypm_verified.errors import EngineError

    @pm.pattern
    def Pair2(x, w, b):
        return Relu(x), Lin(x, w, b)

    g = pm.Graph()
    x, w, b = (g.input(s) for s in "xwb")
    r, lin = g.apply(Relu, x), g.apply(Lin, x, w, b)
    prog = multi.program(Pair2)
    for mode in (0, 1):
        spec = list(prog.spec) + [mode]
        entries = binding.match_multi(g, prog.defs, prog.roots, spec, r.id)
        assert entries[0][2] == [r.id, lin.id]
    for bad, msg in (([2], "candidates mode 2"), ([0, 0], "1 trailing words")):
        with pytest.raises(EngineError, match=msg):
            binding.match_multi(g, prog.defs, prog.roots, list(prog.spec) + bad, r.id)


def test_spec_with_fewer_shared_variables_than_a_root_is_ill_formed(lib):
    """A root reads the shared variables as its parameters, so a spec with
    fewer shared term (operator) variables than a root's definition has
    parameters is ill formed (``Multi.mp_scoped``, what makes the
    multi-root theorems hold under any substitution); the error names the
    root and both counts."""
    from pypm_verified.engines import binding, serialize
    from pypm_verified.errors import EngineError

    F = 0
    defs = core.infer_binds([
        core.PDef(2, 0, core.PApp(Lin.symbol, (PVar(0), PVar(1), PVar(1)))),
        core.PDef(1, 1, core.PFunVar(F, (PVar(0),))),
    ])
    g = pm.Graph()
    x, w = g.input("x"), g.input("w")
    lin, r = g.apply(Lin, x, w, w), g.apply(Relu, x)
    good = serialize.encode_multi_spec(2, 1, (0, 1), core.GTrue())
    entries = binding.match_multi(g, defs, (0, 1), good, lin.id)
    assert entries[0][2] == [lin.id, r.id]
    for n, m, msg in ((1, 1, r"root 0 \(definition 0\) has 2 term and 0 operator parameters, "
                              r"more than the spec's 1 term and 1 operator variables"),
                      (2, 0, r"root 1 \(definition 1\) has 1 term and 1 operator parameters, "
                              r"more than the spec's 2 term and 0 operator variables")):
        bad = serialize.encode_multi_spec(n, m, (0, 1), core.GTrue())
        with pytest.raises(EngineError, match=msg) as e:
            binding.match_multi(g, defs, (0, 1), bad, lin.id)
        assert e.value.code == lib.PYPM_E_ILL_FORMED
        # the same program is refused before either engine runs it
        with pytest.raises(ValueError, match=msg.replace("the spec's", "the").replace(
                r"operator variables", r"operator variables the roots share")):
            multi.MultiProgram(defs=defs, roots=(0, 1), n=n, m=m, guard=core.GTrue())


def test_dsl_multi_root_specs_share_every_root_parameter():
    """The DSL's multi-root patterns (the shipped QKV and GateUp fusions
    and this file's) give every root at most the shared variables as
    parameters, so the library accepts their specs; the fusions match."""
    pytest.importorskip("torch", reason="the shipped fusions declare torch operators")
    from pypm_verified.library import fusion

    for pat in (fusion.QKV, fusion.GateUp, QKV, GateUp):
        prog = multi.program(pat)
        for r in prog.roots:
            assert prog.defs[r].nparams <= prog.n and prog.defs[r].nfparams <= prog.m
    g = pm.Graph()
    x = g.input("x", shape=(4, 8), dtype=pm.f32)
    lins = [g.apply(fusion.Linear, x, g.input(f"w{i}", shape=(8, 8), dtype=pm.f32),
                    g.input(f"b{i}", shape=(8,), dtype=pm.f32), shape=(4, 8), dtype=pm.f32)
            for i in range(3)]
    m = pm.match(fusion.QKV, lins[0], engine="verified")
    assert m is not None and m.roots == tuple(lins)
    m = pm.match(fusion.GateUp, lins[0], engine="verified")
    assert m is not None and m.roots == tuple(lins[:2])


# ------------------------------ every set (match_all once per set of nodes)


@pm.op
def Exp(x): return 1


@pm.op
def Neg(x): return 1


@pm.pattern
def QK(x, wq, bq, wk, bk):
    return Lin(x, wq, bq), Lin(x, wk, bk)


@pm.pattern
def Indep(x, y):
    return Exp(x), Neg(y)


def sets_of(found):
    return [frozenset(t.id for t in m.roots) for _, _, m in found]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("order", ["written", "auto"])
def test_match_all_reports_sibling_sets(engine, order):
    """Three Lins over one x: QK matches each of the three pairs; every
    pair is reported once, at its smaller node (both roots are Lin, so
    either node can be the first root)."""
    g = pm.Graph()
    x, b = g.input("x"), g.input("b")
    lins = [g.apply(Lin, x, g.input(f"w{i}"), b) for i in range(3)]
    found = multi.match_all_multi(QK, g, engine=engine, order=order)
    got = [frozenset(t.id for t in m.roots) for m in found]
    want = [frozenset((a.id, c.id)) for a, c in itertools.combinations(lins, 2)]
    assert sorted(got, key=sorted) == sorted(want, key=sorted) and len(got) == len(set(got))
    for m in found:
        assert multi.check(multi.program(QK), m)
        assert m.root.id == min(t.id for t in m.roots)
    assert sets_of(pm.match_all([QK], g, engine=engine)) == got if order == "auto" else True


@pytest.mark.parametrize("engine", ENGINES)
def test_match_all_reports_independent_roots(engine):
    """Roots sharing no variable: every (Exp, Neg) pair is a set."""
    g = pm.Graph()
    a, b, c = (g.input(s) for s in "abc")
    e1, e2, n1 = g.apply(Exp, a), g.apply(Exp, b), g.apply(Neg, c)
    found = pm.match_all([Indep], g, engine=engine)
    assert sorted(sorted(s) for s in sets_of(found)) == [sorted((e1.id, n1.id)),
                                                          sorted((e2.id, n1.id))]
    assert pm.match(Indep, e2, engine=engine).roots == (e2, n1)


def brute_force_sets(prog, g, limit=4000):
    """Every set of distinct nodes that ``prog`` matches, by a direct reading
    of ``Multi.mmatches``: every substitution of the shared variables (each
    unbound or a node; operator variables unbound or a label of the graph),
    every tuple of distinct nodes, each root decided by the independent
    declarative decider, then the cross-root guard. Also, for each set, the
    smallest first node of a matching tuple. None when too many
    substitutions."""
    from pypm_verified.engines import declarative
    nodes = list(g.nodes)
    labels = sorted({n.label for n in nodes})
    if (len(nodes) + 1) ** prog.n * (len(labels) + 1) ** prog.m > limit:
        return None
    dec = declarative._Decider(prog.defs, g)
    found = {}
    for tv in itertools.product([None, *nodes], repeat=prog.n):
        theta = {v: t for v, t in enumerate(tv) if t is not None}
        for fv in itertools.product([None, *labels], repeat=prog.m):
            phi = {F: f for F, f in enumerate(fv) if f is not None}
            if not declarative.guard_holds(prog.guard, theta, phi, g):
                continue
            per_root = [[t for t in nodes if dec.holds(b, theta, phi, t)] for b in prog.bodies]
            for ts in itertools.product(*per_root):
                if len({t.id for t in ts}) == len(ts):
                    key = frozenset(t.id for t in ts)
                    found[key] = min(found.get(key, ts[0].id), ts[0].id)
    return found


@st.composite
def shaped_multi_problems(draw):
    """A graph and a multi-root pattern whose roots are shaped like nodes of
    it (so that it often matches, several sets at once): each root a tree of
    the node's operators (or an operator variable, or an alternate) down to
    shared variables, one per node below (so roots over common inputs share
    them; sometimes a variable is reused where it cannot match), and
    sometimes a cross-root guard."""
    g = draw(graphs(max_nodes=7))
    k = draw(st.integers(2, 3))
    picks = [g.nodes[draw(st.integers(0, len(g) - 1))] for _ in range(k)]
    var_of, used_f = {}, []
    labels = sorted({n.label for n in g.nodes})

    def var(node):
        if node.id not in var_of:
            if len(var_of) < 3 and draw(st.integers(0, 4)):
                var_of[node.id] = len(var_of)
            else:
                return PVar(draw(st.integers(0, max(len(var_of), 1) - 1)))
        return PVar(var_of[node.id])

    def shape(node, depth, top=False):
        c = draw(st.integers(0, 9))
        if not top and (depth == 0 or c <= 3):
            return var(node)
        kids = tuple(shape(a, depth - 1) for a in node.args)
        if c == 4:
            used_f.append(0)
            return core.PFunVar(0, kids)
        p = core.PApp(node.label, kids)
        if c == 5:
            other = core.PApp(draw(st.sampled_from(labels)), kids)
            p = core.PAlt(other, p) if draw(st.booleans()) else core.PAlt(p, other)
        return p

    bodies = [shape(t, draw(st.integers(1, 2)), top=True) for t in picks]
    n, m = max(len(var_of), 1), 1 if used_f else 0
    defs = core.infer_binds([core.PDef(n, m, b) for b in bodies])
    guard = core.GTrue()
    if len(var_of) >= 2 and draw(st.integers(0, 3)) == 0:
        x, y = draw(st.permutations(range(len(var_of))))[:2]
        guard = core.GEq(core.EAttr(x, core.RANK), core.EAttr(y, core.RANK))
        b = frozenset().union(*(core.binds(d.body, defs) for d in defs))
        guard = _fix_guard(guard, b, frozenset())
    return g, multi.MultiProgram(defs=defs, roots=list(range(k)), n=n, m=m, guard=guard)


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.one_of(shaped_multi_problems(), multi_problems().map(lambda p: (p[0], p[2]))))
def test_match_all_brute_force(prob):
    """``Multi.match_all_multi_sets`` / ``_once`` against brute force: with
    no run out of fuel, the sets reported are exactly the sets of distinct
    nodes that match, each once, at the smallest node that is the first
    (searched) root of a match with that set; both engines, both orders."""
    g, prog = prob
    want = brute_force_sets(prog, g)
    if want is None:
        return
    for engine in ENGINES:
        for order in ("written", "auto"):
            got = outcome(lambda: multi.match_all_multi(prog, g, engine, FUEL, order=order))
            if got == "out of fuel":
                continue
            sets = [frozenset(t.id for t in m.roots) for m in got]
            assert len(sets) == len(set(sets))
            assert set(sets) == set(want), (engine, order)
            assert all(multi.check(prog, m) for m in got)
            if order == "written":
                assert {s: m.root.id for s, m in zip(sets, got)} == want
