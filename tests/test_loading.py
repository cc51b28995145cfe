"""Loading, rewriting and saving models as a user meets them:
the simplest modules, corrupt and truncated archives, loading outputs back
(``pm.load``), modes and side effects, file permissions and signals during
the save, and one-line export errors."""
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
import zipfile

import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402

import pypm_verified as pm  # noqa: E402
from conftest import line_of  # noqa: E402
from pypm_verified.dsl.rules import short_path  # noqa: E402
from pypm_verified.torch import kernels  # noqa: E402,F401
from pypm_verified.torch.check import compare  # noqa: E402
from pypm_verified.torch.loader import LoadError, load_model, load_rewritten  # noqa: E402
from pypm_verified.torch.pipeline import copy_program, rewrite_program, save_atomic  # noqa: E402

HERE = os.path.abspath(__file__)
ROOT = os.path.dirname(os.path.dirname(HERE))
PYDIR = os.path.join(ROOT, "python")
LINEAR_ACT = torch.ops.pypm.linear_act.default


def targets(ep):
    return [n.target for n in ep.graph.nodes if n.op == "call_function"]


def _child(code: str, *args, **kw):
    env = dict(os.environ, PYTHONPATH=PYDIR)
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _rezip(src, dst, fn):
    """A copy of the archive ``src`` with its model.json passed through
    ``fn`` (valid CRCs: the damage is in the content, not the checksums)."""
    with zipfile.ZipFile(src) as zi, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zo:
        for info in zi.infolist():
            data = zi.read(info.filename)
            if info.filename.endswith("models/model.json"):
                data = fn(data)
            zo.writestr(info.filename, data)


# ------------------------------------------------ 1. the simplest models

