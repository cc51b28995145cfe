"""The embedded DSL's building blocks: ``@pm.op``, operator classes, local
variables (``pm.var()``, ``pm.Op(n_in, n_out)``) and the symbolic values a
traced pattern body computes with.

A pattern body (see :mod:`.patterns`) runs once per alternate with symbolic
:class:`Var` parameters. Operator calls build ``PApp`` terms, calls of a
variable ``f(...)`` build ``PFunVar`` terms (``f`` is then an operator
variable), pattern calls build calls, attribute reads (``x.shape[-1]``,
``x.dtype``, ``F.op_class``) build expressions, comparisons build guards;
``assert`` records guards and ``x <= p`` statements record match
constraints. The result is an *IR*: core terms whose variables are
:class:`Sym` objects, numbered by :mod:`.lowering`.
"""
from __future__ import annotations

import contextlib
import inspect
import operator
import sys
import threading
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

from . import core, symbols
from .errors import PatternError
from .graph import Node
from .symbols import OpClass, opclass

__all__ = ["Op", "op", "opclass", "OpClass", "var", "Var", "Term", "Expr", "Cond"]


class _Unlocated(PatternError):
    """A problem raised by a symbolic object; the tracer adds the location."""


TERM, FUN = "term", "fun"


# --------------------------------------------------------------------- IR


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


# ---------------------------------------------------------------- operators


class Op:
    """An operator declared with ``@pm.op``.

    ``name``, ``arity`` (number of parameters), ``n_outputs`` (the function's
    return value), ``op_class`` (an :class:`OpClass` or None) and ``symbol``
    (interned id). Calling it with pattern terms builds a pattern; with graph
    nodes, it adds the node to their graph (like ``graph.apply``), as it does
    in a rule body whatever its arguments.

    Inside a pattern body, ``pm.Op(n_in, n_out)`` (two ints) instead declares
    a *local operator variable* of ``n_in`` inputs (the paper's
    ``UnaryOp = Op(1, 1)``).
    """

    def __new__(cls, fn=None, *args, **kwargs):
        if isinstance(fn, int) and not isinstance(fn, bool):
            return _local_op(fn, *args, **kwargs)
        return super().__new__(cls)

    def __init__(self, fn: Callable, op_class: Optional[str] = None):
        self.fn = fn
        self.name = getattr(fn, "__name__", repr(fn))
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError) as e:
            raise PatternError(f"operator {self.name}: cannot read its signature ({e})") from None
        kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        for p in sig.parameters.values():
            if p.kind not in kinds:
                raise PatternError(
                    f"operator {self.name}: parameter {p.name!r} must be a plain positional "
                    "parameter (its parameters are the operator's inputs)")
        self.arity = len(sig.parameters)
        try:
            out = fn(*([None] * self.arity))
        except Exception as e:
            raise PatternError(f"operator {self.name}: calling it to read its output arity "
                               f"failed: {type(e).__name__}: {e}") from None
        if not isinstance(out, int) or isinstance(out, bool) or out < 1:
            raise PatternError(
                f"operator {self.name}: must return its output arity (an int >= 1), "
                f"returned {out!r}")
        self.n_outputs = out
        if op_class is not None and not isinstance(op_class, str):
            raise PatternError(f"operator {self.name}: op_class must be a string")
        self.op_class = None if op_class is None else opclass(op_class)
        self.symbol = symbols.intern(self)
        self.torch_targets = ()
        self.torch_auto = False
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __repr__(self) -> str:
        return f"<op {self.name}/{self.arity}>"

    def __call__(self, *args, shape=None, dtype=None):
        if len(args) != self.arity:
            raise _Unlocated(f"operator {self.name} takes {self.arity} argument(s), "
                             f"got {len(args)}")
        if any(isinstance(a, Node) for a in args):
            if any(isinstance(a, (Term, Expr, Cond, Shape)) for a in args):
                raise _Unlocated(f"operator {self.name}: cannot mix graph nodes and pattern terms")
            return args[next(i for i, a in enumerate(args) if isinstance(a, Node))].graph.apply(
                self, *args, shape=shape, dtype=dtype)
        graph = getattr(_tls, "rule_graph", None)
        if graph is not None and not _stack() and not any(
                isinstance(a, (Term, Expr, Cond, Shape)) for a in args):
            return graph.apply(self, *args, shape=shape, dtype=dtype)  # in a rule body
        if shape is not None or dtype is not None:
            raise _Unlocated(f"operator {self.name}: shape/dtype apply to graph nodes only")
        return Term(core.PApp(self.symbol, tuple(_as_pattern(a, self.name, i)
                                                 for i, a in enumerate(args))),
                    f"{self.name}({', '.join(map(repr, args))})")


