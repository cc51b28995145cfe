"""``@pm.op``: operators, their arity, output arity and class.

Calling an operator with pattern terms builds a pattern; with graph nodes,
or inside a rule body (see :mod:`.building`), it asks the builder to add a
node. ``op(torch=[...])`` records the PyTorch targets asked for on the
operator (``Op.torch_request``) and in a list of requests
(:func:`take_torch_requests`): data the PyTorch layer reads and binds
(:mod:`pypm_verified.torch.overloads`): ``pm.op`` (:func:`pypm_verified.op`,
the API above both layers) has it bound at once, and the layer binds the
requests left when it loads. The DSL never imports or calls that layer.
"""
from __future__ import annotations

import inspect
import threading
from typing import Callable, List, Optional

from ..core import symbols
from ..core.graph import Node
from ..core.symbols import opclass
from ..errors import PatternError
from . import building, trace
from .symbolic import SymTerm, SymExpr, SymGuard, SymShape, as_pattern, local_op
from .trace import Unlocated
from .. import core

__all__ = ["Op", "op", "OpTerm", "take_torch_requests", "take_torch_request"]

_SYMBOLIC = (SymTerm, SymExpr, SymGuard, SymShape)

#: operators declared with ``torch=`` whose targets are not bound yet, in
#: the order declared: what the PyTorch layer binds when it loads
_torch_requests: List["Op"] = []
_requests_lock = threading.Lock()


def take_torch_requests() -> List["Op"]:
    """The operators declared with ``torch=`` and not bound yet, in the
    order declared, taken off the list (the PyTorch layer binds them)."""
    with _requests_lock:
        out = list(_torch_requests)
        del _torch_requests[:]
    return out


def take_torch_request(o: "Op") -> bool:
    """Take ``o`` off the list of requests; whether it was on it (declared
    with ``torch=`` and not bound yet)."""
    with _requests_lock:
        for i, r in enumerate(_torch_requests):
            if r is o:
                del _torch_requests[i]
                return True
    return False


def _where(fn) -> str:
    """``file:line`` of ``fn``'s definition (its first decorator), for messages."""
    from .rules import short_path
    code = getattr(fn, "__code__", None)
    if code is None:
        return "?"
    return f"{short_path(code.co_filename)}:{code.co_firstlineno}"


class OpTerm(SymTerm):
    """An application of the operator ``op`` (what calling an :class:`Op`
    on pattern terms returns): ``has_attr`` names arguments by ``op``'s
    parameters."""

    __slots__ = ("op",)

    def __init__(self, core_pattern, text: str, op: "Op"):
        super().__init__(core_pattern, text)
        self.op = op