class InputArg(nn.Module):
    """forward's argument is named ``input`` (a Python builtin)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, input):
        return torch.relu(self.fc(input))


MODELS = {
    "sequential": lambda: nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)),
    "linear": lambda: nn.Linear(8, 4),
    "input_arg": InputArg,
}
FIRES = {"sequential": {"linear_act": 1}, "linear": {}, "input_arg": {"linear_act": 1}}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_simplest_models_rewrite(name):
    torch.manual_seed(0)
    m, x = MODELS[name]().eval(), torch.randn(4, 8)
    prog = load_model(m, (x,))
    # the failing case: a placeholder named after a builtin
    assert "input" in [n.name for n in prog.ep.graph.nodes if n.op == "placeholder"]
    cp = copy_program(prog.ep)
    assert [n.name for n in cp.graph.nodes] == [n.name for n in prog.ep.graph.nodes]
    r = rewrite_program(prog, target="cpu", engine="reference",
                        check_profitability=False)  # rules fire on tiny models
    assert r.report.firings == FIRES[name]
    assert (LINEAR_ACT in targets(r.ep)) == bool(FIRES[name])
    assert r.changed == bool(FIRES[name])
    assert r.numerics.ok and r.numerics.runs == 3
    with torch.no_grad():
        assert torch.allclose(r.ep.module()(x), m(x), atol=1e-5)


def test_pickled_sequential_rewrites_and_saves(tmp_path):
    torch.manual_seed(0)
    m, x = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).eval(), torch.randn(3, 8)
    pk = tmp_path / "seq.pt"
    torch.save({"model": m, "example_inputs": (x,)}, str(pk))
    prog = load_model(str(pk), allow_pickle=True)  # a pickled module: the opt-in
    assert prog.kind == "pickle" and prog.warnings == []
    r = rewrite_program(prog, target="cpu", engine="reference",
                        check_profitability=False)  # rules fire on tiny models
    assert r.report.firings == {"linear_act": 1} and r.numerics.ok
    out = tmp_path / "seq.fast.pt2"
    save_atomic(r.ep, str(out))
    with torch.no_grad():
        assert torch.allclose(pm.load(str(out)).module()(x), m(x), atol=1e-5)


# ------------------------------------------------ 4. corrupt inputs

@pytest.fixture
def saved(tmp_path):
    """A .pt2 whose first weight is 0..63, easy to find in the file."""
    m = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    with torch.no_grad():
        m[0].weight.copy_(torch.arange(64.0).reshape(8, 8))
    x = torch.randn(3, 8)
    path = tmp_path / "m.pt2"
    torch.export.save(torch.export.export(m, (x,)), str(path))
    return path, m[0].weight.detach().numpy().tobytes()


def test_corrupt_weights_are_refused(saved, tmp_path):
    path, weight = saved
    raw = path.read_bytes()
    i = raw.find(weight)
    assert i >= 0
    bad = tmp_path / "bad.pt2"
    bad.write_bytes(raw[:i + 16] + b"\xff" * 16 + raw[i + 32:])  # 16 bytes inside the weights
    for load in (load_model, load_rewritten, pm.load):
        with pytest.raises(LoadError, match=r"corrupt: member '[^']*weights/weight_0' is "
                                            r"damaged \(its CRC-32 does not match"):
            load(str(bad))
    assert load_model(str(path)).ep is not None  # the intact file loads


def test_truncated_archive(saved, tmp_path):
    path, _ = saved
    raw = path.read_bytes()
    for cut in (len(raw) // 2, len(raw) - 10):
        t = tmp_path / "trunc.pt2"
        t.write_bytes(raw[:cut])
        with pytest.raises(LoadError, match="truncated or corrupt") as e:
            load_model(str(t))
        assert "not a PyTorch file" not in str(e.value)
    junk = tmp_path / "junk.pt2"
    junk.write_bytes(b"hello, not a model")
    with pytest.raises(LoadError, match="not a PyTorch file"):
        load_model(str(junk))


def test_damaged_model_json_gives_the_real_reason(saved, tmp_path, capfd):
    path, _ = saved
    # valid JSON and valid CRCs; a node's output renamed to a tensor that is not there
    dmg = tmp_path / "dmg.pt2"
    _rezip(path, dmg, lambda d: d.replace(b'"name": "relu"', b'"name": "rxlu"', 1))
    with pytest.raises(LoadError) as e:
        load_model(str(dmg))
    msg = str(e.value)
    assert "KeyError: 'rxlu'" in msg and "damaged" in msg and "warnings above" not in msg
    assert "\n" not in msg
    # nothing was printed instead (torch logs the reason as a warning)
    assert "Traceback" not in capfd.readouterr().err
    # not JSON at all
    js = tmp_path / "js.pt2"
    _rezip(path, js, lambda d: d[: len(d) // 2])
    with pytest.raises(LoadError, match=r"models/model.json\) is damaged: not valid JSON"):
        load_model(str(js))
    # an aten operator this torch does not have
    op = tmp_path / "op.pt2"
    _rezip(path, op, lambda d: d.replace(b"aten.relu.default", b"aten.rxlu.default"))
    with pytest.raises(LoadError, match=r"torch.ops.aten.rxlu.default, which this torch .* "
                                        "does not have"):
        load_model(str(op))


# ------------------------------------------------ 5. loading outputs: pm.load

def _tiny_bert():
    import transformers as T
    cfg = T.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1,
                       num_attention_heads=2, intermediate_size=32,
                       max_position_embeddings=16, attn_implementation="eager")
    torch.manual_seed(0)
    return T.BertModel(cfg).eval(), (torch.randint(0, 50, (1, 8)),)


def test_pm_load_in_a_fresh_process(tmp_path):
    pytest.importorskip("transformers")
    m, args = _tiny_bert()
    prog = load_model(m, args)
    r = rewrite_program(prog, target="cpu", engine="reference",
                        check_profitability=False)  # rules fire on tiny models
    assert r.report.firings.get("linear_act") and r.numerics.ok
    assert LINEAR_ACT in targets(r.ep)
    out, want = tmp_path / "bert.fast.pt2", tmp_path / "want.pt"
    save_atomic(r.ep, str(out))
    with torch.no_grad():
        torch.save(r.ep.module()(*args).last_hidden_state, str(want))
    p = _child("""
        import sys
        import pypm_verified as pm
        assert "torch" not in sys.modules, "import pypm_verified imported torch"
        ep = pm.load(sys.argv[1])
        assert "transformers.modeling_outputs" in sys.modules
        args, kwargs = ep.example_inputs
        out = ep.module()(*args, **kwargs)
        import torch
        assert any(n.target is torch.ops.pypm.linear_act.default for n in ep.graph.nodes)
        d = (out.last_hidden_state - torch.load(sys.argv[2])).abs().max()
        print(type(out).__name__, float(d))
    """, str(out), str(want))
    stdout, stderr = p.communicate(timeout=120)
    assert p.returncode == 0, stderr
    name, diff = stdout.split()
    assert name == "BaseModelOutputWithPoolingAndCrossAttentions" and float(diff) < 1e-6


class _HFOut(nn.Module):
    def forward(self, x):
        from transformers.modeling_outputs import BaseModelOutput
        return BaseModelOutput(last_hidden_state=x + 1)


def test_pm_load_names_what_it_cannot_register(tmp_path):
    pytest.importorskip("transformers")
    # imported outside the trace: transformers (5.x) does not register its
    # output types as pytree nodes while torch is compiling (exporting)
    import transformers.modeling_outputs  # noqa: F401
    good = tmp_path / "hf.pt2"
    torch.export.save(torch.export.export(_HFOut(), (torch.randn(2),)), str(good))
    assert type(pm.load(str(good)).module()(torch.zeros(2))).__name__ == "BaseModelOutput"
    gone = tmp_path / "gone.pt2"
    _rezip(good, gone, lambda d: d.replace(b"transformers.modeling_outputs",
                                           b"transformers.pypm_no_such_outputs"))
    with pytest.raises(LoadError, match=r"use transformers.pypm_no_such_outputs.BaseModelOutput"
                                        r", which importing transformers did not register"):
        pm.load(str(gone))
    # a type of another package: never imported because the file names it
    # (loading runs no code the file names); the user imports it (imports=, --import)
    other = tmp_path / "other.pt2"
    _rezip(good, other, lambda d: d.replace(b"transformers.modeling_outputs",
                                            b"pypm_no_such_pkg.outputs"))
    with pytest.raises(LoadError, match=r"use the type pypm_no_such_pkg.outputs.BaseModelOutput"
                                        r", which is not registered .* never imports a module "
                                        r"because a file names it .*--import "
                                        r"pypm_no_such_pkg.outputs"):
        pm.load(str(other))
    unreg = tmp_path / "unreg.pt2"  # its module imported (here by everyone), type unregistered
    _rezip(good, unreg, lambda d: d.replace(b"transformers.modeling_outputs", b"json"))
    with pytest.raises(LoadError, match=r"use json.BaseModelOutput, which is not registered as "
                                        r"a pytree node in this process \(its module is "
                                        r"imported\)"):
        pm.load(str(unreg), imports=["json"])
    ns = tmp_path / "ns.pt2"
    _rezip(good, ns, lambda d: d.replace(b"torch.ops.aten.add.Tensor",
                                         b"torch.ops.nosuchlib.add.Tensor"))
    with pytest.raises(LoadError, match=r"not registered in this process: "
                                        r"torch.ops.nosuchlib.add.Tensor; import the module "
                                        r"that registers namespace nosuchlib before loading "
                                        r"\(the CLI: --import MODULE"):
        pm.load(str(ns))
    with pytest.raises(LoadError, match=r"cannot import pypm_no_such_mod: ModuleNotFoundError"):
        pm.load(str(ns), imports=["pypm_no_such_mod"])
    with pytest.raises(LoadError, match="no such file"):
        pm.load(str(tmp_path / "missing.pt2"))


# ------------------------------------------------ 6. side effects and modes

def _dropout_model():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.Linear(8, 8), nn.Dropout(0.5))
    m.train()
    m[3].eval()  # mixed modes: each is restored as it was
    return m


def test_training_mode_is_warned_and_caller_untouched():
    m, x = _dropout_model(), torch.randn(4, 8)
    before = [s.training for s in m.modules()]
    prog = load_model(m, (x,))
    assert [s.training for s in m.modules()] == before == [True, True, True, True, False]
    assert len(prog.warnings) == 1
    w = prog.warnings[0]
    assert "training mode" in w and "eval mode" in w and "Dropout" in w
    with torch.no_grad():  # exported in eval mode: deterministic, dropout is the identity
        a, b = prog.ep.module()(x), prog.ep.module()(x)
        assert torch.equal(a, b) and torch.allclose(a, m[2](m[0](x)), atol=1e-6)
    assert load_model(m.eval(), (x,)).warnings == []


def test_model_saved_in_training_mode_warns(tmp_path):
    m, x = _dropout_model(), torch.randn(4, 8)
    pk = tmp_path / "train.pt"
    torch.save({"model": m, "example_inputs": (x,)}, str(pk))
    prog = load_model(str(pk), allow_pickle=True)
    assert len(prog.warnings) == 1 and "saved in training mode" in prog.warnings[0]


def test_changed_says_whether_anything_fired():
    x = torch.randn(4, 8)
    same = rewrite_program(load_model(nn.Linear(8, 8).eval(), (x,)), target="cpu", check_profitability=False,
                           engine="reference", check=False)
    assert same.report.total == 0 and same.changed is False and same.numerics is None
    fired = rewrite_program(load_model(InputArg().eval(), (x,)), target="cpu", check_profitability=False,
                            engine="reference", check=False)
    assert fired.report.total == 1 and fired.changed is True


# ------------------------------------------------ 7. files: umask, signals

@pytest.fixture
def tiny_ep():
    return torch.export.export(nn.Linear(2, 2), (torch.randn(1, 2),))


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_save_follows_umask(tmp_path, tiny_ep, mask, mode):
    out = tmp_path / "o.pt2"
    old = os.umask(mask)
    try:
        save_atomic(tiny_ep, str(out))
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(out).st_mode) == mode
    assert os.listdir(tmp_path) == ["o.pt2"]  # no temporary left
    with zipfile.ZipFile(out) as z:  # one folder (torch names it archive/ for a file object)
        assert len({n.split("/")[0] for n in z.namelist()}) == 1
    x = torch.randn(1, 2)
    assert torch.equal(pm.load(str(out)).module()(x), tiny_ep.module()(x))


_SLOW_SAVE = """
    import os, sys, time, torch
    from pypm_verified.torch.pipeline import save_atomic
    def slow_save(ep, f, **kw):  # starts writing, then takes its time
        f.write(b"x" * (1 << 20))
        print("SAVING", flush=True)
        # in slices, as a writer returns to Python between its writes: the
        # kernel may deliver the signal to one of torch's threads, and then
        # only the main thread's next return to Python runs the handler (a
        # single 60 s sleep made the test wait out its timeout)
        for _ in range(1200):
            time.sleep(0.05)
    torch.export.save = slow_save
    save_atomic(None, sys.argv[1])
    print("DONE", flush=True)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_during_save_leaves_no_temporary(tmp_path, sig):
    out = tmp_path / "o.pt2"
    p = _child(_SLOW_SAVE, str(out))
    try:
        assert p.stdout.readline().strip() == "SAVING"
        left = [n for n in os.listdir(tmp_path) if n.startswith(".pypm-tmp-")]
        assert len(left) == 1  # the temporary exists mid-save
        p.send_signal(sig)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == -sig, err  # ended by the signal, as without the handler
    assert os.listdir(tmp_path) == []


