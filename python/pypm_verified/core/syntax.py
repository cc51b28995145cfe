"""The core calculus: a Python mirror of ``theories/Syntax.v``.

Patterns (paper Fig. 15)::

    p ::= x | f(p1..pn) | p ‖ p' | p ; guard(g) | ∃x.p | ∃F.p
        | p ; (p' ≈ x) | F(p1..pn) | P(x1..xn; F1..Fm)

guards ``g ::= true | e = e' | e < e' | g ∧ g' | g ∨ g' | ¬g`` and
expressions ``e ::= z | x.α | F.α | e + e' | e - e' | e * e'``. Recursion is
a call ``PCall(P, xs, Fs)`` of definition ``P`` of a table of
:class:`PDef` (``μP``); a :class:`Program` is a table and a root.

Traversals go through one generic fold (:func:`fold`, :func:`walk`,
:func:`map_pattern`) over :func:`children`; binders are node-local, so
renaming is a map too. Attribute ids and dtypes are in :mod:`.wire`,
``binds`` and the well-formedness checks in :mod:`.wellformed`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Mapping, Optional, Sequence, Tuple, TypeVar, Union

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
    args: Tuple["CorePattern", ...] = ()

    def __post_init__(self):
        _tuple(self, "args")


@dataclass(frozen=True)
class PAlt:
    """``p1 ‖ p2``"""
    p1: "CorePattern"
    p2: "CorePattern"


@dataclass(frozen=True)
class PGuard:
    """``p ; guard(g)``"""
    p: "CorePattern"
    g: Guard


@dataclass(frozen=True)
class PExists:
    """``∃x.p``: ``x`` is a new variable in ``p`` (it shadows an outer ``x``)."""
    x: int
    p: "CorePattern"


@dataclass(frozen=True)
class PExistsF:
    """``∃F.p`` for an operator variable ``F``."""
    F: int
    p: "CorePattern"


@dataclass(frozen=True)
class PConstr:
    """``p ; (p2 ≈ x)``: ``p`` matches, then the node bound to ``x`` matches ``p2``."""
    p: "CorePattern"
    p2: "CorePattern"
    x: int


@dataclass(frozen=True)
class PFunVar:
    """``F(p1..pn)``: any operator, bound to the operator variable ``F``."""
    F: int
    args: Tuple["CorePattern", ...] = ()

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


CorePattern = Union[PVar, PApp, PAlt, PGuard, PExists, PExistsF, PConstr, PFunVar, PCall]
PATTERN_TYPES = (PVar, PApp, PAlt, PGuard, PExists, PExistsF, PConstr, PFunVar, PCall)


@dataclass(frozen=True)
class PDef:
    """A definition ``μP(0..nparams-1; 0..nfparams-1).body``. ``pbinds`` /
    ``pfbinds`` list the parameters every match of the body binds (see
    :func:`infer_binds`)."""
    nparams: int
    nfparams: int
    body: CorePattern
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



# ------------------------------------------------------------ generic fold

def children(p: CorePattern) -> Tuple[CorePattern, ...]:
    """The immediate sub-patterns of ``p``, left to right."""
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


def with_children(p: CorePattern, kids: Sequence[CorePattern]) -> CorePattern:
    """``p`` with its immediate sub-patterns replaced by ``kids``."""
    if isinstance(p, PApp):
        return PApp(p.f, tuple(kids))
    if isinstance(p, PFunVar):
        return PFunVar(p.F, tuple(kids))
    if isinstance(p, PAlt):
        return PAlt(*kids)
    if isinstance(p, PGuard):
        return PGuard(kids[0], p.g)
    if isinstance(p, PExists):
        return PExists(p.x, kids[0])
    if isinstance(p, PExistsF):
        return PExistsF(p.F, kids[0])
    if isinstance(p, PConstr):
        return PConstr(kids[0], kids[1], p.x)
    if isinstance(p, (PVar, PCall)):
        return p
    raise TypeError(f"not a pattern: {p!r}")


R = TypeVar("R")


def fold(p: CorePattern, f: Callable[[CorePattern, Tuple[R, ...]], R]) -> R:
    """Bottom-up fold: ``f(q, results of q's children)`` at every node."""
    return f(p, tuple(fold(c, f) for c in children(p)))


def walk(p: CorePattern) -> Iterator[CorePattern]:
    """Every sub-pattern of ``p`` (itself included), pre-order."""
    stack = [p]
    while stack:
        q = stack.pop()
        yield q
        stack.extend(reversed(children(q)))


def map_pattern(p: CorePattern, f: Callable[[CorePattern], CorePattern]) -> CorePattern:
    """Bottom-up map: ``f`` applied to every node after its children."""
    return fold(p, lambda q, kids: f(with_children(q, kids)))


# ------------------------------------------------------------------ renaming


def rename_expr(e: Expr, ren: Mapping[int, int], fren: Optional[Mapping[int, int]] = None) -> Expr:
    """``e`` with term variables renamed by ``ren``, operator variables by ``fren``."""
    if isinstance(e, EConst):
        return e
    if isinstance(e, EAttr):
        return EAttr(ren[e.x], e.attr)
    if isinstance(e, EFAttr):
        return EFAttr(fren[e.F] if fren is not None else e.F, e.attr)
    return type(e)(rename_expr(e.e1, ren, fren), rename_expr(e.e2, ren, fren))


def rename_guard(g: Guard, ren: Mapping[int, int],
                 fren: Optional[Mapping[int, int]] = None) -> Guard:
    """``g`` with its variables renamed (see :func:`rename_expr`)."""
    if isinstance(g, GTrue):
        return g
    if isinstance(g, (GEq, GLt)):
        return type(g)(rename_expr(g.e1, ren, fren), rename_expr(g.e2, ren, fren))
    if isinstance(g, (GAnd, GOr)):
        return type(g)(rename_guard(g.g1, ren, fren), rename_guard(g.g2, ren, fren))
    return GNot(rename_guard(g.g, ren, fren))


def rename(p: CorePattern, ren: Mapping[int, int],
           fren: Optional[Mapping[int, int]] = None) -> CorePattern:
    """Rename every occurrence (binders included) of the term variables of
    ``p`` with ``ren`` and of its operator variables with ``fren`` (kept when
    None)."""
    F = (lambda v: fren[v]) if fren is not None else (lambda v: v)

    def node(q: CorePattern) -> CorePattern:
        if isinstance(q, PVar):
            return PVar(ren[q.x])
        if isinstance(q, PGuard):
            return PGuard(q.p, rename_guard(q.g, ren, fren))
        if isinstance(q, PExists):
            return PExists(ren[q.x], q.p)
        if isinstance(q, PExistsF):
            return PExistsF(F(q.F), q.p)
        if isinstance(q, PConstr):
            return PConstr(q.p, q.p2, ren[q.x])
        if isinstance(q, PFunVar):
            return PFunVar(F(q.F), q.args)
        if isinstance(q, PCall):
            return PCall(q.P, tuple(ren[x] for x in q.xs), tuple(F(v) for v in q.Fs))
        return q
    return map_pattern(p, node)


def conj(guards) -> Guard:
    """Right-nested conjunction ``g1 ∧ (g2 ∧ …)``; ``GTrue()`` when empty."""
    guards = list(guards)
    if not guards:
        return GTrue()
    out = guards[-1]
    for g in reversed(guards[:-1]):
        out = GAnd(g, out)
    return out


def alts(patterns) -> CorePattern:
    """Right-nested alternation ``p1 ‖ (p2 ‖ …)`` of a non-empty sequence."""
    patterns = list(patterns)
    if not patterns:
        raise ValueError("alts() needs at least one pattern")
    out = patterns[-1]
    for p in reversed(patterns[:-1]):
        out = PAlt(p, out)
    return out


def shift_calls(p: CorePattern, offset: int) -> CorePattern:
    """``p`` with every call's definition index increased by ``offset`` (to
    append a table to another)."""
    if offset == 0:
        return p
    return map_pattern(p, lambda q: PCall(q.P + offset, q.xs, q.Fs)
                       if isinstance(q, PCall) else q)
