"""Rewrite a loaded program end to end: copy its graph, run the driver,
check numerics, save atomically."""
from __future__ import annotations

import contextlib
import copy
import os
import shutil
import signal
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass
from typing import Callable, Dict, Iterator, Optional, Sequence, Tuple

import torch
import torch.fx as fx

from .check import Numerics, compare
from ..rewriting.report import RewriteReport
from .driver import Driver
from .loader import LoadedModel


@dataclass
class Result:
    """``ep`` (the rewritten ExportedProgram; the input's is untouched),
    ``report`` (the driver's), ``numerics`` (None if not checked) and
    ``changed``: whether the rewritten graph differs from the loaded one
    (a rule fired, or duplicates were merged). When it is False, ``ep`` is
    only the re-exported, decomposed input (not byte-identical to the file
    given, and possibly with more nodes): a caller may skip writing it."""

    ep: object
    report: RewriteReport
    numerics: Optional[Numerics] = None
    changed: bool = True
    other_sizes: Tuple[Dict[str, int], ...] = ()
    """For a program with dynamic shapes: the sizes (input axis -> value) of the
    extra input sets the numerics ran both programs on, besides the example's
    (the rewritten program must accept them: it keeps its dynamic sizes)."""


def copy_program(ep):
    """An ExportedProgram with a copy of ``ep``'s graph, sharing its weights.
    Node names are kept exactly (``graph_copy`` would rename a placeholder
    named after a Python builtin, ``input`` -> ``input_1``, and the graph
    signature, which names nodes, would no longer match)."""
    g = fx.Graph()
    val_map = {}
    out = g.graph_copy(ep.graph_module.graph, val_map)
    g.output(out)
    ns = g._graph_namespace
    for old, new in val_map.items():
        if new.name != old.name:
            new.name = old.name
            if new.op == "placeholder":
                new.target = old.target
            ns._rename_object(new, old.name)
    gm = fx.GraphModule(ep.graph_module, g)
    with warnings.catch_warnings():  # torch's own pytree deprecation, from deepcopy
        warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)",
                                category=FutureWarning)
        return ep._update(gm, copy.deepcopy(ep.graph_signature))


def _renamed_structure(gm) -> list:
    """The graph as (op, target, args, kwargs) with nodes numbered in order:
    equal for equal graphs whatever their nodes are named."""
    idx = {n: i for i, n in enumerate(gm.graph.nodes)}

    def arg(a):
        return fx.node.map_arg(a, lambda n: ("%", idx[n]))
    return [(n.op, str(n.target) if n.op != "placeholder" else "", repr(arg(n.args)),
             repr(arg(n.kwargs))) for n in gm.graph.nodes]


def rewrite_program(prog: LoadedModel, patterns: Optional[Sequence] = None,
                    engine: str = "verified", target: str = "cpu", max_iterations: int = 20,
                    check: bool = True, n_random: int = 2, progress=None,
                    check_profitability: bool = True, observer=None, skip=None) -> Result:
    """Rewrite ``prog`` (a :class:`~.loader.LoadedModel`) with ``patterns`` (default: the
    rule library) for ``target`` and, if ``check``, compare numerics with the original
    (for a program with dynamic shapes also on inputs of two other sizes:
    ``Result.other_sizes``).
    ``check_profitability=False`` lets every rule fire regardless of the
    measured table (``ctx.profitable`` answers True). ``Result.changed`` says
    whether the graph changed at all. ``observer`` is the driver's (told of
    every match and what its rules did: :class:`~.driver.Driver`); ``skip``
    is the driver's too (firings the search chose to skip: :mod:`.search`)."""
    if patterns is None:
        from ..library import default_patterns
        patterns = default_patterns()
    ep = copy_program(prog.ep)
    before = _renamed_structure(ep.graph_module)
    driver = Driver(ep.graph_module, patterns, engine=engine, target=target,
                    max_iterations=max_iterations, progress=progress,
                    check_profitability=check_profitability, observer=observer, skip=skip)
    driver.weights, driver.user_inputs = _weights(ep)
    report = driver.run()
    _add_constants(ep, driver)
    for spec in ep.graph_signature.output_specs:  # outputs that were rewritten
        arg = getattr(spec, "arg", None)
        if hasattr(arg, "name"):
            arg.name = driver.replacement_name(arg.name)
    ep.validate() if hasattr(ep, "validate") else ep._validate()
    changed = report.total > 0 or _renamed_structure(ep.graph_module) != before
    num, sizes = check_numerics(prog, ep, n_random) if check else (None, ())
    return Result(ep, report, num, changed, sizes)


def _weights(ep):
    """The program's parameters, buffers and constants by placeholder name
    (what ``RuleContext.fold_cat`` may concatenate at rewrite time), and the
    names of the user inputs."""
    from torch.export.graph_signature import InputKind
    state = ep.state_dict
    consts = getattr(ep, "constants", {}) or {}
    weights, users = {}, set()
    for spec in ep.graph_signature.input_specs:
        name = getattr(spec.arg, "name", None)
        if spec.kind == InputKind.USER_INPUT:
            users.add(name)
        elif spec.target in state:
            weights[name] = state[spec.target]
        elif spec.target in consts and isinstance(consts[spec.target], torch.Tensor):
            weights[name] = consts[spec.target]
    return weights, frozenset(users)


