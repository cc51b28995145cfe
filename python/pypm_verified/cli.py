"""The command line: ``python -m pypm_verified COMMAND ...``.

Commands (one function each, registered in :data:`COMMANDS`):

  rewrite MODEL -o OUT.pt2   rewrite a PyTorch model with the rule library
                             (or your rules), check the numerics, save it.
  check-rules                check the rules on PyTorch subgraphs generated
                             from their patterns (tested / refuted / vacuous;
                             its exit codes are in `check-rules --help`).
  explain MODEL --pattern P  why pattern P does not match (at --node, or the
                             near misses over the model).

Every path and every rule is checked before the model is loaded, so a
mistake costs a second, not an export; each problem is one line on stderr
(``PYPM_TRACEBACK=1`` adds the traceback) and one of these exit codes:

exit codes:
  0    ok: rewritten and saved (or nothing to save: --dry-run, no rule fired)
  1    numerics mismatch: the rewritten program disagrees with the original;
       the output is not written (--force writes it anyway)
  2    bad input: an option, a path, a model file or a rules module is wrong,
       or a program an option needs is missing (Graphviz's dot for --html);
       nothing is written
  3    a rule failed: it raised, used an undefined name or built an invalid
       replacement; nothing is written
  130  interrupted (Ctrl-C); nothing written
  143  terminated (SIGTERM); nothing written
"""
from __future__ import annotations

import argparse
import builtins
import dis
import json
import os
import signal
import statistics
import sys
import tempfile
import time
import traceback
import types
from typing import Callable, Dict, List, Optional, Sequence, Tuple

EXIT_OK, EXIT_NUMERICS, EXIT_INPUT, EXIT_RULE = 0, 1, 2, 3
EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143

#: (code, meaning): the table of exit codes, printed by ``--help`` and in
#: the module docstring and the README (tests/test_cli.py checks all three)
EXIT_CODES = (
    (EXIT_OK, "ok: rewritten and saved (or nothing to save: --dry-run, no rule fired)"),
    (EXIT_NUMERICS, "numerics mismatch: the rewritten program disagrees with the original; "
                    "the output is not written (--force writes it anyway)"),
    (EXIT_INPUT, "bad input: an option, a path, a model file or a rules module is wrong, "
                 "or a program an option needs is missing (Graphviz's dot for --html); "
                 "nothing is written"),
    (EXIT_RULE, "a rule failed: it raised, used an undefined name or built an invalid "
                "replacement; nothing is written"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C); nothing written"),
    (EXIT_TERMINATED, "terminated (SIGTERM); nothing written"),
)


def exit_code_table(width: int = 79, codes=None) -> str:
    """The exit-code table (``codes``, default :data:`EXIT_CODES`) as ``--help``
    and the module docstring show it."""
    import textwrap
    lines = ["exit codes:"]
    for code, text in (EXIT_CODES if codes is None else codes):
        lines.extend(textwrap.wrap(text, width=width, initial_indent=f"  {code:<5}",
                                   subsequent_indent=" " * 7))
    return "\n".join(lines)


class UsageError(Exception):
    """Bad input found before any work: exit 2, one line."""


class RuleFailure(Exception):
    """A rule is broken or raised: exit 3, one line."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that every cleanup path runs."""


# ------------------------------------------------------------------ parser

class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (and exit code 2)."""

    def error(self, message):
        self.exit(EXIT_INPUT, f"error: {message} (see `{self.prog} --help`)\n")


def _int_at_least(lo: int, what: str):
    def parse(s: str) -> int:
        try:
            v = int(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{s!r} is not an integer") from None
        if v < lo:
            raise argparse.ArgumentTypeError(f"{v} is {what}; give {lo} or more")
        return v
    return parse


COMMANDS: Dict[str, Tuple[Callable, Callable]] = {}  # name -> (configure, run)


def command(name: str, configure: Callable):
    """Register a subcommand: ``configure(subparsers)`` adds its parser, the
    decorated ``run(args, state) -> exit code`` runs it (``state["written"]``:
    the files it wrote, for the message if it is interrupted)."""
    def deco(run):
        COMMANDS[name] = (configure, run)
        return run
    return deco


def parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="python -m pypm_verified", description="pypm_verified command line",
                 epilog=exit_code_table(), formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND",
                            parser_class=_Parser)
    for configure, _ in COMMANDS.values():
        configure(sub)
    return ap


# ----------------------------------------------------------------- rewrite

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
they agree within a dtype-aware tolerance, and only if a rule fired
(--write-unchanged writes the re-exported program anyway). The input file
is never modified.
"""

REWRITE_EPILOG = """\
rule library (--rules NAME, repeatable; default: all, in this order):
  gelu       GELU written out (erf, tanh forms)   -> aten.gelu
  rmsnorm    RMSNorm written out (LLaMA, Qwen2)   -> aten.rms_norm
  attention  eager multi-head attention           -> scaled_dot_product_attention
  transpose  matmul(x, y.T), y 2-D (paper Fig.1)  -> aten.linear
  epilogue   linear + relu/gelu/silu              -> pypm.linear_act (fused GEMM)
--rules also takes a module path or a .py file defining @pm.pattern/@pm.rule.

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
  python examples/models.py bert -o bert.pt2
  python -m pypm_verified rewrite bert.pt2 -o bert.fast.pt2 --report report.json
"""


