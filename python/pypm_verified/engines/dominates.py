"""``pm.dominates(parent, path, child)``: Relay's dominator pattern, a
checker proved in ``theories/Dominates.v``.

Relay's ``dominates(P, I, C)`` matches a node ``n`` where ``C`` matches,
every input of ``n`` -- and, transitively, every input of a node on the
way -- is either matched by ``P`` (the walk stops there) or by ``I`` (the
walk goes on to its inputs), one node matches ``P`` on every way up, and
that *parent* is dominated by ``n``: every path from it to the graph's
outputs passes through ``n`` (nothing it or the nodes in between compute
is used elsewhere), so the region can be fused into one kernel -- a chain
of elementwise ops between a producer and a reduction, of any shape and
length.

This is a property of *all* paths through the graph and of the *users* of
nodes, which the calculus cannot state: its patterns look down from a node
at its arguments, never at who uses it, and a pattern has a fixed arity at
each operator while the path here branches over any number of inputs. So
it is a checker of its own, proved in ``theories/Dominates.v``: the
verified engine (the default) calls ``pypm_dominates``, where the three
patterns are matched at each node by the proved matcher and the walk, the
one-parent and dead-end checks and the dominance check are the extracted
``Dominates.dom_result`` (``dom_check_correct``: it says yes iff the
declarative property holds; node ids are a topological order, which the
checker checks). The reference engine runs the independent Python walk
below (:meth:`Dominates.match` with ``engine="reference"``, or with
caller-supplied ``users``/``matcher`` as ``pm.partition`` does over FX
users); ``tests/test_dominates.py`` compares the two on generated graphs.

Every way up must reach the parent: a path node whose inputs are all
constants (a dead end) makes the pattern fail at that root.

Constant leaves (a graph's literals; in a PyTorch program the non-tensor
arguments such as ``alpha`` or a dim) are attributes, not dataflow: the
walk skips them.
"""
from __future__ import annotations

import weakref
from typing import Callable, Dict, List, Optional

from ..core.graph import Graph, Node
from ..errors import OutOfFuel, PatternError


class DominatorMatch:
    """A match of :class:`Dominates` at ``root`` (the child's node):
    ``child`` and ``parent`` (the :class:`~.matching.Match` es of those
    patterns), ``parent_node``, ``path`` (the nodes between, matched by the
    path pattern, in the order the walk met them), ``nodes`` (root, path,
    parent: the region) and ``bindings`` (the parent's, then the child's;
    a name bound by both to different nodes is an error)."""

    def __init__(self, pattern, root: Node, child, parent, path: List[Node]):
        self.pattern = pattern
        self.root = root
        self.child = child
        self.parent = parent
        self.parent_node = parent.root
        self.path = path
        self.nodes = [root] + path + [parent.root]
        self.bindings: Dict = dict(parent.bindings)
        for k, v in child.bindings.items():
            if k in self.bindings and self.bindings[k] != v:
                raise PatternError(f"{pattern.name}: {k!r} is bound by the parent to "
                                   f"%{self.bindings[k].id} and by the child to %{v.id}")
            self.bindings[k] = v
        self.functions = {**parent.functions, **child.functions}

    @property
    def values(self) -> dict:
        return {**self.bindings, **self.functions}

    def __repr__(self):
        return (f"<DominatorMatch {self.pattern.name} at %{self.root.id}: parent "
                f"%{self.parent_node.id}, path {[f'%{n.id}' for n in self.path]}>")


def graph_users(graph: Graph):
    """``(users, is_output)`` of a ``pm.Graph``: the users of each live node
    and whether a node is an output (a designated one, or a node nothing
    uses when none is designated)."""
    live = graph.live()
    users: Dict[int, List[Node]] = {n.id: [] for n in live}
    for n in live:
        for a in dict.fromkeys(n.args):
            users.setdefault(a.id, []).append(n)
    outs = {o.id for o in graph.outputs} if graph.outputs else \
        {n.id for n in live if not users[n.id]}
    return (lambda n: users.get(n.id, [])), (lambda n: n.id in outs)


_flag_cache: "weakref.WeakKeyDictionary[Graph, tuple]" = weakref.WeakKeyDictionary()


def node_flags(graph: Graph) -> List[int]:
    """One word per node for ``pypm_dominates`` (``serialize.DOM_*``): a
    constant leaf, an output (as :func:`graph_users` says), live (the
    outputs reach it: its uses count). Cached per graph, node count and
    outputs."""
    from .serialize import DOM_CONST, DOM_LIVE, DOM_OUTPUT
    key = (len(graph.nodes), tuple(o.id for o in graph.outputs))
    hit = _flag_cache.get(graph)
    if hit is not None and hit[0] == key:
        return hit[1]
    _, is_output = graph_users(graph)
    live = {n.id for n in graph.live()}
    flags = [(DOM_CONST if n.kind == "const" else 0) | (DOM_OUTPUT if is_output(n) else 0)
             | (DOM_LIVE if n.id in live else 0) for n in graph.nodes]
    _flag_cache[graph] = (key, flags)
    return flags


