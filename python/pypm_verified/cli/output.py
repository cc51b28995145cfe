"""What the command line prints and writes: one-line messages, atomic text
files, the rewrite's tables and the ``--html`` page."""
from __future__ import annotations

import json
import os
import re
import sys
from typing import Callable, Tuple

from .exitcodes import UsageError


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else ""


def results_stream(args):
    """Where tables and results go: stdout, except with ``--report -`` (the
    JSON report is stdout then, alone): stderr."""
    return sys.stderr if getattr(args, "report", None) == "-" else sys.stdout


def say(args, line: str) -> None:
    """A result line (not a message: shown with ``-q`` too)."""
    print(line, file=results_stream(args))


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


def write_text_atomic(text: str, path: str) -> None:
    """Write ``text`` (UTF-8) to a temporary next to ``path`` and rename it
    over ``path``: whole or not at all, mode 0666 less the umask, no
    temporary left on an error or a signal, stale ones of dead processes
    swept (:func:`pypm_verified._atomic.write_atomic`)."""
    from .._atomic import write_text_atomic as write
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


#: a reason is a profitability decline (the guard asked the measured table)
PROFITABILITY = "not profitable on "
_WHERE = re.compile(r"\[[^\[\]]*:(\d+)\]$")


def reason_rank(reason: str, count: int) -> tuple:
    """Sort key of one reason a rule declined (first = what matters most):
    profitability declines first (the match and every other guard held: the
    kernel would only be slower), then the guard that failed deepest in the
    rule's body (the later its line, the more guards had passed, the more of
    the structure fit: a bound operator or alternate the rule does not
    handle fails early), then the most frequent."""
    m = _WHERE.search(reason)
    line = int(m.group(1)) if m else -1
    return (not reason.startswith(PROFITABILITY), -line, -count, reason)


def why_not_fired(report, pattern: str, rule: str) -> str:
    """The "why not fired" cell of ``rule`` (of ``pattern``): its reason for
    declining that matters most (:func:`reason_rank`), and how many others
    there were (all of them, counted, are in ``--report``'s ``declines``);
    "" if it never declined on a match that no rule fired on."""
    reasons = sorted(report.why_not_fired(pattern, rule), key=lambda rc: reason_rank(*rc))
    if not reasons:
        return ""
    top = reasons[0][0]
    others = len(reasons) - 1
    if not others:
        return top
    return f"{top} (+{others} other reason{'s' if others > 1 else ''}, see --report)"


def _table(console, report, numerics, timings, out_path, target_line, note, sizes=(),
           fired_line: str = ""):
    """The rewrite's tables: each pattern and rule (matches, firings, why
    not fired), then the summary."""
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
    if fired_line:
        s.add_row("fired", fired_line)
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


def write_html(args, state: dict, render: Callable[..., Tuple[str, dict]], **kw) -> None:
    """Render the ``--html`` page with ``render(max_layers=, dot=, **kw)``
    and write it atomically."""
    from ..torch.html import DEFAULT_MAX_LAYERS
    try:
        page, _ = render(max_layers=args.html_layers or DEFAULT_MAX_LAYERS, **kw)
    except RuntimeError as e:  # dot failed or timed out
        raise UsageError(f"--html {args.html}: cannot draw it: {e}") from None
    try:
        write_text_atomic(page, args.html)
    except OSError as e:
        raise UsageError(f"--html {args.html}: cannot write it: {e.strerror or e}") from None
    state["written"].append(args.html)
    say(args, f"wrote the HTML report {args.html} ({os.path.getsize(args.html) // 1024} KiB)")
