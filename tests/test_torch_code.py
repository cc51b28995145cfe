"""Patterns and rule bodies written as PyTorch code (dsl/torch_code.py), and
declared operators called with keywords and defaults.

Each pattern below is an ordinary function of tensors: the test exports a
module that runs the *same function* on concrete tensors (the project's
loader: ``torch.export`` then ``run_decompositions({})``) and checks that
the pattern made from it is the ATen-spelled pattern, term for term, and
that it matches the exported program's output with the variables bound to
the model's inputs."""
import math

import pytest

torch = pytest.importorskip("torch")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import pypm_verified as pm  # noqa: E402
from pypm_verified.errors import PatternError  # noqa: E402
from pypm_verified.torch.importer import TermGraph, TORCH_TO_PM  # noqa: E402
from pypm_verified.torch.loader import load_model  # noqa: E402
from pypm_verified.torch.ops import (  # noqa: E402
    Add, Gelu, LayerNorm, Linear, MaskedFill, MatMul, Mean, Mul, PowScalar, Relu, Rsqrt, SDPA,
    Sigmoid, Softmax, Sub, Tanh, Transpose, WhereScalarOther)
from pypm_verified.torch.pipeline import rewrite_program  # noqa: E402

aten = torch.ops.aten


# ----------------------------------------------- the same code, model and pattern

def silu(x):
    return x * torch.sigmoid(x)


def gelu_tanh(x):
    return F.gelu(x, approximate="tanh")


def gelu_tanh_by_hand(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * torch.pow(x, 3))))


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    var = (x - mu).pow(2).mean(-1, keepdim=True)
    return (x - mu) * torch.rsqrt(var + eps) * w + b


def layer_norm_var(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + eps) * w + b


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def attention(q, k, v, scale):
    return torch.softmax(q @ k.transpose(-2, -1) * scale, dim=-1) @ v


def masked_attention(q, k, v, mask):
    s = (q @ k.transpose(-2, -1)).masked_fill(mask, float("-inf"))
    return F.softmax(s, dim=-1) @ v


def linear_relu(x, w, b):
    return F.relu(F.linear(x, w, b))


def layer_norm_call(x, w, b):
    return F.layer_norm(x, (8,), w, b, 1e-5)


def sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def heads(x):
    return x.view(2, 4, 8).permute(1, 0, 2).transpose(-2, -1).reshape(4, 16)


def where_zero(m, x):
    return torch.where(m, x, 0.0)


# --------------------------------------------------- the same, spelled in ATen

C = math.sqrt(2 / math.pi)


def aten_silu(x):
    return Mul(x, Sigmoid(x))


def aten_gelu_tanh(x):
    return Gelu(x, "tanh")


def aten_gelu_tanh_by_hand(x):
    inner = Add(x, Mul(PowScalar(x, 3), 0.044715), 1)
    return Mul(Mul(x, 0.5), Add(Tanh(Mul(inner, C)), 1, 1))


def aten_layer_norm(x, w, b, eps):
    mu = Mean(x, [-1], True, None)
    var = Mean(PowScalar(Sub(x, mu, 1), 2), [-1], True, None)
    return Add(Mul(Mul(Sub(x, mu, 1), Rsqrt(Add(var, eps, 1))), w), b, 1)


def aten_rms_norm(x, w, eps):
    return Mul(Mul(x, Rsqrt(Add(Mean(PowScalar(x, 2), [-1], True, None), eps, 1))), w)


def aten_attention(q, k, v, scale):
    return MatMul(Softmax(Mul(MatMul(q, Transpose(k, -2, -1)), scale), -1, None), v)


def aten_masked_attention(q, k, v, mask):
    s = MaskedFill(MatMul(q, Transpose(k, -2, -1)), mask, float("-inf"))
    return MatMul(Softmax(s, -1, None), v)


def aten_linear_relu(x, w, b):
    return Relu(Linear(x, w, b))


def aten_layer_norm_call(x, w, b):
    return LayerNorm(x, [8], w, b, 1e-5, False)  # export traces with cuDNN off


def aten_sdpa(q, k, v):
    return SDPA(q, k, v, None, 0.0, True, None, False)


def aten_where_zero(m, x):
    return WhereScalarOther(m, x, 0.0)


def _pattern(fn):
    return pm.pattern(fn)


