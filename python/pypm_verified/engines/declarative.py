"""The declarative relation ``p @ ⟨θ, φ⟩ ≈ t`` (paper Fig. 16,
``Declarative.matches``), decided directly.

θ and φ are given, so P-VAR and P-FUN-VAR are lookups, P-FUN checks the
children, P-ALT tries either side and P-GUARD evaluates the guard under θ, φ
(three-valued, strict, bounded arithmetic: docs/internals/format.md). The rules that
invent something are decided by search over the finite graph: P-EXISTS tries
every node as the witness (``x`` shadows an outer ``x``), ∃F every operator
labelling a node (a witness that is no node's label cannot be matched), and
P-MATCHCONSTR reads the node bound to ``x``. P-MU checks the callee's body
under ``call_sub``: parameter ``i`` is bound to what the ``i``-th argument
is bound to, nothing else.

The relation is inductive, so a derivation never needs the same call
judgment inside itself: a call that recurs to a judgment being decided fails
on that branch, and call judgments are memoized (a failure only when it did
not depend on an enclosing judgment's assumption). The search therefore
terminates, also for ``P(x) = P(x)``. Used by the tests to validate every
match an engine returns and to confirm that "no match" is right.

Kept apart on purpose: this is the independent oracle of the differential
tests, so it must not share the matcher (:mod:`.reference`, which the
explanations, the cover and the multi-root engine also run) or the guard
evaluator (:mod:`.truth`, shared by the reference matcher, the dynamic-shape
re-check and the instance checker) with what it checks: its own reading of
the rules and its own three-valued guards below, written independently of
``reference.py`` and ``truth.py``.
"""
from __future__ import annotations

from typing import Mapping, Optional, Union

from .. import core
from ..core import (
    EAdd, EAttr, EConst, EFAttr, EMul, ESub, GAnd, GEq, GLt, GNot, GOr, GTrue, PAlt, PApp,
    PCall, PConstr, PExists, PExistsF, PFunVar, PGuard, PVar)

_UNKNOWN = object()


def _eval(e, theta: Mapping, phi: Mapping, graph):
    match e:
        case EConst(z):
            return z
        case EAttr(x, attr):
            if x not in theta:
                return _UNKNOWN
            t = theta[x]
            return t.graph.attr_map(t.id).get(attr, _UNKNOWN)
        case EFAttr(F, attr):
            if F not in phi or graph is None:
                return _UNKNOWN
            v = graph.sym_attr(phi[F], attr)
            return _UNKNOWN if v is None else v
        case EAdd(a, b) | ESub(a, b) | EMul(a, b):
            va, vb = _eval(a, theta, phi, graph), _eval(b, theta, phi, graph)
            if va is _UNKNOWN or vb is _UNKNOWN:
                return _UNKNOWN
            bound = core.MUL_BOUND if type(e) is EMul else core.ADD_BOUND
            if not (-bound < va < bound and -bound < vb < bound):
                return _UNKNOWN
            return va + vb if type(e) is EAdd else va - vb if type(e) is ESub else va * vb
    raise TypeError(f"not an expression: {e!r}")


def _truth(g, theta: Mapping, phi: Mapping, graph):
    """True / False / _UNKNOWN."""
    match g:
        case GTrue():
            return True
        case GEq(a, b) | GLt(a, b):
            va, vb = _eval(a, theta, phi, graph), _eval(b, theta, phi, graph)
            if va is _UNKNOWN or vb is _UNKNOWN:
                return _UNKNOWN
            return va == vb if type(g) is GEq else va < vb
        case GNot(h):
            v = _truth(h, theta, phi, graph)
            return v if v is _UNKNOWN else not v
        case GAnd(h1, h2) | GOr(h1, h2):
            v1, v2 = _truth(h1, theta, phi, graph), _truth(h2, theta, phi, graph)
            if v1 is _UNKNOWN or v2 is _UNKNOWN:
                return _UNKNOWN
            return (v1 and v2) if type(g) is GAnd else (v1 or v2)
    raise TypeError(f"not a guard: {g!r}")


def guard_holds(g, theta: Mapping, phi: Optional[Mapping] = None, graph=None) -> bool:
    """``⟦g[θ, φ]⟧ = True`` (``graph`` gives operator attributes for ``F.α``)."""
    return _truth(g, theta, phi or {}, graph) is True


class _Decider:
    def __init__(self, defs, graph):
        self.defs = defs
        self.graph = graph
        self.nodes = list(graph.nodes)
        self.labels = sorted({n.label for n in self.nodes})
        self.memo = {}
        self.active = {}  # call judgment -> depth on the current path
        self.low = float("inf")  # shallowest active judgment a failure relied on

    def holds(self, p, theta, phi, t) -> bool:
        match p:
            case PVar(x):
                return x in theta and theta[x] == t
            case PApp(f, args):
                return (t.label == f and len(t.args) == len(args)
                        and all(self.holds(a, theta, phi, c) for a, c in zip(args, t.args)))
            case PFunVar(F, args):
                return (phi.get(F) == t.label and len(t.args) == len(args)
                        and all(self.holds(a, theta, phi, c) for a, c in zip(args, t.args)))
            case PAlt(p1, p2):
                return self.holds(p1, theta, phi, t) or self.holds(p2, theta, phi, t)
            case PGuard(q, g):
                return self.holds(q, theta, phi, t) and guard_holds(g, theta, phi, self.graph)
            case PExists(x, q):
                return any(self.holds(q, {**theta, x: w}, phi, t) for w in self.nodes)
            case PExistsF(F, q):
                return any(self.holds(q, theta, {**phi, F: f}, t) for f in self.labels)
            case PConstr(q, q2, x):
                return (self.holds(q, theta, phi, t) and x in theta
                        and self.holds(q2, theta, phi, theta[x]))
            case PCall(P, xs, Fs):
                d = self.defs[P] if 0 <= P < len(self.defs) else None
                if d is None or len(xs) != d.nparams or len(Fs) != d.nfparams:
                    return False
                sub = {i: theta[x] for i, x in enumerate(xs) if x in theta}
                fsub = {i: phi[F] for i, F in enumerate(Fs) if F in phi}
                return self.call(P, d.body, sub, fsub, t)
        raise TypeError(f"not a pattern: {p!r}")

    def call(self, P, body, theta, phi, t) -> bool:
        key = (P, frozenset((i, n.id) for i, n in theta.items()), frozenset(phi.items()), t.id)
        if key in self.memo:
            return self.memo[key]
        if key in self.active:  # the judgment being decided: no derivation through it
            self.low = min(self.low, self.active[key])
            return False
        depth = len(self.active)
        self.active[key] = depth
        outer_low, self.low = self.low, float("inf")
        try:
            result = self.holds(body, theta, phi, t)
        finally:
            del self.active[key]
        inner_low = self.low
        if result or inner_low >= depth:
            self.memo[key] = result
            inner_low = float("inf")
        self.low = min(outer_low, inner_low)
        return result


def check(pattern: Union[core.Program, core.CorePattern], theta: Mapping, node,
          phi: Optional[Mapping] = None) -> bool:
    """Whether ``root @ ⟨θ, φ⟩ ≈ node`` is derivable, for ``pattern`` a
    :class:`core.Program` (its root definition's body, with its table) or a
    core pattern without calls; ``theta``: variable id -> Node, ``phi``:
    operator variable id -> symbol."""
    if isinstance(pattern, core.Program):
        defs, body = pattern.defs, pattern.defs[pattern.root].body
    else:
        defs, body = (), pattern
    return _Decider(defs, node.graph).holds(body, dict(theta), dict(phi or {}), node)
