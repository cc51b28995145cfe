"""The symbolic values a traced pattern body computes with: pattern terms
(:class:`SymTerm`), pattern variables (:class:`Var`), ``x.shape``
(:class:`SymShape`), integer expressions over attributes (:class:`SymExpr`)
and guards (:class:`SymGuard`); and the helpers the AST-rewritten body
calls (:data:`HELPERS`: ``assert``, ``and``/``or``/``not``, comparison
chains, ``return``, ``x <= p``, naming locals).

Operator calls build ``PApp`` terms, calls of a variable ``f(...)`` build
``PFunVar`` terms (``f`` is then an operator variable), attribute reads
(``x.shape[-1]``, ``x.dtype``, ``F.op_class``) build expressions,
comparisons build guards.
"""
from __future__ import annotations

import operator
import sys
from typing import Callable, List, Sequence

from .. import core
from ..core import symbols
from ..core.symbols import OpClass
from . import ast_transform
from .trace import FUN, TERM, Unlocated, current

__all__ = ["TensorCode", "SymTerm", "Var", "SymShape", "SymExpr", "SymGuard", "var", "local_op",
           "as_pattern", "show", "HELPERS"]


def as_pattern(a, where: str, i: int):
    if isinstance(a, Var):
        a.use(TERM)
        return a.core
    if isinstance(a, SymTerm):
        return a.core
    if symbols.is_constant(a):
        return core.PApp(symbols.const_symbol(a), ())
    if type(a).__module__.startswith("torch") or (
            isinstance(a, (list, tuple)) and a and not any(isinstance(e, SymTerm) for e in a)):
        c = _torch_code().pattern_constant(a)  # torch.float16, torch.contiguous_format
        if symbols.is_constant(c):
            return core.PApp(symbols.const_symbol(c), ())
    from .operators import Op  # operators build on this module
    if isinstance(a, Op) or getattr(a, "_is_pattern", False):
        raise Unlocated(f"argument {i + 1} of {where} is {a!r}: call it to build a term")
    raise Unlocated(f"argument {i + 1} of {where} is {show(a)}, not a pattern term "
                     "or constant")


def show(v) -> str:
    return repr(v) if not isinstance(v, (SymExpr, SymGuard)) else f"the guard expression {v!r}"


# ---------------------------------------------------------- symbolic values


def _torch_code():
    try:
        from . import torch_code
    except ImportError as e:  # torch is not installed
        raise Unlocated(f"PyTorch code in a pattern or rule body needs torch ({e})") from None
    return torch_code


class TensorCode:
    """Values that behave as tensors in pattern and rule bodies: pattern
    terms, and the values the PyTorch driver gives rule bodies.
    ``torch.*`` functions (``__torch_function__``), Python operators and
    Tensor methods lower to the ATen calls ``torch.export`` records
    (:mod:`.torch_code`, which imports torch when first used)."""

    __slots__ = ()

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return _torch_code().call(func, args, kwargs or {})

    def _op(name):  # noqa: N805 -- a method factory run in the class body
        def dunder(self, *other):
            return _torch_code().dunder(name, self, *other)
        dunder.__name__ = name
        return dunder

    __add__, __radd__, __sub__, __rsub__ = _op("__add__"), _op("__radd__"), _op("__sub__"), \
        _op("__rsub__")
    __mul__, __rmul__, __truediv__, __rtruediv__ = _op("__mul__"), _op("__rmul__"), \
        _op("__truediv__"), _op("__rtruediv__")
    __matmul__, __rmatmul__, __pow__, __rpow__ = _op("__matmul__"), _op("__rmatmul__"), \
        _op("__pow__"), _op("__rpow__")
    __neg__, __abs__, __invert__ = _op("__neg__"), _op("__abs__"), _op("__invert__")
    __and__, __rand__, __or__, __ror__, __xor__, __rxor__ = (
        _op("__and__"), _op("__rand__"), _op("__or__"), _op("__ror__"), _op("__xor__"),
        _op("__rxor__"))

    # comparisons are tensors too (``mask == 0`` is ``aten.eq.Scalar``); a
    # class that defines ``__eq__`` (SymTerm) keeps its own ``__hash__``, and
    # values that must stay hashable (the driver's) get only the orderings
    __lt__, __gt__, __ge__, __le__ = _op("__lt__"), _op("__gt__"), _op("__ge__"), _op("__le__")
    del _op

    @property
    def T(self):
        """``x.T``: export's ``permute`` of the axes reversed (a pattern
        matches it at every rank up to 6)."""
        return _torch_code().reversed_axes(self)

    @property
    def mT(self):
        """``x.mT``: ``transpose(x, -2, -1)``."""
        return _torch_code().method(self, "transpose")(-2, -1)

    def __getitem__(self, index):
        """The ``index``-th result of an op with several (``x.max(-1)[0]``)."""
        return _torch_code().getitem(self, index)

    def __getattr__(self, name):
        """A Tensor method (``x.mean``, ``x.transpose``): calling it lowers it."""
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            from . import torch_code
        except ImportError:
            raise AttributeError(name) from None
        return torch_code.method(self, name)


