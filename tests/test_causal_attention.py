"""Causal attention is fused as causal: a mask the model builds from
constants (``tril``/``triu`` of ones, ``ones(...).tril().bool()``, GPT-2's
registered ``bias`` buffer sliced, an additive ``-inf``/``finfo.min`` mask
from ``triu``, HuggingFace GPT-2's mask functions) that is exactly
``is_causal``'s becomes ``scaled_dot_product_attention(q, k, v,
is_causal=True)`` with no mask and no fix-up; a mask that is not exactly
that (random, a shifted diagonal, a KV-cache mask aligned to the bottom
right when ``T_q != T_k``, a mask from an input, a symbolic sequence length,
a buffer the program writes into) keeps the explicit mask.

Skipped when torch is missing (`make test` installs it)."""
import math

import pytest

torch = pytest.importorskip("torch")

import torch.nn as nn  # noqa: E402

from pypm_verified.library import _causal, default_patterns  # noqa: E402
from pypm_verified.torch.loader import load_model  # noqa: E402
from pypm_verified.torch.pipeline import rewrite_program  # noqa: E402

SDPA = torch.ops.aten.scaled_dot_product_attention.default
B, H, T, E = 2, 2, 6, 8
MIN = torch.finfo(torch.float32).min
#: ops of the boolean-mask form's fix-up, or of the mask itself
FIXUP = {"any", "where", "bitwise_not", "logical_not", "tril", "triu", "ones", "full",
         "softmax", "_safe_softmax", "masked_fill", "eq", "slice"}


def _sdpas(ep):
    return [n for n in ep.graph.nodes if n.op == "call_function" and n.target is SDPA]


def _causal_flag(n):
    """(is_causal, attn_mask) of an SDPA node."""
    names = [a.name for a in SDPA._schema.arguments]
    bound = dict(zip(names, n.args))
    bound.update(n.kwargs)
    return bound.get("is_causal", False), bound.get("attn_mask")


def _op_names(ep):
    return {n.target._schema.name.split("::")[-1] for n in ep.graph.nodes
            if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)}


def _rewrite(mod, inputs, **kw):
    prog = load_model(mod, inputs, **kw)
    return rewrite_program(prog, default_patterns(("attention",)), target="cuda")


def _agree(mod, res, inputs, atol=1e-5):
    """The rewritten program computes what the module does, on other inputs
    of the same shapes too."""
    g = torch.Generator().manual_seed(1)
    for xs in (inputs, [torch.randn(x.shape, generator=g).to(x.dtype) for x in inputs]):
        want = mod(*xs)
        got = res.ep.module()(*xs)
        got = got[0] if isinstance(got, (tuple, list)) else got
        assert torch.allclose(want.float(), got.float(), atol=atol, rtol=1e-3), \
            float((want.float() - got.float()).abs().max())