def _inputs(name):
    x = torch.randn(4, 8)
    q = torch.randn(2, 3, 5, 8)
    return {
        "silu": ((x,), ()), "gelu_tanh": ((x,), ()), "gelu_tanh_by_hand": ((x,), ()),
        "layer_norm": ((x, torch.randn(8), torch.randn(8)), (1e-5,)),
        "layer_norm_var": ((x, torch.randn(8), torch.randn(8)), (1e-5,)),
        "rms_norm": ((x, torch.randn(8)), (1e-6,)),
        "attention": ((q, torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 8)), (0.125,)),
        "masked_attention": ((q, torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 8),
                              torch.ones(5, 5).triu(1).bool()), ()),
        "linear_relu": ((x, torch.randn(6, 8), torch.randn(6)), ()),
        "layer_norm_call": ((x, torch.randn(8), torch.randn(8)), ()),
        "sdpa": ((q, torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 8)), ()),
        "heads": ((torch.randn(8, 8),), ()),
        "where_zero": ((torch.rand(4, 8) > 0.5, x), ()),
    }[name]


class Run(nn.Module):
    """Runs ``fn`` on the tensors it is given and the constants it was made with."""

    def __init__(self, fn, consts):
        super().__init__()
        self.fn, self.consts = fn, consts

    def forward(self, *tensors):
        return self.fn(*tensors, *self.consts)


def _exported_output(fn, name):
    tensors, consts = _inputs(name)
    prog = load_model(Run(fn, consts), tensors)
    g = prog.ep.graph_module.graph
    tg = TermGraph(g).build()
    out = next(n for n in g.nodes if n.op == "output").args[0][0]
    names = [n.name for n in g.nodes if n.op == "placeholder"]
    return tg.term[out], names, prog


PAIRS = [(silu, aten_silu), (gelu_tanh, aten_gelu_tanh),
         (gelu_tanh_by_hand, aten_gelu_tanh_by_hand), (layer_norm, aten_layer_norm),
         (rms_norm, aten_rms_norm), (attention, aten_attention),
         (masked_attention, aten_masked_attention), (linear_relu, aten_linear_relu),
         (layer_norm_call, aten_layer_norm_call), (sdpa, aten_sdpa)]


@pytest.mark.parametrize("code,spelled", PAIRS, ids=[c.__name__ for c, _ in PAIRS])
def test_pytorch_code_is_the_aten_pattern_and_matches_the_export(code, spelled):
    P, A = _pattern(code), _pattern(spelled)
    assert P.core == A.core  # the same term
    term, names, _ = _exported_output(code, code.__name__)
    m = pm.match(P, term)
    assert m is not None, f"{code.__name__} does not match its own export"
    tensors, consts = _inputs(code.__name__)
    params = P.params
    for i, name in enumerate(params[:len(tensors)]):  # variables bound to the inputs
        bound = m.bindings[name]
        assert bound.kind == "input" and bound.name == "placeholder:" + names[i]
    for name, c in zip(params[len(tensors):], consts):  # and to the constants
        assert m.bindings[name].kind == "const" and m.bindings[name].value == c
    assert pm.match(A, term) is not None


def test_var_form_views_and_where_match_their_export():
    W, A = _pattern(where_zero), _pattern(aten_where_zero)
    # x may also be a constant (where.Scalar): the pattern has both readings
    assert isinstance(W.core, pm.core.PAlt) and W.core.p1 == A.core
    for fn in (layer_norm_var, heads, where_zero):
        P = _pattern(fn)
        term, _, _ = _exported_output(fn, fn.__name__)
        assert pm.match(P, term) is not None, fn.__name__


def test_reshape_matches_both_of_its_exports():
    """``reshape`` exports as ``view`` when the input can be viewed, else as
    ``_unsafe_view`` of a contiguous clone: the pattern has both."""
    def flat(x):
        return x.reshape(32)

    def flat_t(x):
        return x.t().reshape(32)

    P, Pt = _pattern(flat), _pattern(flat_t)
    for fn, pat in ((flat, P), (flat_t, Pt)):
        prog = load_model(Run(fn, ()), (torch.randn(4, 8),))
        g = prog.ep.graph_module.graph
        out = next(n for n in g.nodes if n.op == "output").args[0][0]
        targets = {n.target for n in g.nodes if n.op == "call_function"}
        assert (aten._unsafe_view.default in targets) == (fn is flat_t)
        assert pm.match(pat, TermGraph(g).build().term[out]) is not None


