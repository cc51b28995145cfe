"""The check of a rule: draw instances of its pattern, run the rule on each,
stop at the first counterexample (shrunk) or after ``examples`` instances
the rule fired on; then, for a rule found correct, the necessity of each of
its guards (:mod:`.guards`) and the symbolic proof of each structure it
fired on. See :func:`check_rule`.

The check runs in three steps, each a unit of work of its own (check-rules
runs the first two as tasks of :mod:`pypm_verified.parallel`):

1. :func:`check_rule_instances`: the instance search (sequential: each run
   steers the next draws, and the first counterexample ends it) and the
   guards; the structures to prove come back as :class:`Structure`\\ s;
2. :func:`prove_structure`, one per structure: its instances run again and
   the structure proved (z3, capped per proof as :mod:`.smt` says);
3. :func:`finish_rule`: the proofs merged into the rule's result.

Each step depends only on its inputs (the instances are seeded by the run's
seed and the rule's name, every proof starts from a fresh z3 context), so
the result is the same whatever ran where and in which order."""
from __future__ import annotations

import math
import os
import random
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch

from ..engines import binding
from .evaluate import (COUNTEREXAMPLES, TOLERANCE_RULE, Outcome, RuleRunner, StructureProof,
                       build, flat_axes, input_tensors, shrink, tolerance_of)
from .gradients import GRADIENT_INSTANCES, comparable, gradient_problem
from .guards import check_guards
from .hints import rule_hints
from .instances import (READ_KINDS, VALUE_MIXES, GenerationFailed, Instance,
                        InstanceGenerator, Unbuildable, load_instance, render)
from .report import MAX_VALUES, Counterexample, RuleResult

__all__ = ["check_rule", "check_rules", "symbolic_summary", "FAST", "FULL", "default_engine",
           "check_rule_instances", "prove_structure", "finish_rule", "Structure",
           "InstancePhase"]

#: (examples, guard instances per guard) of the two modes
FULL = {"examples": 200, "per_guard": 24}
FAST = {"examples": 12, "per_guard": 0}


def default_engine() -> str:
    """"verified" when the engine library (the Coq-extracted matcher) loads, else "reference"."""
    return "verified" if binding.available() else "reference"


def _json_value(v):
    if isinstance(v, torch.dtype):
        return str(v).replace("torch.", "")
    if isinstance(v, float) and not math.isfinite(v):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return [_json_value(x) for x in v]
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return repr(v)


def _display(v) -> str:
    if isinstance(v, torch.dtype):
        return str(v).replace("torch.", "")
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return repr(v)


