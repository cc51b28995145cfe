"""``check-rules`` on pointwise rules: the common activation functions have
definitions in the symbolic semantics (checking/smt.py: from the
uninterpreted primitives exp, log, erf and sqrt), so rules that hold by
those definitions are proved; a difference z3 finds is "differs" only with
a concrete input on which torch confirms it (re-evaluated here), and one
that hinges on a primitive's unknown values is "unknown (uninterpreted:
exp)", never "differs".

Skipped when torch or z3 is missing (`make test` installs both)."""
import json
import math
import os

import pytest

torch = pytest.importorskip("torch")
z3 = pytest.importorskip("z3")

import torch.fx as fx  # noqa: E402

import pypm_verified as pm  # noqa: E402
from test_smt import B  # noqa: E402 -- the graph builder with fake-tensor metadata
from pypm_verified.checking import check_rule, check_rules  # noqa: E402
from pypm_verified.checking import smt as S  # noqa: E402
from pypm_verified.library import load_rules  # noqa: E402
from pypm_verified.torch.check import TOLERANCE  # noqa: E402
from pypm_verified.torch.ops import (Add, Clamp, ClampMin, Exp, Gelu, Log, Mul,  # noqa: E402
                                     Neg, PowScalar, Relu, Sigmoid, Silu, Tanh)

aten = torch.ops.aten
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WRONG = os.path.join(ROOT, "tests", "wrong_rules", "pointwise_wrong.py")


# ------------------------------------------------ operators and small rules
# (operators without an op class: the library's operator variables are untouched)

@pm.op(torch=[aten.hardsigmoid.default])
def Hardsigmoid(x):
    return 1


@pm.op(torch=[aten.hardswish.default])
def Hardswish(x):
    return 1


@pm.op(torch=[aten.softplus.default])
def Softplus(x, beta, threshold):
    return 1


@pm.op(torch=[aten.mish.default])
def Mish(x):
    return 1


@pm.op(torch=[aten.hardtanh.default])
def Hardtanh(x, min_val, max_val):
    return 1


@pm.pattern
def YSigmoidY(y):
    return Mul(y, Sigmoid(y))


@pm.rule(YSigmoidY)
def to_silu(y):
    return Silu(y)


@pm.pattern
def XHardsigmoidX(x):
    return Mul(x, Hardsigmoid(x))


@pm.rule(XHardsigmoidX)
def to_hardswish(x):
    return Hardswish(x)


@pm.pattern
def LogOnePlusExp(x):
    return Log(Add(Exp(x), 1, 1))


@pm.rule(LogOnePlusExp)
def to_softplus(x):
    return Softplus(x, 1, 20)


@pm.pattern
def XTanhSoftplus(x):
    return Mul(x, Tanh(Softplus(x, 1, 20)))


@pm.rule(XTanhSoftplus)
def to_mish(x):
    return Mish(x)


@pm.pattern
def GeluTanhForm(x):
    """GPT-2's 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), with the
    kernel's double for sqrt(2/pi)."""
    inner = Mul(Add(x, Mul(PowScalar(x, 3), 0.044715), 1), S.GELU_TANH_BETA)
    return Mul(Mul(x, 0.5), Add(Tanh(inner), 1.0, 1))


@pm.rule(GeluTanhForm)
def to_gelu_tanh(x):
    return Gelu(x, "tanh")


@pm.pattern
def TanhX(x):
    return Tanh(x)


@pm.rule(TanhX)
def tanh_by_sigmoid(x):
    """tanh(x) = 2 sigmoid(2x) - 1."""
    return Add(Mul(Sigmoid(Mul(x, 2)), 2), -1, 1)


@pm.pattern
def SigmoidNeg(x):
    return Sigmoid(Neg(x))


@pm.rule(SigmoidNeg)
def one_minus_sigmoid(x):
    """sigmoid(-x) = 1 - sigmoid(x): needs exp(x) exp(-x) = 1, a law of exp."""
    return Add(Neg(Sigmoid(x)), 1, 1)


