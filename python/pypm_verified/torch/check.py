"""Numerics: run the original and the rewritten program on the example
inputs and on random inputs of the same shapes and dtypes; compare every
output tensor against a dtype-aware tolerance. Non-finite values must
agree exactly: NaN where the reference has NaN, the same infinities.
Outputs are flattened with pytree, so model-output classes (e.g.
``transformers``' ``ModelOutput``) are compared leaf by leaf.

The original program runs first on every input set; if it fails on its own
sample inputs (or random ones of their shapes) that is
:class:`OriginalFailed`, never the rewritten program's fault. With a memory
``limit``, each program's run is estimated from its shapes before anything
runs (:mod:`.memory`) and refused past it (:class:`~.memory.MemoryLimitExceeded`);
the random input sets are made one at a time and outputs are compared in
chunks, so the check itself holds no more than one input set and the
original's outputs besides the run it estimates.

A mismatch is blamed on the firings responsible (:func:`blame`): the
rewrite is re-applied with subsets of its firings (the driver declines the
others), each result run with torch on the input sets that failed, and the
subsets bisected down to the firings that reproduce it, each named with its
rule's file and line."""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.utils._pytree as pytree

from ..errors import first_line

# dtype -> (atol, rtol): what a reordered float computation may change
TOLERANCE = {
    torch.float64: (1e-9, 1e-7),
    torch.float32: (1e-4, 1e-3),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (5e-2, 5e-2),
}


@dataclass
class Numerics:
    """``max_abs``/``max_rel`` over every output of every run (``max_rel``
    relative to the output's largest magnitude), ``ok`` (all within
    tolerance), ``runs`` (input sets tried), ``failures`` (what exceeded),
    ``failed_runs`` (the indices of the input sets that disagreed: 0 the
    sample inputs, 1.. the random sets, then the extra sets) and ``blame``
    (filled on a mismatch by the CLI from :func:`blame`: the firings
    responsible, one line each)."""

    max_abs: float = 0.0
    max_rel: float = 0.0
    ok: bool = True
    runs: int = 0
    failures: List[str] = field(default_factory=list)
    failed_runs: List[int] = field(default_factory=list)
    blame: List[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"max_abs": self.max_abs, "max_rel": self.max_rel, "ok": self.ok,
                "runs": self.runs, "failures": self.failures, "blame": self.blame}


class OriginalFailed(RuntimeError):
    """The original program fails to run on its own sample inputs (or on
    random inputs of their shapes): the program or its inputs are at
    fault, not the rewrite. ``run``: the input set (0: the sample inputs,
    1.. the random sets); ``__cause__`` is what it raised."""

    def __init__(self, message: str, run: int = 0):
        super().__init__(message)
        self.run = run

    def __reduce__(self):  # picklable (a worker process may raise it)
        return type(self), (str(self), self.run)


#: elements compared at once (float64 temporaries of this many elements)
CHUNK = 1 << 22


def random_like(args, kwargs, seed: int):
    """Inputs of the same shapes/dtypes: floats normal, integers and bools
    uniform within the example's own range (token ids stay valid ids)."""
    g = torch.Generator().manual_seed(seed)

    def one(t):
        if not isinstance(t, torch.Tensor):
            return t
        if t.is_floating_point():
            return torch.randn(t.shape, generator=g, dtype=t.dtype).to(t.device)
        if t.dtype == torch.bool:
            return (torch.rand(t.shape, generator=g) < 0.5).to(t.device)
        if t.numel() == 0:
            return t.clone()
        lo, hi = int(t.min()), int(t.max())
        return torch.randint(lo, hi + 1, t.shape, generator=g, dtype=t.dtype).to(t.device)
    return pytree.tree_map(one, (args, kwargs))


def _tensors(out):
    return [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]


