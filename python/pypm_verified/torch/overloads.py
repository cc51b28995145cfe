"""The PyTorch overload registry: how ``@pm.op(torch=[...])`` declarations are
bound to ATen op overloads, and which operator an FX node calling an
overload is *labelled* with in term graphs.

* **One label per overload.** Every overload (or ``operator.getitem``) seen
  in a graph or named by a declaration has one label operator, made once
  and never replaced, so a symbol a pattern was built with stays valid: the
  library's declaration (:mod:`.ops`, loaded before any other declaration
  is bound); else the first declaration that binds that overload alone;
  else an operator made on first sight, named after the overload (a
  declaration binding several overloads, or the importer meeting an
  undeclared one).
* **Every declaration is its own operator.** ``@pm.op(torch=...)`` always
  returns a new :class:`~pypm_verified.dsl.Op` with its own name, arity
  (checked against each overload's schema), commutativity and docstring;
  its pattern terms apply the labels of its overloads (several overloads:
  an alternation over them), and rule bodies calling it build its first
  overload. Two declarations of one overload coexist: a user's commutative
  ``Mul`` on ``aten.mul.Tensor`` matches ``mul(b, a)``, the library's
  ``Mul`` still does not.
* **Operator classes are the overload's.** Guards read ``F.op_class`` from
  the graph's node, i.e. from its label, so a declaration's ``op_class``
  must agree with the class its overloads' labels already have; a label
  made on first sight without a class takes the first class a declaration
  gives. A declaration giving no class has the labels' class (when they
  agree). A conflicting class is refused, naming both declarations.
  (A first declaration's class is, by that rule, what every pattern sees
  for that overload: it is a fact about the ATen op, not about the module.)

What ``torch=`` accepts (:func:`resolve_targets`): op overloads
(``aten.mul.Tensor``), ``operator.getitem``, op packets (``aten.mul``: its
*functional* overloads -- a Tensor argument, Tensor results, no mutated or
named-tensor argument -- whose full-positional arity is the operator's
parameter count, in the packet's order) and torch functions with an ATen
counterpart *by name*: a function ``torch.overrides`` lists as overridable
(``torch.sigmoid``, ``torch.nn.functional.silu``, ``torch.Tensor.mul``)
whose ``__name__`` names an ATen packet stands for that packet
(``torch.sigmoid`` -> ``aten.sigmoid`` -> ``aten.sigmoid.default``;
``torch.mul`` -> ``aten.mul`` -> ``mul.Tensor``, ``mul.Scalar``). Anything
else is refused when the operator is declared, naming its ``file:line``.

The labels themselves are data the DSL shares (:mod:`pypm_verified.dsl.torch_labels`:
the DSL's reading of PyTorch code applies them); this module binds
declarations to them. ``@pm.op(torch=[...])`` records the targets on the
operator (``Op.torch_request``, :mod:`pypm_verified.dsl.operators`); they are
bound here: by ``pm.op`` at once (:func:`bind_requested`), and, for an
operator declared through :func:`pypm_verified.dsl.op` before this layer was
loaded, when it loads (:func:`bind_requests`, after the library's
declarations). The DSL never calls this layer.
"""
from __future__ import annotations

import operator
from typing import Dict, List, Optional, Tuple

import torch

from ..dsl import operators as _operators
from ..dsl import torch_labels as _labels
from ..dsl.operators import Op
from ..dsl.torch_labels import TORCH_OPS, label_for, make_fn, op_of_target  # noqa: F401
from ..errors import PatternError

__all__ = ["TORCH_OPS", "bind", "bind_torch", "bind_requested", "bind_requests", "label_for",
           "op_of_target", "resolve_targets", "packet_overloads", "torch_function_packet"]

_overridable: Optional[set] = None


# --------------------------------------------------------------- resolving


