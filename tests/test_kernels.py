"""pypm::linear_act (numerics of every implementation path, torch.export,
save/load in a fresh process, idempotent registration) and the
profitability table behind the rules' device-aware guards."""
import importlib
import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import pypm_verified as pm  # noqa: E402
from pypm_verified.torch import kernels, profitability  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PYDIR = str(Path(kernels.__file__).resolve().parents[2])  # python/

_ACT64 = {"relu": torch.relu, "gelu": F.gelu,
          "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "silu": F.silu,
          "none": lambda t: t}

CPU_DTYPES = [torch.float32, torch.bfloat16, torch.float64]
SHAPES = [(5, 64), (2, 7, 64)]


def _args(shape, dtype, bias, device="cpu", seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g)
    w = torch.randn(48, shape[-1], generator=g) / math.sqrt(shape[-1])
    b = torch.randn(48, generator=g) if bias else None
    cast = lambda t: None if t is None else t.to(dtype=dtype, device=device)  # noqa: E731
    return cast(x), cast(w), cast(b)


def _expected(x, w, b, act):
    """act(x @ w.T + b) in float64 from the very same (rounded) inputs."""
    return _ACT64[act](F.linear(x.double(), w.double(), None if b is None else b.double()))


def _tol(dtype):
    return {torch.float64: 1e-10, torch.float32: 1e-5,
            torch.bfloat16: 2e-2, torch.float16: 2e-3}[dtype]


