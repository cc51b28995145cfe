"""Exceptions raised by pypm_verified, and :func:`first_line`: how one-line
messages quote an exception."""
from typing import Optional


class PatternError(Exception):
    """A mistake in a pattern or operator definition.

    Messages raised while lowering a pattern name the pattern, the source
    location (``file:line``) and the problem.
    """


class GraphError(ValueError):
    """A malformed graph construction (wrong arity, foreign node, bad shape)."""


class OutOfFuel(Exception):
    """The matcher ran out of fuel before deciding match or no match.

    Distinct from "no match", which is reported as ``None``.
    """


class PatternWarning(UserWarning):
    """A pattern that loads but deserves a look: one outside the class
    whose fuel is proved to suffice (not descending: a search there may
    run until the fuel or the memory budget stops it)."""


class RewriteWarning(UserWarning):
    """A rewrite that ran but could not do what was likely asked: e.g. a
    PyTorch graph of torch-level calls (``torch.fx.symbolic_trace``), which
    rules over ATen operators never match."""


class MemoryBudget(OutOfFuel):
    """An engine stopped a search that exceeded its memory budget
    (``PYPM_MEMORY_MB``, default 192 MB; the verified engine counts heap growth
    plus 256 bytes per graph node, the reference engine about 1 KB per live
    choice point): undecided, like :class:`OutOfFuel`; the engine answers
    later calls normally."""


class EngineUnavailable(RuntimeError):
    """The verified engine (the engine library, a shared library) cannot be loaded."""


class EngineError(RuntimeError):
    """The engine library returned a non-zero error code.

    Attributes: ``code`` (int), ``name`` (``pypm_error_name(code)``) and
    ``detail`` (``pypm_last_error()``).
    """

    def __init__(self, code: int, name: str, detail: str, call: str = ""):
        self.code = code
        self.name = name
        self.detail = detail
        where = f"{call}: " if call else ""
        super().__init__(f"{where}{name} (code {code}): {detail}")


def first_line(e: BaseException, limit: Optional[int] = None) -> str:
    """The first line of ``str(e)``, stripped, cut to ``limit`` characters
    (None: whole): what a one-line message shows of an exception, whose
    message may run over many lines (a traceback, a listing). ``""`` when
    the message is empty; callers that show nothing else of ``e`` write
    ``first_line(e) or type(e).__name__``."""
    lines = str(e).strip().splitlines()
    line = lines[0].strip() if lines else ""
    return line if limit is None else line[:limit]
