"""Attention variants: every form scaled_dot_product_attention can
express is fused, on hand-written modules exported with torch.export and on
small transformers models with random weights (offline); the forms it
cannot express are left alone with their reason in the report.

Skipped when torch/transformers are missing (`make test` installs them)."""
import math

import pytest

torch = pytest.importorskip("torch")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from pypm_verified.library import default_patterns  # noqa: E402
from pypm_verified.torch.loader import load_model  # noqa: E402
from pypm_verified.torch.pipeline import rewrite_program  # noqa: E402

SDPA = torch.ops.aten.scaled_dot_product_attention.default
SOFTMAX = (torch.ops.aten.softmax.int, torch.ops.aten._safe_softmax.default)
B, H, L, E = 2, 2, 6, 8


def _targets(ep):
    return [n.target for n in ep.graph.nodes if n.op == "call_function"]


def _rewrite(mod, inputs, patterns=None):
    prog = load_model(mod, inputs)
    return rewrite_program(prog, patterns or default_patterns(("attention",)), target="cuda")


def _qkv(seed=0, dtype=torch.float32, rank=4):
    g = torch.Generator().manual_seed(seed)
    shape = (B, H, L, E) if rank == 4 else (B * H, L, E)
    return [torch.randn(shape, generator=g).to(dtype) for _ in range(3)]


def _pad(shape=(B, 1, 1, L)):
    """A boolean mask, True = masked (the last two keys of batch 0)."""
    m = torch.zeros(shape, dtype=torch.bool)
    m[0, ..., L - 2:] = True
    return m


def _causal():
    return torch.ones(L, L, dtype=torch.bool).triu(1)  # True above the diagonal


MIN = torch.finfo(torch.float32).min


class Forms(nn.Module):
    """Several attention forms of the family, one output each."""

    def __init__(self, which):
        super().__init__()
        self.which = which

    def forward(self, q, k, v, b, bias, m01):
        outs = []
        w = self.which
        if "permute" in w:      # key transposed by permute, scale divides the scores
            kt = k.permute(0, 1, 3, 2)
            outs.append(torch.softmax(q @ kt / math.sqrt(E), -1) @ v)
        if "permute_raw" in w:  # key laid out (B, L, H, E), permuted straight to (B, H, E, L)
            kr = k.transpose(1, 2)
            outs.append(torch.softmax(torch.matmul(q, kr.permute(0, 2, 3, 1)) * 0.3, -1) @ v)
        if "scale_q" in w:      # the scale on q
            outs.append(torch.softmax((q * E ** -0.5) @ k.transpose(-1, -2), -1) @ v)
        if "scale_split" in w:  # split between q and k (k^T)
            s = E ** -0.25
            outs.append(torch.softmax((q * s) @ (k.transpose(-2, -1) * s), -1) @ v)
        if "bias_mask" in w:    # position bias plus an additive mask (T5, MPNet)
            s = q @ k.transpose(3, 2)
            am = torch.zeros(B, 1, 1, L).masked_fill(b, MIN)
            outs.append(torch.softmax(s + bias + am, dim=-1) @ v)
        if "masked_fill_inf" in w:  # masked_fill(-inf), causal (nanoGPT)
            s = q @ k.transpose(-2, -1) * 0.25
            outs.append(F.softmax(s.masked_fill(_causal(), float("-inf")), dim=-1) @ v)
        if "masked_fill_min" in w:  # masked_fill with the dtype's minimum, padding
            s = q @ k.transpose(-2, -1) * 0.25
            outs.append(torch.softmax(s.masked_fill(b, MIN), -1) @ v)
        if "where" in w:        # where(keep, s, -inf) and where(masked, min, s)
            s = q @ k.transpose(-2, -1)
            outs.append(torch.softmax(torch.where(~_causal(), s, float("-inf")), -1) @ v)
            outs.append(torch.softmax(torch.where(b, MIN, s + bias), -1) @ v)
        if "where_add" in w:    # the mask applied, then added to (GPT-Neo: a 0-d tensor fill)
            s = q @ k.transpose(-1, -2)
            am = torch.zeros(B, 1, 1, L).masked_fill(b, MIN)
            fill = torch.tensor(MIN, dtype=s.dtype)
            outs.append(torch.softmax(torch.where(~_causal(), s, fill) + am, -1) @ v)
            outs.append(torch.softmax(bias + s.masked_fill(_causal(), float("-inf")), -1) @ v)
        if "float01" in w:      # a 0/1 float mask: where(m == 0, -inf) and (1 - m) * min
            s = q @ k.transpose(-2, -1) * 0.25
            outs.append(torch.softmax(s.masked_fill(m01 == 0, float("-inf")), -1) @ v)
            outs.append(torch.softmax(s + (1.0 - m01) * MIN, -1) @ v)
        if "casts" in w:        # softmax in float32 around a half computation
            qh, kh, vh = q.to(torch.bfloat16), k.to(torch.bfloat16), v.to(torch.bfloat16)
            s = qh @ kh.transpose(-1, -2) * 0.25
            p = torch.softmax(s.float(), -1).type_as(qh)
            p2 = F.softmax(s, dim=-1, dtype=torch.float32).to(qh.dtype)
            outs += [p @ vh, p2 @ vh]  # bfloat16 outputs: compared at bfloat16's tolerance
        if "bmm" in w:          # 3-D batched attention (nn.MultiheadAttention's weights path)
            q3, k3, v3 = (t.reshape(B * H, L, E) for t in (q, k, v))
            p = torch.softmax(torch.bmm(q3 * 0.35, k3.transpose(-2, -1)), -1)
            outs.append(torch.bmm(F.dropout(p, 0.1, training=False), v3))
        if "alibi" in w:        # ALiBi with baddbmm (BLOOM's form, 3-D)
            q3, k3, v3 = (t.reshape(B * H, L, E) for t in (q, k, v))
            alibi = bias.reshape(B * H, L, L)[:, :1, :]  # (B*H, 1, L) like BLOOM's
            s = torch.baddbmm(alibi, q3, k3.transpose(1, 2), beta=1.0, alpha=0.25)
            outs.append(torch.bmm(torch.softmax(s, -1), v3))
        if "safe" in w:         # the "safe" softmax
            s = q @ k.transpose(-2, -1) * 0.25
            p = torch.ops.aten._safe_softmax(s.masked_fill(_causal(), float("-inf")), -1)
            outs.append(p @ v)
        return tuple(outs)


