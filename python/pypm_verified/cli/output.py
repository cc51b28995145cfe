"""What the command line prints and writes: one-line messages, atomic text
files, the rewrite's tables and the ``--html`` page."""
from __future__ import annotations

import json
import os
import re
import sys
from typing import Callable, Tuple

from .exitcodes import UsageError
from .text import printable


def results_stream(args):
    """Where tables and results go: stdout, except with ``--report -`` (the
    JSON report is stdout then, alone): stderr."""
    return sys.stderr if getattr(args, "report", None) == "-" else sys.stdout


def say(args, line: str) -> None:
    """A result line (not a message: shown with ``-q`` too); what came from
    a file or an exception in it is shown inert (:func:`.text.printable`;
    its newlines kept: an explanation is several lines)."""
    print(printable(line, lines=True), file=results_stream(args))


def cell(text, style: str = ""):
    """``text`` as a rich ``Text``: printed as it is (no ``[...]`` read as
    markup, no ``:name:`` as an emoji), control characters escaped
    (:func:`.text.printable`). Every string a table or the status line
    shows goes through it: paths, rule and pattern names, reasons, messages."""
    from rich.text import Text
    return Text(printable(text), style=style)


def rich_console(args):
    """The rich console of the tables (on :func:`results_stream`); it reads
    no markup or emoji codes in plain strings either."""
    from rich.console import Console
    return Console(file=results_stream(args), markup=False, emoji=False)


class _Status:
    """The status line on stderr (rich's spinner), whose texts are shown as
    they are (:func:`cell`): rich's spinner reads a plain string as markup,
    so a path with ``[/x]`` in it would raise."""

    def __init__(self, text: str):
        from rich.console import Console
        self._status = Console(stderr=True, markup=False, emoji=False).status(
            cell(text), spinner="dots")

    def __enter__(self):
        self._status.__enter__()
        return self

    def __exit__(self, *a):
        return self._status.__exit__(*a)

    def update(self, text: str) -> None:
        self._status.update(cell(text))


def status_line(quiet: bool, text: str):
    """The status line showing ``text`` (updated with ``.update(text)``);
    nothing with ``quiet``."""
    return _Null() if quiet else _Status(text)


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


def write_text_atomic(text: str, path: str) -> None:
    """Write ``text`` (UTF-8) to a temporary next to ``path`` and rename it
    over ``path``: whole or not at all, a new file's mode 0666 less the
    umask, a replaced file's mode (and owner, where permitted) kept, no
    temporary left on an error or a signal, stale ones of dead processes
    swept; a ``path`` that is not a regular file (a device, a FIFO) is
    refused with an ``OSError`` (:func:`pypm_verified._atomic.write_atomic`)."""
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


def validation_cell(report):
    """The summary's "validation" cell: "validated (N passes)" in green, or
    "not validated: REASON" in red (a bypass is never silent)."""
    v = getattr(report, "validation", None)
    if v is None:
        text = cell("not validated: no validation was recorded", "bold red")
    else:
        text = cell(str(v), "green" if v.validated else "bold red")
    text.overflow = "fold"  # a long path in the reason is wrapped, never cut
    return text


def _table(console, report, numerics, timings, out_path, target_line, note, sizes=(),
           fired_line: str = ""):
    """The rewrite's tables: each pattern and rule (matches, firings, why
    not fired), then the summary."""
    from rich.table import Table
    from rich.text import Text
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
        t.add_row(cell(p), str(m), str(m - report.unfired(p)), "")
        for r in report.rules.get(p, ()):
            shown.add(r)
            t.add_row(cell(f"  {r}"), "", str(report.firings.get(r, 0)),
                      cell(why_not_fired(report, p, r)))
    for r in sorted(set(report.firings) - shown):  # a report without rule lists
        t.add_row(cell(r), "", str(report.firings[r]), "")
    if not report.matches and not report.firings:
        t.add_row("(no pattern matched)", "", "", "")
    console.print(t)
    s = Table(title="summary", show_header=False)
    s.add_column()
    s.add_column()

    def row(key: str, value) -> None:  # every cell inert: no markup, no controls
        s.add_row(cell(key), value if isinstance(value, Text) else cell(value))
    if fired_line:
        row("fired", fired_line)
    row("nodes before / after", f"{report.nodes_before} / {report.nodes_after}"
        + (f"  ({report.merged} duplicates merged)" if report.merged else ""))
    row("iterations", f"{report.iterations}" + ("  (cap reached: not a fixpoint)"
                                                if report.cap_hit else ""))
    row("engine", report.engine)
    row("validation", validation_cell(report))
    row("target", target_line)
    row("matcher time / rewrite time",
        f"{report.match_s * 1e3:.1f} ms / {report.total_s * 1e3:.1f} ms "
        f"({report.attempts} match attempts)")
    for k, v in timings.items():
        row(k, f"{v:.2f} s")
    if numerics is not None:
        status = cell("ok", "green") if numerics.ok else cell("MISMATCH", "red")
        row("numerics", status + cell(f": max abs {numerics.max_abs:.3g}, max rel "
                                      f"{numerics.max_rel:.3g} over {numerics.runs} runs"))
        if sizes:  # dynamic shapes: the runs at other sizes
            row("dynamic sizes checked", "; ".join(
                ", ".join(f"{k}={v}" for k, v in d.items()) for d in sizes))
    elif note:
        row("numerics", note)
    row("output", out_path or "(not written)")
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