class SymTerm(TensorCode):
    """A pattern under construction (``core`` is its IR, ``text`` its
    source-like rendering for messages)."""

    __slots__ = ("core", "text")

    def __init__(self, core_pattern, text: str):
        self.core = core_pattern
        self.text = text

    def __repr__(self):
        return self.text

    __hash__ = object.__hash__

    def __bool__(self):
        raise Unlocated(f"pattern term {self!r} used as a Python truth value")

    def __eq__(self, other):
        """``x == y``: the tensor ``aten.eq`` (PyTorch code); guards compare
        attributes (``x.shape``, ``x.rank``, ``x.dtype``)."""
        return _torch_code().dunder("__eq__", self, other)

    def __ne__(self, other):
        return _torch_code().dunder("__ne__", self, other)

    def __le__(self, other):
        trace = current(required=False)
        if isinstance(self, Var) and trace is not None and trace.sourceless \
                and ast_transform.constraint_use(sys._getframe(1)):
            return _constrain(self, other, trace.line())
        raise Unlocated("a match constraint `x <= p` must be a statement of its own")

    def _attr_owner(self):
        raise Unlocated(f"attributes can only be read from pattern variables, not {self!r}")

    shape = property(lambda self: self._attr_owner())
    rank = dtype = elType = op_class = shape


class Var(SymTerm):
    """A pattern variable: a parameter of the pattern being traced, a local
    term variable (``pm.var()``) or a local operator variable
    (``pm.Op(n_in, n_out)``). Used as a term it is a term variable; applied
    (``f(p1..pn)``) or asked for ``.op_class`` it is an operator variable."""

    __slots__ = ("sym", "trace")

    def __init__(self, sym: Sym, trace):
        super().__init__(core.PVar(sym), sym.name)
        self.sym = sym
        self.trace = trace

    @property
    def name(self) -> str:
        return self.sym.name

    def __repr__(self):
        return self.sym.name

    def use(self, kind: str) -> None:
        """Record a use as a term (TERM) or an operator (FUN)."""
        if self.trace is not current(required=False):
            raise Unlocated(f"variable {self.name} belongs to another pattern")
        self.trace.use(self.sym, kind)

    def _attr(self, attr):
        self.use(TERM)
        return SymExpr(core.EAttr(self.sym, attr), f"{self.name}.{core.attr_name(attr)}")

    @property
    def shape(self) -> "SymShape":
        """``x.shape``: ``.rank`` and ``[i]`` (negative ``i`` from the end)."""
        self.use(TERM)
        return SymShape(self)

    @property
    def rank(self) -> "SymExpr":
        return self._attr(core.RANK)

    @property
    def dtype(self) -> "SymExpr":
        return self._attr(core.DTYPE)

    elType = dtype  # the paper's name

    @property
    def op_class(self) -> "SymExpr":
        """``F.op_class`` of an operator variable: its class code."""
        self.use(FUN)
        return SymExpr(core.EFAttr(self.sym, core.OPCLASS), f"{self.name}.op_class")

    def __call__(self, *args):
        self.use(FUN)
        if self.sym.arity is not None and len(args) != self.sym.arity:
            raise Unlocated(f"operator variable {self.name} takes {self.sym.arity} "
                             f"argument(s), got {len(args)}")
        return SymTerm(core.PFunVar(self.sym, tuple(as_pattern(a, self.name, i)
                                                 for i, a in enumerate(args))),
                    f"{self.name}({', '.join(map(repr, args))})")


