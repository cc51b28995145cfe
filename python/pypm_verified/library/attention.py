"""Attention written out -> ``scaled_dot_product_attention`` (the family).

One pattern, :data:`Attention`, built from small helper patterns, each an
alternation over the ways real code writes one step::

    out   = matmul | bmm ( Dropped( Probs( Masked( Biased( Capped( Scaled(
                Scores(q, KeyTs(k)) ))))), v)

* ``KeyT``: ``k`` with its last two axes swapped -- ``transpose(k, a, b)``
  or ``permute(k, perm)`` (the axes are bound and checked by the rule: any
  spelling of the last two axes; a ``permute`` that also moves other axes is
  split: SDPA gets ``permute(k, perm')``, ``perm'`` being ``perm`` with its
  last two entries swapped).
* ``KeyTs``: ``KeyT``, or ``KeyT`` multiplied / divided by a number or a
  0-d tensor (DeBERTa's ``k^T / sqrt(d)``): the factor moves onto ``k``;
  or ``aten.mul.Scalar(permute(k), c)``, SDPA's own math decomposed (the
  scale's square root on ``q`` and on ``kT``).
* ``Scores``: ``matmul(q, kT)``, ``bmm(q, kT)`` (3-D batched attention,
  ``nn.MultiheadAttention(need_weights=True)``), or
  ``baddbmm(bias, q, kT, beta, alpha)`` (ALiBi as BLOOM writes it: the
  bias joins the mask, ``alpha`` the scale). A scale on ``q`` (or on ``k``
  before the transpose) is simply part of ``q`` (``k``): SDPA is called on
  the scaled operand with ``scale=1``, exactly what the original computes.
* ``Scaled``: the scores times or divided by a number or a 0-d constant
  of the program (GPT-2's ``torch.full([], sqrt(d))``: its value as its
  dtype stores it), or not scaled.
* ``Capped``: logit soft-capping ``c * tanh(s / c)`` (Gemma 2) is matched
  only to be *declined with its reason*: SDPA applies no function between
  the scores and the softmax.
* ``Biased``: up to two additive terms in either operand order (T5's and
  MPNet's position bias plus the padding mask; BERT's ``(1 - m) * min``;
  LLaMA's causal + padding mask).
* ``Masking``: the mask applied by ``masked_fill(s, b, fill)`` (``fill`` a
  number, or a 0-d tensor: DistilBERT's ``torch.tensor(finfo.min)``),
  ``where(b, s, fill)`` or ``where(b, fill, s)`` with a boolean ``b`` (a
  0/1 float mask arrives as the boolean the graph computes from it, e.g.
  ``m == 0``: any value of the float mask gives the same answer as the
  original) and ``fill`` -inf or the dtype's minimum.
* ``Masked``: no mask, ``Masking``, or ``Masking`` then added to
  (``where(causal, s, fill) + m``: GPT-Neo, its ``fill`` a 0-d tensor
  constant, ``torch.tensor(finfo.min)``, whose value the rule reads with
  ``ctx.constant``; GPT-2's ``torch.full([], finfo.min)``, read from the
  ``full`` call); or the unmasked logits cast by ``type_as`` (T5's
  ``scores.type_as(query)``: the identity, the logits being in q's dtype),
  or viewed back from 4-D to 3-D before the softmax (MBart's and PLBart's
  ``view(b, h, l, s) + mask``, ``view(b * h, l, s)``).
* ``Probs``: ``softmax`` / ``_safe_softmax`` over an axis (the rule checks
  it is the last: one alternate for ``-1`` and ``3``), in the input dtype or
  a wider one, with casts before (``s.float()``) and after (``.to(dtype)``,
  ``type_as``).
* ``Dropped``: dropout that is the identity at inference (``clone``,
  ``dropout(p, pd, False)``, ``dropout(p, 0, True)``); ``dropout(p, pd,
  True)`` and ``native_dropout`` with ``pd > 0`` (``F.dropout(a, p)``,
  whose ``training`` defaults to True) are matched to be declined.
* A fourth alternate of :data:`Attention`: half precision with the
  dropout between the upcast softmax and the cast back
  (``matmul(to(clone(softmax(to(Masked, float32))), float16), v)``:
  ``torch.dropout(., 0.0, True)`` is a ``clone``; Inductor's
  ``fuse_attention`` forms), the rest as above.

The pattern's fuel bound (``pm.termination(Attention)``) is about the
product of the alternates' counts along the chain: each alternate added to
one helper multiplies it. It is 66,260,753 steps, under the default fuel
2^26 = 67,108,864: ``mul.Scalar`` is matched on ``permute(k)`` only (SDPA's
decomposition; on ``transpose`` :data:`CoreAttention` matches it), the
fourth alternate of :data:`Attention` has one softmax form, the softmax axis
is a variable, and the casts and the view back sit on the logits (one
alternate of ``Masked`` each), not around the softmax.

A second pattern, :data:`CoreAttention` (rule :func:`sdpa_core`, its own
fuel bound: 11,964 steps), is SDPA's math decomposed: core ATen's
(``ep.run_decompositions()``: ``mul.Scalar`` on ``q`` and on
``permute(k)``, ``expand``/``view``/``bmm``/``view``, a ``clone`` after the
``expand`` of a permuted operand, maybe ``+ mask``,
``_softmax`` and ``where(!any(x != -inf), 0, .)``) and ATen's (``make_fx``:
``transpose``, ``_unsafe_view``, ``_safe_softmax``), or with ``matmul``
itself (the export IR's: ``mul.Scalar`` on ``transpose(k)``, as in
Inductor's ``fuse_attention`` forms of BERT-like models). It becomes
``SDPA(q, mul.Scalar(k', c), v, mask, scale=1)``: the factors stay on the
operands (the decomposition's products; ``c * c`` as the scale would differ
from them by a rounding). ``check-rules`` tests it on consistent
decompositions (ranks 3 and 4; z3 has no semantics for the views).

The rule (:func:`sdpa`) computes SDPA's arguments: ``k`` (un-transposed),
the scale (the product of the number factors), the mask (the sum of the
additive terms, ALiBi's bias scaled like the scores; a boolean mask where
``masked_fill``/``where`` applied one, combined with the additive terms by
``where(keep, M, -inf)``). Exactness, form by form (README, "Attention
forms"):

* additive terms, scales, transposes, casts, dropout: equal to the original
  **over the reals** for every size (an additive term of a narrower float
  dtype than q's -- float16/bfloat16 on float32 -- is converted to q's, as
  the original's addition does: exactly) (``check-rules`` proves the structures
  with z3); a factor moved from ``kT`` onto ``k`` is the same product; a
  cast widening the softmax only makes SDPA (which accumulates in at least
  float32) as or more precise;
* ``masked_fill``/``where`` with -inf: equal in IEEE arithmetic for finite
  scores and additive terms, *including* fully masked rows: eager softmax
  gives NaN there, while SDPA on CPU (torch 2.13, bool or -inf masks) gives
  0, so the replacement restores NaN on the rows whose boolean mask keeps
  nothing: ``where(any(keep, -1), sdpa, nan)``;
* ``masked_fill``/``where`` with the dtype's minimum: the original's masked
  weights are ``exp(min - max)``, which is 0 in floating point (not over the
  reals) unless every kept score of the row is within ~104 (float32
  accumulation) of the minimum, i.e. is the minimum itself in float32,
  bfloat16 and float64 (their spacing there is far above 104; float16's
  minimum -65504 needs kept scores above -65400); a fully masked row is the
  uniform average of ``v`` in the original, so the replacement takes
  ``mean(v)`` on those rows: ``where(any(keep, -1), sdpa, mean(v, -2))``.
  Any other finite fill (-1e9, -1e4) is left alone: with scores of that size
  the masked weights do not vanish. ``check-rules`` tests these forms (z3
  has no -inf, and the identity needs underflow);
* the mask applied, then added to (``where(keep, s + pre, fill) + m``): SDPA
  gets the float mask ``where(keep, pre + m, m + fill)``; on masked entries
  it computes ``s + (m + fill)``, equal to ``m + fill`` in IEEE arithmetic
  (-inf absorbs ``s``; the minimum's spacing, 2^104 in float32, exceeds
  ``2|s|``), so SDPA sees the original's logits on every row (no row to
  restore but the NaN ones of -inf); float16 with its minimum is left alone
  (SDPA adds ``s`` to the mask in float32).

* a causal mask: when the one mask SDPA would get (a boolean mask alone, or
  one additive term alone) is computed by the program from its constants
  (``ones(T, T).tril()``, ``triu(ones, 1)``, GPT-2's ``bias`` buffer sliced,
  ``full(-inf).triu(1)``, HuggingFace's mask functions over ``arange``; a
  placeholder read through ``ctx.constant``) and its value is exactly
  ``is_causal``'s (``ones(T_q, T_k).tril()``: the top left, also for ``T_q
  != T_k``; :mod:`._causal` folds and compares it), SDPA gets
  ``is_causal=True`` and no mask: no row is fully masked, so nothing is
  restored. Anything else (a KV-cache mask aligned to the bottom right, a
  shifted diagonal, a mask from an input, a symbolic sequence length, a
  buffer the program writes into) keeps the explicit mask. ``sdpa_core``
  does the same for its additive mask (SDPA's own ``is_causal``
  decomposed).

Left alone, with the reason in the report: soft-capped logits, scales that
are tensors (other than a 0-d factor on ``kT`` or a 0-d constant), a fill
that is neither -inf nor the dtype's minimum, a mask of the wrong shape or
of a dtype that does not convert exactly to q's, softmax over another axis
or in a dtype narrower than q's, dropout in training (random).
"""
from __future__ import annotations