def test_overloads_follow_the_python_binding():
    """A number in a Tensor argument stays on the Tensor overload where
    Python has no Scalar one (``x * 2``: ``mul.Tensor``), a Scalar argument
    takes it (``x.pow(2)``: ``pow.Tensor_Scalar``), reflected operators
    swap as Tensor's do; a pattern variable may be a tensor or a constant."""
    @pm.pattern
    def Ops(x, m, p):
        a = 2 * x - 1
        b = 1 - x
        c = x.pow(2) + 2 ** x
        d = torch.where(m, 0.0, x).masked_fill(m, 1.0)
        e = x.pow(p)
        return a + b + c + d + e

    text = repr(Ops.core)
    from pypm_verified.core import symbols
    used = {symbols.describe(i) for i in _symbols(Ops.core)}
    for name in ("Mul", "Sub", "aten.rsub.Scalar", "PowScalar", "aten.pow.Scalar",
                 "WhereScalarSelf", "MaskedFill", "aten.pow.Tensor_Tensor"):
        assert name in used, (name, sorted(used), text)
    assert "PAlt" in text  # x.pow(p): pow.Tensor_Tensor or pow.Tensor_Scalar


def _symbols(p):
    from pypm_verified import core
    out = set()
    stack = [p]
    while stack:
        t = stack.pop()
        if isinstance(t, core.PApp):
            out.add(t.f)
            stack.extend(t.args)
        elif isinstance(t, core.PAlt):
            stack.extend([t.p1, t.p2])
        else:
            stack.extend(a for a in getattr(t, "args", ()) if not isinstance(a, int))
    return out


def test_guards_alternates_vars_and_constraints_keep_working():
    @pm.pattern
    def Act(x):
        assert x.rank >= 2 and x.dtype == pm.f32
        return x * torch.sigmoid(x)

    @pm.pattern
    def Act(x):  # noqa: F811 -- a second alternate
        return F.silu(x)

    @pm.pattern
    def Scaled(x, s):
        y = pm.var()
        y <= torch.tanh(x)
        return y * s

    for fn, pat in ((silu, Act), (lambda x: F.silu(x), Act),
                    (lambda x: torch.tanh(x) * 3.0, Scaled)):
        prog = load_model(Run(fn, ()), (torch.randn(4, 8),))
        g = prog.ep.graph_module.graph
        out = next(n for n in g.nodes if n.op == "output").args[0][0]
        assert pm.match(pat, TermGraph(g).build().term[out]) is not None
    prog = load_model(Run(silu, ()), (torch.randn(8),))  # rank 1: the guard fails
    g = prog.ep.graph_module.graph
    out = next(n for n in g.nodes if n.op == "output").args[0][0]
    assert pm.match(Act, TermGraph(g).build().term[out]) is None

    @pm.pattern
    def AnyUnary(x):
        f = pm.Op(1, 1)
        assert f.op_class == pm.opclass("unary_pointwise")
        return f(x) * torch.sigmoid(x)

    term, _, _ = _exported_output(silu, "silu")
    assert pm.match(AnyUnary, term) is None  # x * sigmoid(x): x is an input, not f(x)
    term, _, _ = _exported_output(lambda x: torch.tanh(x) * torch.sigmoid(x), "silu")
    assert pm.match(AnyUnary, term) is not None


# ------------------------------------------------------------ rule bodies

