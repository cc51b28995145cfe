"""What a rewrite did: one report type for both rewriters (``pm.rewrite`` on
a ``pm.Graph`` and the PyTorch driver)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

#: ``PYPM_VALIDATE`` values that turn the rewrite validation off
#: (:func:`pypm_verified.rewriting.validate.enabled`)
VALIDATE_OFF = ("0", "false", "no", "off")
#: why the term-graph search's answers are not validated
TERM_SEARCH_REASON = "term-graph search is not validated"


@dataclass(frozen=True)
class Validation:
    """Whether a rewrite was checked by the verified rewrite validator
    (:mod:`pypm_verified.rewriting.validate`), and if not, why.

    ``validated``; ``reason`` (why not: "validation turned off by
    PYPM_VALIDATE=0", "native library not loaded: ...", "build id mismatch:
    ...", "term-graph search is not validated"; "" when validated);
    ``checks`` (what the validator accepted: passes of the PyTorch driver,
    firings of ``pm.rewrite``), ``unit`` ("pass" or "firing"), ``seconds``
    (time in the validator). ``str()`` is the line every report shows:
    "validated (N passes)" or "not validated: REASON".

    ``certified``: rule firings checked with their certificate (the proved
    matcher matches the rule's pattern there, the replacement is the rule's
    template); ``uncertified``: the others, checked as part of a pass only,
    each ``"rule at node: why"`` (a multi-root rule, a replacement that reads
    a node the match does not bind); when there are any, the line and the
    JSON say so."""

    validated: bool
    reason: str = ""
    checks: int = 0
    unit: str = "pass"
    seconds: float = 0.0
    certified: int = 0
    uncertified: Tuple[str, ...] = ()

    def __str__(self) -> str:
        if not self.validated:
            return f"not validated: {self.reason}"
        if not self.checks:
            return f"validated (no {self.unit} changed the graph)"
        plural = self.unit + ("es" if self.unit.endswith("s") else "s")
        line = f"validated ({self.checks} {self.unit if self.checks == 1 else plural})"
        if self.uncertified:
            n = len(self.uncertified)
            shown = "; ".join(self.uncertified[:3]) + (f"; and {n - 3} more" if n > 3 else "")
            line += (f"; {self.certified} firing(s) certified, {n} checked as a pass only, "
                     f"without a certificate: {shown}")
        return line

    def as_dict(self) -> dict:
        """The JSON-able fields, and ``summary`` (``str(self)``)."""
        d = {"validated": self.validated, "reason": self.reason or None,
             "checks": self.checks, "unit": self.unit, "seconds": self.seconds,
             "summary": str(self)}
        if self.uncertified:
            d["certified"] = self.certified
            d["uncertified"] = list(self.uncertified)
        return d


#: a report no driver filled (a :class:`RewriteReport` made by hand)
NOT_RECORDED = Validation(False, "no validation was recorded for this rewrite")
#: the term-graph search (:mod:`pypm_verified.rewriting.search`)
TERM_SEARCH = Validation(False, TERM_SEARCH_REASON)


def bypass_reason() -> Optional[str]:
    """Why a rewrite starting now would not be validated, or None: turned
    off by ``PYPM_VALIDATE``, the engine library not loadable (the reference
    engine runs without it, the validator cannot), or loaded despite another
    build id (``PYPM_ALLOW_BUILD_MISMATCH=1``)."""
    from ..engines import binding
    from ..errors import EngineUnavailable
    raw = os.environ.get("PYPM_VALIDATE", "1")
    if raw.strip().lower() in VALIDATE_OFF:
        return f"validation turned off by PYPM_VALIDATE={raw}"
    try:
        binding.open_engine_library()
    except EngineUnavailable as e:  # the hint to use the reference engine: beside the point
        return f"native library not loaded: {e}".replace(
            " (engine='reference' needs no library)", "")
    except Exception as e:  # noqa: BLE001 -- a library that is not ours (missing symbols)
        return f"native library not loaded: {type(e).__name__}: {e}"
    mismatch = binding.build_id_mismatch()
    if mismatch is not None:
        return (f"build id mismatch: {mismatch} (used because "
                f"{binding.ALLOW_MISMATCH_VAR} is set)")
    return None


def validation_status(checker, unit: str = "pass") -> Validation:
    """The :class:`Validation` of a rewrite whose validator was ``checker``
    (a :class:`~pypm_verified.torch.validate_fx.FxChecker` or
    ``TermChecker``; None when validation was off): from the checks it
    made, or the reason it did not run (:func:`bypass_reason`)."""
    from ..engines import binding
    if checker is None:
        return Validation(False, bypass_reason() or "the validator was not available when the "
                          "rewrite started", unit=unit)
    checks, seconds = int(getattr(checker, "passes", 0)), float(getattr(checker, "seconds", 0.0))
    mismatch = binding.build_id_mismatch()
    if mismatch is not None:  # checked by a library that is not the package's
        return Validation(False, f"build id mismatch: {mismatch} (used because "
                          f"{binding.ALLOW_MISMATCH_VAR} is set)", checks, unit, seconds)
    certified = int(getattr(checker, "certified", 0))
    uncertified = tuple(f"rule {r!r} at {at}: {why}"
                        for r, at, why in getattr(checker, "uncertified", ()))
    return Validation(True, "", checks, unit, seconds, certified, uncertified)


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

    ``validation`` (a :class:`Validation`): whether the verified validator
    checked the rewrite ("validated (N passes)") or why not ("not
    validated: REASON"); set by the driver that ran, "not validated" until
    then.
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
    validation: Validation = NOT_RECORDED

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

    def declined_summary(self, limit: int = 3) -> str:
        """The matches where no rule fired, in one line ("" when none):
        for each pattern (at most ``limit``) the count and its first rule's
        most frequent reason, e.g. ``Attention x1 (sdpa: not profitable on
        cpu: ... [file:line])``."""
        parts = []
        for pattern, per_rule in self.declines.items():
            n = self.unfired(pattern)
            if not n:
                continue
            first = (self.rules.get(pattern) or list(per_rule))[:1]
            why = self.why_not_fired(pattern, first[0]) if first else []
            parts.append(f"{pattern} x{n}" + (f" ({first[0]}: {why[0][0]})" if why else ""))
        if len(parts) > limit:
            parts = parts[:limit] + [f"{len(parts) - limit} more pattern(s)"]
        return "; ".join(parts)

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
        d["validation"] = self.validation.as_dict()
        return d

    def markdown(self, title: str = "Rewrite") -> str:
        """The report as Markdown: the validation status first, then the
        counts, each pattern's matches and each rule's firings (and its most
        frequent reason for declining)."""
        v = self.validation
        lines = [f"# {title}", "",
                 f"**Validation:** {v}" if v.validated else f"**Validation: {v}**", "",
                 f"- engine: {self.engine}" + (f", target: {self.target}" if self.target
                                               else ""),
                 f"- rewrites: {self.total} in {self.iterations} pass(es)"
                 + (" (cap reached: not a fixpoint)" if self.cap_hit else ""),
                 f"- nodes before / after: {self.nodes_before} / {self.nodes_after}", ""]
        if self.matches or self.firings:
            lines += ["| pattern / rule | matches | fired | why not fired |",
                      "|---|---:|---:|---|"]
            shown = set()
            for p in sorted(self.matches):
                m = self.matches[p]
                lines.append(f"| {_md(p)} | {m} | {m - self.unfired(p)} | |")
                for r in self.rules.get(p, ()):
                    shown.add(r)
                    why = self.why_not_fired(p, r)
                    lines.append(f"| &nbsp;&nbsp;{_md(r)} | | {self.firings.get(r, 0)} | "
                                 f"{_md(why[0][0]) if why else ''} |")
            for r in sorted(set(self.firings) - shown):
                lines.append(f"| {_md(r)} | | {self.firings[r]} | |")
        else:
            lines.append("No pattern matched.")
        return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    """``text`` as one Markdown table cell (no ``|``, no line breaks)."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _name(node) -> str:
    if isinstance(node, str):
        return node
    name = getattr(node, "name", None)
    if isinstance(name, str):
        return name
    return f"%{getattr(node, 'id', '?')}"
