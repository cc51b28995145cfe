"""Native fast paths: a CPython C extension, optional.

``_fxreader`` (source ``_fxreader.c``, built in place by ``build.py``, which
``make venv`` runs) reads a torch FX graph into the term graph in one walk
of its node list (:meth:`pypm_verified.torch.importer.TermGraph.build`),
re-reads a call whose arguments a rewrite changed
(:meth:`~pypm_verified.torch.importer.TermGraph.reimport`), walks a pass of
the rewrite driver to its next node to try, re-reading on the way
(:meth:`pypm_verified.torch.driver.Driver._walk_natively`), and
writes the engine's int64 graph encoding of the term graph's columns
(:func:`pypm_verified.core.encoding.encode_graph`), and makes the rewrite
validator's encodings of the FX graph
(:meth:`pypm_verified.torch.validate_fx.FxChecker.encode`) and the
correspondence of a pass's nodes before and after
(:meth:`pypm_verified.rewriting.validate.Pass.correspond`), reads a firing's
match in the graph before its pass where the root's term changed in the
pass (:meth:`pypm_verified.torch.validate_fx.FxChecker._read_unchanged`),
and calls the
engine library's ``pypm_match`` for a run of patterns at a node without a
Python frame per pattern (:meth:`pypm_verified.engines.binding.SetMatcher.first`,
the driver's matching). It also writes the engine's encoding of an FX
graph's term graph directly, hash-consing in C with no Python term graph
(``engine_graph``: :func:`pypm_verified.torch.fxmatch.match_fx`). Each gives
what the Python code gives, state for state and word for word
(tests/test_fxreader.py and tests/test_fxmatch.py hold them equal on
exported models and on random graphs); the Python code
stays: it is used when the extension is not built (a wheel, a platform
without a C compiler), when ``PYPM_NATIVE=0`` is set, inside
:func:`paths` ``(False)`` -- the driver's reference engine runs there, so
that the independent configuration (reference matcher, Python reader) is
the one the native one is held equal to -- and it is what the reader calls
for every case but the common ones.
"""
from __future__ import annotations

import contextlib
import contextvars
import os
from typing import Optional

ENV = "PYPM_NATIVE"  # 0/off/false/no: the Python paths, even with the extension built

try:
    from . import _fxreader as _module
    _load_error: Optional[str] = None
except ImportError as e:  # not built (or built for another interpreter)
    _module = None
    _load_error = str(e)


def disabled() -> bool:
    """Whether ``PYPM_NATIVE`` turns the native paths off."""
    return os.environ.get(ENV, "").strip().lower() in ("0", "off", "false", "no")


_UNSET = object()
# inside paths(): the reader decided at its entry (the module or None), so
# that the hot paths do not read the environment at every call
_decided = contextvars.ContextVar("pypm_native_reader", default=_UNSET)


@contextlib.contextmanager
def paths(native: bool):
    """A context in which :func:`reader` gives the reader only if
    ``native`` (and it is built and ``PYPM_NATIVE`` does not turn it off,
    read once, at the entry): ``paths(False)`` runs the Python paths,
    ``paths(True)`` restores the default inside another."""
    token = _decided.set(_module if native and _module is not None and not disabled()
                         else None)
    try:
        yield
    finally:
        _decided.reset(token)


def reader():
    """The ``_fxreader`` module, or None: not built, turned off, or inside
    :func:`paths` ``(False)``."""
    got = _decided.get()
    if got is not _UNSET:
        return got
    if _module is None or disabled():
        return None
    return _module


def status() -> str:
    """One line: whether the native reader is used, and why not."""
    if _module is None:
        return f"native FX reader: not built ({_load_error}); the Python reader is used"
    if disabled():
        return f"native FX reader: built, turned off by {ENV}"
    return f"native FX reader: {_module.__file__}"
