"""Is an attention mask exactly causal? (A helper of :mod:`.attention`.)

A causal mask is rarely an input of the program: the model builds it from
constants (``torch.ones(T, T).tril().bool()``, ``torch.triu(torch.ones(T, T),
diagonal=1)``, ``torch.full((T, T), -inf).triu(1)``, GPT-2's registered
``bias`` buffer sliced ``[:, :, :T, :T]``, HuggingFace's mask functions over
``arange``), and ``torch.export`` keeps that computation in the graph rather
than folding it. :func:`folded` evaluates such a subgraph at rewrite time
(every leaf a constant of the program: a parameter, buffer or lifted
constant, or an op without tensor inputs such as ``ones``/``arange``), and
:func:`is_causal` compares the value with the mask
``scaled_dot_product_attention(..., is_causal=True)`` applies: for queries
``i < L`` and keys ``j < S``, key ``j`` is kept iff ``j <= i`` (aligned to
the top left, also when ``L != S``; a KV-cache mask aligned to the bottom
right, ``j <= i + S - L``, is *not* that mask).

Nothing here guesses: a subgraph that reads a user input, has a symbolic
size (a dynamic sequence length: the mask's value depends on it), calls a
random or mutating op, or is larger than :data:`LIMIT` elements is not
folded (None), and the rule keeps the explicit mask; nor is a buffer the
program writes into, whose value at a call is not the stored one (an
in-place op on it or on a view of it in the graph; a buffer mutation
``torch.export`` functionalized is not among the constants
``ctx.constant`` reads).
"""
from __future__ import annotations

import contextlib
import operator
from typing import Dict, Optional, Sequence

import torch
import torch.fx as fx

#: the most elements a folded tensor (the mask or any step of its
#: computation) may have
LIMIT = 1 << 22
#: the most nodes a folded subgraph may have
MAX_NODES = 256


class _At:
    """A graph node seen as a value (what ``ctx.constant`` reads: ``.fx``)."""

    __slots__ = ("fx",)

    def __init__(self, node):
        self.fx = node


class _NotFoldable(Exception):
    pass


def _no_fake():
    """A context in which real tensors are computed (the Inductor pass may
    call the rules under a fake tensor mode)."""
    try:
        from torch._subclasses.fake_tensor import unset_fake_temporarily
    except ImportError:  # pragma: no cover -- older torch
        return contextlib.nullcontext()
    return unset_fake_temporarily()


def _real(t) -> torch.Tensor:
    if not isinstance(t, torch.Tensor) or type(t) not in (torch.Tensor, torch.nn.Parameter) \
            or t.numel() > LIMIT:
        raise _NotFoldable
    return t.detach().cpu()


def _static(n: fx.Node) -> None:
    """Raise unless ``n``'s recorded value (``meta["val"]``), if any, has
    concrete sizes within :data:`LIMIT`."""
    val = n.meta.get("val")
    vals = val if isinstance(val, (list, tuple)) else [val]
    for v in vals:
        if isinstance(v, torch.Tensor):
            if not all(isinstance(s, int) for s in v.shape) or v.numel() > LIMIT:
                raise _NotFoldable
        elif isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            raise _NotFoldable


def _foldable_op(target) -> bool:
    if target is operator.getitem:
        return True
    if not isinstance(target, torch._ops.OpOverload):
        return False
    if target._schema.is_mutable or torch.Tag.nondeterministic_seeded in target.tags:
        return False
    return "empty" not in target._schema.name  # uninitialized memory: no value to fold


def _mutated(n: fx.Node) -> bool:
    """Whether the program writes into ``n`` or a view of it (an in-place
    op on a buffer, which ``torch.export`` may keep): then the tensor it
    holds at a call is not the program's stored constant."""
    seen, stack = {n}, [n]
    while stack:
        for u in stack.pop().users:
            if u in seen:
                continue
            seen.add(u)
            t = u.target
            if t is operator.getitem:
                stack.append(u)
            elif isinstance(t, torch._ops.OpOverload):
                if t._schema.is_mutable:
                    return True
                if any(r.alias_info is not None for r in t._schema.returns):
                    stack.append(u)  # a view: writing into it writes into n
    return False


def _leaf(n: fx.Node, ctx) -> tuple:
    """What a leaf's value is read from: whether the program writes into it
    (:func:`_mutated`) and the object it holds (``ctx.constant`` of a
    placeholder, the module's attribute for ``get_attr``; None: none)."""
    if n.op == "placeholder":
        return _mutated(n), ctx.constant(_At(n))
    obj = n.graph.owning_module
    for part in str(n.target).split("."):
        obj = getattr(obj, part, None)
    return _mutated(n), obj


def _read(n: fx.Node, ctx) -> tuple:
    """Everything :func:`folded`'s evaluation of ``n`` reads of it: its
    kind, target, argument objects and recorded value, and for a leaf
    :func:`_leaf`."""
    return (n.op, n.target, n._args, n._kwargs, n.meta.get("val"),
            _leaf(n, ctx) if n.op in ("placeholder", "get_attr") else None)