def _configure_rewrite(sub) -> None:
    rw = sub.add_parser("rewrite", help="rewrite a PyTorch model with the rule library",
                        description=REWRITE_DESCRIPTION,
                        epilog=REWRITE_EPILOG.format(exit_codes=exit_code_table()),
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    rw.add_argument("model", help="model file (see above)")
    rw.add_argument("-o", "--output", help="where to write the rewritten .pt2 "
                    "(default: MODEL's name with .rewritten.pt2)")
    rw.add_argument("--target", choices=("cuda", "cpu"), default=None,
                    help="device the rules optimize for (default: the device the program's "
                    "tensors are on; cpu when it has none)")
    rw.add_argument("--engine", choices=("verified", "reference"), default="verified",
                    help="matcher: the Coq-extracted one (default) or the Python reference")
    rw.add_argument("--rules", action="append", metavar="MODULE_OR_FILE",
                    help="rules to apply (repeatable; default: the whole library)")
    rw.add_argument("--max-iterations", "--max-iters", type=_int_at_least(1, "too few"),
                    default=20, metavar="N",
                    help="cap on rewrite passes (default 20; reported if reached)")
    rw.add_argument("--search", choices=("greedy", "beam", "astar"), default="greedy",
                    help="how rules are chosen: greedy (default: the first rule whose guards "
                    "pass fires), or beam / A* search over the driver's choices guided by the "
                    "cost model (pypm_verified.torch.cost)")
    rw.add_argument("--search-budget", type=_int_at_least(1, "too few"), default=None,
                    metavar="N", help="beam/astar: driver runs at most (default 16)")
    rw.add_argument("--beam-width", type=_int_at_least(1, "too few"), default=None,
                    metavar="N", help="beam: states kept per depth (default 4)")
    rw.add_argument("--search-depth", type=_int_at_least(1, "too few"), default=None,
                    metavar="N", help="beam/astar: firings skipped at most (default 4)")
    rw.add_argument("--search-time", type=float, default=None, metavar="SECONDS",
                    help="beam/astar: time limit of the search")
    rw.add_argument("--report", metavar="FILE", help="write the report as JSON (atomically)")
    _html_options(rw, "the graph before and after, each match drawn on it (fired in its "
                  "rule's colour, declined dashed, with the reasons), node details on hover")
    rw.add_argument("--random-runs", type=_int_at_least(0, "negative"), default=2, metavar="N",
                    help="random input sets for the numerics check (default 2)")
    rw.add_argument("--no-check", action="store_true", help="skip the numerics check")
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
    rw.add_argument("-q", "--quiet", action="store_true", help="no progress, summary only")


def _import_option(ap) -> None:
    """``--import MODULE`` and ``--allow-pickle``: what loading the model
    may run (nothing from the file without them)."""
    ap.add_argument("--import", action="append", dest="imports", metavar="MODULE",
                    help="import MODULE before loading the model (repeatable): the library "
                    "that registers a custom operator or a pytree type the program uses "
                    "(known ones are imported without it, e.g. transformers.integrations.moe "
                    "for torch.ops.transformers.*; a module a file names is never imported "
                    "otherwise), or that defines a pickled model's class")
    ap.add_argument("--allow-pickle", action="store_true",
                    help="let loading use Python's full unpickler, which RUNS CODE from the "
                    "file: needed for a torch.save'd nn.Module (and a .pt2 whose pickled "
                    "parts hold more than tensors); without it such a file is refused "
                    "(exit 2). Only for files you trust")


#: the most steps ``--fuel`` takes (the engines' fuel is a 63-bit integer)
MAX_FUEL = (1 << 62) - 1


def _fuel(s: str) -> int:
    v = _int_at_least(1, "too little")(s)
    if v > MAX_FUEL:
        raise argparse.ArgumentTypeError(f"{v} is too much; give at most {MAX_FUEL}")
    return v


def _fuel_option(ap) -> None:
    ap.add_argument("--fuel", type=_fuel, default=None, metavar="N",
                    help="machine steps one match may take before it is left undecided "
                    "(a positive integer; default 1<<26): a pattern that runs out of it is "
                    "reported, naming the pattern and the node")


def check_engine_library(engine: Optional[str]) -> None:
    """``--engine verified``: UsageError (exit 2, before any work) unless its
    library (``$PYPM_VERIFIED_LIB`` or the built one) loads and reads this
    package's format."""
    if engine != "verified":
        return
    from .engines import binding
    from .errors import EngineUnavailable
    try:
        binding.open_library()
    except EngineUnavailable as e:
        raise UsageError(f"--engine verified: {e}".replace(
            "engine='reference' needs no library", "--engine reference needs no library")) \
            from None
    except Exception as e:  # noqa: BLE001 -- a library that is not ours (missing symbols)
        raise UsageError(f"--engine verified: cannot use {binding.library_path()}: "
                         f"{type(e).__name__}: {_first_line(e)} (not a pypm_verified engine "
                         "library?); rebuild it with `make lib`, or point "
                         f"{binding.ENV_VAR} at it (--engine reference needs no library)") \
            from None


def check_imports(modules) -> None:
    """``--import MODULE``: each module can be found (it is imported when the
    model is loaded); UsageError otherwise."""
    import importlib.util
    for mod in modules or ():
        try:
            found = importlib.util.find_spec(mod) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise UsageError(f"--import {mod}: no such module here (check the name and "
                             "PYTHONPATH)")


def _html_options(ap, what: str) -> None:
    ap.add_argument("--html", metavar="REPORT.html",
                    help=f"also write a self-contained HTML picture (atomically): {what}; "
                    "laid out by Graphviz's dot, which must be installed")
    ap.add_argument("--html-layers", type=_int_at_least(1, "too few"), default=None,
                    metavar="N", help="with --html: repeated layers drawn in full at most "
                    "(default 3; the others are one box each, saying what matched in them)")


def check_html(args, *others: Tuple[Optional[str], str]) -> Optional[str]:
    """For ``--html``: UsageError unless its path can be written and is none
    of ``others`` (``(path, what)``) and Graphviz's ``dot`` runs; the path
    of ``dot`` (None without ``--html``)."""
    if args.html_layers is not None and not args.html:
        raise UsageError("--html-layers: only with --html")
    if not args.html:
        return None
    for path, what in others:
        if path and _same(args.html, path):
            raise UsageError(f"--html {args.html}: is also the {what}")
    check_writable(args.html, "--html")
    from .torch.html import GraphvizMissing, find_dot
    try:
        return find_dot()
    except GraphvizMissing as e:
        raise UsageError(f"--html {args.html}: {e}") from None


def write_html(args, state: dict, render: Callable[..., Tuple[str, dict]], **kw) -> None:
    """Render the ``--html`` page with ``render(max_layers=, dot=, **kw)``
    and write it atomically."""
    from .torch.html import DEFAULT_MAX_LAYERS
    try:
        page, _ = render(max_layers=args.html_layers or DEFAULT_MAX_LAYERS, **kw)
    except RuntimeError as e:  # dot failed or timed out
        raise UsageError(f"--html {args.html}: cannot draw it: {e}") from None
    try:
        write_text_atomic(page, args.html)
    except OSError as e:
        raise UsageError(f"--html {args.html}: cannot write it: {e.strerror or e}") from None
    state["written"].append(args.html)
    print(f"wrote the HTML report {args.html} ({os.path.getsize(args.html) // 1024} KiB)")


def _default_output(path: str) -> str:
    root, _ = os.path.splitext(path)
    return root + ".rewritten.pt2"


# -------------------------------------------------------- checks up front

def check_model_path(path: str) -> None:
    """UsageError unless ``path`` is a readable, non-empty file."""
    if not os.path.exists(path):
        raise UsageError(f"MODEL {path}: no such file")
    if os.path.isdir(path):
        raise UsageError(f"MODEL {path}: is a directory, expected a model file")
    if not os.access(path, os.R_OK):
        raise UsageError(f"MODEL {path}: cannot be read (permission denied)")
    if os.path.getsize(path) == 0:
        raise UsageError(f"MODEL {path}: is empty (0 bytes), not a model file")


def check_writable(path: str, what: str) -> None:
    """UsageError unless a file can be created (or replaced) at ``path``:
    its directory exists and is writable, and it is not a directory."""
    if os.path.isdir(path):
        raise UsageError(f"{what} {path}: is a directory; give a file name")
    d = os.path.dirname(path) or "."
    if not os.path.exists(d):
        raise UsageError(f"{what} {path}: directory {d} does not exist")
    if not os.path.isdir(d):
        raise UsageError(f"{what} {path}: {d} is not a directory")
    if not os.access(d, os.W_OK | os.X_OK):
        raise UsageError(f"{what} {path}: directory {d} is not writable")


def _same(a: str, b: str) -> bool:
    return os.path.abspath(a) == os.path.abspath(b) or (
        os.path.exists(a) and os.path.exists(b) and os.path.samefile(a, b))


def undefined_globals(fn) -> List[Tuple[str, int]]:
    """``(name, line)`` for each global name ``fn`` (or a function or
    comprehension nested in it) reads that is neither in its module nor a
    builtin: a ``NameError`` waiting for the first match."""
    g = fn.__globals__
    b = g.get("__builtins__", builtins)
    b = b if isinstance(b, dict) else vars(b)
    out, seen = [], set()

    def walk(code):
        line = code.co_firstlineno
        for ins in dis.get_instructions(code):
            pos = getattr(ins, "positions", None)
            line = (pos.lineno if pos is not None and pos.lineno else
                    ins.starts_line or line)
            if ins.opname == "LOAD_GLOBAL" and ins.argval not in g \
                    and ins.argval not in b and ins.argval not in seen:
                seen.add(ins.argval)
                out.append((ins.argval, line))
        for c in code.co_consts:
            if isinstance(c, types.CodeType):
                walk(c)
    walk(fn.__code__)
    return out


def check_rules(patterns: Sequence) -> None:
    """RuleFailure for a rule whose body reads an undefined name."""
    for p in patterns:
        for r in getattr(p, "rules", ()):
            fn = getattr(r, "fn", None)
            if not isinstance(fn, types.FunctionType):
                continue
            bad = undefined_globals(fn)
            if bad:
                name, line = bad[0]
                raise RuleFailure(
                    f"rule {r.name!r} ({r.where}) uses the name {name!r} (line {line}), which "
                    "is not defined in its module (a NameError at its first match)")


def _library_names() -> Dict[str, Tuple[str, str]]:
    """lower-cased pattern and rule name -> (name, library module)."""
    import importlib
    from .library import MODULES, _patterns_of
    names = {}
    for m in MODULES:
        try:
            mod = importlib.import_module(f"pypm_verified.library.{m}")
        except Exception:  # noqa: BLE001 -- a hint only
            continue
        for p in _patterns_of(mod):
            names.setdefault(p.name.lower(), (p.name, m))
            for r in p.rules:
                names.setdefault(r.name.lower(), (r.name, m))
    return names


def load_rule_spec(spec: str) -> list:
    """The patterns of one ``--rules`` argument; UsageError saying which
    names are valid when it names nothing."""
    import warnings
    from .errors import PatternError, PatternWarning
    from .library import MODULES, load_rules
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", PatternWarning)
            pats = load_rules(spec)
        for w in caught:
            if issubclass(w.category, PatternWarning):
                print(f"warning: --rules {spec}: {w.message}", file=sys.stderr)
            else:
                warnings.showwarning(w.message, w.category, w.filename, w.lineno)
        return pats
    except (ValueError, PatternError) as e:
        msg = f"--rules {spec}: {e}"
        looks_like_file = spec.endswith(".py") or os.sep in spec
        if not looks_like_file and f"No module named {spec.split('.')[0]!r}" in str(e):
            msg = f"--rules {spec}: no library module or importable module of that name"
        if not looks_like_file:
            hint = ""
            known = _library_names().get(spec.lower())
            if known:
                what = "pattern" if known[0][:1].isupper() else "rule"
                hint = (f"; {known[0]!r} is a {what} of the library module "
                        f"{known[1]!r}: use --rules {known[1]}")
            elif spec.lower() in MODULES:
                hint = f"; did you mean --rules {spec.lower()}"
            msg += (f"{hint} (--rules takes a library module: {', '.join(MODULES)}; a "
                    "dotted module path; or a .py file)")
        raise UsageError(msg) from None


# ---------------------------------------------------------------- helpers

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
    what = f"{type(e).__name__}: {_first_line(e)}"
    if rule is None:
        return f"rewriting failed: {what}"
    return f"rule {rule.name!r} ({rule.where}) failed at line {line}: {what}"


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else ""


def interleaved_timings(fa: Callable[[], object], fb: Callable[[], object], rounds: int = 21,
                        warmup: int = 3, clock: Callable[[], float] = time.perf_counter
                        ) -> Tuple[List[float], List[float]]:
    """Time ``fa`` and ``fb`` alternately (a b, b a, a b, ...: neither is
    always first, and drift in the machine's load hits both alike); the
    ``rounds`` times of each, in seconds, after ``warmup`` untimed rounds."""
    for _ in range(warmup):
        fa()
        fb()
    ta, tb = [], []
    for i in range(rounds):
        order = ((fa, ta), (fb, tb)) if i % 2 == 0 else ((fb, tb), (fa, ta))
        for f, ts in order:
            t = clock()
            f()
            ts.append(clock() - t)
    return ta, tb


def spread(ts: Sequence[float]) -> Dict[str, float]:
    """Median, quartiles, min and max of ``ts``."""
    q1, med, q3 = statistics.quantiles(ts, n=4, method="inclusive") if len(ts) > 1 \
        else (ts[0],) * 3
    return {"median_s": med, "q1_s": q1, "q3_s": q3, "min_s": min(ts), "max_s": max(ts)}


def compare_timings(ta: Sequence[float], tb: Sequence[float]) -> dict:
    """Medians and spreads of two interleaved timings, the speedup (median
    a / median b), the per-round ratios' quartiles, and ``noisy``: the
    interquartile ranges overlap, so the ratio is not meaningful."""
    a, b = spread(ta), spread(tb)
    ratios = spread([x / y for x, y in zip(ta, tb) if y > 0] or [float("nan")])
    noisy = a["q1_s"] <= b["q3_s"] and b["q1_s"] <= a["q3_s"]
    return {"runs": len(ta), "original": a, "rewritten": b,
            "speedup": a["median_s"] / b["median_s"] if b["median_s"] > 0 else None,
            "ratio_q1": ratios["q1_s"], "ratio_q3": ratios["q3_s"], "noisy": noisy}


def _ms(s: float) -> str:
    return f"{s * 1e3:.3g}"


def benchmark_lines(bench: dict) -> List[str]:
    a, b = bench["original"], bench["rewritten"]

    def one(d):
        return (f"{_ms(d['median_s'])} ms (IQR {_ms(d['q1_s'])}-{_ms(d['q3_s'])}, "
                f"min-max {_ms(d['min_s'])}-{_ms(d['max_s'])})")
    lines = [f"benchmark, eager, {bench['runs']} interleaved runs each: original {one(a)}, "
             f"rewritten {one(b)}",
             f"speedup {bench['speedup']:.2f}x (median ratio; per-run ratios IQR "
             f"{bench['ratio_q1']:.2f}-{bench['ratio_q3']:.2f}x)"]
    if bench["noisy"]:
        lines.append("warning: the two programs' interquartile ranges overlap: the difference "
                     "is within this machine's noise and the speedup is not meaningful "
                     "(try --benchmark-runs with more runs, or a quieter machine)")
    return lines


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


def write_text_atomic(text: str, path: str) -> None:
    """Write ``text`` (UTF-8) to a temporary next to ``path`` and rename it
    over ``path``: whole or not at all, mode 0666 less the umask, no
    temporary left on an error or a signal, stale ones of dead processes
    swept (:func:`pypm_verified._atomic.write_atomic`)."""
    from ._atomic import write_text_atomic as write
    write(text, path)


def load_hint(path: str) -> str:
    """The one line that loads the written program."""
    import pypm_verified
    p = json.dumps(path)
    if hasattr(pypm_verified, "load"):
        return f"load it with: import pypm_verified as pm; ep = pm.load({p})"
    return (f"load it with: import torch, pypm_verified.torch.kernels; "
            f"ep = torch.export.load({p})")


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False

    def update(self, *a, **k):
        pass


def why_not_fired(report, pattern: str, rule: str) -> str:
    """The "why not fired" cell of ``rule`` (of ``pattern``): its most
    frequent reason for declining, with its count when there were several
    (all of them are in ``--report``'s ``declines``); "" if it never declined
    on a match that no rule fired on."""
    reasons = report.why_not_fired(pattern, rule)
    if not reasons:
        return ""
    top, n = reasons[0]
    if len(reasons) == 1:
        return top
    total = sum(c for _, c in reasons)
    others = len(reasons) - 1
    return (f"{top} ({n} of {total}; {others} other reason{'s' if others > 1 else ''} "
            "in --report)")


def _table(console, report, numerics, timings, out_path, target_line, note, sizes=()):
    from rich.markup import escape
    from rich.table import Table
    t = Table(title="rules")
    t.add_column("pattern / rule")
    t.add_column("matches", justify="right")
    t.add_column("fired", justify="right")
    t.add_column("why not fired")
    # a pattern: its matches and how many fired; under it, each of its rules:
    # how often it fired and, when a match fired no rule, why it declined
    shown = set()
    for p in sorted(report.matches):
        m = report.matches[p]
        t.add_row(p, str(m), str(m - report.unfired(p)), "")
        for r in report.rules.get(p, ()):
            shown.add(r)
            t.add_row(f"  {r}", "", str(report.firings.get(r, 0)),
                      escape(why_not_fired(report, p, r)))
    for r in sorted(set(report.firings) - shown):  # a report without rule lists
        t.add_row(r, "", str(report.firings[r]), "")
    if not report.matches and not report.firings:
        t.add_row("(no pattern matched)", "", "", "")
    console.print(t)
    s = Table(title="summary", show_header=False)
    s.add_column()
    s.add_column()
    s.add_row("nodes before / after", f"{report.nodes_before} / {report.nodes_after}"
              + (f"  ({report.merged} duplicates merged)" if report.merged else ""))
    s.add_row("iterations", f"{report.iterations}" + ("  (cap reached: not a fixpoint)"
                                                     if report.cap_hit else ""))
    s.add_row("engine", report.engine)
    s.add_row("target", target_line)
    s.add_row("matcher time / rewrite time",
              f"{report.match_s * 1e3:.1f} ms / {report.total_s * 1e3:.1f} ms "
              f"({report.attempts} match attempts)")
    for k, v in timings.items():
        s.add_row(k, f"{v:.2f} s")
    if numerics is not None:
        status = "[green]ok[/green]" if numerics.ok else "[red]MISMATCH[/red]"
        s.add_row("numerics", f"{status}: max abs {numerics.max_abs:.3g}, max rel "
                  f"{numerics.max_rel:.3g} over {numerics.runs} runs")
        if sizes:  # dynamic shapes: the runs at other sizes
            s.add_row("dynamic sizes checked", "; ".join(
                ", ".join(f"{k}={v}" for k, v in d.items()) for d in sizes))
    elif note:
        s.add_row("numerics", note)
    s.add_row("output", out_path or "(not written)")
    console.print(s)


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
    """The search options: budget options only with ``--search beam|astar``,
    ``--beam-width`` only with beam, no ``--html`` with a search (its pictures
    show one driver run)."""
    given = [f for f, v in (("--search-budget", args.search_budget),
                            ("--beam-width", args.beam_width),
                            ("--search-depth", args.search_depth),
                            ("--search-time", args.search_time)) if v is not None]
    if args.search == "greedy" and given:
        raise UsageError(f"{given[0]}: only with --search beam or --search astar")
    if args.beam_width is not None and args.search != "beam":
        raise UsageError("--beam-width: only with --search beam")
    if args.search_time is not None and not args.search_time > 0:
        raise UsageError(f"--search-time {args.search_time}: give a positive number of seconds")
    if args.search != "greedy" and getattr(args, "html", None):
        raise UsageError(f"--html: not with --search {args.search} (the pictures show a "
                         "greedy run)")


def _search_rewrite(args, prog, patterns, target):
    """``--search beam|astar``: the driver's choices searched under the cost
    model (:mod:`pypm_verified.torch.search`); the chosen run's result."""
    from .torch.search import search_program
    s = search_program(prog, patterns, args.search, target=target, engine=args.engine,
                       max_expansions=args.search_budget or 16,
                       beam_width=args.beam_width or 4, max_depth=args.search_depth or 4,
                       time_limit=args.search_time, max_iterations=args.max_iterations)
    skipped = ", ".join(f"{r}@{n}" for r, n in sorted(s.skipped)) or "none"
    print(f"search: {args.search}, {s.runs} driver run(s){' (budget hit)' if s.budget_hit else ''};"
          f" predicted cost greedy {s.greedy_cost * 1e3:.3f} ms -> {s.cost * 1e3:.3f} ms;"
          f" firings skipped: {skipped}", file=sys.stderr)
    return s.result


def _rewrite(args, state: dict) -> int:
    timings: Dict[str, float] = {}
    t0 = time.perf_counter()

    # ---- everything that needs no model: paths first, then rules
    check_model_path(args.model)
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
        check_writable(args.report, "--report")
    dot = check_html(args, (args.model, "input MODEL"), (out_path, "output (-o)"),
                     (args.report, "--report"))
    _check_search_options(args)
    check_imports(args.imports)
    check_engine_library(args.engine)
    if args.example_inputs:
        if not os.path.isfile(args.example_inputs):
            raise UsageError(f"--example-inputs {args.example_inputs}: "
                             + ("is a directory" if os.path.isdir(args.example_inputs)
                                else "no such file"))

    try:
        import torch
    except ImportError:
        raise UsageError("PyTorch is not installed; pip install -e '.[torch]' "
                         "-c requirements/constraints.txt") from None
    from rich.console import Console
    console = Console()
    from .library import default_patterns
    from .torch import kernels  # noqa: F401 -- programs may already use pypm ops
    from .torch.driver import RewriteError
    from .torch.loader import LoadError, load_model
    from .torch.pipeline import check_numerics, rewrite_program, save_atomic
    recorder = None
    if dot:
        from .torch.html import Recorder
        recorder = Recorder()

    if args.rules:
        patterns = [p for spec in args.rules for p in load_rule_spec(spec)]
    else:
        patterns = default_patterns()
    check_rules(patterns)

    example = None
    if args.example_inputs:
        try:
            example = torch.load(args.example_inputs, weights_only=True)
        except Exception as e:  # noqa: BLE001 -- torch raises many types
            import zipfile
            why = (f"{type(e).__name__}: {_first_line(e)}" if zipfile.is_zipfile(
                args.example_inputs) else "not a file torch.save wrote (not a zip archive)")
            raise UsageError(f"--example-inputs {args.example_inputs}: cannot read it as a "
                             f"torch.save'd tuple of tensors: {why}") from None
        example = tuple(example) if isinstance(example, (list, tuple)) else (example,)

    # ---- the work
    status = _Null() if args.quiet else console.status("loading and exporting", spinner="dots")
    with status:
        try:
            prog = load_model(args.model, example, imports=args.imports or (),
                              allow_pickle=args.allow_pickle)
        except LoadError as e:
            raise UsageError(str(e)) from None
        except Exception as e:  # noqa: BLE001 -- anything torch raises
            raise UsageError(f"{args.model}: cannot load it: {type(e).__name__}: "
                             f"{_first_line(e)}") from None
        timings["load + export"] = time.perf_counter() - t0
        for w in getattr(prog, "warnings", None) or ():
            print(f"warning: {w}", file=sys.stderr)
        if args.target:
            target, why = args.target, "--target"
        else:
            target, why = program_device(prog)
        target_line = f"{target} ({why})"
        status.update(f"rewriting ({len(prog.ep.graph.nodes)} nodes, "
                      f"{len(patterns)} patterns, engine {args.engine}, target {target})")
        t1 = time.perf_counter()
        try:
            from .engines.matching import fuel_limit
            with fuel_limit(args.fuel):  # --fuel: every match of the rewrite
                if args.search == "greedy":
                    res = rewrite_program(prog, patterns, engine=args.engine, target=target,
                                          max_iterations=args.max_iterations, check=False,
                                          observer=recorder)
                else:
                    res = _search_rewrite(args, prog, patterns, target)
        except RewriteError as e:
            raise RuleFailure(f"a rule built an invalid replacement: {e}") from None
        except Exception as e:  # noqa: BLE001 -- a user's rule may raise anything
            raise RuleFailure(rule_failure(e, patterns)) from None
        timings["rewrite"] = time.perf_counter() - t1
        # written only if a rule fired: otherwise the output would be the
        # re-exported, decomposed input (at most with duplicates merged)
        fired = res.report.total > 0
        changed = _changed(res)
        write_anyway = args.write_unchanged or args.force
        if not fired and not write_anyway:
            out_path = None
        note = None
        if args.no_check:
            note = "not checked (--no-check)"
        elif not changed:
            note = "not checked (the graph is unchanged)"
        elif not fired and not out_path and not args.dry_run:
            note = "not checked (no rule fired, nothing to write)"
        else:
            status.update("checking numerics")
            t2 = time.perf_counter()
            try:
                res.numerics, res.other_sizes = check_numerics(prog, res.ep,
                                                               n_random=args.random_runs)
            except Exception as e:  # noqa: BLE001
                raise RuleFailure("the rewritten program fails to run on the example inputs: "
                                  f"{type(e).__name__}: {_first_line(e)}") from None
            timings["check"] = time.perf_counter() - t2
        numerics = res.numerics
        bench = None
        if args.benchmark:
            status.update(f"benchmarking ({args.benchmark_runs} interleaved runs each)")
            a_mod, b_mod = prog.ep.module(), res.ep.module()
            with torch.no_grad():
                ta, tb = interleaved_timings(lambda: a_mod(*prog.args, **prog.kwargs),
                                             lambda: b_mod(*prog.args, **prog.kwargs),
                                             rounds=args.benchmark_runs)
            bench = compare_timings(ta, tb)
        wrote = None
        if out_path and (numerics is None or numerics.ok or args.force):
            status.update(f"saving {out_path}")
            t3 = time.perf_counter()
            try:
                save_atomic(res.ep, out_path)
            except InterruptedError:  # a signal during the save; the temporary is gone
                raise KeyboardInterrupt from None
            except OSError as e:
                raise UsageError(f"-o {out_path}: cannot write it: {e.strerror or e}") from None
            timings["save"] = time.perf_counter() - t3
            wrote = out_path
            state["written"].append(out_path)
    timings["total"] = time.perf_counter() - t0

    _table(console, res.report, numerics, timings, wrote, target_line, note,
           res.other_sizes)
    say = print  # plain lines: one line each, whatever the terminal's width
    if bench:
        for line in benchmark_lines(bench):
            (say if not line.startswith("warning") else _err)(line)
    if not fired:
        what = "the program is unchanged" if not changed else (
            f"the re-export only merged {res.report.merged} duplicate node(s)")
        if wrote:
            say(f"no rule fired ({what}): wrote the re-exported program anyway "
                f"({'--write-unchanged' if args.write_unchanged else '--force'})")
        elif args.dry_run:
            say(f"no rule fired: {what}")
        else:
            say(f"no rule fired: {what}; nothing written "
                "(--write-unchanged writes the re-exported program anyway)")
    if args.report:
        rep = {"model": args.model, "kind": prog.kind, "output": wrote, "target_reason": why,
               "fired": fired, "changed": changed,
               "warnings": list(getattr(prog, "warnings", None) or ()),
               **res.report.as_dict(), "target": target,
               "numerics": numerics.as_dict() if numerics is not None else None,
               "dynamic_sizes_checked": list(res.other_sizes),
               "timings_s": timings, "benchmark": bench}
        try:
            write_text_atomic(json.dumps(rep, indent=2) + "\n", args.report)
        except OSError as e:
            raise UsageError(f"--report {args.report}: cannot write it: {e.strerror or e}"
                             + (f" ({wrote} was written)" if wrote else "")) from None
        state["written"].append(args.report)
    if dot:
        from .torch.html import rewrite_page
        info = {"numerics": ("not checked" if numerics is None else "ok" if numerics.ok
                             else "MISMATCH"), "output": wrote or "(not written)"}
        write_html(args, state, rewrite_page, before_ep=prog.ep, after_ep=res.ep,
                   report=res.report, recorder=recorder, dot=dot, info=info,
                   title=f"rewrite {os.path.basename(args.model)}")
    if numerics is not None and not numerics.ok:
        for msg in numerics.failures[:5]:
            _err(f"numerics: {msg}")
        if args.force and wrote:
            _err("warning: numerics check failed; wrote the output anyway (--force)")
            return EXIT_OK
        _err("error: the rewritten program disagrees with the original beyond the "
             "tolerance; nothing written (--force writes it anyway)")
        return EXIT_NUMERICS
    if wrote:
        say(load_hint(wrote))
    return EXIT_OK


def _err(line: str) -> None:
    print(line, file=sys.stderr)


# ------------------------------------------------------------ check-rules

CHECK_RULES_EXIT_CODES = (
    (EXIT_OK, "every rule proved or tested: no counterexample in the generated instances"),
    (1, "a rule is refuted (a counterexample) or vacuous (its guards admit no generated "
        "instance); the reports are written"),
    (EXIT_INPUT, "bad input: an option, a path or a rules module is wrong"),
    (EXIT_RULE, "a rule uses a name its module does not define (found before checking)"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C)"),
    (EXIT_TERMINATED, "terminated (SIGTERM)"),
)
EXIT_REFUTED = 1

CHECK_RULES_DESCRIPTION = """\
Check every @pm.rule of the rule library (or of --rules) on PyTorch subgraphs
generated from its pattern: every alternate, operator-variable choice and
recursion depth up to a bound, with ranks, sizes (1 included), dtypes
(float32/64, float16, bfloat16, int64), broadcast operands and constants
drawn from what the guards plausibly admit. Each instance runs through the
real matcher and the rewrite driver (profitability off), and the original
and rewritten subgraphs are compared at the dtype-aware tolerances of the
rewrite command. Each structure the rule fired on (the subgraph and its
replacement, input ranks fixed, sizes free) is then proved equal over the
reals for every size with z3, from an index-level semantics of the ATen ops
(pypm_verified/checking/symbolic.py). Each rule is reported:

  proved    tested, and every structure it fired on proved over the reals
            for every size (the structures generated: input ranks up to 4)
  tested    no counterexample in N instances the rule fired on (the
            summary says which structures were proved, and why not others)
  refuted   a counterexample: the subgraph, input shapes and dtypes,
            constants, the error (shrunk to small sizes)
  vacuous   no generated instance was matched and accepted by the rule

For a tested rule, each guard (each assert of the rule, each conjunct of its
pattern's guards) is dropped in turn to look for the counterexample it
excludes ("necessary") or find it changed nothing ("redundant").

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
                    help="rules to check (repeatable; default: the whole library)")
    cr.add_argument("--report", metavar="R.json", help="write the results as JSON")
    cr.add_argument("--markdown", metavar="R.md", help="write the results as Markdown")
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
                    help="skip the symbolic proofs (z3); rules are then at best tested")
    cr.add_argument("--engine", choices=("verified", "reference"), default=None,
                    help="matcher (default: verified when its library is built, else "
                    "reference)")
    cr.add_argument("--special-values", type=_share, default=0.0, metavar="P",
                    help="share of instances whose inputs also hold NaN, +-inf, +-0.0, "
                    "+-100 (integers: their extremes), signed zeros compared (default 0)")
    cr.add_argument("--dtype-hints", action="store_true",
                    help="half the instances in a dtype the rule's source names (so "
                    "integer- or bool-only rules fire)")
    cr.add_argument("-q", "--quiet", action="store_true", help="the summary only")


def _share(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {s!r}") from None
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"{s}: not in [0, 1]")
    return v


@command("check-rules", _configure_check_rules)
def check_rules_main(args, state: dict) -> int:
    """``check-rules``: see :data:`CHECK_RULES_DESCRIPTION`."""
    t0 = time.perf_counter()
    for path, what in ((args.report, "--report"), (args.markdown, "--markdown")):
        if path:
            check_writable(path, what)
    if args.report and args.markdown and _same(args.report, args.markdown):
        raise UsageError(f"--markdown {args.markdown}: is also the --report")
    check_engine_library(args.engine)
    try:
        import torch  # noqa: F401
    except ImportError:
        raise UsageError("PyTorch is not installed; pip install -e '.[torch]' "
                         "-c requirements/constraints.txt") from None
    from .checking import FAST, FULL, check_rule, default_engine, markdown, summary_lines
    from .library import default_patterns
    if args.rules:
        patterns = [p for spec in args.rules for p in load_rule_spec(spec)]
    else:
        patterns = default_patterns()
    check_rules(patterns)
    mode = FAST if args.fast else FULL
    examples = args.examples or mode["examples"]
    per_guard = 0 if args.no_guards else (
        args.guard_examples if args.guard_examples is not None else mode["per_guard"])
    engine = args.engine or default_engine()
    results = []
    for p in patterns:
        for r in p.rules:
            if not args.quiet:
                print(f"checking {r.name} (pattern {p.name}) ...", file=sys.stderr, flush=True)
            try:
                res = check_rule(p, r, examples=examples, seed=args.seed, engine=engine,
                                 guards=per_guard > 0, per_guard=per_guard,
                                 symbolic=not args.no_symbolic,
                                 special_values=args.special_values,
                                 dtype_hints=args.dtype_hints)
            except Exception as e:  # noqa: BLE001 -- a rule module may break the checker
                raise RuleFailure(f"checking rule {r.name!r} ({r.where}) failed: "
                                  f"{type(e).__name__}: {_first_line(e)}") from None
            results.append(res)
    for line in summary_lines(results):
        print(line)
    seconds = time.perf_counter() - t0
    counts = {s: sum(r.status == s for r in results) for s in ("proved", "tested", "refuted",
                                                                "vacuous")}
    print(f"{len(results)} rule(s): " + ", ".join(f"{v} {k}" for k, v in counts.items() if v)
          + f" ({seconds:.1f} s, engine {engine}, seed {args.seed}, "
          + f"{'fast' if args.fast else 'full'} mode)")
    if args.report:
        doc = {"mode": "fast" if args.fast else "full", "examples": examples,
               "guard_examples": per_guard, "seed": args.seed, "engine": engine,
               "summary": counts, "seconds": seconds,
               "rules": [r.as_dict() for r in results]}
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
               "statuses mean and what \"tested\" does not guarantee: README, section "
               "`check-rules`.")
        try:
            write_text_atomic(markdown(results, "Rule checks (check-rules)", pre),
                              args.markdown)
        except OSError as e:
            raise UsageError(f"--markdown {args.markdown}: cannot write it: "
                             f"{e.strerror or e}") from None
        state["written"].append(args.markdown)
    return EXIT_OK if all(r.ok for r in results) else EXIT_REFUTED


# ----------------------------------------------------------------- explain

EXPLAIN_DESCRIPTION = """\
Why does a pattern not match? Loads MODEL (as `rewrite` does), imports its
graph into the term graph the rules match on, and explains pattern NAME:
with --node FX_NODE_NAME at that node (the match, or the deepest partial
match: which sub-pattern, alternate and child position failed, at which
node, and why: operator, guard and the values it read, unknown size,
conflict, fuel); without --node, the near misses over the whole model,
deepest first. The verdict is the matcher's (--engine); the explanation is
only attached to its "no".
"""


def _configure_explain(sub) -> None:
    ex = sub.add_parser("explain", help="explain why a pattern does not match",
                        description=EXPLAIN_DESCRIPTION, epilog="""\
example:
  python -m pypm_verified explain bert.pt2 --pattern Attention --rules attention
  python -m pypm_verified explain m.pt2 --pattern MyPat --rules my_rules.py --node softmax
""", formatter_class=argparse.RawDescriptionHelpFormatter)
    ex.add_argument("model", help="model file (as for rewrite)")
    ex.add_argument("--pattern", required=True, metavar="NAME",
                    help="the pattern to explain (any pattern the rules define or call)")
    ex.add_argument("--node", metavar="FX_NODE_NAME",
                    help="the FX node to explain at (default: the near misses of the model)")
    ex.add_argument("--rules", action="append", metavar="MODULE_OR_FILE",
                    help="where the pattern is defined (repeatable; default: the library)")
    ex.add_argument("--engine", choices=("verified", "reference"), default="verified",
                    help="matcher whose verdict is explained (default: verified)")
    ex.add_argument("--top", type=_int_at_least(1, "too few"), default=10, metavar="N",
                    help="near misses shown without --node (default 10)")
    ex.add_argument("--example-inputs", metavar="FILE",
                    help="torch.save'd tuple of example inputs (TorchScript models)")
    _import_option(ex)
    _html_options(ex, "the model's graph with the pattern's matches and near misses drawn "
                  "on it (where each attempt started and failed, the explanation on hover)")


def _explain_patterns(specs) -> list:
    """Every pattern of the ``--rules`` specs (or the library) and every
    pattern they call; a .py file without rules contributes its patterns."""
    from .dsl.patterns import Pattern
    roots = []
    for spec in specs or [None]:
        if spec is None:
            from .library import default_patterns
            roots.extend(default_patterns())
            continue
        try:
            roots.extend(load_rule_spec(spec))
        except UsageError:
            if not (spec.endswith(".py") and os.path.isfile(spec)):
                raise
            import importlib.util
            name = f"pypm_explain_{os.path.splitext(os.path.basename(spec))[0]}"
            mspec = importlib.util.spec_from_file_location(name, spec)
            mod = importlib.util.module_from_spec(mspec)
            try:
                mspec.loader.exec_module(mod)
            except Exception as e:  # noqa: BLE001 -- a user's file may raise anything
                raise UsageError(f"--rules {spec}: cannot import it: {type(e).__name__}: "
                                 f"{_first_line(e)}") from None
            roots.extend(v for v in vars(mod).values() if isinstance(v, Pattern))
    out = {}
    for p in roots:
        out.setdefault(p, None)
        try:
            for q in p.linked.index:
                out.setdefault(q, None)
        except Exception as e:  # noqa: BLE001 -- PatternError and tracing errors
            raise UsageError(f"pattern {p.name}: {_first_line(e)}") from None
    return list(out)


@command("explain", _configure_explain)
def explain_main(args, state: dict) -> int:
    """``explain``: see :data:`EXPLAIN_DESCRIPTION`."""
    check_model_path(args.model)
    dot = check_html(args, (args.model, "input MODEL"))
    check_imports(args.imports)
    check_engine_library(args.engine)
    try:
        import torch
    except ImportError:
        raise UsageError("PyTorch is not installed; pip install -e '.[torch]' "
                         "-c requirements/constraints.txt") from None
    from .engines.explain import explain, explain_all, node_desc
    from .engines.matching import match_all
    from .torch import kernels  # noqa: F401 -- programs may already use pypm ops
    from .torch.importer import TermGraph
    from .torch.loader import LoadError, load_model
    patterns = _explain_patterns(args.rules)
    hits = [p for p in patterns if p.name == args.pattern] or \
        [p for p in patterns if p.name.lower() == args.pattern.lower()]
    if not hits:
        known = ", ".join(sorted({p.name for p in patterns}))
        raise UsageError(f"--pattern {args.pattern}: no such pattern in the rules "
                         f"(known: {known})")
    pat = hits[0]
    example = None
    if args.example_inputs:
        try:
            example = torch.load(args.example_inputs, weights_only=True)
        except Exception as e:  # noqa: BLE001
            raise UsageError(f"--example-inputs {args.example_inputs}: cannot read it: "
                             f"{type(e).__name__}: {_first_line(e)}") from None
        example = tuple(example) if isinstance(example, (list, tuple)) else (example,)
    try:
        prog = load_model(args.model, example, imports=args.imports or (),
                          allow_pickle=args.allow_pickle)
    except LoadError as e:
        raise UsageError(str(e)) from None
    except Exception as e:  # noqa: BLE001 -- anything torch raises
        raise UsageError(f"{args.model}: cannot load it: {type(e).__name__}: "
                         f"{_first_line(e)}") from None
    from .torch import dynamic
    # dynamic shapes: as the rewrite does, the engine reads each symbolic size
    # at its example value (else every guard on a size is unknown and nothing
    # matches), and each match is re-decided for every admissible size
    env = dynamic.shape_env_of(prog.ep.graph_module)
    tg = TermGraph(prog.ep.graph, size_hints=env is not None).build()

    def for_every_size(node, m) -> Optional[str]:
        """None if match ``m`` at ``node`` holds at every admissible size
        (always, for a static program); else why not."""
        if env is None or m is None:
            return None
        from .core import Program
        return dynamic.confirm(Program(pat.linked.defs, pat.linked.index[pat]),
                               m.substitution, m.fsubstitution, node, tg, env)
    if env is not None:
        print("the program has dynamic shapes: sizes are read at their example values, and "
              "each match is re-decided for every admissible size (as rewrite does)")

    def describe(n) -> str:
        fx = tg.fx_of.get(n.id)
        return node_desc(n) if fx is None else f"{fx.name} = {node_desc(n)[len(str(n.id)) + 2:]}"

    if args.node:
        by_name = {fx.name: t for fx, t in tg.term.items()}
        node = by_name.get(args.node)
        if node is None:
            near = [n for n in by_name if args.node.lower() in n.lower()][:8]
            raise UsageError(f"--node {args.node}: no FX node of that name in the model"
                             + (f" (similar: {', '.join(near)})" if near else ""))
        e = explain(pat, node, engine=args.engine, describe=describe)
        print(e)
        why = for_every_size(node, e.match if e.matched else None)
        if why:
            print(f"  but not for every size: {why}")
        if dot:
            _explain_html(args, state, dot, prog, tg, pat, [], [e])
        return EXIT_OK
    g = tg.graph
    found = match_all([pat], g, engine=args.engine)
    matched = [n for _, n, _ in found]
    print(f"pattern {pat.name}: matches at {len(matched)} node(s)"
          + (": " + ", ".join(describe(n).split(" = ")[0] for n in matched[:10])
             + (" ..." if len(matched) > 10 else "") if matched else ""))
    for _, n, m in found:
        why = for_every_size(n, m)
        if why:
            print(f"  {describe(n).split(' = ')[0]}: matches at the example sizes only: {why}")
    misses = explain_all(pat, g, top=args.top, engine=args.engine, describe=describe)
    if not misses:
        print("no near misses: the root operator of the pattern occurs nowhere else")
    else:
        print(f"near misses (deepest first, top {args.top}):")
    for e in misses:
        print()
        print(e)
    if dot:
        _explain_html(args, state, dot, prog, tg, pat, [m for _, _, m in found], misses)
    return EXIT_OK


def _explain_html(args, state, dot, prog, tg, pat, matches, explanations) -> None:
    from .torch.html import explain_events, explain_page
    ms, near = explain_events(pat, tg, matches, explanations)
    write_html(args, state, explain_page, ep=prog.ep, pattern_name=pat.name, matches=ms,
               misses=near, dot=dot, title=f"explain {pat.name} on "
               f"{os.path.basename(args.model)}", info={"engine": args.engine})


# -------------------------------------------------------------------- main

def _on_sigterm(signum, frame):
    raise Terminated()


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command line; returns the exit code (never raises SystemExit)."""
    try:
        args = parser().parse_args(argv)
    except SystemExit as e:  # --help, or a usage error (one line, code 2)
        return e.code if isinstance(e.code, int) else (EXIT_OK if e.code is None else EXIT_INPUT)
    _, run = COMMANDS[args.command]
    state = {"written": []}
    old = None
    try:
        old = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread
        pass
    try:
        return run(args, state)
    except UsageError as e:
        _err(f"error: {e}")
        _tb(e)
        return EXIT_INPUT
    except RuleFailure as e:
        _err(f"error: {e}; nothing written")
        _tb(e)
        return EXIT_RULE
    except KeyboardInterrupt as e:
        done = state["written"]
        what = "nothing written" if not done else f"wrote only {', '.join(done)}"
        term = isinstance(e, Terminated)
        _err(f"{'terminated' if term else 'interrupted'}; {what}")
        return EXIT_TERMINATED if term else EXIT_INTERRUPTED
    finally:
        if old is not None:
            signal.signal(signal.SIGTERM, old)


def _tb(e: BaseException) -> None:
    if os.environ.get("PYPM_TRACEBACK"):
        traceback.print_exception(e.__context__ or e)


__all__ = ["main", "COMMANDS", "EXIT_CODES", "EXIT_OK", "EXIT_NUMERICS", "EXIT_INPUT",
           "EXIT_RULE", "EXIT_INTERRUPTED", "EXIT_TERMINATED", "interleaved_timings",
           "compare_timings", "program_device", "undefined_globals"]
