"""Attention as other code bases write it: small modules in the style of
DistilBERT, GPT-2 / GPT-Neo, T5, MBart / PLBart, SDPA's own math
decomposition, and dropout given a probability at inference, exported with
torch.export and rewritten by the library's attention rule (profitability
off); each is fused into ``aten.scaled_dot_product_attention`` with the
original's numerics, or left alone with the reason in the report.

Tolerance per dtype (absolute, outputs of magnitude <= ~3, two units in the
last place there): float32 2e-5, float16 4e-3, bfloat16 3.2e-2 -- SDPA
computes the softmax in float32 for half inputs, as the forms below that
cast around the softmax do; NaN where (and only where) the original has it.

Skipped when torch is missing (`make test` installs it)."""
import math

import pytest

torch = pytest.importorskip("torch")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from pypm_verified.library import default_patterns  # noqa: E402
from pypm_verified.torch.loader import LoadedModel, load_model  # noqa: E402
from pypm_verified.torch.pipeline import rewrite_program  # noqa: E402

SDPA = torch.ops.aten.scaled_dot_product_attention.default
SOFTMAX = (torch.ops.aten.softmax.int, torch.ops.aten._safe_softmax.default,
           torch.ops.aten._softmax.default)
B, H, L, E = 2, 2, 6, 8
TOL = {torch.float32: 2e-5, torch.float16: 4e-3, torch.bfloat16: 3.2e-2}
HALF = (torch.float16, torch.bfloat16)


