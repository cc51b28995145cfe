"""torch.compile integration: ``pypm_verified.backend`` (torch/backend.py).

Skipped when torch/transformers are missing. One test compiles with
Inductor (a tiny graph); the others use ``then="eager"`` or a recording
callable, so the file stays fast."""
import math
import os
import subprocess
import sys
import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import pypm_verified as pm  # noqa: E402
from pypm_verified.torch.backend import PassThroughWarning  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import models  # noqa: E402

LINEAR_ACT = "pypm.linear_act"
SDPA = torch.ops.aten.scaled_dot_product_attention.default


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


class Recorder:
    """A ``then`` that keeps the graphs it is given and runs them eagerly."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward


def targets(gm):
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


class MLP(nn.Module):
    """x @ W1^T (the transposed-operand matmul) then Linear + ReLU."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.w = nn.Parameter(torch.randn(32, 16))
        self.fc = nn.Linear(32, 8)

    def forward(self, x):
        h = torch.matmul(x, self.w.t())
        return torch.relu(self.fc(h))


def close(a, b, tol=1e-4):
    return torch.allclose(a, b, atol=tol, rtol=1e-3)


# ------------------------------------------------------------------ outputs, firings

def test_bert_rewritten_inside_compile_same_outputs(lib):
    m, inputs = models.build("bert", "small", layers=1)  # one layer: Dynamo's tracing is slow
    kw = models.input_kwargs(inputs)
    rec = Recorder()
    be = pm.backend(then=rec, check_profitability=False)
    c = torch.compile(m, backend=be, dynamic=False)
    with torch.no_grad():
        ref = m(**kw).last_hidden_state
        out = c(**kw).last_hidden_state
    assert close(ref, out)
    assert [r.status for r in be.records] == ["rewritten"]
    # every attention block became SDPA, inside the compiled graph
    assert be.firings["sdpa"] == 1
    assert targets(rec.graphs[0]).count(str(SDPA)) == 1
    rec0 = be.records[0]
    assert rec0.max_abs_diff is not None and rec0.max_abs_diff < 1e-4
    assert "rewritten" in be.summary() and "sdpa" in be.summary()


def test_inductor_compiles_the_fused_kernels(lib):
    m = MLP().eval()
    x = torch.randn(4, 16)
    be = pm.backend(then="inductor", check_profitability=False, skip=())
    c = torch.compile(m, backend=be, dynamic=False)
    from torch._inductor import config
    with torch.no_grad(), config.patch(compile_threads=1):  # no worker pool to start
        ref = m(x)
        out = c(x)
        again = c(x)
    assert close(ref, out) and close(ref, again)
    assert be.firings == {"linear_nt": 1, "linear_act": 1}
    assert be.records[0].status == "rewritten" and be.records[0].then_s > 0


def test_skip_declines_a_rule_and_auto_follows_then(lib):
    m = MLP().eval()
    x = torch.randn(4, 16)
    rec = Recorder()
    be = pm.backend(then=rec, check_profitability=False, skip=["linear_act"])
    with torch.no_grad():
        out = torch.compile(m, backend=be, dynamic=False)(x)
    assert close(m(x), out)
    assert be.firings == {"linear_nt": 1}
    assert LINEAR_ACT + ".default" not in targets(rec.graphs[0])
    reasons = be.records[0].report.why_not_fired("LinearEpilog", "linear_act")
    assert any("skipped under torch.compile" in r for r, _ in reasons)
    from pypm_verified.torch.backend import COMPILED_SKIP
    assert pm.backend(then="inductor").skip == COMPILED_SKIP.get("inductor", ())
    assert pm.backend(then="eager").skip == ()  # "auto" skips only for Inductor


def test_nothing_fires_hands_over_the_captured_graph(lib):
    class Plain(nn.Module):
        def forward(self, x):
            return torch.sin(x) + 1

    rec, seen = Recorder(), []
    be = pm.backend(then=rec)
    orig = be._then

    def spy(gm, ex):
        seen.append(gm)
        return orig(gm, ex)
    be._then = spy
    x = torch.randn(3)
    with torch.no_grad():
        assert close(torch.compile(Plain(), backend=be, dynamic=False)(x), torch.sin(x) + 1)
    assert be.records[0].status == "unchanged" and be.firings == {}
    # the captured graph itself (not the re-export): compile alone, unchanged
    assert "sin" in " ".join(targets(seen[0])) and "aten" not in " ".join(targets(seen[0]))


# ------------------------------------------------------------ what passes through