@pm.pattern
def ClampUnit(x):
    return Clamp(x, -1.0, 1.0)


@pm.rule(ClampUnit)
def to_hardtanh(x):
    return Hardtanh(x, -1, 1)


@pm.pattern
def ClampMinZero(x):
    return ClampMin(x, 0)


@pm.rule(ClampMinZero)
def to_relu(x):
    # clamp_min(int64 x, 0.0) computes in float (type promotion), relu(x) in int64
    assert x.dtype in (pm.f32, pm.f64, pm.f16, pm.bf16)
    return Relu(x)


@pm.pattern
def ExpSquared(x):
    return Mul(Exp(x), Exp(x))


@pm.rule(ExpSquared)
def exp_doubled(x):
    """exp(x)^2 = exp(2x): exp(a) exp(b) = exp(a + b) on the terms present."""
    return Exp(Mul(x, 2))


@pm.pattern
def ExpCubed(x):
    return Mul(Mul(Exp(x), Exp(x)), Exp(x))


@pm.rule(ExpCubed)
def exp_tripled(x):
    """exp(x)^3 = exp(3x): true, but it needs exp(2x), a term neither side
    has, so no law the semantics instantiates derives it."""
    return Exp(Mul(x, 3))


def _check(pattern, examples=8):
    (rule,) = pattern.rules
    return check_rule(pattern, rule, examples=examples, guards=False)


# ------------------------------------------------------------------ proved

def test_silu_rule_is_proved_for_every_structure():
    r = _check(YSigmoidY, examples=12)
    sym = r.symbolic
    assert r.status == "proved", sym
    assert sym["structures"] >= 3 and sym["proved"] == sym["structures"]
    assert not sym["differs"] and not sym["unknown"] and not sym["counterexamples"]


@pytest.mark.parametrize("pattern", [XHardsigmoidX, LogOnePlusExp, XTanhSoftplus, GeluTanhForm,
                                     TanhX, SigmoidNeg, ClampUnit, ClampMinZero, ExpSquared],
                         ids=lambda p: p.rules[0].name)
def test_defined_functions_are_proved(pattern):
    r = _check(pattern)
    assert r.status == "proved", (r.status, r.reason, r.counterexample, r.symbolic)
    assert r.symbolic["proved"] == r.symbolic["structures"] >= 1


# ----------------------------------------------- unknown, never "differs"

def test_an_identity_beyond_the_definitions_is_unknown_naming_the_primitive():
    r = _check(ExpCubed)
    sym = r.symbolic
    assert r.status == "tested" and r.counterexample is None
    assert sym["unknown"] and not sym["differs"] and not sym["counterexamples"], sym
    for u in sym["unknown"]:
        assert "uninterpreted: exp;" in u and "not confirmed numerically" in u, u


# ---------------------------------------- definitions against torch itself

class _G(B):
    """One-op FX graphs over one float64 input ``x`` (``B``: the symbolic
    tests' graph builder)."""

    def __init__(self, shape=(4,), dtype=torch.float64):
        super().__init__(x=shape)
        self.x = self.p["x"]
        self.x.meta["val"] = self.mode.from_tensor(torch.zeros(shape, dtype=dtype))
        self.shape = shape


_REAL = {"exp": math.exp, "log": math.log, "erf": math.erf, "sqrt": math.sqrt}