def _is_functional(overload) -> bool:
    """A Tensor argument, Tensor results, nothing mutated, no named-tensor argument."""
    s = overload._schema
    if s.is_mutable or not s.returns:
        return False
    if any("Dimname" in str(a.type) for a in s.arguments):
        return False
    return (any("Tensor" in str(a.type) for a in s.arguments)
            and all("Tensor" in str(r.type) for r in s.returns))


def packet_overloads(packet, arity: int) -> List[object]:
    """The overloads of the op packet ``packet`` that ``torch=[packet]``
    binds for an operator of ``arity`` parameters: the functional ones
    whose full-positional argument count is ``arity``, ``default`` first,
    then in the packet's order."""
    names = list(packet.overloads())
    if "default" in names:
        names.remove("default")
        names.insert(0, "default")
    out = []
    for n in names:
        ov = getattr(packet, n)
        if _is_functional(ov) and len(ov._schema.arguments) == arity:
            out.append(ov)
    return out


def torch_function_packet(fn):
    """The ATen packet standing for the torch function ``fn`` (one that
    ``torch.overrides`` lists as overridable, whose ``__name__`` names a
    packet of ``torch.ops.aten``), or None."""
    global _overridable
    if _overridable is None:
        _overridable = {id(f) for fs in torch.overrides.get_overridable_functions().values()
                        for f in fs}
    name = getattr(fn, "__name__", None)
    if id(fn) not in _overridable or not isinstance(name, str) or name.startswith("_") \
            or name.endswith("_"):  # private, dunder or in place
        return None
    packet = getattr(torch.ops.aten, name, None)
    return packet if isinstance(packet, torch._ops.OpOverloadPacket) else None


def _describe(t) -> str:
    name = getattr(t, "__qualname__", None) or getattr(t, "__name__", None)
    mod = getattr(t, "__module__", None)
    return f"{mod}.{name}" if name and mod else repr(t)


def resolve_targets(targets, arity: int, name: str = "?", where: str = "?") -> Tuple[object, ...]:
    """The overloads ``torch=targets`` binds for an operator ``name`` of
    ``arity`` parameters declared at ``where`` (see the module docstring);
    raises PatternError naming ``where`` for anything else."""
    def refuse(msg):
        raise PatternError(f"{where}: operator {name}: {msg}")
    if isinstance(targets, (str, bytes)) or not isinstance(targets, (list, tuple)):
        targets = [targets]
    if not targets:
        refuse("torch= needs at least one target")
    out: List[object] = []
    for t in targets:
        if isinstance(t, torch._ops.OpOverload) or t is operator.getitem:
            n = _labels.schema_arity(t) if t is not operator.getitem else 2
            if n != arity:
                schema = getattr(t, "_schema", "operator.getitem(container, index)")
                refuse(f"torch target {t} takes {n} argument(s) in full positional form "
                       f"({schema}), but the operator has {arity} parameter(s)")
            found = [t]
        elif isinstance(t, torch._ops.OpOverloadPacket):
            found = packet_overloads(t, arity)
            if not found:
                fun = [n for n in t.overloads() if _is_functional(getattr(t, n))]
                have = ", ".join(f"{t}.{n} takes {len(getattr(t, n)._schema.arguments)}"
                                 for n in fun) or "none"
                refuse(f"torch target {t} (an op packet) has no functional overload taking "
                       f"{arity} argument(s) in full positional form (its functional "
                       f"overloads: {have})")
        elif callable(t) and torch_function_packet(t) is not None:
            packet = torch_function_packet(t)
            found = packet_overloads(packet, arity)
            if not found:
                refuse(f"torch target {_describe(t)} stands for {packet}, which has no "
                       f"functional overload taking {arity} argument(s) in full positional "
                       "form; name the overload")
        else:
            what = "a string" if isinstance(t, str) else _describe(t)
            refuse(f"torch target {what} is not an ATen op overload (torch.ops.aten.mul.Tensor), "
                   "an op packet (torch.ops.aten.mul), operator.getitem, or a torch function "
                   "with an ATen op of the same name (torch.sigmoid)")
        for f in found:
            if f not in out:
                out.append(f)
    return tuple(out)


