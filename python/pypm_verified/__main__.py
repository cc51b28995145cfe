"""``python -m pypm_verified rewrite MODEL -o OUT.pt2``: rewrite a PyTorch
model with the rule library (or your rules) and save it.

Exit codes: 0 rewritten and saved (or nothing to save with --dry-run);
1 numerics check failed (nothing written; --force writes anyway);
2 bad usage or a model that cannot be loaded or exported; 3 a rule failed.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

EXIT_OK, EXIT_NUMERICS, EXIT_INPUT, EXIT_RULE = 0, 1, 2, 3

DESCRIPTION = """\
Rewrite a PyTorch model into a faster one with pattern-matching rules whose
matcher is proved correct in Coq, check the numerics, save it.

MODEL is one of (told apart by the file's contents, not its name):
  .pt2        torch.export.save'd ExportedProgram (preferred; carries its
              example inputs)
  .pt / .pth  torch.save'd dict {"model": nn.Module, "example_inputs": tuple}
              (optionally "example_kwargs": dict). Loading a pickle RUNS CODE
              from the file (torch.load(weights_only=False)): only rewrite
              pickles you trust.
  TorchScript torch.jit.save'd archive, converted with TS2EPConverter; needs
              --example-inputs.
A state_dict alone is refused: it has the weights but not the model.

The model is exported with torch.export and rewritten at the export IR after
run_decompositions({}) (an empty table: functional, with linear, matmul,
softmax, gelu, layer_norm and SDPA intact). Rules fire only where their
kernel is faster on --target (thresholds in pypm_verified/rules/
profitability.py). Original and rewritten programs are run on the example
inputs and on random inputs of the same shapes; the output is written
(atomically, with torch.export.save) only if they agree within a
dtype-aware tolerance. The input file is never modified.
"""

EPILOG = """\
rule library (--rules NAME, repeatable; default: all, in this order):
  gelu       GELU written out (erf, tanh forms)   -> aten.gelu
  rmsnorm    RMSNorm written out (LLaMA, Qwen2)   -> aten.rms_norm
  attention  eager multi-head attention           -> scaled_dot_product_attention
  transpose  matmul(x, y.T), y 2-D (paper Fig.1)  -> aten.linear
  epilogue   linear + relu/gelu/silu              -> pypm.linear_act (fused GEMM)
--rules also takes a module path or a .py file defining @pm.pattern/@pm.rule.

A rewritten program that uses pypm.linear_act needs `import
pypm_verified.kernels` before torch.export.load.

exit codes: 0 ok; 1 numerics mismatch (nothing written); 2 bad input or
model; 3 a rule failed.

example:
  python examples/models.py bert -o bert.pt2
  python -m pypm_verified rewrite bert.pt2 -o bert.fast.pt2 --target cpu
