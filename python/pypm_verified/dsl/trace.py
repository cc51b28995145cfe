"""Tracing a pattern body: the variables of a traced body (:class:`Sym`),
pattern calls and options before lowering (:class:`CallIR`,
:class:`OptionIR`), what one alternate records (:class:`Trace`) and the
stack of bodies being traced (one per thread).

A pattern body (see :mod:`.patterns`) runs once per alternate with symbolic
:class:`~.symbolic.Var` parameters; the result is an *IR*: core terms whose
variables are :class:`Sym` objects, numbered by :mod:`.lowering`.
"""
from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from typing import List, Optional, Tuple

from ..errors import PatternError

__all__ = ["Unlocated", "TERM", "FUN", "Sym", "CallIR", "OptionIR", "Trace", "current", "push",
           "pop"]


class Unlocated(PatternError):
    """A problem raised by a symbolic object; the tracer adds the location."""


TERM, FUN = "term", "fun"


class Sym:
    """A variable of a traced body: parameter ``param`` (its index in the
    signature) or a local (``param`` None, ``kind`` TERM or FUN, ``arity``
    for a local operator). Parameters' kinds are inferred by lowering."""

    __slots__ = ("name", "param", "kind", "arity", "line", "named")

    def __init__(self, name: str, param: Optional[int] = None, kind: Optional[str] = None,
                 arity: Optional[int] = None, line: int = 0):
        self.name = name
        self.named = param is not None  # locals are named by their first assignment
        self.param = param
        self.kind = kind
        self.arity = arity
        self.line = line

    def __repr__(self):
        return self.name


@dataclass(frozen=True, eq=False)
class CallIR:
    """A call of ``pattern`` with the argument variables ``args`` (signature
    order), before they are split into term and operator arguments."""
    pattern: object
    args: Tuple[Sym, ...]
    line: int


@dataclass(frozen=True, eq=False)
class OptionIR:
    """``option ‖ base`` (``pm.optional``), before lowering. Which locals are
    bound by an ∃ around ``option`` depends on their uses in the whole
    alternate, so :mod:`.lowering` decides it (those whose every use is inside
    ``option``)."""
    option: object
    base: object


class Trace:
    """What tracing one alternate records: guards, match constraints, locals,
    uses of the parameters (kind and line) and pattern calls."""

    def __init__(self, pattern, codes, sourceless: bool = False):
        self.pattern = pattern
        self.codes = codes
        self.sourceless = sourceless  # traced without the AST rewrite (ast_transform.Sourceless)
        self.guards: List[Tuple[object, int]] = []
        self.constraints: List[Tuple[Sym, object, int]] = []
        self.locals: List[Sym] = []
        self.uses: List[Tuple[Sym, str, int]] = []
        self.calls: List[CallIR] = []
        self.commuted = 0  # commutative applications (dsl/relay.py: at most MAX_COMMUTATIVE)

    def line(self) -> int:
        """The line of the pattern body being executed."""
        f = sys._getframe(1)
        while f is not None:
            if f.f_code in self.codes:
                return f.f_lineno
            f = f.f_back
        return 0

    def use(self, sym: Sym, kind: str) -> None:
        if sym.param is None:
            if sym.kind != kind:
                what = "an operator variable" if sym.kind == FUN else "a term variable"
                how = ("applied to arguments or asked for .op_class" if kind == FUN
                       else "used as a term")
                raise Unlocated(f"{sym.name} is {what} (declared on line {sym.line}); it cannot "
                                 f"be {how}")
        else:
            self.uses.append((sym, kind, self.line()))

    def scoped(self, kind: str, arity: Optional[int] = None, name: str = "_") -> Sym:
        """A variable bound by an ∃ inside the returned term (``pm.is_constant()``,
        ``pm.is_input()``): numbered by lowering where its binder is, never a
        local of the whole alternate (wildcards are :meth:`local` variables)."""
        return Sym(name, None, kind, arity, self.line())

    def local(self, kind: str, arity: Optional[int] = None) -> Sym:
        line = self.line()
        n = len(self.locals)
        sym = Sym(f"var{n}" if kind == TERM else f"Op{n}", None, kind, arity, line)
        self.locals.append(sym)
        return sym



_tls = threading.local()


def _stack() -> list:
    st = getattr(_tls, "stack", None)
    if st is None:
        st = _tls.stack = []
    return st


def current(required: bool = True) -> Optional[Trace]:
    """The trace of the pattern body being traced on this thread (None, or
    PatternError when ``required``, outside any body)."""
    st = _stack()
    if st:
        return st[-1]
    if required:
        raise PatternError("pm.var() and pm.Op(n_in, n_out) declare local variables inside "
                           "a pattern body only")
    return None


def push(trace: Trace) -> None:
    """Enter a pattern body."""
    _stack().append(trace)


def pop() -> None:
    """Leave the pattern body entered last."""
    _stack().pop()
