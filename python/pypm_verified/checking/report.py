"""Results of ``check-rules``: per rule a :class:`RuleResult`, per guard a
:class:`GuardResult`, and the :class:`Counterexample` behind a refutation
or a necessary guard; JSON (:meth:`RuleResult.as_dict`), Markdown
(:func:`markdown`) and console lines (:func:`summary_lines`).

A rule's ``status`` is one of :data:`STATUSES`:

* ``proved`` -- tested, and the symbolic check (:mod:`.smt`) proved
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
  declined every match), so nothing was tested;
* ``degenerate`` -- the rule fired, but every instance it fired on is
  degenerate on an axis its pattern reduces, normalizes, softmaxes or
  contracts: size 1 there, or every input constant along it (``reason``
  names the axis; ``space["axes"]`` has the sizes each axis took), so the
  instances cannot tell a right rule from a wrong one there (a LayerNorm
  over a size-1 axis returns its bias whatever its epsilon).

Outputs are compared per dtype relative to their magnitude:
``|got - ref| <= atol * max|ref| + rtol * |ref|`` (``space["tolerance"]``).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional

__all__ = ["STATUSES", "Counterexample", "GuardResult", "RuleResult", "markdown",
           "summary_lines", "symbolic_line", "counterexample_lines"]

STATUSES = ("proved", "tested", "refuted", "vacuous", "degenerate")
FAILING = ("refuted", "vacuous", "degenerate")
#: the most elements (all inputs together) whose values a counterexample
#: keeps (printed, and written into a ``--repro`` file); beyond, the
#: seed rebuilds them
MAX_VALUES = 4096
#: the most elements of one input printed in full with a counterexample
PRINT_VALUES = 32


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
    #: max|ref| of the output compared (``atol`` is relative to it)
    scale: Optional[float] = None
    #: the input values: name -> elements in row-major order (floats as
    #: float64 hold them exactly), for at most :data:`MAX_VALUES` elements in
    #: all (else None: ``seed`` and ``values_mix`` rebuild them)
    values: Optional[Dict[str, list]] = None
    seed: Optional[int] = None
    values_mix: str = "normal"
    #: the instance's inputs also hold special values (``--special-values``)
    special: bool = False
    #: per tensor input, the axis a "near_constant" mix runs along
    mix_axes: Dict[str, int] = field(default_factory=dict)
    #: the subgraph and the rewritten graph as Python (torch.fx code of
    #: ``forward(self, <inputs>)``: ATen calls), for ``--repro``
    program: Optional[str] = None
    rewritten: Optional[str] = None
    #: inputs only the rewritten graph takes (weights a multi-root rule
    #: concatenated): name -> (shape, dtype, elements)
    extra: Dict[str, list] = field(default_factory=dict)
    #: the names of the tensor inputs in ``program`` and ``rewritten`` (in
    #: the order of ``inputs``; torch.fx renames some)
    arg_names: List[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        d = asdict(self)
        d["max_abs"], d["max_rel"] = _num(self.max_abs), _num(self.max_rel)
        if self.values is not None:
            d["values"] = {k: [_num(x) for x in v] for k, v in self.values.items()}
        return d


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.6g}" if math.isfinite(v) else repr(v)
    return repr(v)


def _nested(flat: list, shape) -> str:
    """Row-major ``flat`` as a nested list literal of ``shape``."""
    if not shape:
        return _fmt(flat[0]) if flat else "[]"
    n = len(flat) // shape[0] if shape[0] else 0
    return "[" + ", ".join(_nested(flat[i * n:(i + 1) * n], shape[1:])
                           for i in range(shape[0])) + "]"


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
    for i in c.inputs:
        if "shape" not in i:
            continue
        vals = (c.values or {}).get(i["name"])
        n = math.prod(i["shape"])
        if vals is not None and n <= PRINT_VALUES:
            lines.append(f"  {i['name']} = {_nested(vals, i['shape'])}")
        elif c.seed is not None:
            lines.append(f"  {i['name']}: {n} values ({c.values_mix}), seed {c.seed}"
                         + (" (in full in the JSON report and --repro)"
                            if vals is not None else " (--repro rebuilds them)"))
    if c.opvars:
        lines.append("operators: " + ", ".join(f"{k} = {v}" for k, v in c.opvars.items()))
    if c.replacement:
        lines.append(f"rewritten: {c.replacement}")
    what = c.message
    if c.kind == "disagree" and c.max_abs is not None:
        tol = (f" (tolerance atol {c.tolerance[0]:g}*max|ref|"
               + (f" ({c.scale:.3g})" if c.scale is not None else "")
               + f" + rtol {c.tolerance[1]:g}*|ref|)") if c.tolerance else ""
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
    which the variant without it fired on ``fired``), "inconclusive" (the
    variant fired only on instances degenerate on an axis the pattern reads,
    ``degenerate`` of them: no evidence either way), or "skipped" (``note``
    says why: profitability guards decide speed, not results)."""

    kind: str
    where: str
    text: str
    status: str
    note: str = ""
    violations: int = 0
    fired: int = 0
    counterexample: Optional[Counterexample] = None
    #: of the ``fired``, those degenerate on an axis the pattern reads (no
    #: evidence for "redundant")
    degenerate: int = 0

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

