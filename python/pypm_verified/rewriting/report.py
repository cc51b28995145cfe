"""What a rewrite did: one report type for both rewriters (``pm.rewrite`` on
a ``pm.Graph`` and the PyTorch driver)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple


@dataclass
class RewriteReport:
    """What a rewrite to a fixpoint did.

    ``firings`` (rule name -> times fired), ``matches`` (pattern name ->
    matches found), ``rewrites`` (``(rule name, old root, replacement)`` in
    order), ``iterations`` (passes), ``cap_hit`` (the last allowed pass still
    fired a rule: not a fixpoint), ``engine``.

    Extras the PyTorch driver fills: ``target`` (device the rules optimized
    for), ``nodes_before``/``nodes_after`` (call nodes), ``merged`` (duplicate
    pure nodes merged by hash-consing), ``match_s`` (time in the matcher),
    ``total_s`` (time in the driver), ``attempts`` (pattern × node match
    attempts).
    """

    firings: Dict[str, int] = field(default_factory=dict)
    matches: Dict[str, int] = field(default_factory=dict)
    rewrites: List[Tuple[str, object, object]] = field(default_factory=list)
    iterations: int = 0
    cap_hit: bool = False
    engine: str = "verified"
    target: Optional[str] = None
    nodes_before: int = 0
    nodes_after: int = 0
    merged: int = 0
    match_s: float = 0.0
    total_s: float = 0.0
    attempts: int = 0

    @property
    def total(self) -> int:
        """Number of rewrites."""
        return sum(self.firings.values())

    def record_match(self, pattern: str) -> None:
        self.matches[pattern] = self.matches.get(pattern, 0) + 1

    def record_firing(self, rule: str, old, new) -> None:
        self.firings[rule] = self.firings.get(rule, 0) + 1
        self.rewrites.append((rule, old, new))

    def as_dict(self) -> dict:
        """The JSON-able fields (``rewrites`` as rule names and node names)."""
        d = {k: getattr(self, k) for k in (
            "engine", "target", "firings", "matches", "iterations", "cap_hit", "nodes_before",
            "nodes_after", "merged", "match_s", "total_s", "attempts")}
        d["rewrites"] = [[r, _name(o), _name(n)] for r, o, n in self.rewrites]
        return d


def _name(node) -> str:
    if isinstance(node, str):
        return node
    name = getattr(node, "name", None)
    if isinstance(name, str):
        return name
    return f"%{getattr(node, 'id', '?')}"