def _qkv(lq=T, lk=T, dtype=torch.float32, rank=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    lead = (B, H) if rank == 4 else (B * H,)
    q = torch.randn(lead + (lq, E), generator=g)
    k, v = (torch.randn(lead + (lk, E), generator=g) for _ in range(2))
    return [t.to(dtype) for t in (q, k, v)]


class Causal(nn.Module):
    """Hand-written causal attention, one mask style each."""

    def __init__(self, style, persistent=True):
        super().__init__()
        self.style = style
        self.register_buffer("bias", torch.tril(torch.ones(16, 16)).view(1, 1, 16, 16),
                             persistent=persistent)

    def forward(self, q, k, v):
        lq, lk = q.shape[-2], k.shape[-2]
        s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        st = self.style
        if st == "tril_bool":        # ones(T, T).tril().bool(), masked_fill(~m, -inf)
            s = s.masked_fill(~torch.ones(lq, lk).tril().bool(), float("-inf"))
        elif st == "triu_fill":      # triu(ones, diagonal=1).bool(), masked_fill(m, -inf)
            s = s.masked_fill(torch.triu(torch.ones(lq, lk), diagonal=1).bool(), float("-inf"))
        elif st == "triu_fill_min":  # the same with the dtype's minimum
            m = torch.triu(torch.ones(lq, lk, dtype=torch.bool), diagonal=1)
            s = s.masked_fill(m, torch.finfo(s.dtype).min)
        elif st == "where":          # where(tril, s, -inf)
            s = torch.where(torch.ones(lq, lk, dtype=torch.bool).tril(), s, float("-inf"))
        elif st == "where_self":     # where(triu(1), -inf, s)
            m = torch.ones(lq, lk, dtype=torch.bool).triu(1)
            s = torch.where(m, torch.tensor(float("-inf")), s)
        elif st == "gpt2_bias":      # GPT-2's registered buffer, sliced [:, :, :T, :T]
            s = s.masked_fill(self.bias[:, :, :lq, :lk] == 0, float("-inf"))
        elif st == "gpt2_where":     # the same with where and a 0-d fill of the minimum
            fill = torch.full([], torch.finfo(s.dtype).min, dtype=s.dtype)
            s = torch.where(self.bias[:, :, :lq, :lk].bool(), s, fill)
        elif st == "additive_inf":   # full(-inf).triu(1), added
            s = s + torch.triu(torch.full((lq, lk), float("-inf"), dtype=s.dtype), diagonal=1)
        elif st == "additive_min":   # triu(ones, 1) * finfo.min, added
            m = torch.triu(torch.ones(lq, lk, dtype=s.dtype), diagonal=1)
            s = s + m * torch.finfo(s.dtype).min
        elif st == "additive_first":  # the mask first: m + s
            s = torch.triu(torch.full((lq, lk), float("-inf"), dtype=s.dtype), diagonal=1) + s
        else:
            raise AssertionError(st)
        return torch.softmax(s, -1) @ v


STYLES = ["tril_bool", "triu_fill", "triu_fill_min", "where", "where_self", "gpt2_bias",
          "gpt2_where", "additive_inf", "additive_min", "additive_first"]


def _assert_causal(res):
    assert res.numerics.ok, res.numerics
    (n,) = _sdpas(res.ep)
    causal, mask = _causal_flag(n)
    assert causal is True and mask is None, n.format_node()
    left = _op_names(res.ep) & FIXUP
    assert not left, left


@pytest.mark.parametrize("style", STYLES)
def test_causal_masks_become_is_causal(lib, style):
    mod = Causal(style).eval()
    qkv = _qkv()
    res = _rewrite(mod, qkv)
    assert res.report.firings == {"sdpa": 1}
    _assert_causal(res)
    _agree(mod, res, qkv)


def test_a_non_persistent_bias_buffer(lib):
    """GPT-2's ``bias`` registered with ``persistent=False`` (a lifted
    constant of the exported program, not in its state dict)."""
    mod = Causal("gpt2_bias", persistent=False).eval()
    res = _rewrite(mod, _qkv())
    _assert_causal(res)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("style", ["tril_bool", "additive_min", "gpt2_where"])
def test_other_dtypes(lib, style, dtype):
    mod = Causal(style).eval()
    qkv = _qkv(dtype=dtype)
    res = _rewrite(mod, qkv)
    _assert_causal(res)
    _agree(mod, res, qkv, atol=2e-2)


def test_3d_bmm_attention(lib):
    """``bmm`` attention over (B * H, T, E) with a ``tril`` mask."""
    class Bmm3(nn.Module):
        def forward(self, q, k, v):
            s = torch.bmm(q, k.transpose(1, 2)) * 0.3
            s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
            return torch.bmm(torch.softmax(s, -1), v)
    qkv = _qkv(rank=3)
    res = _rewrite(Bmm3(), qkv)
    _assert_causal(res)
    _agree(Bmm3(), res, qkv)


@pytest.mark.parametrize("lq,lk", [(4, 7), (7, 4)])
def test_unequal_lengths_aligned_to_the_top_left(lib, lq, lk):
    """``T_q != T_k`` with ``tril`` of ``ones(T_q, T_k)``: key ``j`` kept iff
    ``j <= i``, which is is_causal's alignment (the top left)."""
    mod = Causal("tril_bool").eval()
    qkv = _qkv(lq, lk)
    res = _rewrite(mod, qkv)
    _assert_causal(res)
    _agree(mod, res, qkv)


class BufferMask(nn.Module):
    """Attention with a constant mask of any shape (a buffer) applied as
    ``masked_fill`` (True: masked), ``where`` (True: kept) or added."""

    def __init__(self, mask, form, scale=0.35):
        super().__init__()
        self.form, self.scale = form, scale
        self.register_buffer("m", mask)

    def forward(self, q, k, v):
        s = q @ k.transpose(-2, -1) * self.scale
        if self.form == "masked":
            s = s.masked_fill(self.m, float("-inf"))
        elif self.form == "keep":
            s = torch.where(self.m, s, torch.finfo(s.dtype).min)
        else:
            s = s + self.m
        return torch.softmax(s, -1) @ v


SIZES = [(1, 1), (1, 5), (5, 1), (3, 3), (4, 9), (9, 4)]
LEADS = [(), (1, 1), (B, 1), (B, H)]
CASES = [(lq, lk, LEADS[i % len(LEADS)], form)
         for i, ((lq, lk), form) in enumerate(
             (sz, f) for sz in SIZES for f in ("masked", "keep", "additive"))]


@pytest.mark.parametrize("lq,lk,lead,form", CASES)
def test_every_causal_mask_shape_and_size(lib, lq, lk, lead, form):
    """What the guard admits, numerically: the causal mask at every pair of
    sizes (1 included, ``T_q != T_k`` both ways), as (T_q, T_k) or with
    batch and head axes, in each form, with scores large enough that the
    dtype's minimum and -inf give the same weights only by underflow."""
    keep = torch.ones(lead + (lq, lk), dtype=torch.bool).tril()
    mask = {"masked": ~keep, "keep": keep,
            "additive": torch.zeros(keep.shape).masked_fill(~keep, MIN)}[form]
    mod = BufferMask(mask, form, scale=30.0).eval()
    qkv = _qkv(lq, lk)
    res = _rewrite(mod, qkv)
    _assert_causal(res)
    _agree(mod, res, qkv, atol=1e-4)


class SdpaCausal(nn.Module):
    """``F.scaled_dot_product_attention``: with ``is_causal=True``, or with
    a causal boolean ``attn_mask`` built from ``tril``."""

    def __init__(self, how):
        super().__init__()
        self.how = how

    def forward(self, q, k, v):
        if self.how == "is_causal":
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        m = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m)