class Op:
    """An operator declared with ``@pm.op``.

    ``name``, ``arity`` (number of parameters), ``n_outputs`` (the function's
    return value), ``op_class`` (an :class:`OpClass` or None), ``commutative``
    (None or the pair of positions that commute), ``where`` (``file:line``
    of the definition) and ``symbol`` (interned id: graph nodes it builds
    carry it). An operator bound to torch targets also has
    ``torch_targets`` (the overloads; rule bodies build the first) and
    ``labels`` (the symbols of their labels, :mod:`.torch_labels`:
    its pattern terms apply each, as an alternation; ``symbol`` is the
    first). Calling it with pattern terms builds a pattern; with graph
    nodes, it adds the node to their graph (like ``graph.apply``), as it does
    in a rule body whatever its arguments. Arguments may be given by
    keyword, and omitted ones take their defaults (:meth:`parameters`:
    the function's, and a torch-bound operator's schema defaults, so
    ``Add(x, y)`` is ``Add(x, y, 1)``); ``shape=``/``dtype=`` are a graph
    node's attributes unless the operator has a parameter of that name.

    Inside a pattern body, ``pm.Op(n_in, n_out)`` (two ints) instead declares
    a *local operator variable* of ``n_in`` inputs (the paper's
    ``UnaryOp = Op(1, 1)``).
    """

    def __new__(cls, fn=None, *args, **kwargs):
        if isinstance(fn, int) and not isinstance(fn, bool):
            return local_op(fn, *args, **kwargs)
        return super().__new__(cls)

    def __init__(self, fn: Callable, op_class: Optional[str] = None, commutative=False):
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
        self.commutative = _commutative_positions(self, commutative)
        self.symbol = symbols.intern(self)
        self.labels = (self.symbol,)
        self.where = _where(fn)
        self.torch_targets = ()
        self.torch_auto = False
        self.torch_request = None  # the targets ``op(torch=...)`` asked for, until bound
        self.torch_error = None  # why the PyTorch layer refused them
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __repr__(self) -> str:
        return f"<op {self.name}/{self.arity}>"

    def _unbound(self):
        if self.torch_error is not None:
            raise self.torch_error
        raise Unlocated(f"operator {self.name} ({self.where}) is declared with torch= but not "
                        "bound to its targets: declare it with pm.op (pypm_verified.op), or "
                        "load the PyTorch layer (import pypm_verified.torch), which binds it")

    def parameters(self):
        """``(names, (defaults, aliases))``: the parameter names in order,
        the defaults by name (the function's own, then, for an operator
        bound to torch targets, its first overload's schema defaults:
        ``Add(x, y)`` is ``alpha=1``) and the schema's argument names where
        a parameter was renamed (``from`` -> ``from_``), which keywords may
        spell too."""
        sig = self.__dict__.get("_sig")
        if sig is not None and sig[0] == self.torch_targets:
            return sig[1], sig[2]
        ps = list(inspect.signature(self.fn).parameters.values())
        names = tuple(p.name for p in ps)
        defaults = {p.name: p.default for p in ps if p.default is not inspect.Parameter.empty}
        aliases = {}
        schema = getattr(self.torch_targets[0], "_schema", None) if self.torch_targets else None
        if schema is not None and len(schema.arguments) == len(names):
            for name, a in zip(names, schema.arguments):
                aliases[a.name] = name
                if name not in defaults and a.has_default_value():
                    defaults[name] = a.default_value
        self._sig = (self.torch_targets, names, (defaults, aliases))
        return names, (defaults, aliases)

    def bind_arguments(self, args, kwargs) -> tuple:
        """``args`` and ``kwargs`` as the full positional argument tuple:
        keywords placed by parameter name, omitted parameters given their
        defaults (:meth:`parameters`). Raises :class:`PatternError` naming
        a missing or unknown parameter."""
        if len(args) > self.arity:
            raise Unlocated(f"operator {self.name} takes {self.arity} argument(s), "
                            f"got {len(args)}")
        if not kwargs and len(args) == self.arity:
            return tuple(args)
        names, (defaults, aliases) = self.parameters()
        out = dict(zip(names, args))
        for k, v in kwargs.items():
            name = k if k in names else aliases.get(k)
            if name is None:
                raise Unlocated(f"operator {self.name} has no parameter {k!r} (its parameters: "
                                f"{', '.join(names)})")
            if name in out:
                raise Unlocated(f"operator {self.name}: argument {name!r} given twice")
            out[name] = v
        missing = [n for n in names if n not in out and n not in defaults]
        if missing:
            raise Unlocated(
                f"operator {self.name} takes {self.arity} argument(s), got "
                f"{len(args) + len(kwargs)}: missing {', '.join(map(repr, missing))} "
                f"({self.signature_text()})")
        return tuple(out[n] if n in out else defaults[n] for n in names)

    def signature_text(self) -> str:
        """``Mean(self, dim, keepdim=False, dtype=None)``: the parameters
        with their defaults."""
        names, (defaults, _) = self.parameters()
        return f"{self.name}(" + ", ".join(
            f"{n}={defaults[n]!r}" if n in defaults else n for n in names) + ")"

    def __call__(self, /, *args, **kwargs):
        if self.torch_request is not None and not self.torch_targets:
            self._unbound()
        shape = dtype = None
        if kwargs:  # shape=/dtype= are a graph node's, unless the operator has such a parameter
            names = self.parameters()[0]
            if "shape" in kwargs and "shape" not in names:
                shape = kwargs.pop("shape")
            if "dtype" in kwargs and "dtype" not in names:
                dtype = kwargs.pop("dtype")
        if kwargs or len(args) != self.arity:
            args = self.bind_arguments(args, kwargs)
        if any(isinstance(a, Node) for a in args):
            if any(isinstance(a, _SYMBOLIC) for a in args):
                raise Unlocated(f"operator {self.name}: cannot mix graph nodes and pattern terms")
            return args[next(i for i, a in enumerate(args) if isinstance(a, Node))].graph.apply(
                self, *args, shape=shape, dtype=dtype)
        builder = building.current_builder()
        if builder is not None and trace.current(required=False) is None and not any(
                isinstance(a, _SYMBOLIC) for a in args):
            return builder.apply(self, *args, shape=shape, dtype=dtype)  # in a rule body
        if shape is not None or dtype is not None:
            raise Unlocated(f"operator {self.name}: shape/dtype apply to graph nodes only")
        pats = tuple(as_pattern(a, self.name, i) for i, a in enumerate(args))
        text = f"{self.name}({', '.join(map(repr, args))})"
        apps = [core.PApp(label, pats) for label in self.labels]
        if self.commutative is not None:
            from .relay import commute  # the sugar lives with the other Relay features
            i, j = self.commutative
            first = commute(SymTerm(apps[0], text), i, j).core  # counts, checks the limit
            swapped = list(pats)
            swapped[i], swapped[j] = swapped[j], swapped[i]
            apps = [first] + [core.PAlt(a, core.PApp(a.f, tuple(swapped))) if first is not apps[0]
                              else a for a in apps[1:]]
        p = apps[-1]
        for a in reversed(apps[:-1]):  # one overload after the other
            p = core.PAlt(a, p)
        return OpTerm(p, text, self)


