"""The matcher baselines of bench/bench_matchers.py (bench/baselines/): on small
1-layer BERT, GPT-2 and LLaMA each system performs exactly the expected
rewrites and the rewritten graph computes what the original does. These are
correctness tests only; nothing here is timed."""
import copy
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parent.parent
for p in (str(ROOT), str(ROOT / "bench")):
    if p not in sys.path:
        sys.path.insert(0, p)

from baselines import common as C  # noqa: E402
from baselines import fx_rewriter, inductor_rewriter, walk  # noqa: E402
from examples import models  # noqa: E402

MODELS = ["bert", "gpt2", "llama"]
SYSTEMS = ["handwritten", "fx", "inductor_pattern", "inductor_replacement"]


@pytest.fixture(scope="module")
def systems():
    return {
        "handwritten": walk.handwritten,
        "fx": fx_rewriter.FxRewriter(),
        "inductor_pattern": inductor_rewriter.InductorGraphPattern(),
        "inductor_replacement": inductor_rewriter.InductorReplacement(),
    }


_EXPORTS = {}


def exported(model):
    if model not in _EXPORTS:
        ep = models.export(model, "small", layers=1)
        flat = C.flat_inputs(ep)
        _EXPORTS[model] = ep, flat, C.run_graph(copy.deepcopy(ep.graph_module), flat)
    return _EXPORTS[model]


@pytest.mark.parametrize("system", SYSTEMS)
@pytest.mark.parametrize("model", MODELS)
def test_rewrites_and_numerics(model, system, systems):
    ep, flat, ref = exported(model)
    gm = copy.deepcopy(ep.graph_module)
    before = C.count_nodes(gm)
    systems[system](gm)
    assert C.count_rewrites(gm) == C.expected_rewrites(model, 1)
    assert C.count_nodes(gm) < before
    out = C.run_graph(gm, flat)
    assert C.equivalent(ref, out), C.max_abs_diff(ref, out)


@pytest.mark.parametrize("system", SYSTEMS)
def test_fixpoint_is_stable(system, systems):
    """A second run on the rewritten graph finds nothing more."""
    ep, flat, ref = exported("gpt2")
    gm = copy.deepcopy(ep.graph_module)
    systems[system](gm)
    first = C.count_rewrites(gm)
    systems[system](gm)
    assert C.count_rewrites(gm) == first


@pytest.mark.parametrize("system", SYSTEMS)
def test_softmax_over_another_axis_is_not_attention(system, systems):
    """The guard on the softmax axis: softmax over axis 2 must not become SDPA."""
    ep, _, _ = exported("bert")
    gm = copy.deepcopy(ep.graph_module)
    for n in gm.graph.nodes:
        if n.target == C.aten.softmax.int:
            n.args = (n.args[0], 2) + tuple(n.args[2:])
    systems[system](gm)
    assert C.count_rewrites(gm)["attention"] == 0
    assert C.count_rewrites(gm)["linear_act"] == 1  # the other rule still fires


def test_bare_walk_counts_roots():
    ep, _, _ = exported("bert")
    n = walk.bare_walk(ep.graph_module)
    assert n == sum(1 for x in ep.graph.nodes if x.op == "call_function" and x.target in walk.ROOTS)
    assert n > 0


def test_div_scaling_and_its_guard(systems):
    """``scores / c`` is the same rule with scale 1/c; the numbers agree."""
    ep, flat, ref = exported("bert")
    base = copy.deepcopy(ep.graph_module)
    for n in base.graph.nodes:
        if n.target == C.aten.mul.Tensor and n.args[1] == 0.25:  # head dim 16
            n.target = C.aten.div.Tensor
            n.args = (n.args[0], 4.0)
    for name in SYSTEMS:
        gm = copy.deepcopy(base)
        systems[name](gm)
        assert C.count_rewrites(gm)["attention"] == 1, name
        assert C.equivalent(ref, C.run_graph(gm, flat)), name