def _value(e):
    """A ground z3 term as a float, the primitives as the real functions."""
    if z3.is_rational_value(e):
        return e.numerator_as_long() / e.denominator_as_long()
    if z3.is_true(e) or z3.is_false(e):
        return z3.is_true(e)
    k, a = e.decl().kind(), [_value(c) for c in e.children()]
    ops = {z3.Z3_OP_ADD: lambda: sum(a), z3.Z3_OP_SUB: lambda: a[0] - sum(a[1:]),
           z3.Z3_OP_MUL: lambda: math.prod(a), z3.Z3_OP_DIV: lambda: a[0] / a[1],
           z3.Z3_OP_UMINUS: lambda: -a[0], z3.Z3_OP_ITE: lambda: a[1] if a[0] else a[2],
           z3.Z3_OP_LE: lambda: a[0] <= a[1], z3.Z3_OP_LT: lambda: a[0] < a[1],
           z3.Z3_OP_GE: lambda: a[0] >= a[1], z3.Z3_OP_GT: lambda: a[0] > a[1],
           z3.Z3_OP_TO_REAL: lambda: a[0], z3.Z3_OP_POWER: lambda: a[0] ** a[1],
           z3.Z3_OP_AND: lambda: all(a), z3.Z3_OP_OR: lambda: any(a),
           z3.Z3_OP_NOT: lambda: not a[0]}
    if k in ops:
        return ops[k]()
    return _REAL[e.decl().name()](*a)


DEFINED = [
    ("sigmoid", aten.sigmoid.default, ()), ("silu", aten.silu.default, ()),
    ("tanh", aten.tanh.default, ()), ("exp", aten.exp.default, ()),
    ("relu", aten.relu.default, ()), ("gelu", aten.gelu.default, ()),
    ("gelu_tanh", aten.gelu.default, {"approximate": "tanh"}),
    ("leaky_relu", aten.leaky_relu.default, (0.2,)),
    ("hardtanh", aten.hardtanh.default, (-0.5, 2.0)), ("clamp", aten.clamp.default, (-1.0, 0.5)),
    ("hardsigmoid", aten.hardsigmoid.default, ()), ("hardswish", aten.hardswish.default, ()),
    ("relu6", aten.relu6.default, ()),
    ("softplus", aten.softplus.default, ()), ("softplus_beta", aten.softplus.default, (2.0,)),
    ("log", aten.log.default, ()), ("sqrt", aten.sqrt.default, ()),
    ("rsqrt", aten.rsqrt.default, ()), ("reciprocal", aten.reciprocal.default, ()),
    ("neg", aten.neg.default, ()), ("abs", aten.abs.default, ()), ("mish", aten.mish.default, ()),
    ("elu", aten.elu.default, (0.7,)), ("selu", aten.selu.default, ()),
    ("celu", aten.celu.default, (1.5,)), ("log1p", aten.log1p.default, ()),
    ("expm1", aten.expm1.default, ()), ("square", aten.square.default, ()),
]


@pytest.mark.parametrize("name,target,args", DEFINED, ids=[d[0] for d in DEFINED])
def test_each_definition_is_torchs_function(name, target, args):
    """The semantics' term of each defined function, with exp, log, erf and
    sqrt read as the real functions, is torch's float64 result (positive
    inputs where the function is defined only there)."""
    xs = [-6.0, -3.0, -1.25, -0.5, 0.0, 0.75, 2.0, 3.0, 7.5]
    if name in ("log", "sqrt", "rsqrt", "reciprocal", "log1p"):
        xs = [0.125, 0.5, 1.0, 2.5, 9.0]
    pos, kw = (args, {}) if isinstance(args, tuple) else ((), args)
    g = _G((1,))
    node = g(target, g.x, *pos, **kw)
    want = target(torch.tensor(xs, dtype=torch.float64), *pos, **kw)
    for x, w in zip(xs, want.tolist()):
        sem = S.Semantics()
        ev = S.Evaluator(sem, {"x": S.Sym([z3.IntVal(1)], lambda idx, v=x: S._real(v))})
        term = ev.value(node).at([z3.IntVal(0)])
        got = _value(z3.simplify(term))
        assert got == pytest.approx(w, rel=1e-12, abs=1e-12), (name, x, got, w)


# ------------------------------------------ "differs" with a counterexample

def _tensors(cex):
    return {i["name"]: torch.tensor(i["values"], dtype=getattr(torch, i["dtype"])).reshape(
        i["shape"]) for i in cex["inputs"]}


