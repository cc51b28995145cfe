"""Multi-root patterns (``theories/Multi.v``) on both engines.

A multi-root pattern is a ``@pm.pattern`` whose body returns a tuple of
roots over shared variables::

    @pm.pattern
    def QKV(x, wq, bq, wk, bk, wv, bv):
        return Linear(x, wq, bq), Linear(x, wk, bk), Linear(x, wv, bv)

It matches a tuple of *distinct* nodes ``(t1, …, tk)`` under one
substitution (``Multi.mmatches``): root ``i`` at ``t_i``, every guard true.
``pm.match(P, node)`` puts the first root at ``node`` and finds the others
by *upward traversal* (``Multi.match_multi``): root ``i``'s candidates are
the users of a node the earlier roots bound — when root ``i``'s operator
has a variable ``x`` as its ``l``-th argument and ``x`` sits on an
operator-only path ``π`` below earlier root ``j`` (``Multi.anchor``), the
users of the node at ``π`` below the ``j``-th chosen node whose ``l``-th
child it is (``Multi.cand_fn``; complete: ``Multi.up_cands_complete``);
a root sharing no such variable falls back to the nodes its root-operator
index admits. Candidates are tried in id order, skipping nodes already
used, pruning one as soon as the roots so far have no common match (a
choice point, backtracked like an alternate); the answer is the first
tuple in that order and, for it, the first solution in priority order.

``pm.match_all`` reports every *set* of nodes that matches, once
(``Multi.match_all_multi_sets``, ``Multi.match_all_multi_once``): it
visits the nodes in increasing order as the first root and, at each, walks
*every* tuple the search above would try (same candidates, same pruning),
not only the first; a tuple whose set is already reported is skipped
before its last run, otherwise the tuple is reported with its first
solution. So each set is reported at the smallest node that is the first
root of a match with that set (``Multi.match_all_multi_first``), in the
root order :func:`root_order` chooses (``Multi.mmatches_perm``: any order finds the same sets); matches
report their roots in the written order. Fuel: each run has its own
fuel; a run out of fuel ends the enumeration (:class:`OutOfFuel`).

The verified engine runs the extracted ``Multi.match_multi_c`` /
``match_all_multi`` (``pypm_match_multi``); the reference engine below is
the same search written over the reference matcher's public interface
(:func:`.reference.joint_solutions`: the roots matched in sequence under
one substitution; :func:`.reference.guard_value`: the cross-root guard),
and :func:`check` decides ``Multi.mmatches`` directly for the tests, with
the declarative oracle (:func:`.declarative.check`).
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

    def __init__(self, pattern=None, *, defs=None, roots=None, n=None, m=None, guard=None,
                 order=None, index_only=False):
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
        # order[i]: the written position of the i-th root searched
        self.order: Tuple[int, ...] = tuple(order) if order is not None else tuple(range(len(roots)))
        if sorted(self.order) != list(range(len(roots))):
            raise ValueError(f"root order {self.order} is not a permutation of {len(roots)} roots")
        self.written: Tuple[int, ...] = tuple(roots)
        self.roots: Tuple[int, ...] = tuple(self.written[i] for i in self.order)
        for i, r in enumerate(self.written):  # Multi.mp_scoped, as the C API checks it
            d = self.defs[r] if 0 <= r < len(self.defs) else None
            if d is not None and (d.nparams > n or d.nfparams > m):
                raise ValueError(
                    f"root {i} (definition {r}) has {d.nparams} term and {d.nfparams} operator "
                    f"parameters, more than the {n} term and {m} operator variables the roots "
                    "share")
        self.n, self.m = n, m
        self.guard = guard
        self.index_only = index_only
        self.spec = serialize.encode_multi_spec(self.n, self.m, range(len(self.roots)),
                                                self.guard, index_only)

    @property
    def bodies(self) -> Tuple[core.CorePattern, ...]:
        return tuple(self.defs[r].body for r in self.roots)

    def make(self, nodes: Sequence[Node], theta: Dict[int, Node], phi: Dict[int, int]):
        written = [None] * len(nodes)
        for pos, i in enumerate(self.order):
            written[i] = nodes[pos]
        return MultiMatch(self.pattern, written, theta, phi, self.names, self.fnames)

    def reordered(self, order: Sequence[int], index_only: Optional[bool] = None) -> "MultiProgram":
        """The same pattern searched in root ``order`` (written positions)."""
        prog = MultiProgram(defs=self.defs, roots=self.written, n=self.n, m=self.m,
                            guard=self.guard, order=order,
                            index_only=self.index_only if index_only is None else index_only)
        prog.pattern, prog.names, prog.fnames, prog.name = (self.pattern, self.names,
                                                            self.fnames, self.name)
        return prog


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
    """The first solution ``(theta, phi)`` of the first ``len(ts)`` roots at
    ``ts`` (and the cross-root guard when ``with_guard``), or None:
    ``Multi.run_prefix`` / ``run_full``, fresh fuel of ``fuel`` steps each
    (:func:`.reference.joint_solutions`, :func:`.reference.guard_value`)."""
    fuel_left = reference.Fuel(fuel)
    graph = ts[0].graph
    for theta, phi in reference.joint_solutions(prog.defs, prog.bodies[:len(ts)], ts, prog.n,
                                                prog.m, fuel_left):
        if with_guard:
            fuel_left.tick()
            if reference.guard_value(prog.guard, theta, phi, graph) is not True:
                continue
        fuel_left.tick()  # ST-SUCCESS
        return theta, phi
    return None


ANCHOR_DEPTH = 16  # Multi.anchor_depth


def _vpath(d: int, x: int, p) -> Optional[Tuple[int, ...]]:
    """``Multi.vpath``: a path (child indices) through operators from
    ``p``'s root to the free variable ``x``, or None."""
    if isinstance(p, core.PVar):
        return () if p.x == x else None
    if d == 0:
        return None
    if isinstance(p, (core.PApp, core.PFunVar)):
        for i, q in enumerate(p.args):
            r = _vpath(d - 1, x, q)
            if r is not None:
                return (i,) + r
        return None
    if isinstance(p, (core.PGuard, core.PExistsF, core.PConstr)):
        return _vpath(d - 1, x, p.p)
    if isinstance(p, core.PExists):
        return None if p.x == x else _vpath(d - 1, x, p.p)
    return None