def op(fn: Optional[Callable] = None, *, op_class: Optional[str] = None, torch=None):
    """Declare an operator: ``@pm.op``, ``@pm.op(op_class="...")`` or
    ``@pm.op(torch=[torch.ops.aten.matmul.default, ...])``.

    The function's parameters give the arity; its return value (an int) is
    the output arity. ``op_class`` names the operator's class (interned with
    :func:`opclass`; guards compare ``F.op_class`` with it). ``torch`` binds
    the operator to PyTorch targets (op overloads, or ``operator.getitem``):
    the importer (:mod:`pypm_verified.torch`) labels FX nodes calling them
    with this operator, and replacements call the first target. The arity
    must be the schema's argument count (calls are imported in full
    positional form). A target belongs to one operator: declaring the same
    targets again returns the operator already bound to them.
    """
    def make(f):
        if torch is None:
            return Op(f, op_class=op_class)
        return bind_torch(f, torch, op_class)
    if fn is None:
        return make
    return make(fn)


# torch target -> Op (filled by @pm.op(torch=...); the importer adds ops for
# targets nobody declared, marked ``auto``)
TORCH_OPS: dict = {}
_torch_lock = threading.RLock()


def _schema_arity(target) -> Optional[int]:
    schema = getattr(target, "_schema", None)
    return None if schema is None else len(schema.arguments)


def bind_torch(fn: Callable, targets, op_class: Optional[str] = None, auto: bool = False) -> Op:
    """The operator ``fn`` bound to the torch ``targets`` (see :func:`op`)."""
    if not isinstance(targets, (list, tuple)):
        targets = [targets]
    targets = tuple(targets)
    if not targets:
        raise PatternError(f"operator {getattr(fn, '__name__', fn)}: torch= needs at least "
                           "one target")
    with _torch_lock:
        bound = [TORCH_OPS.get(t) for t in targets]
        live = [b for b in bound if b is not None and not getattr(b, "torch_auto", False)]
        if live:
            first = live[0]
            if len(live) == len(targets) and all(b is first for b in live) \
                    and set(first.torch_targets) == set(targets):
                return first  # the same declaration again (a re-imported module)
            t = next(t for t, b in zip(targets, bound) if b in live)
            raise PatternError(
                f"operator {getattr(fn, '__name__', fn)}: torch target {t} is already bound to "
                f"operator {TORCH_OPS[t].name} (declared in "
                f"{getattr(TORCH_OPS[t].fn, '__module__', '?')}); use that operator")
    o = Op(fn, op_class=op_class)
    for t in targets:
        n = _schema_arity(t)
        if n is not None and n != o.arity:
            raise PatternError(
                f"operator {o.name}: torch target {t} takes {n} argument(s) in full positional "
                f"form ({t._schema}), but the operator has {o.arity} parameter(s)")
    o.torch_targets = targets
    o.torch_auto = auto
    with _torch_lock:
        for t in targets:
            TORCH_OPS[t] = o
    return o


def _as_pattern(a, where: str, i: int):
    if isinstance(a, Var):
        a.use(TERM)
        return a.core
    if isinstance(a, Term):
        return a.core
    if symbols.is_constant(a):
        return core.PApp(symbols.const_symbol(a), ())
    if isinstance(a, Op) or getattr(a, "_is_pattern", False):
        raise _Unlocated(f"argument {i + 1} of {where} is {a!r}: call it to build a term")
    raise _Unlocated(f"argument {i + 1} of {where} is {_show(a)}, not a pattern term "
                     "or constant")


def _show(v) -> str:
    return repr(v) if not isinstance(v, (Expr, Cond)) else f"the guard expression {v!r}"


