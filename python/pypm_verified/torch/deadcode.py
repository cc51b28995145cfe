"""Dead-code removal after a firing: what the replaced root computed alone."""
from __future__ import annotations

from typing import Iterable

import torch
import torch.fx as fx

from .importer import TermGraph, is_pure

#: the metadata checks the exporter inserts: a node they alone use is dead
ASSERT_METADATA = torch.ops.aten._assert_tensor_metadata.default


def remove_dead(graph: fx.Graph, tg: TermGraph, start: Iterable[fx.Node]) -> None:
    """Remove from ``graph`` (and its term graph ``tg``, which erases the FX
    nodes) what became dead from ``start`` on: pure nodes without users, and
    the metadata asserts on them."""
    term, erase = tg.term, tg.erase
    stack = list(start)
    while stack:
        n = stack.pop()
        if n.graph is not graph or n not in term or n.op != "call_function" or not is_pure(n):
            continue
        users = list(n.users)
        if any(u.target is not ASSERT_METADATA for u in users):
            continue
        for u in users:
            erase(u)
        ins = n.all_input_nodes  # a new list
        erase(n)
        stack.extend(ins)


__all__ = ["ASSERT_METADATA", "remove_dead"]