def _compare_floats(r, o, atol: float, rtol: float):
    """Compare two float tensors of one shape in chunks of :data:`CHUNK`
    elements: None if their non-finite values differ, else ``(finite,
    max abs diff, max |r|, elements out of tolerance)`` over the finite
    positions."""
    rf, of = r.reshape(-1), o.reshape(-1)
    n_finite, mabs, scale, nbad = 0, 0.0, 0.0, 0
    for at in range(0, rf.numel(), CHUNK):
        r64, o64 = rf[at:at + CHUNK].double(), of[at:at + CHUNK].double()
        finite = torch.isfinite(r64)
        # NaN where the reference has NaN, the same infinities elsewhere
        # (torch.equal is False on NaN == NaN, so NaNs are compared by mask)
        nan = torch.isnan(r64)
        inf = ~finite & ~nan
        if not torch.equal(finite, torch.isfinite(o64)) or not torch.equal(
                nan, torch.isnan(o64)) or not torch.equal(r64[inf], o64[inf]):
            return None
        rfin = r64[finite]
        if rfin.numel() == 0:
            continue
        diff = (rfin - o64[finite]).abs()
        n_finite += rfin.numel()
        mabs = max(mabs, float(diff.max()))
        scale = max(scale, float(rfin.abs().max()))
        nbad += int((diff > atol + rtol * rfin.abs()).sum())
    return n_finite, mabs, scale, nbad


def compare(orig_ep, new_ep, args: Tuple, kwargs: dict, n_random: int = 2,
            seed: int = 0, extra_sets: Sequence = (), limit: Optional[int] = None) -> Numerics:
    """Run both programs on the example inputs, ``n_random`` random sets and
    ``extra_sets`` (``(args, kwargs)`` pairs, e.g. inputs of other sizes for
    a program with dynamic shapes; a set the original program itself rejects
    is skipped, not counted in ``runs``).

    The original runs first on each set: if it fails on the example inputs
    or a random set, :class:`OriginalFailed` (what the rewritten program
    raises propagates as is). ``limit`` (bytes; None: none): before anything
    runs, each program's run on the example inputs is estimated
    (:func:`.memory.estimate_run_bytes`; the rewritten one's plus the
    original's outputs, kept for the comparison) and
    :class:`~.memory.MemoryLimitExceeded` raised past it
    (:func:`check_run_limit`; the random sets have the example's shapes;
    ``extra_sets`` are the caller's to size: :func:`fits`)."""
    res = Numerics()
    check_run_limit(orig_ep, new_ep, args, kwargs, limit)
    try:
        a_mod = orig_ep.module()
    except Exception as e:  # noqa: BLE001 -- whatever torch raises
        raise OriginalFailed("the original program fails to run on its sample inputs: "
                             f"{type(e).__name__}: {first_line(e)}") from e
    b_mod = new_ep.module()
    n_own = 1 + n_random
    # made one at a time: a random set of a huge (expanded) input is the
    # input materialized, and only the one being run is held
    sets = itertools.chain([(args, kwargs)],
                           (random_like(args, kwargs, seed + i) for i in range(n_random)),
                           extra_sets)
    with torch.no_grad():
        for i, (a, k) in enumerate(sets):
            try:
                ref = _tensors(a_mod(*a, **k))
            except Exception as e:  # noqa: BLE001 -- an extra set outside the program's sizes
                if i < n_own:
                    which = "its sample inputs" if i == 0 else (
                        f"random inputs of its sample inputs' shapes (set {i})")
                    raise OriginalFailed(f"the original program fails to run on {which}: "
                                         f"{type(e).__name__}: {first_line(e)}", i) from e
                continue
            got = _tensors(b_mod(*a, **k))
            res.runs += 1
            bad = len(res.failures)
            if len(ref) != len(got):
                res.ok = False
                res.failures.append(f"run {i}: {len(ref)} outputs vs {len(got)}")
                continue
            for j, (r, o) in enumerate(zip(ref, got)):
                if r.shape != o.shape or r.dtype != o.dtype:
                    res.ok = False
                    res.failures.append(f"run {i} output {j}: {tuple(r.shape)} {r.dtype} vs "
                                        f"{tuple(o.shape)} {o.dtype}")
                    continue
                if not r.is_floating_point():
                    if not torch.equal(r, o):
                        res.ok = False
                        res.failures.append(f"run {i} output {j}: integer outputs differ")
                    continue
                atol, rtol = TOLERANCE.get(r.dtype, (1e-4, 1e-3))
                got_cmp = _compare_floats(r, o, atol, rtol)
                if got_cmp is None:
                    res.ok = False
                    res.failures.append(f"run {i} output {j}: non-finite values differ")
                    continue
                n_finite, mabs, scale, nbad = got_cmp
                if n_finite == 0:
                    continue
                res.max_abs = max(res.max_abs, mabs)
                res.max_rel = max(res.max_rel, mabs / scale if scale > 0 else 0.0)
                if nbad:
                    res.ok = False
                    res.failures.append(
                        f"run {i} output {j} ({r.dtype}): max abs diff {mabs:.3g} exceeds "
                        f"atol {atol:g} + rtol {rtol:g}*|ref| at {nbad} element(s)")
            if len(res.failures) > bad:
                res.failed_runs.append(i)
            del ref, got
    return res


