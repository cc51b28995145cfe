"""Files someone else wrote (and ``--fuel``):
loading a model runs no code from the file unless the user opts in.

* a ``.pt2`` whose pickled parts (sample inputs, a weight) would run code
  when unpickled is refused, naming ``--allow-pickle``; so is one whose
  size expressions, guards or names would be evaluated as Python;
* a ``.pt2`` naming a module (a pytree type, an enum) does not import it: a
  ``somemod.py`` beside the model does not run, even with ``python -m``
  putting the working directory on ``sys.path``;
* a pickled ``.pt`` (``torch.save`` of an ``nn.Module``) is refused by
  default (exit 2, one line naming ``--allow-pickle``) and loads with the
  opt-in; a ``weights_only``-loadable file needs none;
* ``pm.load_partitioned`` reads its own format with the safe unpickler;
* a missing or bogus engine library is exit 2 before the model is loaded;
* ``--fuel N`` reaches the matcher and is validated.

Every malicious file here would create a marker file when loaded by the old
code (``builtins.open(marker, "w")`` from ``__reduce__``, or a module that
writes it on import); each test asserts that the marker does not exist."""
import builtins
import json
import os
import subprocess
import sys
import threading
import zipfile

import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402

import pypm_verified as pm  # noqa: E402
from pypm_verified.cli import main  # noqa: E402
from pypm_verified.torch import untrusted  # noqa: E402
from pypm_verified.torch.loader import LoadError, NeedsPickle, load_model  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYDIR = os.path.join(ROOT, "python")


