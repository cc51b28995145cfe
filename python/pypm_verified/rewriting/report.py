"""What a rewrite did: one report type for both rewriters (``pm.rewrite`` on
a ``pm.Graph`` and the PyTorch driver)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple


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

    Why matches did not fire (both rewriters): ``rules`` (pattern name -> its
    rules' names, in the order tried, for every pattern that matched) and
    ``declines`` (pattern name -> rule name -> reason -> count): for every
    match where no rule fired, each rule tried says why it declined -- the
    first of its guards that failed, as one line
    (:attr:`pypm_verified.dsl.rules.Decline.reason`: the assert's text or,
    for a profitability guard, the threshold and the size seen, then
    ``[file:line]``). A match that fired records nothing there, so
    :meth:`unfired` is ``matches - fired`` per pattern.
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
    rules: Dict[str, List[str]] = field(default_factory=dict)
    declines: Dict[str, Dict[str, Dict[str, int]]] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """Number of rewrites."""
        return sum(self.firings.values())

    def record_match(self, pattern: str, rules: Optional[Sequence[str]] = None) -> None:
        """Count a match of ``pattern``; ``rules`` names its rules."""
        self.matches[pattern] = self.matches.get(pattern, 0) + 1
        if rules is not None and pattern not in self.rules:
            self.rules[pattern] = list(rules)

    def record_unfired(self, pattern: str, reasons: Sequence[Tuple[str, str]]) -> None:
        """A match of ``pattern`` where no rule fired: ``reasons`` holds
        ``(rule name, reason)`` for each rule tried."""
        per_rule = self.declines.setdefault(pattern, {})
        for rule, reason in reasons:
            counts = per_rule.setdefault(rule, {})
            counts[reason] = counts.get(reason, 0) + 1

    def unfired(self, pattern: str) -> int:
        """Matches of ``pattern`` where no rule fired."""
        per_rule = self.declines.get(pattern, {})
        first = self.rules.get(pattern, list(per_rule))[:1]
        return sum(per_rule.get(first[0], {}).values()) if first else 0

    def why_not_fired(self, pattern: str, rule: str) -> List[Tuple[str, int]]:
        """``(reason, count)`` for ``rule`` of ``pattern``, most frequent first."""
        counts = self.declines.get(pattern, {}).get(rule, {})
        return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))

    def record_firing(self, rule: str, old, new) -> None:
        self.firings[rule] = self.firings.get(rule, 0) + 1
        self.rewrites.append((rule, old, new))

    def as_dict(self) -> dict:
        """The JSON-able fields (``rewrites`` as rule names and node names)."""
        d = {k: getattr(self, k) for k in (
            "engine", "target", "firings", "matches", "iterations", "cap_hit", "nodes_before",
            "nodes_after", "merged", "match_s", "total_s", "attempts", "rules")}
        d["declines"] = {p: {r: dict(self.why_not_fired(p, r)) for r in per_rule}
                         for p, per_rule in self.declines.items()}
        d["rewrites"] = [[r, _name(o), _name(n)] for r, o, n in self.rewrites]
        return d


def _name(node) -> str:
    if isinstance(node, str):
        return node
    name = getattr(node, "name", None)
    if isinstance(name, str):
        return name
    return f"%{getattr(node, 'id', '?')}"