def _disagrees(ref: List[torch.Tensor], got: List[torch.Tensor]) -> bool:
    """Whether outputs ``got`` disagree with ``ref`` as :func:`compare` judges."""
    if len(ref) != len(got):
        return True
    for r, o in zip(ref, got):
        if r.shape != o.shape or r.dtype != o.dtype:
            return True
        if not r.is_floating_point():
            if not torch.equal(r, o):
                return True
            continue
        atol, rtol = TOLERANCE.get(r.dtype, (1e-4, 1e-3))
        c = _compare_floats(r, o, atol, rtol)
        if c is None or c[3]:
            return True
    return False


@dataclass
class Blame:
    """The firings a numerics mismatch comes from (:func:`blame`):
    ``firings`` (``(rule, FX root, rule's file:line)``, in firing order),
    ``of`` (firings in the rewrite), ``checks`` (rewrites re-applied and
    run), ``together`` (the mismatch needs these firings together: no one of
    them alone reproduces it) and ``note`` (why nothing is blamed)."""

    firings: List[Tuple[str, str, str]] = field(default_factory=list)
    of: int = 0
    checks: int = 0
    together: bool = False
    note: str = ""

    def lines(self) -> List[str]:
        """What the CLI prints: a head line and one line per firing blamed
        (or the note)."""
        if not self.firings:
            return [self.note] if self.note else []
        tail = [f"({self.note})"] if self.note else []
        how = ("together (no one of them alone reproduces it)" if self.together
               and len(self.firings) > 1 else "each reproducing it alone")
        head = (f"the mismatch comes from {len(self.firings)} of the {self.of} firing(s), "
                f"{how} (bisected: {self.checks} rewrite(s) re-applied with subsets of the "
                "firings, run with torch on the failing inputs):")
        return [head] + [f"  rule {r!r} at {node} ({where})"
                         for r, node, where in self.firings] + tail


def input_set(args, kwargs, run: int, seed: int = 0):
    """The input set ``run`` of :func:`compare` (0: ``(args, kwargs)``; ``i``
    >= 1: the random set drawn from ``seed + i - 1``)."""
    return (args, kwargs) if run == 0 else random_like(args, kwargs, seed + run - 1)