class Marker:
    """Unpickled by the full unpickler, creates ``path`` (no shell needed)."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (builtins.open, (self.path, "w"))


def _env(**extra):
    env = dict(os.environ, PYTHONPATH=PYDIR)
    env.update(extra)
    return env


def _cli(args, cwd=None, **env):
    return subprocess.run([sys.executable, "-m", "pypm_verified", *map(str, args)], cwd=cwd,
                          env=_env(**env), capture_output=True, text=True, timeout=300)


def _one_error(err: str) -> str:
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, err
    return lines[0]


def _run(argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _torch_save_bytes(obj) -> bytes:
    import io
    b = io.BytesIO()
    torch.save(obj, b)
    return b.getvalue()


def _rezip(src, dst, json_fn=None, member_fn=None):
    """A copy of archive ``src`` with ``models/model.json`` passed through
    ``json_fn`` (the parsed document) and every member through
    ``member_fn(name, data)``; valid CRCs (the damage is in the content)."""
    with zipfile.ZipFile(src) as zi, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zo:
        for info in zi.infolist():
            data = zi.read(info.filename)
            if member_fn is not None:
                data = member_fn(info.filename, data)
            if json_fn is not None and info.filename.endswith("models/model.json"):
                data = json.dumps(json_fn(json.loads(data))).encode()
            zo.writestr(info.filename, data)
    return dst


def _two_layers():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).eval(), torch.randn(3, 4)


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    """A plain .pt2 of a 2-layer nn.Sequential."""
    m, x = _two_layers()
    path = tmp_path_factory.mktemp("good") / "good.pt2"
    torch.export.save(torch.export.export(m, (x,)), str(path))
    return path


def _evil_sample_inputs(good, dst, marker):
    return _rezip(good, dst, member_fn=lambda n, d: _torch_save_bytes(Marker(marker))
                  if n.endswith("sample_inputs/model.pt") else d)


def _evil_weight(good, dst, marker):
    def member(n, d):
        if n.endswith("model_weights_config.json"):
            c = json.loads(d)
            c["config"]["0.bias"]["use_pickle"] = True
            return json.dumps(c).encode()
        if n.endswith("data/weights/weight_1"):
            return _torch_save_bytes(Marker(marker))
        return d
    return _rezip(good, dst, member_fn=member)


# ------------------------------------------------ 1. pickles inside a .pt2

def test_pt2_sample_inputs_pickle_runs_nothing(good, tmp_path):
    marker = tmp_path / "RAN"
    evil = _evil_sample_inputs(good, tmp_path / "evil.pt2", marker)
    for load in (lambda: load_model(str(evil)), lambda: pm.load(str(evil))):
        with pytest.raises(NeedsPickle, match=r"needs Python's full unpickler \(it names "
                                              r"\w+.open\).*--allow-pickle"):
            load()
        assert not marker.exists()


def test_pt2_pickled_weight_runs_nothing(good, tmp_path):
    marker = tmp_path / "RAN"
    evil = _evil_weight(good, tmp_path / "evil_w.pt2", marker)
    with pytest.raises(NeedsPickle, match="full unpickler"):
        pm.load(str(evil))
    assert not marker.exists()


def test_pt2_evil_pickle_from_the_cli(good, tmp_path):
    """The CLI: exit 2, one line naming the opt-in, no marker, no output;
    with --allow-pickle (the user's explicit choice) torch's full unpickler
    runs, as documented."""
    marker = tmp_path / "RAN"
    evil = _evil_sample_inputs(good, tmp_path / "evil.pt2", marker)
    out = tmp_path / "o.pt2"
    p = _cli(["rewrite", evil, "-o", out, "-q"])
    assert p.returncode == 2, p.stderr
    line = _one_error(p.stderr)
    assert "evil.pt2" in line and "full unpickler" in line and "--allow-pickle" in line
    assert not marker.exists() and not out.exists()
    p = _cli(["rewrite", evil, "-o", out, "-q", "--allow-pickle"])
    assert marker.exists()  # the opt-in: the file's code ran (it then fails to load)
    assert p.returncode == 2 and not out.exists()


def test_plain_pt2_loads_without_the_opt_in(good):
    m, x = _two_layers()
    prog = load_model(str(good))
    with torch.no_grad():
        assert torch.allclose(prog.ep.module()(x), m(x))
    assert torch.equal(pm.load(str(good)).example_inputs[0][0], x)


def test_guards_leave_torch_as_it_was_and_other_threads_alone(tmp_path):
    """The guards are installed for the load only, and only the loading
    thread is held to them: another thread's torch.load with the full
    unpickler is not changed."""
    real = (torch.load, pickle_loads(), torch._C._pickle_load_obj)
    pk = tmp_path / "lin.pt"
    torch.save(nn.Linear(2, 2), str(pk))
    got = {}
    with untrusted.guarded() as g:
        t = threading.Thread(target=lambda: got.setdefault(
            "other", torch.load(str(pk), weights_only=False)))
        t.start()
        t.join()
        with pytest.raises(untrusted.Refused):
            torch.load(str(pk), weights_only=False)  # this thread: forced weights_only
        assert g.refused == "torch.nn.modules.linear.Linear"
    assert isinstance(got["other"], nn.Linear)
    assert (torch.load, pickle_loads(), torch._C._pickle_load_obj) == real


def pickle_loads():
    import pickle
    return pickle.loads


# ------------------------------------------------ expressions, guards, names

def _set_size_expr(text):
    def fn(d):
        tv = d["graph_module"]["graph"]["tensor_values"]["input"]
        tv["sizes"][0] = {"as_expr": {"expr_str": text, "hint": {"as_int": 3}}}
        return d
    return fn


def _set_guard(text):
    def fn(d):
        d["guards_code"] = [text]
        return d
    return fn


def _set_arg_names(names):
    def fn(d):
        d["graph_module"]["module_call_graph"][0]["signature"]["forward_arg_names"] = names
        return d
    return fn


def _rename_parameter(new):
    def fn(d):
        for s in d["graph_module"]["signature"]["input_specs"]:
            if "parameter" in s and s["parameter"]["parameter_name"] == "0.weight":
                s["parameter"]["parameter_name"] = new
        return d

    def member(n, data):
        if n.endswith("model_weights_config.json"):
            c = json.loads(data)
            c["config"][new] = c["config"].pop("0.weight")
            return json.dumps(c).encode()
        return data
    return fn, member


@pytest.mark.parametrize("case", ["size expression", "guard", "argument name",
                                  "parameter name"])
def test_pt2_text_evaluated_as_python_is_refused(good, tmp_path, case):
    """torch evaluates a size expression with sympy.sympify (eval), exec's
    the guards in ep.module(), and pastes names into generated source: each
    crafted to create the marker is refused before torch sees it."""
    marker = tmp_path / "RAN"
    assert "." not in str(marker)  # the parameter name is split at dots
    code = f"getattr(__import__('builtins'), 'open')({str(marker)!r}, 'w')"
    fn, member = {"size expression": (_set_size_expr(f"{code} and 3"), None),
                  "guard": (_set_guard(f"{code} is not None"), None),
                  "argument name": (_set_arg_names([f"input={code}"]), None),
                  "parameter name": _rename_parameter(
                      'x" if ' + code.replace("'", '"') + ' else "x')}[case]
    evil = _rezip(good, tmp_path / "evil.pt2", json_fn=fn, member_fn=member)
    with pytest.raises(LoadError, match="refused, not a program torch writes"):
        prog = load_model(str(evil))
        prog.ep.module()(*prog.args)  # where the guards and names would run
    assert not marker.exists()


def test_size_expressions_torch_writes_are_accepted():
    ok = ["Mul(Integer(2), Symbol('s77', positive=True, integer=True))",
          "Symbol('s0', integer=True, positive=True)", "2*s0 + 1", "FloorDiv(s0, 2)",
          "Max(1, s0)", "Eq(Mod(s0, 2), 0)", "-oo", "int_oo", "s0**2", "Float('1.5', precision=53)"]
    for e in ok:
        assert untrusted.sym_expr_problem(e) is None, e
    bad = ["__import__('os').system('x')", "open('x', 'w')", "s0.__class__",
           "Symbol('a b')", "lambda: 1", "Piecewise(('open(1)', True))", "preview(s0)",
           "[s0 for s0 in (1,)]", "Symbol('s0', **{'a': 1})"]
    for e in bad:
        assert untrusted.sym_expr_problem(e), e
    assert untrusted.guard_problem("L['y'].size()[0] == (2*L['x'].size()[0])") is None
    assert untrusted.guard_problem("2 <= L['x'].size()[0] <= 1000") is None
    for g in ("L['x'].__class__", "__import__('os')", "L['x\"'].size()[0] == 1",
              "L['x'].size()[0] == (lambda: 1)()", "exec('1')",
              "Max('open(1)', 2) == 2", "L['x'].size()[0] == FloorDiv('s0', 2)"):
        assert untrusted.guard_problem(g), g


def test_dynamic_shapes_program_loads(tmp_path):
    """The checks accept what torch writes for dynamic shapes: size
    expressions, range constraints, guards."""
    from torch.export import Dim

    class Cat(nn.Module):
        def forward(self, x, y):
            return torch.cat([x, y], 0).sum(0)
    b = Dim("b", max=1000)
    ep = torch.export.export(Cat(), (torch.randn(3, 4), torch.randn(6, 4)),
                             dynamic_shapes={"x": {0: b}, "y": {0: 2 * b}})
    # decomposed before saving, as the rewriter writes it (torch 2.13 cannot
    # decompose a loaded program with a derived dimension: its own bug)
    ep = ep.run_decompositions({})
    path = tmp_path / "dyn.pt2"
    torch.export.save(ep, str(path))
    doc = json.loads(zipfile.ZipFile(path).read("dyn/models/model.json"))
    assert doc["guards_code"] and "expr_str" in json.dumps(doc)
    prog = load_model(str(path))
    x, y = torch.randn(5, 4), torch.randn(10, 4)
    assert torch.allclose(prog.ep.module()(x, y), torch.cat([x, y], 0).sum(0))


# ------------------------------------------------ 2. modules a .pt2 names

SOMEMOD = "open({marker!r}, 'w').write('somemod ran')\nimport enum\n\n\nclass E(enum.Enum):\n" \
          "    A = 1\n"


def _type_in_out_spec(d):
    sig = d["graph_module"]["module_call_graph"][0]["signature"]
    spec = json.loads(sig["out_spec"])
    spec[1] = {"type": "somemod.Out", "context": "null",
               "children_spec": [{"type": None, "context": None, "children_spec": []}]}
    sig["out_spec"] = json.dumps(spec)
    return d


def _enum_in_in_spec(d):
    sig = d["graph_module"]["module_call_graph"][0]["signature"]
    spec = json.loads(sig["in_spec"])
    spec[1]["children_spec"][1]["context"] = json.dumps(
        [{"__enum__": True, "fqn": "somemod:E", "name": "A"}])
    sig["in_spec"] = json.dumps(spec)
    return d


def _op_namespace(d):
    return json.loads(json.dumps(d).replace("torch.ops.aten.relu.default",
                                            "torch.ops.somemod.relu.default"))


@pytest.mark.parametrize("case", ["pytree type", "enum", "operator namespace"])
def test_pt2_naming_a_module_beside_it_does_not_import_it(good, tmp_path, case):
    """``python -m pypm_verified rewrite evil.pt2 --dry-run`` in the model's
    directory (on sys.path): somemod.py there does not run; exit 2, one
    line naming the type or module and the opt-in."""
    marker = tmp_path / "RAN"
    (tmp_path / "somemod.py").write_text(SOMEMOD.format(marker=str(marker)))
    fn = {"pytree type": _type_in_out_spec, "enum": _enum_in_in_spec,
          "operator namespace": _op_namespace}[case]
    evil = _rezip(good, tmp_path / "evil.pt2", json_fn=fn)
    p = _cli(["rewrite", "evil.pt2", "--dry-run", "-q"], cwd=tmp_path)
    assert not marker.exists(), p.stderr
    assert p.returncode == 2, p.stderr
    line = _one_error(p.stderr)
    assert "--import" in line and "somemod" in line, line
    if case == "pytree type":
        assert "somemod.Out" in line and "--import somemod" in line
    # in-process too (nothing on the path): the same refusal
    with pytest.raises(LoadError, match="somemod"):
        pm.load(str(evil))
    assert not marker.exists()


def test_the_user_may_import_the_module(good, tmp_path, monkeypatch):
    """--import somemod / imports=[...] is the opt-in: the module is the
    user's to import; the type it registers is then found."""
    mod = tmp_path / "pypm_test_outtype.py"
    mod.write_text("import dataclasses, torch.utils._pytree as P\n"
                   "@dataclasses.dataclass\nclass Out:\n    y: object\n"
                   "P.register_dataclass(Out, serialized_type_name='pypm_test_outtype.Out')\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    def fn(d):
        sig = d["graph_module"]["module_call_graph"][0]["signature"]
        spec = json.loads(sig["out_spec"])
        spec[1] = {"type": "pypm_test_outtype.Out", "context": '[["y"], []]',
                   "children_spec": [{"type": None, "context": None, "children_spec": []}]}
        sig["out_spec"] = json.dumps(spec)
        return d
    path = _rezip(good, tmp_path / "typed.pt2", json_fn=fn)
    with pytest.raises(LoadError, match=r"--import pypm_test_outtype"):
        pm.load(str(path))
    assert "pypm_test_outtype" not in sys.modules
    ep = pm.load(str(path), imports=["pypm_test_outtype"])
    assert type(ep.module()(torch.randn(3, 4))).__name__ == "Out"


# ------------------------------------------------ 3. pickled .pt

@pytest.fixture
def pickled(tmp_path):
    m, x = _two_layers()
    path = tmp_path / "seq.pt"
    torch.save({"model": m, "example_inputs": (x,)}, str(path))
    return path


def test_pickled_module_refused_by_default(pickled, tmp_path, capsys):
    with pytest.raises(NeedsPickle, match=r"a pickled model .* needs Python's full unpickler "
                                          r"\(it names torch.nn.modules.*--allow-pickle"):
        load_model(str(pickled))
    out = tmp_path / "o.pt2"
    code, _, err = _run(["rewrite", pickled, "-o", out, "-q"], capsys)
    assert code == 2
    line = _one_error(err)
    assert "seq.pt" in line and "full unpickler" in line and "--allow-pickle" in line
    assert not out.exists()


def test_pickled_module_accepted_with_the_opt_in(pickled, tmp_path, capsys):
    m, x = _two_layers()
    prog = load_model(str(pickled), allow_pickle=True)
    assert prog.kind == "pickle"
    with torch.no_grad():
        assert torch.allclose(prog.ep.module()(x), m(x))
    rep = tmp_path / "r.json"
    code, _, err = _run(["rewrite", pickled, "--dry-run", "-q", "--allow-pickle", "--report",
                         rep], capsys)
    assert code == 0, err
    assert json.loads(rep.read_text())["kind"] == "pickle"


def test_malicious_pickle_runs_nothing_without_the_opt_in(tmp_path, capsys):
    marker = tmp_path / "RAN"
    path = tmp_path / "evil.pt"
    torch.save({"model": Marker(marker), "example_inputs": (torch.randn(2),)}, str(path))
    code, _, err = _run(["rewrite", path, "--dry-run", "-q"], capsys)
    assert code == 2 and ".open)" in _one_error(err) and not marker.exists()


def test_weights_only_file_needs_no_opt_in(tmp_path):
    """A file the safe unpickler reads is judged on what it holds (here a
    state_dict: its own message, not a pickle refusal)."""
    sd = tmp_path / "sd.pt"
    torch.save(nn.Linear(2, 2).state_dict(), str(sd))
    with pytest.raises(LoadError, match="state_dict") as e:
        load_model(str(sd))
    assert not isinstance(e.value, NeedsPickle)


def test_torchscript_needs_no_opt_in(tmp_path):
    import warnings

    class ReluPlus(nn.Module):
        def forward(self, x):
            return torch.relu(x) + 1
    path = tmp_path / "ts.pt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.save(torch.jit.script(ReluPlus()), str(path))
    x = torch.randn(2, 3)
    prog = load_model(str(path), (x,))
    assert torch.allclose(prog.ep.module()(x), torch.relu(x) + 1)


# ------------------------------------------------ pm.load_partitioned

def _partitioned(tmp_path):
    from pypm_verified.torch import ops

    @pm.pattern
    def ReluLinearU(x, w, b):
        return ops.Relu(ops.Linear(x, w, b))
    m, x = _two_layers()
    prog = load_model(m, (x,))
    part = pm.partition(prog, [ReluLinearU], backend="eager", engine="reference")
    assert len(part.submodules) == 1
    path = tmp_path / "p.pypm.pt"
    part.save(str(path))
    return part, path, m, x


def test_load_partitioned_round_trip_uses_the_safe_unpickler(tmp_path, monkeypatch):
    part, path, m, x = _partitioned(tmp_path)
    calls = []
    real = torch.load

    def spy(*a, **k):
        calls.append(k.get("weights_only"))
        return real(*a, **k)
    monkeypatch.setattr(torch, "load", spy)
    again = pm.load_partitioned(str(path), backend="eager")
    assert calls and all(w is True for w in calls), calls
    assert [s.name for s in again.submodules] == [s.name for s in part.submodules]
    with torch.no_grad():
        assert torch.allclose(again(x), m(x), atol=1e-6)


def test_tampered_partitioned_file_runs_nothing(tmp_path, good):
    _, path, _, _ = _partitioned(tmp_path)
    marker = tmp_path / "RAN"
    blob = torch.load(str(path), weights_only=True)
    outer = tmp_path / "outer.pypm.pt"  # the file's own pickle
    torch.save(dict(blob, plan=Marker(marker)), str(outer))
    with pytest.raises(LoadError, match=r"full unpickler .*it names \w+.open"):
        pm.load_partitioned(str(outer), backend="eager")
    assert not marker.exists()
    inner = tmp_path / "inner.pypm.pt"  # the program's sample inputs
    evil = _evil_sample_inputs(good, tmp_path / "evil.pt2", marker)
    torch.save(dict(blob, program=evil.read_bytes()), str(inner))
    with pytest.raises(NeedsPickle, match="full unpickler"):
        pm.load_partitioned(str(inner), backend="eager")
    assert not marker.exists()
    damaged = tmp_path / "damaged.pypm.pt"
    torch.save(dict(blob, plan={"dups": "x", "subs": []}), str(damaged))
    with pytest.raises(LoadError, match="its plan is damaged"):
        pm.load_partitioned(str(damaged), backend="eager")


# ------------------------------------------------ 7. the engine library

# the CLI with the model loader instrumented: it says on stderr each time it is called
_SPIED_CLI = """
import sys
from pypm_verified.torch import loader
real = loader.load_model
def spy(path, *a, **k):
    print("spy: load_model", path, file=sys.stderr)
    return real(path, *a, **k)
loader.load_model = spy
from pypm_verified.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _spied_cli(args, **env):
    return subprocess.run([sys.executable, "-c", _SPIED_CLI, *map(str, args)],
                          env=_env(**env), capture_output=True, text=True, timeout=300)


def test_missing_engine_library_is_exit_2_before_loading(tmp_path):
    """PYPM_VERIFIED_LIB=/nope.so: exit 2 and one line about the library,
    before the model is read (the model here is a text file, which loading
    would refuse with another message; the loader is never called); a
    library that is not the engine's (libc) the same; --engine reference
    needs none (and does load the model: the spy sees loads)."""
    text = tmp_path / "notes.txt"
    text.write_text("not a model\n")
    import _cffi_backend  # a shared library that is not the engine's
    for lib, needle in (("/nope.so", "not found at /nope.so"),
                        (_cffi_backend.__file__, "not a pypm_verified engine library")):
        p = _spied_cli(["rewrite", text, "-o", tmp_path / "o.pt2"], PYPM_VERIFIED_LIB=lib)
        assert p.returncode == 2, p.stderr
        line = _one_error(p.stderr)
        assert "--engine verified" in line and needle in line and "--engine reference" in line
        assert "notes.txt" not in line
        assert "spy: load_model" not in p.stderr, p.stderr
    p = _spied_cli(["rewrite", text, "-o", tmp_path / "o.pt2", "--engine", "reference"],
                   PYPM_VERIFIED_LIB="/nope.so")
    assert p.returncode == 2 and "not a PyTorch file" in _one_error(p.stderr)
    assert f"spy: load_model {text}" in p.stderr, p.stderr
    p = _cli(["explain", text, "--pattern", "Gelu"], PYPM_VERIFIED_LIB="/nope.so")
    assert p.returncode == 2 and "not found at /nope.so" in _one_error(p.stderr)


# ------------------------------------------------ --fuel

def test_fuel_is_validated(good, tmp_path, capsys):
    for bad, needle in (("0", "0 is too little"), ("-3", "-3 is too little"),
                        ("many", "'many' is not an integer"), (str(1 << 62), "too much")):
        code, _, err = _run(["rewrite", good, "--dry-run", "--fuel", bad], capsys)
        assert code == 2 and "--fuel" in _one_error(err) and needle in err, err
    code, out, _ = _run(["rewrite", "--help"], capsys)
    assert code == 0 and "--fuel N" in out


def test_fuel_reaches_the_matcher(good, tmp_path, capsys):
    """Enough fuel: the rewrite runs as without the option; one step: the
    matcher runs out at the first attempt and says which pattern, where."""
    code, out, err = _run(["rewrite", good, "--dry-run", "-q", "--fuel", "1000000"], capsys)
    assert code == 0, err
    code, _, err = _run(["rewrite", good, "--dry-run", "-q", "--fuel", "1"], capsys)
    assert code == 3 and "ran out of fuel" in _one_error(err), err


def test_fuel_limit_applies_to_matches_given_no_fuel():
    from pypm_verified.engines.matching import PatternSet, _fuel, fuel_limit
    from pypm_verified.library import default_patterns
    assert _fuel(None) is None
    with fuel_limit(77):
        assert _fuel(None) == 77 and _fuel(5) == 5
        assert PatternSet(default_patterns(), "reference").fuel == 77
    assert _fuel(None) is None
    with pytest.raises(ValueError):
        with fuel_limit(0):
            pass