@pytest.mark.parametrize("how", ["is_causal", "tril"])
@pytest.mark.parametrize("lq,lk", [(T, T), (4, 7)])
def test_sdpa_decomposed_is_fused_back_as_causal(lib, how, lq, lk):
    """SDPA's core-ATen decomposition (``run_decompositions()``) writes the
    causal mask as an additive mask from ``arange`` (or the boolean mask as
    ``where(m, 0, -inf)``); rule ``sdpa_core`` fuses it back to one SDPA with
    ``is_causal=True``."""
    from pypm_verified.torch.loader import LoadedModel
    mod = SdpaCausal(how)
    qkv = _qkv(lq, lk)
    ep = torch.export.export(mod, tuple(qkv)).run_decompositions()
    res = rewrite_program(LoadedModel(ep, tuple(qkv)), default_patterns(("attention",)),
                          target="cuda")
    assert res.report.firings == {"sdpa_core": 1}
    _assert_causal(res)
    _agree(mod, res, qkv)


# ------------------------------------------------------------ not causal

class NotCausal(nn.Module):
    """Masks that are not exactly is_causal's."""

    def __init__(self, style, lq=T, lk=T):
        super().__init__()
        self.style = style
        g = torch.Generator().manual_seed(3)
        rnd = torch.rand(lq, lk, generator=g) < 0.5
        rnd[:, 0] = False  # no fully masked row
        self.register_buffer("rnd", rnd)
        self.register_buffer("bias", torch.tril(torch.ones(16, 16)).view(1, 1, 16, 16))
        self.register_buffer("count", torch.zeros(()))

    def forward(self, q, k, v, pad):
        lq, lk = q.shape[-2], k.shape[-2]
        s = q @ k.transpose(-2, -1) * 0.35
        st = self.style
        if st == "random":            # a constant boolean mask, not triangular
            s = s.masked_fill(self.rnd, float("-inf"))
        elif st == "shifted_up":      # tril(diagonal=1): one key of the future seen
            s = s.masked_fill(~torch.ones(lq, lk, dtype=torch.bool).tril(1), float("-inf"))
        elif st == "shifted_down":    # tril(diagonal=-1): row 0 fully masked (NaN)
            s = s.masked_fill(~torch.ones(lq, lk, dtype=torch.bool).tril(-1), float("-inf"))
        elif st == "kv_cache":        # bottom-right alignment: bias[:, :, S-L:S, :S]
            s = s.masked_fill(self.bias[:, :, lk - lq:lk, :lk] == 0, float("-inf"))
        elif st == "input":           # a mask from an input (not a constant)
            s = s.masked_fill(pad, float("-inf"))
        elif st == "causal_and_pad":  # causal and padding: two masks
            s = s.masked_fill(~torch.ones(lq, lk, dtype=torch.bool).tril(), float("-inf"))
            s = s + torch.zeros(B, 1, 1, lk).masked_fill(pad[:, None, None, :], MIN)
        elif st == "additive_half":   # kept entries not 0
            s = s + (torch.triu(torch.full((lq, lk), float("-inf")), 1) + 0.5)
        elif st == "mutated_buffer":  # the program writes into the buffer it reads
            s = s.masked_fill(self.bias[:, :, :lq, :lk] == 0, float("-inf"))
            self.bias.add_(self.count)
        else:
            raise AssertionError(st)
        return torch.softmax(s, -1) @ v