def _uargs(d: int, p) -> List[Tuple[int, int]]:
    """``Multi.uargs``: the ``(x, l)`` with the free variable ``x`` the
    ``l``-th argument of ``p``'s root operator."""
    if d == 0:
        return []
    if isinstance(p, (core.PApp, core.PFunVar)):
        return [(q.x, i) for i, q in enumerate(p.args) if isinstance(q, core.PVar)]
    if isinstance(p, (core.PGuard, core.PExistsF, core.PConstr)):
        return _uargs(d - 1, p.p)
    if isinstance(p, core.PExists):
        return [xl for xl in _uargs(d - 1, p.p) if xl[0] != p.x]
    return []


def anchor(earlier: Sequence, p) -> Optional[Tuple[int, Tuple[int, ...], int]]:
    """``Multi.anchor``: ``(j, π, l)`` when ``p``'s root has a variable as
    its ``l``-th argument that lies at path ``π`` below earlier root ``j``
    (then ``p``'s root is a user of that node), else None."""
    for x, l in _uargs(ANCHOR_DEPTH, p):
        for j, q in enumerate(earlier):
            pi = _vpath(ANCHOR_DEPTH, x, q)
            if pi is not None:
                return j, pi, l
    return None


_users_cache: Dict[int, tuple] = {}


def users(graph: Graph) -> List[List[int]]:
    """``Multi.users_map``: for each node id, the ids of its users in
    increasing order (cached per graph and size)."""
    hit = _users_cache.get(id(graph))
    if hit is not None and hit[0] is graph and hit[1] == len(graph.nodes):
        return hit[2]
    us: List[List[int]] = [[] for _ in graph.nodes]
    for n in graph.nodes:
        for c in dict.fromkeys(a.id for a in n.args):
            us[c].append(n.id)
    if len(_users_cache) > 8:
        _users_cache.clear()
    _users_cache[id(graph)] = (graph, len(graph.nodes), us)
    return us


def _candidates(prog: MultiProgram, graph: Graph):
    """For each later root, the function from the nodes chosen so far to
    its candidates: ``Multi.up_cands`` (or ``idx_cands`` when the program
    is index-only)."""
    nodes = graph.nodes
    bodies = prog.bodies
    out = []
    for i, r in enumerate(prog.roots[1:], start=1):
        a = None if prog.index_only else anchor(bodies[:i], bodies[i])
        if a is None:
            adm = [c for c in nodes if core.root_admits(prog.defs, r, c)]
            out.append(lambda ts, adm=adm: adm)
            continue
        us = users(graph)
        j, pi, l = a

        def cands(ts, j=j, pi=pi, l=l, r=r, us=us):
            n = ts[j]
            for k in pi:
                if k >= len(n.args):
                    return []
                n = n.args[k]
            return [nodes[u] for u in us[n.id]
                    if len(nodes[u].args) > l and nodes[u].args[l] is n
                    and core.root_admits(prog.defs, r, nodes[u])]
        out.append(cands)
    return out


def _first(prog: MultiProgram, node: Node, fuel: int, cands=None):
    """``Multi.match_multi_c``: ``(nodes, theta, phi)`` or None; raises
    :class:`OutOfFuel`."""
    if not core.root_admits(prog.defs, prog.roots[0], node):
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
        for c in cands[i](ts):
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
    return ts, s[0], s[1]