def test_signal_handler_of_the_caller_runs_after_cleanup(tmp_path, monkeypatch):
    class Stop(Exception):
        pass

    def on_term(signum, frame):
        assert not [n for n in os.listdir(tmp_path) if n.startswith(".pypm-tmp-")]
        raise Stop()

    def save(ep, f, **kw):
        f.write(b"x")
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)

    monkeypatch.setattr(torch.export, "save", save)
    old = signal.signal(signal.SIGTERM, on_term)
    try:
        with pytest.raises(Stop):
            save_atomic(None, str(tmp_path / "o.pt2"))
        assert signal.getsignal(signal.SIGTERM) is on_term  # restored
    finally:
        signal.signal(signal.SIGTERM, old)
    assert os.listdir(tmp_path) == []


# ------------------------------------------------ 9. unpickling and export errors

class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)

    def forward(self, x):
        return self.fc(x)


def _save_as(tmp_path, module_name, qualname):
    """torch.save a _Net as if its class were ``module_name.qualname``
    (e.g. defined in the saving script's ``__main__``), then make that name
    unresolvable again, as it is in another process."""
    cls = type(qualname, (_Net,), {"__module__": module_name})
    mod = sys.modules.get(module_name)
    if mod is None:
        import types
        mod = sys.modules[module_name] = types.ModuleType(module_name)
    setattr(mod, qualname, cls)
    path = tmp_path / "net.pt"
    try:
        torch.save({"model": cls(), "example_inputs": (torch.randn(1, 2),)}, str(path))
    finally:
        delattr(mod, qualname)
        if module_name != "__main__":
            del sys.modules[module_name]
    return path


