"""What Syntax.v says about patterns beyond their shape: the variables a
pattern reads and binds (``binds``/``fbinds``), the well-formedness checks
``wfb``/``wf_defs``, the greatest fixpoint computing each definition's
``pbinds``/``pfbinds``, a scope check (every variable is a parameter or bound
by an enclosing ∃) and the root-symbol index."""
from __future__ import annotations

from typing import FrozenSet, Iterable, List, Optional, Sequence, Tuple, Union

from .syntax import (
    PATTERN_TYPES, EAdd, EAttr, EConst, EFAttr, EMul, ESub, Expr, GAnd, GEq, GLt, GNot, GOr,
    GTrue, Guard, PAlt, PApp, PCall, PConstr, PDef, PExists, PExistsF, PFunVar, PGuard,
    Program, PVar, CorePattern, children, fold, walk)
from .wire import OPCLASS

# --------------------------------------------------------- variables, binds


def expr_vars(e: Expr) -> FrozenSet[int]:
    """Term variables an expression reads."""
    if isinstance(e, (EConst, EFAttr)):
        return frozenset()
    if isinstance(e, EAttr):
        return frozenset((e.x,))
    if isinstance(e, (EAdd, ESub, EMul)):
        return expr_vars(e.e1) | expr_vars(e.e2)
    raise TypeError(f"not an expression: {e!r}")


def expr_fvars(e: Expr) -> FrozenSet[int]:
    """Operator variables an expression reads."""
    if isinstance(e, (EConst, EAttr)):
        return frozenset()
    if isinstance(e, EFAttr):
        return frozenset((e.F,))
    if isinstance(e, (EAdd, ESub, EMul)):
        return expr_fvars(e.e1) | expr_fvars(e.e2)
    raise TypeError(f"not an expression: {e!r}")


def _guard_fold(g: Guard, leaf) -> FrozenSet[int]:
    if isinstance(g, GTrue):
        return frozenset()
    if isinstance(g, (GEq, GLt)):
        return leaf(g.e1) | leaf(g.e2)
    if isinstance(g, (GAnd, GOr)):
        return _guard_fold(g.g1, leaf) | _guard_fold(g.g2, leaf)
    if isinstance(g, GNot):
        return _guard_fold(g.g, leaf)
    raise TypeError(f"not a guard: {g!r}")


def guard_vars(g: Guard) -> FrozenSet[int]:
    """Term variables a guard reads."""
    return _guard_fold(g, expr_vars)


def guard_fvars(g: Guard) -> FrozenSet[int]:
    """Operator variables a guard reads."""
    return _guard_fold(g, expr_fvars)


def _args_of(params: Iterable[int], args: Sequence[int]) -> FrozenSet[int]:
    """``Syntax.args_of``: the arguments passed for the parameters ``params``."""
    return frozenset(args[i] for i in params if 0 <= i < len(args))


def _lookup(defs: Sequence[PDef], P: int) -> Optional[PDef]:
    return defs[P] if isinstance(P, int) and 0 <= P < len(defs) else None


def binds(p: CorePattern, defs: Sequence[PDef] = ()) -> FrozenSet[int]:
    """``Syntax.binds``: term variables bound by every successful match of ``p``
    (a call binds the arguments of the callee's ``pbinds``)."""
    def f(q: CorePattern, kids: Tuple[FrozenSet[int], ...]) -> FrozenSet[int]:
        if isinstance(q, PVar):
            return frozenset((q.x,))
        if isinstance(q, PAlt):
            return kids[0] & kids[1]
        if isinstance(q, PExists):
            return kids[0] - {q.x}
        if isinstance(q, PCall):
            d = _lookup(defs, q.P)
            return _args_of(d.pbinds, q.xs) if d is not None else frozenset()
        return frozenset().union(*kids)  # PApp, PFunVar, PGuard, PExistsF, PConstr
    return fold(p, f)