RULES = '''
import math
import torch
import torch.nn.functional as F
import pypm_verified as pm

@pm.pattern
def SiLU(x):
    return x * torch.sigmoid(x)

@pm.rule(SiLU)
def silu(x):
    assert x.dtype in (pm.f32, pm.f16, pm.bf16)
    return F.silu(x)

@pm.pattern
def GeluTanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * torch.pow(x, 3))))

@pm.rule(GeluTanh)
def gelu(x):
    return F.gelu(x, approximate="tanh")

@pm.pattern
def LN(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    var = (x - mu).pow(2).mean(-1, keepdim=True)
    return (x - mu) * torch.rsqrt(var + eps) * w + b

@pm.rule(LN)
def layer_norm(x, w, b, eps):
    assert w.rank == 1 and b.rank == 1 and eps.is_const
    return F.layer_norm(x, [w.shape[0]], w, b, eps.value)

@pm.pattern
def RMS(x, w):  # the eps literal: with a variable, x - mu of a LayerNorm would match x
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w

@pm.rule(RMS)
def rms_norm(x, w):
    assert w.rank == 1
    return F.rms_norm(x, [w.shape[0]], w, 1e-6)

@pm.pattern
def CausalAttention(q, k, v, mask):
    s = (q @ k.transpose(-2, -1)).masked_fill(mask, float("-inf"))
    return torch.softmax(s * 0.5, dim=-1) @ v

@pm.rule(CausalAttention)
def sdpa(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=~mask, scale=0.5)

@pm.pattern
def LinearRelu(x, w, b):
    return F.relu(F.linear(x, w, b))

@pm.rule(LinearRelu)
def linear_relu(x, w, b):
    return (x @ w.T + b).relu()
'''


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.w, self.b = nn.Parameter(torch.randn(8)), nn.Parameter(torch.randn(8))
        self.lin = nn.Linear(8, 8)

    def forward(self, x, q, k, v):
        mu = x.mean(-1, keepdim=True)
        var = (x - mu).pow(2).mean(-1, keepdim=True)
        y = (x - mu) * torch.rsqrt(var + 1e-5) * self.w + self.b
        y = y * torch.sigmoid(y)
        y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-6) * self.w
        y = 0.5 * y * (1 + torch.tanh(math.sqrt(2 / math.pi) * (y + 0.044715 * torch.pow(y, 3))))
        y = F.relu(self.lin(y))
        mask = torch.ones(5, 5, dtype=torch.bool).triu(1)
        s = (q @ k.transpose(-2, -1)).masked_fill(mask, float("-inf"))
        return y, torch.softmax(s * 0.5, dim=-1) @ v


def test_a_rules_file_in_pytorch_code_fires_with_numerics_ok(tmp_path):
    path = tmp_path / "torch_code_rules.py"
    path.write_text(RULES)
    from pypm_verified.library import load_rules
    patterns = load_rules(str(path))
    args = (torch.randn(4, 8),) + tuple(torch.randn(2, 3, 5, 8) for _ in range(3))
    prog = load_model(Block(), args)
    r = rewrite_program(prog, patterns, check_profitability=False)
    assert r.report.firings == {"silu": 1, "gelu": 1, "layer_norm": 1, "rms_norm": 1,
                                "sdpa": 1, "linear_relu": 1}, r.report.firings
    assert r.numerics.ok, r.numerics
    targets = [n.target for n in r.ep.graph.nodes if n.op == "call_function"]
    for t in (aten.silu.default, aten.gelu.default, aten.layer_norm.default,
              aten.rms_norm.default, aten.scaled_dot_product_attention.default,
              aten.relu.default, aten.permute.default):
        assert t in targets, t
    assert aten.softmax.int not in targets and aten.sigmoid.default not in targets


# ------------------------------------------------------- keywords and defaults

def test_declared_operators_take_keywords_and_defaults():
    @pm.pattern
    def Short(x, y):
        return Add(Mean(x, [-1], keepdim=True), y)

    @pm.pattern
    def Full(x, y):
        return Add(Mean(x, [-1], True, None), y, 1)

    @pm.pattern
    def Named(x, y):
        return Add(other=y, self=Mean(x, dim=[-1], keepdim=True))

    assert Short.core == Full.core == Named.core
    assert Gelu.signature_text() == "Gelu(self, approximate='none')"

    @pm.pattern
    def G1(x):
        return Gelu(x, approximate="tanh")

    @pm.pattern
    def G2(x):
        return Gelu(x, "tanh")

    @pm.pattern
    def Soft(x):
        return Softmax(x, -1)

    assert G1.core == G2.core
    term, _, _ = _exported_output(gelu_tanh, "gelu_tanh")
    assert pm.match(G1, term) is not None
    term, _, _ = _exported_output(lambda x: x.softmax(-1), "silu")
    assert pm.match(Soft, term) is not None


@pm.pattern
def MeanTwice(x):
    return x.mean(-1, keepdim=True) + x.mean(-1, keepdim=True)


@pm.rule(MeanTwice)
def doubled(x):
    return Mul(Mean(x, [-1], keepdim=True), 2)  # keywords and defaults in a rule body


def test_rule_bodies_take_keywords_and_defaults():
    prog = load_model(Run(lambda x: x.mean(-1, keepdim=True) + x.mean(-1, keepdim=True), ()),
                      (torch.randn(4, 8),))
    r = rewrite_program(prog, [MeanTwice], check_profitability=False)
    assert r.report.firings == {"doubled": 1} and r.numerics.ok
    mean = next(n for n in r.ep.graph.nodes if n.target == aten.mean.dim)
    assert list(mean.args[1:3]) == [[-1], True]