def _inputs():
    q, k, v = _qkv()
    g = torch.Generator().manual_seed(1)
    bias = torch.randn(B, H, L, L, generator=g)
    m01 = (torch.rand(B, 1, L, L, generator=g) > 0.3).float()
    m01[0, 0, 0] = 0.0  # a fully masked row: NaN in eager, and in the rewrite
    return q, k, v, _pad(), bias, m01


FUSED = {  # form -> attention blocks in it
    "permute": 1, "permute_raw": 1, "scale_q": 1, "scale_split": 1, "bias_mask": 1,
    "masked_fill_inf": 1, "masked_fill_min": 1, "where": 2, "where_add": 2,
    "float01": 2, "casts": 2,
    "bmm": 1, "alibi": 1, "safe": 1,
}


@pytest.mark.parametrize("forms", [
    ("permute", "permute_raw", "scale_q", "scale_split"),
    ("bias_mask", "masked_fill_inf", "masked_fill_min", "where", "where_add"),
    ("float01", "casts", "bmm", "alibi", "safe"),
])
def test_forms_are_fused_exactly(lib, forms):
    r = _rewrite(Forms(forms), _inputs())
    n = sum(FUSED[f] for f in forms)
    assert r.report.firings.get("sdpa") == n, (r.report.firings, dict(r.report.declines))
    assert _targets(r.ep).count(SDPA) == n
    assert not any(t in SOFTMAX for t in _targets(r.ep))
    assert r.numerics.ok, r.numerics


def test_fully_masked_rows_agree_with_eager():
    """masked_fill(-inf) on a fully masked row is NaN in eager softmax; SDPA
    (CPU, torch 2.13) gives 0 there, so the rewrite restores the NaN; with
    the dtype's minimum the row is the uniform average of v, and so is the
    rewrite's."""
    q, k, v = _qkv()
    b = torch.zeros(B, 1, L, L, dtype=torch.bool)
    b[0, :, 1, :] = True  # query row 1 of batch 0 sees nothing

    class M(nn.Module):
        def forward(self, q, k, v, b):
            s = q @ k.transpose(-2, -1) * 0.25
            return (torch.softmax(s.masked_fill(b, float("-inf")), -1) @ v,
                    torch.softmax(s.masked_fill(b, MIN), -1) @ v)
    r = _rewrite(M(), (q, k, v, b))
    assert r.report.firings.get("sdpa") == 2
    ours = r.ep.module()(q, k, v, b)
    eager = M()(q, k, v, b)
    assert torch.isnan(eager[0][0, :, 1]).all() and torch.isnan(ours[0][0, :, 1]).all()
    assert torch.allclose(eager[1][0, :, 1], v[0].mean(-2), atol=1e-6)
    for a, o in zip(eager, ours):
        assert torch.equal(torch.isnan(a), torch.isnan(o))
        assert torch.allclose(a.nan_to_num(), o.nan_to_num(), atol=1e-5)
    # bare SDPA differs from eager on that row: the fix is needed
    bare = F.scaled_dot_product_attention(q, k, v, ~b, scale=0.25)
    assert (bare[0, :, 1] == 0).all()