def fbinds(p: CorePattern, defs: Sequence[PDef] = ()) -> FrozenSet[int]:
    """``Syntax.fbinds``: operator variables bound by every successful match."""
    def f(q: CorePattern, kids: Tuple[FrozenSet[int], ...]) -> FrozenSet[int]:
        if isinstance(q, PFunVar):
            return frozenset((q.F,)).union(*kids)
        if isinstance(q, PAlt):
            return kids[0] & kids[1]
        if isinstance(q, PExistsF):
            return kids[0] - {q.F}
        if isinstance(q, PCall):
            d = _lookup(defs, q.P)
            return _args_of(d.pfbinds, q.Fs) if d is not None else frozenset()
        return frozenset().union(*kids)  # PVar, PApp, PGuard, PExists, PConstr
    return fold(p, f)


def pattern_vars(p: CorePattern) -> FrozenSet[int]:
    """Every term variable occurring in ``p`` (bound or free, guards included)."""
    out = set()
    for q in walk(p):
        if isinstance(q, (PVar, PExists, PConstr)):
            out.add(q.x)
        elif isinstance(q, PGuard):
            out |= guard_vars(q.g)
        elif isinstance(q, PCall):
            out.update(q.xs)
    return frozenset(out)


def free_vars(p: CorePattern) -> Tuple[FrozenSet[int], FrozenSet[int]]:
    """The term and operator variables occurring free in ``p`` (not under an
    ∃ binding them)."""
    tv, fv = set(), set()

    def go(q, bt: FrozenSet[int], bf: FrozenSet[int]):
        if isinstance(q, PVar):
            tv.update({q.x} - bt)
        elif isinstance(q, PGuard):
            tv.update(guard_vars(q.g) - bt)
            fv.update(guard_fvars(q.g) - bf)
        elif isinstance(q, PConstr):
            tv.update({q.x} - bt)
        elif isinstance(q, PFunVar):
            fv.update({q.F} - bf)
        elif isinstance(q, PCall):
            tv.update(set(q.xs) - bt)
            fv.update(set(q.Fs) - bf)
        if isinstance(q, PExists):
            go(q.p, bt | {q.x}, bf)
        elif isinstance(q, PExistsF):
            go(q.p, bt, bf | {q.F})
        else:
            for c in children(q):
                go(c, bt, bf)

    go(p, frozenset(), frozenset())
    return frozenset(tv), frozenset(fv)


def has_calls(p: CorePattern) -> bool:
    """Whether ``p`` contains a pattern call."""
    return any(isinstance(q, PCall) for q in walk(p))


INDEX_ROUNDS = 64  # RootIndex.index_rounds


def guard_class(F: int, g: Guard) -> Optional[Tuple[int, int]]:
    """``RootIndex.guard_class``: the condition ``(attr, value)`` guard ``g``
    puts on operator variable ``F``, from its first conjunct ``F.attr = value``
    (or ``value = F.attr``); None if it has none."""
    if isinstance(g, GEq):
        a, b = (g.e1, g.e2) if isinstance(g.e1, EFAttr) else (g.e2, g.e1)
        if isinstance(a, EFAttr) and isinstance(b, EConst) and a.F == F:
            return (a.attr, b.z)
        return None
    if isinstance(g, GAnd):
        c = guard_class(F, g.g1)
        return c if c is not None else guard_class(F, g.g2)
    return None


def _root_of(p: CorePattern, R: Sequence[Optional[FrozenSet]]) -> Optional[FrozenSet]:
    """``RootIndex.root_of``: what the root of ``p`` can be, reading calls in
    ``R`` (None: anything; else a set of labels and ``(attr, value)``
    conditions on the operator, :func:`admits`)."""
    while isinstance(p, (PGuard, PExists, PExistsF, PConstr)):
        if isinstance(p, PGuard) and isinstance(p.p, PFunVar):
            c = guard_class(p.p.F, p.g)  # F(..) ; guard(F.a = c ∧ …)
            return None if c is None else frozenset((c,))
        p = p.p
    if isinstance(p, PApp):
        return frozenset((p.f,))
    if isinstance(p, PAlt):
        a, b = _root_of(p.p1, R), _root_of(p.p2, R)
        return None if a is None or b is None else a | b
    if isinstance(p, PCall):
        return R[p.P] if 0 <= p.P < len(R) else None  # ri_find: absent = any
    return None  # PVar, PFunVar


