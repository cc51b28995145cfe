"""The three-valued truth of a guard: one evaluator, specialised by where
attribute values come from.

A guard is *true*, *false* or *unknown* (``docs/internals/format.md``,
the verified engine's ``eval_guard``). An expression is unknown when it
reads a variable that is not bound, an attribute its node or operator
lacks, or when an operand of ``+``/``-`` (``*``) is not within the
engine's bound ``ADD_BOUND`` (``MUL_BOUND``); a comparison with an unknown
side is unknown; and the connectives are *strict*: ``not``, ``and``, ``or``
of an unknown are unknown (``false and unknown`` too). A guard passes only
when it is true.

:class:`Evaluator` is that semantics; a subclass says where the values of
``x.α`` (:meth:`~Evaluator.attr`) and ``F.α`` (:meth:`~Evaluator.fattr`)
come from, and, where values are not plain integers, how they are bounded
(:meth:`~Evaluator.within`), combined (:meth:`~Evaluator.arith`) and
compared (:meth:`~Evaluator.compare`). Its users:

* the reference matcher (:mod:`.reference`: :func:`~.reference.guard_value`
  and the search's guards, read through a scope and a store; hence
  :mod:`.explain`, :mod:`.cover` and the reference engine of :mod:`.multi`);
* the symbolic re-check of dynamic shapes (``torch/dynamic.py``): sizes are
  sympy expressions, bounded over their ranges, and a comparison the shape
  environment cannot decide for every admissible size is :data:`UNDECIDED`;
* the instance checker's guard filter (``checking/instances.py``): the
  dtype of an operator's result that torch has not computed yet is
  :data:`PENDING`.

Two values beyond true, false and unknown (:data:`UNKNOWN`, ``None``) serve
evaluators that judge a guard before every value is known; both are
:class:`Undecided`, and an unknown operand still wins over them (strict):

* :data:`UNDECIDED`: true or false, not known which. Kleene's logic:
  ``false and undecided`` is false, ``true or undecided`` is true.
* :data:`PENDING`: a value still to come, which may turn out unknown (an
  attribute the term lacks). ``true or pending`` is pending (it may be
  ``true or unknown``: unknown); ``false and pending`` is false: not true
  whatever comes, and the instance checker asks only whether a guard is
  true (under a ``not`` this reads "not true" as false: kept as the checker
  has always judged it).

The declarative oracle (:mod:`.declarative`) has its own evaluator on
purpose: it is the independent reading the differential tests hold this
one (and the engines) to.
"""
from __future__ import annotations

from ..core import (ADD_BOUND, MUL_BOUND, EAdd, EAttr, EConst, EFAttr, EMul, ESub, GAnd, GEq,
                    GLt, GNot, GOr, GTrue)

__all__ = ["UNKNOWN", "Undecided", "UNDECIDED", "PENDING", "Evaluator"]

#: the unknown value (of an expression or a guard): None
UNKNOWN = None


class Undecided:
    """A truth value (or expression value) not decided yet; ``may_be_unknown``:
    whether it may still turn out unknown (see the module docstring)."""

    __slots__ = ("name", "may_be_unknown")

    def __init__(self, name: str, may_be_unknown: bool):
        self.name, self.may_be_unknown = name, may_be_unknown

    def __repr__(self):
        return self.name


#: true or false, not known which (Kleene)
UNDECIDED = Undecided("undecided", False)
#: a value still to come, possibly unknown
PENDING = Undecided("pending", True)


class Evaluator:
    """The guard semantics; ``ctx`` is passed, unread, to :meth:`attr` and
    :meth:`fattr`. Results: True, False, :data:`UNKNOWN` (None) or an
    :class:`Undecided` value."""

    __slots__ = ()

    def attr(self, x: int, attr: int, ctx):
        """The value of ``x.α``, or :data:`UNKNOWN`."""
        raise NotImplementedError

    def fattr(self, F: int, attr: int, ctx):
        """The value of ``F.α``, or :data:`UNKNOWN`."""
        raise NotImplementedError

    def within(self, v, bound: int) -> bool:
        """Whether an operand of ``+ - *`` is within ``bound``."""
        return -bound < v < bound

    def arith(self, kind, a, b):
        """``a + b``, ``a - b`` or ``a * b`` (``kind``: EAdd, ESub, EMul)."""
        return a + b if kind is EAdd else a - b if kind is ESub else a * b

    def compare(self, eq: bool, a, b):
        """``a == b`` (``eq``) or ``a < b``: True, False or :data:`UNDECIDED`."""
        return a == b if eq else a < b

    def value(self, e, ctx):
        k = type(e)
        if k is EConst:
            return e.z
        if k is EAttr:
            return self.attr(e.x, e.attr, ctx)
        if k is EFAttr:
            return self.fattr(e.F, e.attr, ctx)
        if k is not EAdd and k is not ESub and k is not EMul:
            raise TypeError(f"not an expression: {e!r}")
        a = self.value(e.e1, ctx)
        if a is None:
            return None
        b = self.value(e.e2, ctx)
        if b is None:
            return None
        if type(a) is Undecided:
            return a
        if type(b) is Undecided:
            return b
        bound = MUL_BOUND if k is EMul else ADD_BOUND
        if self.within(a, bound) and self.within(b, bound):
            return self.arith(k, a, b)
        return None

    def truth(self, g, ctx):
        k = type(g)
        if k is GTrue:
            return True
        if k is GEq or k is GLt:
            a = self.value(g.e1, ctx)
            b = self.value(g.e2, ctx)
            if a is None or b is None:
                return None
            if type(a) is Undecided:
                return a
            if type(b) is Undecided:
                return b
            return self.compare(k is GEq, a, b)
        if k is GNot:
            v = self.truth(g.g, ctx)
            return v if v is None or type(v) is Undecided else not v
        if k is not GAnd and k is not GOr:
            raise TypeError(f"not a guard: {g!r}")
        a = self.truth(g.g1, ctx)
        b = self.truth(g.g2, ctx)
        if a is None or b is None:
            return None
        if k is GAnd:
            if a is False or b is False:
                return False
            return b if a is True else a
        if type(a) is Undecided and a.may_be_unknown:
            return a
        if type(b) is Undecided and b.may_be_unknown:
            return b
        if a is True or b is True:
            return True
        return b if a is False else a
