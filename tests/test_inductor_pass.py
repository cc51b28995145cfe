"""``pm.inductor_pass()``: the rule library as an Inductor custom graph pass.

Two tests compile with Inductor for real (training through SDPA's backward;
a rule whose replacement Inductor decomposes); the others run the pass on
the graph Dynamo captures and hand the result to AOTAutograd without
Inductor's C++ codegen (``aot_eager``), which is what Inductor does after
its pre-grad passes, minus the compile.
"""
import math
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import pypm_verified as pm  # noqa: E402
from pypm_verified.torch.check import TOLERANCE  # noqa: E402
from pypm_verified.torch.inductor import DIFFERENTIABLE, InductorPass  # noqa: E402
from pypm_verified.torch.ops import Mul, Sigmoid, Silu  # noqa: E402

if not pm.engine_available() and os.environ.get("PYPM_REQUIRE_LIB") != "1":
    pytest.skip("the verified engine library is not built (make lib)", allow_module_level=True)

SDPA_BWD = "aten._scaled_dot_product_flash_attention_for_cpu_backward.default"
SDPA_FWD = "aten._scaled_dot_product_flash_attention_for_cpu.default"


@pytest.fixture(autouse=True)
def _fresh(tmp_path, monkeypatch):
    """Each test in an Inductor cache of its own (a hit would skip the pass)."""
    from torch._inductor.utils import clear_inductor_caches
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    clear_inductor_caches()
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


class Attention(torch.nn.Module):
    """Hand-written attention (eager softmax, cast back to q's dtype as HF
    does) and an MLP ``relu(linear)``."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.out = torch.nn.Linear(d, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        a = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // self.heads))
        a = torch.softmax(a, dim=-1).to(q.dtype)  # an identity cast, as HF writes it
        y = (a @ v).transpose(1, 2).reshape(b, s, d)
        return torch.relu(self.out(y))


@pm.pattern
def SiluWritten(x):
    return Mul(x, Sigmoid(x))


@pm.rule(SiluWritten)
def silu(x):
    return Silu(x)


def writes_in_place(x):
    """Writes an intermediate in place: ``b`` equals ``a`` before the
    write, not after."""
    a = torch.zeros(3)
    b = torch.zeros(3)
    a.add_(x)
    y = x + b
    return a * 2, y * torch.sigmoid(y)


class SiluModel(torch.nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(x)


def _grads(model, x):
    x.grad = None
    model.zero_grad()
    model(x).sum().backward()
    return [x.grad.clone()] + [p.grad.clone() for p in model.parameters()]


def _close(a, b):
    atol, rtol = TOLERANCE[torch.float32]
    return torch.allclose(a, b, atol=atol, rtol=rtol)


def _aot_eager(p, graphs=None):
    """A Dynamo backend: the pass on the captured graph, then AOTAutograd
    (recording the forward and backward graphs in ``graphs``)."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    def keep(gm, _):
        if graphs is not None:
            graphs.append({str(n.target) for n in gm.graph.nodes if n.op == "call_function"})
        return make_boxed_func(gm.forward)

    def backend(gm, example_inputs):
        p(gm.graph)
        return aot_autograd(fw_compiler=keep, bw_compiler=keep)(gm, example_inputs)
    return backend


def test_training_with_inductor_derives_sdpa_backward():
    """Training under Inductor: SDPA fires, the compiled backward runs SDPA's
    own backward kernel (the softmax is gone from the forward), the gradients
    of the input and of every parameter match eager, and the inference-only
    rule is declined with its reason."""
    torch.manual_seed(0)
    model = Attention()
    x = torch.randn(2, 4, 16, requires_grad=True)
    p = pm.inductor_pass(check_profitability=False)
    graphs = []

    def observe(g):  # the forward and backward graphs Inductor lowers
        graphs.append({str(n.target) for n in g.nodes if n.op == "call_function"})

    with p.install(), torch._inductor.config.patch(post_grad_custom_post_pass=observe):
        compiled = torch.compile(model, dynamic=False)
        got = _grads(compiled, x)
    want = _grads(model, x)
    assert p.firings == {"sdpa": 1}
    assert [r.status for r in p.records] == ["rewritten"]
    (report,) = p.reports
    assert report.firings == {"sdpa": 1}
    assert report.declines["LinearEpilog"]["linear_act"] == {
        "training graph: the replacement has no autograd formula (inference-only)": 1}
    assert len(graphs) == 2
    fwd, bwd = graphs
    assert SDPA_FWD in fwd and "aten.amax.default" not in fwd
    assert SDPA_BWD in bwd
    assert len(got) == len(want) == 5
    for g, w in zip(got, want):
        assert _close(g, w), (g - w).abs().max()