def admits(rootset: Optional[FrozenSet], label: int, attrs: Tuple[Tuple[int, int], ...] = ()
           ) -> bool:
    """``RootIndex.rs_mem``: whether an operator ``label`` with attributes
    ``attrs`` (``(attr, value)`` pairs: its class) is in ``rootset`` (an
    entry of :func:`root_symbols`)."""
    if rootset is None or label in rootset:
        return True
    return any(a in rootset for a in attrs)


def node_attrs(node) -> Tuple[Tuple[int, int], ...]:
    """The attributes of a term-graph node's operator that root sets test
    (``sym_attrs``: its class, OPCLASS), as ``(attr, value)`` pairs."""
    v = node.graph.sym_attr(node.label, OPCLASS)
    return () if v is None else ((OPCLASS, v),)


def root_symbols(defs: Sequence[PDef]) -> Tuple[Optional[FrozenSet], ...]:
    """``RootIndex.root_index``: for each definition, what a node it matches
    can have as operator: None for anything (a variable or an operator
    variable at the root), else a set of its possible labels and ``(attr,
    value)`` conditions, one of which the operator meets (``F(..) ;
    guard(F.op_class = c)``: the operators of class c; :func:`admits`).
    The least fixpoint of ``_root_of`` over the table, by Kleene iteration
    from the empty sets, exactly as the Coq function computes it: check
    that the current table is a post-fixpoint, else take one round, at most
    ``INDEX_ROUNDS`` rounds; if it has not converged by then (a chain of
    more than 64 calls at the root), every definition gets None.
    Derivations are finite, so a cycle of calls at the root adds nothing:
    ``P(x) = P(x) ‖ Relu(x)`` gets {Relu}, ``P(x) = P(x)`` the empty set.

    ``RootIndex.root_index_sound`` proves that a definition has no
    declarative match at a node its set does not admit; both engines
    answer "no match" there without matching (``Entry.match_root``, and
    :func:`pypm_verified.engines.reference.first_solution` through
    :func:`root_admits`)."""
    n = len(defs)
    R: List[Optional[FrozenSet[int]]] = [frozenset()] * n

    def le(a, b) -> bool:
        return b is None or (a is not None and a <= b)

    for k in range(INDEX_ROUNDS + 1):
        new = [_root_of(d.body, R) for d in defs]
        if all(le(new[i], R[i]) for i in range(n)):
            return tuple(R)
        if k == INDEX_ROUNDS:
            break
        R = new
    return (None,) * n


def _narrow(x: int, r2, shapes):
    return [(r, tuple((r2, v) if r is None and v == x else (r, v) for r, v in slots))
            for r, slots in shapes]


def _forget(x: int, shapes):
    return [(r, tuple((a, None if v == x else v) for a, v in slots)) for r, slots in shapes]


def _kids_of(p: CorePattern, R, K) -> list:
    """``KidIndex.kids_of``: the shapes of ``p``'s matches, each ``(root set,
    ((root set, variable or None), ...))``: the root's operators and, by
    position, its arguments' (positions past the tuple unconstrained), a
    position holding a variable saying which; ``[]``: no match at all."""
    if isinstance(p, PVar):
        return [(None, ())]
    if isinstance(p, (PApp, PFunVar)):
        slots = tuple((_root_of(c, R), c.x if isinstance(c, PVar) else None) for c in p.args)
        return [(frozenset((p.f,)) if isinstance(p, PApp) else None, slots)]
    if isinstance(p, PAlt):
        return _kids_of(p.p1, R, K) + _kids_of(p.p2, R, K)
    if isinstance(p, (PGuard, PExistsF)):
        return _kids_of(p.p, R, K)
    if isinstance(p, PExists):
        return _forget(p.x, _kids_of(p.p, R, K))
    if isinstance(p, PConstr):
        return _narrow(p.x, _root_of(p.p2, R), _kids_of(p.p, R, K))
    if isinstance(p, PCall):
        entry = K[p.P] if 0 <= p.P < len(K) else ((None, ()),)  # ki_find: absent = any
        return [(r, tuple((a, None) for a in kids)) for r, kids in entry]
    raise TypeError(f"not a core pattern: {p!r}")


