"""``pm.partition`` and the legality of fusion (torch/partition.py,
torch/legality.py), on small modules and the example models, both engines;
the partitioning cases of TVM's test_dataflow_pattern.py that translate
(``test_partition_overused``, ``test_matched_outside_but_dominated``,
``test_partition_option``, ``test_double_partition``,
``test_partition_check``, ``test_partition_dominator``). Submodules are
compiled with the "eager" backend here (Inductor's compile time is
measured in bench/bench_partition.py) except in one test with a callable
backend."""
import os
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import pypm_verified as pm  # noqa: E402
from pypm_verified.torch import ops  # noqa: E402
from pypm_verified.torch.loader import load_model  # noqa: E402
from pypm_verified.torch.partition import outputs_agree  # noqa: E402
from pypm_verified.torch.pipeline import rewrite_program  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import models  # noqa: E402


@pytest.fixture(autouse=True)
def _inductor_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "ind"))


ENGINES = ("verified", "reference")


@pm.pattern
def ReluLinear(x, w, b):
    return ops.Relu(ops.Linear(x, w, b))


@pm.pattern
def LinearBiasMul(x, w):
    # Mul(Add(Linear(x, w, None), wildcard), wildcard): Relay's conv2d/add/multiply
    return ops.Mul(pm.commute(ops.Add(ops.Linear(x, w, None), pm.wildcard(), 1)),
                   pm.wildcard())


@pm.pattern
def LinearMaybeRelu(x, w, b):
    return pm.optional(ops.Linear(x, w, b), ops.Relu)


class Overused(nn.Module):       # relu(linear) + linear: the linear is used outside
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        y = self.lin(x)
        return torch.relu(y) + y


class Dominated(nn.Module):      # a = linear + bias; a * sigmoid(a)
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 8))
        self.b = nn.Parameter(torch.randn(8))

    def forward(self, x):
        a = F.linear(x, self.w) + self.b
        return a * torch.sigmoid(a)


class TwoLayers(nn.Module):      # relu(linear) then linear
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = nn.Linear(8, 8), nn.Linear(8, 4)

    def forward(self, x):
        return self.l2(torch.relu(self.l1(x)))


def _x():
    return (torch.randn(3, 8),)


def _check(part, module, inputs, tmp_path):
    with torch.no_grad():
        ref = module(*inputs)
        assert outputs_agree(ref, part(*inputs))
        path = str(tmp_path / "p.pypm.pt")
        part.save(path)
        again = pm.load_partitioned(path, backend="eager")
        assert [s.name for s in again.submodules] == [s.name for s in part.submodules]
        assert outputs_agree(ref, again(*inputs))


@pytest.mark.parametrize("engine", ENGINES)
def test_partition_overused(engine, tmp_path):
    m = Overused().eval()
    part = pm.partition(m, [ReluLinear], backend="eager", example_inputs=_x(), engine=engine)
    assert part.submodules == []
    (pat, root, why), = part.refused
    assert pat == "ReluLinear" and "used by" in why and "interior='relay'" in why
    refuse = pm.partition(m, [ReluLinear], backend="eager", example_inputs=_x(),
                          engine=engine, interior="refuse")
    assert refuse.submodules == [] and "interior='refuse'" in refuse.refused[0][2]
    dup = pm.partition(m, [ReluLinear], backend="eager", example_inputs=_x(), engine=engine,
                       interior="duplicate")
    s, = dup.submodules
    assert s.name == "pm0_ReluLinear" and s.patterns == ["ReluLinear"]
    _check(dup, m, _x(), tmp_path)


@pytest.mark.parametrize("engine", ENGINES)
def test_matched_outside_but_dominated(engine, tmp_path):
    m = Dominated().eval()
    absorb = pm.partition(m, [LinearBiasMul], backend="eager", example_inputs=_x(),
                          engine=engine)
    s, = absorb.submodules
    # the sigmoid only feeds the root: taken into the region, nothing computed twice
    assert s.duplicated == [] and any("sigmoid" in n for n in s.nodes)
    _check(absorb, m, _x(), tmp_path)
    dup = pm.partition(m, [LinearBiasMul], backend="eager", example_inputs=_x(),
                       engine=engine, dominated="duplicate")
    s, = dup.submodules
    # Relay's answer: the add (and the linear below it) copied for the sigmoid
    assert not any("sigmoid" in n for n in s.nodes) and len(s.duplicated) == 2
    _check(dup, m, _x(), tmp_path)


