"""Hypothesis strategies: small random graphs, well-formed core patterns of
the basic forms, and well-formed, well-scoped definition tables
(``core.Program``) using every form of the calculus: ∃ (fresh and
shadowing), ∃F, match constraints, operator variables, guards on term and
operator attributes (with constants at the arithmetic bounds), and calls
(recursive, mutually recursive, left-recursive, with repeated arguments)."""
from hypothesis import strategies as st

import pypm_verified as pm
from pypm_verified import core
from pypm_verified.core import symbols
from pypm_verified.core import (
    EAdd, EAttr, EConst, EFAttr, EMul, ESub, GAnd, GEq, GLt, GNot, GOr, GTrue, PAlt, PApp,
    PCall, PConstr, PDef, PExists, PExistsF, PFunVar, PGuard, PVar)


@pm.op
def K0():
    return 1


@pm.op(op_class="unary_pointwise")
def U1(x):
    return 1


@pm.op(op_class="other")
def V1(x):
    return 1


@pm.op
def B2(x, y):
    return 1


@pm.op(op_class="other")
def T3(x, y, z):
    return 1


OPS = (K0, U1, V1, B2, T3)
CONSTS = (0, 1)
ATTRS = (core.RANK, core.DTYPE, 100, 101, 200, 201)
FATTRS = (core.OPCLASS, 7)  # 7: an attribute no operator has
N_VARS = 3
BIG = (1 << 31) - 1, 1 << 31, (1 << 61) - 1, 1 << 61, -(1 << 61), core.VALUE_MAX, core.VALUE_MIN

shapes = st.one_of(st.none(), st.lists(st.one_of(st.none(), st.integers(0, 3)), max_size=2))
dtypes = st.one_of(st.none(), st.sampled_from([pm.f32, pm.i8]))


@st.composite
def graphs(draw, max_nodes=9):
    """A graph of inputs, constants and operator nodes (all reachable ids)."""
    g = pm.Graph()
    for i in range(draw(st.integers(1, 3))):
        g.input(f"in{i}", shape=draw(shapes), dtype=draw(dtypes))
    for _ in range(draw(st.integers(0, max_nodes))):
        if draw(st.integers(0, 5)) == 0:
            g.const(draw(st.sampled_from(CONSTS)))
            continue
        op = draw(st.sampled_from(OPS))
        args = [g.nodes[draw(st.integers(0, len(g) - 1))] for _ in range(op.arity)]
        g.apply(op, *args, shape=draw(shapes), dtype=draw(dtypes))
    return g


@st.composite
def chain_graphs(draw):
    """Graphs with unary chains (U1/V1) over small leaves, for recursion."""
    g = pm.Graph()
    leaves = [g.input("a", shape=(2,)), g.input("b"), g.apply(B2, g.input("c"), g.input("d"))]
    for _ in range(draw(st.integers(1, 4))):
        n = draw(st.sampled_from(leaves))
        for _ in range(draw(st.integers(0, 5))):
            n = g.apply(draw(st.sampled_from([U1, U1, V1])), n)
        leaves.append(n)
    return g


def consts():
    return st.one_of(st.integers(-2, 4), st.sampled_from(BIG)).map(EConst)


def exprs(vs, fvs=()):
    leaves = [consts()]
    if vs:
        leaves.append(st.builds(EAttr, st.sampled_from(sorted(vs)), st.sampled_from(ATTRS)))
    if fvs:
        leaves.append(st.builds(EFAttr, st.sampled_from(sorted(fvs)), st.sampled_from(FATTRS)))
    return st.recursive(
        st.one_of(leaves),
        lambda e: st.one_of(st.builds(EAdd, e, e), st.builds(ESub, e, e), st.builds(EMul, e, e)),
        max_leaves=3)


def guards(vs, fvs=()):
    e = exprs(vs, fvs)
    base = st.one_of(st.just(GTrue()), st.builds(GEq, e, e), st.builds(GLt, e, e))
    return st.recursive(
        base,
        lambda g: st.one_of(st.builds(GAnd, g, g), st.builds(GOr, g, g), st.builds(GNot, g)),
        max_leaves=3)


# ------------------------------------------------------- basic-form patterns

leaves = st.one_of(
    st.integers(0, N_VARS - 1).map(PVar),
    st.sampled_from(CONSTS).map(lambda c: PApp(symbols.const_symbol(c), ())),
    st.just(PApp(K0.symbol, ())))


def _apps(children_st):
    """PApp of an operator of arity >= 1 over the right number of children."""
    return st.builds(lambda op, kids: PApp(op.symbol, tuple(kids[:op.arity])),
                     st.sampled_from([o for o in OPS if o.arity]),
                     st.lists(children_st, min_size=3, max_size=3))


def _guarded(p_st):
    """``p ; guard(g)`` where g only reads variables p binds (well-formed)."""
    return p_st.flatmap(lambda p: guards(core.binds(p)).map(lambda g: PGuard(p, g)))


variables = st.integers(0, N_VARS - 1).map(PVar)

patterns = st.recursive(
    leaves,
    lambda p: st.one_of(_apps(p), st.builds(PAlt, p, p), _guarded(p)),
    max_leaves=8)