def kid_symbols(defs: Sequence[PDef]) -> tuple:
    """``KidIndex.kid_index``: for each definition, the shapes of the nodes
    it matches: a tuple of ``(root set, (root set, ...))``, the root's
    operators and its arguments' by position (root sets as
    :func:`root_symbols` gives them, None for anything; positions past the
    tuple unconstrained); ``()`` when it matches nowhere. The least
    fixpoint of ``_kids_of`` over the table (the roots read in
    :func:`root_symbols`), by Kleene iteration from ``()`` as the Coq
    function computes it (the shapes in its order); if it has not converged
    in ``INDEX_ROUNDS`` rounds, every definition gets one unconstrained
    shape. ``KidIndex.kid_index_sound`` proves a definition has no
    declarative match at a node that has none of its shapes
    (:func:`kids_admit`)."""
    n = len(defs)
    R = root_symbols(defs)
    K: list = [()] * n

    def rs_le(a, b) -> bool:
        return b is None or (a is not None and a <= b)

    def shape_le(a, b) -> bool:
        return rs_le(a[0], b[0]) and len(b[1]) <= len(a[1]) and \
            all(rs_le(x, y) for x, y in zip(a[1], b[1]))

    def le(a, b) -> bool:
        return all(any(shape_le(s, t) for t in b) for s in a)

    for k in range(INDEX_ROUNDS + 1):
        new = [tuple((r, tuple(a for a, _v in slots)) for r, slots in _kids_of(d.body, R, K))
               for d in defs]
        if all(le(new[i], K[i]) for i in range(n)):
            return tuple(K)
        if k == INDEX_ROUNDS:
            break
        K = new
    return (((None, ()),),) * n


def kids_admit(shapes, label: int, attrs: Tuple[Tuple[int, int], ...], args) -> bool:
    """``KidIndex.k_mem``: whether a node of operator ``label`` (attributes
    ``attrs``) with arguments of operators ``args`` (``(label, attrs)``
    pairs, in order) has one of ``shapes`` (an entry of
    :func:`kid_symbols`)."""
    return any(admits(r, label, attrs) and
               all(admits(k, a, at) for k, (a, at) in zip(kids, args))
               for r, kids in shapes)


_index_cache: dict = {}  # id(defs) -> (defs, root_symbols(defs))
_INDEX_CACHE_SIZE = 64


def root_admits(defs: Sequence[PDef], root: int, node) -> bool:
    """Whether definition ``root`` of ``defs`` may match term-graph node
    ``node`` by :func:`root_symbols` (``admits`` of ``Entry.match_root``:
    its label, else its operator's class, :func:`node_attrs`, read only
    when the set has a condition); False means it does not match there.
    The index of a table is computed once (cached by the table's
    identity)."""
    ent = _index_cache.get(id(defs))
    if ent is None or ent[0] is not defs:
        ent = (defs, root_symbols(defs))
        if len(_index_cache) >= _INDEX_CACHE_SIZE:
            _index_cache.pop(next(iter(_index_cache)))
        _index_cache[id(defs)] = ent
    if not 0 <= root < len(defs):
        return False  # Entry.match_root: no definition, no match
    rs = ent[1][root]
    if rs is None or node.label in rs:
        return True
    return any(type(x) is tuple for x in rs) and admits(rs, node.label, node_attrs(node))


# ----------------------------------------------------------- well-formedness


class IllFormed(ValueError):
    """A pattern or definition table that is not well-formed (``Syntax.wfb``,
    ``Syntax.wf_defs``) or not well-scoped.

    ``missing`` holds the offending variable ids (when there are some),
    ``guard`` the offending guard (for a guard reading unbound variables),
    ``index`` the offending definition (for a table).
    """

    def __init__(self, message: str, missing: FrozenSet[int] = frozenset(), guard=None,
                 index: Optional[int] = None):
        self.missing = frozenset(missing)
        self.guard = guard
        self.index = index
        super().__init__(message)