@pytest.mark.parametrize("style,lq,lk", [
    ("random", T, T), ("shifted_up", T, T), ("shifted_down", T, T), ("kv_cache", 4, 7),
    ("input", T, T), ("causal_and_pad", T, T), ("additive_half", T, T),
    ("mutated_buffer", T, T)])
def test_other_masks_are_not_made_causal(lib, style, lq, lk):
    mod = NotCausal(style, lq, lk).eval()
    q, k, v = _qkv(lq, lk)
    pad = torch.zeros(B, lk, dtype=torch.bool)
    pad[0, -2:] = True
    if style == "input":
        pad = torch.zeros(lq, lk, dtype=torch.bool).triu(1)  # causal values, but an input
    inputs = (q, k, v, pad)
    res = _rewrite(mod, inputs)
    assert res.numerics.ok, res.numerics
    sd = _sdpas(res.ep)
    assert sd, f"{style}: not fused at all"
    assert all(_causal_flag(n)[0] is False and _causal_flag(n)[1] is not None for n in sd)


def test_a_symbolic_sequence_length_keeps_the_mask(lib):
    """With a dynamic ``T`` the mask's value depends on it: not folded."""
    from torch.export import Dim
    t = Dim("t", min=2, max=16)
    mod = Causal("tril_bool").eval()
    res = _rewrite(mod, _qkv(), dynamic_shapes=({2: t}, {2: t}, {2: t}))
    sd = _sdpas(res.ep)
    assert sd and all(_causal_flag(n)[0] is False for n in sd)


def test_a_dynamic_batch_with_a_static_length_is_causal(lib):
    """The batch symbolic, ``T`` static: the mask is still a constant."""
    from torch.export import Dim
    b = Dim("b", min=1, max=8)
    mod = Causal("gpt2_bias").eval()
    qkv = _qkv()
    res = _rewrite(mod, qkv, dynamic_shapes=({0: b}, {0: b}, {0: b}))
    _assert_causal(res)
    _agree(mod, res, qkv)
    q, k, v = (x[:1] for x in qkv)  # another batch size
    assert torch.allclose(res.ep.module()(q, k, v), mod(q, k, v), atol=1e-5)


# ------------------------------------------------------------ the check itself

def test_is_causal_on_values():
    keep = torch.ones(4, 6, dtype=torch.bool).tril()
    assert _causal.is_causal(keep, (2, 2, 4, 6), "keep")
    assert _causal.is_causal(~keep, (2, 2, 4, 6), "masked")
    assert _causal.is_causal(keep[None, None].expand(2, 1, 4, 6), (2, 2, 4, 6), "keep")
    assert not _causal.is_causal(keep, (2, 2, 4, 6), "masked")
    # bottom-right (a KV cache): j <= i + S - L
    assert not _causal.is_causal(torch.ones(4, 6, dtype=torch.bool).tril(2), (1, 4, 6), "keep")
    assert not _causal.is_causal(keep.float(), (1, 4, 6), "keep")  # not a boolean
    assert not _causal.is_causal(keep, (1, 5, 6), "keep")  # does not broadcast
    add = torch.zeros(4, 6).masked_fill(~keep, float("-inf"))
    assert _causal.is_causal(add, (4, 6), "additive")
    assert _causal.is_causal(add.clamp(min=MIN), (4, 6), "additive")
    assert not _causal.is_causal(add.clamp(min=-1e9), (4, 6), "additive")
    assert not _causal.is_causal(add + 1.0, (4, 6), "additive")
    nan = add.clone()
    nan[0, 0] = float("nan")
    assert not _causal.is_causal(nan, (4, 6), "additive")
    assert not _causal.is_causal(keep, (2, 2, None, 6), "keep")  # a symbolic length
    assert _causal.is_causal(keep, (None, 2, 4, 6), "keep")  # a symbolic batch: axes of 1
    assert not _causal.is_causal(keep.expand(2, 4, 6), (None, 4, 6), "keep")
    assert not _causal.is_causal(None, (4, 6), "keep")