def _qkv(dtype=torch.float32, rank=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    shape = (B, H, L, E) if rank == 4 else (B * H, L, E)
    return [torch.randn(shape, generator=g).to(dtype) for _ in range(3)]


def _rewrite(mod, inputs, core=False):
    """``mod`` exported and rewritten; ``core``: exported with core-ATen
    decompositions (``run_decompositions()``), as a saved program may be."""
    if core:
        prog = LoadedModel(torch.export.export(mod, tuple(inputs)).run_decompositions(),
                           tuple(inputs))
    else:
        prog = load_model(mod, inputs)
    return rewrite_program(prog, default_patterns(("attention",)), target="cuda",
                           check_profitability=False)


def _targets(ep):
    return [n.target for n in ep.graph.nodes if n.op == "call_function"]


def _declines(r):
    return r.report.declines.get("Attention", {}).get("sdpa", {})


def _assert_fused(mod, inputs, n=1, core=False, rule="sdpa"):
    """Rewrite ``mod``: ``n`` SDPA calls, no softmax left, the outputs within
    the dtype's tolerance of the original's (and NaN at the same places)."""
    r = _rewrite(mod, inputs, core)
    assert r.report.firings.get(rule) == n, (r.report.firings, dict(_declines(r)))
    t = _targets(r.ep)
    assert t.count(SDPA) == n and not any(s in SOFTMAX for s in t), t
    ours, eager = r.ep.module()(*inputs), mod(*inputs)
    ours, eager = (x if isinstance(x, tuple) else (x,) for x in (ours, eager))
    for a, o in zip(eager, ours):
        assert a.dtype == o.dtype and a.shape == o.shape
        assert torch.equal(torch.isnan(a), torch.isnan(o))
        diff = (a.double() - o.double()).nan_to_num().abs().max().item()
        assert diff <= TOL[a.dtype], (a.dtype, diff)
    return r, eager, ours


def _assert_declined(mod, inputs, reason, core=False):
    r = _rewrite(mod, inputs, core)
    assert not r.report.firings and SDPA not in _targets(r.ep)
    why = list(_declines(r)) + list(r.report.declines.get("CoreAttention", {})
                                    .get("sdpa_core", {}))
    assert any(reason in w for w in why), why
    return r


# ------------------------------------------------- 1. DistilBERT's masked_fill

class DistilBertAttention(nn.Module):
    """``scores.masked_fill((mask == 0).view(bs, 1, 1, k).expand_as(scores),
    torch.tensor(finfo.min))``, the scale a division of the scores or of q."""

    def __init__(self, scale_on_q=False, fill="min"):
        super().__init__()
        self.scale_on_q, self.fill = scale_on_q, fill

    def forward(self, q, k, v, mask):
        bs, k_len = q.shape[0], k.shape[2]
        if self.scale_on_q:
            scores = torch.matmul(q / math.sqrt(E), k.transpose(2, 3))
        else:
            scores = torch.matmul(q, k.transpose(2, 3)).div(math.sqrt(E))
        masked = (mask == 0).view(bs, 1, 1, k_len).expand_as(scores)
        fill = torch.tensor(torch.finfo(scores.dtype).min) if self.fill == "min" \
            else -float("inf")
        scores = scores.masked_fill(masked, fill)
        return torch.matmul(F.softmax(scores, dim=-1), v)


def _padding(all_padded=False):
    m = torch.ones(B, L, dtype=torch.long)
    m[0, L - 2:] = 0
    if all_padded:
        m[1] = 0  # every key of batch 1 is padding: its rows are fully masked
    return m


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("scale_on_q", [False, True])
def test_distilbert_masked_fill_with_a_zero_compared_mask(lib, dtype, scale_on_q):
    _assert_fused(DistilBertAttention(scale_on_q), (*_qkv(dtype), _padding()))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_distilbert_fully_padded_rows(lib, dtype):
    """A sequence that is all padding: with the dtype's minimum every weight
    is uniform (the mean of v), with -inf the row is NaN; the rewrite agrees."""
    q, k, v = _qkv(dtype)
    _, eager, _ = _assert_fused(DistilBertAttention(), (q, k, v, _padding(True)))
    assert torch.allclose(eager[0][1].float(), v[1].float().mean(-2, keepdim=True)
                          .expand(H, L, E), atol=TOL[dtype])
    _, eager, _ = _assert_fused(DistilBertAttention(True, fill="-inf"),
                                (q, k, v, _padding(True)))
    assert torch.isnan(eager[0][1]).all()


# ------------------------------------------------- 2. GPT-2's where(causal, s, min)

class Gpt2Attention(nn.Module):
    """``torch.where(causal, w / torch.full([], sqrt(d)), torch.full([],
    finfo.min))``, maybe ``+ attention_mask``, ``.type(v.dtype)``."""

    def __init__(self, add_mask=True):
        super().__init__()
        self.add_mask = add_mask

    def forward(self, q, k, v, attention_mask):
        w = torch.matmul(q, k.transpose(-1, -2))
        w = w / torch.full([], v.size(-1) ** 0.5, dtype=w.dtype, device=w.device)
        causal = torch.ones(L, L, dtype=torch.bool).tril().view(1, 1, L, L)
        lowest = torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype, device=w.device)
        w = torch.where(causal, w.to(w.dtype), lowest)
        if self.add_mask:
            w = w + attention_mask
        w = F.softmax(w, dim=-1).type(v.dtype)
        return torch.matmul(w, v)


def _left_padding(dtype):
    """GPT-2's additive mask: batch 0 left-padded by two (its query rows 0
    and 1 see only padding)."""
    am = torch.zeros(B, 1, 1, L, dtype=dtype)
    am[0, ..., :2] = torch.finfo(dtype).min
    return am


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("add_mask", [True, False])
def test_gpt2_where_with_the_minimum_and_a_0d_scale(lib, dtype, add_mask):
    """Fused, rows that see only padding included (their logits are the
    minimum, so the original's weights are uniform over those keys)."""
    _assert_fused(Gpt2Attention(add_mask), (*_qkv(dtype), _left_padding(dtype)))


def test_gpt2_float16(lib):
    """float16: the causal ``where`` alone is fused (a boolean mask, no row
    is fully masked by a causal mask); followed by ``+ attention_mask`` it is
    left alone with the reason (SDPA adds the scores to the mask in float32,
    where s + min(float16) is not min(float16))."""
    dt = torch.float16
    _assert_fused(Gpt2Attention(False), (*_qkv(dt), _left_padding(dt)))
    _assert_declined(Gpt2Attention(True), (*_qkv(dt), _left_padding(dt)),
                     "float16 logits filled with the dtype's minimum and then added to")


