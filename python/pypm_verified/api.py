"""Matching entry points: ``match`` and ``match_all`` on either engine."""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple, Union

from . import binding, core, reference
from .dsl import Pattern
from .errors import OutOfFuel, PatternError
from .graph import Graph, Node

ENGINES = ("verified", "reference")

PatternLike = Union[Pattern, core.Pattern]


class Match:
    """A successful match of ``pattern`` at ``root``.

    ``bindings`` maps parameter names (variable ids for raw core patterns) to
    nodes, in variable order; ``substitution`` maps variable ids to nodes.
    """

    __slots__ = ("pattern", "root", "substitution", "bindings")

    def __init__(self, pattern: PatternLike, root: Node, substitution: Dict[int, Node]):
        self.pattern = pattern
        self.root = root
        self.substitution = dict(sorted(substitution.items()))
        names = pattern.params if isinstance(pattern, Pattern) else None
        self.bindings = {(names[v] if names else v): n for v, n in self.substitution.items()}

    def __getitem__(self, name):
        return self.bindings[name]

    def __eq__(self, other):
        return (isinstance(other, Match) and self.pattern is other.pattern
                and self.root == other.root and self.substitution == other.substitution)

    __hash__ = None

    def __repr__(self):
        name = self.pattern.name if isinstance(self.pattern, Pattern) else "<core>"
        binds = ", ".join(f"{k}=%{n.id}" for k, n in self.bindings.items())
        return f"<Match {name} at %{self.root.id}: {binds}>"


def _core(pattern: PatternLike) -> core.Pattern:
    if isinstance(pattern, Pattern):
        return pattern.core
    if isinstance(pattern, (core.PVar, core.PApp, core.PAlt, core.PGuard)):
        try:
            core.check_wf(pattern)
        except core.IllFormed as e:
            raise PatternError(f"ill-formed core pattern: {e}") from None
        return pattern
    raise TypeError(f"expected a @pm.pattern or a core pattern, not {pattern!r}")


def _engine(engine: str) -> str:
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; expected one of {ENGINES}")
    return engine


def _pattern_label(pattern: PatternLike) -> str:
    return pattern.name if isinstance(pattern, Pattern) else repr(pattern)


def match(pattern: PatternLike, node: Node, engine: str = "verified",
          fuel: Optional[int] = None) -> Optional[Match]:
    """Match ``pattern`` at ``node``: a :class:`Match`, or None if it does not
    match. Raises :class:`OutOfFuel` when ``fuel`` steps (default ``1 << 24``)
    do not decide it. ``engine`` is "verified" (the Coq-extracted matcher) or
    "reference" (the pure-Python matcher)."""
    _engine(engine)
    if not isinstance(node, Node):
        raise TypeError(f"match() needs a graph node, not {node!r}")
    p = _core(pattern)
    if engine == "reference":
        theta = reference.first_solution(p, node, fuel)
    else:
        owner = pattern if isinstance(pattern, Pattern) else None
        status, binds = binding.match(node.graph, node.id, (p,), 0, fuel, owner)
        if status == binding.serialize.STATUS_OUT_OF_FUEL:
            raise OutOfFuel(f"pattern {_pattern_label(pattern)} at node %{node.id} ran out "
                            "of fuel")
        if status != binding.serialize.STATUS_MATCH:
            return None
        nodes = node.graph.nodes
        theta = {v: nodes[n] for v, n in binds}
    return None if theta is None else Match(pattern, node, theta)


def match_all(patterns: Sequence[PatternLike], graph: Graph, engine: str = "verified",
              fuel: Optional[int] = None) -> List[Tuple[PatternLike, Node, Match]]:
    """Every ``(pattern, root, match)`` for every node (in id order) and every
    pattern that matches there (in the given order). Raises
    :class:`OutOfFuel` if any attempt runs out of fuel."""
    _engine(engine)
    if isinstance(patterns, (Pattern, core.PVar, core.PApp, core.PAlt, core.PGuard)):
        raise TypeError("match_all() takes a sequence of patterns")
    patterns = list(patterns)
    cores = tuple(_core(p) for p in patterns)
    out = []
    if engine == "reference":
        for node in graph.nodes:
            for pat, p in zip(patterns, cores):
                try:
                    theta = reference.first_solution(p, node, fuel)
                except OutOfFuel:
                    raise OutOfFuel(f"pattern {_pattern_label(pat)} at node %{node.id} ran out "
                                    "of fuel") from None
                if theta is not None:
                    out.append((pat, node, Match(pat, node, theta)))
        return out
    if not cores:
        return out
    nodes = graph.nodes
    for pi, root, status, binds in binding.match_all(graph, cores, fuel):
        pat = patterns[pi]
        if status == binding.serialize.STATUS_OUT_OF_FUEL:
            raise OutOfFuel(f"pattern {_pattern_label(pat)} at node %{root} ran out of fuel")
        out.append((pat, nodes[root], Match(pat, nodes[root], {v: nodes[n] for v, n in binds})))
    return out
