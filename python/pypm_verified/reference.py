"""The reference matcher: the declarative rules of the paper (Fig. 6, 8) read
as a generator of solutions.

``solutions(p, node, theta)`` yields every substitution extending ``theta``
under which ``p`` matches ``node``, in the order the rules are read left to
right: P-VAR binds an unbound variable or accepts the node it is bound to;
P-FUN threads the substitution through the children from left to right;
P-ALT yields all solutions of the left alternate, then of the right one;
P-GUARD keeps the solutions whose guard is *true* (three-valued, strict).
The first solution is the answer. This is deliberately a different program
from the verified engine (a state machine with a continuation and a
backtracking stack); the two are compared by the tests.
"""
from __future__ import annotations

from typing import Dict, Iterator, Optional

from . import core
from .errors import OutOfFuel

DEFAULT_FUEL = 1 << 24

Subst = Dict[int, object]  # variable id -> graph Node


class Fuel:
    """A step budget; ``tick()`` raises :class:`OutOfFuel` when it is spent."""

    __slots__ = ("left",)

    def __init__(self, steps: int = DEFAULT_FUEL):
        self.left = steps

    def tick(self):
        self.left -= 1
        if self.left < 0:
            raise OutOfFuel("the reference matcher ran out of fuel")


def _value(e, theta: Subst) -> Optional[int]:
    """Value of an expression, or None when it reads an unknown attribute or an
    unbound variable."""
    if isinstance(e, core.EConst):
        return e.z
    if isinstance(e, core.EAttr):
        node = theta.get(e.x)
        if node is None:
            return None
        return node.graph._attr_map(node.id).get(e.attr)
    a = _value(e.e1, theta)
    if a is None:
        return None
    b = _value(e.e2, theta)
    if b is None:
        return None
    if isinstance(e, core.EAdd):
        return a + b
    if isinstance(e, core.ESub):
        return a - b
    return a * b


def guard_value(g, theta: Subst) -> Optional[bool]:
    """Three-valued guard semantics: True, False or None (unknown)."""
    if isinstance(g, core.GTrue):
        return True
    if isinstance(g, (core.GEq, core.GLt)):
        a, b = _value(g.e1, theta), _value(g.e2, theta)
        if a is None or b is None:
            return None
        return a == b if isinstance(g, core.GEq) else a < b
    if isinstance(g, core.GNot):
        v = guard_value(g.g, theta)
        return None if v is None else not v
    a, b = guard_value(g.g1, theta), guard_value(g.g2, theta)
    if a is None or b is None:
        return None
    return (a and b) if isinstance(g, core.GAnd) else (a or b)


def solutions(p, node, theta: Subst, fuel: Optional[Fuel] = None) -> Iterator[Subst]:
    """All substitutions extending ``theta`` under which ``p`` matches ``node``,
    in left-to-right rule order. ``theta`` is never mutated."""
    if fuel is not None:
        fuel.tick()
    if isinstance(p, core.PVar):
        bound = theta.get(p.x)
        if bound is None:
            extended = dict(theta)
            extended[p.x] = node
            yield extended
        elif bound == node:
            yield theta
    elif isinstance(p, core.PApp):
        if node.label == p.f and len(node.args) == len(p.args):
            yield from _children(p.args, node.args, 0, theta, fuel)
    elif isinstance(p, core.PAlt):
        yield from solutions(p.p1, node, theta, fuel)
        yield from solutions(p.p2, node, theta, fuel)
    elif isinstance(p, core.PGuard):
        for th in solutions(p.p, node, theta, fuel):
            if fuel is not None:
                fuel.tick()
            if guard_value(p.g, th) is True:
                yield th
    else:
        raise TypeError(f"not a pattern: {p!r}")


def _children(ps, ts, i, theta, fuel):
    if i == len(ps):
        yield theta
        return
    for th in solutions(ps[i], ts[i], theta, fuel):
        yield from _children(ps, ts, i + 1, th, fuel)


def first_solution(p, node, fuel: Optional[int] = None) -> Optional[Subst]:
    """The first solution (the match), or None; raises OutOfFuel after
    ``fuel`` steps (default ``1 << 24``; ``fuel <= 0`` means the default)."""
    budget = Fuel(fuel if fuel is not None and fuel > 0 else DEFAULT_FUEL)
    for theta in solutions(p, node, {}, budget):
        return theta
    return None
