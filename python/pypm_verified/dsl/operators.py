"""``@pm.op``: operators, their arity, output arity and class.

Calling an operator with pattern terms builds a pattern; with graph nodes,
or inside a rule body (see :mod:`.building`), it asks the builder to add a
node. ``@pm.op(torch=[...])`` binds it to PyTorch targets
(:mod:`pypm_verified.torch.targets`).
"""
from __future__ import annotations

import inspect
from typing import Callable, Optional

from ..core import symbols
from ..core.graph import Node
from ..core.symbols import opclass
from ..errors import PatternError
from . import building, trace
from .symbolic import SymTerm, SymExpr, SymGuard, SymShape, as_pattern, local_op
from .trace import Unlocated
from .. import core

__all__ = ["Op", "op"]

_SYMBOLIC = (SymTerm, SymExpr, SymGuard, SymShape)


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
        self.torch_targets = ()
        self.torch_auto = False
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __repr__(self) -> str:
        return f"<op {self.name}/{self.arity}>"

    def __call__(self, *args, shape=None, dtype=None):
        if len(args) != self.arity:
            raise Unlocated(f"operator {self.name} takes {self.arity} argument(s), "
                             f"got {len(args)}")
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
        term = SymTerm(core.PApp(self.symbol, tuple(as_pattern(a, self.name, i)
                                                 for i, a in enumerate(args))),
                       f"{self.name}({', '.join(map(repr, args))})")
        if self.commutative is not None:
            from .relay import commute  # the sugar lives with the other Relay features
            return commute(term, *self.commutative)
        return term


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
            return Op(f, op_class=op_class, commutative=commutative)
        from ..torch.targets import bind_torch  # torch targets: the torch layer's registry
        o = bind_torch(f, torch, op_class)
        pos = _commutative_positions(o, commutative)
        if pos != o.commutative:
            if o.commutative is not None and pos != o.commutative:
                raise PatternError(f"operator {o.name}: already declared with commutative="
                                   f"{o.commutative!r}")
            o.commutative = pos
        return o
    if fn is None:
        return make
    return make(fn)