# ---------------------------------------------------------- symbolic values


class Term:
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
        raise _Unlocated(f"pattern term {self!r} used as a Python truth value")

    def _no_compare(self, other):
        raise _Unlocated("pattern terms cannot be compared; compare attributes such as "
                         "x.shape, x.rank or x.dtype")

    __eq__ = __ne__ = __lt__ = __gt__ = __ge__ = _no_compare

    def __le__(self, other):
        raise _Unlocated("a match constraint `x <= p` must be a statement of its own")

    def _attr_owner(self):
        raise _Unlocated(f"attributes can only be read from pattern variables, not {self!r}")

    shape = property(lambda self: self._attr_owner())
    rank = dtype = elType = op_class = shape


class Var(Term):
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
        if self.trace is not _current(required=False):
            raise _Unlocated(f"variable {self.name} belongs to another pattern")
        self.trace.use(self.sym, kind)

    def _attr(self, attr):
        self.use(TERM)
        return Expr(core.EAttr(self.sym, attr), f"{self.name}.{core.attr_name(attr)}")

    @property
    def shape(self) -> "Shape":
        """``x.shape``: ``.rank`` and ``[i]`` (negative ``i`` from the end)."""
        self.use(TERM)
        return Shape(self)

    @property
    def rank(self) -> "Expr":
        return self._attr(core.RANK)

    @property
    def dtype(self) -> "Expr":
        return self._attr(core.DTYPE)

    elType = dtype  # the paper's name

    @property
    def op_class(self) -> "Expr":
        """``F.op_class`` of an operator variable: its class code."""
        self.use(FUN)
        return Expr(core.EFAttr(self.sym, core.OPCLASS), f"{self.name}.op_class")

    def __call__(self, *args):
        self.use(FUN)
        if self.sym.arity is not None and len(args) != self.sym.arity:
            raise _Unlocated(f"operator variable {self.name} takes {self.sym.arity} "
                             f"argument(s), got {len(args)}")
        return Term(core.PFunVar(self.sym, tuple(_as_pattern(a, self.name, i)
                                                 for i, a in enumerate(args))),
                    f"{self.name}({', '.join(map(repr, args))})")


class Shape:
    """``x.shape`` of a pattern variable."""

    __slots__ = ("var",)

    def __init__(self, var: Var):
        self.var = var

    def __repr__(self):
        return f"{self.var.name}.shape"

    @property
    def rank(self) -> "Expr":
        return self.var.rank

    def __getitem__(self, i) -> "Expr":
        if isinstance(i, (Expr, Term)):
            raise _Unlocated("shape indices must be Python ints, not symbolic values")
        try:
            return self.var._attr(core.shape_attr(i))
        except (TypeError, IndexError) as e:
            raise _Unlocated(str(e)) from None

    def _dims_guard(self, dims) -> "Cond":
        if not isinstance(dims, (tuple, list)):
            raise _Unlocated(f"{self!r} can only be compared with a tuple or list of ints")
        gs = [self.rank == len(dims)] + [self[i] == d for i, d in enumerate(dims) if d is not None]
        return Cond(core.conj(g.core for g in gs), f"{self!r} == {tuple(dims)!r}")

    def __eq__(self, dims):
        return self._dims_guard(dims)

    def __ne__(self, dims):
        g = self._dims_guard(dims)
        return Cond(core.GNot(g.core), f"{self!r} != {tuple(dims)!r}")

    __hash__ = None

    def __len__(self):
        raise _Unlocated("len() of a symbolic shape; use x.shape.rank")

    def __iter__(self):
        raise _Unlocated("a symbolic shape cannot be iterated; index it with x.shape[i]")

    def __bool__(self):
        raise _Unlocated(f"{self!r} used as a Python truth value")


