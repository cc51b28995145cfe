"""Dynamic shapes: programs exported with a symbolic batch and
sequence are rewritten soundly and stay dynamic.

* BERT, GPT-2 and LLaMA exported with ``dynamic_shapes`` have every
  attention block fused (the engine matches on the sizes' example values,
  the driver re-decides each match for every admissible size) and the
  rewritten programs, saved and loaded back, accept other batch and
  sequence sizes with the original's outputs;
* a guard or a rule assert on a symbolic fact that the shape environment
  does not decide (``seq == 16`` with a dynamic seq whose example is 16)
  does not fire; one it decides (``seq >= 2`` with ``min=2``, equal sizes
  from one ``Dim``) does;
* guard arithmetic is decided over the symbols' ranges (``rows * cols <=
  4096`` with both at most 64 fires, ``<= 256`` does not);
* a rule that builds a shape from ``x.shape`` gets SymInts and its
  replacement computes them (no example size baked in);
* a static program has no shape environment (the static path).

Skipped when torch/transformers are missing."""
import json
import os
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from torch.export import Dim  # noqa: E402

import pypm_verified as pm  # noqa: E402
from pypm_verified import cli  # noqa: E402
from pypm_verified.library import default_patterns  # noqa: E402
from pypm_verified.torch import dynamic  # noqa: E402
from pypm_verified.torch.loader import load_model  # noqa: E402
from pypm_verified.torch.ops import Relu, View  # noqa: E402
from pypm_verified.torch.pipeline import rewrite_program, save_atomic  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import models  # noqa: E402

SDPA = torch.ops.aten.scaled_dot_product_attention.default
OTHER = ((3, 9), (1, 23))  # (batch, seq) other than the example's (2, 16)


@pytest.fixture(autouse=True)
def _inductor_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "ind"))


@pytest.fixture(scope="module")
def exported():
    """name -> (dynamic ExportedProgram, example kwargs), exported once."""
    cache = {}

    def get(name):
        if name not in cache:
            _, inputs = models.build(name, "small")
            cache[name] = (models.export_dynamic(name, "small"), models.input_kwargs(inputs))
        return cache[name]
    return get


