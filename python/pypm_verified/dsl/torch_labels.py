"""The label operator of each PyTorch target: the one operator term graphs
label the FX nodes calling an op overload (or ``operator.getitem``) with,
and the one the DSL's reading of PyTorch code (:mod:`.torch_code`) applies
for it. Also the list operators and the dtype table the two share.

One label per target, made once and never replaced, so that a symbol a
pattern was built with stays valid: the first declaration binding that
overload alone (the PyTorch layer binds its own declarations,
:mod:`pypm_verified.torch.ops`, when it loads, before any other:
:mod:`pypm_verified.torch.overloads`), else an operator made on first sight
(:func:`label_for`), named after the overload.

This is data the DSL and the PyTorch layer share, so it lives in the lower
of the two: the PyTorch layer fills it (binding declarations), the DSL reads
it, and neither calls the other. Imports torch: it is loaded only when
PyTorch code or a torch-bound operator is used.
"""
from __future__ import annotations

import os
import operator
import threading
from typing import Dict, List, Optional

import torch

from .. import core
from .operators import Op

__all__ = ["TORCH_OPS", "TORCH_TO_PM", "PM_TO_TORCH", "label_for", "op_of_target", "list_op",
           "is_list_op", "make_fn", "schema_types", "lock"]

#: overload (or ``operator.getitem``) -> its label operator. Made once per
#: target and never replaced; labels made on first sight have ``torch_auto``.
TORCH_OPS: Dict[object, Op] = {}
_torch_lock = threading.RLock()

#: torch dtypes -> the DSL's
TORCH_TO_PM = {
    torch.float32: core.f32, torch.float16: core.f16, torch.bfloat16: core.bf16,
    torch.float64: core.f64, torch.int8: core.i8, torch.int16: core.i16,
    torch.int32: core.i32, torch.int64: core.i64, torch.uint8: core.u8,
    torch.bool: core.bool_,
}
PM_TO_TORCH = {v: k for k, v in TORCH_TO_PM.items()}

_list_ops: Dict[int, Op] = {}


def _after_fork_in_child() -> None:
    # a thread of the parent holding the lock does not exist in the child; a
    # label it was making is absent or stored whole (one dict store), a
    # declaration it was binding may have labelled some of its overloads
    global _torch_lock
    _torch_lock = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def lock() -> threading.RLock:
    """The lock under which labels are made and declarations bound."""
    return _torch_lock


def make_fn(name: str, n: int):
    """A plain function called ``name`` of ``n`` parameters returning 1: an
    operator's signature for ``Op``."""
    ns: dict = {}
    exec(f"def f({', '.join(f'a{i}' for i in range(n))}):\n    return 1\n", ns)  # noqa: S102
    fn = ns["f"]
    fn.__name__ = fn.__qualname__ = name
    return fn


def schema_arity(target) -> Optional[int]:
    """The number of arguments of ``target``'s schema (None: no schema)."""
    schema = getattr(target, "_schema", None)
    return None if schema is None else len(schema.arguments)


def auto_label(target, op_class, where: str) -> Op:
    """A label operator made on first sight of ``target``, named after it."""
    n = schema_arity(target)
    lab = Op(make_fn(str(target), 2 if n is None else n))  # operator.getitem: 2
    lab.op_class = op_class
    lab.torch_targets = (target,)
    lab.labels = (lab.symbol,)
    lab.torch_auto = True
    lab.where = f"made on first sight of {target}"
    lab.class_where = where if op_class is not None else None
    return lab


def label_for(target) -> Op:
    """The label operator of ``target`` (made on first sight, named after
    the overload, when no declaration made one). Raises TypeError for a
    target without a schema."""
    lab = TORCH_OPS.get(target)
    if lab is not None:
        return lab
    if schema_arity(target) is None and target is not operator.getitem:
        raise TypeError(f"{target!r} has no schema")
    with _torch_lock:
        lab = TORCH_OPS.get(target)
        if lab is None:
            lab = TORCH_OPS[target] = auto_label(target, None, "?")
    return lab


def op_of_target(target) -> Optional[Op]:
    """The label operator of the torch ``target``, or None."""
    return TORCH_OPS.get(target)


def list_op(n: int) -> Op:
    """The operator of lists of ``n`` elements some of which are tensors."""
    op = _list_ops.get(n)
    if op is None:
        op = _list_ops[n] = Op(make_fn(f"list{n}", n))
    return op


def is_list_op(op) -> bool:
    """Whether ``op`` is one of :func:`list_op`'s operators."""
    return _list_ops.get(getattr(op, "arity", -1)) is op


def schema_types(schema) -> Optional[List[str]]:
    """The argument types as the schema spells them (``Tensor?``,
    ``SymInt[]``), or None where its text does not parse."""
    text = str(schema)
    start, end = text.find("("), text.rfind(") -> ")
    if start < 0 or end < 0:
        return None
    parts, depth, cur = [], 0, ""
    for ch in text[start + 1:end]:
        depth += ch in "([" and 1 or ch in ")]" and -1 or 0
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    parts = [p for p in parts + [cur.strip()] if p and p != "*"]
    if len(parts) != len(schema.arguments):
        return None
    out = []
    for p, a in zip(parts, schema.arguments):
        i = p.find(f" {a.name}=")
        i = i if i >= 0 else (len(p) - len(a.name) - 1 if p.endswith(f" {a.name}") else -1)
        if i <= 0:
            return None
        out.append(p[:i])
    return out