"""


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m pypm_verified",
                                 description="pypm_verified command line")
    sub = ap.add_subparsers(dest="command", required=True)
    rw = sub.add_parser("rewrite", help="rewrite a PyTorch model with the rule library",
                        description=DESCRIPTION, epilog=EPILOG,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    rw.add_argument("model", help="model file (see above)")
    rw.add_argument("-o", "--output", help="where to write the rewritten .pt2 "
                    "(default: MODEL's name with .rewritten.pt2)")
    rw.add_argument("--target", choices=("cuda", "cpu"), default="cuda",
                    help="device the rules optimize for (default: cuda)")
    rw.add_argument("--engine", choices=("verified", "reference"), default="verified",
                    help="matcher: the Coq-extracted one (default) or the Python reference")
    rw.add_argument("--rules", action="append", metavar="MODULE_OR_FILE",
                    help="rules to apply (repeatable; default: the whole library)")
    rw.add_argument("--max-iterations", "--max-iters", type=int, default=20, metavar="N",
                    help="cap on rewrite passes (default 20; reported if reached)")
    rw.add_argument("--report", metavar="FILE", help="write the report as JSON")
    rw.add_argument("--random-runs", type=int, default=2, metavar="N",
                    help="random input sets for the numerics check (default 2)")
    rw.add_argument("--no-check", action="store_true", help="skip the numerics check")
    rw.add_argument("--force", action="store_true",
                    help="write the output even if the numerics check fails")
    rw.add_argument("--dry-run", action="store_true", help="rewrite and check, write nothing")
    rw.add_argument("--example-inputs", metavar="FILE",
                    help="torch.save'd tuple of example inputs (TorchScript models)")
    rw.add_argument("--benchmark", action="store_true",
                    help="also time original vs rewritten (median of 20 eager runs)")
    rw.add_argument("-q", "--quiet", action="store_true", help="no progress, summary only")
    return ap


def _default_output(path: str) -> str:
    root, _ = os.path.splitext(path)
    return root + ".rewritten.pt2"


def _table(console, report, numerics, timings, out_path):
    from rich.table import Table
    t = Table(title="rules")
    t.add_column("pattern / rule")
    t.add_column("matches", justify="right")
    t.add_column("fired", justify="right")
    names = sorted(set(report.matches) | set(report.firings))
    for n in names:
        t.add_row(n, str(report.matches.get(n, "")), str(report.firings.get(n, "")))
    if not names:
        t.add_row("(no pattern matched)", "", "")
    console.print(t)
    s = Table(title="summary", show_header=False)
    s.add_column()
    s.add_column()
    s.add_row("nodes before / after", f"{report.nodes_before} / {report.nodes_after}"
              + (f"  ({report.merged} duplicates merged)" if report.merged else ""))
    s.add_row("iterations", f"{report.iterations}" + ("  (cap reached: not a fixpoint)"
                                                     if report.cap_hit else ""))
    s.add_row("engine / target", f"{report.engine} / {report.target}")
    s.add_row("matcher time / rewrite time",
              f"{report.match_s * 1e3:.1f} ms / {report.total_s * 1e3:.1f} ms "
              f"({report.attempts} match attempts)")
    for k, v in timings.items():
        s.add_row(k, f"{v:.2f} s")
    if numerics is not None:
        status = "[green]ok[/green]" if numerics.ok else "[red]MISMATCH[/red]"
        s.add_row("numerics", f"{status}: max abs {numerics.max_abs:.3g}, max rel "
                  f"{numerics.max_rel:.3g} over {numerics.runs} runs")
    if out_path:
        s.add_row("output", out_path)
    console.print(s)


def rewrite_main(args) -> int:
    from rich.console import Console
    console = Console(stderr=False, quiet=False)
    err = Console(stderr=True)
    timings = {}
    t0 = time.perf_counter()
    try:
        import torch  # noqa: F401
    except ImportError:
        err.print("error: PyTorch is not installed; pip install -e '.[torch]' "
                  "-c requirements/constraints.txt")
        return EXIT_INPUT
    from .torch import kernels  # noqa: F401 -- programs may already use pypm ops
    from .errors import PatternError
    from .library import default_patterns, load_rules
    from .torch.driver import RewriteError
    from .torch.loader import LoadError, load_model
    from .torch.pipeline import median_time, rewrite_program, save_atomic

    if args.max_iterations < 1:
        err.print("error: --max-iterations must be at least 1")
        return EXIT_INPUT
    out_path = None if args.dry_run else (args.output or _default_output(args.model))
    if out_path and os.path.abspath(out_path) == os.path.abspath(args.model):
        err.print("error: the output would overwrite the input; choose another -o")
        return EXIT_INPUT
    try:
        patterns = []
        for spec in args.rules or []:
            patterns.extend(load_rules(spec))
        if not args.rules:
            patterns = default_patterns()
    except (ValueError, PatternError) as e:
        err.print(f"error: {e}")
        return EXIT_INPUT
    example = None
    if args.example_inputs:
        try:
            example = torch.load(args.example_inputs, weights_only=True)
        except Exception as e:
            err.print(f"error: cannot read --example-inputs {args.example_inputs}: {e}")
            return EXIT_INPUT
        example = tuple(example) if isinstance(example, (list, tuple)) else (example,)

    status = console.status("loading and exporting", spinner="dots") if not args.quiet \
        else _Null()
    with status:
        try:
            prog = load_model(args.model, example)
        except LoadError as e:
            err.print(f"error: {e}", markup=False)
            return EXIT_INPUT
        timings["load + export"] = time.perf_counter() - t0
        if not args.quiet:
            status.update(f"rewriting ({len(prog.ep.graph.nodes)} nodes, "
                          f"{len(patterns)} patterns, engine {args.engine})")
        t1 = time.perf_counter()
        try:
            res = rewrite_program(prog, patterns, engine=args.engine, target=args.target,
                                  max_iterations=args.max_iterations,
                                  check=not args.no_check, n_random=args.random_runs)
        except (RewriteError, PatternError) as e:
            err.print(f"error: a rule failed: {e}", markup=False)
            return EXIT_RULE
        timings["rewrite + check"] = time.perf_counter() - t1
        bench = None
        if args.benchmark:
            if not args.quiet:
                status.update("benchmarking (median of 20 runs each)")
            a = median_time(prog.ep.module(), *prog.args, **prog.kwargs)
            b = median_time(res.ep.module(), *prog.args, **prog.kwargs)
            bench = {"original_s": a, "rewritten_s": b, "speedup": a / b if b else None}
        wrote = None
        if out_path and (res.numerics is None or res.numerics.ok or args.force):
            if not args.quiet:
                status.update(f"saving {out_path}")
            t2 = time.perf_counter()
            save_atomic(res.ep, out_path)
            timings["save"] = time.perf_counter() - t2
            wrote = out_path
    timings["total"] = time.perf_counter() - t0
    _table(console, res.report, res.numerics, timings, wrote)
    if bench:
        console.print(f"eager {prog.ep.module().__class__.__name__}: original "
                      f"{bench['original_s'] * 1e3:.2f} ms, rewritten "
                      f"{bench['rewritten_s'] * 1e3:.2f} ms, speedup {bench['speedup']:.2f}x")
    if args.report:
        rep = {"model": args.model, "kind": prog.kind, "output": wrote,
               **res.report.as_dict(),
               "numerics": res.numerics.as_dict() if res.numerics else None,
               "timings_s": timings, "benchmark": bench}
        tmp = args.report + ".tmp"
        with open(tmp, "w") as f:
            json.dump(rep, f, indent=2)
        os.replace(tmp, args.report)
    if res.numerics is not None and not res.numerics.ok:
        for msg in res.numerics.failures[:5]:
            err.print(f"numerics: {msg}", markup=False)
        if args.force and wrote:
            err.print("warning: numerics check failed; wrote the output anyway (--force)")
            return EXIT_OK
        err.print("error: the rewritten program disagrees with the original beyond the "
                  "tolerance; nothing written (--force writes it anyway)")
        return EXIT_NUMERICS
    return EXIT_OK


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False

    def update(self, *a, **k):
        pass


def main(argv=None) -> int:
    """The command line; returns the exit code."""
    args = _parser().parse_args(argv)
    if args.command == "rewrite":
        return rewrite_main(args)
    return EXIT_INPUT


if __name__ == "__main__":
    sys.exit(main())