def _short(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if not rel.startswith("..") else path


def make_counterexample(inst: Instance, o: Outcome, gen: InstanceGenerator,
                        runner: Optional[RuleRunner] = None) -> Counterexample:
    """The report's form of a counterexample (shapes, dtypes, constants, the
    input values when not too many, their seed); with ``runner``, which just
    ran ``inst``, also the code of the subgraph and of its rewrite (for
    ``--repro``)."""
    inputs = []
    for name, shape, v in inst.inputs():
        if shape is not None:
            inputs.append({"name": name, "shape": list(shape), "dtype": _json_value(v)})
        else:
            inputs.append({"name": name, "value": _json_value(v)})
    names = {(d, k): n for d, k, n in gen.alternates()}
    alts = list(dict.fromkeys(names.get(c, str(c)) for c in inst.choices))
    exp = [list(o.expected[0]), o.expected[1].replace("torch.", "")] if o.expected else None
    got = [list(o.got[0]), o.got[1].replace("torch.", "")] if o.got else None
    drawn = input_tensors(inst)
    tensors = runner.last_inputs if runner is not None and runner.last_inputs else \
        [t for _, t, _ in drawn]
    names = [lf.name for lf, _, _ in drawn]
    values = None
    if len(tensors) == len(names) and sum(t.numel() for t in tensors) <= MAX_VALUES:
        values = {n: t.double().reshape(-1).tolist() for n, t in zip(names, tensors)}
    program = rewritten = None
    extra: Dict[str, list] = {}
    if runner is not None and runner.last_code[1] is not None:
        program, rewritten = runner.last_code
        extra = {k: [list(t.shape), str(t.dtype).replace("torch.", ""),
                     t.double().reshape(-1).tolist()] for k, t in runner.last_extra.items()}
    return Counterexample(render(inst), inputs, o.kind, o.detail,
                          {k: v.name for k, v in inst.opvars.items()}, alts, o.max_abs,
                          o.max_rel, list(o.tolerance) if o.tolerance else None,
                          o.replacement, exp, got, o.root, scale=o.scale, values=values,
                          seed=inst.seed, values_mix=inst.values_mix, special=inst.special,
                          mix_axes={lf.name: ax for lf, _, ax in drawn}, program=program,
                          rewritten=rewritten, extra=extra,
                          arg_names=list(runner.last_names) if runner is not None
                          and len(runner.last_names) == len(names) else
                          [n.replace(".", "_") for n in names])


class _Space:
    """What the fired instances covered."""

    def __init__(self, gen: InstanceGenerator):
        self.gen = gen
        self.alts = Counter()
        self.ranks: Dict[str, set] = {}
        self.sizes: List[int] = []
        self.dtypes = Counter()
        self.consts: Dict[str, set] = {}
        self.ops: Dict[str, set] = {}
        self.fired = 0
        #: axis label -> {"reads": [...], "sizes": set, "instances": n,
        #: "why": Counter of the reasons it said nothing (size 1, constant)}
        self.axes: Dict[str, dict] = {}
        self.mixes = Counter()
        self.out_dtypes: set = set()
        #: fired instances degenerate on some axis the pattern reads
        self.flat = 0

    def add(self, inst: Instance, inputs=None, outcome: Optional[Outcome] = None) -> None:
        self.fired += 1
        self.mixes[inst.values_mix] += 1
        if outcome is not None and outcome.expected:
            self.out_dtypes.add(outcome.expected[1].replace("torch.", ""))
        flat = flat_axes(inst, inputs or None)
        self.flat += bool(flat)
        for label, (kinds, d) in inst.read_axes().items():
            a = self.axes.setdefault(label, {"reads": [], "sizes": set(), "instances": 0,
                                             "why": Counter()})
            a["reads"] += [k for k in kinds if k not in a["reads"]]
            a["sizes"].add(inst.size(d))
            a["instances"] += 1
            if label in flat:
                a["why"][flat[label]] += 1
        self.alts.update(set(inst.choices))
        self.dtypes[str(inst.dtype).replace("torch.", "")] += 1
        for name, shape, v in inst.inputs():
            if shape is not None:
                self.ranks.setdefault(name, set()).add(len(shape))
                self.sizes.extend(shape)
            else:
                self.consts.setdefault(name, set()).add(_display(v))
        for k, op in inst.opvars.items():
            self.ops.setdefault(k, set()).add(op.name)

    def degenerate(self) -> Dict[str, dict]:
        """When every fired instance is degenerate on some axis the pattern
        reduces, normalizes, softmaxes or contracts (size 1 there, or
        constant inputs along it): those axes, by label (the ones degenerate
        wherever they occur first, else the most often degenerate); else
        empty. (An axis is named after the first input that has it, which
        may differ between instances: the verdict is per instance.)"""
        if not self.fired or self.flat < self.fired:
            return {}
        read = {k: a for k, a in self.axes.items()
                if any(r.split(" ")[0] in READ_KINDS for r in a["reads"])
                and sum(a["why"].values())}
        always = {k: a for k, a in read.items() if sum(a["why"].values()) == a["instances"]}
        if always:
            return dict(sorted(always.items(), key=lambda kv: -kv[1]["instances"]))
        top = max((sum(a["why"].values()) for a in read.values()), default=0)
        return {k: a for k, a in read.items() if sum(a["why"].values()) == top}

    def often_flat(self, share: float = 0.25) -> List[str]:
        """The axes the pattern reads that are degenerate in more than
        ``share`` of the fired instances that have them."""
        return [k for k, a in self.axes.items()
                if any(r.split(" ")[0] in READ_KINDS for r in a["reads"])
                and sum(a["why"].values()) > share * a["instances"]]

    def as_dict(self) -> dict:
        allalts = self.gen.alternates()
        never = [n for d, k, n in allalts if (d, k) not in self.alts]
        tol = {"rule": TOLERANCE_RULE}
        for name in sorted(self.out_dtypes):
            dt = getattr(torch, name, None)
            if isinstance(dt, torch.dtype) and dt.is_floating_point:
                tol[name] = list(tolerance_of(dt))
        return {
            "fired": self.fired,
            "degenerate_instances": self.flat,
            "axes": {k: {"reads": a["reads"], "sizes": sorted(a["sizes"]),
                         "instances": a["instances"], "degenerate": sum(a["why"].values()),
                         "why": dict(a["why"])} for k, a in self.axes.items()},
            "tolerance": tol,
            "values": {k: self.mixes[k] for k in VALUE_MIXES if self.mixes[k]},
            "alternates": {"total": len(allalts), "fired": len(allalts) - len(never),
                           "never_fired": never},
            "ranks": {k: sorted(v) for k, v in self.ranks.items()},
            "sizes": [min(self.sizes), max(self.sizes)] if self.sizes else [],
            "dtypes": [f"{k} ({v})" for k, v in self.dtypes.most_common()],
            "constants": {k: sorted(v)[:8] for k, v in self.consts.items()},
            "operators": {k: sorted(v) for k, v in self.ops.items()},
            "inputs": "normal(0, 1) values, and now and then rows nearly constant along a "
                      "reduced axis, exact zeros, negative, large or small values (bool: "
                      "uniform), seeded per instance",
            "depth_bound": self.gen.max_depth,
        }


def check_rule(pattern, rule, examples: int = FULL["examples"], seed: int = 0,
               engine: Optional[str] = None, guards: bool = True,
               per_guard: int = FULL["per_guard"], max_attempts: Optional[int] = None,
               max_depth: int = 3, pattern_guards: bool = True,
               dtypes: Optional[Sequence[torch.dtype]] = None,
               symbolic: bool = True, special_values: float = 0.0,
               dtype_hints: bool = False) -> RuleResult:
    """Check ``rule`` (a ``@pm.rule`` of ``pattern``) on instances of its
    pattern: :class:`~.report.RuleResult` with status "tested" (no
    counterexample in ``examples`` instances the rule fired on), "refuted"
    (a counterexample, shrunk), "vacuous" (no instance was matched and
    accepted) or "degenerate" (every instance it fired on has size 1, or
    constant inputs, along an axis its pattern reduces, normalizes,
    softmaxes or contracts: ``space["axes"]`` has the sizes). At most
    ``max_attempts`` instances torch accepts are drawn (default 40 per
    example, at least 1000: the attention family fires on ~1 in 40);
    instances torch rejects (the generator's ill-typed subgraphs, e.g. a
    multi-output op or a fill tensor of the wrong rank) say nothing of the
    rule and do not count, up to four times ``max_attempts`` draws in all.
    With ``guards``, a tested rule's guards are checked for necessity,
    ``per_guard`` violating instances each (``pattern_guards``: its
    pattern's guards too). ``engine``: "verified" or "reference"
    (default: verified when the engine library is built). With ``symbolic``, every
    structure the rule fired and agreed on is also proved over the reals for
    every size (:mod:`.smt`); a tested rule all of whose structures are
    so proved is "proved" (see :func:`symbolic_summary` for the scope).
    ``special_values``: the share of instances whose inputs hold NaN, +-inf,
    +-0.0 and +-100 (integers: their type's extremes) among normal values,
    compared with signed zeros told apart; ``dtype_hints``: half the
    instances take a dtype the rule's source names (an integer-only rule
    fires on integers).

    The three steps of the module docstring, one after the other in this
    process."""
    phase = check_rule_instances(
        pattern, rule, examples=examples, seed=seed, engine=engine, guards=guards,
        per_guard=per_guard, max_attempts=max_attempts, max_depth=max_depth,
        pattern_guards=pattern_guards, dtypes=dtypes, symbolic=symbolic,
        special_values=special_values, dtype_hints=dtype_hints)
    return finish_rule(phase, [prove_structure(pattern, rule, phase.result.engine, s)
                               for s in phase.structures])


@dataclass
class Structure:
    """A symbolic obligation of a rule: the structure ``key`` (the matched
    subgraph, its replacement, the input ranks) and ``instances``, those it
    was met on (the first, then the first of each new size pattern, in the
    order drawn), each pickled by :func:`.instances.dump_instance`."""
    key: tuple
    instances: Tuple[bytes, ...]

    def label(self) -> str:
        """The structure in one line (the task's name in errors)."""
        return f"{self.key[0]} -> {self.key[1]}"


@dataclass
class InstancePhase:
    """What :func:`check_rule_instances` found: ``result`` (the rule's
    result but its symbolic summary: "proved" is decided by
    :func:`finish_rule`), ``structures`` to prove, and ``symbolic`` (whether
    the result gets a symbolic summary: the check asked for it and the rule
    is tested)."""
    result: RuleResult
    structures: List[Structure] = field(default_factory=list)
    symbolic: bool = False


def check_rule_instances(pattern, rule, examples: int = FULL["examples"], seed: int = 0,
                         engine: Optional[str] = None, guards: bool = True,
                         per_guard: int = FULL["per_guard"],
                         max_attempts: Optional[int] = None, max_depth: int = 3,
                         pattern_guards: bool = True,
                         dtypes: Optional[Sequence[torch.dtype]] = None,
                         symbolic: bool = True, special_values: float = 0.0,
                         dtype_hints: bool = False) -> InstancePhase:
    """The first step of :func:`check_rule` (same arguments): the instance
    search and the guards, the structures to prove collected, not proved."""
    t0 = time.perf_counter()
    engine = engine or default_engine()
    hints = rule_hints(rule)
    gen = InstanceGenerator(pattern, hints, seed=f"{seed}:{rule.name}", max_depth=max_depth,
                            special_values=special_values, dtype_hints=dtype_hints,
                            **({"dtypes": tuple(dtypes)} if dtypes else {}))
    runner = RuleRunner(pattern, rule, engine, symbolic=symbolic, defer=True)
    rng = random.Random(f"{seed}:{rule.name}:filter")
    max_attempts = max_attempts or max(1000, examples * 40)
    counts = Counter()
    lines = Counter()
    declined: Dict[int, List[Instance]] = {}
    space = _Space(gen)
    cex, reason = None, ""
    fails_in_a_row = 0
    agreed: List[Instance] = []  # the first ones: a rule declared differentiable's gradients
    base = os.path.basename(rule.fn.__code__.co_filename) if hasattr(rule, "fn") else "?"
    # while an axis the pattern reads is degenerate (size 1, or constant
    # inputs along it) in more than a quarter of the instances fired on that
    # have it (size 1 passes every size guard, so it is fired on more often
    # than it is drawn), draws are steered to it at size >= 2, up to
    # ``steer`` of them (a rule that fires only there then stays degenerate)
    steer = max(60, 5 * examples)
    while (counts["fired"] < examples and counts["generated"] - counts["invalid"] < max_attempts
           and counts["generated"] < 4 * max_attempts):
        accept = None
        if steer > 0 and space.flat:
            often = space.often_flat()
            if often:
                steer -= 1
                accept = _wider(often)
        try:
            # a tenth unfiltered: instances the pattern's guards reject, too
            inst = gen.generate(filtered=rng.random() > 0.1, accept=accept)
        except GenerationFailed as e:
            if accept is not None:  # no instance of that axis at size >= 2: stop steering
                steer = 0
                continue
            fails_in_a_row += 1
            if fails_in_a_row >= 5:
                reason = f"no instance could be generated: {e}"
                break
            continue
        except Unbuildable as e:
            reason = f"no PyTorch instance can be built: {e}"
            break
        fails_in_a_row = 0
        counts["generated"] += 1
        o = runner.run(inst)
        counts[o.kind if not o.fired else "fired"] += 1
        if o.kind == "declined" or o.fired:
            gen.feedback(inst, o.fired)
        if o.kind == "declined":
            lines[f"{base}:{o.line}" if o.line else "returned no replacement"] += 1
            if o.line is not None and len(declined.setdefault(o.line, [])) < 64:
                declined[o.line].append(inst)
        if o.is_counterexample:
            inst, o = shrink(inst, lambda c: (lambda oc: oc if oc.is_counterexample
                                              else None)(runner.run(c, prove=False)), o)
            again = runner.run(inst, prove=False)  # its code and inputs, for --repro
            cex = make_counterexample(inst, o, gen,
                                      runner if again.is_counterexample else None)
            break
        if o.kind == "agree":
            if o.detail:
                counts["more_precise"] += 1
            space.add(inst, runner.last_inputs, o)
            if len(agreed) < GRADIENT_INSTANCES and comparable(runner.last_inputs):
                agreed.append(inst)
    fired = counts["fired"]
    flat = space.degenerate() if cex is None and fired else {}
    if cex is not None:
        status = "refuted"
    elif fired and flat:
        status = "degenerate"
        reason = _degenerate_reason(flat, space.fired)
    elif fired == 0:
        status = "vacuous"
        if not reason:
            matched = counts["declined"]
            if matched == 0:
                reason = (f"no generated instance matched the pattern ({counts['generated']} "
                          f"drawn: {counts['invalid']} rejected by torch, "
                          f"{counts['no_match']} not matched)")
            else:
                top = ", ".join(f"{k} ({v})" for k, v in lines.most_common(4))
                reason = (f"the rule's asserts declined all {matched} matching instances "
                          f"(at {top})")
    else:
        status = "tested"
        if fired < examples:
            reason = (f"only {fired} of the {examples} wanted instances fired within "
                      f"{counts['generated']} drawn")
    if status in ("tested", "degenerate") and getattr(rule, "differentiable", None) is True:
        why = gradient_problem(pattern, rule, engine, agreed, seed)  # the declaration checked
        if why is not None:
            status, reason = "refuted", why
    prove = symbolic and status in ("tested", "degenerate")
    structures = [Structure(k, tuple(v.values())) for k, v in runner.pending.items()] \
        if prove else []
    examples_ok = fired - (1 if cex is not None else 0)
    guard_results = []
    if guards and status in ("tested", "proved") and per_guard > 0:
        guard_results = check_guards(
            pattern, rule, gen, runner, declined, engine, per_guard=per_guard,
            max_attempts=per_guard * 20,
            counterexample=lambda i, o: make_counterexample(i, o, gen),
            patterns=pattern_guards and not getattr(pattern, "is_multi", False))
    return InstancePhase(RuleResult(
        rule=rule.name, pattern=pattern.name, module=pattern.module,
        where=_short(rule.where), status=status, examples=examples_ok, requested=examples,
        counts={k: counts[k] for k in ("generated", "invalid", "no_match", "declined",
                                        "fired", "more_precise")},
        declined_at=dict(lines.most_common()), space=space.as_dict() if fired else {},
        reason=reason, counterexample=cex, guards=guard_results,
        seconds=time.perf_counter() - t0, engine=engine, seed=seed), structures, prove)


def _wider(labels):
    """Accept an instance whose axes ``labels`` (those it has) have size >= 2."""
    def accept(inst: Instance) -> bool:
        axes = inst.read_axes()
        return all(inst.size(axes[k][1]) >= 2 for k in labels if k in axes)
    return accept


def _degenerate_reason(flat: Dict[str, dict], fired: int) -> str:
    parts = []
    for label, a in flat.items():
        why = ", ".join(f"{k} in {v}" for k, v in a["why"].items())
        parts.append(f"{label} ({', '.join(a['reads'])}; {why})")
    return (f"every one of the {fired} instance(s) the rule fired on is degenerate on an "
            f"axis its pattern reads: {'; '.join(parts)}; there a wrong rule can agree "
            "with the original (a LayerNorm over a size-1 axis is its bias whatever its "
            "epsilon), so nothing was tested: widen the guards or check the sizes they "
            "admit")


def prove_structure(pattern, rule, engine: str, structure: Structure) -> StructureProof:
    """The second step of :func:`check_rule`, for one structure: its
    instances run again (the rule fires on each as it did in the search)
    and the structure proved as the search would have proved it (for every
    size; where that fails, for the size pattern of each instance)."""
    t0 = time.perf_counter()
    runner = RuleRunner(pattern, rule, engine, symbolic=True, only=structure.key)
    for data in structure.instances:
        inst = load_instance(pattern, data)
        o = runner.run(inst)
        sp = runner.proofs.get(structure.key)
        if o.kind != "agree" or sp is None:
            raise RuntimeError(f"rule {rule.name}: an instance of the structure "
                               f"{structure.label()} ran again to {o.kind} "
                               f"{o.detail!r}, not to that structure")
        if sp.free.status not in ("differs", "unknown"):
            break  # proved for every size (or unsupported): no size pattern needed
    for p in [sp.free, *sp.like.values()]:
        if p.status == "differs" and p.counterexample is not None:
            sp.replayed = replay_counterexample(pattern, rule, engine, structure, p.counterexample)
            if sp.replayed is not None:
                break
    sp.seconds = time.perf_counter() - t0
    return sp


def replay_counterexample(pattern, rule, engine: str, structure: Structure,
                          cex: dict) -> Optional[Counterexample]:
    """A difference the symbolic check confirmed with torch on the
    structure's expressions, replayed on the rule: the structure's first
    instance at the counterexample's sizes, its inputs set to the
    counterexample's values (in the instance's dtypes), matched and
    rewritten by the rule as in the search. The report's counterexample
    when the rule fires there and the results differ beyond the tolerance;
    None when the sizes do not fit the instance, or the rule declines them
    (its guards are Python and may rule those sizes out), or they agree."""
    inst = load_instance(pattern, structure.instances[0])
    given = {i["name"]: i for i in cex.get("inputs", ())}
    sizes = dict(inst.sizes)
    fixed: Dict[int, int] = {}
    for lf in inst.leaves:
        if lf.kind != "tensor" or lf.shape is None or lf.name not in given:
            continue
        shape = given[lf.name].get("shape")
        if shape is None or len(shape) != len(lf.shape):
            return None
        for d, n in zip(lf.shape, shape):
            r = d.find()
            if r.value is not None:
                if r.value != n:
                    return None
                continue
            if fixed.get(id(r), n) != n:
                return None
            fixed[id(r)] = n
            sizes[r] = int(n)
    inst = inst.with_sizes(sizes)
    try:
        b = build(inst)
    except Exception:  # noqa: BLE001 -- torch rejects the instance at these sizes
        return None
    names = [n.name for n in b.gm.graph.nodes if n.op == "placeholder"]
    inputs = []
    for name, t in zip(names, b.inputs):
        v = given.get(name)
        if v is None or v.get("values") is None or list(t.shape) != list(v["shape"]):
            return None
        inputs.append(torch.tensor(v["values"], dtype=torch.float64)
                      .reshape(t.shape).to(t.dtype))
    b = replace(b, inputs=inputs)
    runner = RuleRunner(pattern, rule, engine, symbolic=False)
    o = runner.run(inst, b, prove=False)
    if o.kind not in COUNTEREXAMPLES:
        return None
    gen = InstanceGenerator(pattern, rule_hints(rule), seed="replay")
    return make_counterexample(inst, o, gen, runner)


def finish_rule(phase: InstancePhase, proofs: Sequence[StructureProof]) -> RuleResult:
    """The third step of :func:`check_rule`: the rule's result with the
    proofs of its structures (``proofs[i]`` of ``phase.structures[i]``)
    summarized; "proved" when all of them are (and there is one)."""
    if len(proofs) != len(phase.structures):
        raise ValueError(f"rule {phase.result.rule}: {len(proofs)} proofs for "
                         f"{len(phase.structures)} structures")
    if not phase.symbolic:
        return phase.result
    sym = symbolic_summary({s.key: p for s, p in zip(phase.structures, proofs)})
    # proved for every size: a degenerate rule (its instances said nothing
    # on an axis) is right at every size of that axis too
    status = "proved" if sym["structures"] and sym["proved"] == sym["structures"] \
        else phase.result.status
    extra = {}
    replayed = next((p.replayed for p in proofs if p.replayed is not None), None)
    if replayed is not None:  # the rule itself fires there and disagrees
        status = "refuted"
        extra = {"counterexample": replayed,
                 "reason": "the symbolic check found inputs where the rule fires and the "
                           "results differ (replayed through the matcher and the rule: "
                           + replayed.message + ")"}
    return replace(phase.result, status=status, symbolic=sym,
                   seconds=phase.result.seconds + sum(p.seconds for p in proofs), **extra)


def symbolic_summary(proofs) -> dict:
    """What the symbolic check proved, over the structures the rule fired
    and agreed on (``RuleRunner.proofs``): ``structures``; ``proved`` (for
    every size); ``proved_like_instances`` (not for every size, but for
    every size with the size pattern of each fired instance: a guard of the
    rule, which is Python and not translated, restricts the sizes);
    ``differs`` (over the reals even so, and confirmed by torch on a
    concrete input: ``counterexamples`` holds it, one per entry, with the
    structure), ``unsupported`` and ``unknown`` (z3 gave up, or found a
    difference that no concrete input confirmed: the uninterpreted functions
    it may hinge on are named), each with examples; ``ranks`` (the input
    ranks the structures cover)."""
    out = {"structures": len(proofs), "proved": 0, "proved_like_instances": 0,
           "differs": [], "counterexamples": [], "unsupported": {}, "unknown": [],
           "ranks": {}}
    for sp in proofs.values():
        for k, r in sp.ranks.items():
            out["ranks"].setdefault(k, set()).add(r)
        st = sp.free.status
        if st == "proved":
            out["proved"] += 1
        elif st == "unsupported":
            out["unsupported"][sp.free.detail] = out["unsupported"].get(sp.free.detail, 0) + 1
        elif sp.like and all(p.status == "proved" for p in sp.like.values()):
            out["proved_like_instances"] += 1
        elif any(p.status == "unknown" for p in sp.like.values()):
            bad = next(p for p in sp.like.values() if p.status == "unknown")
            out["unknown"].append(f"{sp.original} -> {sp.replacement}: {bad.detail}")
        elif st == "unknown" and not any(p.status == "differs" for p in sp.like.values()):
            out["unknown"].append(f"{sp.original} -> {sp.replacement}: {sp.free.detail}")
        else:
            bad = next((p for p in [sp.free, *sp.like.values()] if p.status == "differs"),
                       sp.free)
            out["differs"].append(f"{sp.original} -> {sp.replacement}: {bad.detail}")
            if bad.counterexample is not None:
                out["counterexamples"].append({"structure": f"{sp.original} -> "
                                                            f"{sp.replacement}",
                                               **bad.counterexample})
    out["ranks"] = {k: sorted(v) for k, v in sorted(out["ranks"].items())}
    return out


def check_rules(patterns: Sequence, examples: int = FULL["examples"], seed: int = 0,
                engine: Optional[str] = None, guards: bool = True,
                per_guard: int = FULL["per_guard"], progress: Optional[Callable] = None,
                **kw) -> List[RuleResult]:
    """:func:`check_rule` for every rule of every pattern in ``patterns`` (in
    order); ``progress(pattern, rule)`` is called before each."""
    out = []
    for p in patterns:
        for r in p.rules:
            if progress is not None:
                progress(p, r)
            out.append(check_rule(p, r, examples=examples, seed=seed, engine=engine,
                                  guards=guards, per_guard=per_guard, **kw))
    return out