def test_a_0d_scale_that_is_an_input_is_declined(lib):
    class TensorScale(nn.Module):
        def forward(self, q, k, v, c):
            return torch.softmax(torch.matmul(q, k.transpose(-1, -2)) / c, -1) @ v
    _assert_declined(TensorScale(), (*_qkv(), torch.tensor(2.0)),
                     "not a number or a 0-d constant")


# ------------------------------------------------- 3. casts around the softmax

class T5Attention(nn.Module):
    """``F.softmax(scores.float(), dim=-1).type_as(scores)`` on scores plus a
    position bias (T5), or ``scores.type_as(query)`` then ``.to(float32)``
    and the weights ``.to(query.dtype)``, ``v.to(attn.dtype)``."""

    def __init__(self, style):
        super().__init__()
        self.style = style

    def forward(self, q, k, v, bias):
        scores = torch.matmul(q, k.transpose(3, 2))
        if self.style == "t5":
            w = F.softmax((scores + bias).float(), dim=-1).type_as(scores)
        elif self.style == "type_as":
            w = F.softmax((scores * 0.25).type_as(q), dim=-1)
        else:
            w = torch.softmax((scores * 0.25).type_as(q).to(torch.float32), -1).to(q.dtype)
            v = v.to(w.dtype)
        return torch.matmul(w, v)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("style", ["t5", "type_as", "half"])
def test_casts_around_the_softmax(lib, dtype, style):
    """A cast to the tensor's own dtype is the identity; a float32 softmax
    inside half attention is what SDPA computes (tolerance: the dtype's)."""
    bias = torch.randn(1, H, L, L, generator=torch.Generator().manual_seed(3)).to(dtype)
    _assert_fused(T5Attention(style), (*_qkv(dtype), bias))


def test_a_softmax_narrower_than_q_is_declined(lib):
    class Narrow(nn.Module):
        def forward(self, q, k, v):
            s = torch.matmul(q, k.transpose(-1, -2))
            return F.softmax(s, -1, dtype=torch.float16).to(q.dtype) @ v
    _assert_declined(Narrow(), tuple(_qkv()), "narrower than q's")


# ------------------------------------------------- 4. MBart's 3-D bmm with a 4-D mask

class MBartAttention(nn.Module):
    """``bmm(q * s, k^T)``, ``.view(bs, heads, l, s) + mask``, ``.view(bs *
    heads, l, s)``, softmax, dropout(training=False), ``bmm``."""

    def forward(self, q, k, v, mask):
        w = torch.bmm(q * E ** -0.5, k.transpose(1, 2))
        w = w.view(B, H, L, L) + mask
        w = w.view(B * H, L, L)
        w = F.dropout(F.softmax(w, dim=-1), p=0.1, training=False)
        return torch.bmm(w, v)


def _causal_mask(dtype):
    return torch.zeros(B, 1, L, L, dtype=dtype).masked_fill(
        torch.ones(L, L, dtype=torch.bool).triu(1), torch.finfo(dtype).min)


@pytest.mark.parametrize("dtype, mask_dtype", [
    (torch.float32, torch.float32), (torch.float16, torch.float16),
    (torch.bfloat16, torch.bfloat16),
    (torch.float32, torch.float16), (torch.float32, torch.bfloat16),  # the mask narrower
])
def test_mbart_bmm_with_a_4d_mask(lib, dtype, mask_dtype):
    """A mask of a narrower dtype than q/k/v is converted (exactly) to
    theirs, as the original's addition does."""
    r, _, _ = _assert_fused(MBartAttention(), (*_qkv(dtype, rank=3), _causal_mask(mask_dtype)))
    if mask_dtype != dtype:
        assert torch.ops.aten._to_copy.default in _targets(r.ep)


def test_mbart_mask_of_an_inexact_dtype_is_declined(lib):
    """A bfloat16 mask on float16 scores computes in float32 (the logits are
    not in q's dtype): left alone with the reason."""
    class Mixed(nn.Module):
        def forward(self, q, k, v, mask):
            w = (torch.bmm(q, k.transpose(1, 2)).view(B, H, L, L) + mask).view(B * H, L, L)
            return torch.bmm(F.softmax(w, dim=-1).to(v.dtype), v)
    _assert_declined(Mixed(), (*_qkv(torch.float16, rank=3), _causal_mask(torch.bfloat16)),
                     "does not convert to it exactly")


