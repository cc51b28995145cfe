"""Fuel that suffices: a transcription of ``theories/Fuel.v``.

``Fuel.match_root_fuel`` proves: for a table of definitions that is
:func:`descending` (every cycle of calls passes under an operator
application, so each recursive unfolding matches a strictly smaller
subgraph), matching a root at a node of depth at most ``N`` (every
downward path has at most ``N`` edges) never runs out of
``fuel_bound(defs, N, root body)`` steps. This module computes the same
functions (``ug``, ``args_ok``, ``descending``, ``cost``, ``fuel_bound``)
with Python's unbounded integers, so that :func:`termination` can tell a
user which patterns are in the class and up to which depth the default
fuel (``1 << 26`` steps) suffices. It decides no match: the engines do;
it is tested against their step counts (``tests/test_fuel.py``).

``cost(n, L, p) = (c, m)``: at most ``c`` steps inside ``p`` at a node of
depth ``<= n`` (all alternatives), at most ``m`` successes; ``L`` bounds the
unfolding of calls not under an operator application.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from .syntax import (PAlt, PApp, PCall, PConstr, PDef, PExists, PExistsF, PFunVar, PGuard,
                     PVar, Program, CorePattern, children, walk)

DEFAULT_FUEL = 1 << 26  # Entry.default_fuel
MAX_DEPTH = 1 << 12     # how deep termination() looks for the default fuel's limit
SAT = 1 << 128          # costs saturate here: min(x, SAT) commutes with + and * on naturals


def _def(defs: Sequence[PDef], P: int) -> Optional[PDef]:
    return defs[P] if 0 <= P < len(defs) else None


def ug(defs: Sequence[PDef], L: int, p: CorePattern) -> bool:
    """``Fuel.ug``: the calls of ``p`` outside operator applications unfold
    at most ``L`` deep."""
    if isinstance(p, (PVar, PApp, PFunVar)):
        return True
    if isinstance(p, PCall):
        if L == 0:
            return False
        d = _def(defs, p.P)
        return True if d is None else ug(defs, L - 1, d.body)
    return all(ug(defs, L, q) for q in children(p))


def args_ok(defs: Sequence[PDef], p: CorePattern) -> bool:
    """``Fuel.args_ok``: every argument of an operator application in ``p``
    is ``ug(len(defs))``."""
    if isinstance(p, (PApp, PFunVar)):
        return all(ug(defs, len(defs), q) and args_ok(defs, q) for q in p.args)
    return all(args_ok(defs, q) for q in children(p))


def descending(defs: Sequence[PDef]) -> bool:
    """``Fuel.descending``: every body is ``ug(len(defs))`` and ``args_ok``."""
    return all(ug(defs, len(defs), d.body) and args_ok(defs, d.body) for d in defs)


def _unguarded_calls(p: CorePattern) -> List[int]:
    """The definitions ``p`` calls outside operator applications."""
    if isinstance(p, PCall):
        return [p.P]
    if isinstance(p, (PApp, PFunVar)):
        return []
    return [P for q in children(p) for P in _unguarded_calls(q)]


def _find_cycle(edges: Sequence[Sequence[int]]) -> Optional[List[int]]:
    """A cycle ``[P, Q, ..., P]`` of the graph ``P -> edges[P]``, or None
    (iterative depth-first search)."""
    state: Dict[int, int] = {}  # 1 on the stack, 2 done
    for start in range(len(edges)):
        if start in state:
            continue
        path, stack = [start], [iter(edges[start])]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(edges[nxt]))
    return None


def _edges(defs: Sequence[PDef], calls) -> List[List[int]]:
    return [sorted(set(P for P in calls(d.body) if 0 <= P < len(defs))) for d in defs]


def unguarded_cycle(defs: Sequence[PDef]) -> Optional[List[int]]:
    """A cycle ``[P, Q, ..., P]`` of calls none of which is under an operator
    application, or None. There is one exactly when :func:`descending` is
    false (the tests check it): such a cycle unfolds at one node forever."""
    return _find_cycle(_edges(defs, _unguarded_calls))


class Costs:
    """``Fuel.cost`` for one table, computed level by level (depth ``n``
    from 0 up) over the ``(L, pattern)`` pairs a root needs, so that deep
    levels need no deep recursion. Pairs are numbered once; a level is a
    list of ``(c, m)`` by number."""

    def __init__(self, defs: Sequence[PDef], root: CorePattern):
        self.defs, self.L0 = tuple(defs), len(defs)
        ids: Dict[Tuple[int, int], int] = {}  # (L, id(pattern)) -> number
        self._keep: List[CorePattern] = []  # the patterns ids refer to, kept alive
        order: list = []
        later = [(self.L0, root)]  # operator arguments: the level below

        def number(L: int, p: CorePattern) -> int:
            # post-order over same-level edges (sub-patterns, calls at L - 1),
            # which form no cycle, so a pair's dependencies come first
            key = (L, id(p))
            if key in ids:
                return ids[key]
            self._keep.append(p)
            if isinstance(p, (PApp, PFunVar)):
                later.extend((self.L0, q) for q in p.args)
                deps = ("app", tuple((self.L0, id(q)) for q in p.args))
            elif isinstance(p, PCall):
                d = _def(self.defs, p.P)
                deps = ("call", None if L == 0 or d is None else number(L - 1, d.body),
                        L == 0)
            elif isinstance(p, PVar):
                deps = ("var",)
            else:
                deps = (type(p).__name__, tuple(number(L, q) for q in children(p)))
            ids[key] = len(order)
            order.append(deps)
            return ids[key]

        self.root_id = number(self.L0, root)
        while later:
            number(*later.pop())
        self.order = [("app", tuple(ids[k] for k in d[1])) if d[0] == "app" else d
                      for d in order]
        self.levels: List[List[Tuple[int, int]]] = []

    def level(self, n: int) -> List[Tuple[int, int]]:
        while len(self.levels) <= n:
            self.levels.append(self._next(len(self.levels)))
        return self.levels[n]

    def _next(self, n: int) -> List[Tuple[int, int]]:
        below = self.levels[n - 1] if n > 0 else None
        cur: List[Tuple[int, int]] = []
        for deps in self.order:
            kind = deps[0]
            if kind == "var":
                r = (1, 1)
            elif kind == "app":
                if below is None:
                    r = (1, 0 if deps[1] else 1)
                else:  # seq_cost, right to left
                    c, m = 0, 1
                    for q in reversed(deps[1]):
                        c1, m1 = below[q]
                        c, m = c1 + m1 * c, m1 * m
                    r = (1 + c, m)
            elif kind == "PAlt":
                (c1, m1), (c2, m2) = cur[deps[1][0]], cur[deps[1][1]]
                r = (1 + c1 + c2, m1 + m2)
            elif kind in ("PGuard", "PExists", "PExistsF"):
                c, m = cur[deps[1][0]]
                r = (1 + c + m, m)
            elif kind == "PConstr":
                (c, m), (c2, m2) = cur[deps[1][0]], cur[deps[1][1]]
                r = (1 + c + m * (1 + c2), m * m2)
            else:  # call: L = 0 gives (0, 0), an unknown definition (1, 0)
                body, l0 = deps[1], deps[2]
                if l0:
                    r = (0, 0)
                elif body is None:
                    r = (1, 0)
                else:
                    c, m = cur[body]
                    r = (1 + c, m)
            cur.append((min(r[0], SAT), min(r[1], SAT)))
        return cur

    def cost(self, n: int) -> Tuple[int, int]:
        """``Fuel.cost n LMAX root``, each component capped at :data:`SAT`."""
        return self.level(n)[self.root_id]

    def fuel_bound(self, n: int) -> int:
        """``min(Fuel.fuel_bound n root, SAT)``: enough fuel at a node of
        depth ``<= n`` (exact below :data:`SAT`)."""
        c, m = self.cost(n)
        return min(c + m, SAT)


def fuel_bound(defs: Sequence[PDef], n: int, p: CorePattern) -> int:
    """``Fuel.fuel_bound defs n p``."""
    return Costs(defs, p).fuel_bound(n)


def _chain(costs: Sequence[Costs], n: int) -> int:
    """``Multi.mchain D n ps 2`` (``mstep p B = max B (c + m * B)``, folded
    from the last root), each step capped at :data:`SAT`."""
    B = 2  # the cross-root guard and ST-SUCCESS
    for c in reversed(costs):
        k, m = c.cost(n)
        B = min(max(B, k + m * B), SAT)
    return B


def multi_fuel_bound(defs: Sequence[PDef], n: int, bodies: Sequence[CorePattern]) -> int:
    """``Multi.multi_fuel_bound defs n bodies``: with a descending table, a
    multi-root search whose roots' bodies are ``bodies`` never runs out of
    this many steps on a graph where every downward path has at most ``n``
    edges (``Multi.match_multi_fuel``; each run of the machine, one per
    candidate prefix and per complete tuple, gets the whole fuel)."""
    return _chain([Costs(defs, p) for p in bodies], n)


def _nesting(defs: Sequence[PDef], p: CorePattern, seen=()) -> int:
    """Operator applications with arguments nested along one path, calls
    unfolded (only for a table without call cycles)."""
    if isinstance(p, PCall):
        d = _def(defs, p.P)
        return 0 if d is None or p.P in seen else _nesting(defs, d.body, seen + (p.P,))
    inner = max((_nesting(defs, q, seen) for q in children(p)), default=0)
    return inner + 1 if isinstance(p, (PApp, PFunVar)) and p.args else inner


def _call_cycle(defs: Sequence[PDef]) -> bool:
    """Some definition reaches itself through calls (guarded or not)."""
    return _find_cycle(_edges(defs, lambda p: [q.P for q in walk(p) if isinstance(q, PCall)])) \
        is not None


@dataclass(frozen=True)
class Termination:
    """Whether ``Fuel.match_root_fuel`` covers a pattern, and how far.

    ``descending``: the pattern's table is in the class (every cycle of
    calls passes under an operator application). ``recursive``: some
    definition calls itself. ``depth_limit``: the greatest depth ``N``
    (every downward path from the node has at most ``N`` edges) at which
    the default fuel is proved to suffice, ``None`` when it suffices at
    every depth (no recursion: the bound stops growing at ``N =
    nesting``), checked up to :data:`MAX_DEPTH` (``depth_limit ==
    MAX_DEPTH`` means "at least that deep"). ``cycle``: for a pattern
    outside the class, the names of a cycle of unguarded calls.
    """
    name: str
    descending: bool
    recursive: bool
    depth_limit: Optional[int]
    nesting: int
    cycle: Tuple[str, ...] = ()
    costs: Optional[Costs] = None
    roots: Tuple[Costs, ...] = ()

    def fuel_bound(self, depth: int) -> int:
        """Fuel proved to suffice at a node of depth at most ``depth`` (a
        multi-root pattern: on a graph of depth at most ``depth``,
        ``Multi.multi_fuel_bound``)."""
        if self.costs is None:
            raise ValueError(f"{self.name} is not descending: no fuel bound is proved")
        return _chain(self.roots, depth) if self.roots else self.costs.fuel_bound(depth)

    def __str__(self) -> str:
        if not self.descending:
            return (f"{self.name}: not descending (the calls {' -> '.join(self.cycle)} are not "
                    "under an operator application, so they can unfold at one node forever); "
                    "no fuel is proved to suffice")
        if self.depth_limit is None:
            return (f"{self.name}: terminates; the default fuel suffices at every depth "
                    f"(bound {self.fuel_bound(self.nesting)} steps)")
        more = " or more" if self.depth_limit >= MAX_DEPTH else ""
        where = "graphs" if self.roots else "nodes"
        return (f"{self.name}: recursion descends into a child; the default fuel "
                f"({DEFAULT_FUEL} steps) is proved to suffice on {where} of depth "
                f"<= {self.depth_limit}{more}")


def termination(program: Program, name: str = "pattern",
                def_names: Optional[Sequence[str]] = None,
                fuel: int = DEFAULT_FUEL) -> Termination:
    """Classify the root of ``program`` (its table holds the root and its
    callees, as :func:`pm.match` links them): see :class:`Termination`."""
    return _classify(program.defs, [program.root_def.body], False, name, def_names, fuel)


def termination_multi(defs: Sequence[PDef], roots: Sequence[int], name: str = "pattern",
                      def_names: Optional[Sequence[str]] = None,
                      fuel: int = DEFAULT_FUEL) -> Termination:
    """:func:`termination` of a multi-root pattern whose roots are the
    definitions ``roots`` of ``defs``: its bound is ``Multi.multi_fuel_bound``
    of the roots' bodies, the depth that of the whole graph."""
    return _classify(defs, [defs[r].body for r in roots], True, name, def_names, fuel)