def check_wfb(p: CorePattern, defs: Sequence[PDef] = ()) -> None:
    """Raise :class:`IllFormed` unless ``wfb defs p``: guards read only
    variables their pattern binds, ``∃x.p`` binds ``x`` in ``p``, and in
    ``p ; (p' ≈ x)`` ``p`` binds ``x``."""
    if isinstance(p, (PVar, PCall)):
        return
    for c in children(p):
        check_wfb(c, defs)
    if isinstance(p, PGuard):
        missing = guard_vars(p.g) - binds(p.p, defs)
        if missing:
            raise IllFormed(f"guard reads variables {sorted(missing)} not bound on every "
                            "alternate", missing, p.g)
        missing = guard_fvars(p.g) - fbinds(p.p, defs)
        if missing:
            raise IllFormed(f"guard reads operator variables {sorted(missing)} not bound on "
                            "every alternate", missing, p.g)
    elif isinstance(p, PExists):
        if p.x not in binds(p.p, defs):
            raise IllFormed(f"∃{p.x}: the body does not bind variable {p.x} on every "
                            "alternate", {p.x})
    elif isinstance(p, PExistsF):
        if p.F not in fbinds(p.p, defs):
            raise IllFormed(f"∃F{p.F}: the body does not bind operator variable {p.F} on "
                            "every alternate", {p.F})
    elif isinstance(p, PConstr):
        if p.x not in binds(p.p, defs):
            raise IllFormed(f"match constraint on variable {p.x}: the pattern before it does "
                            f"not bind {p.x} on every alternate", {p.x})


def wfb(p: CorePattern, defs: Sequence[PDef] = ()) -> bool:
    """``Syntax.wfb``."""
    try:
        check_wfb(p, defs)
    except IllFormed:
        return False
    return True


check_wf = check_wfb  # a single pattern without definitions
wf = wfb


def check_def(d: PDef, defs: Sequence[PDef]) -> None:
    """Raise :class:`IllFormed` unless ``wf_def defs d`` (which includes
    ``Syntax.scoped_def``: every variable in scope)."""
    check_wfb(d.body, defs)
    missing = set(d.pbinds) - binds(d.body, defs)
    if missing:
        raise IllFormed(f"claims to bind parameters {sorted(missing)} its body may not bind",
                        missing)
    missing = set(d.pfbinds) - fbinds(d.body, defs)
    if missing:
        raise IllFormed(f"claims to bind operator parameters {sorted(missing)} its body may "
                        "not bind", missing)

    def fail(msg, missing=()):
        raise IllFormed(msg, frozenset(missing))
    _check_scope(d, defs, fail, calls=False)


def check_defs(defs: Sequence[PDef]) -> None:
    """Raise :class:`IllFormed` (naming the definition) unless ``wf_defs defs``."""
    for i, d in enumerate(defs):
        try:
            check_def(d, defs)
        except IllFormed as e:
            raise IllFormed(f"definition {i}: {e}", e.missing, e.guard, i) from None


def wf_defs(defs: Sequence[PDef]) -> bool:
    """``Syntax.wf_defs``."""
    try:
        check_defs(defs)
    except IllFormed:
        return False
    return True


def check_scoped(defs: Sequence[PDef]) -> None:
    """Raise :class:`IllFormed` unless every variable of every body is a
    parameter of its definition or bound by an enclosing ∃, the ``pbinds`` are
    parameters, and every call names a definition with matching arities."""
    for i, d in enumerate(defs):
        def fail(msg, missing=()):
            raise IllFormed(f"definition {i}: {msg}", frozenset(missing), index=i)
        if not (isinstance(d.nparams, int) and isinstance(d.nfparams, int)
                and d.nparams >= 0 and d.nfparams >= 0):
            fail("parameter counts must be non-negative ints")
        if any(not 0 <= x < d.nparams for x in d.pbinds) or \
                any(not 0 <= F < d.nfparams for F in d.pfbinds):
            fail("pbinds/pfbinds name non-parameters")
        _check_scope(d, defs, fail, calls=True)