# ------------------------------------------------- 5. SDPA's own math decomposition

class SdpaMath(nn.Module):
    """What ``F.scaled_dot_product_attention`` decomposes to: the scale's
    square root on q and on ``permute(k)`` by ``aten.mul.Scalar``, then
    ``aten._safe_softmax``, with or without an additive mask."""

    def __init__(self, masked):
        super().__init__()
        self.masked = masked

    def forward(self, q, k, v, am):
        s = math.sqrt(1.0 / math.sqrt(E))
        a = torch.ops.aten.mul.Scalar(q, s)
        b = torch.ops.aten.mul.Scalar(k.permute(0, 1, 3, 2), s)
        w = a @ b
        if self.masked:
            w = w + am
        return torch.ops.aten._safe_softmax(w, -1) @ v


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("masked", [True, False])
def test_sdpa_math_decomposition(lib, dtype, masked):
    _assert_fused(SdpaMath(masked), (*_qkv(dtype), _left_padding(dtype)))


def test_sdpa_math_with_a_fully_masked_row(lib):
    """An additive -inf mask covering a whole row: the safe softmax gives 0
    there, and so does the rewrite."""
    am = torch.zeros(B, 1, L, L)
    am[0, :, 1, :] = -math.inf
    _, eager, _ = _assert_fused(SdpaMath(True), (*_qkv(), am))
    assert (eager[0][0, :, 1] == 0).all()


class SdpaCall(nn.Module):
    """``F.scaled_dot_product_attention`` with an additive (float) mask, a
    boolean one, ``is_causal`` or none: under core-ATen decomposition the
    scale's square root on q and on ``permute(k)`` by ``mul.Scalar``,
    ``expand``/``view``/``bmm``/``view``, the safe softmax written out
    (``_softmax`` and ``where(!any(x != -inf), 0, .)``), the same ``bmm``
    chain with ``v``."""

    def __init__(self, mask=None, scale=None):
        super().__init__()
        self.mask, self.scale = mask, scale

    def forward(self, q, k, v, am):
        if self.mask == "causal":
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=am if self.mask else None,
                                              scale=self.scale)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("mask", [None, "additive"])
def test_sdpa_core_aten_decomposition(lib, dtype, mask):
    """Fused back to one SDPA whose operands are the decomposition's scaled q
    and k (the same products: no rounding of the scale is added). Half
    inputs are cast to float32 by the CPU decomposition: SDPA runs on those."""
    r, _, _ = _assert_fused(SdpaCall(mask), (*_qkv(dtype), _left_padding(dtype)), core=True,
                            rule="sdpa_core")
    assert torch.ops.aten.bmm.default not in _targets(r.ep)


@pytest.mark.parametrize("mask", ["bool", "causal"])
def test_sdpa_core_aten_with_a_boolean_or_causal_mask(lib, mask):
    """A boolean mask becomes ``where(m, 0, -inf)`` added to the logits: the
    additive mask SDPA gets; ``is_causal`` a mask built from ``arange``."""
    keep = torch.ones(L, L, dtype=torch.bool).tril().expand(B, 1, L, L)
    _assert_fused(SdpaCall(mask), (*_qkv(), keep), core=True, rule="sdpa_core")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_sdpa_core_aten_with_fully_masked_rows(lib, dtype):
    """Rows that are -inf everywhere in the mask: 0 in the decomposition's
    safe softmax, 0 in SDPA (no NaN)."""
    am = torch.zeros(B, 1, L, L, dtype=dtype)
    am[0, :, 1, :] = -math.inf
    am[1] = -math.inf
    _, eager, ours = _assert_fused(SdpaCall("additive"), (*_qkv(dtype), am), core=True,
                                   rule="sdpa_core")
    assert (ours[0][0, :, 1] == 0).all() and (ours[0][1] == 0).all()
    assert not torch.isnan(eager[0]).any()


