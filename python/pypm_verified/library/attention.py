"""Multi-head attention written out -> ``scaled_dot_product_attention``.

Matches the eager attention of HF BERT/RoBERTa/DistilBERT, GPT-2 and
LLaMA/Qwen2 as ``torch.export`` + ``run_decompositions({})`` leave it::

    matmul(dropout(softmax(matmul(q, kT) * s + mask, -1)), v)

with ``kT`` a transpose of the last two axes of a rank-4 ``k``; the scale a
multiplication or a division by a Python number (or absent); the mask
additive (either operand order) or absent; the softmax over the last axis
(``-1`` or ``3``), in the input dtype, or in float32 on a float32 input, or
in float32 cast back to the input dtype; dropout that is the identity at
inference (``clone``, ``dropout(p, train=False)``, or nothing). GPT-2's
causal mask and LLaMA's padding+causal mask arrive as one additive mask;
LLaMA/Qwen2's grouped-query ``repeat_kv`` is part of ``k`` and ``v``.

Guards: every axis (ranks 4, the transposed axes, the softmax axis, the
softmax dtype), the mask (dtype of the scores, broadcastable to them), the
scale (a finite non-zero number; it is passed to SDPA, so any scale is
rewritten exactly), dropout off, and profitability per target.
"""
from __future__ import annotations

import math

import pypm_verified as pm
from ..torch.ops import (
    Add, Clone, Div, Dropout, MatMul, Mul, SDPA, Softmax, ToCopy, Transpose)



@pm.pattern
def KeyT(k):
    """``k`` with its last two axes swapped (rank 4)."""
    assert k.rank == 4
    return Transpose(k, 2, 3)


@pm.pattern
def KeyT(k):  # noqa: F811
    assert k.rank == 4
    return Transpose(k, 3, 2)


@pm.pattern
def KeyT(k):  # noqa: F811
    assert k.rank == 4
    return Transpose(k, -1, -2)


@pm.pattern
def KeyT(k):  # noqa: F811
    assert k.rank == 4
    return Transpose(k, -2, -1)


@pm.pattern
def Scaled(q, k, smul, sdiv):
    """``q @ kT`` scaled by multiplication, division, or not at all."""
    return Mul(MatMul(q, KeyT(k)), smul)


@pm.pattern
def Scaled(q, k, smul, sdiv):  # noqa: F811
    return Div(MatMul(q, KeyT(k)), sdiv)


@pm.pattern
def Scaled(q, k, smul, sdiv):  # noqa: F811
    return MatMul(q, KeyT(k))


@pm.pattern
def Logits(q, k, smul, sdiv, mask):
    """Scaled scores plus an additive mask (either order), or without one."""
    return Add(Scaled(q, k, smul, sdiv), mask, 1)


@pm.pattern
def Logits(q, k, smul, sdiv, mask):  # noqa: F811
    return Add(mask, Scaled(q, k, smul, sdiv), 1)


@pm.pattern
def Logits(q, k, smul, sdiv, mask):  # noqa: F811
    return Scaled(q, k, smul, sdiv)


@pm.pattern
def Probs(q, k, smul, sdiv, mask, x, cast):
    """Softmax over the last axis of rank-4 logits ``x``."""
    x <= Logits(q, k, smul, sdiv, mask)
    assert x.rank == 4
    return Softmax(x, -1, None)


@pm.pattern
def Probs(q, k, smul, sdiv, mask, x, cast):  # noqa: F811
    x <= Logits(q, k, smul, sdiv, mask)
    assert x.rank == 4
    return Softmax(x, 3, None)


@pm.pattern
def Probs(q, k, smul, sdiv, mask, x, cast):  # noqa: F811
    x <= Logits(q, k, smul, sdiv, mask)
    assert x.rank == 4 and x.dtype == pm.f32
    return Softmax(x, -1, pm.f32)


@pm.pattern
def Probs(q, k, smul, sdiv, mask, x, cast):  # noqa: F811
    """Softmax in float32, cast back (LLaMA/Qwen2 in half precision)."""
    x <= Logits(q, k, smul, sdiv, mask)
    assert x.rank == 4
    return ToCopy(Softmax(x, -1, pm.f32), cast, None, None, None, False, None)


@pm.pattern
def Dropped(p, pd):
    """Dropout that is the identity at inference."""
    return Clone(p, None)


@pm.pattern
def Dropped(p, pd):  # noqa: F811
    return Dropout(p, pd, False)


@pm.pattern
def Dropped(p, pd):  # noqa: F811
    return p


@pm.pattern
def Attention(q, k, v, smul, sdiv, mask, x, cast, pd):
    """softmax(q kT * s + mask) v, as eager HF attention writes it."""
    p = pm.var()
    p <= Probs(q, k, smul, sdiv, mask, x, cast)
    assert q.rank == 4 and v.rank == 4
    assert q.shape[-1] == k.shape[-1] and k.shape[-2] == v.shape[-2]
    assert q.dtype == k.dtype and q.dtype == v.dtype
    return MatMul(Dropped(p, pd), v)


def _scale(smul, sdiv):
    """The scale factor as a Python float, or None if it is not a finite
    non-zero number constant."""
    c = smul if smul is not None else sdiv
    if c is None:
        return 1.0
    if not c.is_const or isinstance(c.value, bool) or not isinstance(c.value, (int, float)):
        return None
    s = float(c.value) if smul is not None else 1.0 / float(c.value) if c.value else None
    if s is None or not math.isfinite(s) or s == 0.0:
        return None
    return s


def _broadcasts(shape, to) -> bool:
    if shape is None or to is None or len(shape) > len(to) or None in to:
        return False
    for a, b in zip(reversed(shape), reversed(to)):
        if a is None or (a != b and a != 1):
            return False
    return True


@pm.rule(Attention)
def sdpa(q, k, v, smul, sdiv, mask, x, cast, pd, ctx):
    """-> aten.scaled_dot_product_attention(q, k, v, mask, scale=s)."""
    scale = _scale(smul, sdiv)
    assert scale is not None
    assert q.dtype in (pm.f32, pm.f16, pm.bf16, pm.f64)  # SDPA computes in floating point
    # the softmax is over x's dtype, cast back to q's (or not cast)
    assert x.dtype == q.dtype or (cast is not None and cast.is_const and x.dtype == pm.f32)
    if cast is not None:
        assert cast.is_const and cast.value == q.torch_dtype
    if mask is not None:
        assert not mask.is_const and mask.dtype == q.dtype
        # the mask must broadcast to the scores q kT (not merely to scores + mask,
        # which it always does), and SDPA refuses a mask of rank < 2
        scores = tuple(q.shape[:-1]) + (k.shape[-2],) if q.shape and k.shape else None
        assert mask.rank is not None and mask.rank >= 2 and _broadcasts(mask.shape, scores)
    if pd is not None:  # dropout(p, pd, train=False): the identity whatever pd
        assert pd.is_const
    target = ctx.target
    if target == "cpu":
        assert q.device is not None and q.device.type == "cpu"
    # SDPA is called with an explicit mask (or none): the "mask" variant of the table
    assert ctx.profitable("attention", dtype=q.torch_dtype, variant="mask",
                      seq=k.shape[-2] if k.shape else None)
    return SDPA(q, k, v, mask, 0.0, False, scale, False)


PATTERNS = [Attention]