def test_class_defined_in_main_gets_a_hint(tmp_path):
    path = _save_as(tmp_path, "__main__", "PypmTestMainNet")
    with pytest.raises(LoadError, match=r"class PypmTestMainNet was defined in the script that "
                                        r"saved the file \(__main__\).*importable module.*"
                                        r"save a \.pt2"):
        load_model(str(path), allow_pickle=True)
    path = _save_as(tmp_path, "pypm_test_gone_module", "Net")
    with pytest.raises(LoadError, match="module 'pypm_test_gone_module' that defines the model's "
                                        "class cannot be imported here"):
        load_model(str(path), allow_pickle=True)


class DataDependent(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # MARK-branch
            return x + 1
        return x - 1


def test_data_dependent_branch_is_one_line(capfd):
    capfd.readouterr()
    with pytest.raises(LoadError) as e:
        load_model(DataDependent(), (torch.randn(3),))
    msg = str(e.value)
    # the file as the user would type it: relative to the current directory
    where = short_path(HERE)
    assert where == os.path.relpath(HERE) or os.path.relpath(HERE).startswith(os.pardir)
    assert f"at {where}:{line_of(HERE, 'MARK-' + 'branch')} (if x.sum() > 0:" in msg, msg
    assert "data-dependent" in msg and "torch.cond" in msg and "\n" not in msg
    err = capfd.readouterr().err
    assert "def forward" not in err and "Unable to find user code" not in err, err


# ------------------------------------------------ check: non-finite outputs

class _Log(nn.Module):
    def __init__(self, abs_first=False):
        super().__init__()
        self.abs_first = abs_first

    def forward(self, x):
        return torch.log(x.abs() if self.abs_first else x)


def test_check_compares_nan_by_position():
    x = torch.tensor([-1.0, 0.0, 2.0, 3.0])  # log: nan, -inf, finite, finite
    a = load_model(_Log(), (x,)).ep
    res = compare(a, a, (x,), {}, n_random=2)
    assert res.ok and res.failures == [], res.failures
    b = load_model(_Log(abs_first=True), (x,)).ep  # no NaN where a has one
    res = compare(a, b, (x,), {}, n_random=0)
    assert not res.ok and "non-finite values differ" in res.failures[0]
