"""Exit codes of the command line, their documented meanings, and the
exceptions that map to them."""
from __future__ import annotations

EXIT_OK, EXIT_NUMERICS, EXIT_INPUT, EXIT_RULE = 0, 1, 2, 3
EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143
#: an unexpected exception (a bug in pypm_verified, or in a library it
#: calls, outside the rules): never 1, which is a verdict (numerics mismatch;
#: check-rules: a refuted rule). 70 is sysexits' EX_SOFTWARE
EXIT_INTERNAL = 70

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
    (EXIT_INTERNAL, "internal error: an unexpected exception (a bug, not a verdict); the "
                    "one error line names it and what was written"),
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
