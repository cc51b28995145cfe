"""Legality of fusing a match, for any graph (torch-free): its interior
uses judged by the policy check of :mod:`pypm_verified.torch.legality`
over a ``users`` function, used by
``pm.rewrite`` on a ``pm.Graph`` and by the PyTorch driver on FX graphs.

The *interior* of a match is its root and the nodes its pattern's operators
matched, minus the nodes bound to pattern variables (its inputs). An
interior node other than the root used by a node outside the interior
*escapes*. Policies (``@pm.rule(P, interior=...)``): ``"duplicate"``
proceeds, ``"refuse"`` refuses any escape, ``"relay"`` refuses an escape
whose outside user reaches an output without passing through the root.
"""
from __future__ import annotations

from typing import Callable, Iterable, List, Optional, Set, Tuple

from ..core.graph import Graph, Node
from ..dsl.rules import INTERIOR_POLICIES as POLICIES
from ..engines.dominates import graph_users, post_dominates


def check_policy(policy: str) -> str:
    """``policy`` if it is one of ``POLICIES``, else ValueError."""
    if policy not in POLICIES:
        raise ValueError(f"unknown interior policy {policy!r}; expected one of {POLICIES}")
    return policy


def escapes(region: Set, root, users: Callable, name: Callable) -> List[Tuple]:
    """``(interior node, outside user)`` for every use of a region node other
    than the root by a node outside the region, sorted by name."""
    out = [(n, u) for n in region if n is not root for u in users(n) if u not in region]
    return sorted(out, key=lambda e: (name(e[0]), name(e[1])))


def verdict(region: Iterable, root, policy: str, users: Callable, is_output: Callable,
            name: Callable) -> Tuple[Optional[str], List[Tuple]]:
    """``(reason, escapes)``: ``reason`` is None when ``policy`` lets the
    match proceed (``escapes`` then lists the uses whose interior node is
    duplicated), else why it is refused."""
    check_policy(policy)
    region = set(region)
    esc = escapes(region, root, users, name)
    if not esc or policy == "duplicate":
        return None, esc
    if policy == "refuse":
        n, u = esc[0]
        return (f"interior node {name(n)} of the match is also used by {name(u)} outside it "
                "(interior='refuse')"), esc
    for n, u in esc:
        if not post_dominates(root, u, users, is_output):
            return (f"interior node {name(n)} of the match is also used by {name(u)}, which "
                    f"reaches the output without passing through the root {name(root)} "
                    "(interior='relay': fusing would hide a value used elsewhere)"), esc
    return None, esc


def match_interior(pattern, m) -> Set[Node]:
    """The interior of match ``m`` of ``pattern`` on a ``pm.Graph``: the root
    and the nodes its operators matched (:func:`..engines.cover.cover_terms`),
    minus the bound nodes."""
    from ..engines.cover import cover_terms
    bound = {t.id for t in m.bindings.values()}
    return {m.root} | {t for t in cover_terms(pattern, m) if t.id not in bound}


def graph_verdict(graph: Graph, pattern, m, policy: str, uses=None) -> Optional[str]:
    """Why ``policy`` refuses match ``m`` on ``graph``, or None; ``uses`` is
    :func:`..engines.dominates.graph_users` of the graph if already known."""
    if policy == "duplicate":
        return None
    users, is_output = uses or graph_users(graph)
    return verdict(match_interior(pattern, m), m.root, policy, users, is_output,
                   lambda n: f"%{n.id}")[0]