def test_sdpa_core_aten_3d_and_a_given_scale(lib):
    _assert_fused(SdpaCall("additive", scale=0.3),
                  (*_qkv(rank=3), torch.zeros(B * H, L, L)), core=True, rule="sdpa_core")


class SdpaAten(nn.Module):
    """SDPA's math as ATen traces it (``make_fx``, AOTAutograd): ``mul.Scalar``
    on ``transpose(k)``, ``_unsafe_view`` back from ``bmm``,
    ``_safe_softmax``."""

    def __init__(self, flat=False):
        super().__init__()
        self.flat = flat

    def forward(self, q, k, v):
        a, c = torch.ops.aten, E ** -0.25
        kt = a.mul.Scalar(a.transpose.int(k, -2, -1), c)
        x = a.bmm(a.view(a.expand(a.mul.Scalar(q, c), [B, H, L, E]), [B * H, L, E]),
                  a.view(a.expand(kt, [B, H, E, L]), [B * H, E, L]))
        w = a._safe_softmax(a._unsafe_view(x, [B, H, L, L]), -1)
        o = a.bmm(a.view(a.expand(w, [B, H, L, L]), [B * H, L, L]),
                  a.view(a.expand(v, [B, H, L, E]), [B * H, L, E]))
        return a._unsafe_view(o, [B * H * L, E] if self.flat else [B, H, L, E])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_sdpa_math_traced_to_aten(lib, dtype):
    _assert_fused(SdpaAten(), tuple(_qkv(dtype)), rule="sdpa_core")


def test_sdpa_math_viewed_to_other_sizes_is_declined(lib):
    """The product viewed back to other sizes than the batch's: not the
    batched matmul SDPA computes."""
    _assert_declined(SdpaAten(flat=True), tuple(_qkv()), "not a batched matmul")


# ------------------------------------------------- two outputs, one node

class TwoOutputs(nn.Module):
    """The same attention returned twice, or two equal attention blocks
    (merged into one node by the term graph's hash-consing)."""

    def __init__(self, same):
        super().__init__()
        self.same = same

    def forward(self, q, k, v):
        a = torch.softmax(q @ k.transpose(-1, -2) * 0.25, -1) @ v
        b = a if self.same else torch.softmax(q @ k.transpose(-1, -2) * 0.25, -1) @ v
        return a, b


@pytest.mark.parametrize("same", [True, False])
def test_two_outputs_rewritten_to_one_sdpa(lib, same):
    """Both outputs name the one SDPA node in the program's signature (it
    validates, and runs)."""
    r, _, _ = _assert_fused(TwoOutputs(same), tuple(_qkv()))
    outs = [s.arg.name for s in r.ep.graph_signature.output_specs]
    assert len(outs) == 2 and outs[0] == outs[1] \
        and outs[0] == next(n.name for n in r.ep.graph.nodes if n.target == SDPA)


def test_two_equal_outputs_merged_without_a_rule(lib):
    """Two equal pure expressions as outputs, no rule firing: the term graph
    merges them, and the signature follows."""
    class Twice(nn.Module):
        def forward(self, x):
            return torch.sin(x) + 1, torch.sin(x) + 1
    x = torch.randn(3, 4)
    r = _rewrite(Twice(), (x,))
    a, b = r.ep.module()(x)
    assert torch.equal(a, torch.sin(x) + 1) and torch.equal(b, a)
    assert len({s.arg.name for s in r.ep.graph_signature.output_specs}) == 1


# ------------------------------------------------- 6. dropout with p at inference

class Dropouts(nn.Module):
    """``F.dropout(attn, p, training=False)``, ``torch.dropout(attn, 0.0,
    True)`` (exported as the identity) or ``F.dropout(attn, p)`` (training
    defaults to True: random even in eval mode)."""

    def __init__(self, form):
        super().__init__()
        self.form = form

    def forward(self, q, k, v):
        a = torch.softmax(q @ k.transpose(-1, -2) * 0.25, -1)
        if self.form == "eval":
            a = F.dropout(a, 0.1, training=False)
        elif self.form == "p0":
            a = torch.dropout(a, 0.0, True)
        elif self.form == "train_false":
            a = torch.dropout(a, 0.2, False)
        else:
            a = F.dropout(a, 0.1)
        return a @ v


