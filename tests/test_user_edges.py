"""Rough edges a new user hits with an own rule: ``explain`` says why a
matched pattern's rule declines and shows literal mismatches as literals;
the one-line summaries say when a rule matched and declined; a numerics
mismatch names the firings responsible (bisected) with their rules' file
and line; ``--rules library --rules mine.py`` adds rules to the library;
``@pm.rule(..., differentiable=...)`` is honoured by the Inductor pass and
checked by check-rules (gradients compared)."""
import json
import os
import re

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("rich")

import pypm_verified as pm  # noqa: E402
from pypm_verified.cli import main  # noqa: E402
from pypm_verified.errors import PatternError  # noqa: E402
from pypm_verified.torch.ops import Mul, Sigmoid, Silu  # noqa: E402

if not pm.engine_available() and os.environ.get("PYPM_REQUIRE_LIB") != "1":
    pytest.skip("the verified engine library is not built (make lib)", allow_module_level=True)


class Attention(torch.nn.Module):
    """Eager attention; its softmax over ``dim``."""

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, q, k, v):
        s = torch.matmul(q, k.transpose(-2, -1)) * 0.125
        return torch.matmul(torch.softmax(s, dim=self.dim), v)


class Center(torch.nn.Module):
    def forward(self, x):
        return x - x.mean(1, keepdim=True)


class SiluTanh(torch.nn.Module):
    """Two SiLUs written out, two tanh."""

    def forward(self, x):
        a = x * torch.sigmoid(x)
        b = torch.tanh(a)
        c = b * torch.sigmoid(b)
        return torch.tanh(c) + a


class AttentionSilu(torch.nn.Module):
    def forward(self, q, k, v):
        s = torch.matmul(q, k.transpose(-2, -1)) * 0.125
        o = torch.matmul(torch.softmax(s, dim=-1), v)
        return o * torch.sigmoid(o)


CENTER_PATTERN = """
import pypm_verified as pm
from pypm_verified.torch.ops import Mean, Sub

@pm.pattern
def Centered(x):
    return Sub(x, Mean(x, [-1], True, None), 1)
"""

SILU_RULES = """
import pypm_verified as pm
from pypm_verified.torch.ops import Mul, Sigmoid, Silu

@pm.pattern
def SiluByHand(y):
    return Mul(y, Sigmoid(y))

@pm.rule(SiluByHand)
def to_silu(y):
    return Silu(y)
"""

WRONG_RULES = SILU_RULES + """
from pypm_verified.torch.ops import Relu, Tanh

@pm.pattern
def TanhOf(y):
    return Tanh(y)

@pm.rule(TanhOf)
def tanh_is_relu(y):
    return Relu(y)
"""
WRONG_LINE = WRONG_RULES.splitlines().index("@pm.rule(TanhOf)") + 1  # its where

