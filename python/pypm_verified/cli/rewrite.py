"""``rewrite``: a model rewritten with the rules, checked, saved."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import types
from typing import Dict, Optional, Tuple

from .checks import (_same, check_engine_library, check_html, check_imports, check_model_path,
                     check_patterns, check_undefined_globals, check_writable, load_program,
                     load_rule_specs, read_example_inputs)
from . import heap
from .exitcodes import EXIT_NUMERICS, EXIT_OK, RuleFailure, UsageError, exit_code_table
from .logs import log
from ..errors import first_line
from .output import (_table, load_hint, rich_console, say, status_line, write_html,
                     write_text_atomic)
from .parsing import (_fuel_option, _html_options, _import_option, _int_at_least,
                      _max_memory_option, _verbosity_options, command)
from .timing import benchmark, benchmark_lines

REWRITE_DESCRIPTION = """\
Rewrite a PyTorch model into a faster one with pattern-matching rules whose
matcher is proved correct in Coq, check the numerics, save it.

MODEL is one of (told apart by the file's contents, not its name):
  .pt2        torch.export.save'd ExportedProgram (preferred; carries its
              example inputs)
  .pt / .pth  torch.save'd dict {"model": nn.Module, "example_inputs": tuple}
              (optionally "example_kwargs": dict). Unpickling a module
              RUNS CODE from the file: refused (exit 2) unless you pass
              --allow-pickle, which only a file you trust deserves.
  TorchScript torch.jit.save'd archive, converted with TS2EPConverter; needs
              --example-inputs.
A state_dict alone is refused: it has the weights but not the model.
Nothing in a .pt2 or TorchScript file runs when it is loaded: its pickled
parts are read by the safe unpickler (weights_only), and a module the file
names is imported only if you pass --import MODULE.

Paths, options and rules are checked before the model is loaded. The model
is exported with torch.export and rewritten at the export IR after
run_decompositions({}) (an empty table: functional, with linear, matmul,
softmax, gelu, layer_norm and SDPA intact; a .pt2 saved after it, in the
"ATEN" dialect with no in-place op, is not decomposed again). Rules fire only where their
kernel is faster on --target (by default the device the program's tensors
are on), by the measured thresholds in
python/pypm_verified/torch/profitability.json (read by
python/pypm_verified/torch/profitability.py). Original and rewritten
programs are run on the example inputs and on random inputs of the same
shapes; the output is written (atomically, with torch.export.save) only if
they agree within a dtype-aware tolerance. -o PATH always writes PATH (when
no rule fired: the re-exported program, said unchanged); without -o the
default output is written only if a rule fired (--write-unchanged writes it
anyway). --ignore-profitability lets rules fire whatever the table says
(to see what would fire on a target where it does not pay). The input file
is never modified.
"""

REWRITE_EPILOG = """\
rule library (--rules NAME, repeatable; default: all, in this order):
  gelu       GELU written out (erf, tanh forms)   -> aten.gelu
  rmsnorm    RMSNorm written out (LLaMA, Qwen2)   -> aten.rms_norm
  attention  eager multi-head attention           -> scaled_dot_product_attention
  transpose  matmul(x, y.T), y 2-D (paper Fig.1)  -> aten.linear
  epilogue   linear + relu/gelu/silu              -> pypm.linear_act (fused GEMM)
also by name, not in the default: {extra_modules}
--rules also takes a module path or a .py file defining @pm.pattern/@pm.rule,
and `library` for the whole default library: --rules library --rules mine.py
is the library and your rules (without `library`, yours alone).