@st.composite
def patterns_for(draw, node, depth=3):
    """A pattern shaped like the term at ``node`` (so it often matches), with
    variables, alternates and guards mixed in."""
    choice = draw(st.integers(0, 9))
    if choice <= 2 or depth == 0:
        return draw(variables) if choice != 2 else draw(patterns)
    if node.kind == "op":
        p = PApp(node.label, tuple(draw(patterns_for(c, depth - 1)) for c in node.args))
    else:
        p = PApp(node.label, ()) if choice < 8 else draw(variables)
    if choice == 8:
        p = PAlt(draw(patterns), p) if draw(st.booleans()) else PAlt(p, draw(patterns))
    if choice == 9:
        p = PGuard(p, draw(guards(core.binds(p))))
    return p


# ------------------------------------------------------ full-calculus tables


class _Gen:
    """Draws scoped bodies for a table with signatures ``sigs``."""

    def __init__(self, draw, sigs, n, m):
        self.draw, self.sigs = draw, sigs
        self.next_t, self.next_f = max(n, 1) + 2, max(m, 1) + 2  # local ids

    def int(self, lo, hi):
        return self.draw(st.integers(lo, hi))

    def pick(self, xs):
        return self.draw(st.sampled_from(sorted(xs)))

    def leaf(self, tv):
        c = self.int(0, 4)
        if tv and c <= 2:
            return PVar(self.pick(tv))
        if c == 3:
            return PApp(K0.symbol, ())
        return PApp(symbols.const_symbol(self.pick(CONSTS)), ())

    def call(self, tv, fv):
        ok = [i for i, (n, m) in enumerate(self.sigs) if (n == 0 or tv) and (m == 0 or fv)]
        if not ok:
            return None
        P = self.pick(ok)
        n, m = self.sigs[P]
        return PCall(P, tuple(self.pick(tv) for _ in range(n)),
                     tuple(self.pick(fv) for _ in range(m)))

    def kids(self, k, tv, fv, depth):
        return tuple(self.body(tv, fv, depth - 1) for _ in range(k))

    def body(self, tv, fv, depth):
        c = self.int(0, 13) if depth > 0 else self.int(0, 2)
        if c <= 1:
            return self.leaf(tv)
        if c == 2:
            return self.call(tv, fv) or self.leaf(tv)
        if c == 3:
            op = self.draw(st.sampled_from([o for o in OPS if o.arity]))
            return PApp(op.symbol, self.kids(op.arity, tv, fv, depth))
        if c == 4:
            return PAlt(self.body(tv, fv, depth - 1), self.body(tv, fv, depth - 1))
        if c == 5:
            return PGuard(self.body(tv, fv, depth - 1), self.draw(guards(tv, fv)))
        if c == 6:
            if tv and self.int(0, 3) == 0:
                x = self.pick(tv)  # shadow a variable in scope
            else:
                x, self.next_t = self.next_t, self.next_t + 1
            inner = tv | {x}
            p = self.body(inner, fv, depth - 1)
            if self.int(0, 1):
                p = PConstr(PVar(x), p, x) if self.int(0, 1) else PApp(B2.symbol, (PVar(x), p))
            return PExists(x, p)
        if c == 7:
            F, self.next_f = self.next_f, self.next_f + 1
            inner = fv | {F}
            if self.int(0, 1):
                return PExistsF(F, PFunVar(F, self.kids(self.int(1, 2), tv, inner, depth)))
            return PExistsF(F, PGuard(PFunVar(F, self.kids(1, tv, inner, depth)),
                                      self.draw(guards(tv, inner))))
        if c == 8 and tv:
            return PConstr(self.body(tv, fv, depth - 1), self.body(tv, fv, depth - 1),
                           self.pick(tv))
        if c in (9, 10) and fv:
            return PFunVar(self.pick(fv), self.kids(self.int(0, 2), tv, fv, depth))
        if c in (11, 12):
            op = self.draw(st.sampled_from([U1, V1]))
            head = PFunVar(self.pick(fv), ()) if fv and self.int(0, 1) else None
            inner = self.call(tv, fv) or self.leaf(tv)
            if head is not None:
                return PFunVar(head.F, (inner,))
            return PApp(op.symbol, (inner,))
        return self.leaf(tv)


def _fix_guard(g, b, fb):
    """Replace reads of variables outside ``b`` / ``fb`` by constants."""
    def e(x):
        if isinstance(x, EAttr):
            return x if x.x in b else EConst(1)
        if isinstance(x, EFAttr):
            return x if x.F in fb else EConst(1)
        if isinstance(x, EConst):
            return x
        return type(x)(e(x.e1), e(x.e2))

    def go(h):
        if isinstance(h, GTrue):
            return h
        if isinstance(h, (GEq, GLt)):
            return type(h)(e(h.e1), e(h.e2))
        if isinstance(h, GNot):
            return GNot(go(h.g))
        return type(h)(go(h.g1), go(h.g2))
    return go(g)


