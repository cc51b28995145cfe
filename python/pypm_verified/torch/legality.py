"""Legality of fusing a match: interior nodes used outside the matched subgraph.

A match covers a subgraph: its root, the nodes its pattern's operators
matched (the *interior*) and the values bound to pattern variables (its
inputs). A rule replaces the root only; an interior node that something
outside the match also uses stays in the program for that user, so the
rewrite is still correct but the fused kernel computes that node a second
time. Outlining the match into a submodule (:mod:`.partition`) has the
same problem in a harder form: the submodule hides the interior, so an
outside user cannot see it at all.

What Relay does (``PatternPartitioner``, TVM's ``test_partition_overused``
and ``test_matched_outside_but_dominated``): a match whose interior is used
outside is *refused*, unless every such outside user is itself dominated
by the match's root -- everything it computes flows into the root and
nowhere else -- in which case the match proceeds and the used interior
computation is *duplicated* (computed once outside for that user, once
inside the fused kernel). The policies, per rule (``@pm.rule(P,
interior=...)``) and per partition call:

``"duplicate"``  always proceed; outside users keep the interior nodes they
                 use (what the driver always did, and still its default:
                 correct, a rule's ``ctx.profitable`` guard prices the work)
``"relay"``      Relay's check above (the default of :func:`partition`)
``"refuse"``     refuse any match whose interior is used outside

Uses by ``aten._assert_tensor_metadata`` (checks the exporter inserts) do
not count.
"""
from __future__ import annotations

from typing import Iterable, List, Optional, Set, Tuple

import torch
import torch.fx as fx

from ..dsl.rules import INTERIOR_POLICIES as POLICIES
from ..engines.dominates import post_dominates
ASSERT_METADATA = torch.ops.aten._assert_tensor_metadata.default


def check_policy(policy: str) -> str:
    if policy not in POLICIES:
        raise ValueError(f"unknown interior policy {policy!r}; expected one of {POLICIES}")
    return policy


def users(n: fx.Node) -> List[fx.Node]:
    """The users of ``n`` that count (not the exporter's metadata checks)."""
    return [u for u in n.users if u.target is not ASSERT_METADATA]


def escapes(region: Set[fx.Node], root: fx.Node) -> List[Tuple[fx.Node, fx.Node]]:
    """``(interior node, outside user)`` for every use of an interior node
    (a region node other than the root) by a node outside the region."""
    out = []
    for n in region:
        if n is root:
            continue
        for u in users(n):
            if u not in region:
                out.append((n, u))
    return sorted(out, key=lambda e: (e[0].name, e[1].name))


def dominated_by(root: fx.Node, node: fx.Node) -> bool:
    """Whether every path from ``node`` to the program's output passes
    through ``root``."""
    return post_dominates(root, node, users, lambda n: n.op == "output")


def verdict(region: Iterable[fx.Node], root: fx.Node, policy: str
            ) -> Tuple[Optional[str], List[Tuple[fx.Node, fx.Node]]]:
    """``(reason, escapes)``: ``reason`` is None when ``policy`` lets the
    match proceed (``escapes`` then lists the uses whose interior node is
    duplicated), else why it is refused."""
    check_policy(policy)
    region = set(region)
    esc = escapes(region, root)
    if not esc or policy == "duplicate":
        return None, esc
    if policy == "refuse":
        n, u = esc[0]
        return (f"interior node {n.name} of the match is also used by {u.name} outside it "
                "(interior='refuse')"), esc
    for n, u in esc:
        if not dominated_by(root, u):
            return (f"interior node {n.name} of the match is also used by {u.name}, which "
                    f"reaches the output without passing through the root {root.name} "
                    "(interior='relay': fusing would hide a value used elsewhere)"), esc
    return None, esc
