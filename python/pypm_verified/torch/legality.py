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

The check itself is torch-free (:mod:`pypm_verified.rewriting.legality`,
which ``pm.rewrite`` applies on a ``pm.Graph``); this module gives it the
FX users. Uses by ``aten._assert_tensor_metadata`` (checks the exporter inserts) do
not count.
"""
from __future__ import annotations

from typing import Iterable, List, Optional, Set, Tuple

import torch
import torch.fx as fx

from ..engines.dominates import post_dominates
from ..rewriting import legality as _torch_free
from ..rewriting.legality import POLICIES, check_policy  # noqa: F401
ASSERT_METADATA = torch.ops.aten._assert_tensor_metadata.default


def users(n: fx.Node) -> List[fx.Node]:
    """The users of ``n`` that count (not the exporter's metadata checks)."""
    return [u for u in n.users if u.target is not ASSERT_METADATA]


def _name(n: fx.Node) -> str:
    return n.name


def _is_output(n: fx.Node) -> bool:
    return n.op == "output"


def escapes(region: Set[fx.Node], root: fx.Node) -> List[Tuple[fx.Node, fx.Node]]:
    """``(interior node, outside user)`` for every use of an interior node
    (a region node other than the root) by a node outside the region."""
    return _torch_free.escapes(region, root, users, _name)


def dominated_by(root: fx.Node, node: fx.Node) -> bool:
    """Whether every path from ``node`` to the program's output passes
    through ``root``."""
    return post_dominates(root, node, users, _is_output)


def verdict(region: Iterable[fx.Node], root: fx.Node, policy: str
            ) -> Tuple[Optional[str], List[Tuple[fx.Node, fx.Node]]]:
    """``(reason, escapes)``: ``reason`` is None when ``policy`` lets the
    match proceed (``escapes`` then lists the uses whose interior node is
    duplicated), else why it is refused (:func:`..rewriting.legality.verdict`
    over the FX users)."""
    return _torch_free.verdict(region, root, policy, users, _is_output, _name)