@pytest.mark.parametrize("form", ["eval", "p0", "train_false"])
def test_dropout_that_is_the_identity_is_seen_through(lib, form):
    _assert_fused(Dropouts(form).eval(), tuple(_qkv()))


def test_dropout_in_training_mode_is_declined(lib):
    _assert_declined(Dropouts("train").eval(), tuple(_qkv()), "dropout in training mode")



def test_the_family_stays_under_the_default_fuel():
    """Every alternate multiplies the pattern's fuel bound: with these forms
    it is 66,260,753 steps (65,689,540 before the half-precision form whose
    dropout sits between the upcast softmax and the cast back), under the
    default 2^26 at every depth."""
    import pypm_verified as pm
    from pypm_verified.core.fuel import DEFAULT_FUEL
    from pypm_verified.library.attention import Attention
    t = pm.termination(Attention)
    assert t.descending and t.depth_limit is None, str(t)
    assert t.fuel_bound(t.nesting) == 66_260_753 <= DEFAULT_FUEL
    # SDPA's decomposed math is a pattern of its own: its bound adds nothing here
    from pypm_verified.library.attention import CoreAttention
    c = pm.termination(CoreAttention)
    assert c.descending and c.depth_limit is None and c.fuel_bound(c.nesting) == 11_964, str(c)


# ------------------------------------------------ a deliberately wrong variant

def test_wrong_view_back_of_the_mask_is_refuted(lib):
    """check-rules refutes a rule for MBart's form that flattens the 4-D mask
    head-major: its counterexample has more than one batch and head."""
    import os
    from pypm_verified.checking import check_rules
    from pypm_verified.library import load_rules
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wrong_rules",
                        "attention_view_mask.py")
    (r,) = check_rules(load_rules(path), examples=40, guards=False, symbolic=False)
    assert r.status == "refuted", (r.status, r.reason)
    c = r.counterexample
    assert c.kind == "disagree" and "view(add(view(bmm(" in c.expression
    m = next(i for i in c.inputs if i["name"] == "m")
    assert m["shape"][0] > 1 and m["shape"][1] > 1, c.inputs


# ------------------------------------------ 7. Inductor's last forms, through the CLI
# Two forms of Inductor's ``fuse_attention`` search functions the library did
# not fuse, written as that pass writes them, exported, saved and rewritten
# by ``pypm-verified rewrite --rules attention``: (a) SDPA's math as
# ``_scaled_dot_product_attention_math`` writes it for BERT-like models (the
# scale's square root on q and on ``transpose(k)`` by ``aten.mul.Scalar``,
# ``aten._safe_softmax``, q/k/v permuted from [B, S, H, D]), with and without
# an additive mask, batch 2 and 1; (b) half precision, the softmax upcast to
# float32, ``torch.dropout(., 0.0, True)`` (a ``clone``) between it and the
# cast back to float16, the value cast to the weights' dtype, the scale a
# division of the scores or of the query.

S_, H_, D_ = 8, 4, 16  # sequence, heads, head size of the [B, S, H, D] inputs


class SplitScaleSafeSoftmax(nn.Module):
    """(a): ``mul.Scalar(q, c)``, ``mul.Scalar(k.transpose(-2, -1), c)``,
    ``c = sqrt(1 / sqrt(D))``, ``q @ k``, maybe ``+ mask``,
    ``_safe_softmax(., -1)``, ``@ v``."""

    def __init__(self, masked):
        super().__init__()
        self.masked = masked

    def forward(self, query, key, value, attn_mask):
        c = math.sqrt(1.0 / math.sqrt(D_))
        q = query.permute([0, 2, 1, 3])
        k = key.permute([0, 2, 1, 3])
        v = value.permute([0, 2, 1, 3])
        q = torch.ops.aten.mul.Scalar(q, c)
        k = torch.ops.aten.mul.Scalar(k.transpose(-2, -1), c)
        w = q @ k
        if self.masked:
            w = w + attn_mask
        return torch.ops.aten._safe_softmax(w, -1) @ v


