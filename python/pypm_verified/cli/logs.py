"""The command line's messages through :mod:`logging`.

Progress and notes are ``INFO``, problems ``WARNING``/``ERROR``; each is one
line on stderr (``warning: ``/``error: `` before warnings and errors). ``-q``
shows errors only, ``-v`` adds ``DEBUG`` (and the traceback behind an
error). Warnings the library raises with :func:`warnings.warn` (e.g.
:class:`~pypm_verified.errors.PatternWarning`) are logged as warnings.
Tables and results are not messages: they are printed on stdout.
"""
from __future__ import annotations

import contextlib
import logging
import sys
import warnings
from typing import Iterator

from .text import printable

#: the logger of the command line; the handler sits on the package's logger
#: (``pypm_verified``), so the library's own log records show the same way
log = logging.getLogger("pypm_verified.cli")

QUIET, NORMAL, VERBOSE = -1, 0, 1


class _Stderr(logging.StreamHandler):
    """A handler writing to ``sys.stderr`` as it is when a record comes (a
    test, or a caller, may have replaced it since the handler was made)."""

    def __init__(self):
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass


class _OneLine(logging.Formatter):
    """``message`` for progress and notes, ``warning: message`` and
    ``error: message`` for problems (``extra={"plain": True}``: as is).
    One line, inert: a control character, a bidi control or a newline in it
    (from a file, an exception's message) is shown escaped
    (:func:`.text.printable`)."""

    def format(self, record: logging.LogRecord) -> str:
        msg = printable(record.getMessage())
        if record.levelno < logging.WARNING or getattr(record, "plain", False):
            return msg
        return f"{'error' if record.levelno >= logging.ERROR else 'warning'}: {msg}"


def level_of(verbosity: int) -> int:
    """The logging level of ``-q`` (-1), the default (0) and ``-v`` (1)."""
    return logging.ERROR if verbosity < 0 else logging.DEBUG if verbosity > 0 else logging.INFO


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    from ..errors import PatternWarning
    if issubclass(category, PatternWarning):
        log.warning("%s", message)
    else:
        log.warning("%s: %s (%s:%s)", category.__name__, message, filename, lineno)


def _handler() -> logging.Handler:
    h = _Stderr()
    h.setFormatter(_OneLine())
    return h


# the command line's own records: one line each on stderr, also when a
# helper of this package (``load_rule_spec``, say) is called outside ``main``
log.addHandler(_handler())
log.setLevel(logging.INFO)
log.propagate = False


@contextlib.contextmanager
def logging_to_stderr(verbosity: int = NORMAL) -> Iterator[logging.Logger]:
    """For one command: its records and the library's (logger
    ``pypm_verified``) at ``verbosity``'s level on stderr, one line each, and
    :func:`warnings.warn` logged; all undone after."""
    pkg = logging.getLogger("pypm_verified")
    handler = _handler()
    old = pkg.level, pkg.propagate, log.level
    pkg.addHandler(handler)
    pkg.setLevel(level_of(verbosity))
    pkg.propagate = False
    log.setLevel(level_of(verbosity))
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            yield log
    finally:
        pkg.removeHandler(handler)
        pkg.setLevel(old[0])
        pkg.propagate = old[1]
        log.setLevel(old[2])