def _as_expr(v) -> core.Expr:
    if isinstance(v, Expr):
        return v.core
    if isinstance(v, core.DType):
        return core.EConst(v.code)
    if isinstance(v, OpClass):
        return core.EConst(v.code)
    if isinstance(v, int):  # bools included
        v = int(v)
        if not core.VALUE_MIN <= v <= core.VALUE_MAX:
            raise _Unlocated(f"guard constant {v} is not in (-2^62, 2^62)")
        return core.EConst(v)
    if isinstance(v, str):
        raise _Unlocated(f"compare operator classes with pm.opclass({v!r}), not a string")
    if isinstance(v, Var):
        raise _Unlocated(f"guards compare attributes: use {v.name}.rank, {v.name}.shape[i] or "
                         f"{v.name}.dtype, not {v.name} itself")
    if isinstance(v, Shape):
        raise _Unlocated(f"{v!r} is not a number; use {v!r}.rank or {v!r}[i]")
    raise _Unlocated(f"guard operands must be integers, dtypes, operator classes or "
                     f"attributes, not {v!r}")


def _show_operand(v) -> str:
    return v.text if isinstance(v, Expr) else repr(v)


class Expr:
    """A symbolic integer expression over variable attributes."""

    __slots__ = ("core", "text")

    def __init__(self, core_expr, text: str):
        self.core = core_expr
        self.text = text

    def __repr__(self):
        return self.text

    def _bin(self, ctor, other, sym, swap=False):
        a, b = (other, self) if swap else (self, other)
        return Expr(ctor(_as_expr(a), _as_expr(b)), f"({_show_operand(a)} {sym} {_show_operand(b)})")

    def __add__(self, o): return self._bin(core.EAdd, o, "+")
    def __radd__(self, o): return self._bin(core.EAdd, o, "+", swap=True)
    def __sub__(self, o): return self._bin(core.ESub, o, "-")
    def __rsub__(self, o): return self._bin(core.ESub, o, "-", swap=True)
    def __mul__(self, o): return self._bin(core.EMul, o, "*")
    def __rmul__(self, o): return self._bin(core.EMul, o, "*", swap=True)

    def __neg__(self):
        return Expr(core.ESub(core.EConst(0), self.core), f"-{self.text}")

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
        return Cond(g, text)

    def __eq__(self, o): return self._cmp(o, "==")
    def __ne__(self, o): return self._cmp(o, "!=")
    def __lt__(self, o): return self._cmp(o, "<")
    def __gt__(self, o): return self._cmp(o, ">")
    def __le__(self, o): return self._cmp(o, "<=")
    def __ge__(self, o): return self._cmp(o, ">=")

    __hash__ = None

    def __bool__(self):
        raise _Unlocated(f"{self.text} used as a Python truth value; compare it, e.g. "
                         f"assert {self.text} == ...")


class Cond:
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
        raise _Unlocated(
            f"guard {self.text} used as a Python truth value: guards can only be used in "
            "assert statements (and/or/not are rewritten only inside the pattern body itself)")


# The helpers the rewritten pattern body calls. Concrete Python values keep
# Python semantics; symbolic guards build GAnd/GOr/GNot.

def _and(a, thunk):
    if isinstance(a, Cond):
        b = thunk()
        if isinstance(b, Cond):
            return Cond(core.GAnd(a.core, b.core), f"({a.text} and {b.text})")
        return a if b else b
    return thunk() if a else a


def _or(a, thunk):
    if isinstance(a, Cond):
        b = thunk()
        if isinstance(b, Cond):
            return Cond(core.GOr(a.core, b.core), f"({a.text} or {b.text})")
        return b if b else a
    return a if a else thunk()


def _not(a):
    if isinstance(a, Cond):
        return Cond(core.GNot(a.core), f"not {a.text}")
    return not a


_CHAIN_OPS = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
    ">": operator.gt, ">=": operator.ge, "is": operator.is_, "is not": operator.is_not,
    "in": lambda a, b: a in b, "not in": lambda a, b: a not in b,
}


def _chain(left, ops: Sequence[str], thunks: Sequence[Callable]):
    """``a op1 b op2 c`` as ``(a op1 b) and (b op2 c)``, evaluating b once."""
    conds: List[Cond] = []
    result = True
    for op_name, thunk in zip(ops, thunks):
        right = thunk()
        result = _CHAIN_OPS[op_name](left, right)
        if isinstance(result, Cond):
            conds.append(result)
        elif not result:
            return result
        left = right
    if not conds:
        return result
    return Cond(core.conj(c.core for c in conds), " and ".join(c.text for c in conds))