def test_graph_break_rewrites_each_graph(lib):
    class Broken(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = MLP(), MLP()
            self.up = nn.Linear(8, 16)

        def forward(self, x):
            h = self.a(x)
            torch._dynamo.graph_break()
            return self.b(self.up(h))

    m = Broken().eval()
    x = torch.randn(2, 16)
    be = pm.backend(then="eager", check_profitability=False, skip=())
    with torch.no_grad():
        out = torch.compile(m, backend=be, dynamic=False)(x)
        ref = m(x)
    assert close(ref, out)
    assert len(be.records) == 2 and all(r.status == "rewritten" for r in be.records)
    assert be.firings["linear_nt"] == 2


def test_dynamic_shapes_pass_through_with_a_note(lib):
    m = MLP().eval()
    be = pm.backend(then="eager", check_profitability=False)
    c = torch.compile(m, backend=be, dynamic=True)
    x = torch.randn(5, 16)
    with torch.no_grad(), pytest.warns(PassThroughWarning, match="dynamic shapes"):
        out = c(x)
        ref = m(x)
    assert close(ref, out)
    assert be.records[0].status == "passed through" and be.firings == {}


def test_training_graph_passes_through_and_backward_works(lib):
    m = MLP().train()
    x = torch.randn(4, 16)
    be = pm.backend(then="eager", check_profitability=False, skip=())
    c = torch.compile(m, backend=be, dynamic=False)
    with pytest.warns(PassThroughWarning, match="training graph"):
        loss = c(x).sum()
    loss.backward()
    assert m.w.grad is not None and m.w.grad.abs().sum() > 0
    assert be.records[0].status == "passed through" and be.firings == {}


def test_a_graph_mutating_its_input_passes_through(lib):
    class InPlace(nn.Module):
        def forward(self, x, acc):
            acc.add_(1.0)
            return torch.relu(torch.matmul(x, acc.t()))

    x, acc = torch.randn(4, 8), torch.zeros(3, 8)
    be = pm.backend(then="eager", check_profitability=False, skip=())
    with torch.no_grad(), pytest.warns(PassThroughWarning, match="mutates its inputs"):
        out = torch.compile(InPlace(), backend=be, dynamic=False)(x, acc)
    assert torch.equal(acc, torch.ones(3, 8))  # mutated once, not by a check as well
    assert close(out, torch.relu(x @ acc.t()))
    assert be.records[0].status == "passed through"


def test_inference_mode_is_rewritten(lib):
    m = MLP().eval()
    x = torch.randn(4, 16)
    be = pm.backend(then="eager", check_profitability=False, skip=())
    with torch.inference_mode():
        out = torch.compile(m, backend=be, dynamic=False)(x)
        ref = m(x)
    assert close(ref, out)
    assert be.firings == {"linear_nt": 1, "linear_act": 1}, be.summary()


def test_a_wrong_rule_is_caught_by_the_check(lib):
    class TypoGelu(nn.Module):
        def forward(self, x):
            c = math.sqrt(2.0 / math.pi)
            return (x * 0.5) * (1.0 + torch.tanh((x + torch.pow(x, 3.0) * 0.04715) * c))

    x = torch.linspace(-4, 4, 64)
    rule = os.path.join(ROOT, "tests", "wrong_rules", "gelu_constant.py")
    be = pm.backend(rules=rule, then="eager")
    with torch.no_grad(), pytest.warns(PassThroughWarning, match="numerics check failed"):
        out = torch.compile(TypoGelu(), backend=be, dynamic=False)(x)
    assert close(out, TypoGelu()(x), tol=1e-6)  # the captured graph ran, not the rewrite
    assert be.records[0].status == "passed through"
    # without the check the wrong rewrite goes through
    torch._dynamo.reset()
    be2 = pm.backend(rules=rule, then="eager", check=False)
    with torch.no_grad():
        bad = torch.compile(TypoGelu(), backend=be2, dynamic=False)(x)
    assert be2.firings == {"gelu_tanh_typo": 1}
    assert not close(bad, TypoGelu()(x))


def test_then_failing_on_the_rewrite_gets_the_captured_graph(lib):
    seen = []

    def picky(gm, example_inputs):  # a compiler that cannot take the fused kernel
        seen.append(targets(gm))
        if any(t.startswith(LINEAR_ACT) for t in targets(gm)):
            raise NotImplementedError("no pypm.linear_act here")
        return gm.forward

    m, x = MLP().eval(), torch.randn(4, 16)
    be = pm.backend(then=picky, check_profitability=False, skip=())
    with torch.no_grad(), pytest.warns(PassThroughWarning, match="picky failed on the rewritten"):
        out = torch.compile(m, backend=be, dynamic=False)(x)
        ref = m(x)
    assert close(ref, out) and len(seen) == 2
    assert be.records[0].status == "passed through"


# ------------------------------------------------------------------ bad arguments

@pytest.mark.parametrize("kwargs, exc, msg", [
    ({"then": "nope"}, ValueError, r"then='nope': unknown backend; expected 'inductor', 'eager'"),
    ({"then": 3}, TypeError, "then must be"),
    ({"target": "tpu"}, ValueError, "unknown target 'tpu'"),
    ({"engine": "fast"}, ValueError, "unknown engine 'fast'"),
    ({"rules": 42}, TypeError, "rules must be"),
    ({"rules": [42]}, TypeError, "expected @pm.pattern"),
    ({"rules": "no_such_rules_module"}, ValueError, "cannot import rules"),
    ({"skip": ["nope"]}, ValueError, r"unknown rule name\(s\) 'nope'; the rules are"),
    ({"skip": "all"}, ValueError, "expected 'auto' or a list of rule names"),
    ({"max_iterations": 0}, ValueError, "max_iterations must be a positive int"),
])
def test_bad_arguments_fail_at_construction(kwargs, exc, msg):
    with pytest.raises(exc, match=msg):
        pm.backend(**kwargs)


def test_import_stays_torch_free():
    code = ("import sys, pypm_verified as pm; assert callable(pm.backend); "
            "assert 'torch' not in sys.modules, 'torch imported'")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