def test_user_operators_take_their_own_defaults():
    @pm.op
    def Scale(x, factor=2):
        return 1

    @pm.pattern
    def A(x):
        return Scale(x)

    @pm.pattern
    def B(x):
        return Scale(x, 2)

    @pm.pattern
    def C(x):
        return Scale(factor=2, x=x)

    assert A.core == B.core == C.core


def _error(pattern) -> str:
    with pytest.raises(PatternError) as e:
        pattern.core
    return str(e.value)


def test_arity_errors_name_the_missing_parameter():
    @pm.pattern
    def Missing(x):
        return Mean(x, keepdim=True)

    @pm.pattern
    def Unknown(x):
        return Mean(x, [-1], keep_dim=True)

    @pm.pattern
    def Twice(x):
        return Mean(x, [-1], dim=[0])

    @pm.pattern
    def TooMany(x):
        return Sigmoid(x, x)

    msg = _error(Missing)
    assert "operator Mean takes 4 argument(s), got 2: missing 'dim'" in msg
    assert "Mean(self, dim, keepdim=False, dtype=None)" in msg and "test_torch_code.py:" in msg
    assert "has no parameter 'keep_dim'" in _error(Unknown)
    assert "argument 'dim' given twice" in _error(Twice)
    assert "operator Sigmoid takes 1 argument(s), got 2" in _error(TooMany)


# -------------------------------------------------------------------- errors

def test_torch_functions_without_a_faithful_lowering_are_refused_by_name():
    @pm.pattern
    def Contig(x):
        return x.contiguous()

    @pm.pattern
    def To(x):
        return x.to("cpu")

    @pm.pattern
    def Drop(x):
        return F.dropout(x, 0.1, training=False)

    @pm.pattern
    def InPlace(x):
        return x.add_(1)

    @pm.pattern
    def SiluInPlace(x):
        return F.silu(x, inplace=True)

    @pm.pattern
    def NoAten(x):
        return F.normalize(x)

    @pm.pattern
    def NoFit(x):
        return F.softmax(x)

    assert "Tensor.contiguous" in _error(Contig) and "no faithful lowering" in _error(Contig)
    assert "Tensor.to" in _error(To) and "only a cast to a dtype" in _error(To)
    msg = _error(Drop)
    assert "torch.nn.functional.dropout" in msg and "'training'" in msg
    assert "Tensor.add_" in _error(InPlace) and "in-place" in _error(InPlace)
    assert "inplace=True" in _error(SiluInPlace)
    msg = _error(NoAten)
    assert "torch.nn.functional.normalize" in msg and "no ATen operator aten.normalize" in msg
    msg = _error(NoFit)
    assert "torch.nn.functional.softmax" in msg and "fit no overload" in msg


@pm.pattern
def HfRmsNorm(x, w):  # as Hugging Face writes it: in float32, back to half
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
    return w * h.half()


@pm.rule(HfRmsNorm)
def fused_rms_norm(x, w):
    return F.rms_norm(x.float(), [w.shape[0]], w.float(), 1e-6).half()


class HfRms(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(8).half())

    def forward(self, x):
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        return self.w * h.half()


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_casts_match_with_and_without_the_copy(dtype):
    """``x.to(torch.float32)`` exports as ``_to_copy`` from float16 and as
    nothing from float32: the pattern matches both, the rule casts only
    what needs it."""
    prog = load_model(HfRms(), (torch.randn(4, 8).to(dtype),))
    copies = [n for n in prog.ep.graph.nodes if n.target == aten._to_copy.default]
    assert len(copies) == (2 if dtype == torch.float16 else 1)
    r = rewrite_program(prog, [HfRmsNorm], check_profitability=False)
    assert r.report.firings == {"fused_rms_norm": 1} and r.numerics.ok
    targets = [n.target for n in r.ep.graph.nodes if n.op == "call_function"]
    assert aten.rms_norm.default in targets and aten.rsqrt.default not in targets
    # x.float() casts only a float16 x; w.float() and .half() always cast
    assert targets.count(aten._to_copy.default) == (3 if dtype == torch.float16 else 2)


def test_torch_code_outside_bodies_is_an_error():
    with pytest.raises(PatternError, match="inside a @pm.pattern body"):
        from pypm_verified.dsl import torch_code
        torch_code.call(torch.sigmoid, (1.0,), {})