loading the output: `import pypm_verified as pm; ep = pm.load(path)` registers
what the file needs (pypm.linear_act from pypm_verified.torch.kernels, model
output types such as transformers'); with torch.export.load directly, `import
pypm_verified.torch.kernels` first.

custom operators: a .pt2 calling torch.ops.NS.* gets NS's library imported
when it is a known one (transformers -> transformers.integrations.moe, e.g.
Mixtral's experts; torchvision; see loader.OP_LIBRARIES); for any other,
--import MODULE (pm.load(path, imports=[MODULE])): a module a file names is
never imported because it does. An operator or output type still
unregistered is exit 2, naming it.

{exit_codes}

PYPM_TRACEBACK=1 prints the traceback behind an error.

example:
  python -m pypm_verified example bert -o bert.pt2
  python -m pypm_verified rewrite bert.pt2 -o bert.fast.pt2 --report report.json
"""


def _configure_rewrite(sub) -> None:
    rw = sub.add_parser("rewrite", help="rewrite a PyTorch model with the rule library",
                        description=REWRITE_DESCRIPTION,
                        epilog=REWRITE_EPILOG.format(exit_codes=exit_code_table(),
                                                     extra_modules=_extra_modules()),
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    rw.add_argument("model", help="model file (see above)")
    rw.add_argument("-o", "--output", help="where to write the rewritten .pt2, always (when no "
                    "rule fired: the program unchanged, re-exported; not when the numerics "
                    "check fails); without -o, MODEL's name with .rewritten.pt2, written only "
                    "if a rule fired")
    rw.add_argument("--target", choices=("cuda", "cpu"), default=None,
                    help="device the rules optimize for (default: the device the program's "
                    "tensors are on; cpu when it has none)")
    rw.add_argument("--engine", choices=("verified", "reference"), default="verified",
                    help="matcher: the Coq-extracted one (default) or the Python reference")
    rw.add_argument("--rules", action="append", metavar="MODULE_OR_FILE",
                    help="rules to apply (repeatable, tried in the order given; default: the "
                    "whole library, which 'library' names: --rules library --rules mine.py "
                    "adds yours to it)")
    rw.add_argument("--ignore-profitability", action="store_true",
                    help="let every rule fire where its other guards hold, whatever the "
                    "measured profitability table says for --target (to see what would fire)")
    rw.add_argument("--max-iterations", "--max-iters", type=_int_at_least(1, "too few"),
                    default=20, metavar="N",
                    help="cap on rewrite passes (default 20; reported if reached)")
    rw.add_argument("--search", choices=("greedy", "beam", "best-first", "astar"),
                    default="greedy",
                    help="how rules are chosen: greedy (default: the first rule whose guards "
                    "pass fires), or beam / best-first search over the driver's choices guided "
                    "by the cost model (pypm_verified.torch.cost); astar: the former, "
                    "deprecated name of best-first (there is no heuristic)")
    rw.add_argument("--search-budget", type=_int_at_least(1, "too few"), default=None,
                    metavar="N", help="beam/best-first: driver runs at most (default 16)")
    rw.add_argument("--beam-width", type=_int_at_least(1, "too few"), default=None,
                    metavar="N", help="beam: states kept per depth (default 4)")
    rw.add_argument("--search-depth", type=_int_at_least(1, "too few"), default=None,
                    metavar="N", help="beam/best-first: firings skipped at most (default 4)")
    rw.add_argument("--search-time", type=float, default=None, metavar="SECONDS",
                    help="beam/best-first: time limit of the search")
    rw.add_argument("--report", metavar="FILE", help="write the report as JSON (atomically); "
                    "'-': on stdout, alone (the tables and results then go to stderr)")
    rw.add_argument("--markdown", metavar="R.md", help="write the report as Markdown "
                    "(atomically): whether the rewrite was validated, the counts, each "
                    "pattern and rule")
    _html_options(rw, "the graph before and after, each match drawn on it (fired in its "
                  "rule's colour, declined dashed, with the reasons), node details on hover")
    rw.add_argument("--random-runs", type=_int_at_least(0, "negative"), default=2, metavar="N",
                    help="random input sets for the numerics check (default 2)")
    rw.add_argument("--no-check", action="store_true", help="skip the numerics check")
    _max_memory_option(rw)
    rw.add_argument("--force", action="store_true",
                    help="write the output even if the numerics check fails or no rule fired")
    rw.add_argument("--write-unchanged", action="store_true",
                    help="write the output even if no rule fired (it is then the re-exported, "
                    "decomposed program, which may differ from the input's graph)")
    rw.add_argument("--dry-run", action="store_true", help="rewrite and check, write nothing "
                    "(but the --report)")
    rw.add_argument("--example-inputs", metavar="FILE",
                    help="torch.save'd tuple of example inputs (TorchScript models)")
    rw.add_argument("--benchmark", action="store_true",
                    help="also time original vs rewritten, eager, interleaved runs: medians, "
                    "spread, and a warning when the spread hides the difference")
    rw.add_argument("--benchmark-runs", type=_int_at_least(3, "too few"), default=21,
                    metavar="N", help="timed runs of each program with --benchmark (default 21)")
    _import_option(rw)
    _fuel_option(rw)
    _verbosity_options(rw, "no progress, tables or notes: errors and the one-line result only")


def _extra_modules() -> str:
    """The library's rule modules outside the default set (its own list)."""
    from ..library import EXTRA_MODULES
    return ", ".join(EXTRA_MODULES)


def _default_output(path: str) -> str:
    root, _ = os.path.splitext(path)
    return root + ".rewritten.pt2"


def program_device(prog) -> Tuple[str, str]:
    """The default target for ``prog`` and why: the device its tensors
    (weights, buffers, constants, example inputs) are on; cpu if none."""
    import torch
    import torch.utils._pytree as pytree
    ep = prog.ep
    tensors = list(getattr(ep, "state_dict", {}).values())
    tensors += list(getattr(ep, "constants", {}).values())
    tensors += pytree.tree_leaves((prog.args, prog.kwargs))
    kinds = sorted({t.device.type for t in tensors if isinstance(t, torch.Tensor)})
    if not kinds:
        return "cpu", "the program has no tensors"
    on = " and ".join(kinds)
    if "cuda" in kinds:
        return "cuda", f"the program's tensors are on {on}"
    if kinds == ["cpu"]:
        return "cpu", "the program's tensors are on cpu"
    return "cpu", f"the program's tensors are on {on}; cpu's thresholds are used"


def _rule_codes(patterns) -> Dict[types.CodeType, object]:
    codes = {}
    for p in patterns:
        for r in getattr(p, "rules", ()):
            for code in r.codes:  # the function and its compiled body
                codes[code] = r
    return codes


def rule_failure(e: BaseException, patterns) -> str:
    """One line for an exception raised while rules were running: which
    rule, where, what."""
    codes = _rule_codes(patterns)
    rule, line, tb = None, None, e.__traceback__
    while tb is not None:
        r = codes.get(tb.tb_frame.f_code)
        if r is not None:
            rule, line = r, tb.tb_lineno
        tb = tb.tb_next
    what = f"{type(e).__name__}: {first_line(e)}"
    if rule is None:
        return f"rewriting failed: {what}"
    return f"rule {rule.name!r} ({rule.where}) failed at line {line}: {what}"


def _changed(res) -> bool:
    """Whether the rewritten graph differs from the loaded one at all (a rule
    fired, or duplicates were merged): ``Result.changed``."""
    ch = getattr(res, "changed", None)
    return bool(ch) if ch is not None else res.report.total > 0 or res.report.merged > 0


@command("rewrite", _configure_rewrite)
def rewrite_main(args, state: dict) -> int:
    """``rewrite``: see :data:`REWRITE_DESCRIPTION`. ``state["written"]``
    lists what was written (for the interrupt message)."""
    import warnings
    with warnings.catch_warnings():
        # torch's own deprecation of its pytree internals, raised while it
        # (un)pickles a program: nothing a user can act on
        warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)")
        return _rewrite(args, state)


def _check_search_options(args) -> None:
    """The search options: budget options only with ``--search
    beam|best-first``, ``--beam-width`` only with beam, no ``--html`` with a
    search (its pictures show one driver run). ``astar``, the former name of
    best-first, is warned about and becomes ``best-first``."""
    if args.search == "astar":
        log.warning("--search astar is deprecated: it runs best-first search on the predicted "
                    "cost (there is no heuristic); use --search best-first")
        args.search = "best-first"
    given = [f for f, v in (("--search-budget", args.search_budget),
                            ("--beam-width", args.beam_width),
                            ("--search-depth", args.search_depth),
                            ("--search-time", args.search_time)) if v is not None]
    if args.search == "greedy" and given:
        raise UsageError(f"{given[0]}: only with --search beam or --search best-first")
    if args.beam_width is not None and args.search != "beam":
        raise UsageError("--beam-width: only with --search beam")
    if args.search_time is not None and not args.search_time > 0:
        raise UsageError(f"--search-time {args.search_time}: give a positive number of seconds")
    if args.search != "greedy" and getattr(args, "html", None):
        raise UsageError(f"--html: not with --search {args.search} (the pictures show a "
                         "greedy run)")


def _search_rewrite(args, prog, patterns, target):
    """``--search beam|best-first``: the driver's choices searched under the
    cost model (:mod:`pypm_verified.torch.search`); the chosen run's result."""
    from ..torch.search import search_program
    s = search_program(prog, patterns, args.search.replace("-", "_"), target=target,
                       engine=args.engine, max_expansions=args.search_budget or 16,
                       beam_width=args.beam_width or 4, max_depth=args.search_depth or 4,
                       time_limit=args.search_time, max_iterations=args.max_iterations,
                       check_profitability=not args.ignore_profitability)
    skipped = ", ".join(f"{r}@{n}" for r, n in sorted(s.skipped)) or "none"
    log.info(f"search: {args.search}, {s.runs} driver run(s)"
             f"{' (budget hit)' if s.budget_hit else ''};"
             f" predicted cost greedy {s.greedy_cost * 1e3:.3f} ms -> {s.cost * 1e3:.3f} ms;"
             f" firings skipped: {skipped}")
    return s.result


def _rewrite(args, state: dict) -> int:
    """The rewrite, top to bottom: every check that needs no model (paths and
    options, then the rules, loaded and linked; then the model's path and
    example inputs: exit 2 or 3 in seconds), then the work (load, rules,
    numerics, save), then what happened (tables, results, ``--report``,
    ``--html``) and the exit code."""
    t0 = time.perf_counter()
    out_path, dot = _check_paths(args)
    with heap.importing():  # torch, the library, the rules: objects that live to the end
        torch = _require_torch()
        patterns = _load_patterns(args)
    _check_model_inputs(args)
    example = read_example_inputs(args, torch)

    quiet = args.verbosity < 0
    console = rich_console(args)  # tables and status: names shown as they are, inert
    timings: Dict[str, float] = {}
    status = status_line(quiet, "loading and exporting")
    with status:
        prog = load_program(args, example)
        timings["load + export"] = time.perf_counter() - t0
        for w in getattr(prog, "warnings", None) or ():
            log.warning("%s", w)
        _check_memory(args, prog)
        target, why = (args.target, "--target") if args.target else program_device(prog)
        if args.ignore_profitability:
            why += "; profitability ignored (--ignore-profitability)"
        status.update(f"rewriting ({len(prog.ep.graph.nodes)} nodes, "
                      f"{len(patterns)} patterns, engine {args.engine}, target {target})")
        t1 = time.perf_counter()
        recorder = _recorder(dot)
        res = _apply_rules(args, prog, patterns, target, recorder)
        timings["rewrite"] = time.perf_counter() - t1
        fired = res.report.total > 0
        changed = _changed(res)
        # -o: always written. Without it, the default output only if a rule
        # fired: else it would be the re-exported, decomposed input
        if not fired and not (args.output or args.write_unchanged or args.force):
            out_path = None
        note = _numerics_not_checked(args, fired, changed, out_path)
        if note is None:
            status.update("checking numerics")
            t2 = time.perf_counter()
            _check_numerics(args, prog, res)
            if res.numerics is not None and not res.numerics.ok:
                status.update("finding the firings the mismatch comes from")
                _blame(args, prog, res, patterns, target)
            timings["check"] = time.perf_counter() - t2
        numerics = res.numerics
        bench = None
        if args.benchmark:
            status.update(f"benchmarking ({args.benchmark_runs} interleaved runs each)")
            bench = _benchmark(args, prog, res, torch)
        wrote = None
        if out_path and (numerics is None or numerics.ok or args.force):
            status.update(f"saving {out_path}")
            t3 = time.perf_counter()
            _save(res.ep, out_path)
            timings["save"] = time.perf_counter() - t3
            wrote = out_path
            state["written"].append(out_path)
    timings["total"] = time.perf_counter() - t0

    if not quiet:
        _table(console, res.report, numerics, timings, wrote, f"{target} ({why})", note,
               res.other_sizes, fired_line=_fired_line(res.report, changed))
        for line in benchmark_lines(bench) if bench else ():
            if line.startswith("warning: "):
                log.warning("%s", line[len("warning: "):])
            else:
                say(args, line)
    say(args, _result_line(args, res, fired, changed, numerics, wrote)
        + _bypass_note(res.report))
    if _declined_note(res.report):
        say(args, _declined_note(res.report))
    if args.report:
        rep = {"model": args.model, "kind": prog.kind, "output": wrote, "target_reason": why,
               "fired": fired, "changed": changed,
               "profitability": not args.ignore_profitability,
               "warnings": list(getattr(prog, "warnings", None) or ()),
               **res.report.as_dict(), "target": target,
               "numerics": numerics.as_dict() if numerics is not None else None,
               "dynamic_sizes_checked": list(res.other_sizes),
               "timings_s": timings, "benchmark": bench}
        _write_report(args, state, rep, wrote)
    if args.markdown:
        _write_markdown(args, state, res.report, wrote)
    if dot:
        _write_html(args, state, dot, prog, res, recorder, wrote)
    return _verdict(args, numerics, wrote)


# ---- the checks that need no model

def _check_paths(args) -> Tuple[Optional[str], Optional[str]]:
    """The paths and options, checked before anything is loaded: the output
    path (None with ``--dry-run``) and ``dot`` for ``--html`` (else None)."""
    out_path = None if args.dry_run else (args.output or _default_output(args.model))
    if out_path:
        if _same(out_path, args.model):
            raise UsageError(f"-o {out_path}: the output would overwrite the input MODEL; "
                             "choose another -o")
        check_writable(out_path, "-o")
    if args.report:
        if _same(args.report, args.model):
            raise UsageError(f"--report {args.report}: would overwrite the input MODEL")
        if out_path and _same(args.report, out_path):
            raise UsageError(f"--report {args.report}: is also the output (-o)")
        if args.report != "-":
            check_writable(args.report, "--report")
    if args.markdown:
        for other, what in ((args.model, "the input MODEL"), (out_path, "the output (-o)"),
                            (args.report, "the --report")):
            if other and other != "-" and _same(args.markdown, other):
                raise UsageError(f"--markdown {args.markdown}: is also {what}")
        check_writable(args.markdown, "--markdown")
    dot = check_html(args, (args.model, "input MODEL"), (out_path, "output (-o)"),
                     (args.report, "--report"), (args.markdown, "--markdown"))
    _check_search_options(args)
    check_imports(args.imports)
    check_engine_library(args.engine)
    return out_path, dot


def _check_model_inputs(args) -> None:
    """MODEL's path and ``--example-inputs``' (after the rules: a mistake in
    a rules file is reported first, then one in the model's files)."""
    check_model_path(args.model)
    if args.example_inputs:
        if not os.path.isfile(args.example_inputs):
            raise UsageError(f"--example-inputs {args.example_inputs}: "
                             + ("is a directory" if os.path.isdir(args.example_inputs)
                                else "no such file"))


def _require_torch():
    try:
        import torch
    except ImportError:
        raise UsageError("PyTorch is not installed; pip install -e '.[torch]' "
                         "-c requirements/constraints.txt") from None
    from ..torch import kernels  # noqa: F401 -- programs may already use pypm ops
    return torch


def _load_patterns(args) -> list:
    """The ``--rules`` (default: the library), loaded, linked into the
    engine and checked: every mistake in them found before the model is
    touched (:func:`.checks.check_patterns`, :func:`.checks.check_undefined_globals`)."""
    from ..library import default_patterns
    if args.rules:
        patterns = load_rule_specs(args.rules)
    else:
        patterns = default_patterns()
    check_patterns(patterns, args.engine)
    check_undefined_globals(patterns)
    return patterns


# ---- the work

def _recorder(dot):
    """``--html``'s recorder of the driver's events (None without it)."""
    if not dot:
        return None
    from ..torch.html import Recorder
    return Recorder()


def _apply_rules(args, prog, patterns, target, recorder):
    """The rules applied (greedy, or ``--search``); RuleFailure (exit 3) if
    a rule raises or builds an invalid replacement."""
    from ..engines.matching import fuel_limit
    from ..torch.driver import RewriteError
    from ..torch.pipeline import rewrite_program
    try:
        with fuel_limit(args.fuel):  # --fuel: every match of the rewrite
            if args.search == "greedy":
                return rewrite_program(prog, patterns, engine=args.engine, target=target,
                                       max_iterations=args.max_iterations, check=False,
                                       observer=recorder,
                                       check_profitability=not args.ignore_profitability)
            return _search_rewrite(args, prog, patterns, target)
    except RewriteError as e:
        raise RuleFailure(f"a rule built an invalid replacement: {e}") from None
    except Exception as e:  # noqa: BLE001 -- a user's rule may raise anything
        raise RuleFailure(rule_failure(e, patterns)) from None


def _numerics_not_checked(args, fired: bool, changed: bool, out_path) -> Optional[str]:
    """Why the numerics are not checked (the summary's note), or None."""
    if args.no_check:
        return "not checked (--no-check)"
    if not changed:
        return "not checked (the graph is unchanged)"
    if not fired and not out_path and not args.dry_run:
        return "not checked (no rule fired, nothing to write)"
    return None


def _check_numerics(args, prog, res) -> None:
    """``res.numerics`` and ``res.other_sizes``: original and rewritten
    programs compared; RuleFailure if the rewritten one does not run."""
    from ..torch.check import OriginalFailed
    from ..torch.memory import MemoryLimitExceeded
    from ..torch.pipeline import check_numerics
    try:
        res.numerics, res.other_sizes = check_numerics(prog, res.ep, n_random=args.random_runs,
                                                       max_memory=_memory_limit(args))
    except MemoryLimitExceeded as e:
        raise UsageError(_over_limit(args, e)) from None
    except OriginalFailed as e:  # its own failure, not the rules': exit 2
        raise UsageError(str(e) + ("; --random-runs 0 checks on the sample inputs only"
                                   if e.run else "")) from None
    except Exception as e:  # noqa: BLE001
        raise RuleFailure("the rewritten program fails to run on the example inputs: "
                          f"{type(e).__name__}: {first_line(e)}") from None


def _blame(args, prog, res, patterns, target) -> None:
    """On a numerics mismatch: ``res.numerics.blame``, the firings it comes
    from (:func:`pypm_verified.torch.check.blame`: bisected over the
    firings, each subset re-applied and run with torch on the inputs that
    failed), with their rules' files and lines."""
    from ..torch.check import blame
    from ..engines.matching import fuel_limit
    try:
        with fuel_limit(args.fuel):
            b = blame(prog, patterns, [(r, o) for r, o, _ in res.report.rewrites],
                      runs=res.numerics.failed_runs, engine=args.engine, target=target,
                      check_profitability=not args.ignore_profitability,
                      max_iterations=args.max_iterations)
    except Exception as e:  # noqa: BLE001 -- a diagnosis: never in the way of the verdict
        res.numerics.blame = [f"the firings could not be bisected: {type(e).__name__}: "
                              f"{first_line(e)}"]
        return
    res.numerics.blame = b.lines()


def _memory_limit(args) -> Optional[int]:
    """``--max-memory`` in bytes (None: no limit; not given: the default,
    min(16 GiB, half the physical memory))."""
    from ..torch.memory import default_limit
    if args.max_memory is None:
        return default_limit()
    return args.max_memory or None


def _over_limit(args, e) -> str:
    """The one line of a run refused by ``--max-memory``."""
    from ..torch.memory import format_size
    default = " (the default: half the physical memory, at most 16G)" \
        if args.max_memory is None else ""
    return e.line(f"--max-memory {format_size(e.limit)}{default}; --max-memory SIZE raises "
                  "it, 0 or none lifts it")


def _check_memory(args, prog, new_ep=None) -> None:
    """Right after loading (and before ``--benchmark`` runs the rewritten
    program ``new_ep``): refuse (exit 2) a run of the program on its sample
    inputs that would need more than ``--max-memory``, by
    :func:`pypm_verified.torch.memory.estimate_run_bytes`. Only when
    something will run it: the numerics check or ``--benchmark``."""
    if args.no_check and not args.benchmark:
        return
    from ..torch.check import check_run_limit
    from ..torch.memory import MemoryLimitExceeded
    try:  # the original alone first; the rewritten one with the original's outputs
        check_run_limit(prog.ep, new_ep, prog.args, prog.kwargs, _memory_limit(args))
    except MemoryLimitExceeded as e:
        raise UsageError(_over_limit(args, e)) from None


def _benchmark(args, prog, res, torch) -> dict:
    _check_memory(args, prog, res.ep)
    a_mod, b_mod = prog.ep.module(), res.ep.module()
    with torch.no_grad():
        return benchmark(lambda: a_mod(*prog.args, **prog.kwargs),
                         lambda: b_mod(*prog.args, **prog.kwargs),
                         rounds=args.benchmark_runs)


def _save(ep, out_path: str) -> None:
    from ..torch.pipeline import save_atomic
    try:
        save_atomic(ep, out_path)
    except InterruptedError:  # a signal during the save; the temporary is gone
        raise KeyboardInterrupt from None
    except OSError as e:
        raise UsageError(f"-o {out_path}: cannot write it: {e.strerror or e}") from None


# ---- what happened

def _fired_line(report, changed: bool) -> str:
    """The summary's "fired" row: how many rewrites, by which rules."""
    if report.total:
        return f"{report.total} rewrite(s): " + ", ".join(
            f"{r} x{n}" for r, n in sorted(report.firings.items()))
    return "nothing fired" + ("" if changed else " (the program is unchanged)")


def _result_line(args, res, fired: bool, changed: bool, numerics, wrote) -> str:
    """The one line that says what happened (shown with ``-q`` too)."""
    if fired:
        what = _fired_line(res.report, changed)
        check = ("" if numerics is None else "; numerics ok" if numerics.ok
                 else "; numerics MISMATCH")
        where = (f"; wrote {wrote}" if wrote else "; not written (--dry-run)" if args.dry_run
                 else "; not written")
        return f"fired {what}{check}{where}"
    what = "the program is unchanged" if not changed else (
        f"the re-export only merged {res.report.merged} duplicate node(s)")
    if wrote and (args.write_unchanged or args.force):
        return (f"no rule fired ({what}): wrote the re-exported program anyway "
                f"({'--write-unchanged' if args.write_unchanged else '--force'})")
    if wrote:
        return f"no rule fired ({what}): wrote it to {wrote} as re-exported (-o always writes)"
    if args.dry_run:
        return f"no rule fired: {what}"
    if numerics is not None and not numerics.ok:
        return f"no rule fired: {what}; not written"
    return (f"no rule fired: {what}; nothing written (-o PATH or --write-unchanged writes "
            "the re-exported program anyway)")


def _declined_note(report) -> str:
    """The line after the result line when a pattern matched and its rules
    all declined there ("matched, declined: Attention x1 (sdpa: REASON)";
    shown with ``-q`` too); "" when every match fired."""
    d = report.declined_summary()
    return f"matched, declined: {d}" if d else ""


def _bypass_note(report) -> str:
    """What the result line adds when the rewrite was not validated
    ("; not validated: REASON"; shown with ``-q`` too); "" when it was (the
    summary's "validation" row says "validated (N passes)")."""
    v = report.validation
    return "" if v.validated else f"; {v}"


def _write_report(args, state: dict, rep: dict, wrote) -> None:
    """``--report``: the JSON, atomically (``-``: on stdout)."""
    if args.report == "-":
        sys.stdout.write(json.dumps(rep, indent=2) + "\n")
        sys.stdout.flush()
        return
    try:
        write_text_atomic(json.dumps(rep, indent=2) + "\n", args.report)
    except OSError as e:
        raise UsageError(f"--report {args.report}: cannot write it: {e.strerror or e}"
                         + (f" ({wrote} was written)" if wrote else "")) from None
    state["written"].append(args.report)


def _write_markdown(args, state: dict, report, wrote) -> None:
    """``--markdown``: :meth:`RewriteReport.markdown`, atomically, made
    inert (names from a rules file are shown, never run by a terminal)."""
    from .text import printable
    text = printable(report.markdown(f"rewrite {os.path.basename(args.model)}"), lines=True)
    try:
        write_text_atomic(text, args.markdown)
    except OSError as e:
        raise UsageError(f"--markdown {args.markdown}: cannot write it: {e.strerror or e}"
                         + (f" ({wrote} was written)" if wrote else "")) from None
    state["written"].append(args.markdown)


def _write_html(args, state: dict, dot, prog, res, recorder, wrote) -> None:
    from ..torch.html import rewrite_page
    numerics = res.numerics
    info = {"numerics": ("not checked" if numerics is None else "ok" if numerics.ok
                         else "MISMATCH"), "output": wrote or "(not written)"}
    write_html(args, state, rewrite_page, before_ep=prog.ep, after_ep=res.ep,
               report=res.report, recorder=recorder, dot=dot, info=info,
               title=f"rewrite {os.path.basename(args.model)}")


def _verdict(args, numerics, wrote) -> int:
    """The exit code: 1 on a numerics mismatch (unless ``--force`` wrote it)."""
    if numerics is not None and not numerics.ok:
        for msg in numerics.failures[:5]:
            log.error("numerics: %s", msg, extra={"plain": True})
        for msg in numerics.blame:
            log.error("blame: %s", msg, extra={"plain": True})
        if args.force and wrote:
            log.warning("numerics check failed; wrote the output anyway (--force)")
            return EXIT_OK
        log.error("the rewritten program disagrees with the original beyond the tolerance; "
                  "nothing written (--force writes it anyway)")
        return EXIT_NUMERICS
    if wrote and args.verbosity >= 0:
        say(args, load_hint(wrote))
    return EXIT_OK