LINEAR_ACT_RULES = """
import pypm_verified as pm
from pypm_verified.torch.ops import Linear, Relu, Mul, Sigmoid, Silu
from pypm_verified.library.epilogue import LinearAct

@pm.pattern
def LinRelu(x, w, b):
    assert w.rank == 2 and x.rank == 2
    return Relu(Linear(x, w, b))

@pm.rule(LinRelu{flag})
def linrelu_fused(x, w, b):
    assert x.dtype == pm.f32 and w.dtype == pm.f32
    assert b is not None and not b.is_const and b.rank == 1 and b.dtype == pm.f32
    assert x.shape[-1] == w.shape[-1] and b.shape[0] == w.shape[0]
    return LinearAct(x, w, b, "relu")

@pm.pattern
def SiluByHand(y):
    return Mul(y, Sigmoid(y))

@pm.rule(SiluByHand, differentiable=True)
def to_silu(y):
    assert y.dtype in (pm.f32, pm.f64)
    return Silu(y)
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("user_edges")
    torch.manual_seed(0)
    x = torch.randn(1, 2, 16, 8)
    f = {}
    for name, m, args in (("axis", Attention(-2), (x, x, x)), ("short", Attention(-1), (x, x, x)),
                          ("center", Center(), (torch.randn(2, 3, 4),)),
                          ("silutanh", SiluTanh(), (torch.randn(4, 8),)),
                          ("attsilu", AttentionSilu(), (x, x, x))):
        f[name] = str(d / f"{name}.pt2")
        torch.export.save(torch.export.export(m, args), f[name])
    for name, text in (("center_pat", CENTER_PATTERN), ("silu", SILU_RULES),
                       ("wrong", WRONG_RULES)):
        f[name] = str(d / f"{name}.py")
        with open(f[name], "w") as fh:
            fh.write(text)
    return f


def run(argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# ------------------------------------------------- explain what a user asks

def test_explain_shows_why_the_rule_of_a_match_declines(files, capsys):
    # the attention family matches a softmax over axis -2; its rule declines it
    code, out, err = run(["explain", files["axis"], "--pattern", "Attention", "--rules",
                          "attention"], capsys)
    assert code == 0, err
    assert "pattern Attention: matches at 1 node(s): matmul_1" in out
    assert "its rules at the matches (target cpu, profitability checked):" in out
    assert "  matmul_1: matched, but no rule fires:" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("    sdpa: "))
    assert "assert sdim.is_const" in line and "the softmax is over another axis than the " \
        "last" in line and re.search(r"\[python/pypm_verified/library/attention\.py:\d+\]$",
                                     line)


def test_explain_node_says_not_profitable_or_fires(files, capsys):
    code, out, err = run(["explain", files["short"], "--pattern", "Attention", "--node",
                          "matmul_1"], capsys)
    assert code == 0, err
    assert "MATCHES" in out
    assert re.search(r"sdpa: not profitable on cpu: attention .* needs sequence length >= "
                     r"\d+, saw 16", out)
    code, out, err = run(["explain", files["short"], "--pattern", "Attention", "--node",
                          "matmul_1", "--ignore-profitability"], capsys)
    assert code == 0, err
    assert "(target cpu, profitability ignored):\n  matmul_1: rule sdpa fires" in out


def test_explain_literal_mismatch_reads_as_literals(files, capsys):
    code, out, err = run(["explain", files["center"], "--pattern", "Centered", "--rules",
                          files["center_pat"]], capsys)
    assert code == 0, err
    why = next(ln for ln in out.splitlines() if ln.strip().startswith("why:"))
    assert why.strip().startswith("why: [literal] expected [-1], found [1] (argument 1 of "
                                  "Mean); ")
    assert "take it as a pattern parameter" in why and "d.is_const and d.value" in why
    assert "seq" not in out and "('num'" not in out


def test_literals_of_constant_symbols():
    from pypm_verified.core import symbols
    from pypm_verified.engines.explain import op_name
    assert op_name(symbols.const_symbol([-1, 2])) == "[-1, 2]"
    assert op_name(symbols.const_symbol(None)) == "None"
    assert op_name(symbols.const_symbol(True)) == "True"
    assert op_name(symbols.const_symbol("tanh")) == "'tanh'"
    assert op_name(symbols.const_symbol([])) == "[]"


def test_rewrite_line_says_matched_and_declined(files, capsys):
    code, out, err = run(["rewrite", files["short"], "--dry-run", "-q"], capsys)
    assert code == 0, err
    result, line = out.strip().splitlines()[-2:]
    assert result == "no rule fired: the program is unchanged"
    assert line.startswith("matched, declined: Attention x1 (sdpa: not profitable on cpu: ")
    assert "saw 16" in line


def test_backend_line_says_matched_and_declined(files):
    be = pm.backend(then="eager", target="cpu")
    x = torch.randn(1, 2, 16, 8)
    with torch.no_grad():
        torch.compile(Attention(-2), backend=be, dynamic=False)(x, x, x)
    torch._dynamo.reset()
    (rec,) = be.records
    line = rec.line()
    assert line.startswith("graph 0 (") and ": unchanged [nothing fired] matched, declined: " \
        "Attention x1 (sdpa: assert sdim.is_const" in line, line


# ---------------------------------------------------------- blame the rule

def test_numerics_mismatch_names_the_firings_and_rule(files, tmp_path, capsys):
    rep = tmp_path / "r.json"
    code, out, err = run(["rewrite", files["silutanh"], "--rules", files["wrong"],
                          "--dry-run", "--report", rep], capsys)
    assert code == 1
    blamed = [ln for ln in err.splitlines() if ln.startswith("blame: ")]
    assert blamed[0].startswith("blame: the mismatch comes from 2 of the 4 firing(s), each "
                                "reproducing it alone (bisected: ")
    where = f"{files['wrong']}:{WRONG_LINE}"
    assert blamed[1:] == [f"blame:   rule 'tanh_is_relu' at tanh ({where})",
                          f"blame:   rule 'tanh_is_relu' at tanh_1 ({where})"]
    doc = json.loads(rep.read_text())
    assert doc["numerics"]["blame"][1:] == [ln[len("blame: "):] for ln in blamed[1:]]


def test_blame_bisects_over_the_firings(files):
    from pypm_verified.library import load_rules
    from pypm_verified.torch.check import blame, compare
    from pypm_verified.torch.loader import load_model
    from pypm_verified.torch.pipeline import rewrite_program
    prog = load_model(files["silutanh"])
    pats = load_rules(files["wrong"])
    res = rewrite_program(prog, pats, check=False)
    firings = [(r, o) for r, o, _ in res.report.rewrites]
    assert sorted(firings) == [("tanh_is_relu", "tanh"), ("tanh_is_relu", "tanh_1"),
                               ("to_silu", "mul"), ("to_silu", "mul_1")]
    num = compare(prog.ep, res.ep, prog.args, prog.kwargs, n_random=1)
    assert not num.ok and num.failed_runs == [0, 1]
    b = blame(prog, pats, firings, runs=num.failed_runs)
    assert [(r, n) for r, n, _ in b.firings] == [("tanh_is_relu", "tanh"),
                                                 ("tanh_is_relu", "tanh_1")]
    assert not b.together and b.of == 4 and b.checks <= 7
    b = blame(prog, pats, firings, runs=num.failed_runs, max_checks=1)
    assert b.firings == [] and b.lines() == [
        "stopped after 1 re-applied rewrites: not narrowed down"]
    # the right rule alone: nothing to blame, the firings reproduce no mismatch
    silu = [f for f in firings if f[0] == "to_silu"]
    b = blame(prog, pats, silu)
    assert b.firings == [] and "did not come back" in b.note


# -------------------------------------------------- the library plus mine

def test_rules_library_plus_mine(files, capsys):
    argv = ["rewrite", files["attsilu"], "--dry-run", "-q", "--ignore-profitability"]
    code, out, err = run(argv + ["--rules", "library", "--rules", files["silu"]], capsys)
    assert code == 0, err
    assert "fired 2 rewrite(s): sdpa x1, to_silu x1; numerics ok" in out
    code, out, err = run(argv + ["--rules", files["silu"]], capsys)  # mine alone
    assert code == 0, err
    assert "fired 1 rewrite(s): to_silu x1; numerics ok" in out
    # the library named twice (whole and a module of it): each pattern once
    from pypm_verified.library import default_patterns, load_rule_specs
    assert load_rule_specs(["library", "attention"]) == default_patterns()
    code, out, err = run(["explain", files["short"], "--pattern", "Attention", "--rules",
                          "library"], capsys)
    assert code == 0 and "matches at 1 node(s)" in out, err


def test_rules_unknown_name_lists_library(files, capsys):
    code, _, err = run(["rewrite", files["attsilu"], "--dry-run", "--rules", "librar"],
                       capsys)
    assert code == 2 and "--rules takes 'library' (the whole default library)" in err


# -------------------------------------------------- per-rule training flag

def _aot_eager(p):
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    def keep(gm, _):
        return make_boxed_func(gm.forward)

    def backend(gm, example_inputs):
        p(gm.graph)
        return aot_autograd(fw_compiler=keep, bw_compiler=keep)(gm, example_inputs)
    return backend


@pm.pattern
def SiluHand(x):
    return Mul(x, Sigmoid(x))


@pm.rule(SiluHand, differentiable=True)
def silu_declared(x):
    return Silu(x)


@pm.pattern
def SiluHandNo(x):
    return Mul(x, Sigmoid(x))


@pm.rule(SiluHandNo, differentiable=False)
def silu_declared_not(x):
    return Silu(x)


@pm.pattern
def SiluBad(x):
    return Mul(x, Sigmoid(x))


class SiluModel(torch.nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(x)


def _train(p):
    torch._dynamo.reset()
    x = torch.randn(8, 16, requires_grad=True)
    torch.compile(SiluModel(), backend=_aot_eager(p), dynamic=False)(x).sum().backward()
    torch._dynamo.reset()
    return x.grad


def test_rule_declared_differentiable_fires_in_training():
    pat = SiluHand
    assert pat.rules[0].differentiable is True
    p = pm.inductor_pass([pat], check_profitability=False)
    grad = _train(p)
    assert p.firings == {"silu_declared": 1}
    assert p.rule_differentiable(pat.rules[0]) == (
        True, f"@pm.rule(differentiable=True) at {pat.rules[0].where}")
    x = torch.randn(8, 16)
    assert grad is not None and grad.shape == x.shape


def test_rule_declared_not_differentiable_is_declined_and_call_overrides():
    pat = SiluHandNo
    p = pm.inductor_pass([pat], check_profitability=False)
    _train(p)
    assert p.firings == {}
    (reason,) = p.reports[0].declines["SiluHandNo"]["silu_declared_not"]
    assert reason.startswith("training graph: not differentiable (@pm.rule("
                             "differentiable=False) at ")
    # the pass's own word wins over the rule's
    p = pm.inductor_pass([pat], check_profitability=False,
                         differentiable={"silu_declared_not": True})
    _train(p)
    assert p.firings == {"silu_declared_not": 1}
    # and the declaration is part of the cache key
    flag = silu_declared.differentiable
    try:
        a = pm.inductor_pass([SiluHand]).uuid()
        silu_declared.differentiable = None
        assert pm.inductor_pass([SiluHand]).uuid() != a
    finally:
        silu_declared.differentiable = flag


def test_rule_differentiable_must_be_a_bool():
    with pytest.raises(PatternError, match=r"differentiable='yes'.*True, False or None"):
        pm.rule(SiluBad, differentiable="yes")


def _rules_file(tmp_path, flag):
    path = tmp_path / f"linact_{bool(flag)}.py"
    path.write_text(LINEAR_ACT_RULES.format(flag=flag))
    return str(path)


def test_check_rules_refutes_a_false_differentiable_claim(tmp_path, capsys):
    argv = ["check-rules", "--fast", "--no-guards", "--no-symbolic", "--report"]
    rep = tmp_path / "r.json"
    code, out, err = run(argv + [rep, "--rules", _rules_file(tmp_path, ", differentiable=True")],
                         capsys)
    assert code == 1, err
    res = {r["rule"]: r for r in json.loads(rep.read_text())["rules"]}
    assert res["linrelu_fused"]["status"] == "refuted"
    assert res["linrelu_fused"]["reason"].startswith(
        "declared differentiable, but the replacement's backward fails: RuntimeError: ")
    assert "pypm.linear_act" in res["linrelu_fused"]["reason"]
    assert res["to_silu"]["status"] == "tested"  # aten.silu: its gradients agree
    # the same rule not declared differentiable: an inference rule, tested
    code, out, err = run(argv + [rep, "--rules", _rules_file(tmp_path, "")], capsys)
    assert code == 0, err
    res = {r["rule"]: r for r in json.loads(rep.read_text())["rules"]}
    assert res["linrelu_fused"]["status"] == "tested"