def test_the_dtype_table_is_the_importers():
    from pypm_verified.dsl import torch_code
    for t, d in TORCH_TO_PM.items():
        assert torch_code.pattern_constant(t) == d
    assert torch_code.pattern_constant(torch.contiguous_format) == "torch.contiguous_format"


# ------------------------------------------- many one-liners, one export

def b_var_dim(x, m): return x.var(-1, keepdim=True)
def b_var_all(x, m): return x.var()
def b_var_correction(x, m): return x.var(-1, correction=0)
def b_std(x, m): return x.std(-1, keepdim=True)
def b_mean_sum(x, m): return x.mean() + x.sum() + x.sum(-1, keepdim=True) + x.mean((0, 1))
def b_reflected(x, m): return 2 ** x + 2 / x + (1 - x) + 2 * x + (2 + x)
def b_where(x, m): return torch.where(m, 0.0, x) + torch.where(m, x, x)
def b_expand(x, m): return x.unsqueeze(0).expand(2, 8, 8)
def b_clamp(x, m): return x.clamp(min=0) + torch.clamp(x, -1, 1) + x.amax(-1, keepdim=True)
def b_unary(x, m): return torch.exp(x) + x.sqrt() + torch.erf(x) + x.neg() + x.abs() + (-x)
def b_binary(x, m): return torch.add(x, x, alpha=2) + x.sub(1, alpha=2) + x.div(2) - x / x
def b_compare(x, m): return torch.gt(x, 0) & ~torch.eq(x, 1)
def b_compare_ops(x, m): return ((x > 0) & (x < 1)) | (x >= 2) | (m == 0) | (x != 1)
def b_activations(x, m): return F.relu(x) + x.relu() + F.gelu(x) + F.silu(x) + F.leaky_relu(x, 0.2)
def b_tanh_forms(x, m): return torch.tanh(x) + x.tanh() + F.tanh(x) + F.sigmoid(x) + F.mish(x)
def b_softmaxes(x, m): return F.log_softmax(x, -1) + torch.softmax(x, -1, dtype=torch.float32)
def b_pows(x, m): return x.pow(0.5) + torch.pow(x, 2) + torch.square(x) + x ** 3
def b_matmuls(x, m): return torch.matmul(x, x) + torch.mm(x, x) + x.t() @ x + x.T @ x.mT
def b_bmm(x, m): return torch.baddbmm(x.unsqueeze(0), x.unsqueeze(0), x.unsqueeze(0), beta=0.5)
def b_views(x, m): return x.view(-1) + x.permute([1, 0]).reshape(64) * 0 + 0
def b_cat(x, m): return torch.cat([x, x], -1).sum(-1) + torch.stack([x, x]).sum(0).sum(-1)
def b_masked(x, m): return x.masked_fill(~m, 0.0)
def b_norms(x, m): return F.layer_norm(x, [8]) + F.rms_norm(x, [8], eps=1e-6)
def b_likes(x, m): return torch.ones_like(x) + torch.zeros_like(x) + torch.full_like(x, 2.0)
def b_tri(x, m): return x.triu(1) + torch.tril(x) + x.flip(0) + x.cumsum(-1)
def b_reductions(x, m): return torch.logsumexp(x, -1) + x.max(-1)[0] + x.argmax(-1)
def b_pad(x, m): return F.pad(x, (1, 1)) + 0


BATTERY = [b_var_dim, b_var_all, b_var_correction, b_std, b_mean_sum, b_reflected, b_where,
           b_expand, b_clamp, b_unary, b_binary, b_compare, b_compare_ops, b_activations,
           b_tanh_forms,
           b_softmaxes, b_pows, b_matmuls, b_bmm, b_views, b_cat, b_masked, b_norms, b_likes,
           b_tri, b_reductions, b_pad]


class All(nn.Module):
    def forward(self, x, m):
        return tuple(fn(x, m) for fn in BATTERY)


def test_each_one_liner_matches_its_export():
    prog = load_model(All(), (torch.randn(8, 8), torch.rand(8, 8) > 0.5))
    g = prog.ep.graph_module.graph
    tg = TermGraph(g).build()
    outs = next(n for n in g.nodes if n.op == "output").args[0]
    missed = [fn.__name__ for fn, out in zip(BATTERY, outs)
              if pm.match(pm.pattern(fn), tg.term[out]) is None]
    assert missed == []