class SymShape:
    """``x.shape`` of a pattern variable."""

    __slots__ = ("var",)

    def __init__(self, var: Var):
        self.var = var

    def __repr__(self):
        return f"{self.var.name}.shape"

    @property
    def rank(self) -> "SymExpr":
        return self.var.rank

    def __getitem__(self, i) -> "SymExpr":
        if isinstance(i, (SymExpr, SymTerm)):
            raise Unlocated("shape indices must be Python ints, not symbolic values")
        try:
            return self.var._attr(core.shape_attr(i))
        except (TypeError, IndexError) as e:
            raise Unlocated(str(e)) from None

    def _dims_guard(self, dims) -> "SymGuard":
        if not isinstance(dims, (tuple, list)):
            raise Unlocated(f"{self!r} can only be compared with a tuple or list of ints")
        gs = [self.rank == len(dims)] + [self[i] == d for i, d in enumerate(dims) if d is not None]
        return SymGuard(core.conj(g.core for g in gs), f"{self!r} == {tuple(dims)!r}")

    def __eq__(self, dims):
        return self._dims_guard(dims)

    def __ne__(self, dims):
        g = self._dims_guard(dims)
        return SymGuard(core.GNot(g.core), f"{self!r} != {tuple(dims)!r}")

    __hash__ = None

    def __len__(self):
        raise Unlocated("len() of a symbolic shape; use x.shape.rank")

    def __iter__(self):
        raise Unlocated("a symbolic shape cannot be iterated; index it with x.shape[i]")

    def __bool__(self):
        raise Unlocated(f"{self!r} used as a Python truth value")


def _as_expr(v) -> core.Expr:
    if isinstance(v, SymExpr):
        return v.core
    if isinstance(v, core.DType):
        return core.EConst(v.code)
    if isinstance(v, OpClass):
        return core.EConst(v.code)
    if isinstance(v, int):  # bools included
        v = int(v)
        if not core.VALUE_MIN <= v <= core.VALUE_MAX:
            raise Unlocated(f"guard constant {v} is not in (-2^62, 2^62)")
        return core.EConst(v)
    if isinstance(v, str):
        raise Unlocated(f"compare operator classes with pm.opclass({v!r}), not a string")
    if isinstance(v, Var):
        raise Unlocated(f"guards compare attributes: use {v.name}.rank, {v.name}.shape[i] or "
                         f"{v.name}.dtype, not {v.name} itself")
    if isinstance(v, SymShape):
        raise Unlocated(f"{v!r} is not a number; use {v!r}.rank or {v!r}[i]")
    raise Unlocated(f"guard operands must be integers, dtypes, operator classes or "
                     f"attributes, not {v!r}")


def _show_operand(v) -> str:
    return v.text if isinstance(v, SymExpr) else repr(v)