def _check_scope(d: PDef, defs: Sequence[PDef], fail, calls: bool) -> None:
    """Call ``fail(message, missing)`` at the first variable of ``d``'s body
    that is neither a parameter nor bound by an enclosing ∃
    (``Syntax.scoped_def``); with ``calls``, also at a call of a missing
    definition or with the wrong number of arguments."""
    stack = [(d.body, frozenset(range(d.nparams)), frozenset(range(d.nfparams)))]
    while stack:
        q, tv, fv = stack.pop()
        if isinstance(q, PVar) or isinstance(q, PConstr):
            if q.x not in tv:
                fail(f"variable {q.x} is not in scope", {q.x})
        elif isinstance(q, PFunVar):
            if q.F not in fv:
                fail(f"operator variable {q.F} is not in scope", {q.F})
        elif isinstance(q, PGuard):
            out = (guard_vars(q.g) - tv) | (guard_fvars(q.g) - fv)
            if out:
                fail(f"guard reads variables {sorted(out)} not in scope", out)
        elif isinstance(q, PCall):
            if calls:
                callee = _lookup(defs, q.P)
                if callee is None:
                    fail(f"call of definition {q.P}, which does not exist")
                if len(q.xs) != callee.nparams or len(q.Fs) != callee.nfparams:
                    fail(f"call of definition {q.P} with {len(q.xs)};{len(q.Fs)} arguments, "
                         f"it takes {callee.nparams};{callee.nfparams}")
            out = (set(q.xs) - tv) | (set(q.Fs) - fv)
            if out:
                fail(f"call passes variables {sorted(out)} not in scope", out)
        if isinstance(q, PExists):
            stack.append((q.p, tv | {q.x}, fv))
        elif isinstance(q, PExistsF):
            stack.append((q.p, tv, fv | {q.F}))
        else:
            stack.extend((c, tv, fv) for c in children(q))


def infer_binds(defs: Sequence[PDef]) -> Tuple[PDef, ...]:
    """The table with each definition's ``pbinds``/``pfbinds`` set to the
    greatest fixpoint: start from all parameters and recompute
    ``binds``/``fbinds`` of every body until nothing changes. (The
    ``pbinds`` given are ignored.)"""
    pb = [frozenset(range(d.nparams)) for d in defs]
    pfb = [frozenset(range(d.nfparams)) for d in defs]
    while True:
        cur = tuple(PDef(d.nparams, d.nfparams, d.body, tuple(sorted(pb[i])),
                         tuple(sorted(pfb[i]))) for i, d in enumerate(defs))
        new_pb = [pb[i] & binds(d.body, cur) for i, d in enumerate(defs)]
        new_pfb = [pfb[i] & fbinds(d.body, cur) for i, d in enumerate(defs)]
        if new_pb == pb and new_pfb == pfb:
            return cur
        pb, pfb = new_pb, new_pfb


def as_program(p: Union[CorePattern, Program]) -> Program:
    """``p`` itself if it is a :class:`Program`; a pattern without calls as a
    one-definition program whose parameters are its free variables (so its
    variable ``i`` is parameter ``i``)."""
    if isinstance(p, Program):
        return p
    if not isinstance(p, PATTERN_TYPES):
        raise TypeError(f"not a core pattern or program: {p!r}")
    if has_calls(p):
        raise IllFormed("a core pattern with calls needs its definition table: "
                        "match a core.Program")
    tv, fv = free_vars(p)
    for v in tv | fv:
        if not isinstance(v, int) or v < 0:
            raise IllFormed(f"variable ids are non-negative ints, not {v!r}")
    n = max(tv) + 1 if tv else 0
    m = max(fv) + 1 if fv else 0
    return Program(infer_binds([PDef(n, m, p)]), 0)