def post_dominates(root, start, users: Callable, is_output: Callable) -> bool:
    """Whether every path from ``start`` to an output passes through
    ``root`` (``start`` itself is not ``root``)."""
    seen = set()
    stack = [start]
    while stack:
        n = stack.pop()
        if n == root or n in seen:
            continue
        seen.add(n)
        us = list(users(n))
        if is_output(n) or not us:
            return False
        stack.extend(us)
    return True


class Dominates:
    """``pm.dominates(parent, path, child)`` (see the module's docstring).
    ``match(node)`` / ``pm.match(d, node)`` give a :class:`DominatorMatch` or
    None; ``match_all(graph)`` every one in node order."""

    _is_dominates = True

    def __init__(self, parent, path, child):
        for what, p in (("parent", parent), ("path", path), ("child", child)):
            if not getattr(p, "_is_pattern", False):
                raise PatternError(f"pm.dominates: the {what} must be a @pm.pattern, not {p!r}")
        self.parent, self.path, self.child = parent, path, child
        self.name = f"dominates({parent.name}, {path.name}, {child.name})"
        self.engine_handle = None  # the verified engine's handle of the three patterns
        self._prepared = None

    def __repr__(self):
        return f"<{self.name}>"

    def _set(self):
        if self._prepared is None:
            from .matching import PreparedPatterns
            self._prepared = PreparedPatterns([self.parent, self.path, self.child])
        return self._prepared

    def _verified(self, graph: Graph, root: int, fuel: Optional[int]):
        """``pypm_dominates`` at ``root`` (every node if ``root < 0``)."""
        from . import binding, serialize
        s = self._set()
        spec = serialize.encode_dominates_spec(0, 1, 2, node_flags(graph))
        out = []
        for t, status, parent, region in binding.dominates(graph, s.defs, s.roots, spec, root,
                                                           fuel, owner=self):
            if status == serialize.STATUS_OUT_OF_FUEL:
                raise OutOfFuel(f"{self.name} at node %{t}: a pattern ran out of fuel")
            if status == serialize.STATUS_MATCH:
                out.append(self._make(graph, t, parent, region, fuel))
        return out

    def _make(self, graph: Graph, t: int, parent: int, region: List[int],
              fuel: Optional[int]) -> DominatorMatch:
        """The match the checker found: the child's and the parent's bindings
        from the verified matcher, the path nodes from the top down."""
        from .matching import match as _match
        nodes = graph.nodes
        child = _match(self.child, nodes[t], fuel=fuel)
        pm_ = _match(self.parent, nodes[parent], fuel=fuel)
        if child is None or pm_ is None:  # the checker matched them: a bug
            raise AssertionError(f"{self.name} at %{t}: pypm_dominates and pypm_match disagree")
        path = [nodes[i] for i in sorted(region, reverse=True) if i not in (t, parent)]
        return DominatorMatch(self, nodes[t], child, pm_, path)

    def match(self, node: Node, engine: str = "verified", fuel: Optional[int] = None,
              users: Optional[Callable] = None, is_output: Optional[Callable] = None,
              matcher: Optional[Callable] = None) -> Optional[DominatorMatch]:
        """The match at ``node`` or None. The verified engine runs the proved
        checker (``pypm_dominates``) over the graph's own users; the
        reference engine, or caller-supplied ``users``/``is_output`` (a
        graph's uses) or ``matcher(pattern, node)``, the Python walk."""
        if engine == "verified" and users is None and matcher is None:
            out = self._verified(node.graph, node.id, fuel)
            return out[0] if out else None
        if matcher is None:
            from .matching import match as _match

            def matcher(p, n):
                return _match(p, n, engine=engine, fuel=fuel)
        child = matcher(self.child, node)
        if child is None:
            return None
        parent = None
        path: List[Node] = []
        seen = {node}
        stack = list(reversed(node.args))
        while stack:
            x = stack.pop()
            if x in seen or x.kind == "const":
                continue
            seen.add(x)
            m = matcher(self.parent, x)
            if m is not None:
                if parent is not None and parent.root != x:
                    return None  # two parents: Relay's test_at_most_one_parent
                parent = m
                continue
            if matcher(self.path, x) is None:
                return None
            if all(a.kind == "const" for a in x.args):
                return None  # a dead end: this way up never reaches a parent
            path.append(x)
            stack.extend(reversed(x.args))
        if parent is None:
            return None
        if users is None:
            users, is_output = graph_users(node.graph)
        if not post_dominates(node, parent.root, users, is_output):
            return None
        return DominatorMatch(self, node, child, parent, path)

    def match_all(self, graph: Graph, engine: str = "verified",
                  fuel: Optional[int] = None) -> List[DominatorMatch]:
        """Every match, in node order (verified: one ``pypm_dominates`` call)."""
        if engine == "verified":
            return self._verified(graph, -1, fuel)
        users, is_output = graph_users(graph)
        out = []
        for n in graph.nodes:
            m = self.match(n, engine, fuel, users, is_output)
            if m is not None:
                out.append(m)
        return out


def dominates(parent, path, child) -> Dominates:
    """Relay's ``dominates(parent, path, child)``: at a node matching
    ``child``, every way up through its inputs passes nodes matching
    ``path`` until one node matching ``parent``, which only reaches the
    outputs through the child (with the verified engine, the proved checker
    of ``theories/Dominates.v``: :mod:`pypm_verified.engines.dominates`)."""
    return Dominates(parent, path, child)