import math

import torch

import pypm_verified as pm
from . import _causal
from ..torch.ops import (
    Add, AnyDim, Baddbmm, Bmm, Clone, Div, Dropout, Expand, GetItem, LogicalNot, MaskedFill,
    MaskedFillTensor, MatMul, Mean, Mul, MulScalar, NativeDropout, Permute, Reshape,
    SafeSoftmax, SDPA, Softmax, Tanh, ToCopy, Transpose, TypeAs, View, Where,
    WhereScalarOther, WhereScalarSelf, EqScalar, FullLike, SoftmaxImpl, UnsafeView)

# ------------------------------------------------------------ the key

@pm.pattern
def KeyT(k, ta, tb, perm):
    """``k`` with two axes swapped or permuted (the rule checks which)."""
    return Transpose(k, ta, tb)


@pm.pattern
def KeyT(k, ta, tb, perm):  # noqa: F811
    return Permute(k, perm)


@pm.pattern
def KeyTs(k, ta, tb, perm, kmul, kdiv):
    """``KeyT``, or ``KeyT`` times / divided by a factor (DeBERTa)."""
    return KeyT(k, ta, tb, perm)


@pm.pattern
def KeyTs(k, ta, tb, perm, kmul, kdiv):  # noqa: F811
    return Mul(KeyT(k, ta, tb, perm), kmul)


@pm.pattern
def KeyTs(k, ta, tb, perm, kmul, kdiv):  # noqa: F811
    return Div(KeyT(k, ta, tb, perm), kdiv)


@pm.pattern
def KeyTs(k, ta, tb, perm, kmul, kdiv):  # noqa: F811
    """``aten.mul.Scalar`` on ``permute(k)``: SDPA's own math decomposed, the
    scale's square root on ``q`` and on ``kT`` (only ``permute``: each
    alternate here multiplies the pattern's fuel bound)."""
    return MulScalar(Permute(k, perm), kmul)


# ------------------------------------------------------------ the scores

@pm.pattern
def Scores(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha):
    """``q kT`` by matmul, bmm, or baddbmm with a bias (ALiBi)."""
    return MatMul(q, KeyTs(k, ta, tb, perm, kmul, kdiv))


@pm.pattern
def Scores(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha):  # noqa: F811
    return Bmm(q, KeyTs(k, ta, tb, perm, kmul, kdiv))


@pm.pattern
def Scores(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha):  # noqa: F811
    return Baddbmm(bias, q, KeyTs(k, ta, tb, perm, kmul, kdiv), beta, alpha)


@pm.pattern
def Scaled(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv):
    """The scores scaled by multiplication, division, or not at all."""
    return Mul(Scores(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha), smul)


@pm.pattern
def Scaled(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv):  # noqa: F811
    return Div(Scores(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha), sdiv)


