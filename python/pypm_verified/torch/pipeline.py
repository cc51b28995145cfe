"""Rewrite a loaded program end to end: copy its graph, run the driver,
check numerics, save atomically."""
from __future__ import annotations

import copy
import os
import time
import warnings
from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Tuple

import torch
import torch.fx as fx

from .._atomic import cleanup_on_signal, write_atomic  # noqa: F401 -- cleanup_on_signal: API
from .check import Numerics, check_run_limit, compare, fits
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
                    check_profitability: bool = True, observer=None, skip=None,
                    max_memory="default") -> Result:
    """Rewrite ``prog`` (a :class:`~.loader.LoadedModel`) with ``patterns`` (default: the
    rule library) for ``target`` and, if ``check``, compare numerics with the original
    (for a program with dynamic shapes also on inputs of two other sizes:
    ``Result.other_sizes``).
    ``check_profitability=False`` lets every rule fire regardless of the
    measured table (``ctx.profitable`` answers True). ``Result.changed`` says
    whether the graph changed at all. ``observer`` is the driver's (told of
    every match and what its rules did: :class:`~.driver.Driver`); ``skip``
    is the driver's too (firings the search chose to skip: :mod:`.search`).
    ``max_memory``: the numerics check's limit, as :func:`check_numerics`
    takes it."""
    if patterns is None:
        from ..library import default_patterns
        patterns = default_patterns()
    ep = copy_program(prog.ep)
    before = _renamed_structure(ep.graph_module)
    driver = Driver(ep.graph_module, patterns, engine=engine, target=target,
                    max_iterations=max_iterations, progress=progress,
                    check_profitability=check_profitability, observer=observer, skip=skip)
    report = run_on_program(driver, ep)
    changed = report.total > 0 or _renamed_structure(ep.graph_module) != before
    num, sizes = (check_numerics(prog, ep, n_random, max_memory=max_memory) if check
                  else (None, ()))
    return Result(ep, report, num, changed, sizes)


def run_on_program(driver: Driver, ep) -> RewriteReport:
    """Run ``driver`` (made on ``ep.graph_module``, rewritten in place) and keep
    ``ep``'s bookkeeping in step: the rules see its weights and user inputs,
    constants the rules create join its constants, rewritten outputs keep
    their names in its signature, and the program is validated."""
    driver.weights, driver.user_inputs = _weights(ep)
    report = driver.run()
    _add_constants(ep, driver)
    for spec in ep.graph_signature.output_specs:  # outputs that were rewritten
        arg = getattr(spec, "arg", None)
        if hasattr(arg, "name"):
            arg.name = driver.replacement_name(arg.name)
    ep.validate() if hasattr(ep, "validate") else ep._validate()
    return report


def _weights(ep):
    """The program's parameters, buffers and constants by placeholder name
    (what ``RuleContext.fold_cat`` may concatenate and ``RuleContext.constant``
    read at rewrite time), and the names of the user inputs. A buffer the
    program writes into is not one: at a call it holds what the previous
    call wrote, not the stored value."""
    from torch.export.graph_signature import InputKind
    state = ep.state_dict
    consts = getattr(ep, "constants", {}) or {}
    mutated = set(getattr(ep.graph_signature, "buffers_to_mutate", {}).values())
    weights, users = {}, set()
    for spec in ep.graph_signature.input_specs:
        name = getattr(spec.arg, "name", None)
        if spec.kind == InputKind.USER_INPUT:
            users.add(name)
        elif spec.target in mutated:
            continue
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


def check_numerics(prog: LoadedModel, ep, n_random: int = 2, max_memory="default"
                   ) -> Tuple[Numerics, Tuple[Dict[str, int], ...]]:
    """Compare ``ep`` with ``prog``'s program on the example inputs and
    ``n_random`` random sets; for a program with dynamic input sizes also on
    random inputs of two other sizes inside the program's ranges (a size the
    original program rejects, e.g. one breaking a relation between sizes, is
    skipped). Returns the :class:`Numerics` and those sizes (input axis,
    e.g. ``input_ids.shape[1]``, -> value).

    ``max_memory`` (bytes, a size string like ``"8G"``, ``"default"``:
    min(16 GiB, half the physical memory); None or 0: no limit): each
    program's run on the example inputs is estimated from its shapes before
    anything runs (:mod:`.memory`) and refused past it with
    :class:`~.memory.MemoryLimitExceeded`; a size of a dynamic program whose
    run would exceed it is not tried. If the original program itself fails
    to run on its inputs: :class:`~.check.OriginalFailed`."""
    from . import dynamic
    from .memory import resolve_limit
    limit = resolve_limit(max_memory)
    check_run_limit(prog.ep, ep, prog.args, prog.kwargs, limit)  # before any input is made
    extra, sizes = [], ()
    where = {s: w for s, (_, _, _, w) in dynamic.input_symbols(prog.ep).items()}
    for i, vals in enumerate(dynamic.other_sizes(prog.ep, 2)):
        if not fits(prog.ep, ep, limit, sizes=vals):
            continue
        try:
            extra.append(dynamic.other_size_inputs(prog.ep, prog.args, prog.kwargs, vals,
                                                   seed=100 + i))
        except ValueError:  # an input whose shape the symbols do not determine
            continue
        sizes += ({where.get(k, str(k)): v for k, v in vals.items()},)
    return compare(prog.ep, ep, prog.args, prog.kwargs, n_random=n_random,
                   extra_sets=extra, limit=limit), sizes


# ------------------------------------------------------------------ saving

def save_atomic(ep, path: str) -> None:
    """``torch.export.save`` ``ep`` to ``path``, whole or not at all, with
    :func:`pypm_verified._atomic.write_atomic`: into a hidden temporary
    ``.pypm-tmp-<pid>-<host>-<random>.pt2`` next to ``path``, fsynced,
    renamed over ``path``, the directory fsynced.

    * An OS error while writing (a full disk: ``ENOSPC``, a quota, an I/O
      error) is an ``OSError`` naming ``path``; ``path`` keeps its old
      content and the temporary is removed. (torch's own file writer aborts
      the process on a failed write; here torch writes into a file object
      that never fails, and the error is raised once torch returns.)
    * On SIGTERM/SIGINT/SIGHUP the temporary is removed and the signal then
      acts as it would have (:func:`cleanup_on_signal`); the temporary's name
      is registered before the file exists, so no moment is unprotected.
    * Temporaries that dead processes left in that directory (a SIGKILL, a
      crash) are removed first (:func:`pypm_verified._atomic.sweep_stale`).
    * The file gets the permissions a plain ``open`` would give a new file
      (``0o666 & ~umask``).

    The archive's inner folder is ``archive/`` (what ``torch.export.save``
    writes to a file object); loaders do not depend on it."""
    path = os.fspath(path)
    write_atomic(path, lambda f: torch.export.save(ep, f), what=f"saving {path}")


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
