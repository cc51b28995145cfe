"""Rewriting a graph with rules to a fixpoint (``pm.rewrite``).

Destructive rewriting as in the paper (§2.4): find matches, run the
pattern's rules, substitute the first firing rule's replacement for the
match's root (:meth:`Graph.replace`), and repeat until nothing fires.
"""
from __future__ import annotations

import sys
from typing import Optional, Sequence

from ..dsl.patterns import Pattern
from ..dsl.rules import short_path
from ..engines.dominates import graph_users
from ..engines.matching import check_engine, match_all
from ..errors import PatternError
from . import legality, validate
from .report import RewriteReport, validation_status
from ..core.graph import Graph, Node


def is_torch_program(graph) -> bool:
    """Whether ``graph`` is an ``ExportedProgram`` or an ``fx.GraphModule``
    (without importing torch: such an object means torch is loaded)."""
    for mod, cls in (("torch.export", "ExportedProgram"), ("torch.fx", "GraphModule")):
        t = getattr(sys.modules.get(mod), cls, None)
        if t is not None and isinstance(graph, t):
            return True
    return False


def rewrite(graph, patterns: Sequence[Pattern], engine: str = "verified",
            max_iterations: int = 100, fuel: Optional[int] = None) -> RewriteReport:
    """Apply the rules of ``patterns`` to the :class:`Graph` ``graph`` until
    none fires: ``pm.rewrite`` on a ``pm.Graph`` (:func:`pypm_verified.rewrite`
    describes it). A PyTorch program is not taken here: ``pm.rewrite`` hands
    it to the PyTorch layer (:func:`pypm_verified.torch.rewrite_graph_module`).
    """
    check_engine(engine)
    if is_torch_program(graph):
        raise TypeError("a PyTorch program is rewritten by pm.rewrite (pypm_verified.rewrite) "
                        "or pypm_verified.torch.rewrite_graph_module, not by the pm.Graph "
                        "rewriter")
    if not isinstance(graph, Graph):
        raise TypeError(f"rewrite() needs a pm.Graph, a torch.export.ExportedProgram or an "
                        f"ATen-level torch.fx.GraphModule, not {graph!r}")
    patterns = list(patterns)
    for p in patterns:
        if not isinstance(p, Pattern):
            raise TypeError(f"rewrite() takes @pm.pattern patterns, not {p!r}")
    if not isinstance(max_iterations, int) or max_iterations < 1:
        raise ValueError("max_iterations must be a positive int")
    if not graph.outputs:
        for n in graph.sinks():
            graph.output(n)
    active = [p for p in patterns if p.rules]
    report = RewriteReport(engine=engine)
    if not active or not graph.nodes:
        report.iterations = 1
        report.validation = validation_status(validate.term_checker(graph), "firing")
        return report
    checker = validate.term_checker(graph)  # each firing validated (None: turned off)
    while report.iterations < max_iterations:
        report.iterations += 1
        fired = False
        if checker is not None:
            checker.begin()
        live = {n.id for n in graph.live()}
        uses = None  # graph_users(graph), computed when a policy needs it
        for pattern, root, m in match_all(active, graph, engine=engine, fuel=fuel):
            if root.id not in live:
                continue
            report.record_match(pattern.name, [r.name for r in pattern.rules])
            values = {**m.bindings, **m.functions}
            declined = []  # (rule, reason) for each rule that did not fire
            refusals = {}  # interior policy -> reason or None, for this match
            for rule in pattern.rules:
                policy = getattr(rule, "interior", "duplicate")
                if policy != "duplicate":
                    if policy not in refusals:
                        if uses is None:
                            uses = graph_users(graph)
                        refusals[policy] = legality.graph_verdict(graph, pattern, m, policy, uses)
                    if refusals[policy] is not None:
                        declined.append((rule.name, refusals[policy]))
                        continue
                new = rule.fire(values, graph,
                                on_decline=lambda d: declined.append((d.rule.name, d.reason)))
                if new is None:
                    continue
                if not isinstance(new, Node) or new.graph is not graph:
                    raise PatternError(
                        f"rule {rule.name!r} ({rule.where}) returned {new!r}; a rule returns a "
                        "node of the matched graph (build it by calling operators on the bound "
                        "nodes)")
                if new == root:
                    declined.append((rule.name, "returned the matched root (no change) "
                                                f"[{short_path(rule.where)}]"))
                    break
                graph.replace(root, new)
                report.record_firing(rule.name, root, new)
                if checker is not None:
                    # the rule's claim (its pattern, the match, its body's
                    # replacement as a template), checked against the proved matcher
                    checker.fired(report.iterations, rule.name, root, new,
                                  validate.certificate_for(rule, pattern, m, graph))
                fired = True
                live = {n.id for n in graph.live()}
                uses = None
                declined = None
                break
            if declined is not None:
                report.record_unfired(pattern.name, declined)
        if not fired:
            break
    else:
        report.cap_hit = True
    report.validation = validation_status(checker, "firing")  # validated, or why not
    return report
