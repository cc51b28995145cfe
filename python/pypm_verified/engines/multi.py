"""Multi-root patterns (``theories/Multi.v``) on both engines.

A multi-root pattern is a ``@pm.pattern`` whose body returns a tuple of
roots over shared variables::

    @pm.pattern
    def QKV(x, wq, bq, wk, bk, wv, bv):
        return Linear(x, wq, bq), Linear(x, wk, bk), Linear(x, wv, bv)

It matches a tuple of *distinct* nodes ``(t1, …, tk)`` under one
substitution (``Multi.mmatches``): root ``i`` at ``t_i``, every guard true.
``pm.match(P, node)`` puts the first root at ``node`` and finds the others
among the graph's nodes (``Multi.match_multi``): for root ``i``, the nodes
in id order that its root-operator index admits and that are not already
used, pruning a candidate as soon as the roots so far have no common match
(a choice point, backtracked like an alternate); the answer is the first
tuple in that order and, for it, the first solution in priority order.
``pm.match_all`` reports each *set* of nodes once, not once per permutation
(``Multi.match_all_multi_once``), at the smallest node that is the first
root of a match with that set (``Multi.match_all_multi_complete``).

The verified engine runs the extracted ``Multi.match_multi_c`` /
``match_all_multi`` (``pypm_match_multi``); the reference engine below is
the same search written over the reference matcher's generator of
solutions (``reference.py``), and :func:`check` decides ``Multi.mmatches``
directly for the tests.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from . import binding, declarative, reference, serialize
from .. import core
from ..core import symbols
from ..core.graph import Graph, Node
from ..errors import OutOfFuel


class MultiMatch:
    """A match of a multi-root pattern: ``roots`` (one node per returned
    term, in order; ``root`` is the first), ``bindings`` / ``functions`` by
    parameter name (locals excluded), ``substitution`` / ``fsubstitution``
    by variable id (locals included)."""

    __slots__ = ("pattern", "roots", "substitution", "fsubstitution", "bindings",
                 "functions")

    def __init__(self, pattern, roots: Sequence[Node], substitution: Dict[int, Node],
                 fsubstitution: Dict[int, int], names, fnames):
        self.pattern = pattern
        self.roots = tuple(roots)
        self.substitution = dict(sorted(substitution.items()))
        self.fsubstitution = dict(sorted(fsubstitution.items()))
        self.bindings = {names[v]: n for v, n in self.substitution.items() if v < len(names)}
        self.functions = {fnames[F]: symbols.lookup(f) for F, f in self.fsubstitution.items()
                          if F < len(fnames)}

    @property
    def root(self) -> Node:
        return self.roots[0]

    @property
    def values(self) -> dict:
        return {**self.bindings, **self.functions}

    def __getitem__(self, name):
        if name in self.bindings:
            return self.bindings[name]
        return self.functions[name]

    def __eq__(self, other):
        return (isinstance(other, MultiMatch) and self.pattern is other.pattern
                and self.roots == other.roots and self.substitution == other.substitution
                and self.fsubstitution == other.fsubstitution)

    __hash__ = None

    def __repr__(self):
        binds = [f"{k}=%{n.id}" for k, n in self.bindings.items()]
        roots = ", ".join(f"%{n.id}" for n in self.roots)
        return f"<MultiMatch {getattr(self.pattern, 'name', '<core>')} at ({roots}): {', '.join(binds)}>"


class MultiProgram:
    """A lowered multi-root pattern: the table, the root definitions, the
    shared variable counts and the cross-root guard (``Multi.mpat``)."""

    name = "<core>"

    def __init__(self, pattern=None, *, defs=None, roots=None, n=None, m=None, guard=None):
        if pattern is not None:
            linked = pattern.linked
            info = linked.multi[pattern]
            defs, roots, n, m, guard = linked.defs, info.roots, info.n, info.m, info.guard
            self.names, self.fnames = info.term_params, info.op_params
            self.name = pattern.name
        else:  # a core multi-root pattern: bindings reported by variable id
            self.names, self.fnames = tuple(range(n)), tuple(range(m))
        self.pattern = pattern if pattern is not None else self
        self.defs: Tuple[core.PDef, ...] = tuple(defs)
        self.roots: Tuple[int, ...] = tuple(roots)
        self.n, self.m = n, m
        self.guard = guard
        self.spec = serialize.encode_multi_spec(self.n, self.m, range(len(self.roots)),
                                                self.guard)

    @property
    def bodies(self) -> Tuple[core.CorePattern, ...]:
        return tuple(self.defs[r].body for r in self.roots)

    def make(self, nodes: Sequence[Node], theta: Dict[int, Node], phi: Dict[int, int]):
        return MultiMatch(self.pattern, nodes, theta, phi, self.names, self.fnames)


_programs: Dict[int, tuple] = {}


def program(pattern) -> MultiProgram:
    """The :class:`MultiProgram` of ``pattern`` (cached until it is redefined)."""
    if isinstance(pattern, MultiProgram):
        return pattern
    linked = pattern.linked
    hit = _programs.get(id(pattern))
    if hit is not None and hit[0] is linked and hit[1].pattern is pattern:
        return hit[1]
    prog = MultiProgram(pattern)
    _programs[id(pattern)] = (linked, prog)
    return prog


# ------------------------------------------------------------- reference


def _run(prog: MultiProgram, ts: Sequence[Node], with_guard: bool, fuel: int):
    """The first solution of the first ``len(ts)`` roots at ``ts`` (and the
    cross-root guard when ``with_guard``), or None: ``Multi.run_prefix`` /
    ``run_full``, a fresh budget of ``fuel`` steps each."""
    budget = reference.Fuel(fuel)
    ctx = reference._Ctx(prog.defs, ts[0].graph, budget, max(prog.n, prog.m))
    env = ({i: i for i in range(prog.n)}, {i: i for i in range(prog.m)})
    ps = prog.bodies[:len(ts)]
    for s in reference._drive(reference._each(ctx, ps, list(ts), 0, env, ({}, {}))):
        if with_guard:
            budget.tick()
            if reference._truth(prog.guard, s, env, ctx.graph) is not True:
                continue
        budget.tick()  # ST-SUCCESS
        return s
    return None


def _candidates(prog: MultiProgram, graph: Graph) -> List[List[Node]]:
    """``Multi.mcands``: for each later root, the nodes (id order) its
    root-operator index admits."""
    return [[c for c in graph.nodes if core.root_admits(prog.defs, r, c.label)]
            for r in prog.roots[1:]]


def _first(prog: MultiProgram, node: Node, fuel: int, cands=None):
    """``Multi.match_multi_c``: ``(nodes, theta, phi)`` or None; raises
    :class:`OutOfFuel`."""
    if not core.root_admits(prog.defs, prog.roots[0], node.label):
        return None
    if _run(prog, [node], False, fuel) is None:
        return None
    if cands is None:
        cands = _candidates(prog, node.graph)
    k = len(prog.roots)

    def search(ts):
        i = len(ts) - 1
        if i == len(cands):
            s = _run(prog, ts, True, fuel)
            return None if s is None else (ts, s)
        used = {t.id for t in ts}
        for c in cands[i]:
            if c.id in used:
                continue
            if _run(prog, ts + [c], False, fuel) is None:
                continue
            r = search(ts + [c])
            if r is not None:
                return r
        return None

    found = search([node])
    if found is None:
        return None
    ts, s = found
    assert len(ts) == k
    theta = {i: s[0][i] for i in range(prog.n) if i in s[0]}
    phi = {i: s[1][i] for i in range(prog.m) if i in s[1]}
    return ts, theta, phi


# ----------------------------------------------------------------- answers


def _fuel(fuel: Optional[int]) -> int:
    return fuel if fuel is not None and fuel > 0 else reference.DEFAULT_FUEL


def _oof(prog: MultiProgram, node_id: int) -> OutOfFuel:
    return OutOfFuel(f"multi-root pattern {prog.name} at node %{node_id} ran out of "
                     "fuel")


def match_multi(pattern, node: Node, engine: str = "verified",
                fuel: Optional[int] = None) -> Optional[MultiMatch]:
    """The multi-root ``pattern`` with its first root at ``node``: a
    :class:`MultiMatch` or None; :class:`OutOfFuel` when a step budget is
    spent."""
    prog = program(pattern)
    if engine == "reference":
        try:
            r = _first(prog, node, _fuel(fuel))
        except OutOfFuel:
            raise _oof(prog, node.id) from None
        return None if r is None else prog.make(*r)
    entries = binding.match_multi(node.graph, prog.defs, prog.roots, prog.spec, node.id, fuel,
                                  _owner(pattern))
    return _answer(prog, node.graph, entries[0])


def _owner(pattern):
    return None if isinstance(pattern, MultiProgram) else pattern


def _answer(prog: MultiProgram, graph: Graph, entry) -> Optional[MultiMatch]:
    root, status, nodes, binds, fbinds = entry
    if status == serialize.STATUS_OUT_OF_FUEL:
        raise _oof(prog, root)
    if status != serialize.STATUS_MATCH:
        return None
    ns = graph.nodes
    return prog.make([ns[t] for t in nodes], {v: ns[t] for v, t in binds}, dict(fbinds))


def match_all_multi(pattern, graph: Graph, engine: str = "verified",
                    fuel: Optional[int] = None) -> List[MultiMatch]:
    """Every set of nodes the multi-root ``pattern`` matches, once
    (``Multi.match_all_multi``), in the order of their first roots."""
    prog = program(pattern)
    if engine == "reference":
        out, seen = [], []
        cands = _candidates(prog, graph)
        for node in graph.nodes:
            try:
                r = _first(prog, node, _fuel(fuel), cands)
            except OutOfFuel:
                raise _oof(prog, node.id) from None
            if r is None:
                continue
            ids = frozenset(t.id for t in r[0])
            if ids in seen:
                continue
            seen.append(ids)
            out.append(prog.make(*r))
        return out
    entries = binding.match_multi(graph, prog.defs, prog.roots, prog.spec, -1, fuel,
                                  _owner(pattern))
    return [_answer(prog, graph, e) for e in entries]


def check(prog: MultiProgram, m: MultiMatch) -> bool:
    """``Multi.mmatches``: every root matches its node under the match's
    substitution, the cross-root guard holds, the nodes are distinct."""
    if len(m.roots) != len(prog.roots) or len({t.id for t in m.roots}) != len(m.roots):
        return False
    graph = m.roots[0].graph
    theta, phi = dict(m.substitution), dict(m.fsubstitution)
    for body, t in zip(prog.bodies, m.roots):
        if not declarative._Decider(prog.defs, graph).holds(body, theta, phi, t):
            return False
    return declarative.guard_holds(prog.guard, theta, phi, graph)
