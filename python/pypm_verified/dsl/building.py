"""The rule build context: while a rule body runs, operator calls that are
not pattern terms go to the current *builder* -- a :class:`~pypm_verified.Graph`
for ``pm.rewrite``, the FX builder of :mod:`pypm_verified.torch.driver` for
PyTorch programs. A builder has one method, ``apply(op, *args, shape=None,
dtype=None)``, which adds the node and returns it."""
from __future__ import annotations

import contextlib
import threading
from typing import Optional

__all__ = ["building_in", "current_builder"]

_tls = threading.local()


@contextlib.contextmanager
def building_in(builder):
    """``with building_in(builder):`` operator calls without node arguments
    (``Zero()``, ``Add(1, 2)``) are built by ``builder`` (rule bodies)."""
    saved = getattr(_tls, "builder", None)
    _tls.builder = builder
    try:
        yield
    finally:
        _tls.builder = saved


def current_builder() -> Optional[object]:
    """The builder of the rule body running on this thread, or None."""
    return getattr(_tls, "builder", None)
