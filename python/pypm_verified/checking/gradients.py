"""The gradients of a rule declared differentiable.

A rule that says ``@pm.rule(P, differentiable=True)`` fires in training
graphs under the Inductor pass (:mod:`pypm_verified.torch.inductor`), where
autograd differentiates its replacement. ``check-rules`` checks that claim
on instances the rule fired on and agreed: the matched subgraph and its
replacement run under autograd on the same inputs, a backward pass with the
same random output gradient, and the gradients of every floating input
compared as the outputs are (:func:`.evaluate.compare_outputs`). A
replacement torch cannot differentiate (an inference kernel without an
autograd formula, a detached result) or whose gradients differ refutes
the declaration: :func:`gradient_problem` says why.
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch

__all__ = ["gradient_problem", "comparable", "GRADIENT_INSTANCES"]

#: instances the rule fired on whose gradients are compared (at most)
GRADIENT_INSTANCES = 4


class _NotDifferentiable(Exception):
    pass


def comparable(inputs) -> bool:
    """Whether an instance with these inputs has its gradients compared:
    every floating input in float32 or float64 (a backward kernel torch
    lacks for a half dtype on the CPU says nothing of the rule)."""
    return all(not t.is_floating_point() or t.dtype in (torch.float32, torch.float64)
               for t in inputs if isinstance(t, torch.Tensor))


def _grads(gm, inputs, seed: int):
    """The output and the gradients of ``gm`` at ``inputs`` (floating ones
    only: None elsewhere) for a random output gradient drawn from ``seed``;
    :class:`_NotDifferentiable` when the output does not require grad."""
    xs = [t.detach().clone().requires_grad_(t.is_floating_point()) for t in inputs]
    with torch.enable_grad():
        out = gm(*xs)
        if isinstance(out, (tuple, list)):
            out = out[0]
        if not isinstance(out, torch.Tensor) or not out.is_floating_point():
            return None, None
        if not out.requires_grad:
            raise _NotDifferentiable("its output does not require grad (detached, or an op "
                                     "without an autograd formula)")
        g = torch.Generator().manual_seed(seed)
        cot = torch.randn(out.shape, generator=g, dtype=torch.float64).to(out.dtype)
        wrt = [x for x in xs if x.requires_grad]
        gs = torch.autograd.grad(out, wrt, cot, allow_unused=True)
    it = iter(gs)
    return out.detach(), [next(it) if x.requires_grad else None for x in xs]


def gradient_problem(pattern, rule, engine: str, instances: Sequence,
                     seed: int = 0) -> Optional[str]:
    """Why ``rule``'s replacement is not differentiable as the original is,
    on the first of ``instances`` (:class:`~.instances.Instance`, ones it
    fired on) that shows it; None when the gradients agree on every one
    (or none could be compared: no floating input, the original itself not
    differentiable there). Only instances in float32/float64 are compared
    (a backward kernel torch lacks for a half dtype on the CPU says nothing
    of the rule)."""
    from .evaluate import InvalidInstance, RuleRunner, build, compare_outputs, input_scale
    runner = RuleRunner(pattern, rule, engine)
    for k, inst in enumerate(instances):
        try:
            orig, new = build(inst), build(inst)
        except InvalidInstance:
            continue
        if not comparable(orig.inputs):
            continue
        o = runner.run(inst, built=new, prove=False)
        if o.kind != "agree":
            continue
        try:
            _, ref = _grads(orig.gm, orig.inputs, seed + k)
        except Exception:  # noqa: BLE001 -- the original is not differentiable here
            continue
        if ref is None:
            continue
        try:
            _, got = _grads(new.gm, new.inputs, seed + k)
        except _NotDifferentiable as e:
            return f"declared differentiable, but the replacement is not: {e}"
        except Exception as e:  # noqa: BLE001 -- autograd refusing the replacement
            msg = str(e).strip().splitlines()
            return (f"declared differentiable, but the replacement's backward fails: "
                    f"{type(e).__name__}: {msg[0] if msg else ''}")
        if got is None:
            return "declared differentiable, but the replacement's output is not floating"
        floor = input_scale(orig.inputs)
        names = [n.name for n in orig.gm.graph.nodes if n.op == "placeholder"]
        for i, (r, g) in enumerate(zip(ref, got)):
            if r is None and g is None:
                continue
            x = orig.inputs[i]
            r = torch.zeros_like(x) if r is None else r
            g = torch.zeros_like(x) if g is None else g
            ok, mabs, _, msg = compare_outputs(r.detach(), g.detach(), floor=floor)
            if not ok:
                name = names[i] if i < len(names) else f"input {i}"
                return (f"declared differentiable, but the gradient of {name} differs from "
                        f"the original's: {msg or f'max abs diff {mabs:.3g}'}")
    return None