class SymExpr:
    """A symbolic integer expression over variable attributes."""

    __slots__ = ("core", "text")

    def __init__(self, core_expr, text: str):
        self.core = core_expr
        self.text = text

    def __repr__(self):
        return self.text

    def _bin(self, ctor, other, sym, swap=False):
        a, b = (other, self) if swap else (self, other)
        return SymExpr(ctor(_as_expr(a), _as_expr(b)),
                       f"({_show_operand(a)} {sym} {_show_operand(b)})")

    def __add__(self, o): return self._bin(core.EAdd, o, "+")
    def __radd__(self, o): return self._bin(core.EAdd, o, "+", swap=True)
    def __sub__(self, o): return self._bin(core.ESub, o, "-")
    def __rsub__(self, o): return self._bin(core.ESub, o, "-", swap=True)
    def __mul__(self, o): return self._bin(core.EMul, o, "*")
    def __rmul__(self, o): return self._bin(core.EMul, o, "*", swap=True)

    def __neg__(self):
        return SymExpr(core.ESub(core.EConst(0), self.core), f"-{self.text}")

    def __pos__(self):
        return self

    def _cmp(self, other, sym):
        a, b = _as_expr(self), _as_expr(other)
        text = f"{self.text} {sym} {_show_operand(other)}"
        g = {
            "==": lambda: core.GEq(a, b),
            "!=": lambda: core.GNot(core.GEq(a, b)),
            "<": lambda: core.GLt(a, b),
            ">": lambda: core.GLt(b, a),
            "<=": lambda: core.GNot(core.GLt(b, a)),
            ">=": lambda: core.GNot(core.GLt(a, b)),
        }[sym]()
        return SymGuard(g, text)

    def __eq__(self, o): return self._cmp(o, "==")
    def __ne__(self, o): return self._cmp(o, "!=")
    def __lt__(self, o): return self._cmp(o, "<")
    def __gt__(self, o): return self._cmp(o, ">")
    def __le__(self, o): return self._cmp(o, "<=")
    def __ge__(self, o): return self._cmp(o, ">=")

    __hash__ = None

    def __bool__(self):
        raise Unlocated(f"{self.text} used as a Python truth value; compare it, e.g. "
                         f"assert {self.text} == ...")


class SymGuard:
    """A symbolic guard (``core`` is its IR). Combine with ``and``/``or``/
    ``not`` inside pattern bodies, or ``&``/``|``/``~`` anywhere."""

    __slots__ = ("core", "text")

    def __init__(self, core_guard, text: str):
        self.core = core_guard
        self.text = text

    def __repr__(self):
        return self.text

    def __and__(self, o): return _and(self, lambda: o)
    def __rand__(self, o): return _and(o, lambda: self)
    def __or__(self, o): return _or(self, lambda: o)
    def __ror__(self, o): return _or(o, lambda: self)
    def __invert__(self): return _not(self)

    def __bool__(self):
        trace = current(required=False)
        if trace is not None and trace.sourceless:
            use = ast_transform.guard_use(sys._getframe(1))
            if use == "assert":
                trace.guards.append((self.core, trace.line()))
                return True
            if use == "assert not":
                trace.guards.append((core.GNot(self.core), trace.line()))
                return False
            raise Unlocated(
                f"guard {self.text} used in {use}: the pattern's source cannot be read (defined "
                "in the REPL or from standard input), so only `assert g` and `assert not g` are "
                "supported; combine guards with &, |, ~ or define the pattern in a file")
        raise Unlocated(
            f"guard {self.text} used as a Python truth value: guards can only be used in "
            "assert statements (and/or/not are rewritten only inside the pattern body itself)")


# The helpers the rewritten pattern body calls. Concrete Python values keep
# Python semantics; symbolic guards build GAnd/GOr/GNot.

def _and(a, thunk):
    if isinstance(a, SymGuard):
        b = thunk()
        if isinstance(b, SymGuard):
            return SymGuard(core.GAnd(a.core, b.core), f"({a.text} and {b.text})")
        return a if b else b
    return thunk() if a else a


def _or(a, thunk):
    if isinstance(a, SymGuard):
        b = thunk()
        if isinstance(b, SymGuard):
            return SymGuard(core.GOr(a.core, b.core), f"({a.text} or {b.text})")
        return b if b else a
    return a if a else thunk()