@pytest.mark.parametrize("act", kernels.ACTS)
@pytest.mark.parametrize("dtype", CPU_DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_linear_act_cpu_numerics(act, dtype, shape, bias):
    x, w, b = _args(shape, dtype, bias)
    y = torch.ops.pypm.linear_act(x, w, b, act)
    assert y.shape == (*shape[:-1], 48) and y.dtype == dtype
    want = _expected(x, w, b, act)
    tol = _tol(dtype)
    torch.testing.assert_close(y.double(), want, atol=tol, rtol=tol)
    if act == "relu":
        assert (y >= 0).all() and (y == 0).any()  # the activation really ran


def test_float32_takes_the_onednn_path():
    x, w, b = _args((4, 64), torch.float32, True)
    if not torch.backends.mkldnn.is_available():
        pytest.skip("torch built without oneDNN")
    assert kernels.mkldnn_supports(x, w, b)
    assert not kernels.mkldnn_supports(x.double(), w.double(), b.double())
    assert not kernels.mkldnn_supports(x, w, b.double())  # mixed dtypes fall back


def test_non_contiguous_input():
    x, w, b = _args((7, 2, 64), torch.float32, True)
    xt = x.transpose(0, 1)
    torch.testing.assert_close(torch.ops.pypm.linear_act(xt, w, b, "gelu").double(),
                               _expected(xt, w, b, "gelu"), atol=1e-5, rtol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("act", kernels.ACTS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_linear_act_cuda_numerics(act, dtype, bias):
    x, w, b = _args((2, 7, 64), dtype, bias, device="cuda")
    y = torch.ops.pypm.linear_act(x, w, b, act)
    assert y.shape == (2, 7, 48) and y.dtype == dtype and y.is_cuda
    tol = 2e-2 if dtype == torch.bfloat16 else 5e-3
    torch.testing.assert_close(y.double(), _expected(x, w, b, act), atol=tol, rtol=tol)


@pytest.mark.parametrize("act", ["tanh", "GELU", "", "swish"])
def test_bad_act_is_a_clear_error(act):
    x, w, b = _args((3, 64), torch.float32, True)
    with pytest.raises(ValueError, match="unknown activation .*expected one of relu, gelu"):
        torch.ops.pypm.linear_act(x, w, b, act)
    with pytest.raises(ValueError, match="unknown activation"):
        kernels.reference(x, w, b, act)


class _MLP(torch.nn.Module):
    def __init__(self, act="gelu", bias=True):
        super().__init__()
        self.fc = torch.nn.Linear(64, 48, bias=bias)
        self.act = act

    def forward(self, x):
        return torch.ops.pypm.linear_act(x, self.fc.weight, self.fc.bias, self.act) * 2.0


def _export(act="gelu", bias=True, dynamic=False):
    torch.manual_seed(0)
    m = _MLP(act, bias).eval()
    x = torch.randn(2, 7, 64)
    ds = ({"x": {0: torch.export.Dim("batch", max=64), 1: torch.export.Dim("seq", max=4096)}}
          if dynamic else None)
    return m, torch.export.export(m, (x,), dynamic_shapes=ds)


def _op_nodes(ep):
    return [n for n in ep.graph.nodes if n.target is torch.ops.pypm.linear_act.default]


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_export_uses_the_fake_impl(bias):
    m, ep = _export(bias=bias, dynamic=True)
    (node,) = _op_nodes(ep)
    val = node.meta["val"]
    assert isinstance(val, torch._subclasses.FakeTensor)
    assert val.shape[-1] == 48 and val.dim() == 3 and val.dtype == torch.float32
    x = torch.randn(3, 11, 64)  # other sizes than traced: the shapes are symbolic
    torch.testing.assert_close(ep.module()(x), m(x))


def test_export_rejects_bad_act_at_trace_time():
    with pytest.raises(Exception, match="unknown activation"):
        _export(act="tanh")


def _run_fresh(code, tmp_path):
    env = dict(os.environ, PYTHONPATH=PYDIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)


def test_save_load_round_trip_in_a_fresh_process(tmp_path):
    m, ep = _export(dynamic=True)
    path = tmp_path / "prog.pt2"
    torch.export.save(ep, path)
    x = torch.randn(4, 5, 64)
    torch.save({"x": x, "y": m(x).detach()}, tmp_path / "io.pt")
    code = (
        "import torch, pypm_verified.torch.kernels\n"
        "ep = torch.export.load('prog.pt2')\n"
        "io = torch.load('io.pt')\n"
        "n = sum(n.target is torch.ops.pypm.linear_act.default for n in ep.graph.nodes)\n"
        "y = ep.module()(io['x'])\n"
        "torch.testing.assert_close(y, io['y'])\n"
        "print('OK', n)\n")
    r = _run_fresh(code, tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["OK", "1"]


def test_loading_without_the_import_fails_clearly(tmp_path):
    """The documented requirement: the op must be registered before loading."""
    _, ep = _export()
    torch.export.save(ep, tmp_path / "prog.pt2")
    r = _run_fresh("import torch\ntorch.export.load('prog.pt2')\n", tmp_path)
    assert r.returncode != 0
    assert "pypm.linear_act" in r.stderr


def test_import_is_idempotent():
    importlib.reload(kernels)
    # and under a second module name (e.g. another checkout on sys.path)
    spec = importlib.util.spec_from_file_location("pypm_kernels_copy", kernels.__file__)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    x, w, b = _args((3, 64), torch.float32, True)
    torch.testing.assert_close(mod.linear_act(x, w, b, "relu"),
                               torch.ops.pypm.linear_act(x, w, b, "relu"))


# -- profitability ------------------------------------------------------------


def _entries():
    data = json.loads(profitability.TABLE_PATH.read_text())
    for rule, per_target in data["table"].items():
        for target, entry in per_target.items():
            for dt, per_var in entry["thresholds"].items():
                for variant, t in per_var.items():
                    yield rule, target, entry["size"], dt, variant, t


def test_table_covers_every_rule_target_and_variant():
    data = profitability.table()
    for rule, (variants, size) in profitability.RULES.items():
        for target in profitability.TARGETS:
            entry = data["table"][rule][target]
            assert entry["size"] == size and entry["source"]
            for dt, per_var in entry["thresholds"].items():
                assert set(per_var) == set(variants), (rule, target, dt)
    for rule in profitability.RULES:
        assert data["table"][rule]["cuda"]["source"].startswith("default pending GPU")


def test_profitable_agrees_with_the_json():
    n = 0
    for rule, target, size, dt, variant, t in _entries():
        ask = lambda s: profitability.profitable(rule, target, dtype=dt, variant=variant,  # noqa
                                                 **{size: s})
        if t is None:
            assert not ask(10 ** 9), (rule, target, dt, variant)
        else:
            assert ask(t) and ask(10 ** 9), (rule, target, dt, variant)
            assert t == 1 or not ask(t - 1), (rule, target, dt, variant)
        n += 1
    assert n >= 40


def test_profitable_conservative_answers():
    p = profitability.profitable
    assert not p("attention", "cpu", dtype=torch.float32, variant="causal")  # size missing
    assert not p("attention", "cpu", dtype=torch.float32, variant="causal", seq=None)
    assert not p("attention", "cpu", dtype=torch.float32, variant="nope", seq=10 ** 6)
    assert not p("attention", "cpu", dtype=torch.int64, variant="causal", seq=10 ** 6)
    with pytest.raises(KeyError, match="unknown rule"):
        p("flash", "cpu", dtype=torch.float32, seq=1)
    with pytest.raises(ValueError, match="unknown target"):
        p("attention", "tpu", dtype=torch.float32, variant="causal", seq=1)


def test_profitable_dtype_spellings_agree():
    for rule, target, size, dt, variant, t in _entries():
        if dt != "float32":
            continue
        s = {size: 10 ** 9}
        answers = {profitability.profitable(rule, target, dtype=d, variant=variant, **s)
                   for d in (torch.float32, "float32", "f32", pm.f32)}
        assert len(answers) == 1


def test_thresholds_from_rows():
    rows = [{"rule": "attention", "dtype": "float32", "variant": "mask",
             "sizes": {"seq": s, "batch": b}, "ratio": r}
            for s, b, r in [(32, 1, 1.2), (128, 1, 0.9), (128, 8, 1.3), (512, 1, 1.1),
                            (512, 8, 1.4), (1024, 1, 2.0)]]
    rows += [{"rule": "gelu", "dtype": "float32", "variant": "erf",
              "sizes": {"numel": 10}, "ratio": 1.01}]
    # a fast median whose best sample is not faster does not count
    rows += [{"rule": "gelu", "dtype": "float32", "variant": "tanh",
              "sizes": {"numel": n}, "ratio": 3.0, "ratio_min": rm}
             for n, rm in [(10, 1.5), (100, 0.9)]]
    got = profitability.thresholds_from_rows(rows, 1.05)
    assert got == {"attention": {"float32": {"mask": 512}},
                   "gelu": {"float32": {"erf": None, "tanh": None}}}


def test_write_table_replaces_only_the_measured_target(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(profitability.TABLE_PATH.read_text())
    # gelu: no variant calibrated on whole models (those are kept: test_profitability.py)
    rows = [{"rule": "gelu", "dtype": "float32", "variant": "erf",
             "sizes": {"numel": n}, "ratio": r} for n, r in [(10, 0.5), (100, 1.5)]]
    meta = {"device": "cpu", "machine": "test", "threads": 1, "torch": "x", "when": "now"}
    try:
        profitability.write_table(rows, meta, path=path)
        data = json.loads(path.read_text())
        assert data["table"]["gelu"]["cpu"]["thresholds"] == {"float32": {"erf": 100}}
        before = profitability.table(reload=True)
        assert data["table"]["gelu"]["cuda"] == before["table"]["gelu"]["cuda"]
        assert data["table"]["attention"] == before["table"]["attention"]
    finally:
        profitability.table(reload=True)


def test_cpu_table_is_derived_from_the_committed_measurements():
    """profitability.json's cpu thresholds not calibrated on whole models are
    exactly what --write-table derives from the kernel results file the entry
    names (``kernel_results`` once calibrated; the calibrated ones:
    tests/test_profitability.py)."""
    tab = profitability.table()
    for rule in profitability.RULES:
        entry = tab["table"][rule]["cpu"]
        kernel = entry.get("kernel_results", entry["results"])
        res = ROOT / kernel
        assert res.exists(), f"{rule}: {kernel} is not committed"
        data = json.loads(res.read_text())
        assert data["meta"]["device"] == "cpu"
        derived = profitability.thresholds_from_rows(data["rows"], tab["min_ratio"])[rule]
        for dt, variants in entry.get("calibrated", {}).items():
            for v in variants:
                derived[dt][v] = entry["thresholds"][dt][v]
        assert entry["thresholds"] == derived, rule