@pm.pattern
def Scaled(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv):  # noqa: F811
    return Scores(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha)


@pm.pattern
def Capped(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1, cap2, s4, vs4, m0):
    """The scaled scores, or soft-capped ``cap2 * tanh(s / cap1)`` (matched
    to be declined with the reason: SDPA cannot express it)."""
    return Scaled(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv)


@pm.pattern
def Capped(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv,  # noqa: F811
           cap1, cap2, s4, vs4, m0):
    """3-D scores viewed as 4-D ``s4`` (batch * heads split: BLOOM, DeBERTa)."""
    s4 <= View(Scaled(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv), vs4)
    return s4


@pm.pattern
def Capped(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv,  # noqa: F811
           cap1, cap2, s4, vs4, m0):
    """3-D scores plus a 3-D term (DeBERTa's relative attention), viewed as 4-D."""
    s4 <= View(Add(Scaled(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv), m0,
                   1), vs4)
    return s4


@pm.pattern
def Capped(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv,  # noqa: F811
           cap1, cap2, s4, vs4, m0):
    return Mul(Tanh(Div(Scaled(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul,
                               sdiv), cap1)), cap2)


# ------------------------------------------------------- additive terms

@pm.pattern
def Biased1(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1, cap2, s4, vs4,
            m0, m1):
    """One additive term, either operand order."""
    return Add(Capped(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1,
                      cap2, s4, vs4, m0), m1, 1)


@pm.pattern
def Biased1(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv,  # noqa: F811
            cap1, cap2, s4, vs4, m0, m1):
    return Add(m1, Capped(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1,
                          cap2, s4, vs4, m0), 1)


@pm.pattern
def Biased(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1, cap2, s4, vs4,
           m0, m1, m2):
    """No additive term, one, or two (a position bias and a mask)."""
    return Biased1(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1, cap2,
                   s4, vs4, m0, m1)


@pm.pattern
def Biased(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1,  # noqa: F811
           cap2, s4, vs4, m0, m1, m2):
    return Capped(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1, cap2, s4,
                  vs4, m0)


@pm.pattern
def Biased(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1,  # noqa: F811
           cap2, s4, vs4, m0, m1, m2):
    return Add(Biased1(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1,
                       cap2, s4, vs4, m0, m1), m2, 1)


@pm.pattern
def Biased(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1,  # noqa: F811
           cap2, s4, vs4, m0, m1, m2):
    return Add(m2, Biased1(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1,
                           cap2, s4, vs4, m0, m1), 1)


# ------------------------------------------------------------ masking

@pm.pattern
def Masking(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1, cap2, s4, vs4,
            m0, m1, m2, bm, bk, fill):
    """The logits, a boolean mask applied: ``masked_fill(s, bm, fill)``,
    ``where(bk, s, fill)`` or ``where(bm, fill, s)``, ``fill`` a number or
    a 0-d tensor (GPT-Neo's ``torch.tensor(finfo.min)``)."""
    return MaskedFill(Biased(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv,
                             cap1, cap2, s4, vs4, m0, m1, m2), bm, fill)


@pm.pattern
def Masking(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1,  # noqa: F811
            cap2, s4, vs4, m0, m1, m2, bm, bk, fill):
    """``masked_fill`` with a 0-d tensor (DistilBERT's
    ``torch.tensor(finfo.min)``)."""
    return MaskedFillTensor(Biased(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul,
                                   sdiv, cap1, cap2, s4, vs4, m0, m1, m2), bm, fill)


@pm.pattern
def Masking(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1,  # noqa: F811
            cap2, s4, vs4, m0, m1, m2, bm, bk, fill):
    return WhereScalarOther(bk, Biased(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul,
                                       sdiv, cap1, cap2, s4, vs4, m0, m1, m2), fill)


@pm.pattern
def Masking(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1,  # noqa: F811
            cap2, s4, vs4, m0, m1, m2, bm, bk, fill):
    return WhereScalarSelf(bm, fill, Biased(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha,
                                            smul, sdiv, cap1, cap2, s4, vs4, m0, m1, m2))


@pm.pattern
def Masking(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1,  # noqa: F811
            cap2, s4, vs4, m0, m1, m2, bm, bk, fill):
    return Where(bk, Biased(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1,
                            cap2, s4, vs4, m0, m1, m2), fill)


@pm.pattern
def Masking(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1,  # noqa: F811
            cap2, s4, vs4, m0, m1, m2, bm, bk, fill):
    return Where(bm, fill, Biased(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv,
                                  cap1, cap2, s4, vs4, m0, m1, m2))


@pm.pattern
def Masked(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1, cap2, s4, vs4,
           m0, m1, m2, bm, bk, fill, ma, tref, xv):
    """The logits: unmasked, ``Masking``, or ``Masking`` plus an additive
    term ``ma`` (the mask applied first, then added to: GPT-Neo's
    ``where(causal, s, min) + attention_mask``)."""
    return Biased(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1, cap2, s4,
                  vs4, m0, m1, m2)


@pm.pattern
def Masked(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1,  # noqa: F811
           cap2, s4, vs4, m0, m1, m2, bm, bk, fill, ma, tref, xv):
    return Masking(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1, cap2,
                   s4, vs4, m0, m1, m2, bm, bk, fill)


@pm.pattern
def Masked(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1,  # noqa: F811
           cap2, s4, vs4, m0, m1, m2, bm, bk, fill, ma, tref, xv):
    return Add(Masking(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1, cap2,
                       s4, vs4, m0, m1, m2, bm, bk, fill), ma, 1)


@pm.pattern
def Masked(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1,  # noqa: F811
           cap2, s4, vs4, m0, m1, m2, bm, bk, fill, ma, tref, xv):
    return Add(ma, Masking(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1,
                           cap2, s4, vs4, m0, m1, m2, bm, bk, fill), 1)


@pm.pattern
def Masked(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1,  # noqa: F811
           cap2, s4, vs4, m0, m1, m2, bm, bk, fill, ma, tref, xv):
    """The logits cast by ``type_as(tref)`` (T5's ``scores.type_as(query)``)."""
    return TypeAs(Biased(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1,
                         cap2, s4, vs4, m0, m1, m2), tref)


