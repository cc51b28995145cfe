"""The command line: ``python -m pypm_verified COMMAND ...``.

Commands (one module each, registered in :data:`COMMANDS`):

  rewrite MODEL -o OUT.pt2   rewrite a PyTorch model with the rule library
                             (or your rules), check the numerics, save it.
  check-rules                check the rules on PyTorch subgraphs generated
                             from their patterns (tested / refuted / vacuous;
                             its exit codes are in `check-rules --help`).
  explain MODEL --pattern P  why pattern P does not match (at --node, or the
                             near misses over the model).
  example NAME -o NAME.pt2   write an example model to rewrite (mlp and
                             attention: plain PyTorch; bert, gpt2, llama, ...:
                             the hf extra).

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
  70   internal error: an unexpected exception (a bug, not a verdict); the one
       error line names it and what was written
  130  interrupted (Ctrl-C); nothing written
  143  terminated (SIGTERM); nothing written

Exit 70 is sysexits' EX_SOFTWARE: a bug is never exit 1, which is a
verdict. A closed pipe (``| head``) ends the command quietly with 141, as
SIGPIPE would.

Messages (progress, warnings, errors) go through :mod:`logging` to stderr,
one line each; ``-q`` keeps errors only, ``-v`` adds debug messages and
tracebacks. Tables and results are plain output on stdout (on stderr with
``--report -``, whose JSON is then alone on stdout). Whatever comes from a
file or an exception is shown inert: control characters and bidi controls
escaped (``\\x1b``), no ``[...]`` read as rich markup (:mod:`.text`).

Modules: :mod:`.rewrite`, :mod:`.checkrules`, :mod:`.explain` and
:mod:`.example` are the subcommands; :mod:`.exitcodes` (exit codes and the
exceptions that map to them), :mod:`.parsing` (the parser, argument types, shared options, the
registry), :mod:`.checks` (everything checked before the work),
:mod:`.output` (tables, results, files written), :mod:`.text` (text made
inert for the terminal), :mod:`.logs` (logging setup), :mod:`.version`
(``--version``), :mod:`.timing` (``--benchmark``) and :mod:`.app`
(``main``) are shared.
"""
from __future__ import annotations

from .exitcodes import (EXIT_CODES, EXIT_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED,
                        EXIT_NUMERICS, EXIT_OK, EXIT_RULE, EXIT_TERMINATED, RuleFailure,
                        Terminated, UsageError, exit_code_table)
from .text import printable
from .parsing import COMMANDS, MAX_FUEL, command, parser
from .checks import (check_engine_library, check_html, check_imports, check_model_path,
                     check_undefined_globals, check_writable, load_rule_spec,
                     undefined_globals)
from .output import load_hint, why_not_fired, write_html, write_text_atomic
from .version import version_text
from .timing import benchmark_lines, compare_timings, interleaved_timings, spread
# the subcommands register themselves in COMMANDS, in this order (--help's)
from .rewrite import REWRITE_DESCRIPTION, program_device, rewrite_main, rule_failure
from .checkrules import CHECK_RULES_EXIT_CODES, EXIT_REFUTED, check_rules_main
from .explain import explain_main
from .example import example_main
from .app import main

__all__ = ["main", "COMMANDS", "EXIT_CODES", "EXIT_OK", "EXIT_NUMERICS", "EXIT_INPUT",
           "EXIT_RULE", "EXIT_INTERRUPTED", "EXIT_TERMINATED", "EXIT_INTERNAL", "printable",
           "interleaved_timings",
           "compare_timings", "program_device", "undefined_globals", "version_text"]