@pytest.mark.parametrize("engine", ENGINES)
def test_partition_option_and_double_partition(engine, tmp_path):
    m = TwoLayers().eval()
    part = pm.partition(m, [LinearMaybeRelu], backend="eager", example_inputs=_x(),
                        engine=engine)
    # walking back from the output: linear_1 alone, then relu(linear) with its option
    assert [len(s.nodes) for s in part.submodules] == [2, 1]
    _check(part, m, _x(), tmp_path)
    both = pm.partition(m, [ReluLinear, LinearMaybeRelu], backend="eager",
                        example_inputs=_x(), engine=engine)
    assert [s.patterns for s in both.submodules] == [["ReluLinear"], ["LinearMaybeRelu"]]
    grouped = pm.partition(m, [ReluLinear, LinearMaybeRelu], backend="eager",
                           example_inputs=_x(), engine=engine, group="connected")
    s, = grouped.submodules
    assert s.name == "pm0_ReluLinear_LinearMaybeRelu" and len(s.nodes) == 3
    _check(grouped, m, _x(), tmp_path)


@pm.pattern
def ReluLinerIn8(x, w, b):
    assert x.shape[-1] == 8    # Relay's partition check=: a guard
    return ops.Relu(ops.Linear(x, w, b))


def test_partition_check_is_a_guard():
    m = TwoLayers().eval()
    assert len(pm.partition(m, [ReluLinerIn8], backend="eager",
                            example_inputs=_x()).submodules) == 1

    class Wider(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = nn.Linear(6, 8)

        def forward(self, x):
            return torch.relu(self.l1(x))
    assert pm.partition(Wider().eval(), [ReluLinerIn8], backend="eager",
                        example_inputs=(torch.randn(2, 6),)).submodules == []


@pm.pattern
def Producer(x, w, b):
    return ops.Linear(x, w, b)


@pm.pattern
def Pointwise(y):
    F_ = pm.Op(1, 1)
    assert F_.op_class == pm.opclass(ops.UNARY)
    return F_(pm.wildcard())


@pm.pattern
def Sum2(a):
    return ops.Add(pm.wildcard(), pm.wildcard(), pm.wildcard())


class Diamond(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        y = self.lin(x)
        return torch.relu(torch.relu(y)) + torch.tanh(y)


def test_partition_dominator(tmp_path):
    m = Diamond().eval()
    part = pm.partition(m, [pm.dominates(Producer, Pointwise, Sum2)], backend="eager",
                        example_inputs=_x())
    s, = part.submodules
    assert len(s.nodes) == 5 and s.name.startswith("pm0_dominates")
    _check(part, m, _x(), tmp_path)


def test_callable_backend_and_errors():
    seen = []

    def backend(gm):
        seen.append(gm)
        return gm.forward
    m = TwoLayers().eval()
    part = pm.partition(m, [ReluLinear], backend=backend, example_inputs=_x())
    with torch.no_grad():
        xs = _x()
        assert outputs_agree(m(*xs), part(*xs))
    assert len(seen) == 1
    with pytest.raises(ValueError, match="interior policy"):
        pm.partition(m, [ReluLinear], example_inputs=_x(), interior="maybe")
    with pytest.raises(ValueError, match="needs example_inputs"):
        pm.partition(TwoLayers(), [ReluLinear])
    with pytest.raises(TypeError, match="@pm.pattern"):
        pm.partition(m, [ops.Relu], example_inputs=_x())


def test_partition_example_model(tmp_path):
    """The rule library's patterns on BERT: attention and linear+activation
    outlined, outputs agree, saved and reloaded."""
    ep = models.export("bert", "small", layers=1)
    _, inputs = models.build("bert", "small", layers=1)
    kw = models.input_kwargs(inputs)
    part = pm.partition(ep, backend="eager")
    names = [s.name for s in part.submodules]
    assert names == ["pm0_Attention", "pm1_LinearEpilog", "pm2_LinearEpilog"]
    with torch.no_grad():
        ref = ep.module()(**kw)
        assert outputs_agree(ref, part(**kw))
        path = str(tmp_path / "bert.pypm.pt")
        part.save(path)
        again = pm.load_partitioned(path, backend="eager")
        assert outputs_agree(ref, again(**kw))


# ------------------------------------------------------- the driver's check


@pm.pattern
def ReluLinearRule(x, w, b):
    return ops.Relu(ops.Linear(x, w, b))


@pm.rule(ReluLinearRule, interior="refuse")
def refuse_overused(x, w, b):
    return ops.Relu(ops.Linear(x, w, b))


@pm.pattern
def ReluLinearDup(x, w, b):
    return ops.Relu(ops.Linear(x, w, b))


@pm.rule(ReluLinearDup)   # the default policy: "duplicate"
def duplicate_overused(x, w, b):
    return ops.Relu(ops.Add(ops.Linear(x, w, b), 0.0, 1))


def test_driver_interior_policy():
    m = Overused().eval()
    prog = load_model(m, _x())
    r = rewrite_program(prog, [ReluLinearRule], check_profitability=False)
    assert r.report.firings == {}
    (reason, _), = r.report.declines["ReluLinearRule"]["refuse_overused"].items()
    assert "interior='refuse'" in reason
    r = rewrite_program(prog, [ReluLinearDup], check_profitability=False)
    assert r.report.firings == {"duplicate_overused": 1} and r.numerics.ok
    with pytest.raises(pm.PatternError, match="interior"):
        pm.rule(ReluLinearDup, interior="sometimes")


# ------------------------------------- attributes and multi-output operators


@pm.pattern
def SoftmaxLast(x):
    return ops.Softmax(x, pm.wildcard(), pm.wildcard()).has_attr(dim=-1)


@pm.pattern
def ReluSecondHalf(x):
    return ops.Relu(pm.getitem(ops.Split(x, 4, -1), 1))


class Softmaxes(nn.Module):
    def forward(self, x):
        return torch.softmax(x, -1) + torch.softmax(x, 0)


class Halves(nn.Module):
    def forward(self, x):
        a, b = x.split(4, -1)
        return torch.relu(b) * a


@pytest.mark.parametrize("engine", ENGINES)
def test_has_attr_and_getitem_in_a_program(engine, tmp_path):
    m = Softmaxes().eval()
    part = pm.partition(m, [SoftmaxLast], backend="eager", example_inputs=_x(), engine=engine)
    s, = part.submodules   # the softmax over dim -1 only
    assert len(s.nodes) == 1 and s.nodes[0] == "softmax"
    _check(part, m, _x(), tmp_path)
    h = Halves().eval()
    # the split's other output is used outside: refused, or the split copied
    assert pm.partition(h, [ReluSecondHalf], backend="eager", example_inputs=_x(),
                        engine=engine).submodules == []
    dup = pm.partition(h, [ReluSecondHalf], backend="eager", example_inputs=_x(),
                       engine=engine, interior="duplicate")
    s, = dup.submodules
    assert len(s.nodes) == 3 and s.duplicated == ["split"]
    _check(dup, h, _x(), tmp_path)


@pm.pattern
def MulAddAdd():
    return ops.Add(ops.Mul(pm.wildcard(), pm.wildcard()),
                   ops.Add(pm.wildcard(), pm.wildcard(), 1), 1)


class Parallel(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x, left, right):
        y = self.lin(x)
        return left * y + (y + right)


def test_partition_parallel_branch_with_same_input(tmp_path):
    m = Parallel().eval()
    inputs = (torch.randn(3, 8), torch.randn(3, 8), torch.randn(3, 8))
    part = pm.partition(m, [MulAddAdd], backend="eager", example_inputs=inputs)
    s, = part.submodules
    assert len(s.nodes) == 3 and len(s.inputs) == 3 == len(set(s.inputs))  # y passed once
    _check(part, m, inputs, tmp_path)


@pm.pattern
def FirstOfSplit(x):
    return pm.getitem(ops.Split(x, 4, -1), 0)


class TwoReads(nn.Module):       # test_overlappting_partitions: two reads of one output
    def forward(self, x):
        return x.split(4, -1)[0] + x.split(4, -1)[0].exp()


def test_overlapping_partitions():
    m = TwoReads().eval()
    part = pm.partition(m, [FirstOfSplit], backend="eager", example_inputs=_x())
    # Relay refuses (the two reads would put the batch norm in two partitions);
    # here the importer merges the equal reads, so there is one region
    s, = part.submodules
    assert len(s.nodes) == 2
    with torch.no_grad():
        xs = _x()
        assert outputs_agree(m(*xs), part(*xs))