class HalfUpcastSoftmax(nn.Module):
    """(b): scores in float16, ``.to(float32)``, softmax, dropout with p = 0,
    ``.to(float16)`` (``up``: the dtype of the softmax), ``v.to(w.dtype)``;
    the scale divides the scores or the query; ``mask`` (given): added to
    the scaled scores."""

    def __init__(self, scale_on_q, up=torch.float32):
        super().__init__()
        self.scale_on_q, self.up = scale_on_q, up

    def forward(self, query, key, value, *mask):
        inv_scale = math.sqrt(D_)
        q = query.permute(0, 2, 1, 3)
        k = key.permute(0, 2, 1, 3)
        v = value.permute(0, 2, 1, 3)
        if self.scale_on_q:
            div = (q / inv_scale) @ k.transpose(-2, -1)
        else:
            div = q @ k.transpose(-2, -1) / inv_scale
        if mask:
            div = div + mask[0]
        w = torch.softmax(div.to(self.up), dim=-1)
        w = torch.dropout(w, 0.0, True)
        w = w.to(torch.float16)
        v = v.to(w.dtype)
        return w @ v


def _bshd(batch, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(batch, S_, H_, D_, generator=g).to(dtype) for _ in range(3)]


def _cli_rewrite(mod, inputs, tmp_path, capsys, core=False):
    """``mod`` exported (``core``: with core-ATen decompositions, as a saved
    program may be), saved, rewritten by the CLI: (exit code, report,
    rewritten program)."""
    import json
    from pypm_verified.cli import main
    src, out, rep = tmp_path / "m.pt2", tmp_path / "m.fast.pt2", tmp_path / "r.json"
    ep = torch.export.export(mod, tuple(inputs))
    torch.export.save(ep.run_decompositions() if core else ep, str(src))
    code = main(["rewrite", str(src), "-o", str(out), "--rules", "attention",
                 "--ignore-profitability", "--report", str(rep)])
    capsys.readouterr()
    return code, json.loads(rep.read_text()), torch.export.load(str(out))


def _assert_as_accurate(mod, ep, inputs):
    """The rewritten program is within the dtype's tolerance of the original
    on ``inputs`` and on other random inputs of their shapes, and at least
    as close (to that tolerance) to the float64 computation of the module."""
    g = torch.Generator().manual_seed(7)
    for xs in (inputs, [torch.randn(x.shape, generator=g).to(x.dtype) for x in inputs]):
        want, got = mod(*xs), ep.module()(*xs)
        exact = mod.double()(*[x.double() for x in xs]) if not isinstance(
            mod, HalfUpcastSoftmax) else _half_upcast_f64(mod, xs)
        assert want.dtype == got.dtype and want.shape == got.shape
        diff = (want.double() - got.double()).abs().max().item()
        assert diff <= TOL[want.dtype], (want.dtype, diff)
        err_orig = (want.double() - exact).abs().max().item()
        err_ours = (got.double() - exact).abs().max().item()
        assert err_ours <= err_orig + TOL[want.dtype], (err_ours, err_orig)


def _half_upcast_f64(mod, xs):
    """HalfUpcastSoftmax computed in float64 throughout (its casts are to
    fixed dtypes, so ``.double()`` on the module does not do it)."""
    q, k, v = (x.double().permute(0, 2, 1, 3) for x in xs[:3])
    s = q @ k.transpose(-2, -1) / math.sqrt(D_) + (xs[3].double() if len(xs) > 3 else 0)
    return torch.softmax(s, -1) @ v