def _same(a: tuple, b: tuple) -> bool:
    """Tuples of the same objects, element by element (tuples compared so)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x is not y and not (type(x) is tuple and type(y) is tuple and _same(x, y)):
            return False
    return True


def folded(value, ctx) -> Optional[torch.Tensor]:
    """The tensor the graph value ``value`` always holds, computed now (on
    the CPU) from the program's constants, or None when it is not such a
    constant (see the module). ``ctx`` is the rule's context (its
    ``constant`` reads the program's parameters, buffers and lifted
    constants).

    The answer is kept in ``ctx.memo`` for the rest of the rewrite (a mask
    is read by the attention of every layer), with what the evaluation read
    of every node it visited (:func:`_read`); it is reused only when each of
    them reads the same again (the same objects), else computed anew."""
    node = getattr(value, "fx", None)
    if not isinstance(node, fx.Node) or ctx is None:
        return None
    cache = getattr(ctx, "memo", None)
    cache = cache.setdefault("causal.folded", {}) if isinstance(cache, dict) else None
    if cache is not None:
        hit = cache.get(node)
        if hit is not None:
            for n, r in hit[1]:
                if not _same(_read(n, ctx), r):
                    break
            else:
                return hit[0]
    # what a value is computed from, checked before anything is computed (a
    # mask read from a user input is found not foldable without computing
    # its other operands): node -> its value (a leaf's now, a call's below)
    vals: Dict[fx.Node, object] = {}
    order = []  # the calls, each after its arguments
    reads = []  # (node, _read(node)) of every node visited, in order

    def plan(n: fx.Node):
        if n in vals:
            return n
        if len(vals) >= MAX_NODES:
            raise _NotFoldable
        read = _read(n, ctx)
        reads.append((n, read))
        _static(n)
        if read[5] is not None:  # a leaf: (written into, the object it holds)
            mutated, obj = read[5]
            if mutated or obj is None:
                raise _NotFoldable
            vals[n] = _real(obj)
        elif n.op == "call_function" and _foldable_op(n.target):
            fx.node.map_arg((n.args, n.kwargs), plan)
            vals[n] = None
            order.append(n)
        else:
            raise _NotFoldable
        return n

    def arg(a):
        if isinstance(a, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            raise _NotFoldable
        return a

    def ev(n: fx.Node):
        args = fx.node.map_aggregate(fx.node.map_arg(n.args, vals.__getitem__), arg)
        kwargs = dict(fx.node.map_aggregate(fx.node.map_arg(n.kwargs, vals.__getitem__), arg))
        if "device" in kwargs:  # the same values, computed on the CPU
            kwargs["device"] = torch.device("cpu")
        out = n.target(*args, **kwargs)
        return _real(out) if isinstance(out, torch.Tensor) else out

    try:
        plan(node)
        with _no_fake(), torch.no_grad():
            for n in order:
                vals[n] = ev(n)
        t = vals[node]
    except Exception:  # noqa: BLE001 -- not foldable: the rule keeps the explicit mask
        t = None
    t = t if isinstance(t, torch.Tensor) else None
    if cache is not None:
        cache[node] = (t, reads)
    return t


def causal_keep(L: int, S: int) -> torch.Tensor:
    """The boolean mask ``is_causal=True`` applies to ``L`` queries and
    ``S`` keys (True: kept): ``ones(L, S).tril()``, aligned to the top left."""
    return torch.ones(L, S, dtype=torch.bool).tril()


def is_causal(t: Optional[torch.Tensor], scores: Sequence, kind: str) -> bool:
    """Whether mask ``t``, applied to scores of shape ``scores`` (``(...,
    L, S)``, ``L`` and ``S`` concrete), is exactly the causal mask of
    ``is_causal=True`` in every batch and head (a leading size of ``scores``
    may be symbolic, a dynamic batch: the mask's axis there must be 1).
    ``kind``: ``"keep"`` (a boolean mask, True where a key is kept: SDPA's
    boolean ``attn_mask``, ``where(keep, s, fill)``), ``"masked"`` (True
    where a key is masked: ``masked_fill``) or ``"additive"`` (a float mask
    added to the scores: exactly 0 where kept, -inf or its dtype's minimum
    where masked)."""
    if t is None or kind not in ("keep", "masked", "additive"):
        return False
    scores = tuple(scores)
    if len(scores) < 2 or t.dim() > len(scores):
        return False
    L, S = scores[-2:]
    if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in (L, S)) \
            or L * S > LIMIT:
        return False
    shape = (1,) * (len(scores) - t.dim()) + tuple(t.shape)
    for a, b in zip(shape, scores):  # t broadcasts to the scores
        if a != 1 and (not isinstance(b, int) or a != b):
            return False
    full = torch.broadcast_to(t.reshape(shape), shape[:-2] + (L, S))
    keep = causal_keep(L, S).expand(full.shape)
    if kind in ("keep", "masked"):
        if t.dtype != torch.bool:
            return False
        return bool(torch.equal(full, keep if kind == "keep" else ~keep))
    if not t.is_floating_point():
        return False
    kept, dropped = full[keep], full[~keep]
    lowest = torch.finfo(t.dtype).min
    return bool((kept == 0).all()) and bool(
        (torch.isneginf(dropped) | (dropped == lowest)).all())
