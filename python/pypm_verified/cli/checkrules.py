"""``check-rules``: the rules checked on generated PyTorch subgraphs."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Dict, Optional, Sequence, Tuple

from .checks import (_same, check_engine_library, check_patterns, check_undefined_globals,
                     check_writable, load_rule_specs)
from . import heap
from .exitcodes import (EXIT_INPUT, EXIT_INTERRUPTED, EXIT_OK, EXIT_RULE, EXIT_TERMINATED,
                        RuleFailure, UsageError, exit_code_table)
from ..errors import first_line
from .output import write_text_atomic
from .logs import log
from .output import say
from .text import printable
from .parsing import _int_at_least, _share, _verbosity_options, command, executor_options

CHECK_RULES_EXIT_CODES = (
    (EXIT_OK, "every rule proved or tested: no counterexample in the generated instances"),
    (1, "a rule is refuted (a counterexample), vacuous (its guards admit no generated "
        "instance) or degenerate (it fired only where an axis its pattern reads says "
        "nothing); the reports are written"),
    (EXIT_INPUT, "bad input: an option, a path or a rules module is wrong, or z3 (the "
                 "check extra) is not installed; --no-symbolic needs no z3"),
    (EXIT_RULE, "a rule uses a name its module does not define (found before checking)"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C)"),
    (EXIT_TERMINATED, "terminated (SIGTERM)"),
)
EXIT_REFUTED = 1

#: the one line check-rules says when z3 (the ``check`` extra) is missing
Z3_MISSING = ("check-rules proves the rules with z3, which is not installed: pip install "
              "'pypm_verified[check]' -c requirements/constraints.txt (or pass --no-symbolic "
              "to test the rules without the proofs)")
#: the same, when the instance generator itself needed z3 under --no-symbolic
Z3_NEEDED = ("check-rules needs z3 for rule {rule!r} (its size equations are solved with "
             "it), which is not installed: pip install 'pypm_verified[check]' "
             "-c requirements/constraints.txt")


def z3_installed() -> bool:
    """Whether z3 (the ``check`` extra) can be imported."""
    try:
        import z3  # noqa: F401
    except ImportError:
        return False
    return True


def _z3_missing_in(e: BaseException) -> bool:
    """Whether a failed task (:class:`~pypm_verified.parallel.TaskFailed`)
    failed because z3 could not be imported (its exception, or in a worker
    the text ``ModuleNotFoundError: ... z3 ...``)."""
    inner = e.__cause__
    if isinstance(inner, ModuleNotFoundError):
        return inner.name == "z3"
    cause = str(getattr(e, "cause", ""))
    return cause.startswith("ModuleNotFoundError") and "'z3'" in cause


CHECK_RULES_DESCRIPTION = """\
Check every @pm.rule of the rule library (or of --rules) on PyTorch subgraphs
generated from its pattern: every alternate, operator-variable choice and
recursion depth up to a bound, with ranks, sizes (1 included, as an edge
case: the sizes the guards and the rule's asserts compare are tied before
they are drawn), dtypes (float32/64, float16, bfloat16, int64), broadcast
operands, constants drawn from what the guards plausibly admit, and input
values now normal, now rows nearly constant along a reduced axis, zeros,
negative, large or small. Each instance runs through the real matcher and
the rewrite driver (profitability off), and the original and rewritten
subgraphs are compared per output dtype relative to the output's magnitude:
|got - ref| <= atol * max|ref| + rtol * |ref| (float32: 1e-4, 1e-3;
float16: 1e-2, 1e-2; bfloat16: 5e-2, 5e-2; float64: 1e-9, 1e-7). Each
structure the rule fired on (the subgraph and its
replacement, input ranks fixed, sizes free) is then proved equal over the
reals for every size with z3, from an index-level semantics of the ATen ops
(pypm_verified/checking/smt.py). Each rule is reported:

  proved    tested, and every structure it fired on proved over the reals
            for every size (the structures generated: input ranks up to 4)
  tested    no counterexample in N instances the rule fired on (the
            summary says which structures were proved, and why not others)
  refuted   a counterexample: the subgraph, input shapes, dtypes and
            values, constants, the error (shrunk to small sizes); --repro
            writes it as a Python file that runs it with torch alone
  vacuous   no generated instance was matched and accepted by the rule
  degenerate the rule fired, but only on instances where an axis its
            pattern reduces, normalizes, softmaxes or contracts has size 1
            (or constant inputs along it): they cannot tell a right rule
            from a wrong one there; the reason names the axis

