"""Numerics: run the original and the rewritten program on the example
inputs and on random inputs of the same shapes and dtypes; compare every
output tensor against a dtype-aware tolerance. Non-finite values must
agree exactly: NaN where the reference has NaN, the same infinities.
Outputs are flattened with pytree, so model-output classes (e.g.
``transformers``' ``ModelOutput``) are compared leaf by leaf."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Sequence, Tuple

import torch
import torch.utils._pytree as pytree

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
    tolerance), ``runs`` (input sets tried), ``failures`` (what exceeded)."""

    max_abs: float = 0.0
    max_rel: float = 0.0
    ok: bool = True
    runs: int = 0
    failures: List[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"max_abs": self.max_abs, "max_rel": self.max_rel, "ok": self.ok,
                "runs": self.runs, "failures": self.failures}


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


def compare(orig_ep, new_ep, args: Tuple, kwargs: dict, n_random: int = 2,
            seed: int = 0, extra_sets: Sequence = ()) -> Numerics:
    """Run both programs on the example inputs, ``n_random`` random sets and
    ``extra_sets`` (``(args, kwargs)`` pairs, e.g. inputs of other sizes for
    a program with dynamic shapes; a set the original program itself rejects
    is skipped, not counted in ``runs``)."""
    res = Numerics()
    a_mod, b_mod = orig_ep.module(), new_ep.module()
    sets = [(args, kwargs)] + [random_like(args, kwargs, seed + i) for i in range(n_random)]
    n_own = len(sets)
    sets += list(extra_sets)
    with torch.no_grad():
        for i, (a, k) in enumerate(sets):
            try:
                ref = _tensors(a_mod(*a, **k))
            except Exception:  # noqa: BLE001 -- an extra set outside the program's sizes
                if i < n_own:
                    raise
                continue
            got = _tensors(b_mod(*a, **k))
            res.runs += 1
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
                r64, o64 = r.double(), o.double()
                diff = (r64 - o64).abs()
                finite = torch.isfinite(r64)
                # NaN where the reference has NaN, the same infinities elsewhere
                # (torch.equal is False on NaN == NaN, so NaNs are compared by mask)
                nan = torch.isnan(r64)
                inf = ~finite & ~nan
                if not torch.equal(finite, torch.isfinite(o64)) or not torch.equal(
                        nan, torch.isnan(o64)) or not torch.equal(r64[inf], o64[inf]):
                    res.ok = False
                    res.failures.append(f"run {i} output {j}: non-finite values differ")
                    continue
                diff = diff[finite]
                if diff.numel() == 0:
                    continue
                mabs = float(diff.max())
                scale = float(r64[finite].abs().max())
                res.max_abs = max(res.max_abs, mabs)
                res.max_rel = max(res.max_rel, mabs / scale if scale > 0 else 0.0)
                bad = diff > atol + rtol * r64[finite].abs()
                if bool(bad.any()):
                    res.ok = False
                    res.failures.append(
                        f"run {i} output {j} ({r.dtype}): max abs diff {mabs:.3g} exceeds "
                        f"atol {atol:g} + rtol {rtol:g}*|ref| at {int(bad.sum())} element(s)")
    return res