def _commutative_positions(o: "Op", commutative):
    """None, or the pair of argument positions that commute."""
    if commutative is False or commutative is None:
        return None
    if commutative is True:
        if o.arity != 2:
            raise PatternError(
                f"operator {o.name}: commutative=True needs exactly 2 arguments, it has "
                f"{o.arity}; name the two that commute, e.g. commutative=(0, 1)")
        return (0, 1)
    if (isinstance(commutative, tuple) and len(commutative) == 2
            and all(isinstance(i, int) and not isinstance(i, bool) for i in commutative)
            and all(0 <= i < o.arity for i in commutative)
            and commutative[0] != commutative[1]):
        return tuple(sorted(commutative))
    raise PatternError(f"operator {o.name}: commutative must be True or a pair of distinct "
                       f"argument positions in [0, {o.arity}), not {commutative!r}")


def op(fn: Optional[Callable] = None, *, op_class: Optional[str] = None, torch=None,
       commutative=False):
    """Declare an operator: ``@pm.op``, ``@pm.op(op_class="...")`` or
    ``@pm.op(torch=[torch.ops.aten.matmul.default, ...])``.

    The function's parameters give the arity; its return value (an int) is
    the output arity. ``op_class`` names the operator's class (interned with
    :func:`opclass`; guards compare ``F.op_class`` with it).
    ``commutative=True`` (or a pair of positions) lets every application of
    this operator match its two arguments in either order.

    ``torch`` asks for the operator to be bound to PyTorch targets: this
    records them (``Op.torch_request``, and the list
    :func:`take_torch_requests`) for the PyTorch layer to bind
    (:mod:`pypm_verified.torch.overloads`); ``pm.op``
    (:func:`pypm_verified.op`, which says what ``torch`` accepts) has them
    bound as the operator is declared, else the PyTorch layer binds them
    when it loads. Until then the operator cannot be applied.
    """
    def make(f):
        o = Op(f, op_class=op_class, commutative=commutative)
        if torch is not None:
            o.torch_request = torch
            with _requests_lock:
                _torch_requests.append(o)
        return o
    if fn is None:
        return make
    return make(fn)
