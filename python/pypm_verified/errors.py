"""Exceptions raised by pypm_verified."""


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
    """The verified engine (the shared library) cannot be loaded."""


class EngineError(RuntimeError):
    """The shared library returned a non-zero error code.

    Attributes: ``code`` (int), ``name`` (``pypm_error_name(code)``) and
    ``detail`` (``pypm_last_error()``).
    """

    def __init__(self, code: int, name: str, detail: str, call: str = ""):
        self.code = code
        self.name = name
        self.detail = detail
        where = f"{call}: " if call else ""
        super().__init__(f"{where}{name} (code {code}): {detail}")