def test_gpt2_from_transformers_is_causal(lib):
    """HuggingFace GPT-2 (random weights, eager attention): its mask
    functions over ``arange`` are constants of the program; without an
    attention mask every layer's attention is is_causal, with a padding
    mask (an input) the explicit mask stays."""
    pytest.importorskip("transformers")
    from pypm_verified import examples
    m, (ids, _, pad) = examples.gpt2("small", layers=2)
    m = m.eval()
    res = _rewrite(m, (ids,))
    assert res.numerics.ok, res.numerics
    sd = _sdpas(res.ep)
    assert len(sd) == 2 and all(_causal_flag(n) == (True, None) for n in sd)
    with torch.no_grad():
        want = m(ids).last_hidden_state
        got = res.ep.module()(ids)
    got = getattr(got, "last_hidden_state", got)
    assert torch.allclose(want, got, atol=1e-5), float((want - got).abs().max())
    res = _rewrite(m, (ids, None, pad))
    assert res.numerics.ok
    sd = _sdpas(res.ep)
    assert len(sd) == 2 and all(_causal_flag(n)[0] is False for n in sd)


class _At:
    """A graph node seen as a rule's value (what ``folded`` reads: ``.fx``)."""

    def __init__(self, n):
        self.fx = n


def test_a_mask_read_from_a_user_input_is_not_computed():
    """``folded`` checks what a value is computed from before computing any
    of it: a mask that also reads a user input (not a constant) answers
    None without running a single operator."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from pypm_verified.torch.rule_api import RuleContext
    g = torch.fx.Graph()
    ones = g.call_function(torch.ops.aten.ones.default, ([4, 4],),
                           {"dtype": torch.bool, "device": torch.device("cpu")})
    tril = g.call_function(torch.ops.aten.tril.default, (ones,))
    x = g.placeholder("x")
    mul = g.call_function(torch.ops.aten.mul.Tensor, (tril, x))
    g.output((mul,))
    ctx = RuleContext("cpu")
    ctx.driver = type("D", (), {"weights": {}})()

    class Count(TorchDispatchMode):
        ran = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ran.append(func)
            return func(*args, **(kwargs or {}))

    with Count():
        assert _causal.folded(_At(mul), ctx) is None
        assert Count.ran == []
        assert torch.equal(_causal.folded(_At(tril), ctx), torch.ones(4, 4, dtype=torch.bool).tril())
    assert torch.ops.aten.tril.default in Count.ran  # the counter sees what folded runs


def test_a_folded_mask_is_reused_only_while_what_it_read_is_unchanged():
    """``folded`` keeps its answer in ``ctx.memo`` (the attention of every
    layer reads one mask) with what it read of each node it visited; an
    entry is reused while every one of them reads the same objects, and
    computed anew when one changed: an argument, a constant's tensor, a
    write into a leaf."""
    from pypm_verified.torch.rule_api import RuleContext
    g = torch.fx.Graph()
    ones = g.call_function(torch.ops.aten.ones.default, ([4, 4],),
                           {"dtype": torch.bool, "device": torch.device("cpu")})
    tril = g.call_function(torch.ops.aten.tril.default, (ones,))
    w = g.placeholder("w")
    mul = g.call_function(torch.ops.aten.mul.Tensor, (tril, w))
    g.output((tril, mul))
    weights = {"w": torch.ones(4, 4, dtype=torch.bool)}
    ctx = RuleContext("cpu")
    ctx.driver = type("D", (), {"weights": weights})()

    runs = []
    real_ev = _causal._static
    _causal._static = lambda n: (runs.append(n), real_ev(n))[1]
    try:
        first = _causal.folded(_At(mul), ctx)
        assert torch.equal(first, torch.ones(4, 4, dtype=torch.bool).tril())
        n_first = len(runs)
        assert n_first == 4  # mul, tril, ones, w
        assert _causal.folded(_At(mul), ctx) is first and len(runs) == n_first  # reused
        # the constant's tensor replaced: computed anew
        weights["w"] = torch.zeros(4, 4, dtype=torch.bool)
        second = _causal.folded(_At(mul), ctx)
        assert len(runs) > n_first and not second.any()
        # an argument replaced (triu instead of tril): computed anew
        n = len(runs)
        triu = g.call_function(torch.ops.aten.triu.default, (ones,))
        weights["w"] = torch.ones(4, 4, dtype=torch.bool)
        mul.args = (triu, w)
        third = _causal.folded(_At(mul), ctx)
        assert len(runs) > n and torch.equal(third, torch.ones(4, 4, dtype=torch.bool).triu())
        # a write into the leaf: no longer a constant
        g.call_function(torch.ops.aten.add_.Tensor, (w, w))
        assert _causal.folded(_At(mul), ctx) is None
        # a context without a memo computes every time
        assert torch.equal(_causal.folded(_At(tril), None or type("C", (), {
            "constant": ctx.constant})()), torch.ones(4, 4, dtype=torch.bool).tril())
    finally:
        _causal._static = real_ev