@pytest.mark.parametrize("core", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("batch", [2, 1])
@pytest.mark.parametrize("masked", [True, False])
def test_split_scale_safe_softmax_through_the_cli(lib, tmp_path, capsys, masked, batch, dtype,
                                                  core):
    """(a), 4 forms (mask or not, batch 2 or 1): fused by ``sdpa_core``
    into one SDPA on the decomposition's own products (q and
    ``mul.Scalar(k', c)``, ``scale=1``); numerics ok. ``core``: saved after
    core-ATen decompositions, where the matmuls are ``expand``, ``clone``
    (batch 2: the permuted operands made contiguous), ``view``, ``bmm``,
    ``view``, and the safe softmax is written out."""
    q, k, v = _bshd(batch, dtype)
    mask = torch.randn(1, 1, S_, S_, generator=torch.Generator().manual_seed(3)).to(dtype)
    mod = SplitScaleSafeSoftmax(masked)
    if core and batch == 2:  # the form with the clones
        src = torch.export.export(mod, (q, k, v, mask)).run_decompositions()
        assert _targets(src).count(torch.ops.aten.clone.default) == 3
    code, rep, ep = _cli_rewrite(mod, (q, k, v, mask), tmp_path, capsys, core)
    assert code == 0 and rep["firings"] == {"sdpa_core": 1}, (rep["firings"], rep["declines"])
    assert rep["numerics"]["ok"], rep["numerics"]
    t = _targets(ep)
    assert t.count(SDPA) == 1 and not any(s in SOFTMAX for s in t), t
    sdpa = next(n for n in ep.graph.nodes if n.target == SDPA)
    bound = dict(zip([a.name for a in SDPA._schema.arguments], sdpa.args), **sdpa.kwargs)
    assert (bound.get("attn_mask") is not None) == masked  # the additive mask, or none
    assert bound.get("scale") == 1.0, bound  # the factors stay on q and k
    _assert_as_accurate(mod, ep, (q, k, v, mask))


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("scale_on_q", [False, True])
def test_half_upcast_softmax_through_the_cli(lib, tmp_path, capsys, scale_on_q, masked):
    """(b), 2 forms: fused by ``sdpa`` (the clone of dropout p = 0 between
    the float32 softmax and the cast back is the identity; SDPA computes
    the softmax of half inputs in float32, as the original does); numerics
    ok, and at least as close to float64 as the original. ``masked``: with
    an additive float16 mask too (the logits are any of ``Masked``'s)."""
    inputs = _bshd(2, torch.float16)
    if masked:
        inputs.append(torch.randn(1, 1, S_, S_, generator=torch.Generator().manual_seed(3))
                      .half())
    mod = HalfUpcastSoftmax(scale_on_q)
    code, rep, ep = _cli_rewrite(mod, inputs, tmp_path, capsys)
    assert code == 0 and rep["firings"] == {"sdpa": 1}, (rep["firings"], rep["declines"])
    assert rep["numerics"]["ok"], rep["numerics"]
    t = _targets(ep)
    assert t.count(SDPA) == 1 and not any(s in SOFTMAX for s in t), t
    assert torch.ops.aten.clone.default not in t
    _assert_as_accurate(mod, ep, inputs)


def test_half_softmax_not_upcast_is_declined_through_the_cli(lib, tmp_path, capsys):
    """The same form with the float16 scores "upcast" to bfloat16 (fewer
    significand bits than float16: the original's weights are coarser than
    SDPA's float32 softmax; on these inputs the two outputs differ by 6e-3,
    over float16's 4e-3 here): left alone, the reason in the report, the
    program unchanged."""
    q, k, v = _bshd(2, torch.float16)
    code, rep, ep = _cli_rewrite(HalfUpcastSoftmax(False, torch.bfloat16), (q, k, v),
                                 tmp_path, capsys)
    assert code == 0 and not rep["firings"] and SDPA not in _targets(ep)
    why = rep["declines"]["Attention"]["sdpa"]
    assert any("softmax is computed in a dtype narrower than q's" in w for w in why), why


def test_split_scale_with_a_broadcast_key_is_declined(lib):
    """(a) with a key of batch 1 broadcast by the matmul to the query's
    batch: not the batched products the rule rebuilds; left alone with the
    reason."""
    class Broadcast(nn.Module):
        def forward(self, q, k, v):
            c = E ** -0.25
            w = torch.ops.aten.mul.Scalar(q, c) @ torch.ops.aten.mul.Scalar(
                k.transpose(-2, -1), c)
            return torch.ops.aten._safe_softmax(w, -1) @ v
    q, k, v = _qkv()
    _assert_declined(Broadcast(), (q, k[:1], v), "the matmul broadcasts its operands' batch axes")