def _classify(defs: Sequence[PDef], bodies: Sequence[CorePattern], multi: bool, name: str,
              def_names: Optional[Sequence[str]], fuel: int) -> Termination:
    names = list(def_names) if def_names is not None else [f"#{i}" for i in range(len(defs))]
    if not (descending(defs) and all(ug(defs, len(defs), b) and args_ok(defs, b)
                                     for b in bodies)):
        cyc = unguarded_cycle(defs) or []
        return Termination(name, False, _call_cycle(defs), None, 0,
                           tuple(names[i] for i in cyc))
    costs = [Costs(defs, b) for b in bodies]
    roots = tuple(costs) if multi else ()
    bound = (lambda n: _chain(costs, n)) if multi else costs[0].fuel_bound
    if not _call_cycle(defs):
        nest = max(_nesting(defs, b) for b in bodies)
        limit = None if bound(nest) <= fuel else _scan(bound, fuel, nest)
        return Termination(name, True, False, limit, nest, (), costs[0], roots)
    return Termination(name, True, True, _scan(bound, fuel, MAX_DEPTH), 0, (), costs[0], roots)


def _scan(bound, fuel: int, upto: int) -> int:
    """The greatest ``N <= upto`` with ``bound(N) <= fuel`` (every smaller
    depth too), or -1 when even depth 0 needs more."""
    n = -1
    while n < upto and bound(n + 1) <= fuel:
        n += 1
    return n
