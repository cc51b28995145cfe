"""Where the certificate checker's time goes inside the engine library.

Records the buffer of the first certified pass of one fixpoint (the
arguments of ``binding.validate_firings``), calls ``pypm_validate_firings``
on it again and again (hot), and, with ``--perf`` where ``perf`` is
installed, samples that loop and sorts the engine library's samples into:
the OCaml runtime (allocation and the collector: ``caml_*``, the marking,
sweeping and free-list functions), the extracted proved code (``Matcher.*``),
the OCaml glue (``Pypm_core.*``: decoding the buffer) and the standard
library. Prints the hot time per call and the shares.

    python bench/profile_checker.py --model bert --layers 12
    python bench/profile_checker.py --perf            # the shares (needs perf)
"""
from __future__ import annotations

import argparse
import copy
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import common  # noqa: F401  (sys.path: python/, examples/)

RUNTIME = re.compile(r"^(caml_|mark_|sweep_|bf_|clean_|do_some|oldify|alloc_|realloc|"
                     r"compact|major_|minor_)")


def record(model: str, layers: int):
    """``(args, kwargs)`` of the first ``validate_firings`` call of a fixpoint."""
    from bench_matchers import run_pypm
    from examples import models
    from pypm_verified.engines import binding
    ep = models.export(model, "base", layers=layers)
    got = []
    real = binding.validate_firings

    def spy(*a, **k):
        got.append((a, k))
        return real(*a, **k)

    binding.validate_firings = spy
    try:
        run_pypm(copy.deepcopy(ep), "verified")
    finally:
        binding.validate_firings = real
    if not got:
        raise SystemExit("no certified pass in the fixpoint")
    return got[0]


def hot_loop(call, calls: int) -> float:
    """Median-free mean ms per call of ``calls`` calls in a row."""
    from pypm_verified.engines import binding
    a, k = call
    verdict = binding.validate_firings(*a, **k)
    assert verdict[0] == 0, verdict  # accepted
    t0 = time.perf_counter()
    for _ in range(calls):
        binding.validate_firings(*a, **k)
    return (time.perf_counter() - t0) / calls * 1e3


def shares(report: str) -> dict:
    """The engine library's samples of a ``perf report --sort symbol``
    listing, by kind, in % of the library's samples."""
    kinds = {"runtime (allocation, collector)": 0.0, "proved code (Matcher)": 0.0,
             "glue (decoding)": 0.0, "standard library": 0.0, "other": 0.0}
    for line in report.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+\[\.\]\s+(\S+)", line)
        if not m:
            continue
        p, sym = float(m.group(1)), m.group(2)
        if RUNTIME.match(sym):
            kinds["runtime (allocation, collector)"] += p
        elif sym.startswith("Matcher."):
            kinds["proved code (Matcher)"] += p
        elif sym.startswith("Pypm_core."):
            kinds["glue (decoding)"] += p
        elif sym.startswith("Stdlib."):
            kinds["standard library"] += p
        else:
            kinds["other"] += p
    total = sum(kinds.values())
    return {k: 100 * v / total for k, v in kinds.items()} if total else kinds


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="bert")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--calls", type=int, default=5000)
    ap.add_argument("--perf", action="store_true", help="sample the loop with perf")
    ap.add_argument("--loop-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.perf:
        perf = shutil.which("perf")
        if perf is None:
            raise SystemExit("perf is not installed")
        with tempfile.TemporaryDirectory() as d:
            data = os.path.join(d, "perf.data")
            cmd = [sys.executable, os.path.abspath(__file__), "--loop-only", "--model",
                   args.model, "--layers", str(args.layers), "--calls", str(args.calls)]
            subprocess.run([perf, "record", "-q", "-F", "4000", "-o", data, "--"] + cmd,
                           check=True)
            out = subprocess.run([perf, "report", "-i", data, "--no-children",
                                  "--dso", "libpypm_verified.so", "--sort", "symbol"],
                                 check=True, capture_output=True, text=True).stdout
        for k, v in shares(out).items():
            print(f"{k:34s} {v:5.1f} %")
        return 0
    call = record(args.model, args.layers)
    print(f"{args.model}-{args.layers}: pypm_validate_firings hot "
          f"{hot_loop(call, args.calls):.3f} ms per call ({len(call[0][3])} words)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
