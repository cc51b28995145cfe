"""The command line's use of Python's cyclic garbage collector.

With torch imported, the process holds some 350,000 objects that live
until it ends (modules, functions, torch's operator tables), and loading
and exporting a model adds the program's. CPython's collector walks every
one of them at each full (generation-2) collection, and the allocations of
the imports, the load, the rewrite and the numerics check set off several:
on the 2-layer example BERT six, 0.5 s in all, four of them while torch
is imported (bench/results/cli.md).

:func:`settle` moves the objects alive at that point out of the
collector's reach (:func:`gc.freeze`): objects made later are collected as
before, and the frozen ones are still freed when their count drops to
zero; only a cycle that was already garbage when frozen is kept until the
process ends. :func:`importing` pauses the collector while modules are
imported (they make long-lived objects, little garbage), then freezes.

Only the console entry (:func:`.app.run`) turns it on (:func:`enable`), as
the process is then the command's: :func:`.app.main` called in another
program (a test, a notebook) leaves that program's collector alone.
``PYPM_FREEZE_HEAP=0`` turns it off."""
from __future__ import annotations

import contextlib
import gc
import os

#: set to 0 (or false, no, off): the console entry leaves the collector as it is
FREEZE_VAR = "PYPM_FREEZE_HEAP"

_enabled = False


def enable() -> None:
    """Let :func:`settle` freeze (the console entry, once the process is the
    command's), unless ``PYPM_FREEZE_HEAP`` says no."""
    global _enabled
    _enabled = os.environ.get(FREEZE_VAR, "1").strip().lower() not in ("0", "false", "no",
                                                                       "off")


def settle() -> None:
    """After a phase that leaves long-lived objects (torch imported, the
    model loaded): freeze what is alive now, when :func:`enable` allowed it."""
    if _enabled:
        gc.freeze()


@contextlib.contextmanager
def importing():
    """Around imports (torch, the library): the collector paused, then
    :func:`settle`, when :func:`enable` allowed it."""
    if not _enabled:
        yield
        return
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
        gc.freeze()


def enabled() -> bool:
    """Whether :func:`settle` freezes."""
    return _enabled