def _every(prog: MultiProgram, graph: Graph, fuel: int) -> List[MultiMatch]:
    """``Multi.mall``: at each node (increasing ids) as the first root,
    every tuple :func:`_first`'s search would try, depth first in candidate
    order; a tuple whose set is already reported is skipped before its last
    run, otherwise reported with its first solution."""
    cands = _candidates(prog, graph)
    out: List[MultiMatch] = []
    seen = set()

    def walk(ts):
        i = len(ts) - 1
        if i == len(cands):
            key = frozenset(t.id for t in ts)
            if key in seen:
                return
            s = _run(prog, ts, True, fuel)
            if s is not None:
                seen.add(key)
                out.append(prog.make(list(ts), s[0], s[1]))
            return
        used = {t.id for t in ts}
        for c in cands[i](ts):
            if c.id not in used and _run(prog, ts + [c], False, fuel) is not None:
                walk(ts + [c])

    for node in graph.nodes:
        try:
            if (core.root_admits(prog.defs, prog.roots[0], node)
                    and _run(prog, [node], False, fuel) is not None):
                walk([node])
        except OutOfFuel:
            raise _oof(prog, node.id) from None
    return out


# ----------------------------------------------------------------- answers


def root_order(prog: MultiProgram, graph: Graph, first: Optional[int] = None) -> Tuple[int, ...]:
    """The root order (written positions) for ``match_all`` on ``graph``:
    among all orders (``k!``, ``k <= 4`` in practice; orders beyond 6 roots
    keep the written one), the one minimizing, in turn, the number of later
    roots without an anchor (each scans every node its index admits), the
    number of nodes the first root's index admits (each is a start), and
    the nodes the unanchored roots scan. This is the RFC's minimum spanning
    arborescence over traversal costs by exhaustive search (a traversal
    from a bound node costs the node's users, an index scan its count; with
    k <= 6 roots enumeration is cheap and exact for this cost). Sound by
    ``Multi.mmatches_perm``. ``first``: keep that root first."""
    import itertools
    k = len(prog.written)
    if k > 6:
        return tuple(range(k))
    bodies = [prog.defs[r].body for r in prog.written]
    counts: Dict[int, int] = {}
    labels = graph.label_counts()
    anchors: Dict[tuple, bool] = {}
    syms = core.root_symbols(prog.defs)
    for i, r in enumerate(prog.written):
        adm = syms[r] if 0 <= r < len(syms) else frozenset()
        # a class condition (a tuple) may hold of any node: counted as all
        counts[i] = len(graph.nodes) if adm is None or any(
            isinstance(x, tuple) for x in adm) else sum(labels[lab] for lab in adm)
    best, best_key = tuple(range(k)), None
    for order in itertools.permutations(range(k)):
        if first is not None and order[0] != first:
            continue
        loose = []
        for pos, i in enumerate(order[1:], start=1):
            key = (frozenset(order[:pos]), i)
            if key not in anchors:  # an anchor exists iff some earlier root has one
                anchors[key] = anchor([bodies[o] for o in sorted(order[:pos])], bodies[i]) is not None
            if not anchors[key]:
                loose.append(i)
        key = (len(loose), counts[order[0]], sum(counts[i] for i in loose))
        if best_key is None or key < best_key:
            best, best_key = order, key
    return best


def _fuel(fuel: Optional[int]) -> int:
    return fuel if fuel is not None and fuel > 0 else reference.DEFAULT_FUEL


def _oof(prog: MultiProgram, node_id: int) -> OutOfFuel:
    return OutOfFuel(f"multi-root pattern {prog.name} at node %{node_id} ran out of "
                     "fuel")


def match_multi(pattern, node: Node, engine: str = "verified",
                fuel: Optional[int] = None) -> Optional[MultiMatch]:
    """The multi-root ``pattern`` with its first root at ``node``: a
    :class:`MultiMatch` or None; :class:`OutOfFuel` when the fuel is
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
                    fuel: Optional[int] = None, order: str = "auto") -> List[MultiMatch]:
    """Every set of nodes the multi-root ``pattern`` matches, once
    (``Multi.match_all_multi``: sound, every set, each once), in the order
    of their first roots (the smallest node that is the first root of a
    match with that set).
    ``order``: ``"auto"`` searches the roots in :func:`root_order`'s order,
    ``"written"`` in the written one (same sets, ``Multi.mmatches_perm``)."""
    prog = program(pattern)
    if order == "auto":
        o = root_order(prog, graph)
        if o != prog.order:
            prog = prog.reordered(o)
    elif order != "written":
        raise ValueError(f"order must be 'auto' or 'written', not {order!r}")
    if engine == "reference":
        return _every(prog, graph, _fuel(fuel))
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
    for r, t in zip(prog.roots, m.roots):
        if not declarative.check(core.Program(prog.defs, r), theta, t, phi):
            return False
    return declarative.guard_holds(prog.guard, theta, phi, graph)
