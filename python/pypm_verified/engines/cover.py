"""The term-graph nodes a match covers: those its pattern's operators
matched (the explanation's search, :mod:`.explain`, recording them). Used
for legality of fusion (the interior of a match: ``pm.rewrite``, the
PyTorch driver, ``pm.partition``) and by the HTML report."""
from __future__ import annotations

from typing import Optional

from .. import core
from . import explain as _explain


class _CoverSearch(_explain._Search):
    """The explanation's search, recording in each state the graph nodes
    its pattern's operators matched (under keys ``("cover", id)`` of the
    substitution, which the search only reads by integer cells)."""

    best_cover: list = []

    def fail(self, st, path, node, kind, message, **details) -> None:
        before = self.best
        super().fail(st, path, node, kind, message, **details)
        if self.best is not before:  # a new deepest failure: what had matched on its way
            self.best_cover = _covered(st[0])

    def solve(self, p, t, env, st, di, path):
        k = type(p)
        if (k is core.PApp and t.label == p.f) or k is core.PFunVar:
            th = dict(st[0])
            th[("cover", t.id)] = t
            st = (th, st[1], st[2])
        yield from super().solve(p, t, env, st, di, path)


def _covered(theta) -> list:
    return [t for k, t in theta.items() if isinstance(k, tuple) and k[0] == "cover"]


def _search_for(pattern, node, cache: Optional[dict], budget: int) -> _CoverSearch:
    key = id(pattern)
    cache = {} if cache is None else cache
    tab = cache.get(key)
    if tab is None:
        defs, root = _explain._table(pattern)
        tab = cache[key] = (pattern, defs, root, _explain._Names(defs, root, pattern))
    _, defs, root, names = tab
    return _CoverSearch(defs, root, names, node.graph, budget, _explain.node_desc)


def near_terms(pattern, node, cache: Optional[dict] = None) -> list:
    """The term-graph nodes the deepest failed attempt of ``pattern`` at
    ``node`` had matched when it failed (what :func:`pypm_verified.explain`
    reports as the deepest partial match; the same search)."""
    s = _search_for(pattern, node, cache, _explain.DEFAULT_BUDGET)
    try:
        for _ in s.run(node):
            break
    except (_explain._Budget, RecursionError):
        pass
    return list(s.best_cover) or [node]


def cover_terms(pattern, match, cache: Optional[dict] = None, tries: int = 64) -> list:
    """The term-graph nodes ``match`` (of ``pattern`` at ``match.root``)
    covers: those its pattern's operators matched, in the order the search
    met them (the root first). Of the search's solutions, the first whose
    bindings are the match's; the root alone if none is found in ``tries``
    solutions or the search's budget."""
    node = match.root
    want = {v: n.id for v, n in match.substitution.items()}
    s = _search_for(pattern, node, cache, 1 << 16)
    first = None
    try:
        for i, (theta, _, _) in enumerate(s.run(node)):
            if first is None:
                first = theta
            if all(getattr(theta.get(v), "id", None) == n for v, n in want.items()):
                first = theta
                break
            if i + 1 >= tries:
                break
    except (_explain._Budget, RecursionError):
        pass
    if first is None:
        return [node]
    return _covered(first)