# ----------------------------------------------------------------- binding


def _where_of(o: Op) -> str:
    return getattr(o, "where", None) or "?"


def _ensure_library() -> None:
    """The library's declarations label their overloads: load them before
    binding any other declaration."""
    from . import ops  # noqa: F401 -- torch/ops.py imports this module first


def bind(o: Op, targets, where: Optional[str] = None, library: bool = False) -> Op:
    """Bind the operator ``o`` (just made by ``@pm.op``) to ``targets``:
    resolve them (:func:`resolve_targets`), label each overload, check the
    operator class and set ``o.torch_targets``, ``o.labels`` and
    ``o.symbol``. ``library``: a declaration of :mod:`.ops`."""
    where = where or _where_of(o)
    o.where = where
    if not library:
        _ensure_library()
    resolved = resolve_targets(targets, o.arity, o.name, where)
    with _labels.lock():
        labels: List[Op] = []
        fresh: Dict[object, Op] = {}
        for t in resolved:
            lab = TORCH_OPS.get(t)
            if lab is None:
                if len(resolved) == 1:
                    lab = o  # the first declaration of an overload alone labels it
                else:
                    lab = _labels.auto_label(t, o.op_class, where)
                fresh[t] = lab
            labels.append(lab)
        _check_class(o, [(t, lab) for t, lab in zip(resolved, labels) if t not in fresh])
        for t, lab in fresh.items():
            TORCH_OPS[t] = lab
        if o.op_class is None:
            classes = {lab.op_class for lab in labels}
            if len(classes) == 1:
                o.op_class = classes.pop()
        for t, lab in zip(resolved, labels):  # a label made on first sight takes the class
            if lab.op_class is None and o.op_class is not None and lab.torch_auto:
                lab.op_class, lab.class_where = o.op_class, where
    o.torch_targets = resolved
    o.labels = tuple(lab.symbol for lab in labels)
    o.symbol = o.labels[0]
    return o


def _check_class(o: Op, bound) -> None:
    if o.op_class is None:
        return
    for t, lab in bound:
        if lab.op_class == o.op_class:
            continue
        if lab.op_class is None and lab.torch_auto:
            continue  # nobody gave the overload a class yet: this declaration does
        origin = getattr(lab, "class_where", None) or _where_of(lab)
        if lab.op_class is None:
            has = (f"{t} has no op class (operator {lab.name}, declared at {origin}, labels it "
                   "without one)")
        else:
            has = (f"{t} has op_class {str(lab.op_class)!r} (from operator {lab.name} declared "
                   f"at {origin})")
        raise PatternError(
            f"{o.where}: operator {o.name}: op_class {str(o.op_class)!r} conflicts: {has}; "
            "guards read one class per overload: drop op_class here or make the two agree")


def bind_torch(fn, targets, op_class: Optional[str] = None, where: Optional[str] = None,
               library: bool = False, commutative=False) -> Op:
    """A new operator made from ``fn`` and bound to ``targets`` (what
    ``@pm.op(torch=targets, op_class=...)`` does)."""
    return bind(Op(fn, op_class=op_class, commutative=commutative), targets, where, library)


def bind_requested(o: Op) -> Op:
    """Bind the operator ``o`` to the targets its declaration asked for
    (``Op.torch_request``, recorded by the DSL), unless bound already:
    what ``pm.op(torch=...)`` does as the operator is declared. Raises
    PatternError naming the declaration."""
    if _operators.take_torch_request(o):
        bind(o, o.torch_request)
    return o


def bind_requests() -> None:
    """Bind every operator declared with ``torch=`` that is not bound yet
    (declared through :func:`pypm_verified.dsl.op` before this layer was
    loaded): run when the layer loads, after the library's declarations. A
    request refused is kept on its operator (``Op.torch_error``), raised
    where the operator is used."""
    for o in _operators.take_torch_requests():
        try:
            bind(o, o.torch_request)
        except PatternError as e:
            o.torch_error = e
