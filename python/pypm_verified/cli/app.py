"""``main``: parse, run the subcommand, map its outcome to an exit code."""
from __future__ import annotations

import logging
import os
import signal
import traceback
from typing import Optional, Sequence

from .exitcodes import (EXIT_INPUT, EXIT_INTERRUPTED, EXIT_OK, EXIT_RULE, EXIT_TERMINATED,
                        RuleFailure, Terminated, UsageError)
from .logs import log, logging_to_stderr
from .parsing import COMMANDS, parse, parser


def _on_sigterm(signum, frame):
    raise Terminated()


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command line; returns the exit code (never raises SystemExit)."""
    try:
        args = parse(parser(), argv)
    except SystemExit as e:  # --help, --version, or a usage error (one line, code 2)
        return e.code if isinstance(e.code, int) else (EXIT_OK if e.code is None else EXIT_INPUT)
    _, run = COMMANDS[args.command]
    state = {"written": []}
    old = None
    try:
        old = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread
        pass
    with logging_to_stderr(getattr(args, "verbosity", 0)) as log:
        try:
            return run(args, state)
        except UsageError as e:
            log.error("%s", e)
            _tb(e)
            return EXIT_INPUT
        except RuleFailure as e:
            log.error("%s; nothing written", e)
            _tb(e)
            return EXIT_RULE
        except KeyboardInterrupt as e:
            done = state["written"]
            what = "nothing written" if not done else f"wrote only {', '.join(done)}"
            term = isinstance(e, Terminated)
            log.error("%s; %s", "terminated" if term else "interrupted", what,
                      extra={"plain": True})
            return EXIT_TERMINATED if term else EXIT_INTERRUPTED
        finally:
            if old is not None:
                signal.signal(signal.SIGTERM, old)


def _tb(e: BaseException) -> None:
    """The traceback behind an error, with ``PYPM_TRACEBACK=1`` or ``-v``."""
    if os.environ.get("PYPM_TRACEBACK") or log.isEnabledFor(logging.DEBUG):
        traceback.print_exception(e.__context__ or e)