@pm.pattern
def Masked(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1,  # noqa: F811
           cap2, s4, vs4, m0, m1, m2, bm, bk, fill, ma, tref, xv):
    """4-D logits viewed back to 3-D (sizes ``xv``) before the softmax
    (MBart's ``bmm``, ``view(b, h, l, s) + mask``, ``view(b * h, l, s)``)."""
    return View(Biased(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1,
                       cap2, s4, vs4, m0, m1, m2), xv)


# ------------------------------------------------------------ softmax

@pm.pattern
def Soft(x, sdt, up, sdim):
    """Softmax over axis ``sdim`` (the rule checks it is the last) in ``sdt``
    (None or a dtype); the "safe" softmax (0 on rows of -inf); or the
    softmax of the logits cast first (``s.float()``: ``up``)."""
    return Softmax(x, sdim, sdt)


@pm.pattern
def Soft(x, sdt, up, sdim):  # noqa: F811
    return SafeSoftmax(x, sdim, sdt)


@pm.pattern
def Soft(x, sdt, up, sdim):  # noqa: F811
    return Softmax(ToCopy(x, up, None, None, None, False, None), sdim, sdt)


@pm.pattern
def Probs(x, sdt, up, sdim, cast, ref, sm):
    """The softmax ``sm``, maybe cast back (``.to(dtype)``, ``type_as``)."""
    sm <= Soft(x, sdt, up, sdim)
    return sm


@pm.pattern
def Probs(x, sdt, up, sdim, cast, ref, sm):  # noqa: F811
    sm <= Soft(x, sdt, up, sdim)
    return ToCopy(sm, cast, None, None, None, False, None)


@pm.pattern
def Probs(x, sdt, up, sdim, cast, ref, sm):  # noqa: F811
    sm <= Soft(x, sdt, up, sdim)
    return TypeAs(sm, ref)


@pm.pattern
def Dropped(p, pd, dtrain):
    """Dropout: the identity at inference (``clone``, ``dropout(p, pd,
    False)``, nothing); ``dropout(p, pd, train)`` and ``native_dropout``
    (training) are matched, the rule deciding whether they are the identity."""
    return Clone(p, None)


@pm.pattern
def Dropped(p, pd, dtrain):  # noqa: F811
    return Dropout(p, pd, dtrain)


@pm.pattern
def Dropped(p, pd, dtrain):  # noqa: F811
    return GetItem(NativeDropout(p, pd, dtrain), 0)


@pm.pattern
def Dropped(p, pd, dtrain):  # noqa: F811
    return p


@pm.pattern
def AttnProbs(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1, cap2, s4, vs4,
              m0, m1, m2, bm, bk, fill, ma, x, sdt, up, sdim, tref, cast, ref, sm, p, pd, dtrain,
              xv):
    """The attention weights ``Dropped(Probs(x))`` with ``x`` the masked
    logits."""
    p <= Probs(x, sdt, up, sdim, cast, ref, sm)
    x <= Masked(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1, cap2, s4,
                vs4, m0, m1, m2, bm, bk, fill, ma, tref, xv)
    return Dropped(p, pd, dtrain)


@pm.pattern
def Attention(q, k, v, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1, cap2, s4,
              vs4, m0, m1, m2, bm, bk, fill, ma, x, sdt, up, sdim, tref, cast, ref, sm, p, pd,
              dtrain, xv, p3, pv):
    """softmax(mask(q kT * s + bias)) v in any of the forms above."""
    assert q.rank >= 3 and q.rank <= 4 and v.rank == q.rank  # SDPA's (batch..., L, E)
    return MatMul(AttnProbs(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv,
                            cap1, cap2, s4, vs4, m0, m1, m2, bm, bk, fill, ma, x, sdt, up, sdim,
                            tref, cast, ref, sm, p, pd, dtrain, xv), v)


@pm.pattern
def Attention(q, k, v, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv,  # noqa: F811
              cap1, cap2, s4, vs4, m0, m1, m2, bm, bk, fill, ma, x, sdt, up, sdim, tref, cast,
              ref, sm, p, pd, dtrain, xv, p3, pv):
    assert q.rank == 3 and v.rank == 3
    return Bmm(AttnProbs(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv,
                         cap1, cap2, s4, vs4, m0, m1, m2, bm, bk, fill, ma, x, sdt, up, sdim,
                         tref, cast, ref, sm, p, pd, dtrain, xv), v)


@pm.pattern
def Attention(q, k, v, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv,  # noqa: F811
              cap1, cap2, s4, vs4, m0, m1, m2, bm, bk, fill, ma, x, sdt, up, sdim, tref, cast,
              ref, sm, p, pd, dtrain, xv, p3, pv):
    """The 4-D weights viewed back to 3-D ``p3`` for bmm (BLOOM, DeBERTa)."""
    assert q.rank == 3 and v.rank == 3
    p3 <= View(AttnProbs(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv,
                         cap1, cap2, s4, vs4, m0, m1, m2, bm, bk, fill, ma, x, sdt, up, sdim,
                         tref, cast, ref, sm, p, pd, dtrain, xv), pv)
    return Bmm(p3, v)


@pm.pattern
def Attention(q, k, v, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv,  # noqa: F811
              cap1, cap2, s4, vs4, m0, m1, m2, bm, bk, fill, ma, x, sdt, up, sdim, tref, cast,
              ref, sm, p, pd, dtrain, xv, p3, pv):
    """Half precision with an upcast softmax and the dropout (p = 0: a
    ``clone``) *between* the softmax and the cast back: ``s.to(float32)``,
    softmax, ``torch.dropout(., 0.0, True)``, ``.to(float16)`` (Inductor's
    ``fuse_attention`` forms; ``Dropped(Probs)`` has the dropout outside the
    cast). Only ``Softmax(ToCopy)`` here: each alternate of ``Soft`` or
    ``Probs`` would multiply the family's fuel bound by about 4/3."""
    assert q.rank >= 3 and q.rank <= 4 and v.rank == q.rank
    p <= ToCopy(Clone(sm, None), cast, None, None, None, False, None)
    sm <= Softmax(ToCopy(x, up, None, None, None, False, None), sdim, sdt)
    x <= Masked(q, k, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1, cap2, s4,
                vs4, m0, m1, m2, bm, bk, fill, ma, tref, xv)
    return MatMul(p, v)


# ------------------------------------------------------------ the rule

