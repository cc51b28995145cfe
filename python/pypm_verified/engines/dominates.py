"""``pm.dominates(parent, path, child)``: Relay's dominator pattern, a side
condition checked *outside the proved core*.

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
the three patterns are matched with the chosen engine (the verified one by
default: each of those node tests is a proved match), and the walk and the
dominance check are plain Python on top (this module). README and
``doc/correspondence.md`` list it as outside the proved core.

Constant leaves (a graph's literals; in a PyTorch program the non-tensor
arguments such as ``alpha`` or a dim) are attributes, not dataflow: the
walk skips them.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional

from ..core.graph import Graph, Node
from ..errors import PatternError


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

    def __repr__(self):
        return f"<{self.name}>"

    def match(self, node: Node, engine: str = "verified", fuel: Optional[int] = None,
              users: Optional[Callable] = None, is_output: Optional[Callable] = None,
              matcher: Optional[Callable] = None) -> Optional[DominatorMatch]:
        """The match at ``node`` or None. ``users``/``is_output`` describe the
        graph's uses (default: :func:`graph_users` of ``node.graph``);
        ``matcher(pattern, node)`` replaces ``pm.match`` with ``engine``."""
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
    outputs through the child (checked outside the proved core:
    :mod:`pypm_verified.engines.dominates`)."""
    return Dominates(parent, path, child)