def summary_lines(results: List[RuleResult], repro: Optional[str] = None) -> List[str]:
    """One line per rule, then the counterexamples and vacuity reasons;
    ``repro``: the ``--repro`` folder the files were written to (else each
    counterexample says how to get one)."""
    out = []
    w = max([len(r.rule) for r in results] + [4])
    sw = max([len(r.status) for r in results] + [8])
    for r in results:
        extra = ""
        if r.status in ("tested", "proved"):
            extra = f"{r.examples} instances"
            if r.examples < r.requested:
                extra += f" (of {r.requested} wanted)"
            if r.guards:
                nec = sum(g.status == "necessary" for g in r.guards)
                red = len(r.redundant_guards())
                inc = sum(g.status == "inconclusive" for g in r.guards)
                extra += f"; guards: {nec} necessary, {red} redundant" + (
                    f", {inc} inconclusive" if inc else "")
            cov = coverage_line(r.space)
            if cov:
                extra += "; " + cov
        elif r.status in ("vacuous", "degenerate"):
            extra = r.reason
        elif r.status == "refuted":
            extra = r.counterexample.message if r.counterexample else r.reason
        if r.symbolic.get("structures"):
            extra += "; " + symbolic_line(r.symbolic)
        out.append(f"{r.rule:<{w}}  {r.status:<{sw}}  {extra}  ({r.seconds:.1f} s)")
    for r in results:
        if r.counterexample is not None:
            out.append("")
            out.append(f"counterexample to {r.rule} ({r.where}):")
            out.extend("  " + x for x in counterexample_lines(r.counterexample))
            if r.counterexample.program and r.counterexample.rewritten:
                if repro:
                    out.append(f"  reproduce: python {repro_path(repro, r.rule)}")
                else:
                    src = r.where.rsplit(":", 1)[0]
                    out.append(f"  reproduce: python -m pypm_verified check-rules --rules {src} "
                               f"--seed {r.seed} --repro DIR (writes DIR/{_file_name(r.rule)})")
    return out