def _plus_zero(c) -> bool:
    """``c`` is the constant +0 (``-0.0`` equals it but is another
    constant: a row of ``-0.0`` weights gives other signed zeros)."""
    return _number(c) == 0.0 and math.copysign(1.0, c.value) > 0


def _number(c):
    """A constant's value as a finite Python float, else None."""
    if c is None or not c.is_const or isinstance(c.value, bool) \
            or not isinstance(c.value, (int, float)):
        return None
    f = float(c.value)
    return f if math.isfinite(f) else None


def _axis(d, r):
    """Axis ``d`` of a rank-``r`` tensor, normalized; None if it is none. (The
    term graph keeps numbers by value: an axis may read as ``1.0``.)"""
    if isinstance(d, float) and d.is_integer():
        d = int(d)
    if isinstance(d, bool) or not isinstance(d, int) or not -r <= d < r:
        return None
    return d % r


def _broadcasts(shape, to) -> bool:
    """Whether ``shape`` broadcasts to ``to``. A size 1 is tested first: it
    broadcasts to any size, so it asks no question of a symbolic one (``1 !=
    batch`` is not known for a dynamic batch, and would decline the rule)."""
    if shape is None or to is None or len(shape) > len(to) or None in to:
        return False
    for a, b in zip(reversed(tuple(shape)), reversed(tuple(to))):
        if a is None or (not (isinstance(a, int) and a == 1) and a != b):
            return False
    return True


_FULLS = (torch.ops.aten.full.default, torch.ops.aten.scalar_tensor.default)


def _fill_number(fill, ctx):
    """The number ``fill`` is: a constant, a 0-d floating tensor constant of
    the program (GPT-Neo's and DistilBERT's ``torch.tensor(finfo.min)``,
    lifted by ``torch.export``), or a 0-d floating ``full([], c)`` /
    ``scalar_tensor(c)`` (GPT-2's ``torch.full([], finfo.min)``), its value
    as its dtype stores it; None otherwise."""
    if fill is None:
        return None
    if fill.is_const:
        v = fill.value
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
    n, dt = fill.fx, fill.torch_dtype
    if n is not None and n.op == "call_function" and n.target in _FULLS and n.args \
            and dt is not None and dt.is_floating_point and fill.rank == 0:
        c = n.args[1] if n.target is torch.ops.aten.full.default else n.args[0]
        if isinstance(c, (int, float)) and not isinstance(c, bool):
            return float(torch.tensor(c, dtype=dt))
        return None
    t = ctx.constant(fill)
    if t is None or t.dim() != 0 or not t.is_floating_point():
        return None
    return float(t)


def _scale_number(c, ctx):
    """A scale factor's value as a finite float: a number, or a 0-d tensor
    the program holds as a constant (``_fill_number``: GPT-2's ``torch.full([],
    sqrt(d))``, a 0-d constant being a number); None otherwise."""
    f = _number(c)
    if f is None and c is not None and not c.is_const and c.rank == 0:
        f = _fill_number(c, ctx)
    return f if f is not None and math.isfinite(f) else None


def _widens_to(dt, to) -> bool:
    """Whether floating dtype ``dt`` converts to ``to`` exactly and
    arithmetic on the two computes in ``to`` (float16 / bfloat16 ->
    float32 -> float64), or is ``to``."""
    return dt is not None and to is not None and dt.is_floating_point \
        and torch.promote_types(dt, to) == to


def _as_dtype(t, to):
    """``t`` converted to dtype ``to`` (exactly: ``_widens_to``), or ``t``."""
    return t if t.torch_dtype == to else ToCopy(t, to, None, None, None, False, None)


def _fill_value(f, dtype):
    """The number ``f`` as the logits' dtype stores it (a float32 minimum
    written into float16 logits is -inf), or None when it is None."""
    return None if f is None else float(torch.tensor(f, dtype=dtype))


def _lowest(x):
    """The most negative finite value of ``x``'s dtype."""
    return torch.finfo(x.torch_dtype).min


_FLOATS = (pm.f32, pm.f16, pm.bf16, pm.f64)


def _key(k, perm, ta, tb, r):
    """SDPA's key ``k'`` and its shape from ``kT`` = ``permute(k, perm)`` or
    ``transpose(k, ta, tb)``, whose last two axes must be ``k'``'s last two
    swapped (``k'`` is ``k``, or ``permute(k, perm')``)."""
    if perm is not None:
        order = [_axis(a, r) for a in perm.value] if perm.is_const \
            and isinstance(perm.value, (list, tuple)) and len(perm.value) == r else None
        assert order is not None and sorted(order) == list(range(r)), \
            "the permutation of the key is not one of its axes"
        inner = order[:-2] + [order[-1], order[-2]]  # perm then swap == inner
        kk = k if inner == list(range(r)) else Permute(k, inner)
        return kk, ([k.shape[i] for i in inner] if k.shape is not None else None)
    axes = {_axis(ta.value, r), _axis(tb.value, r)} if ta.is_const and tb.is_const \
        else None
    assert axes == {r - 2, r - 1}, \
        "the key is transposed on other axes than its last two"
    return k, k.shape


