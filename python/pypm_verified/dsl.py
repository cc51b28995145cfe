"""The embedded DSL: ``@pm.op``, ``@pm.pattern`` and symbolic tracing.

A pattern function is lowered to a core pattern by calling its rewritten body
(see :mod:`.rewrite`) with symbolic :class:`Var` objects: operator calls build
``PApp`` terms, attribute reads (``x.shape[-1]``, ``x.dtype``) build
expressions, comparisons build guards, and ``assert`` records guards, which
wrap the returned pattern as ``PGuard(body, g1 ∧ (g2 ∧ …))``. Definitions that
share a name are alternates, lowered to ``alt1 ‖ (alt2 ‖ …)``.
"""
from __future__ import annotations

import inspect
import operator
import threading
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from . import core, rewrite, symbols
from .errors import PatternError
from .graph import Node

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


class _Unlocated(PatternError):
    """A problem raised by a symbolic object; the tracer adds the location."""


# ---------------------------------------------------------------- operators


class Op:
    """An operator declared with ``@pm.op``.

    ``name``, ``arity`` (number of parameters), ``n_outputs`` (the function's
    return value), ``op_class`` (optional string) and ``symbol`` (interned id).
    Calling it with pattern terms builds a pattern; with graph nodes, it adds
    the node to their graph (like ``graph.apply``).
    """

    def __init__(self, fn: Callable, op_class: Optional[str] = None):
        self.fn = fn
        self.name = fn.__name__
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
        self.op_class = op_class
        self.symbol = symbols.intern(self)
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
        if shape is not None or dtype is not None:
            raise _Unlocated(f"operator {self.name}: shape/dtype apply to graph nodes only")
        return Term(core.PApp(self.symbol, tuple(_as_pattern(a, self, i)
                                                 for i, a in enumerate(args))),
                    f"{self.name}({', '.join(map(repr, args))})")


def op(fn: Optional[Callable] = None, *, op_class: Optional[str] = None):
    """Declare an operator: ``@pm.op`` or ``@pm.op(op_class="...")``.

    The function's parameters give the arity; its return value (an int) is
    the output arity.
    """
    if fn is None:
        return lambda f: Op(f, op_class=op_class)
    return Op(fn, op_class=op_class)


def _as_pattern(a, opr: Op, i: int) -> core.Pattern:
    if isinstance(a, Term):
        return a.core
    if symbols.is_constant(a):
        return core.PApp(symbols.const_symbol(a), ())
    if isinstance(a, (Pattern, Op)):
        raise _Unlocated(f"argument {i + 1} of {opr.name} is {a!r}: call it to build a term")
    raise _Unlocated(f"argument {i + 1} of {opr.name} is {_show(a)}, not a pattern term "
                     "or constant")


def _show(v) -> str:
    return repr(v) if not isinstance(v, (Expr, Cond)) else f"the guard expression {v!r}"


# ---------------------------------------------------------- symbolic values


class Term:
    """A pattern under construction (``core`` is a core pattern, ``text`` its
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
        raise _Unlocated("match constraints (x <= p) are not supported")

    def _attr_owner(self):
        raise _Unlocated(f"attributes can only be read from pattern variables, not {self!r}")

    shape = property(lambda self: self._attr_owner())
    rank = dtype = elType = shape


class Var(Term):
    """A pattern variable (a parameter of the pattern being lowered)."""

    __slots__ = ("name", "id", "trace")

    def __init__(self, name: str, vid: int, trace):
        super().__init__(core.PVar(vid), name)
        self.name = name
        self.id = vid
        self.trace = trace

    def _attr(self, attr):
        return Expr(core.EAttr(self.id, attr), f"{self.name}.{core.attr_name(attr)}")

    @property
    def shape(self) -> "Shape":
        """``x.shape``: ``.rank`` and ``[i]`` (negative ``i`` from the end)."""
        return Shape(self)

    @property
    def rank(self) -> "Expr":
        return self._attr(core.RANK)

    @property
    def dtype(self) -> "Expr":
        return self._attr(core.DTYPE)

    elType = dtype  # the paper's name


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
    if isinstance(v, int):  # bools included
        v = int(v)
        if not INT64_MIN <= v <= INT64_MAX:
            raise _Unlocated(f"guard constant {v} does not fit in 64 bits")
        return core.EConst(v)
    if isinstance(v, Var):
        raise _Unlocated(f"guards compare attributes: use {v.name}.rank, {v.name}.shape[i] or "
                         f"{v.name}.dtype, not {v.name} itself")
    if isinstance(v, Shape):
        raise _Unlocated(f"{v!r} is not a number; use {v!r}.rank or {v!r}[i]")
    raise _Unlocated(f"guard operands must be integers, dtypes or attributes, not {v!r}")


def _show_operand(v) -> str:
    return v.text if isinstance(v, Expr) else repr(v)


class Expr:
    """A symbolic integer expression over pattern-variable attributes."""

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
    """A symbolic guard (``core`` is a core guard). Combine with ``and``/``or``/
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


