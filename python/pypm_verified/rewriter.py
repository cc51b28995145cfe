"""Rewriting a graph with rules to a fixpoint (``pm.rewrite``).

Destructive rewriting as in the paper (§2.4): find matches, run the
pattern's rules, substitute the first firing rule's replacement for the
match's root (:meth:`Graph.replace`), and repeat until nothing fires.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from .api import _engine, match_all
from .graph import Graph, Node
from .patterns import Pattern


@dataclass
class RewriteReport:
    """What :func:`rewrite` did: ``firings`` (rule name -> times fired),
    ``rewrites`` (``(rule name, old root, replacement)`` in order),
    ``iterations`` (passes over the graph) and ``cap_hit`` (the last allowed
    pass still fired a rule, so a fixpoint was not reached)."""

    firings: Dict[str, int] = field(default_factory=dict)
    rewrites: List[Tuple[str, Node, Node]] = field(default_factory=list)
    iterations: int = 0
    cap_hit: bool = False

    @property
    def total(self) -> int:
        """Number of rewrites."""
        return len(self.rewrites)


def rewrite(graph: Graph, patterns: Sequence[Pattern], engine: str = "verified",
            max_iterations: int = 100, fuel: Optional[int] = None) -> RewriteReport:
    """Apply the rules of ``patterns`` to ``graph`` until none fires.

    Each pass matches every pattern at every node the outputs reach (nodes in
    id order, patterns in the given order); for each match whose root is
    still live, the pattern's rules are tried in definition order and the
    first whose assertions pass fires: its replacement is substituted for the
    root (a rule returning the root itself changes nothing and does not
    count). Passes repeat until one fires nothing, at most
    ``max_iterations`` times. A graph without designated outputs gets its
    current sinks (nodes no node uses) as outputs. Raises OutOfFuel like
    :func:`match_all`.
    """
    _engine(engine)
    if not isinstance(graph, Graph):
        raise TypeError(f"rewrite() needs a pm.Graph, not {graph!r}")
    patterns = list(patterns)
    for p in patterns:
        if not isinstance(p, Pattern):
            raise TypeError(f"rewrite() takes @pm.pattern patterns, not {p!r}")
    if not isinstance(max_iterations, int) or max_iterations < 1:
        raise ValueError("max_iterations must be a positive int")
    if not graph.outputs:
        used = {c for n in graph.nodes for c in graph._children[n.id]}
        for n in graph.nodes:
            if n.id not in used:
                graph.output(n)
    active = [p for p in patterns if p.rules]
    report = RewriteReport()
    if not active or not graph.nodes:
        report.iterations = 1
        return report
    while report.iterations < max_iterations:
        report.iterations += 1
        fired = False
        live = {n.id for n in graph.live()}
        for pattern, root, m in match_all(active, graph, engine=engine, fuel=fuel):
            if root.id not in live:
                continue
            for rule in pattern.rules:
                new = rule.apply(m)
                if new is None:
                    continue
                if new == root:
                    break
                graph.replace(root, new)
                report.firings[rule.name] = report.firings.get(rule.name, 0) + 1
                report.rewrites.append((rule.name, root, new))
                fired = True
                live = {n.id for n in graph.live()}
                break
        if not fired:
            return report
    report.cap_hit = True
    return report