@pm.rule(Attention)
def sdpa(q, k, v, ta, tb, perm, kmul, kdiv, bias, beta, alpha, smul, sdiv, cap1, cap2, s4, vs4, m0,
         m1, m2, bm, bk, fill, ma, x, sdt, up, sdim, tref, cast, ref, sm, p, pd, dtrain, xv, p3,
         pv, ctx):
    """-> aten.scaled_dot_product_attention(q, k', v, mask', scale=s) (see the module)."""
    assert cap1 is None and cap2 is None, \
        ("logit soft-capping c*tanh(s/c) is not expressible by scaled_dot_product_attention "
         "(it applies no function between the scores and the softmax)")
    r = q.rank
    assert r in (3, 4) and v.rank == r and k.rank == r  # SDPA's (batch..., L, E) operands
    assert q.dtype in _FLOATS  # SDPA computes in floating point
    assert q.dtype == k.dtype and q.dtype == v.dtype
    kk, kshape = _key(k, perm, ta, tb, r)
    for c in (kmul, kdiv):
        if c is not None:  # (k^T) * c == (k * c)^T: a number or a 0-d tensor
            assert _number(c) is not None or (not c.is_const and c.rank == 0), \
                "the factor on the transposed key is a tensor with axes"
            assert c is kmul or _number(c) != 0.0, \
                "the key is divided by zero (inf scores: SDPA and softmax differ on them)"
            kk = Mul(kk, c) if c is kmul else Div(kk, c)
    assert kshape is not None and q.shape[-1] == kshape[-1] and kshape[-2] == v.shape[-2]
    # ---- the scale: every factor a finite non-zero number
    scale = 1.0
    for c, inv in ((smul, False), (sdiv, True), (alpha, False)):
        if c is not None:
            f = _scale_number(c, ctx)
            assert f is not None and f != 0.0, \
                ("the scores are scaled by a tensor, not a number or a 0-d constant (SDPA's "
                 "scale is a number)")
            scale = scale / f if inv else scale * f
    assert math.isfinite(scale) and scale != 0.0
    # ---- the additive terms: float tensors of q's dtype broadcasting to the scores
    scores = tuple(q.shape[:-1]) + (kshape[-2],)
    back = p3 if p3 is not None else (x if xv is not None else None)  # the view back to 3-D
    assert (s4 is None) == (back is None) and (p3 is None or xv is None), \
        ("the scores are viewed as 4-D but the logits or weights not viewed back, or "
         "conversely")
    scores4, to3 = scores, (lambda t: t)
    if s4 is not None:
        # 3-D scores (N, L, S) viewed as (B, H, L, S) with B * H == N (a row-major
        # view: s4[b, h] is s3[b * H + h]), masked in 4-D, the weights viewed back
        # to (N, L, S): SDPA runs in 3-D, a 4-D term t becomes
        # reshape(expand(t, (B, H, L, S)), (N, L, S)), the same entries
        assert s4.rank == 4 and r == 3, "the scores are viewed to another rank than 4"
        scores4 = tuple(s4.shape)
        bb, hh, ll, ss = scores4
        assert bb * hh == scores[0] and (ll, ss) == scores[1:] \
            and tuple(back.shape) == scores, \
            "the views of the scores and weights are not a split of the batch axis"
        to3 = (lambda t: Reshape(Expand(t, list(scores4), False), list(scores)))
    terms = []
    if bias is not None:  # baddbmm: beta * bias, then scaled like the scores
        f = _number(beta)
        assert f is not None, "baddbmm's beta is not a number"
        s_only = scale / (_number(alpha) if alpha is not None else 1.0)
        if f != 0.0:  # beta == 0: baddbmm ignores the bias (NaN and inf in it too)
            terms.append((bias, f * s_only))
    terms += [(m, 1.0) for m in (m0, m1, m2) if m is not None]
    # the one mask SDPA would get, if the program computes it from its
    # constants alone (folded now) and it is exactly is_causal's (top left;
    # no row fully masked, so no fix-up): is_causal=True instead (the
    # "causal" variant), decided before any node of the mask is built
    b = bm if bm is not None else bk
    source = None
    if b is not None and not terms and ma is None and s4 is None:
        source = (b, "keep" if bk is not None else "masked")
    elif b is None and len(terms) == 1 and terms[0][1] == 1.0 and s4 is None:
        source = (terms[0][0], "additive")
    causal = source is not None and _causal.is_causal(
        _causal.folded(source[0], ctx), scores, source[1]) \
        and ctx.profitable("attention", dtype=q.torch_dtype, variant="causal", seq=kshape[-2])
    mask = None
    for m, f in terms:
        assert not m.is_const and _widens_to(m.torch_dtype, q.torch_dtype), \
            ("an additive term is a number, or of a dtype other than the scores' that does "
             "not convert to it exactly (float16/bfloat16 to float32 to float64)")
        four = s4 is not None and m is not bias and m is not m0  # added after the 4-D view
        assert m.rank is not None and m.rank >= 2 \
            and _broadcasts(m.shape, scores4 if four else scores), \
            "an additive term does not broadcast to the scores q kT"
        if causal:
            continue  # SDPA gets no mask
        m = _as_dtype(m, q.torch_dtype)  # the original adds it in q's dtype: exact
        m = to3(m) if four else m
        m = m if f == 1.0 else Mul(m, f)
        mask = m if mask is None else Add(mask, m, 1)
    # ---- a boolean mask applied by masked_fill / where
    keep, filled = None, None
    if b is not None:
        assert not b.is_const and b.dtype == pm.bool_ and _broadcasts(b.shape, scores4), \
            "the mask of masked_fill/where is not a boolean broadcasting to the scores"
        number = _fill_number(fill, ctx)
        assert number is not None, \
            ("the masked_fill/where value is a tensor, not a number or a 0-d constant of "
             "the program")
        filled = _fill_value(number, x.torch_dtype)  # -inf where the dtype overflows
        # -inf, or the logits dtype's minimum (float32's is -3.4028234663852886e38;
        # the literals also tell check-rules which fills to draw)
        assert fill.value == -math.inf or filled == -math.inf \
            or (fill.value == -3.4028234663852886e38 and filled == _lowest(x)) \
            or filled == _lowest(x), \
            ("the masked_fill/where value is neither -inf nor the dtype's minimum: the "
             "masked weights exp(fill - max) need not vanish as in SDPA")
        keep = None if causal else to3(bk if bk is not None else LogicalNot(b))
        if causal:
            pass  # SDPA gets no mask, and no row is fully masked
        elif ma is None:
            mask = keep if mask is None else WhereScalarOther(keep, mask, -math.inf)
        else:
            # where(keep, s + pre, fill) + ma: SDPA gets the float mask
            # where(keep, pre + ma, ma + fill), the original's logits minus s
            # on the kept entries; on the others s + (ma + fill) == ma + fill
            # in IEEE arithmetic (-inf absorbs s; the minimum's spacing, 2^104
            # in float32, exceeds 2|s|), so SDPA sees the original's logits
            # and no row needs restoring, except rows of -inf (NaN in eager)
            assert not ma.is_const and _widens_to(ma.torch_dtype, q.torch_dtype) \
                and ma.rank is not None and _broadcasts(ma.shape, scores4), \
                ("the term added after the mask is not a tensor of q's dtype broadcasting to "
                 "the scores")
            assert filled == -math.inf or x.dtype != pm.f16, \
                ("float16 logits filled with the dtype's minimum and then added to: SDPA adds "
                 "the scores to the mask in float32, where s + min(float16) is not min(float16)")
            post = to3(_as_dtype(ma, q.torch_dtype))
            kept = post if mask is None else Add(mask, post, 1)
            mask = Where(keep, kept, Add(post, filled, 1))
            if filled != -math.inf:
                keep = None  # SDPA computes the original's softmax on every row
    # ---- softmax over the last axis, probabilities in q's dtype
    assert x.dtype == q.dtype, "the logits are not in the dtype of q"
    assert sdim.is_const and (sdim.value == -1 or _axis(sdim.value, sm.rank) == sm.rank - 1), \
        "the softmax is over another axis than the last (SDPA's is over the keys)"
    for c in (sdt, up):
        if c is not None and not (c.is_const and c.value is None):
            assert c.is_const and isinstance(c.value, torch.dtype) \
                and _widens_to(q.torch_dtype, c.value), \
                ("the softmax is computed in a dtype narrower than q's or not floating (SDPA "
                 "computes it in q's dtype or wider)")
    assert p.dtype == q.dtype, "the attention weights are not in the dtype of q and v"
    if pd is not None:  # dropout(p, pd, train): the identity when not training or pd == 0
        assert pd.is_const and isinstance(pd.value, (int, float)) and 0 <= pd.value <= 1, \
            "the dropout probability is not a number in [0, 1]"
        assert dtrain.is_const and (dtrain.value is False or pd.value == 0), \
            (f"dropout in training mode (p = {pd.value}) is random, not the identity "
             "(SDPA's dropout would draw other random numbers); export the model in eval "
             "mode or pass training=self.training to F.dropout")
    if ctx.target == "cpu":
        assert q.device is not None and q.device.type == "cpu"
    if causal:  # every guard above holds: the mask is is_causal's
        return SDPA(q, kk, v, None, 0.0, True, scale, False)
    # SDPA is called with an explicit mask (or none): the "mask" variant of the table
    assert ctx.profitable("attention", dtype=q.torch_dtype, variant="mask",
                          seq=kshape[-2])
    out = SDPA(q, kk, v, mask, 0.0, False, scale, False)
    if keep is None:
        return out
    # a row the boolean mask keeps nothing of: NaN (fill -inf) or the uniform
    # average of v (a finite fill) in the original; SDPA gives 0 there
    safe = sm.fx is not None and sm.fx.target == torch.ops.aten._safe_softmax.default
    if filled == -math.inf and safe:
        return out  # the safe softmax gives 0 there too
    any_kept = AnyDim(keep, -1, True)
    if filled == -math.inf:
        return WhereScalarOther(any_kept, out, math.nan)
    return Where(any_kept, out, Mean(v, [-2], True, None))


