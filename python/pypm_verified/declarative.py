"""The declarative relation ``p @ θ ≈ t`` (paper Fig. 6, 8), checked directly.

No search: θ is given, so P-VAR is a lookup, P-FUN checks the children,
P-ALT tries either side, and P-GUARD evaluates the guard under θ with the
three-valued semantics of doc/format.md. Used by the tests to validate every
match an engine returns. Written independently of ``reference.py``.
"""
from __future__ import annotations

from typing import Mapping

from .core import (EAdd, EAttr, EConst, EMul, ESub, GAnd, GEq, GLt, GNot, GOr, GTrue,
                   PAlt, PApp, PGuard, PVar)

_UNKNOWN = object()


def _eval(e, theta: Mapping):
    match e:
        case EConst(z):
            return z
        case EAttr(x, attr):
            if x not in theta:
                return _UNKNOWN
            t = theta[x]
            return dict(t.graph._attrs[t.id]).get(attr, _UNKNOWN)
        case EAdd(a, b) | ESub(a, b) | EMul(a, b):
            va, vb = _eval(a, theta), _eval(b, theta)
            if va is _UNKNOWN or vb is _UNKNOWN:
                return _UNKNOWN
            return va + vb if type(e) is EAdd else va - vb if type(e) is ESub else va * vb
    raise TypeError(f"not an expression: {e!r}")


def _truth(g, theta: Mapping):
    """True / False / _UNKNOWN."""
    match g:
        case GTrue():
            return True
        case GEq(a, b) | GLt(a, b):
            va, vb = _eval(a, theta), _eval(b, theta)
            if va is _UNKNOWN or vb is _UNKNOWN:
                return _UNKNOWN
            return va == vb if type(g) is GEq else va < vb
        case GNot(h):
            v = _truth(h, theta)
            return v if v is _UNKNOWN else not v
        case GAnd(h1, h2) | GOr(h1, h2):
            v1, v2 = _truth(h1, theta), _truth(h2, theta)
            if v1 is _UNKNOWN or v2 is _UNKNOWN:
                return _UNKNOWN
            return (v1 and v2) if type(g) is GAnd else (v1 or v2)
    raise TypeError(f"not a guard: {g!r}")


def guard_holds(g, theta: Mapping) -> bool:
    """``⟦g[θ]⟧ = True``."""
    return _truth(g, theta) is True


def check(p, theta: Mapping, node) -> bool:
    """Whether ``p @ θ ≈ node`` is derivable (``theta``: variable id -> Node)."""
    match p:
        case PVar(x):
            return x in theta and theta[x].graph is node.graph and theta[x].id == node.id
        case PApp(f, args):
            return (node.label == f and len(node.args) == len(args)
                    and all(check(a, theta, t) for a, t in zip(args, node.args)))
        case PAlt(p1, p2):
            return check(p1, theta, node) or check(p2, theta, node)
        case PGuard(q, g):
            return check(q, theta, node) and guard_holds(g, theta)
    raise TypeError(f"not a pattern: {p!r}")
