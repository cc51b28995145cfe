"""Rewrite a loaded program end to end: copy its graph, run the driver,
check numerics, save atomically."""
from __future__ import annotations

import copy
import os
import tempfile
import time
from dataclasses import dataclass
from typing import Optional, Sequence

import torch
import torch.fx as fx

from .check import Numerics, compare
from ..rewriting.report import RewriteReport
from .driver import Driver
from .loader import LoadedModel


@dataclass
class Result:
    """``ep`` (the rewritten ExportedProgram; the input's is untouched),
    ``report`` (the driver's), ``numerics`` (None if not checked)."""

    ep: object
    report: RewriteReport
    numerics: Optional[Numerics] = None


def copy_program(ep):
    """An ExportedProgram with a copy of ``ep``'s graph, sharing its weights."""
    g = fx.Graph()
    out = g.graph_copy(ep.graph_module.graph, {})
    g.output(out)
    gm = fx.GraphModule(ep.graph_module, g)
    return ep._update(gm, copy.deepcopy(ep.graph_signature))


def rewrite_program(prog: LoadedModel, patterns: Optional[Sequence] = None, engine: str = "verified",
                    target: str = "cuda", max_iterations: int = 20, check: bool = True,
                    n_random: int = 2, progress=None) -> Result:
    """Rewrite ``prog`` (a :class:`~.loader.LoadedModel`) with ``patterns`` (default: the
    rule library) and, if ``check``, compare numerics with the original."""
    if patterns is None:
        from ..library import default_patterns
        patterns = default_patterns()
    ep = copy_program(prog.ep)
    driver = Driver(ep.graph_module, patterns, engine=engine, target=target,
                    max_iterations=max_iterations, progress=progress)
    report = driver.run()
    for spec in ep.graph_signature.output_specs:  # outputs that were rewritten
        arg = getattr(spec, "arg", None)
        if hasattr(arg, "name"):
            arg.name = driver.replacement_name(arg.name)
    ep.validate() if hasattr(ep, "validate") else ep._validate()
    num = compare(prog.ep, ep, prog.args, prog.kwargs, n_random=n_random) if check else None
    return Result(ep, report, num)


def save_atomic(ep, path: str) -> None:
    """``torch.export.save`` to a temporary file next to ``path``, then
    rename over it: ``path`` is written whole or not at all."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".pypm-tmp-", suffix=".pt2", dir=d)
    os.close(fd)
    try:
        torch.export.save(ep, tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


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