def test_replacement_inductor_decomposes_compiles():
    """A rule emitting ``aten.silu`` (which Inductor decomposes): run after
    Inductor's decompositions, as a post-grad pass, it stops Inductor; the
    pass runs before them, so silu is decomposed like any op and compiles."""
    from pypm_verified.torch.driver import rewrite_graph_module

    x = torch.randn(8, 16)
    want = SiluModel()(x)

    def post_grad(g):
        rewrite_graph_module(g.owning_module, [SiluWritten], check_profitability=False)

    with torch._inductor.config.patch(post_grad_custom_pre_pass=post_grad):
        with pytest.raises(Exception, match="both a fallback and a decomp for same op: "
                                            "aten.silu.default"):
            torch.compile(SiluModel(), dynamic=False)(x)
    torch._dynamo.reset()
    p = pm.inductor_pass([SiluWritten], check_profitability=False)
    with p.install(), torch.no_grad():
        got = torch.compile(SiluModel(), dynamic=False)(x)
    assert p.firings == {"silu": 1}
    assert _close(got, want)


def test_inductor_cache_keys_on_the_pass():
    """A second compile with an equal pass is served by Inductor's cache
    without running the pass (it runs after the lookup); with
    ``pre_grad_pass_timing="early"`` it runs on every compile."""
    x = torch.randn(8, 16)
    passes = [pm.inductor_pass([SiluWritten], check_profitability=False) for _ in range(3)]
    assert len({p.uuid() for p in passes}) == 1
    for p, timing in zip(passes, ("default", "default", "early")):
        torch._dynamo.reset()
        with torch.no_grad():
            torch.compile(SiluModel(), dynamic=False, options={
                "pre_grad_custom_pass": p, "pre_grad_pass_timing": timing})(x)
    assert [p.firings for p in passes] == [{"silu": 1}, {}, {"silu": 1}]


def test_inference_fires_inference_only_rules():
    torch.manual_seed(0)
    model = Attention().eval()
    x = torch.randn(2, 4, 16)
    p = pm.inductor_pass(check_profitability=False)
    with torch.no_grad():
        got = torch.compile(model, backend=_aot_eager(p), dynamic=False)(x)
        want = model(x)
    assert p.firings == {"sdpa": 1, "linear_act": 1}
    assert _close(got, want)
    assert "training" not in p.records[0].note


def test_dynamic_shapes_rewritten():
    """A graph with symbolic sizes is rewritten, not passed through, and the
    compiled program serves other sizes."""
    torch.manual_seed(0)
    model = Attention()
    p = pm.inductor_pass(check_profitability=False)
    graphs = []
    compiled = torch.compile(model, backend=_aot_eager(p, graphs), dynamic=True)
    for seq in (4, 6):
        x = torch.randn(2, seq, 16, requires_grad=True)
        got = _grads(compiled, x)
        want = _grads(model, x)
        for g, w in zip(got, want):
            assert _close(g, w)
    assert [r.status for r in p.records] == ["rewritten"]
    assert p.firings == {"sdpa": 1}
    assert any(SDPA_BWD in g for g in graphs)


def test_training_declines_rules_not_known_differentiable():
    x = torch.randn(8, 16, requires_grad=True)
    p = pm.inductor_pass([SiluWritten], check_profitability=False)
    out = torch.compile(SiluModel(), backend=_aot_eager(p), dynamic=False)(x)
    assert p.firings == {}
    assert p.records[0].status == "unchanged"
    (reason,) = p.reports[0].declines["SiluWritten"]["silu"]
    assert "not known to be differentiable" in reason and "differentiable={'silu': True}" \
        in reason
    out.sum().backward()
    torch._dynamo.reset()
    # stated differentiable: it fires, and aten.silu's backward is derived
    p = pm.inductor_pass([SiluWritten], check_profitability=False,
                         differentiable={"silu": True})
    graphs = []
    x2 = x.detach().clone().requires_grad_()
    torch.compile(SiluModel(), backend=_aot_eager(p, graphs), dynamic=False)(x2).sum().backward()
    assert p.firings == {"silu": 1}
    assert any("aten.silu_backward.default" in g for g in graphs)
    assert _close(x2.grad, _grads(SiluModel(), x.detach().clone().requires_grad_())[0])