def blame(prog, patterns, firings: Sequence[Tuple[str, str]], runs: Sequence[int] = (0,),
          engine: str = "verified", target: str = "cpu", check_profitability: bool = True,
          max_iterations: int = 20, max_checks: int = 64,
          rewrite: Optional[Callable] = None) -> Blame:
    """The firings a numerics mismatch comes from. ``prog``: the loaded
    model (:class:`~.loader.LoadedModel`); ``patterns`` and the options:
    those of the rewrite; ``firings``: its ``(rule, root FX name)`` in
    order (``RewriteReport.rewrites``); ``runs``: the input sets that
    disagreed (:func:`input_set`; the extra sets of other sizes are not
    redrawn: the sample inputs stand for them).

    The rewrite is re-applied with only a subset of the firings (the driver
    declines every other (rule, node): its ``skip``) and, with torch alone,
    the result is run on the same inputs and compared with the original's
    outputs. Bisection: a subset that reproduces the mismatch is split in
    halves, each tried alone and kept when it reproduces it; a subset
    neither half of which does is blamed whole (``together``). At most
    ``max_checks`` rewrites. ``rewrite``: the re-application (``(skip) ->
    ExportedProgram``; default: :func:`.pipeline.rewrite_program` with the
    options given)."""
    firings = list(dict.fromkeys((r, n) for r, n in firings))
    rules = {r.name: r for p in patterns for r in getattr(p, "rules", ())}
    out = Blame(of=len(firings))
    if not firings:
        out.note = "no rule fired: nothing to blame"
        return out
    if rewrite is None:
        from .pipeline import rewrite_program

        def rewrite(skip):
            return rewrite_program(prog, patterns, engine=engine, target=target,
                                   max_iterations=max_iterations, check=False, skip=skip,
                                   check_profitability=check_profitability).ep
    own = sorted({i for i in runs if 0 <= i})
    sets = [input_set(prog.args, prog.kwargs, i) for i in own] or [(prog.args, prog.kwargs)]
    mod = prog.ep.module()
    with torch.no_grad():
        refs = [_tensors(mod(*a, **k)) for a, k in sets]
    cache: Dict[frozenset, bool] = {}

    def bad(subset) -> bool:
        key = frozenset(subset)
        if key not in cache:
            if out.checks >= max_checks:
                raise _Spent()
            out.checks += 1
            ep = rewrite(lambda rule, node: (rule, node) not in key)
            m = ep.module()
            with torch.no_grad():
                cache[key] = any(_disagrees(ref, _tensors(m(*a, **k)))
                                 for ref, (a, k) in zip(refs, sets))
        return cache[key]

    culprits: List[Tuple[str, str]] = []  # found so far (kept if the checks run out)

    def find(subset) -> None:
        if len(subset) == 1:
            culprits.extend(subset)
            return
        half = len(subset) // 2
        before = len(culprits)
        for part in (subset[:half], subset[half:]):
            if bad(part):
                find(part)
        if len(culprits) == before:
            out.together = True
            culprits.extend(subset)

    try:
        if not bad(firings):
            out.note = ("the mismatch did not come back when the firings were re-applied "
                        "(it depends on more than which rules fired where)")
            return out
        find(firings)
    except _Spent:
        out.note = (f"stopped after {max_checks} re-applied rewrites: "
                    + ("more firings may be responsible" if culprits else "not narrowed down"))
        if not culprits:
            return out
    order = {f: i for i, f in enumerate(firings)}
    for r, n in sorted(culprits, key=order.get):
        rule = rules.get(r)
        out.firings.append((r, n, _short_where(rule.where) if rule is not None else "?"))
    return out


class _Spent(Exception):
    """:func:`blame` ran out of re-applied rewrites."""


def _short_where(where: str) -> str:
    from ..dsl.rules import short_path
    path, _, line = where.rpartition(":")
    return f"{short_path(path)}:{line}" if path else where


def check_run_limit(orig_ep, new_ep, args, kwargs, limit: Optional[int]) -> None:
    """Raise :class:`~.memory.MemoryLimitExceeded` if running the original
    program on ``(args, kwargs)``, or the rewritten one (``new_ep``; None:
    only the original is sized) while the original's outputs are held (as
    :func:`compare` does), would need more than ``limit`` bytes by
    :func:`.memory.estimate_run_bytes` (None: no limit). The original is
    sized first: a blow-up of its own is its own. A program the estimate
    cannot read is not refused."""
    if limit is None:
        return
    from . import memory
    try:
        est = memory.estimate_run_bytes(orig_ep, args, kwargs)
    except Exception:  # noqa: BLE001 -- a program the estimate cannot read: not refused
        return
    memory.check_limit("the original program", est, limit)
    if new_ep is None:
        return
    try:
        new = memory.estimate_run_bytes(new_ep, args, kwargs)
    except Exception:  # noqa: BLE001
        return
    memory.check_limit("the rewritten program", new, limit, extra=est.outputs)


def fits(orig_ep, new_ep, limit: Optional[int], args=None, kwargs=None, sizes=None) -> bool:
    """Whether running both programs as :func:`compare` does stays within
    ``limit`` bytes by the estimate, on ``(args, kwargs)`` or on inputs of
    ``sizes`` (a dynamic program's size symbols -> values; nothing is
    materialized to tell); True without a limit or when the estimate itself
    fails."""
    if limit is None:
        return True
    from . import memory
    try:
        est = memory.estimate_run_bytes(orig_ep, args, kwargs, sizes=sizes)
        new = memory.estimate_run_bytes(new_ep, args, kwargs, sizes=sizes)
        return max(est.total, new.total + est.outputs) <= limit
    except Exception:  # noqa: BLE001 -- the estimate never stops a set
        return True