def _apart(a, b):
    """Whether torch's two results differ beyond the float64 tolerance."""
    atol, rtol = TOLERANCE[torch.float64]
    a, b = a.double(), b.double()
    return bool(((a - b).abs() > atol + rtol * a.abs()).any())


@pytest.mark.parametrize("case", ["sigmoid_vs_tanh", "silu_vs_gelu"])
def test_a_wrong_structure_differs_with_a_counterexample_torch_confirms(case):
    g = _G((2, 3))
    x = g.x
    if case == "sigmoid_vs_tanh":
        a, b = g(aten.sigmoid.default, x), g(aten.tanh.default, x)
        ref, new = torch.sigmoid, torch.tanh
    else:
        a, b = g(aten.mul.Tensor, x, g(aten.sigmoid.default, x)), g(aten.gelu.default, x)
        ref, new = (lambda t: t * torch.sigmoid(t)), torch.nn.functional.gelu
    p = g.prove(a, b)
    assert p.status == "differs", p
    c = p.counterexample
    assert c and c["kind"] == "disagree" and c["max_abs"] > c["tolerance"][0]
    t = _tensors(c)["x"]
    assert t.dtype == torch.float64 and list(t.shape) == c["expected"][0]
    assert _apart(ref(t), new(t))  # torch, here, sees them differ on that input
    assert "confirmed by torch on x:" in p.detail


@pytest.fixture(scope="module")
def wrong():
    return {r.rule: r for r in check_rules(load_rules(WRONG), examples=30, guards=False)}


@pytest.mark.parametrize("name", ["silu_as_gelu", "sigmoid_as_tanh"])
def test_wrong_pointwise_rules_are_refuted(wrong, name):
    r = wrong[name]
    assert r.status == "refuted", (r.status, r.reason)
    c = r.counterexample
    assert c.kind == "disagree" and c.max_abs > c.tolerance[0]


def test_a_difference_the_instances_miss_is_reported_with_its_counterexample(wrong):
    """clamp(x, -1e4, 1e4) -> x: the instances (normal, or scaled by 100) never leave it and
    agree; the symbolic check's counterexample (z3's value outside it) is in
    the result, its JSON and Markdown, and torch confirms it here. Replayed
    on the rule (matched and rewritten at those sizes and values), it
    refutes the rule (it was "tested", exit 0, with the difference only in
    the symbolic summary)."""
    r = wrong["wide_clamp_as_identity"]
    assert r.status == "refuted" and r.counterexample is not None
    assert "symbolic check found inputs where the rule fires" in r.reason
    assert any(abs(v) > 1e4 for vs in r.counterexample.values.values() for v in vs)
    sym = r.symbolic
    assert sym["differs"] and len(sym["counterexamples"]) == len(sym["differs"])
    for c in sym["counterexamples"]:
        assert c["structure"].startswith("clamp(x, -10000.0, 10000.0) -> ")
        t = _tensors(c)["x"]
        assert bool((t.abs() > 1e4).any())
        assert _apart(torch.clamp(t, -1e4, 1e4), t)
    doc = json.loads(json.dumps(r.as_dict()))
    assert doc["symbolic"]["counterexamples"][0]["inputs"][0]["values"]
    from pypm_verified.checking import markdown
    assert "confirmed by torch on x:" in markdown([r])


def test_an_unconfirmed_difference_is_unknown_with_the_reason():
    """erf(x * c) for a c a little off 1/sqrt(2) differs from GELU over the
    reals, but by less than float64's tolerance: no input confirms it."""
    g = _G((3,))
    x = g.x
    off = g(aten.mul.Tensor, g(aten.mul.Tensor, x, 0.5),
            g(aten.add.Tensor, g(aten.erf.default, g(aten.mul.Tensor, x, 0.70710678)), 1.0))
    p = g.prove(off, g(aten.gelu.default, x))
    assert p.status == "unknown" and p.counterexample is None
    assert p.uninterpreted == ("erf",)
    assert p.detail.startswith("uninterpreted: erf;") and "agree within the tolerance" in p.detail