def repair(p, defs):
    """Make ``p`` well-formed (``wfb``) without dropping bindings: guards lose
    reads of unbound variables, an ∃ or constraint whose variable is not
    bound binds it first (``x ; (p ≈ x)``), an ∃F whose operator is not
    applied applies it (``F(p)``)."""
    if isinstance(p, (PVar, PCall)):
        return p
    if isinstance(p, PApp):
        return PApp(p.f, tuple(repair(a, defs) for a in p.args))
    if isinstance(p, PFunVar):
        return PFunVar(p.F, tuple(repair(a, defs) for a in p.args))
    if isinstance(p, PAlt):
        return PAlt(repair(p.p1, defs), repair(p.p2, defs))
    if isinstance(p, PGuard):
        q = repair(p.p, defs)
        return PGuard(q, _fix_guard(p.g, core.binds(q, defs), core.fbinds(q, defs)))
    if isinstance(p, PExists):
        q = repair(p.p, defs)
        return PExists(p.x, q if p.x in core.binds(q, defs) else PConstr(PVar(p.x), q, p.x))
    if isinstance(p, PExistsF):
        q = repair(p.p, defs)
        return PExistsF(p.F, q if p.F in core.fbinds(q, defs) else PFunVar(p.F, (q,)))
    if isinstance(p, PConstr):
        q, q2 = repair(p.p, defs), repair(p.p2, defs)
        if p.x not in core.binds(q, defs):
            q = PConstr(PVar(p.x), q, p.x)
        return PConstr(q, q2, p.x)
    raise TypeError(p)


def make_program(sigs, bodies, root=0) -> core.Program:
    """Repair ``bodies`` until the table is well-formed; pbinds inferred."""
    defs = core.infer_binds([PDef(n, m, b) for (n, m), b in zip(sigs, bodies)])
    for _ in range(10):
        if core.wf_defs(defs):
            break
        defs = core.infer_binds([PDef(d.nparams, d.nfparams, repair(d.body, defs))
                                 for d in defs])
    core.check_defs(defs)
    core.check_scoped(defs)
    return core.Program(defs, root)


# Templates: the paper's recursive shapes over U1/V1/B2 (appended to tables):
# UnaryChain(x; f) = f(UnaryChain(x; f)) ‖ f(x), and a PwChain(x) whose
# alternates are ∃F ∃y. (x ; (F(PwChain(y)) ≈ x) ; guard(F.op_class = unary))
# and ∃a ∃b. (x ; (B2(a, b) ≈ x)).
def _templates(base):
    uc, pw = base, base + 1
    unary = EConst(pm.opclass("unary_pointwise").code)
    return [
        ((1, 1), PAlt(PFunVar(0, (PCall(uc, (0,), (0,)),)), PFunVar(0, (PVar(0),)))),
        ((1, 0), PAlt(
            PExistsF(0, PExists(1, PGuard(
                PConstr(PVar(0), PFunVar(0, (PCall(pw, (1,), ()),)), 0),
                GEq(EFAttr(0, core.OPCLASS), unary)))),
            PExists(1, PExists(2, PConstr(PVar(0), PApp(B2.symbol, (PVar(1), PVar(2))), 0))))),
    ]


@st.composite
def programs(draw, node=None, max_defs=3):
    """A well-formed, well-scoped table and a root. With ``node``, the root's
    body often starts shaped like the term at ``node``."""
    nd = draw(st.integers(1, max_defs))
    sigs = [(draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in range(nd)]
    use_templates = draw(st.integers(0, 3)) == 0
    if use_templates:
        sigs += [s for s, _ in _templates(nd)]
    bodies = []
    for i, (n, m) in enumerate(sigs[:nd]):
        gen = _Gen(draw, sigs, n, m)
        tv, fv = frozenset(range(n)), frozenset(range(m))
        if i == 0 and node is not None and draw(st.booleans()):
            bodies.append(_shaped(gen, node, tv, fv, 3))
        else:
            bodies.append(gen.body(tv, fv, draw(st.integers(1, 4))))
    if use_templates:
        bodies += [b for _, b in _templates(nd)]
    return make_program(sigs, bodies, 0)


def _shaped(gen: _Gen, node, tv, fv, depth):
    c = gen.int(0, 9)
    if depth == 0 or c == 0:
        return gen.body(tv, fv, 1)
    if c == 1 and tv:
        return PVar(gen.pick(tv))
    if c == 2:
        return gen.call(tv, fv) or gen.leaf(tv)
    kids = tuple(_shaped(gen, a, tv, fv, depth - 1) for a in node.args)
    if c in (3, 4, 9) and fv:
        p = PFunVar(gen.pick(fv), kids)
    else:
        p = PApp(node.label, kids)
    if c == 5:
        p = PAlt(gen.body(tv, fv, 1), p) if gen.int(0, 1) else PAlt(p, gen.body(tv, fv, 1))
    elif c == 6:
        x, gen.next_t = gen.next_t, gen.next_t + 1
        p = PExists(x, PConstr(PVar(x), p, x))
    elif c == 7 and tv:
        p = PConstr(p, gen.body(tv, fv, 1), gen.pick(tv))
    elif c == 8:
        p = PGuard(p, gen.draw(guards(tv, fv)))
    return p
