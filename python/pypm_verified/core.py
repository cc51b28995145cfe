"""The core calculus: a Python mirror of ``theories/Syntax.v``.

Patterns (paper Fig. 15)::

    p ::= x | f(p1..pn) | p ‖ p' | p ; guard(g) | ∃x.p | ∃F.p
        | p ; (p' ≈ x) | F(p1..pn) | P(x1..xn; F1..Fm)

guards ``g ::= true | e = e' | e < e' | g ∧ g' | g ∨ g' | ¬g`` and
expressions ``e ::= z | x.α | F.α | e + e' | e - e' | e * e'``. Recursion is
a call ``PCall(P, xs, Fs)`` of definition ``P`` of a table of
:class:`PDef` (``μP``); a :class:`Program` is a table and a root.

Also: attribute ids and dtype codes (doc/format.md), ``binds``/``fbinds``,
the well-formedness checks ``wfb``/``wf_defs`` of Syntax.v, the greatest
fixpoint computing each definition's ``pbinds``/``pfbinds``, and a scope
check (every variable is a parameter or bound by an enclosing ∃).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import FrozenSet, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

# ---------------------------------------------------------------- attributes

RANK = 0
DTYPE = 1
OPCLASS = 2
SHAPE_BASE = 100
SHAPE_NEG_BASE = 200
MAX_RANK = 64

# Attribute values and guard constants lie in [VALUE_MIN, VALUE_MAX]; guard
# arithmetic is exact and bounded (Declarative.option_map2): + and - are
# known only when both operands are below ADD_BOUND in magnitude, * only when
# both are below MUL_BOUND.
VALUE_MIN, VALUE_MAX = -(1 << 62) + 1, (1 << 62) - 1
ADD_BOUND = 1 << 61
MUL_BOUND = 1 << 31


def shape_attr(i: int) -> int:
    """Attribute id of ``shape[i]``; negative ``i`` counts from the end."""
    if not isinstance(i, int) or isinstance(i, bool):
        raise TypeError(f"shape index must be an int, not {type(i).__name__}")
    if 0 <= i < MAX_RANK:
        return SHAPE_BASE + i
    if -MAX_RANK <= i < 0:
        return SHAPE_NEG_BASE + (-i - 1)
    raise IndexError(f"shape index {i} out of range [-{MAX_RANK}, {MAX_RANK})")


def attr_name(attr: int) -> str:
    """Readable name of an attribute id (for reprs and messages)."""
    if attr == RANK:
        return "rank"
    if attr == DTYPE:
        return "dtype"
    if attr == OPCLASS:
        return "op_class"
    if SHAPE_BASE <= attr < SHAPE_BASE + MAX_RANK:
        return f"shape[{attr - SHAPE_BASE}]"
    if SHAPE_NEG_BASE <= attr < SHAPE_NEG_BASE + MAX_RANK:
        return f"shape[{-(attr - SHAPE_NEG_BASE) - 1}]"
    return f"attr{attr}"


# -------------------------------------------------------------------- dtypes


@dataclass(frozen=True)
class DType:
    """An element type; ``code`` is the value of the DTYPE attribute."""

    name: str
    code: int

    def __repr__(self) -> str:
        return f"pm.{self.name if self.name != 'bool' else 'bool_'}"


f32 = DType("f32", 1)
f16 = DType("f16", 2)
bf16 = DType("bf16", 3)
f64 = DType("f64", 4)
i8 = DType("i8", 5)
i16 = DType("i16", 6)
i32 = DType("i32", 7)
i64 = DType("i64", 8)
u8 = DType("u8", 9)
bool_ = DType("bool", 10)

DTYPES: Tuple[DType, ...] = (f32, f16, bf16, f64, i8, i16, i32, i64, u8, bool_)
DTYPE_BY_CODE = {d.code: d for d in DTYPES}
DTYPE_BY_NAME = {d.name: d for d in DTYPES}


def as_dtype(d: Union[DType, str]) -> DType:
    """Accept a :class:`DType` or its name (``"f32"``, ``"bool"``)."""
    if isinstance(d, DType):
        return d
    if isinstance(d, str) and d in DTYPE_BY_NAME:
        return DTYPE_BY_NAME[d]
    raise ValueError(f"unknown dtype {d!r}; expected one of {sorted(DTYPE_BY_NAME)}")


# --------------------------------------------------------------- expressions


@dataclass(frozen=True)
class EConst:
    z: int


@dataclass(frozen=True)
class EAttr:
    """``x.α``: attribute ``attr`` of the node bound to term variable ``x``."""
    x: int
    attr: int


@dataclass(frozen=True)
class EFAttr:
    """``F.α``: attribute ``attr`` of the operator bound to ``F``."""
    F: int
    attr: int


@dataclass(frozen=True)
class EAdd:
    e1: "Expr"
    e2: "Expr"


@dataclass(frozen=True)
class ESub:
    e1: "Expr"
    e2: "Expr"


@dataclass(frozen=True)
class EMul:
    e1: "Expr"
    e2: "Expr"


Expr = Union[EConst, EAttr, EFAttr, EAdd, ESub, EMul]

# -------------------------------------------------------------------- guards


@dataclass(frozen=True)
class GTrue:
    pass


@dataclass(frozen=True)
class GEq:
    e1: Expr
    e2: Expr


@dataclass(frozen=True)
class GLt:
    e1: Expr
    e2: Expr


@dataclass(frozen=True)
class GAnd:
    g1: "Guard"
    g2: "Guard"


@dataclass(frozen=True)
class GOr:
    g1: "Guard"
    g2: "Guard"


@dataclass(frozen=True)
class GNot:
    g: "Guard"


Guard = Union[GTrue, GEq, GLt, GAnd, GOr, GNot]

# ------------------------------------------------------------------ patterns


def _tuple(obj, field):
    v = getattr(obj, field)
    if not isinstance(v, tuple):
        object.__setattr__(obj, field, tuple(v))


@dataclass(frozen=True)
class PVar:
    """``x``"""
    x: int


@dataclass(frozen=True)
class PApp:
    """``f(p1..pn)``"""
    f: int
    args: Tuple["Pattern", ...] = ()

    def __post_init__(self):
        _tuple(self, "args")


@dataclass(frozen=True)
class PAlt:
    """``p1 ‖ p2``"""
    p1: "Pattern"
    p2: "Pattern"


@dataclass(frozen=True)
class PGuard:
    """``p ; guard(g)``"""
    p: "Pattern"
    g: Guard


@dataclass(frozen=True)
class PExists:
    """``∃x.p``: ``x`` is a new variable in ``p`` (it shadows an outer ``x``)."""
    x: int
    p: "Pattern"


@dataclass(frozen=True)
class PExistsF:
    """``∃F.p`` for an operator variable ``F``."""
    F: int
    p: "Pattern"


@dataclass(frozen=True)
class PConstr:
    """``p ; (p2 ≈ x)``: ``p`` matches, then the node bound to ``x`` matches ``p2``."""
    p: "Pattern"
    p2: "Pattern"
    x: int


@dataclass(frozen=True)
class PFunVar:
    """``F(p1..pn)``: any operator, bound to the operator variable ``F``."""
    F: int
    args: Tuple["Pattern", ...] = ()

    def __post_init__(self):
        _tuple(self, "args")


@dataclass(frozen=True)
class PCall:
    """``P(x1..xn; F1..Fm)``: the body of definition ``P`` with its parameters
    aliasing the argument variables."""
    P: int
    xs: Tuple[int, ...] = ()
    Fs: Tuple[int, ...] = ()

    def __post_init__(self):
        _tuple(self, "xs")
        _tuple(self, "Fs")


Pattern = Union[PVar, PApp, PAlt, PGuard, PExists, PExistsF, PConstr, PFunVar, PCall]
PATTERN_TYPES = (PVar, PApp, PAlt, PGuard, PExists, PExistsF, PConstr, PFunVar, PCall)


@dataclass(frozen=True)
class PDef:
    """A definition ``μP(0..nparams-1; 0..nfparams-1).body``. ``pbinds`` /
    ``pfbinds`` list the parameters every match of the body binds (see
    :func:`infer_binds`)."""
    nparams: int
    nfparams: int
    body: Pattern
    pbinds: Tuple[int, ...] = ()
    pfbinds: Tuple[int, ...] = ()

    def __post_init__(self):
        _tuple(self, "pbinds")
        _tuple(self, "pfbinds")


@dataclass(frozen=True)
class Program:
    """A definition table and the index of the definition to match."""
    defs: Tuple[PDef, ...]
    root: int = 0

    def __post_init__(self):
        _tuple(self, "defs")

    @property
    def root_def(self) -> PDef:
        return self.defs[self.root]


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


def binds(p: Pattern, defs: Sequence[PDef] = ()) -> FrozenSet[int]:
    """``Syntax.binds``: term variables bound by every successful match of ``p``
    (a call binds the arguments of the callee's ``pbinds``)."""
    if isinstance(p, PVar):
        return frozenset((p.x,))
    if isinstance(p, (PApp, PFunVar)):
        out: FrozenSet[int] = frozenset()
        for a in p.args:
            out |= binds(a, defs)
        return out
    if isinstance(p, PAlt):
        return binds(p.p1, defs) & binds(p.p2, defs)
    if isinstance(p, (PGuard, PExistsF)):
        return binds(p.p, defs)
    if isinstance(p, PExists):
        return binds(p.p, defs) - {p.x}
    if isinstance(p, PConstr):
        return binds(p.p, defs) | binds(p.p2, defs)
    if isinstance(p, PCall):
        d = _lookup(defs, p.P)
        return _args_of(d.pbinds, p.xs) if d is not None else frozenset()
    raise TypeError(f"not a pattern: {p!r}")


def fbinds(p: Pattern, defs: Sequence[PDef] = ()) -> FrozenSet[int]:
    """``Syntax.fbinds``: operator variables bound by every successful match."""
    if isinstance(p, PVar):
        return frozenset()
    if isinstance(p, (PApp, PFunVar)):
        out: FrozenSet[int] = frozenset((p.F,)) if isinstance(p, PFunVar) else frozenset()
        for a in p.args:
            out |= fbinds(a, defs)
        return out
    if isinstance(p, PAlt):
        return fbinds(p.p1, defs) & fbinds(p.p2, defs)
    if isinstance(p, (PGuard, PExists)):
        return fbinds(p.p, defs)
    if isinstance(p, PExistsF):
        return fbinds(p.p, defs) - {p.F}
    if isinstance(p, PConstr):
        return fbinds(p.p, defs) | fbinds(p.p2, defs)
    if isinstance(p, PCall):
        d = _lookup(defs, p.P)
        return _args_of(d.pfbinds, p.Fs) if d is not None else frozenset()
    raise TypeError(f"not a pattern: {p!r}")


def _children(p: Pattern) -> Tuple[Pattern, ...]:
    if isinstance(p, (PApp, PFunVar)):
        return p.args
    if isinstance(p, PAlt):
        return (p.p1, p.p2)
    if isinstance(p, (PGuard, PExists, PExistsF)):
        return (p.p,)
    if isinstance(p, PConstr):
        return (p.p, p.p2)
    if isinstance(p, (PVar, PCall)):
        return ()
    raise TypeError(f"not a pattern: {p!r}")


def pattern_vars(p: Pattern) -> FrozenSet[int]:
    """Every term variable occurring in ``p`` (bound or free, guards included)."""
    out = set()
    stack = [p]
    while stack:
        q = stack.pop()
        if isinstance(q, PVar):
            out.add(q.x)
        elif isinstance(q, PGuard):
            out |= guard_vars(q.g)
        elif isinstance(q, PExists):
            out.add(q.x)
        elif isinstance(q, PConstr):
            out.add(q.x)
        elif isinstance(q, PCall):
            out.update(q.xs)
        stack.extend(_children(q))
    return frozenset(out)


def free_vars(p: Pattern) -> Tuple[FrozenSet[int], FrozenSet[int]]:
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
            for c in _children(q):
                go(c, bt, bf)

    go(p, frozenset(), frozenset())
    return frozenset(tv), frozenset(fv)


def has_calls(p: Pattern) -> bool:
    """Whether ``p`` contains a pattern call."""
    stack = [p]
    while stack:
        q = stack.pop()
        if isinstance(q, PCall):
            return True
        stack.extend(_children(q))
    return False


def root_symbols(defs: Sequence[PDef]) -> Tuple[Optional[FrozenSet[int]], ...]:
    """For each definition, the labels a node it matches can have: a set of
    symbols, or None for any label (a variable or an operator variable at the
    root). Derivations are finite, so a call's labels are the least fixpoint
    over the table (a cycle of calls at the root adds nothing). An index the
    rewrite driver uses to skip patterns that cannot match at a node; not
    part of the proved matcher (the differential tests check it)."""
    roots: List[Optional[FrozenSet[int]]] = [frozenset()] * len(defs)

    def of(p: Pattern) -> Optional[FrozenSet[int]]:
        while isinstance(p, (PGuard, PExists, PExistsF, PConstr)):
            p = p.p
        if isinstance(p, PApp):
            return frozenset((p.f,))
        if isinstance(p, PAlt):
            a, b = of(p.p1), of(p.p2)
            return None if a is None or b is None else a | b
        if isinstance(p, PCall):
            return roots[p.P] if 0 <= p.P < len(defs) else None
        return None  # PVar, PFunVar

    changed = True
    while changed:  # monotone in a finite lattice (sets, then None): terminates
        changed = False
        for i, d in enumerate(defs):
            r = of(d.body)
            if r != roots[i]:
                roots[i], changed = r, True
    return tuple(roots)


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


def check_wfb(p: Pattern, defs: Sequence[PDef] = ()) -> None:
    """Raise :class:`IllFormed` unless ``wfb defs p``: guards read only
    variables their pattern binds, ``∃x.p`` binds ``x`` in ``p``, and in
    ``p ; (p' ≈ x)`` ``p`` binds ``x``."""
    if isinstance(p, (PVar, PCall)):
        return
    for c in _children(p):
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


def wfb(p: Pattern, defs: Sequence[PDef] = ()) -> bool:
    """``Syntax.wfb``."""
    try:
        check_wfb(p, defs)
    except IllFormed:
        return False
    return True


check_wf = check_wfb  # a single pattern without definitions
wf = wfb


def check_def(d: PDef, defs: Sequence[PDef]) -> None:
    """Raise :class:`IllFormed` unless ``wf_def defs d``."""
    check_wfb(d.body, defs)
    missing = set(d.pbinds) - binds(d.body, defs)
    if missing:
        raise IllFormed(f"claims to bind parameters {sorted(missing)} its body may not bind",
                        missing)
    missing = set(d.pfbinds) - fbinds(d.body, defs)
    if missing:
        raise IllFormed(f"claims to bind operator parameters {sorted(missing)} its body may "
                        "not bind", missing)


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
                stack.extend((c, tv, fv) for c in _children(q))


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


def as_program(p: Union[Pattern, Program]) -> Program:
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


# ------------------------------------------------------------------ renaming


def rename_expr(e: Expr, ren: Mapping[int, int], fren: Optional[Mapping[int, int]] = None) -> Expr:
    if isinstance(e, EConst):
        return e
    if isinstance(e, EAttr):
        return EAttr(ren[e.x], e.attr)
    if isinstance(e, EFAttr):
        return EFAttr(fren[e.F] if fren is not None else e.F, e.attr)
    return type(e)(rename_expr(e.e1, ren, fren), rename_expr(e.e2, ren, fren))


def rename_guard(g: Guard, ren: Mapping[int, int],
                 fren: Optional[Mapping[int, int]] = None) -> Guard:
    if isinstance(g, GTrue):
        return g
    if isinstance(g, (GEq, GLt)):
        return type(g)(rename_expr(g.e1, ren, fren), rename_expr(g.e2, ren, fren))
    if isinstance(g, (GAnd, GOr)):
        return type(g)(rename_guard(g.g1, ren, fren), rename_guard(g.g2, ren, fren))
    return GNot(rename_guard(g.g, ren, fren))


def rename(p: Pattern, ren: Mapping[int, int], fren: Optional[Mapping[int, int]] = None) -> Pattern:
    """Rename every occurrence (binders included) of the term variables of
    ``p`` with ``ren`` and of its operator variables with ``fren`` (kept when
    None)."""
    F = (lambda v: fren[v]) if fren is not None else (lambda v: v)
    if isinstance(p, PVar):
        return PVar(ren[p.x])
    if isinstance(p, PApp):
        return PApp(p.f, tuple(rename(a, ren, fren) for a in p.args))
    if isinstance(p, PAlt):
        return PAlt(rename(p.p1, ren, fren), rename(p.p2, ren, fren))
    if isinstance(p, PGuard):
        return PGuard(rename(p.p, ren, fren), rename_guard(p.g, ren, fren))
    if isinstance(p, PExists):
        return PExists(ren[p.x], rename(p.p, ren, fren))
    if isinstance(p, PExistsF):
        return PExistsF(F(p.F), rename(p.p, ren, fren))
    if isinstance(p, PConstr):
        return PConstr(rename(p.p, ren, fren), rename(p.p2, ren, fren), ren[p.x])
    if isinstance(p, PFunVar):
        return PFunVar(F(p.F), tuple(rename(a, ren, fren) for a in p.args))
    if isinstance(p, PCall):
        return PCall(p.P, tuple(ren[x] for x in p.xs), tuple(F(v) for v in p.Fs))
    raise TypeError(f"not a pattern: {p!r}")


def conj(guards) -> Guard:
    """Right-nested conjunction ``g1 ∧ (g2 ∧ …)``; ``GTrue()`` when empty."""
    guards = list(guards)
    if not guards:
        return GTrue()
    out = guards[-1]
    for g in reversed(guards[:-1]):
        out = GAnd(g, out)
    return out


def alts(patterns) -> Pattern:
    """Right-nested alternation ``p1 ‖ (p2 ‖ …)`` of a non-empty sequence."""
    patterns = list(patterns)
    if not patterns:
        raise ValueError("alts() needs at least one pattern")
    out = patterns[-1]
    for p in reversed(patterns[:-1]):
        out = PAlt(p, out)
    return out


def shift_calls(p: Pattern, offset: int) -> Pattern:
    """``p`` with every call's definition index increased by ``offset`` (to
    append a table to another)."""
    if offset == 0 or isinstance(p, PVar):
        return p
    if isinstance(p, PCall):
        return PCall(p.P + offset, p.xs, p.Fs)
    if isinstance(p, PApp):
        return PApp(p.f, tuple(shift_calls(a, offset) for a in p.args))
    if isinstance(p, PFunVar):
        return PFunVar(p.F, tuple(shift_calls(a, offset) for a in p.args))
    if isinstance(p, PAlt):
        return PAlt(shift_calls(p.p1, offset), shift_calls(p.p2, offset))
    if isinstance(p, PGuard):
        return PGuard(shift_calls(p.p, offset), p.g)
    if isinstance(p, PExists):
        return PExists(p.x, shift_calls(p.p, offset))
    if isinstance(p, PExistsF):
        return PExistsF(p.F, shift_calls(p.p, offset))
    if isinstance(p, PConstr):
        return PConstr(shift_calls(p.p, offset), shift_calls(p.p2, offset), p.x)
    raise TypeError(f"not a pattern: {p!r}")