def _not(a):
    if isinstance(a, SymGuard):
        return SymGuard(core.GNot(a.core), f"not {a.text}")
    return not a


_CHAIN_OPS = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
    ">": operator.gt, ">=": operator.ge, "is": operator.is_, "is not": operator.is_not,
    "in": lambda a, b: a in b, "not in": lambda a, b: a not in b,
}


def _chain(left, ops: Sequence[str], thunks: Sequence[Callable]):
    """``a op1 b op2 c`` as ``(a op1 b) and (b op2 c)``, evaluating b once."""
    conds: List[SymGuard] = []
    result = True
    for op_name, thunk in zip(ops, thunks):
        right = thunk()
        result = _CHAIN_OPS[op_name](left, right)
        if isinstance(result, SymGuard):
            conds.append(result)
        elif not result:
            return result
        left = right
    if not conds:
        return result
    return SymGuard(core.conj(c.core for c in conds), " and ".join(c.text for c in conds))


def var() -> Var:
    """A local term variable of the pattern body (the paper's ``var()``): the
    body is wrapped in ``∃``, so every match must bind it."""
    trace = current()
    return Var(trace.local(TERM), trace)


def local_op(n_in: int, n_out: int = 1) -> Var:
    if not isinstance(n_in, int) or isinstance(n_in, bool) or n_in < 0 \
            or not isinstance(n_out, int) or isinstance(n_out, bool) or n_out < 1:
        raise Unlocated(f"pm.Op(n_in, n_out) needs ints n_in >= 0 and n_out >= 1, got "
                         f"({n_in!r}, {n_out!r})")
    trace = current()
    return Var(trace.local(FUN, n_in), trace)


def _assert(value, lineno: int):
    trace = current()
    if isinstance(value, SymGuard):
        trace.guards.append((value.core, lineno))
    elif isinstance(value, SymTerm):
        raise Unlocated(f"assert needs a comparison of attributes, got the tensor {value!r}: "
                        "pattern terms cannot be compared in guards (x == y is the tensor "
                        "eq(x, y)); compare attributes such as x.shape, x.rank or x.dtype")
    elif isinstance(value, (SymExpr, SymShape)):
        raise Unlocated(f"assert needs a comparison, got {value!r}")
    elif not value:  # a concrete false assertion: the pattern never matches
        trace.guards.append((core.GNot(core.GTrue()), lineno))


def _ret(value):
    if isinstance(value, tuple):  # a multi-root pattern: one term per root
        if len(value) < 2:
            raise Unlocated("a pattern returning a tuple (a multi-root pattern) needs at "
                             "least two roots")
        return tuple(_ret(v) for v in value)
    if isinstance(value, Var):
        value.use(TERM)
        return value
    if isinstance(value, SymTerm):
        return value
    if value is None:
        raise Unlocated("the pattern body returned None; it must return a pattern term")
    raise Unlocated(f"the pattern body returned {show(value)}, not a pattern term "
                     "(an operator application or a pattern variable)")


def _constrain(left, right, lineno: int):
    """A statement ``left <= right``: a match constraint when ``left`` is a
    pattern variable, an ordinary (discarded) comparison otherwise."""
    if isinstance(left, Var):
        left.use(TERM)
        current().constraints.append((left.sym, as_pattern(right, "the match constraint", 1),
                                       lineno))
        return None
    if isinstance(left, SymTerm):
        raise Unlocated(f"the left side of a match constraint must be a variable, not {left!r}")
    return left <= right


def _name(name: str, value):
    if isinstance(value, Var) and not value.sym.named:
        value.sym.name = name
        value.sym.named = True
    return value


HELPERS = {"__pm_assert__": _assert, "__pm_and__": _and, "__pm_or__": _or,
           "__pm_not__": _not, "__pm_chain__": _chain, "__pm_ret__": _ret,
           "__pm_constrain__": _constrain, "__pm_name__": _name}
