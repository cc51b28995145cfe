"""The terms of an instance under construction (:mod:`.instances`): size
symbols (:class:`Dim`, unified as in type inference), inputs (:class:`Leaf`),
literals (:class:`Lit`) and operator applications (:class:`App`)."""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from ..dsl.operators import Op

#: the sizes a free size symbol is drawn from (size 1 is an edge case)
SIZES = (2, 3, 4, 5, 6, 7, 8, 9)

__all__ = ["SIZES", "DimList", "GenerationFailed", "Unbuildable", "Dim", "Leaf", "Lit", "App", "unify",
           "unify_shapes", "op_name"]


class GenerationFailed(Exception):
    """This random draw led nowhere (inconsistent shapes, out-of-range axes,
    a guard that fails): draw again."""


class Unbuildable(Exception):
    """The pattern cannot produce PyTorch instances at all (e.g. an operator
    with no torch target); the message says why."""


# ------------------------------------------------------------------- sizes

class Dim:
    """A size symbol; unified with others, optionally fixed to a value."""

    __slots__ = ("parent", "value", "uid")
    _next = 0

    def __init__(self, value: Optional[int] = None):
        self.parent = self
        self.value = value
        Dim._next += 1
        self.uid = Dim._next

    def find(self) -> "Dim":
        d = self
        while d.parent is not d:
            d.parent = d.parent.parent
            d = d.parent
        return d

    def __repr__(self):
        r = self.find()
        return f"d{r.uid}" if r.value is None else str(r.value)


def unify(a: Dim, b: Dim) -> None:
    ra, rb = a.find(), b.find()
    if ra is rb:
        return
    if ra.value is not None and rb.value is not None and ra.value != rb.value:
        raise GenerationFailed(f"size {ra.value} vs {rb.value}")
    if ra.value is None:
        ra.parent = rb
    else:
        rb.parent = ra


def unify_shapes(a: Sequence[Dim], b: Sequence[Dim]) -> None:
    if len(a) != len(b):
        raise GenerationFailed(f"rank {len(a)} vs {len(b)}")
    for x, y in zip(a, b):
        unify(x, y)


# ------------------------------------------------------------------ terms

class Leaf:
    """A pattern variable that is an input of the instance: ``kind`` is
    "tensor", "const" (a Python value) or "none"; ``shape`` (Dims) for
    tensors; ``arg_kinds`` the schema argument kinds of its positions."""

    __slots__ = ("name", "kind", "shape", "arg_kinds", "var", "rank_hint")

    def __init__(self, name: str, var: int):
        self.name = name
        self.var = var
        self.rank_hint: Optional[int] = None  # a guard says rank == this
        self.kind: Optional[str] = None
        self.shape: Optional[List[Dim]] = None
        self.arg_kinds: List[Tuple[str, str]] = []  # (kind, argument name)

    def __repr__(self):
        return f"<leaf {self.name} {self.kind}>"


class Lit:
    """A literal constant of the pattern (``Softmax(x, -1, None)``'s ``-1``)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return f"<lit {self.value!r}>"


class App:
    """An operator application: ``op`` (the PyPM operator), ``target`` (its
    torch target), ``args`` (Leaf / Lit / App), ``spec`` (output Dims)."""

    __slots__ = ("op", "target", "args", "spec")

    def __init__(self, op: Op, target, args):
        self.op = op
        self.target = target
        self.args = list(args)
        self.spec: Optional[List[Dim]] = None

    def __repr__(self):
        return f"<app {op_name(self.target)}>"


def op_name(target) -> str:
    packet = getattr(target, "overloadpacket", None)
    name = getattr(packet, "__name__", None) or getattr(target, "__name__", None) or str(target)
    overload = getattr(target, "_overloadname", "default")
    return name if overload in ("default", "Tensor", "int") else f"{name}.{overload}"


class DimList(list):
    """A list-of-ints constant that is the concrete sizes of some Dims
    (``normalized_shape`` of a norm)."""