def coverage_line(space: dict) -> str:
    """The sizes of the axes the pattern reads, in one line (empty when none)."""
    axes = space.get("axes") or {}
    parts = []
    # an axis is named after the first input that has it, which varies: the
    # names met in a quarter of the instances or more
    least = max(1, (space.get("fired") or 0) // 4)
    for label, a in axes.items():
        if not any(k.split(" ")[0] in _READ for k in a["reads"]) or a["instances"] < least \
                or len(parts) >= 4:
            continue
        sz = a["sizes"]
        rng = f"{sz[0]}..{sz[-1]}" if len(sz) > 1 else f"{sz[0]}" if sz else "-"
        parts.append(f"{label} {rng}" + (f" ({a['degenerate']} degenerate)"
                                         if a.get("degenerate") else ""))
    return ("axes read: " + ", ".join(parts)) if parts else ""


_READ = ("reduced", "normalized", "softmax", "contracted")


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
    for label, a in (space.get("axes") or {}).items():
        deg = ""
        if a.get("degenerate"):
            deg = (f"; degenerate in {a['degenerate']} of {a['instances']} ("
                   + ", ".join(f"{k}: {v}" for k, v in a.get("why", {}).items()) + ")")
        out.append(f"* axis `{label}` ({', '.join(a['reads'])}): sizes "
                   f"{', '.join(map(str, a['sizes']))} in {a['instances']} fired "
                   f"instance(s){deg}")
    tol = space.get("tolerance")
    if tol:
        out.append(f"* tolerance: `{tol['rule']}` (max\\|ref\\| at least the largest magnitude "
                   "of the inputs, and where they differ of what either side computes, up to "
                   "1); " + ", ".join(
                       f"{k} atol {v[0]:g} rtol {v[1]:g}" for k, v in tol.items()
                       if k not in ("rule", "note")))
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
        inc = sum(x.status == "inconclusive" for x in r.guards)
        g = (f"{sum(x.status == 'necessary' for x in r.guards)} / "
             f"{len(r.redundant_guards())} / {sum(x.status == 'skipped' for x in r.guards)}"
             + (f" ({inc} inconclusive)" if inc else "") if r.guards else "-")
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
        if r.counterexample is not None and r.counterexample.program:
            lines += ["", f"Reproduce: `python -m pypm_verified check-rules --rules "
                          f"{r.where.rsplit(':', 1)[0]} --seed {r.seed} --repro DIR` writes "
                          f"`DIR/{_file_name(r.rule)}`, which runs it with torch alone."]
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


# ---------------------------------------------------------------- --repro

def _file_name(rule: str) -> str:
    safe = "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in rule)
    return f"repro_{safe}.py"


def repro_path(folder: str, rule: str) -> str:
    """The file ``--repro folder`` writes for ``rule``."""
    import os
    return os.path.join(folder, _file_name(rule))


def _fx_function(code: str, name: str) -> str:
    """torch.fx's ``forward(self, ...)`` as a plain function ``name``."""
    import re
    code = code.strip("\n")
    code = re.sub(r"def forward\(self,?\s*", f"def {name}(", code, count=1)
    return code


def _torch_dtype(name: str) -> str:
    return f"torch.{name}"


def repro_source(r: RuleResult) -> Optional[str]:
    """A self-contained Python program that rebuilds the inputs of ``r``'s
    counterexample, runs the matched subgraph and the rule's replacement
    with torch (the ATen calls the checker ran) and prints the difference;
    it exits 1 when they differ beyond the tolerance (or the replacement
    fails), 0 when they agree. None when the counterexample has no code."""
    import inspect
    import json
    from .evaluate import input_tensor
    c = r.counterexample
    if c is None or not c.program or not c.rewritten:
        return None
    tensors = [i for i in c.inputs if "shape" in i]
    lines = [
        "#!/usr/bin/env python3",
        f'"""Counterexample to rule {r.rule} ({r.where}, pattern {r.pattern}),',
        "written by `python -m pypm_verified check-rules --repro`.",
        "",
        f"instance:  {c.expression}",
        f"rewritten: {c.replacement}",
        f"checker:   {c.message}",
        "",
        "Runs the matched subgraph and its replacement on the same inputs with",
        "torch alone and prints the difference; exit status 1 when they differ",
        "beyond the tolerance (or the replacement fails), 0 when they agree.",
        '"""',
        "import math",
        "import sys",
        "",
        "import torch",
    ]
    if "torch.ops.pypm" in c.program + c.rewritten:
        lines.append("import pypm_verified.torch.kernels  # noqa: F401 -- the custom ops")
    lines += ["from torch import device  # noqa: F401 -- as torch.fx writes it",
              "",
              "inf, nan = math.inf, math.nan",
              ""]
    if c.values is None:
        lines += [inspect.getsource(input_tensor), ""]
    lines += ["", "def inputs():", '    """The counterexample\'s inputs, by name."""']
    if c.values is None:
        lines.append(f"    g = torch.Generator().manual_seed({c.seed})")
    lines.append("    out = {}")
    args = c.arg_names if len(c.arg_names) == len(tensors) else \
        [i["name"].replace(".", "_") for i in tensors]
    for i, arg in zip(tensors, args):
        shape = tuple(i["shape"])
        dt = _torch_dtype(i["dtype"])
        if c.values is not None:
            vals = json.dumps([x if not isinstance(x, float) or math.isfinite(x)
                               else repr(x) for x in c.values[i["name"]]])
            vals = vals.replace('"inf"', "inf").replace('"-inf"', "-inf") \
                .replace('"nan"', "nan")
            lines.append(f"    out[{arg!r}] = torch.tensor({vals}, "
                         f"dtype=torch.float64).reshape({shape}).to({dt})")
        else:
            axis = c.mix_axes.get(i["name"], -1)
            lines.append(f"    out[{arg!r}] = input_tensor({shape}, {dt}, g, "
                         f"{c.special}, {c.values_mix!r}, {axis})")
    for name, (shape, dtype, vals) in c.extra.items():
        lines.append(f"    out[{name!r}] = torch.tensor({json.dumps(vals)}, "
                     f"dtype=torch.float64).reshape({tuple(shape)}).to(torch.{dtype})")
    lines += ["    return out", "", ""]
    lines += [_fx_function(c.program, "original"), "", ""]
    lines += [_fx_function(c.rewritten, "rewritten"), "", ""]
    atol, rtol = c.tolerance or (1e-4, 1e-3)
    lines += [
        f"ATOL, RTOL = {atol!r}, {rtol!r}  # the output dtype's: "
        "|got - ref| <= ATOL * max|ref| + RTOL * |ref|",
        "",
        "",
        "def _call(fn, ins):",
        "    import inspect",
        "    return fn(*[ins[n] for n in inspect.signature(fn).parameters])",
        "",
        "",
        "def _outputs(v):",
        "    return list(v) if isinstance(v, (tuple, list)) else [v]",
        "",
        "",
        "def main():",
        "    ins = inputs()",
        "    # max|ref| is taken at least the inputs' largest magnitude, up to 1 (the",
        "    # checker also takes the values either side computes, where they differ)",
        "    fins = [t.double()[torch.isfinite(t.double())] for t in ins.values()",
        "            if t.is_floating_point()]",
        "    floor = min(1.0, max([0.0] + [float(f.abs().max()) for f in fins if f.numel()]))",
        "    torch.set_printoptions(precision=6, linewidth=120)",
        "    for name, t in ins.items():",
        "        print(f'{name}: {tuple(t.shape)} {t.dtype}')",
        "        if t.numel() <= 64:",
        "            print(t)",
        "    with torch.no_grad():",
        "        ref = _outputs(_call(original, ins))",
        "        try:",
        "            got = _outputs(_call(rewritten, ins))",
        "        except Exception as e:  # noqa: BLE001",
        "            print(f'the replacement fails: {type(e).__name__}: {e}')",
        "            return 1",
        "    bad = False",
        "    for k, (r, g) in enumerate(zip(ref, got)):",
        "        print(f'output {k}: original {tuple(r.shape)} {r.dtype}, '",
        "              f'rewritten {tuple(g.shape)} {g.dtype}')",
        "        if r.shape != g.shape or r.dtype != g.dtype:",
        "            bad = True",
        "            continue",
        "        if r.numel() <= 64:",
        "            print('original: ', r)",
        "            print('rewritten:', g)",
        "        r64, g64 = r.double(), g.double()",
        "        fin = torch.isfinite(r64) & torch.isfinite(g64)",
        "        if not torch.equal(torch.isfinite(r64), torch.isfinite(g64)):",
        "            print('non-finite values differ')",
        "            bad = True",
        "        if not fin.any():",
        "            continue",
        "        diff = (r64 - g64).abs()[fin]",
        "        scale = max(float(r64[fin].abs().max()), floor)",
        "        bound = ATOL * scale + RTOL * r64[fin].abs()",
        "        n = int((diff > bound).sum())",
        "        print(f'max abs difference {float(diff.max()):.6g} (max|ref| {scale:.6g}); '",
        "              f'{n} of {diff.numel()} element(s) beyond '",
        "              f'{ATOL:g}*max|ref| + {RTOL:g}*|ref|')",
        "        bad = bad or n > 0",
        "    print('DIFFERENT' if bad else 'the same within the tolerance')",
        "    return 1 if bad else 0",
        "",
        "",
        "if __name__ == '__main__':",
        "    sys.exit(main())",
    ]
    return "\n".join(lines) + "\n"
