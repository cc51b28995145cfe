"""Lowering traced patterns to a core definition table (``Syntax.pdef``).

:func:`lower` takes root patterns, collects every pattern they reach through
calls, and produces one table, roots first:

1. **Kinds.** A parameter applied to arguments (``f(...)``) or asked for
   ``.op_class`` is an operator parameter; one used as a term (returned,
   an operator argument, constrained, asked for ``.shape``) a term
   parameter; one only passed to a call gets the kind of the callee's
   parameter (a fixpoint over the calls; a pattern's kinds depend on its own
   body and its callees only). Anything else is a term parameter. Using a
   parameter both ways is an error.
2. **Numbering.** Term parameters are variables ``0..n-1`` and operator
   parameters ``0..m-1``, each in signature order; locals follow.
3. **Bodies.** Each alternate is ``∃locals. (r ; (q1 ≈ x1) ; … ; guard(g))``:
   the returned pattern ``r``, each match constraint in statement order,
   then the conjunction of the guards, with the alternate's locals bound by
   ∃ (first declared outermost). Alternates are joined by right-nested ‖ in
   definition order. Calls are ``PCall`` of the callee's table index. An
   option (``pm.optional``, :class:`~.trace.OptionIR`) is ``(∃ls. o) ‖ p``:
   ``ls`` are the locals every use of which (in the returned term, the
   constraints, the guards and the calls) is inside that option part ``o``,
   each bound at the innermost such option; the others are locals of the
   whole alternate (:func:`option_locals`).
4. **pbinds** by :func:`core.infer_binds`, then well-formedness, checked per
   alternate so errors name the line: a constraint's variable must be bound
   before it, guards may read only bound variables, locals must be bound.
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

from .. import core
from .trace import FUN, TERM, CallIR, OptionIR, Sym
from ..errors import PatternError


def _desc(kind: str) -> str:
    return "an operator variable" if kind == FUN else "a term variable"


class MultiInfo:
    """A multi-root pattern in the table (``theories/Multi.v``'s ``mpat``):
    ``roots`` (definition indices, one per returned term, each body reading
    the shared variables), ``n`` / ``m`` (shared term / operator variables:
    the parameters, then the locals, which are shared by all roots),
    ``guard`` (the cross-root guard: the asserts no single root binds all
    the variables of; the others guard their root), ``term_params`` /
    ``op_params`` (the parameter names: variables ``0..len-1``)."""

    def __init__(self, roots, n, m, guard, term_params, op_params):
        self.roots: Tuple[int, ...] = roots
        self.n, self.m = n, m
        self.guard = guard
        self.term_params, self.op_params = term_params, op_params

    def __repr__(self):
        return f"MultiInfo(roots={self.roots}, n={self.n}, m={self.m}, guard={self.guard!r})"


class Linked:
    """A linked definition table.

    ``defs`` (core definitions, pbinds inferred), ``roots`` (table index of
    each root pattern), ``index`` (pattern -> table index), and per pattern:
    ``term_params`` / ``op_params`` (parameter names; variable ``i`` of that
    kind is the ``i``-th name) and ``alternates`` (the core body of each
    alternate).
    """

    def __init__(self, defs, roots, index, term_params, op_params, alternates):
        self.defs: Tuple[core.PDef, ...] = defs
        self.roots: Tuple[int, ...] = roots
        self.index: Dict[object, int] = index
        self.term_params: Dict[object, Tuple[str, ...]] = term_params
        self.op_params: Dict[object, Tuple[str, ...]] = op_params
        self.alternates: Dict[object, Tuple[core.CorePattern, ...]] = alternates
        self.multi: Dict[object, MultiInfo] = {}

    def program(self, pattern) -> core.Program:
        """The table with ``pattern`` as the root."""
        return core.Program(self.defs, self.index[pattern])


class _Fail:
    def __init__(self, pattern, alt):
        self.pattern, self.alt = pattern, alt

    def __call__(self, line: int, problem: str):
        where = f"{self.alt.filename}:{line or self.alt.lineno}"
        raise PatternError(f"pattern {self.pattern.name!r} ({where}): {problem}") from None


def _reachable(roots) -> Tuple[list, dict]:
    order, alts = [], {}
    queue = list(roots)
    i = 0
    while i < len(queue):
        P = queue[i]
        i += 1
        if P in alts:
            continue
        alts[P] = P.traced_alternates()
        order.append(P)
        for a in alts[P]:
            queue.extend(c.pattern for c in a.trace.calls)
    return order, alts


def _infer_kinds(order, alts) -> Dict[object, Tuple[str, ...]]:
    kind: Dict[tuple, tuple] = {}  # (pattern, param) -> (kind, line)
    for P in order:
        for a in alts[P]:
            for sym, k, line in a.trace.uses:
                key = (P, sym.param)
                prev = kind.get(key)
                if prev is None:
                    kind[key] = (k, line)
                elif prev[0] != k:
                    _Fail(P, a)(line, f"parameter {sym.name!r} is used as {_desc(k)} here and "
                                      f"as {_desc(prev[0])} on line {prev[1]}")
    edges = [(P, sym, c.pattern, j, c.line, a) for P in order for a in alts[P]
             for c in a.trace.calls for j, sym in enumerate(c.args) if sym.param is not None]
    changed = True
    while changed:
        changed = False
        for P, sym, Q, j, line, a in edges:
            kq = kind.get((Q, j))
            if kq is None:
                continue
            kp = kind.get((P, sym.param))
            if kp is None:
                kind[(P, sym.param)] = (kq[0], line)
                changed = True
            elif kp[0] != kq[0]:
                _Fail(P, a)(line, f"argument {sym.name!r} of {Q.name} must be {_desc(kq[0])} "
                                  f"(parameter {Q.params[j]!r} of {Q.name}), but {sym.name!r} "
                                  f"is {_desc(kp[0])} (line {kp[1]})")
    return {P: tuple(kind.get((P, i), (TERM,))[0] for i in range(len(P.params)))
            for P in order}


class _Alt:
    """One alternate in core terms, with what the located checks need."""

    def __init__(self, result, constraints, guards, locals_, names, in_options=()):
        self.result = result
        self.constraints = constraints  # [(x, q, line)]
        self.guards = guards  # [(g, line)]
        self.locals = locals_  # [(number, kind, Sym)]
        self.names = names  # (kind, number) -> name
        self.in_options = in_options  # [(number, kind, Sym, body of its ∃ in an option)]

    def body(self) -> core.CorePattern:
        acc = self.result
        for x, q, _ in self.constraints:
            acc = core.PConstr(acc, q, x)
        if self.guards:
            acc = core.PGuard(acc, core.conj(g for g, _ in self.guards))
        for num, kind, _ in reversed(self.locals):
            acc = core.PExists(num, acc) if kind == TERM else core.PExistsF(num, acc)
        return acc


def option_locals(a) -> Tuple[List[Sym], Dict[OptionIR, List[Sym]]]:
    """The scope of each local of the traced alternate ``a``: the locals of
    the whole alternate, and for each option (``pm.optional``) the locals
    bound by an ∃ around its option part -- those every use of which is in
    that part, at the innermost such option (declaration order in both)."""
    uses: Dict[Sym, List[Tuple[OptionIR, ...]]] = {}  # the options around each use

    def use(sym, where):
        uses.setdefault(sym, []).append(where)

    def guard(g, where):
        if isinstance(g, core.EAttr):
            use(g.x, where)
        elif isinstance(g, core.EFAttr):
            use(g.F, where)
        for f in ("e1", "e2", "g1", "g2", "g"):
            if hasattr(g, f):
                guard(getattr(g, f), where)

    def walk(p, where):
        if isinstance(p, tuple):  # the roots of a multi-root pattern
            for q in p:
                walk(q, where)
        elif isinstance(p, OptionIR):
            walk(p.option, where + (p,))
            walk(p.base, where)
        elif isinstance(p, CallIR):
            for sym in p.args:
                use(sym, where)
        else:  # a core term over Syms (∃'s binders are Trace.scoped, not locals)
            if isinstance(p, (core.PVar, core.PConstr)):
                use(p.x, where)
            elif isinstance(p, core.PFunVar):
                use(p.F, where)
            elif isinstance(p, core.PGuard):
                guard(p.g, where)
            for f in ("p", "p1", "p2"):
                if hasattr(p, f):
                    walk(getattr(p, f), where)
            for q in getattr(p, "args", ()):
                walk(q, where)

    walk(a.result, ())
    for x, q, _ in a.trace.constraints:
        use(x, ())
        walk(q, ())
    for g, _ in a.trace.guards:
        guard(g, ())
    outer, inner = [], {}
    for sym in a.trace.locals:
        ws = uses.get(sym, [()])
        common = set(ws[0]).intersection(*ws[1:])
        if common:
            inner.setdefault(next(o for o in reversed(ws[0]) if o in common), []).append(sym)
        else:
            outer.append(sym)
    return outer, inner


def _convert(P, a, kinds, index, counters) -> _Alt:
    fail = _Fail(P, a)
    nums: Dict[Sym, Tuple[str, int]] = {}
    pk = kinds[P]
    for sym in a.params:
        k = pk[sym.param]
        nums[sym] = (k, sum(1 for i in range(sym.param) if pk[i] == k))
    outer, inner = option_locals(a)
    locals_, in_options = [], []
    for sym in outer:
        n = counters[sym.kind]
        counters[sym.kind] += 1
        nums[sym] = (sym.kind, n)
        locals_.append((n, sym.kind, sym))
    names = {v: s.name for s, v in nums.items()}

    def num(sym: Sym, kind: str) -> int:
        k, n = nums[sym]
        assert k == kind, (sym, k, kind)  # uses are recorded with their kinds
        return n

    def expr(e):
        if isinstance(e, core.EAttr):
            return core.EAttr(num(e.x, TERM), e.attr)
        if isinstance(e, core.EFAttr):
            return core.EFAttr(num(e.F, FUN), e.attr)
        if isinstance(e, core.EConst):
            return e
        return type(e)(expr(e.e1), expr(e.e2))

    def guard(g):
        if isinstance(g, core.GTrue):
            return g
        if isinstance(g, (core.GEq, core.GLt)):
            return type(g)(expr(g.e1), expr(g.e2))
        if isinstance(g, core.GNot):
            return core.GNot(guard(g.g))
        return type(g)(guard(g.g1), guard(g.g2))

    def scoped(sym: Sym, kind: str) -> int:
        n = counters[kind]
        counters[kind] += 1
        nums[sym] = (kind, n)
        names[(kind, n)] = sym.name
        return n

    def pat(p):
        if isinstance(p, tuple):  # the roots of a multi-root pattern
            return tuple(pat(q) for q in p)
        if isinstance(p, core.PVar):
            return core.PVar(num(p.x, TERM))
        # the sugar of dsl/relay.py builds these inside terms
        if isinstance(p, core.PAlt):
            return core.PAlt(pat(p.p1), pat(p.p2))
        if isinstance(p, OptionIR):
            own = inner.get(p, [])
            ns = [scoped(sym, sym.kind) for sym in own]
            body = pat(p.option)
            for sym, n in reversed(list(zip(own, ns))):
                in_options.append((n, sym.kind, sym, body))
                body = core.PExists(n, body) if sym.kind == TERM else core.PExistsF(n, body)
            return core.PAlt(body, pat(p.base))
        if isinstance(p, core.PGuard):
            return core.PGuard(pat(p.p), guard(p.g))
        if isinstance(p, core.PConstr):
            return core.PConstr(pat(p.p), pat(p.p2), num(p.x, TERM))
        if isinstance(p, core.PExists):
            return core.PExists(scoped(p.x, TERM), pat(p.p))
        if isinstance(p, core.PExistsF):
            return core.PExistsF(scoped(p.F, FUN), pat(p.p))
        if isinstance(p, core.PApp):
            return core.PApp(p.f, tuple(pat(q) for q in p.args))
        if isinstance(p, core.PFunVar):
            return core.PFunVar(num(p.F, FUN), tuple(pat(q) for q in p.args))
        if isinstance(p, CallIR):
            Q, kq = p.pattern, kinds[p.pattern]
            xs, Fs = [], []
            for j, sym in enumerate(p.args):
                k, n = nums[sym]
                if k != kq[j]:
                    fail(p.line, f"argument {sym.name!r} of {Q.name} must be {_desc(kq[j])} "
                                 f"(parameter {Q.params[j]!r} of {Q.name}), but it is "
                                 f"{_desc(k)}")
                (xs if k == TERM else Fs).append(n)
            return core.PCall(index[Q], tuple(xs), tuple(Fs))
        raise TypeError(f"unexpected traced term {p!r}")

    return _Alt(pat(a.result),
                [(num(x, TERM), pat(q), line) for x, q, line in a.trace.constraints],
                [(guard(g), line) for g, line in a.trace.guards],
                locals_, names, in_options)


def _check(P, a, alt: _Alt, defs) -> None:
    """Well-formedness of one alternate, with the offending line."""
    fail = _Fail(P, a)

    def name(kind, n):
        return repr(alt.names.get((kind, n), str(n)))

    acc = alt.result
    for x, q, line in alt.constraints:
        if x not in core.binds(acc, defs):
            fail(line, f"match constraint on {name(TERM, x)}: it is not bound by the returned "
                       "pattern or an earlier constraint (on every alternate); constrain it "
                       "after the constraint that binds it")
        acc = core.PConstr(acc, q, x)
    b, fb = core.binds(acc, defs), core.fbinds(acc, defs)
    for g, line in alt.guards:
        missing = [name(TERM, v) for v in sorted(core.guard_vars(g) - b)] + \
                  [name(FUN, v) for v in sorted(core.guard_fvars(g) - fb)]
        if missing:
            fail(line, f"guard reads variable {', '.join(missing)} which the pattern does not "
                       "bind (on every alternate)")
    for n, kind, sym in alt.locals:
        if n not in (b if kind == TERM else fb):
            what = "local variable" if kind == TERM else "local operator variable"
            fail(sym.line, f"{what} {sym.name!r} is not bound by every match of the pattern "
                           "(on every alternate)")
    _check_in_options(fail, alt, defs)


def _check_in_options(fail, alt: _Alt, defs) -> None:
    """A local bound around an option part must be bound by its every match."""
    for n, kind, sym, body in alt.in_options:
        if n not in (core.binds(body, defs) if kind == TERM else core.fbinds(body, defs)):
            what = "local variable" if kind == TERM else "local operator variable"
            fail(sym.line, f"{what} {sym.name!r}, used only inside an optional part "
                           "(pm.optional), is not bound by every match of that part")


def _multi_bodies(P, a, alt: _Alt, defs) -> Tuple[list, core.Guard]:
    """The root bodies and the cross-root guard of a multi-root pattern: a
    match constraint goes to the first root that binds its variable (after
    the constraints already there); a guard to the first root that binds
    every variable it reads (pruning the search early), else to the
    cross-root guard, which must read only variables some root binds."""
    fail = _Fail(P, a)

    def name(kind, n):
        return repr(alt.names.get((kind, n), str(n)))

    bodies = list(alt.result)
    for x, q, line in alt.constraints:
        for i, b in enumerate(bodies):
            if x in core.binds(b, defs):
                bodies[i] = core.PConstr(b, q, x)
                break
        else:
            fail(line, f"match constraint on {name(TERM, x)}: no root binds it")
    per_root: List[list] = [[] for _ in bodies]
    cross = []
    for g, line in alt.guards:
        gv, gf = core.guard_vars(g), core.guard_fvars(g)
        for i, b in enumerate(bodies):
            if gv <= core.binds(b, defs) and gf <= core.fbinds(b, defs):
                per_root[i].append(g)
                break
        else:
            allb = frozenset().union(*(core.binds(b, defs) for b in bodies))
            allf = frozenset().union(*(core.fbinds(b, defs) for b in bodies))
            missing = [name(TERM, v) for v in sorted(gv - allb)] + \
                      [name(FUN, v) for v in sorted(gf - allf)]
            if missing:
                fail(line, f"guard reads variable {', '.join(missing)} which no root binds")
            cross.append(g)
    bodies = [core.PGuard(b, core.conj(gs)) if gs else b for b, gs in zip(bodies, per_root)]
    allb = frozenset().union(*(core.binds(b, defs) for b in bodies))
    allf = frozenset().union(*(core.fbinds(b, defs) for b in bodies))
    for n, kind, sym in alt.locals:
        if n not in (allb if kind == TERM else allf):
            what = "local variable" if kind == TERM else "local operator variable"
            fail(sym.line, f"{what} {sym.name!r} is not bound by any root")
    _check_in_options(fail, alt, defs)
    return bodies, core.conj(cross)


def lower(roots: Sequence) -> Linked:
    """Lower the patterns ``roots`` and every pattern they call into one table
    (roots first, in order; the roots of multi-root patterns last). Raises
    :class:`PatternError` naming the pattern, file and line of a problem."""
    order, alts = _reachable(roots)
    kinds = _infer_kinds(order, alts)
    multi = [P for P in order if alts[P] and isinstance(alts[P][0].result, tuple)]
    for P in multi:
        if len(alts[P]) != 1:
            _Fail(P, alts[P][1])(0, "a multi-root pattern has one definition (write "
                                    "alternates in the patterns its roots call)")
        for Q in order:
            for b in alts[Q]:
                for c in b.trace.calls:
                    if c.pattern is P:
                        _Fail(Q, b)(c.line, f"{P.name} has several roots and cannot be called")
    order = [P for P in order if P not in multi]
    index = {P: i for i, P in enumerate(order)}
    lowered: Dict[object, List[_Alt]] = {}
    raw = []
    for P in order:
        n = sum(1 for k in kinds[P] if k == TERM)
        m = len(kinds[P]) - n
        counters = {TERM: n, FUN: m}
        lowered[P] = [_convert(P, a, kinds, index, counters) for a in alts[P]]
        raw.append(core.PDef(n, m, core.alts(x.body() for x in lowered[P])))
    defs = core.infer_binds(raw)
    infos = {}
    for P in multi:
        a = alts[P][0]
        n = sum(1 for k in kinds[P] if k == TERM)
        m = len(kinds[P]) - n
        counters = {TERM: n, FUN: m}
        alt = _convert(P, a, kinds, index, counters)
        bodies, guard = _multi_bodies(P, a, alt, defs)
        n2, m2 = counters[TERM], counters[FUN]  # the locals are shared variables too
        index[P] = len(raw)
        first = len(raw)
        raw.extend(core.PDef(n2, m2, b) for b in bodies)
        infos[P] = MultiInfo(tuple(range(first, len(raw))), n2, m2, guard,
                             tuple(p for p, k in zip(P.params, kinds[P]) if k == TERM),
                             tuple(p for p, k in zip(P.params, kinds[P]) if k == FUN))
    if multi:
        defs = core.infer_binds(raw)
    for P in order:
        for a, alt in zip(alts[P], lowered[P]):
            _check(P, a, alt, defs)
    try:
        core.check_scoped(defs)
        core.check_defs(defs)
    except core.IllFormed as e:  # not expected after the located checks
        P = order[e.index or 0]
        _Fail(P, alts[P][0])(0, f"ill-formed pattern: {e}")
    term_params = {P: tuple(p for p, k in zip(P.params, kinds[P]) if k == TERM) for P in order}
    op_params = {P: tuple(p for p, k in zip(P.params, kinds[P]) if k == FUN) for P in order}
    alternates = {P: tuple(x.body() for x in lowered[P]) for P in order}
    for P in multi:
        term_params[P], op_params[P] = infos[P].term_params, infos[P].op_params
        alternates[P] = tuple(defs[r].body for r in infos[P].roots)
    linked = Linked(defs, tuple(index[R] for R in roots), index, term_params, op_params,
                    alternates)
    linked.multi = infos
    return linked