def _add_constants(ep, driver) -> None:
    """Register the weights the driver concatenated at rewrite time as
    constant tensors of ``ep`` (lifted constants: an input spec before the
    user inputs, the tensor in ``ep.constants``), dropping those no longer
    used."""
    from torch.export.graph_signature import InputKind, InputSpec, TensorArgument
    if not driver.new_constants:
        return
    g = ep.graph_module.graph
    specs = list(ep.graph_signature.input_specs)
    at = next((i for i, s in enumerate(specs) if s.kind == InputKind.USER_INPUT), len(specs))
    new = []
    for node, t in driver.new_constants:
        if node.graph is not g:
            continue
        if not node.users:
            g.erase_node(node)
            continue
        ep.constants[node.name] = t
        new.append(InputSpec(kind=InputKind.CONSTANT_TENSOR, arg=TensorArgument(name=node.name),
                             target=node.name, persistent=None))
    specs[at:at] = new
    ep.graph_signature.input_specs[:] = specs
    ep.graph_module.recompile()


def check_numerics(prog: LoadedModel, ep, n_random: int = 2
                   ) -> Tuple[Numerics, Tuple[Dict[str, int], ...]]:
    """Compare ``ep`` with ``prog``'s program on the example inputs and
    ``n_random`` random sets; for a program with dynamic input sizes also on
    random inputs of two other sizes inside the program's ranges (a size the
    original program rejects, e.g. one breaking a relation between sizes, is
    skipped). Returns the :class:`Numerics` and those sizes (input axis,
    e.g. ``input_ids.shape[1]``, -> value)."""
    from . import dynamic
    extra, sizes = [], ()
    where = {s: w for s, (_, _, _, w) in dynamic.input_symbols(prog.ep).items()}
    for i, vals in enumerate(dynamic.other_sizes(prog.ep, 2)):
        try:
            extra.append(dynamic.other_size_inputs(prog.ep, prog.args, prog.kwargs, vals,
                                                   seed=100 + i))
        except ValueError:  # an input whose shape the symbols do not determine
            continue
        sizes += ({where.get(k, str(k)): v for k, v in vals.items()},)
    return compare(prog.ep, ep, prog.args, prog.kwargs, n_random=n_random,
                   extra_sets=extra), sizes


# ------------------------------------------------------------------ saving

def _umask() -> int:
    """The process umask, read without changing it where Linux allows."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # elsewhere: the usual set-and-restore
    os.umask(mask)
    return mask


_SIGNALS = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGINT", None),
                             getattr(signal, "SIGHUP", None)) if s is not None)


@contextlib.contextmanager
def cleanup_on_signal(cleanup: Callable[[], None], what: str = "the save") -> Iterator[None]:
    """Run ``cleanup`` if SIGTERM, SIGINT or SIGHUP arrives inside the block,
    then act as the signal would have: the previous Python handler is called
    (Ctrl-C's default raises KeyboardInterrupt; a CLI's handler may raise its
    own exception), and a default (``SIG_DFL``) disposition is re-delivered,
    ending the process with the conventional status (128 + signal number in
    a shell). Ignored signals stay ignored. The previous handlers are
    restored when the block ends. Outside the main thread (where handlers
    cannot be set) the block runs unprotected."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for s in _SIGNALS:
        prev = signal.getsignal(s)
        if prev is None or prev == signal.SIG_IGN:
            continue  # set outside Python (cannot be restored) or ignored: leave it
        previous[s] = prev

    def restore():
        for s, prev in list(previous.items()):
            try:
                signal.signal(s, prev)
            except (ValueError, OSError):
                pass
        previous.clear()

    def handler(signum, frame):
        prev = previous.get(signum, signal.SIG_DFL)
        try:
            cleanup()
        finally:
            restore()
        if callable(prev):
            prev(signum, frame)
            raise InterruptedError(f"{what} was interrupted by signal "
                                   f"{signal.Signals(signum).name}; nothing written")
        os.kill(os.getpid(), signum)  # SIG_DFL: terminate as the signal would
        raise InterruptedError(f"{what} was interrupted by signal "
                               f"{signal.Signals(signum).name}; nothing written")

    try:
        for s in list(previous):
            signal.signal(s, handler)
        yield
    finally:
        restore()


def save_atomic(ep, path: str) -> None:
    """``torch.export.save`` to a hidden temporary next to ``path``, then
    rename it over ``path``: ``path`` is written whole or not at all.

    The file gets the permissions a plain ``open`` would give a new file
    (``0o666 & ~umask``). The temporary (a ``.pypm-tmp-*`` directory holding
    a file of ``path``'s name, so the archive's inner folder is named after
    ``path``) is removed on any error, and on SIGTERM/SIGINT/SIGHUP during
    the save, after which the signal acts as it would have (see
    :func:`cleanup_on_signal`)."""
    path = os.fspath(path)
    d = os.path.dirname(os.path.abspath(path))
    base = os.path.basename(path)
    if not base.endswith(".pt2"):
        base += ".pt2"  # torch.export wants the suffix; the rename drops it again
    made = []

    def cleanup():
        for t in made:
            shutil.rmtree(t, ignore_errors=True)

    try:
        with cleanup_on_signal(cleanup, f"saving {path}"):
            made.append(tempfile.mkdtemp(prefix=".pypm-tmp-", dir=d))
            tmp = os.path.join(made[0], base)
            torch.export.save(ep, tmp)
            os.chmod(tmp, 0o666 & ~_umask())
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
    finally:
        cleanup()


def median_time(fn, *args, repeat: int = 20, warmup: int = 3, **kwargs) -> float:
    """Median wall time of ``fn(*args, **kwargs)`` in seconds (no grad)."""
    with torch.no_grad():
        for _ in range(warmup):
            fn(*args, **kwargs)
        ts = []
        for _ in range(repeat):
            t = time.perf_counter()
            fn(*args, **kwargs)
            ts.append(time.perf_counter() - t)
    ts.sort()
    return ts[len(ts) // 2]