def _trace_stack() -> list:
    st = getattr(_tls, "stack", None)
    if st is None:
        st = _tls.stack = []
    return st


class _Trace:
    """State of one traced pattern definition."""

    def __init__(self, pattern: "Pattern"):
        self.pattern = pattern
        self.guards: List[Tuple[core.Guard, int]] = []


def _assert(value, lineno: int):
    trace = _trace_stack()[-1]
    if isinstance(value, Cond):
        trace.guards.append((value.core, lineno))
    elif isinstance(value, (Term, Expr, Shape)):
        raise _Unlocated(f"assert needs a comparison, got {value!r}")
    elif not value:  # a concrete false assertion: the pattern never matches
        trace.guards.append((core.GNot(core.GTrue()), lineno))


def _ret(value):
    if isinstance(value, Term):
        return value
    if value is None:
        raise _Unlocated("the pattern body returned None; it must return a pattern term")
    raise _Unlocated(f"the pattern body returned {_show(value)}, not a pattern term "
                     "(an operator application or a pattern variable)")


_HELPERS = {"__pm_assert__": _assert, "__pm_and__": _and, "__pm_or__": _or,
            "__pm_not__": _not, "__pm_chain__": _chain, "__pm_ret__": _ret}
assert set(_HELPERS) == set(rewrite.HELPERS)

# ----------------------------------------------------------------- patterns

_registry: Dict[Tuple[str, str], "Pattern"] = {}
_lower_lock = threading.RLock()
_generation = 0  # bumped by every definition; invalidates lowered patterns
_lowering: set = set()  # patterns being lowered (recursion detection)


class _Definition:
    """One alternate: the user function and its rewritten, compiled body."""

    def __init__(self, fn, compiled: rewrite.Compiled):
        self.fn = fn
        self.compiled = compiled
        self.made = compiled.make(_HELPERS)