def inputs_of(kwargs, batch, seq, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, models.VOCAB, (batch, seq), generator=g)
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[0, seq - seq // 3:] = 0  # padding: the mask matters
    return {"input_ids": ids, "attention_mask": mask}


def max_error(ep_a, ep_b, batch, seq):
    k = inputs_of(None, batch, seq, seed=batch * 100 + seq)
    with torch.no_grad():
        a, b = ep_a.module()(**k), ep_b.module()(**k)
    leaves = [t for t in torch.utils._pytree.tree_leaves(a) if isinstance(t, torch.Tensor)]
    got = [t for t in torch.utils._pytree.tree_leaves(b) if isinstance(t, torch.Tensor)]
    assert [t.shape for t in leaves] == [t.shape for t in got]
    assert leaves[0].shape[:2] == (batch, seq)
    return max(float((x - y).abs().max()) for x, y in zip(leaves, got))


def sdpa_count(ep):
    return sum(1 for n in ep.graph.nodes if n.target is SDPA)


def symbolic_inputs(ep):
    return [n for n in ep.graph.nodes if n.op == "placeholder"
            and n.name in ("input_ids", "attention_mask")
            and all(dynamic.is_symbolic(d) for d in n.meta["val"].shape)]


# --------------------------------------------------------------- the models

@pytest.mark.parametrize("name", ["bert", "gpt2", "llama"])
def test_dynamic_model_attention_fused_and_sizes_kept(exported, name, lib, tmp_path):
    ep, kw = exported(name)
    assert len(symbolic_inputs(ep)) == 2  # batch and sequence are symbolic
    prog = load_model(ep, (), kw)
    r = rewrite_program(prog, target="cuda", n_random=0)
    layers = models.layers("small")
    assert r.report.firings.get("sdpa") == layers  # every attention block fused
    assert sdpa_count(r.ep) == layers
    assert r.report.matches["Attention"] == layers
    # the numerics ran at the example sizes and at two other sizes
    assert r.numerics.ok and r.numerics.runs == 1 + 2, r.numerics
    assert len(r.other_sizes) == 2
    # the SDPA nodes keep the symbolic batch and sequence
    for n in r.ep.graph.nodes:
        if n.target is SDPA:
            b, h, s, d = n.meta["val"].shape
            assert dynamic.is_symbolic(b) and dynamic.is_symbolic(s)
    # saved and loaded back, it runs at other sizes with the original's outputs
    path = tmp_path / f"{name}.fast.pt2"
    save_atomic(r.ep, str(path))
    back = pm.load(str(path))
    assert sdpa_count(back) == layers
    for batch, seq in OTHER:
        assert max_error(ep, back, batch, seq) < 1e-4


def test_dynamic_bert_cli(exported, lib, tmp_path, capsys):
    ep, _ = exported("bert")
    src, out, rep = tmp_path / "bert_dyn.pt2", tmp_path / "o.pt2", tmp_path / "r.json"
    torch.export.save(ep, str(src))
    code = cli.main(["rewrite", str(src), "-o", str(out), "--target", "cuda", "--report",
                     str(rep), "--random-runs", "0"])
    stdout = capsys.readouterr().out
    assert code == 0, stdout
    report = json.loads(rep.read_text())
    assert report["firings"]["sdpa"] == models.layers("small")
    assert report["numerics"]["ok"] and report["numerics"]["runs"] == 1 + 2
    assert len(report["dynamic_sizes_checked"]) == 2
    assert "dynamic sizes checked" in stdout
    back = pm.load(str(out))
    assert sdpa_count(back) == models.layers("small")
    for batch, seq in OTHER:
        assert max_error(ep, back, batch, seq) < 1e-4


# ------------------------------------------------------------- soundness

class Relu2(torch.nn.Module):
    def forward(self, x):
        return torch.relu(torch.relu(x))


@pm.pattern
def SeqIs16(x):
    """A guard on a size: true for the example (16), unknown for a dynamic seq."""
    assert x.shape[1] == 16
    return Relu(Relu(x))


@pm.rule(SeqIs16)
def drop_relu_16(x):
    return Relu(x)


@pm.pattern
def SeqAtLeast2(x):
    assert x.shape[1] >= 2  # Dim(min=2): true at every admissible size
    return Relu(Relu(x))


@pm.rule(SeqAtLeast2)
def drop_relu_ge2(x):
    return Relu(x)


@pm.pattern
def AnyRelu2(x):
    return Relu(Relu(x))


@pm.rule(AnyRelu2)
def drop_relu_assert16(x):
    assert x.shape[1] == 16  # in the rule body: decided symbolically too
    return Relu(x)


@pm.rule(AnyRelu2)
def reshape_from_shape(x):
    b, s = x.shape
    # builds a view from x's sizes: SymInts, so the replacement computes them
    return View(Relu(x), [b, s])


def export_relu2(square: bool = False, static: bool = False):
    """relu(relu(x)), x of example size (16, 16): static, or dynamic with
    two Dims (s0 >= 1, s1 >= 2), or with one Dim for both axes (square)."""
    x = torch.randn(16, 16)
    if static:
        return load_model(Relu2(), (x,))
    if square:
        d = Dim("d", min=2, max=64)
        return load_model(Relu2(), (x,), dynamic_shapes=({0: d, 1: d},))
    return load_model(Relu2(), (x,), dynamic_shapes=(
        {0: Dim("rows", min=1, max=64), 1: Dim("cols", min=2, max=64)},))


def run_other(prog, new_ep, sizes):
    for shape in sizes:
        x = torch.randn(*shape)
        with torch.no_grad():
            assert torch.equal(prog.ep.module()(x), new_ep.module()(x))


def test_unknown_size_guard_does_not_fire(lib):
    """x.shape[1] == 16 holds for the example but not for every size the
    program admits: the pattern matches on the example's sizes, the symbolic
    re-check refuses it and says why (both engines)."""
    prog = export_relu2()
    for engine in ("verified", "reference"):
        r = rewrite_program(prog, [SeqIs16], engine=engine, target="cuda")
        assert r.report.matches.get("SeqIs16") == 1 and r.report.firings == {}
        (reason,) = r.report.declines["SeqIs16"]["drop_relu_16"]
        assert "not statically known" in reason and "example sizes" in reason
    # on the static export of the same module it fires (the static path)
    r = rewrite_program(export_relu2(static=True), [SeqIs16], target="cuda")
    assert r.report.firings == {"drop_relu_16": 1}


def test_known_size_guard_fires(lib):
    """x.shape[1] >= 2 with Dim(min=2): true at every admissible size."""
    prog = export_relu2()
    r = rewrite_program(prog, [SeqAtLeast2], target="cuda")
    assert r.report.firings == {"drop_relu_ge2": 1} and r.numerics.ok
    assert len(r.other_sizes) == 2
    run_other(prog, r.ep, [(3, 5), (1, 40)])


def test_rule_assert_on_unknown_size_declines(lib):
    """The rule body reads x.shape[1] (a SymInt): ``== 16`` is not decided
    for every admissible size, so the rule declines (reported at its assert),
    and the next rule, which only uses the sizes to build, fires."""
    prog = export_relu2()
    r = rewrite_program(prog, [AnyRelu2], target="cuda")
    assert r.report.firings == {"reshape_from_shape": 1}
    assert r.numerics.ok and len(r.other_sizes) == 2
    # the view's sizes are computed by sym_size nodes, not baked in
    (view,) = [n for n in r.ep.graph.nodes if n.target is torch.ops.aten.view.default]
    assert all(isinstance(d, torch.fx.Node) for d in view.args[1])
    run_other(prog, r.ep, [(3, 5), (33, 7)])


def test_rule_assert_decline_reason(lib):
    prog = export_relu2()
    saved = list(AnyRelu2.rules)
    try:
        AnyRelu2.rules[:] = saved[:1]  # drop_relu_assert16 alone
        r = rewrite_program(prog, [AnyRelu2], target="cuda")
    finally:
        AnyRelu2.rules[:] = saved
    assert r.report.firings == {}
    (reason,) = r.report.declines["AnyRelu2"]["drop_relu_assert16"]
    assert "not statically known" in reason and "x.shape[1] == 16" in reason


@pm.pattern
def Square(x):
    """Equal sizes: statically equal when both axes share one Dim."""
    assert x.shape[0] == x.shape[1]
    return Relu(Relu(x))


@pm.rule(Square)
def drop_relu_square(x):
    return Relu(x)


def test_equality_of_symbols(lib):
    """x.shape[0] == x.shape[1]: true for the example (16, 16); statically
    true with one Dim for both axes, unknown with two Dims."""
    same = rewrite_program(export_relu2(square=True), [Square], target="cuda")
    assert same.report.firings == {"drop_relu_square": 1} and same.numerics.ok
    two = rewrite_program(export_relu2(), [Square], target="cuda")
    assert two.report.matches.get("Square") == 1 and two.report.firings == {}


@pm.pattern
def AreaAtMost4096(x):
    assert x.shape[0] * x.shape[1] <= 4096  # 64 * 64: true over the ranges
    return Relu(Relu(x))


@pm.rule(AreaAtMost4096)
def drop_relu_area(x):
    return Relu(x)


@pm.pattern
def AreaAtMost256(x):
    assert x.shape[0] * x.shape[1] <= 256  # 16 * 16 = 256 for the example only
    return Relu(Relu(x))


@pm.rule(AreaAtMost256)
def drop_relu_area256(x):
    return Relu(x)


def test_arithmetic_guards_over_ranges(lib):
    """Guard arithmetic is decided over the symbols' ranges (rows, cols in
    1..64 and 2..64): the product is at most 4096 at every size, but at most
    256 only at some (the example's included)."""
    prog = export_relu2()
    r = rewrite_program(prog, [AreaAtMost4096, AreaAtMost256], target="cuda")
    assert r.report.firings == {"drop_relu_area": 1}
    r = rewrite_program(prog, [AreaAtMost256], target="cuda")
    assert r.report.matches == {"AreaAtMost256": 1} and r.report.firings == {}


def test_static_program_has_no_shape_env(lib):
    """The static path: no shape environment, sizes as before (ints)."""
    from pypm_verified.torch.driver import Driver
    prog = export_relu2(static=True)
    d = Driver(prog.ep.graph_module, [SeqIs16], target="cuda")
    assert d.shape_env is None
    d.prepare()
    x = next(n for n in prog.ep.graph.nodes if n.op == "placeholder")
    assert d.value(x).shape == (16, 16) and not d.tg.size_hints
