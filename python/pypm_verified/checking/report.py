"""Results of ``check-rules``: per rule a :class:`RuleResult`, per guard a
:class:`GuardResult`, and the :class:`Counterexample` behind a refutation
or a necessary guard; JSON (:meth:`RuleResult.as_dict`), Markdown
(:func:`markdown`) and console lines (:func:`summary_lines`).

A rule's ``status`` is one of :data:`STATUSES`:

* ``proved`` -- tested, and the symbolic check (:mod:`.symbolic`) proved
  every structure the rule fired on equal over the reals for every size
  (``symbolic``: how many structures, which input ranks); the structures
  are those the instance generator reached (every alternate and
  operator-variable choice it drew, input ranks up to 4), not every rank;
* ``tested`` -- no counterexample in ``examples`` instances on which the
  rule fired, drawn from the instance space in ``space`` (``symbolic``
  says which structures were proved anyway, and why the others were not:
  "differs" always with a concrete input on which torch confirms the
  difference, in ``symbolic["counterexamples"]``; "unknown" where z3 gave
  up or no input confirmed its difference, naming the uninterpreted
  functions it may hinge on);
* ``refuted`` -- a concrete counterexample (``counterexample``);
* ``vacuous`` -- no generated instance was both matched and accepted by the
  rule's asserts (``reason`` says which: nothing matched, or the asserts
  declined every match), so nothing was tested.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional

__all__ = ["STATUSES", "Counterexample", "GuardResult", "RuleResult", "markdown",
           "summary_lines", "symbolic_line", "counterexample_lines"]

STATUSES = ("proved", "tested", "refuted", "vacuous")
FAILING = ("refuted", "vacuous")


def _num(x):
    if x is None or isinstance(x, bool):
        return x
    if isinstance(x, float) and not math.isfinite(x):
        return repr(x)
    return x


@dataclass
class Counterexample:
    """A concrete instance on which a rule (or a rule without one of its
    guards) changes the result: the ``expression`` it matched (tensor inputs
    by name, constants by value), the ``inputs`` (name, shape, dtype of each
    tensor; name and value of each constant), ``opvars`` (operator variable
    -> operator), the ``alternates`` it was unfolded from, ``kind``
    ("disagree": the outputs differ; "error": the rule raised or its
    replacement is invalid or fails at run time), ``message``, the error
    (``max_abs``, ``max_rel`` relative to the largest output, the
    ``tolerance`` (atol, rtol) of the output's dtype), the ``replacement``
    the rule built, and the outputs' (shape, dtype): ``expected``/``got``."""

    expression: str
    inputs: List[dict]
    kind: str
    message: str
    opvars: Dict[str, str] = field(default_factory=dict)
    alternates: List[str] = field(default_factory=list)
    max_abs: Optional[float] = None
    max_rel: Optional[float] = None
    tolerance: Optional[List[float]] = None
    replacement: Optional[str] = None
    expected: Optional[list] = None
    got: Optional[list] = None
    #: a multi-root rule: the root whose output differs ("root 2 of 3: ...")
    root: Optional[str] = None

    def as_dict(self) -> dict:
        d = asdict(self)
        d["max_abs"], d["max_rel"] = _num(self.max_abs), _num(self.max_rel)
        return d


def counterexample_lines(c: Counterexample) -> List[str]:
    """The counterexample as a few readable lines."""
    ins = []
    for i in c.inputs:
        if "shape" in i:
            ins.append(f"{i['name']}: {tuple(i['shape'])} {i['dtype']}")
        else:
            ins.append(f"{i['name']} = {i['value']}")
    lines = [f"instance: {c.expression}"]
    if ins:
        lines.append("inputs:   " + "; ".join(ins))
    if c.opvars:
        lines.append("operators: " + ", ".join(f"{k} = {v}" for k, v in c.opvars.items()))
    if c.replacement:
        lines.append(f"rewritten: {c.replacement}")
    what = c.message
    if c.kind == "disagree" and c.max_abs is not None:
        tol = f" (tolerance atol {c.tolerance[0]:g}, rtol {c.tolerance[1]:g})" \
            if c.tolerance else ""
        what = f"outputs differ: max abs error {c.max_abs:.3g}, rel {c.max_rel:.3g}{tol}"
        if c.expected and c.got and c.expected != c.got:
            what = f"output {c.expected} became {c.got}"
        if c.root:
            what = f"{c.root}: {what}"
    lines.append(f"result:   {what}")
    return lines


@dataclass
class GuardResult:
    """One guard of a rule (``kind`` "rule": an ``assert`` of the rule body,
    or one conjunct of it; "pattern": a conjunct of an alternate's guard),
    ``where`` (file:line), ``text``, ``status``: "necessary" (dropping it
    lets the rule fire on ``counterexample``), "redundant" (no
    counterexample among the ``violations`` instances that violate it, of
    which the variant without it fired on ``fired``), or "skipped"
    (``note`` says why: profitability guards decide speed, not results)."""

    kind: str
    where: str
    text: str
    status: str
    note: str = ""
    violations: int = 0
    fired: int = 0
    counterexample: Optional[Counterexample] = None

    def as_dict(self) -> dict:
        d = asdict(self)
        d["counterexample"] = self.counterexample.as_dict() if self.counterexample else None
        return d


@dataclass
class RuleResult:
    """The check of one ``@pm.rule`` (see the module docstring for
    ``status``). ``examples``: instances the rule fired on and agreed
    (``requested``: the target); ``counts``: instances by outcome
    (generated, invalid, no_match, declined, fired, more_precise: agreed
    only through the float64 comparison); ``declined_at``: the rule's
    failing asserts (``file:line``) and how often; ``space``: the instance
    space; ``guards``: guard necessity; ``seconds``; ``engine``; ``seed``."""

    rule: str
    pattern: str
    module: str
    where: str
    status: str
    examples: int = 0
    requested: int = 0
    counts: Dict[str, int] = field(default_factory=dict)
    declined_at: Dict[str, int] = field(default_factory=dict)
    space: dict = field(default_factory=dict)
    reason: str = ""
    counterexample: Optional[Counterexample] = None
    guards: List[GuardResult] = field(default_factory=list)
    seconds: float = 0.0
    engine: str = ""
    seed: int = 0
    symbolic: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status not in FAILING

    def redundant_guards(self) -> List[GuardResult]:
        return [g for g in self.guards if g.status == "redundant"]

    def as_dict(self) -> dict:
        d = asdict(self)
        d["counterexample"] = self.counterexample.as_dict() if self.counterexample else None
        d["guards"] = [g.as_dict() for g in self.guards]
        return d


# ---------------------------------------------------------------- rendering

def summary_lines(results: List[RuleResult]) -> List[str]:
    """One line per rule, then the counterexamples and vacuity reasons."""
    out = []
    w = max([len(r.rule) for r in results] + [4])
    for r in results:
        extra = ""
        if r.status in ("tested", "proved"):
            extra = f"{r.examples} instances"
            if r.examples < r.requested:
                extra += f" (of {r.requested} wanted)"
            if r.guards:
                nec = sum(g.status == "necessary" for g in r.guards)
                red = len(r.redundant_guards())
                extra += f"; guards: {nec} necessary, {red} redundant"
        elif r.status == "vacuous":
            extra = r.reason
        elif r.status == "refuted":
            extra = r.counterexample.message if r.counterexample else r.reason
        if r.symbolic.get("structures"):
            extra += "; " + symbolic_line(r.symbolic)
        out.append(f"{r.rule:<{w}}  {r.status:<8}  {extra}  ({r.seconds:.1f} s)")
    for r in results:
        if r.counterexample is not None:
            out.append("")
            out.append(f"counterexample to {r.rule} ({r.where}):")
            out.extend("  " + x for x in counterexample_lines(r.counterexample))
    return out


def symbolic_line(sym: dict) -> str:
    """``symbolic`` in one line."""
    n = sym["structures"]
    parts = [f"symbolic: {sym['proved']} of {n} structures proved for every size"]
    if sym.get("proved_like_instances"):
        parts.append(f"{sym['proved_like_instances']} for the fired instances' size patterns")
    if sym.get("differs"):
        parts.append(f"{len(sym['differs'])} differ over the reals (confirmed by torch)")
    if sym.get("unsupported"):
        parts.append(f"{sum(sym['unsupported'].values())} unsupported")
    if sym.get("unknown"):
        parts.append(f"{len(sym['unknown'])} unknown")
    return ", ".join(parts)


def _symbolic_lines(sym: dict) -> List[str]:
    if not sym.get("structures"):
        return []
    out = ["", "Symbolic check (over the reals, z3): "
           + symbolic_line(sym).replace("symbolic: ", "", 1) + "; input ranks "
           + ", ".join(f"{k} {v}" for k, v in sym.get("ranks", {}).items()) + "."]
    for d in sym.get("differs", [])[:3]:
        out.append(f"* differs: `{_md_cell(d)}`")
    for reason, k in list(sym.get("unsupported", {}).items())[:3]:
        out.append(f"* unsupported ({k}): {_md_cell(reason)}")
    for d in sym.get("unknown", [])[:3]:
        out.append(f"* unknown: `{_md_cell(d)}`")
    for c in sym.get("counterexamples", [])[:3]:
        ins = "; ".join(f"{i['name']} {tuple(i['shape'])} {i['dtype']} = {i['values'][:8]}"
                        + (" ..." if len(i["values"]) > 8 else "") for i in c["inputs"])
        out.append(f"* counterexample to `{_md_cell(c['structure'])}`: {_md_cell(ins)} "
                   f"({_md_cell(c['source'])}): {_md_cell(c['message'])}")
    return out


def _md_cell(s: str) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def _space_lines(space: dict) -> List[str]:
    out = []
    alts = space.get("alternates")
    if alts:
        out.append(f"* alternates: {alts['fired']} of {alts['total']} fired on"
                   + (f" (never: {', '.join(alts['never_fired'])})" if alts.get("never_fired")
                      else ""))
    if space.get("ranks"):
        out.append("* ranks: " + ", ".join(f"{k} {v}" for k, v in space["ranks"].items()))
    if space.get("sizes"):
        out.append(f"* sizes: {space['sizes'][0]}..{space['sizes'][1]}")
    if space.get("dtypes"):
        out.append("* dtypes: " + ", ".join(space["dtypes"]))
    if space.get("constants"):
        out.append("* constants: " + "; ".join(f"{k} in {{{', '.join(v)}}}"
                                                 for k, v in space["constants"].items()))
    if space.get("operators"):
        out.append("* operator variables: " + "; ".join(
            f"{k} in {{{', '.join(v)}}}" for k, v in space["operators"].items()))
    if space.get("inputs"):
        out.append(f"* input values: {space['inputs']}")
    return out


def markdown(results: List[RuleResult], title: str = "Rule checks", preamble: str = "") -> str:
    """The results as a Markdown report (``bench/results/rules.md``)."""
    lines = [f"# {title}", ""]
    if preamble:
        lines += [preamble, ""]
    lines += ["| rule | pattern | status | instances | declined | guards (necessary / "
              "redundant / skipped) | time (s) |", "|---|---|---|---|---|---|---|"]
    for r in results:
        g = (f"{sum(x.status == 'necessary' for x in r.guards)} / "
             f"{len(r.redundant_guards())} / {sum(x.status == 'skipped' for x in r.guards)}"
             if r.guards else "-")
        n = f"{r.examples}" + (
            " before the counterexample" if r.status == "refuted"
            else f" of {r.requested}" if r.examples < r.requested else "")
        lines.append(f"| `{r.rule}` | `{r.pattern}` | **{r.status}** | {n} | "
                     f"{r.counts.get('declined', 0)} | {g} | {r.seconds:.1f} |")
    for r in results:
        lines += ["", f"## `{r.rule}` ({r.module}) -- {r.status}", ""]
        lines.append(f"Rule at `{r.where}`, pattern `{r.pattern}`; engine {r.engine}, "
                     f"seed {r.seed}.")
        c = r.counts
        lines.append(f"Instances: {c.get('generated', 0)} generated, {c.get('invalid', 0)} "
                     f"rejected by torch, {c.get('no_match', 0)} not matched, "
                     f"{c.get('declined', 0)} declined by the rule, {c.get('fired', 0)} fired"
                     + (f" ({c['more_precise']} of them agreeing only as more precise than "
                        "the original)" if c.get("more_precise") else "") + ".")
        if r.reason:
            lines += ["", r.reason]
        if r.declined_at:
            lines += ["", "Declined at: " + ", ".join(f"`{k}` ({v})"
                                                     for k, v in r.declined_at.items())]
        sl = _space_lines(r.space)
        if sl:
            lines += ["", "Instance space:", ""] + sl
        lines += _symbolic_lines(r.symbolic)
        if r.counterexample is not None:
            lines += ["", "Counterexample:", "", "```"]
            lines += counterexample_lines(r.counterexample) + ["```"]
        if r.guards:
            lines += ["", "| guard | where | status | violating instances | variant fired "
                          "| counterexample without it |", "|---|---|---|---|---|---|"]
            for g in r.guards:
                cx = ""
                if g.counterexample is not None:
                    cl = counterexample_lines(g.counterexample)
                    cx = "<br>".join(_md_cell(x) for x in cl)
                elif g.note:
                    cx = _md_cell(g.note)
                lines.append(f"| `{_md_cell(g.text)}` ({g.kind}) | `{g.where}` | {g.status} | "
                             f"{g.violations} | {g.fired} | {cx} |")
    return "\n".join(lines) + "\n"