class WhereThenAdd(nn.Module):
    """GPT-Neo's form: ``where(causal, s, tensor(min)) + mask``, the mask
    holding the minimum on padded keys (left padding)."""

    def forward(self, q, k, v, am):
        s = q @ k.transpose(-1, -2)
        fill = torch.tensor(torch.finfo(s.dtype).min, dtype=s.dtype)
        return torch.softmax(torch.where(~_causal(), s, fill) + am, -1) @ v


def test_where_then_add_agrees_on_rows_that_see_only_padding(lib):
    """Rows whose visible keys are all padded: their logits are min (s + min
    rounds to min) or -inf (min + min), so eager softmax is uniform over
    the keys at min, future ones included; the rewrite gives SDPA the
    original's logits (mask where(keep, am, am + min)) and agrees there,
    where a boolean mask (SDPA over the visible keys) would not."""
    q, k, v = _qkv()
    am = torch.zeros(B, 1, 1, L)
    am[0, ..., :2] = MIN  # batch 0 left-padded by two: query rows 0 and 1 see only padding
    r = _rewrite(WhereThenAdd(), (q, k, v, am))
    assert r.report.firings.get("sdpa") == 1, dict(r.report.declines)
    assert not any(t in SOFTMAX for t in _targets(r.ep))
    ours, eager = r.ep.module()(q, k, v, am), WhereThenAdd()(q, k, v, am)
    assert torch.allclose(ours, eager, atol=1e-5), (ours - eager).abs().max()
    # row 0 of batch 0: uniform over keys 0 (padding, visible) and 2.. (future, not padded)
    assert torch.allclose(eager[0, :, 0], v[0][:, [0, 2, 3, 4, 5]].mean(-2), atol=1e-6)
    bare = F.scaled_dot_product_attention(q, k, v, am + (~_causal()).float().log())
    assert not torch.allclose(bare[0, :, 0], eager[0, :, 0], atol=1e-3)


def test_where_then_add_with_a_dynamic_batch(lib):
    """GPT-Neo exported with a dynamic batch: its causal mask is (1, 1, L, L),
    and the size 1 must broadcast to the symbolic batch without asking
    whether the batch is 1 (which is not known, and declined the rule)."""
    from torch.export import Dim

    class Causal(nn.Module):
        def forward(self, q, k, v, am):
            s = q @ k.transpose(-1, -2)
            c = torch.ones(1, 1, L, L, dtype=torch.bool).tril()
            return torch.softmax(torch.where(c, s, torch.tensor(MIN)) + am, -1) @ v
    q, k, v = _qkv()
    b = Dim("b", min=1, max=8)
    prog = load_model(Causal(), (q, k, v, torch.zeros(B, 1, 1, L)),
                      dynamic_shapes=({0: b}, {0: b}, {0: b}, {0: b}))
    r = rewrite_program(prog, default_patterns(("attention",)), target="cuda")
    assert r.report.firings.get("sdpa") == 1, dict(r.report.declines)
    assert r.numerics.ok and r.other_sizes, (r.numerics, r.other_sizes)


def test_where_then_add_with_a_dynamic_batch_from_a_saved_program(lib, tmp_path):
    """The same program saved and loaded back, as the CLI reads it (found by
    the zoo on GPT-Neo): the loaded shape environment lets the batch be 1
    (export's tracing had assumed >= 2), and torch's meta kernel of the
    replacement's add(mask, fill) asked guard_or_false(Eq(b, 1)), a question
    whose answer it does not need; the rule fires, and the program runs at
    batch 1 as the original does."""
    from torch.export import Dim

    class Causal(nn.Module):
        def forward(self, q, k, v, am):
            s = q @ k.transpose(-1, -2)
            c = torch.ones(1, 1, L, L, dtype=torch.bool).tril()
            return torch.softmax(torch.where(c, s, torch.tensor(MIN)) + am, -1) @ v
    q, k, v = _qkv()
    b = Dim("b", min=1, max=8)
    ep = load_model(Causal(), (q, k, v, torch.zeros(B, 1, 1, L)),
                    dynamic_shapes=({0: b}, {0: b}, {0: b}, {0: b})).ep
    torch.export.save(ep, str(tmp_path / "c.pt2"))
    prog = load_model(str(tmp_path / "c.pt2"))
    r = rewrite_program(prog, default_patterns(("attention",)), target="cuda")
    assert r.report.firings.get("sdpa") == 1, dict(r.report.declines)
    assert r.numerics.ok and r.other_sizes, (r.numerics, r.other_sizes)
    one = tuple(t[:1] for t in (q, k, v)) + (torch.randn(1, 1, 1, L),)
    assert torch.allclose(r.ep.module()(*one), Causal()(*one), atol=1e-5)