# ----------------------------------------------- SDPA's math, decomposed
# ``F.scaled_dot_product_attention`` under ``ep.run_decompositions()`` (core
# ATen: ``permute``, the safe softmax written out) or traced to ATen
# (``make_fx``, AOTAutograd: ``transpose``, ``_safe_softmax``,
# ``_unsafe_view``): a pattern of its own, the family's fuel bound having no
# room for its steps

@pm.pattern
def CoreOperand(a, e, va):
    """An operand of the decomposed ``matmul``: ``view(expand(a, e), va)``,
    or with a ``clone`` between (a permuted operand made contiguous, e.g. q,
    k, v permuted from ``[B, S, H, D]``: the same values)."""
    return View(Expand(a, e, False), va)


@pm.pattern
def CoreOperand(a, e, va):  # noqa: F811
    fmt = pm.var()
    return View(Clone(Expand(a, e, False), fmt), va)


@pm.pattern
def CoreBmm(a, b, ea, eb, va, vb, vo):
    """``matmul(a, b)`` as SDPA's math decomposes it: both operands expanded
    to the batch, viewed to 3-D, ``bmm``, the product viewed back."""
    return View(Bmm(CoreOperand(a, ea, va), CoreOperand(b, eb, vb)), vo)


@pm.pattern
def CoreBmm(a, b, ea, eb, va, vb, vo):  # noqa: F811
    return UnsafeView(Bmm(CoreOperand(a, ea, va), CoreOperand(b, eb, vb)), vo)


@pm.pattern
def CoreBmm(a, b, ea, eb, va, vb, vo):  # noqa: F811
    """``matmul(a, b)`` itself: the decomposition traced at the export IR
    (Inductor's ``fuse_attention`` form of BERT-like models, the query, key
    and value permuted from ``[B, S, H, D]``: ``mul.Scalar`` on
    ``transpose(k)``, which the family has no fuel for)."""
    return MatMul(a, b)


@pm.pattern
def CoreKeyT(k, ta, tb, perm, kmul):
    """``mul.Scalar(kT, kmul)``, ``kT`` by ``permute`` (core ATen) or
    ``transpose`` (ATen)."""
    return MulScalar(Permute(k, perm), kmul)


@pm.pattern
def CoreKeyT(k, ta, tb, perm, kmul):  # noqa: F811
    return MulScalar(Transpose(k, ta, tb), kmul)


@pm.pattern
def CoreLogits(q, k, ta, tb, perm, kmul, am, e0, e1, v0, v1, v2):
    """``q`` (the scaled query) times the scaled ``kT``, maybe plus an
    additive mask ``am``."""
    kt = pm.var()
    kt <= CoreKeyT(k, ta, tb, perm, kmul)
    return CoreBmm(q, kt, e0, e1, v0, v1, v2)


@pm.pattern
def CoreLogits(q, k, ta, tb, perm, kmul, am, e0, e1, v0, v1, v2):  # noqa: F811
    kt = pm.var()
    kt <= CoreKeyT(k, ta, tb, perm, kmul)
    return Add(CoreBmm(q, kt, e0, e1, v0, v1, v2), am, 1)


@pm.pattern
def CoreSafeSoftmax(x, sm, sdim, half, ninf, adim, zero, zdt):
    """``_safe_softmax(x, sdim, zdt)``, or written out (core ATen):
    ``where(!any(x != -inf, adim), full_like(sm, zero, zdt), sm)``, ``sm =
    _softmax(x, sdim, half)``."""
    return SafeSoftmax(x, sdim, zdt)