def test_graph_without_firing_is_left_as_captured():
    p = pm.inductor_pass(check_profitability=False)
    seen = []

    def backend(gm, example_inputs):
        before = gm.code
        p(gm.graph)
        seen.append(gm.code == before)
        return gm.forward
    torch.compile(lambda x: torch.tanh(x) + 1, backend=backend)(torch.randn(4))
    assert seen == [True]
    assert p.records[0].status == "unchanged"


def test_failure_passes_the_graph_through_with_a_warning(monkeypatch):
    from pypm_verified.torch import inductor
    from pypm_verified.torch.backend import PassThroughWarning

    def broken(gm, vals):
        raise RuntimeError("cannot trace this")
    monkeypatch.setattr(inductor, "_trace_aten", broken)
    p = pm.inductor_pass(check_profitability=False)
    x = torch.randn(2, 4, 16)
    model = Attention().eval()
    with torch.no_grad(), pytest.warns(PassThroughWarning, match="cannot trace this"):
        got = torch.compile(model, backend=_aot_eager(p), dynamic=False)(x)
        want = model(x)
    assert p.records[0].status == "passed through"
    assert p.records[0].note == "rewrite failed (RuntimeError: cannot trace this)"
    assert p.firings == {} and p.reports == []
    assert _close(got, want)


def test_uuid_keys_on_rules_table_and_options():
    a = pm.inductor_pass()
    assert isinstance(a.uuid(), str) and a.uuid() == pm.inductor_pass().uuid()
    assert pm.inductor_pass([SiluWritten]).uuid() != a.uuid()
    assert pm.inductor_pass(check_profitability=False).uuid() != a.uuid()
    assert pm.inductor_pass(skip=()).uuid() != a.uuid()
    assert pm.inductor_pass(differentiable={"linear_act": True}).uuid() != a.uuid()
    from pypm_verified.torch import profitability
    before = a.uuid()
    with profitability.use_table({**profitability.table(), "doc": "another table"}):
        assert a.uuid() != before
    assert a.uuid() == before
    from torch._inductor.custom_graph_pass import CustomGraphPass
    assert isinstance(a, CustomGraphPass)


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown target 'tpu'"):
        pm.inductor_pass(target="tpu")
    with pytest.raises(ValueError, match="unknown rule name"):
        pm.inductor_pass(skip=["nope"])
    with pytest.raises(TypeError, match=r"differentiable\['sdpa'\] must be a bool"):
        pm.inductor_pass(differentiable={"sdpa": "yes"})
    with pytest.raises(TypeError, match="rules must be"):
        pm.inductor_pass(rules=3)


def test_differentiable_table_covers_the_library():
    from pypm_verified.library import default_patterns
    names = {r.name for p in default_patterns() for r in p.rules}
    assert names == set(DIFFERENTIABLE)
    assert DIFFERENTIABLE["linear_act"] is False and DIFFERENTIABLE["sdpa"] is True


def test_import_stays_torch_free():
    code = ("import sys, pypm_verified as pm; assert callable(pm.inductor_pass); "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
    assert isinstance(pm.inductor_pass(), InductorPass)


def test_config_snapshot_shares_the_pass():
    """torch.compile deep-copies Inductor's config: the pass is shared, even
    when its patterns hold the engine's cffi handles (cached on a pattern
    once it was matched in the process, which no deep copy can copy), and
    the records it keeps are the user's."""
    import copy
    p = pm.inductor_pass(check_profitability=False)
    g = pm.Graph()
    pm.match(p.patterns[0], g.input("x"), engine="verified")  # caches the handle
    with pytest.raises(TypeError, match="cannot pickle"):
        copy.deepcopy(p.patterns[0])
    assert copy.deepcopy(p) is p
    with p.install():
        torch.compile(Attention().eval(), dynamic=False)  # snapshots the config


def test_a_graph_that_writes_in_place_passes_through():
    """A captured function that writes an intermediate in place traces (to
    ATen, not functionalized) to a graph the driver refuses: the pass leaves
    it as captured, says why, and the compiled function computes what eager
    does (the import's sharing of the two zeros made it wrong before)."""
    p = pm.inductor_pass([SiluWritten], check_profitability=False)
    f = writes_in_place

    def backend(gm, example_inputs):
        p(gm.graph)
        gm.recompile()
        return gm.forward
    x = torch.ones(3)
    with torch.no_grad(), pytest.warns(Warning, match="writes a tensor in place"):
        got = torch.compile(f, backend=backend)(x)
    for g, w in zip(got, f(x)):
        assert torch.equal(g, w)
    assert p.records[0].status == "passed through"
    assert "writes a tensor in place" in p.records[0].note