class Pattern:
    """A named pattern: one or more alternate definitions (``@pm.pattern``).

    ``name``, ``params`` (parameter names; variable ``i`` is ``params[i]``),
    ``core`` (the lowered core pattern, computed at first use) and
    ``alternates`` (the lowered core pattern of each definition). Calling a
    pattern inside another pattern's body inlines it.
    """

    def __init__(self, module: str, qualname: str, name: str, params: Tuple[str, ...]):
        self.module = module
        self.qualname = qualname
        self.name = name
        self.params = params
        self.definitions: List[_Definition] = []
        self._lowered = None  # (generation, alternates, core)
        self._engine_cache = None  # verified-engine handle (binding.py)

    def __repr__(self):
        return f"<pattern {self.name}({', '.join(self.params)}), " \
               f"{len(self.definitions)} alternate(s)>"

    @property
    def var_names(self) -> Dict[int, str]:
        """Variable id -> parameter name."""
        return dict(enumerate(self.params))

    def _add(self, fn, compiled: rewrite.Compiled):
        d = _Definition(fn, compiled)
        global _generation
        with _lower_lock:
            for i, old in enumerate(self.definitions):
                if old.fn.__code__ is fn.__code__:  # the same def re-executed
                    self.definitions[i] = d
                    break
            else:
                self.definitions.append(d)
            _generation += 1

    def _lower(self):
        with _lower_lock:
            cached = self._lowered
            if cached is not None and cached[0] == _generation:
                return cached
            if self in _lowering:
                raise _Unlocated(f"pattern {self.name!r} calls itself: recursive patterns are "
                                 "not supported by the core calculus")
            _lowering.add(self)
            try:
                alternates = tuple(self._trace(d) for d in self.definitions)
            finally:
                _lowering.discard(self)
            result = (_generation, alternates, core.alts(alternates))
            self._lowered = result
            return result

    @property
    def core(self) -> core.Pattern:
        """The lowered core pattern (alternates right-nested in definition order)."""
        return self._lower()[2]

    @property
    def alternates(self) -> Tuple[core.Pattern, ...]:
        """The lowered core pattern of each definition, in definition order."""
        return self._lower()[1]

    def _trace(self, d: _Definition) -> core.Pattern:
        comp = d.compiled

        def fail(line, problem):
            raise PatternError(f"pattern {self.name!r} ({comp.filename}:{line}): {problem}") \
                from None

        trace = _Trace(self)
        args = [Var(n, i, trace) for i, n in enumerate(self.params)]
        stack = _trace_stack()
        stack.append(trace)
        try:
            result = d.made(*args)
        except _Unlocated as e:
            found, line = rewrite.error_line(e.__traceback__, comp.codes)
            fail(line if found else comp.lineno, str(e))
        except PatternError:
            raise  # already located (an inlined pattern's own error)
        except NameError as e:
            found, line = rewrite.error_line(e.__traceback__, comp.codes)
            fail(line if found else comp.lineno, f"unknown name {e.name!r}")
        except RecursionError:
            fail(comp.lineno, "recursion limit reached while lowering")
        except Exception as e:
            found, line = rewrite.error_line(e.__traceback__, comp.codes)
            fail(line if found else comp.lineno,
                 f"unsupported operation in a pattern body: {type(e).__name__}: {e}")
        finally:
            stack.pop()
        if not isinstance(result, Term):  # fell off the end: no return statement
            fail(comp.lineno, "the pattern body has no return statement; it must return a "
                              "pattern term")
        body = result.core
        bound = core.binds(body)
        for g, line in trace.guards:
            missing = core.guard_vars(g) - bound
            if missing:
                names = ", ".join(repr(self.params[v]) for v in sorted(missing))
                fail(line, f"guard reads variable {names} which the pattern does not bind "
                           "(on every alternate)")
        p = core.PGuard(body, core.conj(g for g, _ in trace.guards)) if trace.guards else body
        try:
            core.check_wf(p)
        except core.IllFormed as e:  # an inlined pattern was ill-formed after renaming
            fail(comp.lineno, f"ill-formed pattern: {e}")
        return p

    def __call__(self, *args, **kwargs):
        stack = _trace_stack()
        if not stack:
            raise PatternError(f"pattern {self.name!r} can only be called inside another "
                               "pattern's body; use pm.match to match it")
        trace = stack[-1]
        if len(args) > len(self.params):
            raise _Unlocated(f"pattern {self.name} takes {len(self.params)} argument(s), "
                             f"got {len(args) + len(kwargs)}")
        bound = dict(zip(self.params, args))
        for k, v in kwargs.items():
            if k not in self.params or k in bound:
                raise _Unlocated(f"pattern {self.name}: unexpected or repeated argument {k!r}")
            bound[k] = v
        if len(bound) != len(self.params):
            raise _Unlocated(f"pattern {self.name} takes {len(self.params)} argument(s), "
                             f"got {len(bound)}")
        ren = {}
        for i, name in enumerate(self.params):
            v = bound[name]
            if not isinstance(v, Var):
                raise _Unlocated(f"pattern calls take variables: argument {name!r} of "
                                 f"{self.name} is {_show(v)}")
            if v.trace is not trace:
                raise _Unlocated(f"variable {v.name} belongs to another pattern")
            ren[i] = v.id
        return Term(core.rename(self.core, ren),
                    f"{self.name}({', '.join(bound[n].name for n in self.params)})")


def pattern(fn: Callable) -> Pattern:
    """Define a pattern (``@pm.pattern``). Defining a name again adds an
    alternate; every definition returns the same :class:`Pattern`. Bodies are
    lowered lazily, at first use."""
    if isinstance(fn, Pattern) or not inspect.isfunction(fn):
        raise PatternError(f"@pm.pattern decorates a function, not {fn!r}")
    compiled = rewrite.compile_pattern(fn, fn.__name__)
    where = f"{compiled.filename}:{compiled.lineno}"
    sig = inspect.signature(fn)
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    for p in sig.parameters.values():
        if p.kind not in kinds:
            raise PatternError(f"pattern {fn.__name__!r} ({where}): parameter {p.name!r} must be "
                               "a plain positional parameter (parameters are pattern variables)")
    params = tuple(sig.parameters)
    key = (fn.__module__, fn.__qualname__)
    with _lower_lock:
        pat = _registry.get(key)
        if pat is None:
            pat = Pattern(fn.__module__, fn.__qualname__, fn.__name__, params)
        elif pat.params != params:
            raise PatternError(
                f"pattern {fn.__name__!r} ({where}): alternates must have the same parameters; "
                f"this definition has ({', '.join(params)}), earlier ones "
                f"({', '.join(pat.params)})")
        pat._add(fn, compiled)
        _registry[key] = pat
    return pat