def test_where_then_add_declines_float16_and_tensor_fills(lib):
    """float16 logits filled with the minimum and then added to are left
    alone (SDPA adds s to min(float16) in float32: it is no longer the
    minimum), and so is a fill that is a tensor input, not a constant."""
    q, k, v = _qkv(dtype=torch.float16)
    am = torch.zeros(B, 1, 1, L, dtype=torch.float16)
    r = _rewrite(WhereThenAdd(), (q, k, v, am))
    assert "sdpa" not in r.report.firings
    why = r.report.declines["Attention"]["sdpa"]
    assert any("float16 logits filled" in w for w in why), why

    class TensorFill(nn.Module):
        def forward(self, q, k, v, am, fill):
            s = q @ k.transpose(-1, -2)
            return torch.softmax(torch.where(~_causal(), s, fill) + am, -1) @ v
    q, k, v = _qkv()
    am = torch.zeros(B, 1, 1, L)
    r = _rewrite(TensorFill(), (q, k, v, am, torch.tensor(MIN)))
    assert "sdpa" not in r.report.firings
    why = r.report.declines["Attention"]["sdpa"]
    assert any("not a number or a 0-d constant" in w for w in why), why


class LeftAlone(nn.Module):
    """Three forms SDPA cannot express, one output each."""

    def forward(self, q, k, v, b):
        s = q @ k.transpose(-2, -1)
        capped = torch.tanh(s * 0.25 / 30.0) * 30.0        # Gemma 2's logit soft-capping
        small = (s * 0.25).masked_fill(b, -1e9)             # exp(-1e9 - max) need not vanish
        per_head = s * torch.linspace(0.5, 1.0, H).view(1, H, 1, 1)  # a tensor scale
        return tuple(torch.softmax(x, -1) @ v for x in (capped, small, per_head))


def test_inexpressible_forms_are_left_alone_with_the_reason(lib):
    q, k, v = _qkv()
    r = _rewrite(LeftAlone(), (q, k, v, _pad()))
    assert "sdpa" not in r.report.firings and r.report.matches.get("Attention") == 3
    why = r.report.declines["Attention"]["sdpa"]
    for reason in ("logit soft-capping", "neither -inf nor the dtype's minimum",
                   "scaled by a tensor"):
        (n,) = [n for w, n in why.items() if reason in w and "attention.py:" in w]
        assert n == 1, why
    assert SDPA not in _targets(r.ep) and r.numerics.ok


# ------------------------------------------------------------ models
# examples/attention_models.py builds them; T5's and MPNet's form (a position
# bias plus a mask) is Forms' "bias_mask" above: their exports take 10-20 s
# each here, so they are measured by the script (README), not in the tests

@pytest.fixture(scope="module")
def models():
    import importlib.util
    import os
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "examples", "attention_models.py")
    spec = importlib.util.spec_from_file_location("attention_models", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name", ["bloom", "deberta", "mha"])
def test_models(lib, models, name):
    """BLOOM (ALiBi by baddbmm, 3-D scores viewed
    as 4-D), DeBERTa-v2 (k^T divided by a tensor, masked_fill with the
    minimum, views), nn.MultiheadAttention(need_weights=True) (bmm, the
    scale on q): every softmax of the export becomes SDPA, outputs agree."""
    pytest.importorskip("transformers")
    d = models.run(name, layers=1)
    assert d["softmax_before"] == 1 and d["sdpa_before"] == 0
    assert d["fused"] == 1 and d["softmax_after"] == 0 and d["sdpa_after"] == 1, d
    assert d["numerics_ok"] and d["max_abs"] < 1e-4, d


# ------------------------------------------------ deliberately wrong variants

@pytest.mark.parametrize("name, kind", [
    ("attention_mask_additive.py", "disagree"),   # a boolean mask added as 0/1
    ("attention_mask_polarity.py", "disagree"),   # masked_fill's True passed as SDPA's keep
    ("attention_fully_masked.py", "disagree"),    # NaN rows not restored
])
def test_wrong_attention_variants_are_refuted(lib, name, kind):
    import os
    from pypm_verified.checking import check_rules
    from pypm_verified.library import load_rules
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wrong_rules", name)
    (r,) = check_rules(load_rules(path), examples=40, guards=False, symbolic=False)
    assert r.status == "refuted", (r.status, r.reason)
    c = r.counterexample
    assert c.kind == kind and "masked_fill" in c.expression
    b = next(i for i in c.inputs if i["name"] == "b")
    assert b["dtype"] == "bool"
    if name == "attention_fully_masked.py":  # only a row the mask covers entirely tells
        assert "NaN" in c.message or "non-finite" in c.message
