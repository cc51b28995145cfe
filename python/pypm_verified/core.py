"""The core calculus: a Python mirror of the Coq syntax.

Patterns ``p ::= x | f(p1..pn) | p ‖ p' | p ; guard(g)``, guards
``g ::= true | e = e' | e < e' | g ∧ g' | g ∨ g' | ¬g`` and expressions
``e ::= z | x.α | e + e' | e - e' | e * e'`` (paper §3, Fig. 15; the reserved
constructs ∃, match constraints, function variables and μ are not supported).

Also: attribute ids and dtype codes (doc/format.md), and the well-formedness
check ``Syntax.wf``: every variable a guard reads is bound by the guarded
sub-pattern on every alternate.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import FrozenSet, Tuple, Union

# ---------------------------------------------------------------- attributes

RANK = 0
DTYPE = 1
OPCLASS = 2
SHAPE_BASE = 100
SHAPE_NEG_BASE = 200
MAX_RANK = 64


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
    x: int
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


Expr = Union[EConst, EAttr, EAdd, ESub, EMul]

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


@dataclass(frozen=True)
class PVar:
    x: int


@dataclass(frozen=True)
class PApp:
    f: int
    args: Tuple["Pattern", ...] = ()

    def __post_init__(self):
        if not isinstance(self.args, tuple):
            object.__setattr__(self, "args", tuple(self.args))


@dataclass(frozen=True)
class PAlt:
    p1: "Pattern"
    p2: "Pattern"


@dataclass(frozen=True)
class PGuard:
    p: "Pattern"
    g: Guard


Pattern = Union[PVar, PApp, PAlt, PGuard]

# ----------------------------------------------------------- well-formedness


def expr_vars(e: Expr) -> FrozenSet[int]:
    """Variables an expression reads."""
    if isinstance(e, EConst):
        return frozenset()
    if isinstance(e, EAttr):
        return frozenset((e.x,))
    if isinstance(e, (EAdd, ESub, EMul)):
        return expr_vars(e.e1) | expr_vars(e.e2)
    raise TypeError(f"not an expression: {e!r}")


def guard_vars(g: Guard) -> FrozenSet[int]:
    """Variables a guard reads."""
    if isinstance(g, GTrue):
        return frozenset()
    if isinstance(g, (GEq, GLt)):
        return expr_vars(g.e1) | expr_vars(g.e2)
    if isinstance(g, (GAnd, GOr)):
        return guard_vars(g.g1) | guard_vars(g.g2)
    if isinstance(g, GNot):
        return guard_vars(g.g)
    raise TypeError(f"not a guard: {g!r}")


def binds(p: Pattern) -> FrozenSet[int]:
    """Variables bound by every successful match of ``p``."""
    if isinstance(p, PVar):
        return frozenset((p.x,))
    if isinstance(p, PApp):
        out: FrozenSet[int] = frozenset()
        for a in p.args:
            out |= binds(a)
        return out
    if isinstance(p, PAlt):
        return binds(p.p1) & binds(p.p2)
    if isinstance(p, PGuard):
        return binds(p.p)
    raise TypeError(f"not a pattern: {p!r}")


def pattern_vars(p: Pattern) -> FrozenSet[int]:
    """Every variable occurring in ``p`` (in sub-patterns or guards)."""
    if isinstance(p, PVar):
        return frozenset((p.x,))
    if isinstance(p, PApp):
        out: FrozenSet[int] = frozenset()
        for a in p.args:
            out |= pattern_vars(a)
        return out
    if isinstance(p, PAlt):
        return pattern_vars(p.p1) | pattern_vars(p.p2)
    if isinstance(p, PGuard):
        return pattern_vars(p.p) | guard_vars(p.g)
    raise TypeError(f"not a pattern: {p!r}")


class IllFormed(ValueError):
    """A guard reads variables its guarded pattern may not bind.

    ``guard`` is the offending guard, ``missing`` the unbound variable ids.
    """

    def __init__(self, guard: Guard, missing: FrozenSet[int]):
        self.guard = guard
        self.missing = missing
        super().__init__(f"guard reads variables {sorted(missing)} not bound on every alternate")


def check_wf(p: Pattern) -> None:
    """Raise :class:`IllFormed` unless ``p`` is well-formed (``Syntax.wf``)."""
    if isinstance(p, PVar):
        return
    if isinstance(p, PApp):
        for a in p.args:
            check_wf(a)
        return
    if isinstance(p, PAlt):
        check_wf(p.p1)
        check_wf(p.p2)
        return
    if isinstance(p, PGuard):
        check_wf(p.p)
        missing = guard_vars(p.g) - binds(p.p)
        if missing:
            raise IllFormed(p.g, missing)
        return
    raise TypeError(f"not a pattern: {p!r}")


def wf(p: Pattern) -> bool:
    """True iff ``p`` is well-formed."""
    try:
        check_wf(p)
    except IllFormed:
        return False
    return True


# ------------------------------------------------------------------ renaming


def rename_expr(e: Expr, ren) -> Expr:
    if isinstance(e, EConst):
        return e
    if isinstance(e, EAttr):
        return EAttr(ren[e.x], e.attr)
    return type(e)(rename_expr(e.e1, ren), rename_expr(e.e2, ren))


def rename_guard(g: Guard, ren) -> Guard:
    if isinstance(g, GTrue):
        return g
    if isinstance(g, (GEq, GLt)):
        return type(g)(rename_expr(g.e1, ren), rename_expr(g.e2, ren))
    if isinstance(g, (GAnd, GOr)):
        return type(g)(rename_guard(g.g1, ren), rename_guard(g.g2, ren))
    return GNot(rename_guard(g.g, ren))


def rename(p: Pattern, ren) -> Pattern:
    """Rename the variables of ``p`` with the mapping ``ren`` (old id -> new id)."""
    if isinstance(p, PVar):
        return PVar(ren[p.x])
    if isinstance(p, PApp):
        return PApp(p.f, tuple(rename(a, ren) for a in p.args))
    if isinstance(p, PAlt):
        return PAlt(rename(p.p1, ren), rename(p.p2, ren))
    if isinstance(p, PGuard):
        return PGuard(rename(p.p, ren), rename_guard(p.g, ren))
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