# ------------------------------------------------------------------ tracing

_tls = threading.local()


def _stack() -> list:
    st = getattr(_tls, "stack", None)
    if st is None:
        st = _tls.stack = []
    return st


def _current(required: bool = True):
    st = _stack()
    if st:
        return st[-1]
    if required:
        raise PatternError("pm.var() and pm.Op(n_in, n_out) declare local variables inside "
                           "a pattern body only")
    return None


class Trace:
    """What tracing one alternate records: guards, match constraints, locals,
    uses of the parameters (kind and line) and pattern calls."""

    def __init__(self, pattern, codes):
        self.pattern = pattern
        self.codes = codes
        self.guards: List[Tuple[object, int]] = []
        self.constraints: List[Tuple[Sym, object, int]] = []
        self.locals: List[Sym] = []
        self.uses: List[Tuple[Sym, str, int]] = []
        self.calls: List[CallIR] = []

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
                raise _Unlocated(f"{sym.name} is {what} (declared on line {sym.line}); it cannot "
                                 f"be {how}")
        else:
            self.uses.append((sym, kind, self.line()))

    def local(self, kind: str, arity: Optional[int] = None) -> Var:
        line = self.line()
        n = len(self.locals)
        sym = Sym(f"var{n}" if kind == TERM else f"Op{n}", None, kind, arity, line)
        self.locals.append(sym)
        return Var(sym, self)


def var() -> Var:
    """A local term variable of the pattern body (the paper's ``var()``): the
    body is wrapped in ``∃``, so every match must bind it."""
    return _current().local(TERM)


def _local_op(n_in: int, n_out: int = 1) -> Var:
    if not isinstance(n_in, int) or isinstance(n_in, bool) or n_in < 0 \
            or not isinstance(n_out, int) or isinstance(n_out, bool) or n_out < 1:
        raise _Unlocated(f"pm.Op(n_in, n_out) needs ints n_in >= 0 and n_out >= 1, got "
                         f"({n_in!r}, {n_out!r})")
    return _current().local(FUN, n_in)


def _assert(value, lineno: int):
    trace = _current()
    if isinstance(value, Cond):
        trace.guards.append((value.core, lineno))
    elif isinstance(value, (Term, Expr, Shape)):
        raise _Unlocated(f"assert needs a comparison, got {value!r}")
    elif not value:  # a concrete false assertion: the pattern never matches
        trace.guards.append((core.GNot(core.GTrue()), lineno))


def _ret(value):
    if isinstance(value, Var):
        value.use(TERM)
        return value
    if isinstance(value, Term):
        return value
    if value is None:
        raise _Unlocated("the pattern body returned None; it must return a pattern term")
    raise _Unlocated(f"the pattern body returned {_show(value)}, not a pattern term "
                     "(an operator application or a pattern variable)")


def _constrain(left, right, lineno: int):
    """A statement ``left <= right``: a match constraint when ``left`` is a
    pattern variable, an ordinary (discarded) comparison otherwise."""
    if isinstance(left, Var):
        left.use(TERM)
        _current().constraints.append((left.sym, _as_pattern(right, "the match constraint", 1),
                                       lineno))
        return None
    if isinstance(left, Term):
        raise _Unlocated(f"the left side of a match constraint must be a variable, not {left!r}")
    return left <= right


def _name(name: str, value):
    if isinstance(value, Var) and not value.sym.named:
        value.sym.name = name
        value.sym.named = True
    return value


HELPERS = {"__pm_assert__": _assert, "__pm_and__": _and, "__pm_or__": _or,
           "__pm_not__": _not, "__pm_chain__": _chain, "__pm_ret__": _ret,
           "__pm_constrain__": _constrain, "__pm_name__": _name}


@contextlib.contextmanager
def building_in(graph):
    """``with building_in(graph):`` operator calls without node arguments
    (``Zero()``, ``Add(1, 2)``) add nodes to ``graph`` (rule bodies)."""
    saved = getattr(_tls, "rule_graph", None)
    _tls.rule_graph = graph
    try:
        yield
    finally:
        _tls.rule_graph = saved


def push(trace: Trace) -> None:
    _stack().append(trace)


def pop() -> None:
    _stack().pop()