For a tested rule, each guard (each assert of the rule, each conjunct of its
pattern's guards) is dropped in turn to look for the counterexample it
excludes ("necessary") or find it changed nothing ("redundant"; or
"inconclusive" when the rule without it fired only on degenerate instances).

"tested" is evidence, not proof; "proved" is over the reals (floating-point
rounding of the two sides still differs) and for the structures generated.
"""


def _configure_check_rules(sub) -> None:
    cr = sub.add_parser("check-rules", help="check the rules on generated instances",
                        description=CHECK_RULES_DESCRIPTION,
                        epilog=exit_code_table(codes=CHECK_RULES_EXIT_CODES) + """

example:
  python -m pypm_verified check-rules --fast
  python -m pypm_verified check-rules --rules my_rules.py --report rules.json
""", formatter_class=argparse.RawDescriptionHelpFormatter)
    cr.add_argument("--rules", action="append", metavar="MODULE_OR_FILE",
                    help="rules to check (repeatable; default: the whole library, which "
                    "'library' names: --rules library --rules mine.py checks both)")
    cr.add_argument("--report", metavar="R.json", help="write the results as JSON ('-': on "
                    "stdout, alone; the table then goes to stderr)")
    cr.add_argument("--markdown", metavar="R.md", help="write the results as Markdown")
    cr.add_argument("--repro", metavar="DIR",
                    help="write each refuted rule's counterexample as DIR/repro_<rule>.py, a "
                    "Python program that rebuilds its inputs, runs the subgraph and the "
                    "rule's replacement with torch and prints the difference (exit 1: "
                    "they differ)")
    cr.add_argument("--examples", type=_int_at_least(1, "too few"), metavar="N",
                    help="instances each rule must fire on (default 200; --fast: 12)")
    cr.add_argument("--seed", type=int, default=0, metavar="S",
                    help="random seed (default 0; the same seed draws the same instances)")
    cr.add_argument("--fast", action="store_true",
                    help="CI mode: 12 instances per rule, no guard necessity")
    cr.add_argument("--guard-examples", type=_int_at_least(0, "negative"), metavar="N",
                    help="violating instances tried per guard (default 24; 0: no guard "
                    "necessity)")
    cr.add_argument("--no-guards", action="store_true", help="skip guard necessity")
    cr.add_argument("--no-symbolic", action="store_true",
                    help="skip the symbolic proofs (z3, the check extra; not needed then): "
                    "rules are then at best tested")
    cr.add_argument("--engine", choices=("verified", "reference"), default=None,
                    help="matcher (default: verified when the engine library is built, else "
                    "reference)")
    cr.add_argument("--special-values", type=_share, default=0.0, metavar="P",
                    help="share of instances whose inputs also hold NaN, +-inf, +-0.0, "
                    "+-100 (integers: their extremes), signed zeros compared (default 0)")
    cr.add_argument("--dtype-hints", action="store_true",
                    help="half the instances in a dtype the rule's source names (so "
                    "integer- or bool-only rules fire)")
    executor_options(cr, "checks (one task per rule, then one per structure to prove)")
    _verbosity_options(cr, "no progress: the table and the one-line summary only")


#: the patterns of each ``--rules`` list (None: the library) loaded in this
#: process: a worker loads them once, the serial run reuses the CLI's
_PATTERNS: Dict[Optional[Tuple[str, ...]], list] = {}


def _patterns(specs: Optional[Sequence[str]]) -> list:
    key = tuple(specs) if specs else None
    if key not in _PATTERNS:
        if key is None:
            from ..library import default_patterns
            _PATTERNS[key] = default_patterns()
        else:
            _PATTERNS[key] = load_rule_specs(key)
    return _PATTERNS[key]


def check_rule_task(specs: Optional[Sequence[str]], pattern: int, rule: int, kw: dict,
                    verbosity: int = 0):
    """A task of check-rules' first phase:
    :func:`~pypm_verified.checking.check_rule_instances` of rule ``rule`` of
    pattern ``pattern`` of the patterns ``specs`` (the ``--rules``
    arguments, files as absolute paths; None: the library): the instance
    search and the guards, with the structures to prove. Deterministic: its
    seed is the run's and the rule's name. ``verbosity`` < 0 (``-q``): no
    progress line (a worker does not share the CLI's log level)."""
    from ..checking import check_rule_instances
    p = _patterns(specs)[pattern]
    r = p.rules[rule]
    if verbosity >= 0:
        log.info("checking %s (pattern %s) ...", r.name, p.name)
    return check_rule_instances(p, r, **kw)


def prove_structure_task(specs: Optional[Sequence[str]], pattern: int, rule: int,
                         engine: str, structure):
    """A task of check-rules' second phase:
    :func:`~pypm_verified.checking.prove_structure` of one structure of rule
    ``rule`` of pattern ``pattern`` (as :func:`check_rule_task` names them)."""
    from ..checking import prove_structure
    p = _patterns(specs)[pattern]
    return prove_structure(p, p.rules[rule], engine, structure)


def run_check_rules(ex, specs: Optional[Sequence[str]], kw: dict, verbosity: int = 0,
                    progress: bool = True) -> Tuple[list, dict]:
    """Check every rule of the patterns ``specs`` on the executor ``ex``
    (:mod:`pypm_verified.parallel`; the serial run is the one-process
    executor): one task per rule (:func:`check_rule_task`), then one per
    structure the tested rules fired on (:func:`prove_structure_task`), then
    each rule's result merged here in the rules' order
    (:func:`~pypm_verified.checking.finish_rule`). ``(results, tasks)``:
    ``tasks`` counts the tasks of each phase and sums up their times.
    :class:`~pypm_verified.parallel.TaskFailed` names the rule of a failed
    task."""
    from ..checking import finish_rule
    patterns = _patterns(specs)
    index = [(i, j) for i, p in enumerate(patterns) for j in range(len(p.rules))]
    names = [patterns[i].rules[j].name for i, j in index]
    phases = ex.run(check_rule_task, [(specs, i, j, kw, verbosity) for i, j in index],
                    labels=names, progress=progress, what="check-rules: instances")
    todo = [(n, s) for n, ph in enumerate(phases) for s in ph.structures]
    proofs = ex.run(prove_structure_task,
                    [(specs, *index[n], phases[n].result.engine, s) for n, s in todo],
                    labels=[names[n] for n, _ in todo], progress=progress and bool(todo),
                    what="check-rules: proofs")
    by_rule: Dict[int, list] = {}
    for (n, _), sp in zip(todo, proofs):
        by_rule.setdefault(n, []).append(sp)
    results = [finish_rule(ph, by_rule.get(n, [])) for n, ph in enumerate(phases)]
    tasks = {"rules": len(phases), "structures": len(todo),
             "seconds": {"rules": _stats([ph.result.seconds for ph in phases]),
                         "structures": _stats([sp.seconds for sp in proofs])}}
    return results, tasks


def _stats(xs: Sequence[float]) -> dict:
    """Median, largest and total of task times (seconds)."""
    import statistics
    if not xs:
        return {"median": 0.0, "max": 0.0, "total": 0.0}
    return {"median": statistics.median(xs), "max": max(xs), "total": sum(xs)}


def _rule_specs(specs):
    """``--rules`` with files made absolute (a worker may run elsewhere)."""
    if not specs:
        return None
    return tuple(os.path.abspath(s) if (s.endswith(".py") or os.sep in s)
                 and os.path.isfile(s) else s for s in specs)


@command("check-rules", _configure_check_rules)
def check_rules_main(args, state: dict) -> int:
    """``check-rules``: see :data:`CHECK_RULES_DESCRIPTION`."""
    t0 = time.perf_counter()
    for path, what in ((args.report, "--report"), (args.markdown, "--markdown")):
        if path and not (what == "--report" and path == "-"):
            check_writable(path, what)
    if args.report and args.markdown and _same(args.report, args.markdown):
        raise UsageError(f"--markdown {args.markdown}: is also the --report")
    if args.repro:
        if os.path.exists(args.repro) and not os.path.isdir(args.repro):
            raise UsageError(f"--repro {args.repro}: not a folder")
        try:
            os.makedirs(args.repro, exist_ok=True)
        except OSError as e:
            raise UsageError(f"--repro {args.repro}: cannot create it: "
                             f"{e.strerror or e}") from None
    check_engine_library(args.engine)
    with heap.importing():  # torch's objects live to the end
        try:
            import torch  # noqa: F401
        except ImportError:
            raise UsageError("PyTorch is not installed; pip install -e '.[torch]' "
                             "-c requirements/constraints.txt") from None
    if not args.no_symbolic and not z3_installed():
        raise UsageError(Z3_MISSING)
    from ..checking import FAST, FULL, default_engine, markdown, summary_lines
    from ..checking.report import repro_path, repro_source
    from ..parallel import RayUnavailable, TaskFailed, executor
    specs = _rule_specs(args.rules)
    if specs:  # loaded as given (messages name the paths given), kept for the tasks
        _PATTERNS[specs] = load_rule_specs(args.rules)
    patterns = _patterns(specs)
    check_patterns(patterns, args.engine or default_engine())
    check_undefined_globals(patterns)
    mode = FAST if args.fast else FULL
    examples = args.examples or mode["examples"]
    per_guard = 0 if args.no_guards else (
        args.guard_examples if args.guard_examples is not None else mode["per_guard"])
    engine = args.engine or default_engine()
    kw = dict(examples=examples, seed=args.seed, engine=engine, guards=per_guard > 0,
              per_guard=per_guard, symbolic=not args.no_symbolic,
              special_values=args.special_values, dtype_hints=args.dtype_hints)
    rules: Dict[str, object] = {}
    for r in (r for p in patterns for r in p.rules):
        rules.setdefault(r.name, r)
    try:
        ex = executor(jobs=args.jobs, ray=args.ray)
    except RayUnavailable as e:
        raise UsageError(f"--ray: {e}") from None
    with ex:
        try:
            results, tasks = run_check_rules(ex, specs, kw, args.verbosity,
                                             progress=args.verbosity >= 0)
        except TaskFailed as e:  # a rule module may break the checker
            r = rules[e.label]
            if _z3_missing_in(e):
                raise UsageError(Z3_NEEDED.format(rule=r.name)) from None
            raise RuleFailure(f"checking rule {r.name!r} ({r.where}) failed: "
                              f"{first_line(e.cause)}") from None
    run = {**ex.describe(), "tasks": tasks}
    repros = []
    if args.repro:
        for r in results:
            src = repro_source(r) if r.status == "refuted" else None
            if src is None:
                continue
            path = repro_path(args.repro, r.rule)
            try:
                write_text_atomic(src, path)
            except OSError as e:
                raise UsageError(f"--repro {args.repro}: cannot write {path}: "
                                 f"{e.strerror or e}") from None
            repros.append(path)
            state["written"].append(path)
    for line in summary_lines(results, repro=args.repro):
        say(args, line)
    for path in repros:
        say(args, f"wrote {path} (run: python {path})")
    if args.repro and not repros:
        say(args, f"--repro {args.repro}: no rule refuted, nothing written")
    seconds = time.perf_counter() - t0
    counts = {s: sum(r.status == s for r in results) for s in ("proved", "tested", "refuted",
                                                                "vacuous", "degenerate")}
    say(args, f"{len(results)} rule(s): "
        + ", ".join(f"{v} {k}" for k, v in counts.items() if v)
        + f" ({seconds:.1f} s, engine {engine}, seed {args.seed}, "
        + f"{'fast' if args.fast else 'full'} mode{_executor_line(run)})")
    if args.report:
        doc = {"mode": "fast" if args.fast else "full", "examples": examples,
               "guard_examples": per_guard, "seed": args.seed, "engine": engine,
               "summary": counts, "seconds": seconds, "executor": run,
               "rules": [r.as_dict() for r in results]}
        if args.report == "-":
            sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        else:
            try:
                write_text_atomic(json.dumps(doc, indent=2) + "\n", args.report)
            except OSError as e:
                raise UsageError(f"--report {args.report}: cannot write it: "
                                 f"{e.strerror or e}") from None
            state["written"].append(args.report)
    if args.markdown:
        pre = (f"`python -m pypm_verified check-rules` ({'fast' if args.fast else 'full'} "
               f"mode: {examples} instances per rule, {per_guard} per guard; seed "
               f"{args.seed}, engine {engine}; {seconds:.0f} s). Summary: "
               + ", ".join(f"{v} {k}" for k, v in counts.items() if v) + ". What the "
               "statuses mean and what \"tested\" does not guarantee: "
               "docs/guides/check-rules.md.")
        try:
            # inert: a rule's source or a counterexample may hold control
            # characters, and a Markdown file is read with cat too
            write_text_atomic(printable(markdown(results, "Rule checks (check-rules)", pre),
                                        lines=True), args.markdown)
        except OSError as e:
            raise UsageError(f"--markdown {args.markdown}: cannot write it: "
                             f"{e.strerror or e}") from None
        state["written"].append(args.markdown)
    return EXIT_OK if all(r.ok for r in results) else EXIT_REFUTED


def _executor_line(run: dict) -> str:
    """How the rules ran, for the summary line ("" when serial)."""
    if run["kind"] == "serial":
        return ""
    line = f"; {run['kind']}, {run['workers']} worker(s)"
    return line + (f", {run['retries']} task(s) retried after a worker died"
                   if run["retries"] else "")
