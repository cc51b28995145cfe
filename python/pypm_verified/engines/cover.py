"""The term-graph nodes a match covers: those its pattern's operators
matched, recorded by a trace of the reference matcher (the explanation's
trace, :class:`.explain.Trace`, extended: :class:`CoverTrace`). Used for
legality of fusion (the interior of a match: ``pm.rewrite``, the PyTorch
driver, ``pm.partition``) and by the HTML report."""
from __future__ import annotations

from typing import Optional

from .. import core
from ..errors import MemoryBudget
from . import explain


class CoverTrace(explain.Trace):
    """The explanation's trace, recording the graph nodes the pattern's
    operators matched on the way (an operator pattern whose label is the
    node's, an operator variable: from the step that tries it, so also
    for the failures there) in a store of the search, undone on
    backtracking with the bindings; ``best_cover``: those of the deepest
    failure's way."""

    stores = 2  # store 2: the depth (explain.Trace); store 3: node id -> node

    best_cover: list = []

    def step(self, p, t, at) -> None:
        super().step(p, t, at)
        k = type(p)
        if (k is core.PApp and t.label == p.f) or k is core.PFunVar:
            cover = self.search.st[3]
            if t.id not in cover:
                self.search.bind(3, t.id, t)

    def record(self, path, node, kind, message, **details) -> None:
        before = self.best
        super().record(path, node, kind, message, **details)
        if self.best is not before:  # a new deepest failure: what had matched on its way
            self.best_cover = self.covered()

    def covered(self) -> list:
        """The nodes covered on the current way, in the order they were met."""
        return list(self.search.st[3].values())


def _trace_for(pattern, node, cache: Optional[dict], step_limit: int) -> CoverTrace:
    key = id(pattern)
    cache = {} if cache is None else cache
    tab = cache.get(key)
    if tab is None:
        defs, root = explain.table(pattern)
        tab = cache[key] = (pattern, defs, root, explain.Names(defs, root, pattern))
    _, defs, root, names = tab
    return CoverTrace(defs, root, names, node.graph, step_limit, explain.node_desc)


_STOPS = (explain.StepLimit, MemoryBudget, RecursionError)


def near_terms(pattern, node, cache: Optional[dict] = None) -> list:
    """The term-graph nodes the deepest failed attempt of ``pattern`` at
    ``node`` had matched when it failed (what :func:`pypm_verified.explain`
    reports as the deepest partial match; the same trace)."""
    tr = _trace_for(pattern, node, cache, explain.DEFAULT_STEP_LIMIT)
    try:
        for _ in tr.run(node):
            break
    except _STOPS:
        pass
    return list(tr.best_cover) or [node]


def cover_terms(pattern, match, cache: Optional[dict] = None, tries: int = 64) -> list:
    """The term-graph nodes ``match`` (of ``pattern`` at ``match.root``)
    covers: those its pattern's operators matched, in the order the search
    met them (the root first). Of the search's solutions, the first whose
    bindings are the match's; the root alone if none is found in ``tries``
    solutions or the search's step limit."""
    node = match.root
    want = {v: n.id for v, n in match.substitution.items()}
    tr = _trace_for(pattern, node, cache, 1 << 16)
    first = None
    try:
        for i, _ in enumerate(tr.run(node)):
            theta = tr.search.st[0]  # the whole store (cells), read before resuming
            same = all(getattr(theta.get(v), "id", None) == n for v, n in want.items())
            if first is None or same:
                first = tr.covered()
            if same or i + 1 >= tries:
                break
    except _STOPS:
        pass
    if first is None:
        return [node]
    return first