@pm.pattern
def CoreSafeSoftmax(x, sm, sdim, half, ninf, adim, zero, zdt):  # noqa: F811
    layout, device, pin, fmt = pm.var(), pm.var(), pm.var(), pm.var()
    sm <= SoftmaxImpl(x, sdim, half)
    return Where(LogicalNot(AnyDim(LogicalNot(EqScalar(x, ninf)), adim, True)),
                 FullLike(sm, zero, zdt, layout, device, pin, fmt), sm)


@pm.pattern
def CoreAttention(q, k, v, ta, tb, perm, kmul, am, x, sm, sdim, half, ninf, adim, zero, zdt,
                  w, e0, e1, v0, v1, v2, e2, e3, v3, v4, v5):
    """SDPA's math decomposed: ``CoreBmm(safe_softmax(CoreLogits), v)``."""
    assert q.rank >= 3 and q.rank <= 4 and v.rank == q.rank
    w <= CoreSafeSoftmax(x, sm, sdim, half, ninf, adim, zero, zdt)
    x <= CoreLogits(q, k, ta, tb, perm, kmul, am, e0, e1, v0, v1, v2)
    return CoreBmm(w, v, e2, e3, v3, v4, v5)


def _sizes(c):
    """A constant list of sizes as a list (None if it is not one)."""
    return list(c.value) if c is not None and c.is_const \
        and isinstance(c.value, (list, tuple)) else None


def _core_matmul(sa, sb, ea, eb, va, vb, vo):
    """Assert that ``view(bmm(view(expand(a, ea), va), view(expand(b, eb),
    vb)), vo)``, ``a`` and ``b`` of shapes ``sa`` and ``sb``, is ``matmul(a,
    b)``: the expands keep the shapes, the views flatten the (equal) batch
    axes and unflatten them (row-major: the same entries); or that
    ``matmul(a, b)`` (no chain: ``ea`` ... ``vo`` None) is batched with
    equal batch axes, as SDPA's products are."""
    sa, sb = list(sa), list(sb)
    batch = sa[:-2]
    if all(c is None for c in (ea, eb, va, vb, vo)):  # matmul(a, b) itself: no broadcast
        assert sb[:-2] == batch and sa[-1] == sb[-2], \
            "the matmul broadcasts its operands' batch axes (SDPA's do not)"
        return
    n = math.prod(batch)
    kept = lambda e, s: e is not None and len(e) == len(s) and all(  # noqa: E731
        d == -1 or d == t for d, t in zip(e, s))  # expand's -1 keeps the size
    assert kept(_sizes(ea), sa) and kept(_sizes(eb), sb) and sb[:-2] == batch \
        and _sizes(va) == [n] + sa[-2:] and _sizes(vb) == [n] + sb[-2:] \
        and _sizes(vo) == batch + [sa[-2], sb[-1]], \
        ("the expand/view/bmm chain is not a batched matmul (operands broadcast, or the "
         "views are not a flattening of the batch axes)")


@pm.rule(CoreAttention)
def sdpa_core(q, k, v, ta, tb, perm, kmul, am, x, sm, sdim, half, ninf, adim, zero, zdt,
              w, e0, e1, v0, v1, v2, e2, e3, v3, v4, v5, ctx):
    """-> aten.scaled_dot_product_attention(q, mul.Scalar(k', c), v, am,
    scale=1): the factors stay on ``q`` and ``k`` -- the original's products,
    exactly (folding ``c * c`` into ``scale`` would be exact only up to
    rounding: ``fl(c)^2`` is not the scale)."""
    r = q.rank
    assert r in (3, 4) and v.rank == r and k.rank == r  # SDPA's (batch..., L, E) operands
    assert q.dtype in _FLOATS and q.dtype == k.dtype and q.dtype == v.dtype
    kk, kshape = _key(k, perm, ta, tb, r)
    c = _number(kmul)
    assert c is not None, "the factor on the transposed key is not a finite number"
    assert kshape is not None and q.shape[-1] == kshape[-1] and kshape[-2] == v.shape[-2]
    scores = list(q.shape[:-1]) + [kshape[-2]]
    kt = list(kshape[:-2]) + [kshape[-1], kshape[-2]]
    _core_matmul(q.shape, kt, e0, e1, v0, v1, v2)
    _core_matmul(scores, v.shape, e2, e3, v3, v4, v5)
    # the safe softmax over the last axis, in q's dtype
    last = lambda d: d.is_const and _axis(d.value, r) == r - 1  # noqa: E731
    assert last(sdim) and zdt.is_const and zdt.value in (None, q.torch_dtype), \
        "the softmax is not over the keys (the last axis) in q's dtype"
    if sm is not None:  # written out: where(!any(x != -inf), 0, _softmax(x))
        assert last(adim) and half.is_const and half.value is False and ninf.is_const \
            and ninf.value == -math.inf and _plus_zero(zero), \
            ("the softmax is not SDPA's safe softmax (0 on rows of -inf) over the keys in "
             "q's dtype")
        assert sm.dtype == q.dtype
    assert x.dtype == q.dtype and w.dtype == q.dtype
    mask, causal = None, False
    if am is not None:
        assert not am.is_const and _widens_to(am.torch_dtype, q.torch_dtype) \
            and am.rank is not None and am.rank >= 2 and _broadcasts(am.shape, scores), \
            ("the additive mask is not a tensor of q's dtype (or one converting to it "
             "exactly) broadcasting to the scores")
        # is_causal decomposed (a mask from arange), or any constant mask
        # that is exactly is_causal's: no mask node is built then
        causal = _causal.is_causal(_causal.folded(am, ctx), scores, "additive") \
            and ctx.profitable("attention", dtype=q.torch_dtype, variant="causal",
                               seq=kshape[-2])
        mask = None if causal else _as_dtype(am, q.torch_dtype)
    if ctx.target == "cpu":
        assert q.device is not None and q.device.type == "cpu"
    if causal:
        return SDPA(q, MulScalar(kk, c), v, None, 0.0, True, 1.0, False)
    assert ctx.profitable(  # the attention family's measured table
        "attention", dtype=q.torch_dtype, variant="mask", seq=kshape[-2])
    # a row of -inf logits: 0 in the safe softmax and in SDPA
    return SDPA(q, MulScalar(kk, c), v, mask, 0.0, False, 1.0, False)


PATTERNS = [Attention, CoreAttention]
