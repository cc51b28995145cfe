"""What the benchmarks share: where things are, timing, the environment a
result was measured in, and writing results.

Importing it puts on ``sys.path`` the checkout's package (python/), the
repository root (``examples.models``), bench/ (``baselines``) and examples/
(``paper_ops``: the paper's operators, which the synthetic-graph benchmarks
use), so a benchmark imports it first. Results go to bench/results/ as
``<name>.json`` / ``.md`` / ``.png``, ``<name>_quick.*`` for ``--quick``
runs (:func:`stem`).

(Not to be confused with bench/baselines/common.py: what the baseline
rewriters of bench_matchers.py share.)
"""
from __future__ import annotations

import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterable, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"

for _p in (ROOT / "python", ROOT, HERE, ROOT / "examples"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))


# --------------------------------------------------------------------- timing

def timed(fn: Callable, repeat: int = 1, *, gc_off: bool = False, collect: bool = False,
          collect_each: bool = True) -> Tuple[float, List[float], object]:
    """``(median, times, last result)`` of ``repeat`` calls of ``fn``, in
    seconds of wall time. With ``collect``, a full collection runs before
    each call (before the first only, unless ``collect_each``); with
    ``gc_off`` the cyclic garbage collector is disabled during the calls.
    The previous result is dropped before each call."""
    times, out = [], None
    for i in range(repeat):
        out = None
        if collect and (collect_each or i == 0):
            gc.collect()
        if gc_off:
            gc.disable()
        try:
            t0 = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - t0)
        finally:
            if gc_off:
                gc.enable()
    return statistics.median(times), times, out


# ---------------------------------------------------------------- environment

def machine() -> str:
    """The processor's name, or the machine type where Python knows none."""
    return platform.processor() or platform.machine()


def loadavg() -> Optional[List[float]]:
    """The 1-, 5- and 15-minute load averages (None where unsupported)."""
    try:
        return list(os.getloadavg())
    except (OSError, AttributeError):
        return None


def when() -> str:
    """Now, to the minute: ``2024-05-01 12:34``."""
    return time.strftime("%Y-%m-%d %H:%M")


def git(*args: str) -> Optional[str]:
    """The output of ``git ARGS`` in this checkout (None if git fails)."""
    try:
        return subprocess.run(["git", *args], cwd=ROOT, text=True, capture_output=True,
                              timeout=10).stdout.strip()
    except Exception:
        return None


def git_commit(short: bool = False) -> Optional[str]:
    """The checked-out commit (None outside a checkout)."""
    return git("rev-parse", *(["--short"] if short else []), "HEAD") or None


def git_dirty() -> bool:
    """Whether the working tree has changes."""
    return bool(git("status", "--porcelain"))


# -------------------------------------------------------------------- results

def stem(name: str, quick: bool) -> str:
    """The results' file stem: ``name``, ``name_quick`` for a quick run."""
    return name + ("_quick" if quick else "")


def results_dir(out: Optional[str] = None) -> Path:
    """``out`` (default bench/results/), created if missing."""
    d = Path(out) if out else RESULTS
    d.mkdir(parents=True, exist_ok=True)
    return d


def display_path(path) -> str:
    """``path`` as a result shows it: relative to the repository when under
    it, else ``.../NAME`` (the machine's own directories stay out of the
    committed results)."""
    p = str(path)
    if not os.path.isabs(p):
        return p
    try:
        rel = os.path.relpath(p, ROOT)
    except ValueError:  # another drive
        rel = os.pardir
    if rel != os.pardir and not rel.startswith(os.pardir + os.sep):
        return rel
    return ".../" + os.path.basename(p.rstrip(os.sep))


def display_argv(argv: Iterable[str]) -> List[str]:
    """The command line with :func:`display_path` applied to its absolute
    paths (``--out=PATH`` included)."""
    out = []
    for a in argv:
        key, eq, val = a.partition("=")
        if eq and key.startswith("-") and os.path.isabs(val):
            out.append(f"{key}={display_path(val)}")
        else:
            out.append(display_path(a) if os.path.isabs(a) else a)
    return out


def write_json(path: Path, data, indent: int = 2) -> Path:
    path.write_text(json.dumps(data, indent=indent) + "\n")
    return path


def write_md(path: Path, lines: Iterable[str]) -> List[str]:
    """Writes the Markdown ``lines``; returns them (to print)."""
    lines = list(lines)
    path.write_text("\n".join(lines) + "\n")
    return lines


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend, or None without matplotlib
    (the ``bench`` extra): the benchmarks then write no PNG."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def save_figure(fig, path: Path) -> None:
    """Lays out ``fig``, writes it to ``path`` (PNG, 110 dpi) and closes it."""
    import matplotlib.pyplot as plt
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
