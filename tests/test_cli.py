"""The command line as users meet it: mistakes found before any
work with the documented exit code and one line, the default target, runs
where nothing fires, interrupts, the benchmark's noise, the iteration cap,
and the exit-code table in --help, the module docstring and the README.

Most runs call ``main([...])`` in-process; signals and the real exit status
of ``python -m pypm_verified`` use a subprocess."""
import collections
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time
import warnings
import zipfile

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("rich")

import torch.nn as nn  # noqa: E402

from pypm_verified import cli  # noqa: E402
from pypm_verified.cli import main  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))


class LinRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.lin(x))


class NegNegModel(nn.Module):
    def forward(self, x):
        return -(-x) * 2


class ReluPlus(nn.Module):
    def forward(self, x):
        return torch.relu(x) + 1


class Dups(nn.Module):
    def forward(self, x):
        return torch.relu(x) + torch.relu(x)


class WithDropout(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.lin(x))


RULES_HEAD = ("import pypm_verified as pm\n"
              "from pypm_verified.torch.ops import Neg, Relu\n")

NEGNEG_RULES = RULES_HEAD + """
@pm.pattern
def NN(x):
    return Neg(Neg(x))

@pm.rule(NN)
def drop_negs(x):
    return x
"""

RELU_TO_NEGNEG = RULES_HEAD + """
@pm.pattern
def R(x):
    return Relu(x)

@pm.rule(R)
def relu_to_negneg(x):
    return Neg(Neg(x))
"""

NAME_ERROR_RULES = RULES_HEAD + """
@pm.pattern
def NN(x):
    return Neg(Neg(x))

@pm.rule(NN)
def uses_undefined(x):
    return undefined_helper(x)
"""

RAISING_RULES = RULES_HEAD + """
@pm.pattern
def NN(x):
    return Neg(Neg(x))

@pm.rule(NN)
def boom(x):
    raise RuntimeError("boom in the rule body")
"""

SLOW_RULES = RULES_HEAD + """
import pathlib, time
MARK = {mark!r}

@pm.pattern
def NN(x):
    return Neg(Neg(x))

@pm.rule(NN)
def slow(x):
    pathlib.Path(MARK).write_text("firing")
    time.sleep(120)
    return x
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Tiny model files and rules files, made once."""
    d = tmp_path_factory.mktemp("cli")
    f = {}
    torch.manual_seed(0)
    for name, m, x in (("linrelu", LinRelu(), torch.randn(4, 8)),
                       ("negneg", NegNegModel(), torch.randn(4, 8)),
                       ("reluplus", ReluPlus(), torch.randn(4, 8)),
                       ("dups", Dups(), torch.randn(4, 8))):
        f[name] = str(d / f"{name}.pt2")
        torch.export.save(torch.export.export(m.eval(), (x,)), f[name])
    for name, text in (("negneg_rules", NEGNEG_RULES), ("relu_rules", RELU_TO_NEGNEG),
                       ("nameerror_rules", NAME_ERROR_RULES), ("raising_rules", RAISING_RULES),
                       ("both_rules", RELU_TO_NEGNEG + NEGNEG_RULES.replace(RULES_HEAD, ""))):
        f[name] = str(d / f"{name}.py")
        with open(f[name], "w") as fh:
            fh.write(text)
    with open(f["linrelu"], "rb") as fh:
        good = fh.read()
    f["truncated"] = str(d / "truncated.pt2")
    with open(f["truncated"], "wb") as fh:
        fh.write(good[:len(good) // 2])
    f["corrupt"] = str(d / "corrupt.pt2")  # 16 bytes overwritten inside the first weight
    with zipfile.ZipFile(f["linrelu"]) as z:
        info = z.infolist()[0]
    assert "weight" in info.filename and info.compress_size >= 32
    start = info.header_offset + 30 + int.from_bytes(
        good[info.header_offset + 26:info.header_offset + 28], "little") + int.from_bytes(
        good[info.header_offset + 28:info.header_offset + 30], "little")
    with open(f["corrupt"], "wb") as fh:
        fh.write(good[:start + 8] + b"\xff" * 16 + good[start + 24:])
    f["text"] = str(d / "notes.txt")
    with open(f["text"], "w") as fh:
        fh.write("just some text\n")
    f["empty"] = str(d / "empty.pt2")
    open(f["empty"], "wb").close()
    f["state_dict"] = str(d / "sd.pt")
    torch.save(LinRelu().state_dict(), f["state_dict"])
    f["pickled_module"] = str(d / "module_only.pt")
    torch.save(LinRelu(), f["pickled_module"])
    f["torchscript"] = str(d / "scripted.pt")
    with warnings.catch_warnings():  # TorchScript is deprecated; users still have such files
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.save(torch.jit.script(ReluPlus()), f["torchscript"])
    f["bad_py"] = str(d / "syntax_rules.py")
    with open(f["bad_py"], "w") as fh:
        fh.write("def (:\n")
    f["dir"] = str(d)
    return f


def run(argv, capsys):
    """``main(argv)`` in-process: (exit code, stdout, stderr)."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _one_line_error(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err, err
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert len(errors) == 1, err
    return errors[0]


def _no_leftovers(d):
    return [f for f in os.listdir(d) if f.startswith(".pypm-tmp")] == []


# ---------------------------------------------------- the bad-input matrix

def _case(out, files, tmp):
    return {
        "missing model file": ([tmp / "nope.pt2", "-o", out], 2, ["nope.pt2", "no such file"]),
        "directory as model": ([files["dir"], "-o", out], 2, ["is a directory"]),
        "text file as model": ([files["text"], "-o", out], 2,
                               ["notes.txt", "not a PyTorch file"]),
        "empty file": ([files["empty"], "-o", out], 2, ["empty.pt2", "is empty"]),
        "truncated .pt2": ([files["truncated"], "-o", out], 2,
                           ["truncated.pt2", "truncated or corrupt"]),
        "corrupted weights": ([files["corrupt"], "-o", out], 2,
                              ["corrupt.pt2", "CRC-32 does not match"]),
        "state_dict only": ([files["state_dict"], "-o", out], 2,
                            ["state_dict", "holds weights but not the model"]),
        "pickled module without example inputs": (
            [files["pickled_module"], "-o", out, "--allow-pickle"], 2,
            ["without example inputs"]),
        "TorchScript without --example-inputs": (
            [files["torchscript"], "-o", out], 2, ["TorchScript", "--example-inputs"]),
        "unknown --engine": ([files["negneg"], "-o", out, "--engine", "fast"], 2,
                             ["--engine", "invalid choice", "verified"]),
        "unknown --target": ([files["negneg"], "-o", out, "--target", "tpu"], 2,
                             ["--target", "invalid choice"]),
        "--example-inputs missing file": (
            [files["torchscript"], "-o", out, "--example-inputs", tmp / "in.pt"], 2,
            ["--example-inputs", "in.pt", "no such file"]),
        "--example-inputs not a tensor file": (
            [files["torchscript"], "-o", out, "--example-inputs", files["text"]], 2,
            ["--example-inputs", "cannot read it"]),
        "output in a missing directory": (
            [files["negneg"], "-o", tmp / "no_dir" / "out.pt2"], 2,
            ["no_dir", "does not exist"]),
        "output is a directory": ([files["negneg"], "-o", files["dir"]], 2,
                                  ["is a directory; give a file name"]),
        "output overwrites the model": ([files["negneg"], "-o", files["negneg"]], 2,
                                        ["would overwrite the input"]),
        "--report in a missing directory": (
            [files["negneg"], "-o", out, "--report", tmp / "no_dir" / "r.json"], 2,
            ["--report", "no_dir", "does not exist"]),
        "--report is the output": ([files["negneg"], "-o", out, "--report", out], 2,
                                   ["--report", "is also the output"]),
        "--rules a pattern name": ([files["negneg"], "-o", out, "--rules", "Attention"], 2,
                                   ["'Attention' is a pattern of the library module "
                                    "'attention'", "gelu, rmsnorm, attention, transpose, "
                                    "epilogue"]),
        "--rules a missing file": ([files["negneg"], "-o", out, "--rules", tmp / "r.py"], 2,
                                   ["r.py", "does not exist"]),
        "--rules a file with a syntax error": (
            [files["negneg"], "-o", out, "--rules", files["bad_py"]], 2,
            ["syntax_rules.py", "SyntaxError"]),
        "--random-runs -1": ([files["negneg"], "-o", out, "--random-runs", "-1"], 2,
                             ["--random-runs", "-1 is negative"]),
        "--max-iterations 0": ([files["negneg"], "-o", out, "--max-iterations", "0"], 2,
                               ["--max-iterations", "0 is too few"]),
        "--max-iterations not a number": (
            [files["negneg"], "-o", out, "--max-iterations", "many"], 2,
            ["--max-iterations", "'many' is not an integer"]),
        "--import a missing module": (
            [files["negneg"], "-o", out, "--import", "no_such_module_pypm"], 2,
            ["--import no_such_module_pypm", "no such module"]),
        "no command": ([], 2, ["COMMAND"]),
    }


CASES = list(_case("o", collections.defaultdict(str), pathlib.Path(".")))  # the names


@pytest.mark.parametrize("case", CASES)
def test_bad_input(case, files, tmp_path, capsys):
    """Each mistake: exit 2, one line naming the problem, no traceback,
    nothing written."""
    out = tmp_path / "out.pt2"
    argv, code, needles = _case(out, files, tmp_path)[case]
    got, stdout, err = run((["rewrite"] if case != "no command" else []) + argv, capsys)
    assert got == code, (stdout, err)
    line = _one_line_error(err)
    for n in needles:
        assert n in line, (n, line)
    assert not out.exists() and _no_leftovers(tmp_path)
    assert not (tmp_path / "r.json").exists()


def test_bad_report_path_writes_nothing_and_is_found_first(files, tmp_path, capsys,
                                                           monkeypatch):
    """With a --report in a missing directory nothing is loaded or written:
    the check comes before the work (a model that would take the rewrite
    to the end is given, the loader is never called, and the output stays
    absent)."""
    from pypm_verified.torch import loader
    loads, real = [], loader.load_model
    monkeypatch.setattr(loader, "load_model",
                        lambda path, *a, **k: loads.append(path) or real(path, *a, **k))
    out = tmp_path / "out.pt2"
    code, _, err = run(["rewrite", files["negneg"], "-o", out, "--rules",
                        files["negneg_rules"], "--report", tmp_path / "missing" / "r.json"],
                       capsys)
    assert code == 2 and "does not exist" in _one_line_error(err)
    assert loads == [] and os.listdir(tmp_path) == []
    # the spy sees a load: the same command with a report it can write loads the model
    code, _, err = run(["rewrite", files["negneg"], "-o", out, "--rules",
                        files["negneg_rules"], "--report", tmp_path / "r.json"], capsys)
    assert code == 0, err
    assert loads == [files["negneg"]], loads


def test_unwritable_directory(files, tmp_path, capsys, monkeypatch):
    """A directory the user cannot write to: exit 2 before any work. Root
    writes anywhere, so as root the permission answer is simulated."""
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        if os.geteuid() == 0:  # root ignores the mode bits: answer as a user would get
            real = os.access
            monkeypatch.setattr(os, "access", lambda p, m, *a, **k: False
                                if os.path.abspath(p) == str(ro) and m & os.W_OK
                                else real(p, m, *a, **k))
        code, _, err = run(["rewrite", files["negneg"], "-o", ro / "out.pt2"], capsys)
        assert code == 2
        assert f"directory {ro} is not writable" in _one_line_error(err)
        assert os.listdir(ro) == []
    finally:
        ro.chmod(0o755)


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions; "
                    "test_unwritable_directory simulates the answer instead")
def test_unwritable_directory_for_real(files, tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        code, _, err = run(["rewrite", files["negneg"], "-o", ro / "out.pt2"], capsys)
        assert code == 2 and "is not writable" in _one_line_error(err)
    finally:
        ro.chmod(0o755)


def test_bad_input_exit_status_of_the_process(files, tmp_path):
    """``python -m pypm_verified`` exits with the code main returns."""
    p = subprocess.run([sys.executable, "-m", "pypm_verified", "rewrite", files["text"],
                        "-o", str(tmp_path / "o.pt2")], capture_output=True, text=True,
                       env=ENV, timeout=300)
    assert p.returncode == 2, p.stderr
    assert "not a PyTorch file" in _one_line_error(p.stderr)


OPS_LIB = """\
import torch


@torch.library.custom_op("pypmtestops::twice", mutates_args=())
def twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@twice.register_fake
def _(x):
    return torch.empty_like(x)
"""

EXPORT_WITH_OP = """\
import sys, torch
import pypmtest_oplib  # registers torch.ops.pypmtestops.twice


class M(torch.nn.Module):
    def forward(self, x):
        return torch.relu(torch.ops.pypmtestops.twice(x)) + 1


torch.export.save(torch.export.export(M(), (torch.randn(4, 8),)), sys.argv[1])
"""


@pytest.mark.slow
def test_custom_operator_library_imported_with_import_option(tmp_path):
    """Found by the zoo (Mixtral's torch.ops.transformers.grouped_mm_fallback):
    a .pt2 calling a custom operator that no known library registers
    (loader.OP_LIBRARIES, or a module named after its namespace) is exit 2,
    one line naming the operator and the remedy; with --import MODULE it
    loads and rewrites. Fresh processes: the operator is registered only by
    what each one imports."""
    (tmp_path / "pypmtest_oplib.py").write_text(OPS_LIB)
    (tmp_path / "export_it.py").write_text(EXPORT_WITH_OP)
    env = dict(ENV, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "python"), str(tmp_path)]))
    model = tmp_path / "m.pt2"
    p = subprocess.run([sys.executable, str(tmp_path / "export_it.py"), str(model)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    out = tmp_path / "o.pt2"
    base = [sys.executable, "-m", "pypm_verified", "rewrite", str(model), "-o", str(out), "-q"]
    p = subprocess.run(base, capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 2, p.stderr[-2000:]
    line = _one_line_error(p.stderr)
    for needle in ("torch.ops.pypmtestops.twice.default", "not registered",
                   "--import MODULE", "pypmtestops"):
        assert needle in line, (needle, line)
    assert not out.exists()
    p = subprocess.run(base + ["--import", "pypmtest_oplib", "--write-unchanged"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert out.exists()


# ------------------------------------------------------------ rule failures

def test_rule_with_undefined_name_fails_before_loading(files, tmp_path, capsys):
    """A rule body that would raise NameError at its first match: exit 3 and
    one line naming the rule, the name and the line, before the model is
    loaded (the model here is a text file, which loading would refuse)."""
    code, _, err = run(["rewrite", files["text"], "-o", tmp_path / "o.pt2", "--rules",
                        files["nameerror_rules"]], capsys)
    assert code == 3
    line = _one_line_error(err)
    assert "rule 'uses_undefined'" in line and "'undefined_helper'" in line
    assert re.search(r"\(line \d+\)", line) and "nothing written" in line
    assert os.listdir(tmp_path) == []


def test_rule_raising_at_its_match(files, tmp_path, capsys):
    code, _, err = run(["rewrite", files["negneg"], "-o", tmp_path / "o.pt2", "--rules",
                        files["raising_rules"]], capsys)
    assert code == 3
    line = _one_line_error(err)
    assert "rule 'boom'" in line and "raising_rules.py:" in line and "failed at line " in line
    assert "RuntimeError: boom in the rule body" in line
    assert os.listdir(tmp_path) == []


def test_undefined_globals_finds_nested_uses():
    def f(x):
        return [nowhere_defined(v) for v in x] + [len(x)]
    assert [n for n, _ in cli.undefined_globals(f)] == ["nowhere_defined"]

    def g(x):
        return json.dumps(x)
    assert cli.undefined_globals(g) == []


def test_library_rules_pass_the_undefined_name_check():
    from pypm_verified.library import default_patterns
    cli.check_undefined_globals(default_patterns())


def test_numerics_mismatch_exit_1(files, tmp_path, capsys):
    """relu(x) -> -(-x) is wrong: exit 1, nothing written, report written."""
    out, rep = tmp_path / "o.pt2", tmp_path / "r.json"
    code, _, err = run(["rewrite", files["reluplus"], "-o", out, "--rules",
                        files["relu_rules"], "--report", rep], capsys)
    assert code == 1 and "disagrees with the original" in err
    assert not out.exists() and json.loads(rep.read_text())["output"] is None
    assert _no_leftovers(tmp_path)


# ------------------------------------------------------ target, no firing

def test_default_target_is_the_programs_device(files, tmp_path, capsys):
    """On a CPU program the default target is cpu, said in the summary and
    the report; there the fused linear+relu does not pay at 4 tokens, so
    nothing fires, and the user is told so; -o still writes the output (the
    program unchanged, re-exported)."""
    out, rep = tmp_path / "o.pt2", tmp_path / "r.json"
    code, stdout, err = run(["rewrite", files["linrelu"], "-o", out, "--report", rep], capsys)
    assert code == 0, err
    assert "cpu (the program's tensors are on cpu)" in stdout
    r = json.loads(rep.read_text())
    assert r["target"] == "cpu" and r["target_reason"] == "the program's tensors are on cpu"
    assert r["firings"] == {} and r["fired"] is False and r["changed"] is False
    assert r["output"] == str(out) and r["numerics"] is None
    assert (f"no rule fired (the program is unchanged): wrote it to {out} as re-exported "
            "(-o always writes)") in stdout
    assert out.exists() and _no_leftovers(tmp_path)


def test_explicit_target_and_load_line(files, tmp_path, capsys):
    """--target cuda: the CUDA table makes the fused GEMM fire; the output is
    written and the last line is the one that loads it, which works."""
    out = tmp_path / "fast.pt2"
    code, stdout, err = run(["rewrite", files["linrelu"], "-o", out, "--target", "cuda",
                             "--max-iterations", "1"], capsys)
    assert code == 0, err
    assert "cuda (--target)" in stdout and "linear_act" in stdout
    # one pass did all the work: the iteration cap is not reported
    assert "cap reached" not in stdout
    last = stdout.strip().splitlines()[-1]
    assert last.startswith("load it with: ") and json.dumps(str(out)) in last
    ns = {}
    exec(last[len("load it with: "):], ns)  # noqa: S102 -- the line we print
    ep = ns["ep"]
    x = torch.randn(4, 8)
    ref = torch.export.load(files["linrelu"]).module()(x)
    assert torch.allclose(ep.module()(x), ref, atol=1e-5)


def test_program_device_without_tensors():
    from types import SimpleNamespace
    ep = SimpleNamespace(state_dict={}, constants={})
    assert cli.program_device(SimpleNamespace(ep=ep, args=(3,), kwargs={})) == (
        "cpu", "the program has no tensors")
    ep = SimpleNamespace(state_dict={"w": torch.zeros(1, device="meta")}, constants={})
    target, why = cli.program_device(SimpleNamespace(ep=ep, args=(), kwargs={}))
    assert target == "cpu" and "meta" in why


def test_only_merged_duplicates_is_said(files, tmp_path, capsys):
    """relu(x) + relu(x): hash-consing merges the two relus but no rule
    fires: said so; -o writes it (numerics checked), without -o nothing is
    written."""
    out = tmp_path / "o.pt2"
    code, stdout, _ = run(["rewrite", files["dups"], "-o", out, "--rules",
                           files["negneg_rules"]], capsys)
    assert code == 0 and out.exists()
    assert (f"no rule fired (the re-export only merged 1 duplicate node(s)): wrote it to {out}"
            in stdout) and "numerics" in stdout and "MISMATCH" not in stdout
    code, stdout, _ = run(["rewrite", files["dups"], "--dry-run", "--rules",
                           files["negneg_rules"]], capsys)
    assert code == 0
    assert "no rule fired: the re-export only merged 1 duplicate node(s)" in stdout


def test_write_unchanged(files, tmp_path, capsys):
    out = tmp_path / "o.pt2"
    code, stdout, _ = run(["rewrite", files["linrelu"], "-o", out, "--write-unchanged"],
                          capsys)
    assert code == 0 and out.exists()
    assert ("no rule fired (the program is unchanged): wrote the re-exported program anyway "
            "(--write-unchanged)") in stdout
    assert "load it with" in stdout


def test_rewrite_writes_and_reports(files, tmp_path, capsys):
    out, rep = tmp_path / "o.pt2", tmp_path / "r.json"
    code, stdout, err = run(["rewrite", files["negneg"], "-o", out, "--rules",
                             files["negneg_rules"], "--report", rep], capsys)
    assert code == 0, err
    r = json.loads(rep.read_text())
    assert r["firings"] == {"drop_negs": 1} and r["changed"] and r["numerics"]["ok"]
    assert r["output"] == str(out) and out.exists() and _no_leftovers(tmp_path)
    mask = os.umask(0)
    os.umask(mask)
    assert os.stat(rep).st_mode & 0o777 == 0o666 & ~mask  # the report follows the umask


class NegNegDropout(nn.Module):
    """What ``run_decompositions({})`` changes: dropout (-> clone), relu_."""

    def forward(self, x):
        return torch.relu_(-(-nn.functional.dropout(x, 0.5, training=False)))


def test_decomposed_pt2_is_not_decomposed_again(tmp_path, capsys, monkeypatch):
    """A .pt2 already in the export IR (saved after run_decompositions, as the
    loader exports) is rewritten without decomposing it again, to the same
    program as the training-IR export of the same module."""
    from pypm_verified.torch.loader import is_decomposed
    from pypm_verified.torch.pipeline import _renamed_structure
    x = torch.randn(4, 8)
    raw = torch.export.export(NegNegDropout(), (x,))
    dec = raw.run_decompositions({})
    assert not is_decomposed(raw) and is_decomposed(dec)
    rules = tmp_path / "rules.py"
    rules.write_text(NEGNEG_RULES)
    calls = []
    real = torch.export.ExportedProgram.run_decompositions

    def counting(self, *a, **k):
        calls.append(self.dialect)
        return real(self, *a, **k)
    monkeypatch.setattr(torch.export.ExportedProgram, "run_decompositions", counting)
    outs = {}
    for name, ep in (("raw", raw), ("dec", dec)):
        src, out = tmp_path / f"{name}.pt2", tmp_path / f"{name}.rw.pt2"
        torch.export.save(ep, str(src))
        before = len(calls)
        code, _, err = run(["rewrite", src, "-o", out, "--rules", rules], capsys)
        assert code == 0, err
        assert len(calls) - before == (1 if name == "raw" else 0), calls
        outs[name] = torch.export.load(str(out))
    assert _renamed_structure(outs["raw"].graph_module) \
        == _renamed_structure(outs["dec"].graph_module)
    assert torch.equal(outs["raw"].module()(x), outs["dec"].module()(x))
    assert torch.equal(outs["dec"].module()(x), torch.relu(x))


def test_training_mode_warning(tmp_path, capsys):
    src = tmp_path / "train.pt"
    torch.save({"model": WithDropout().train(), "example_inputs": (torch.randn(4, 8),)},
               str(src))
    code, _, err = run(["rewrite", src, "-o", tmp_path / "o.pt2", "--allow-pickle"], capsys)
    assert code == 0
    assert any(ln.startswith("warning:") and "train" in ln for ln in err.splitlines()), err


# ---------------------------------------------------------- iteration cap

def test_cap_reported_only_when_another_pass_had_work(files, tmp_path, capsys):
    rep = tmp_path / "r.json"
    base = ["rewrite", files["reluplus"], "--dry-run", "--no-check", "--report", rep]
    # relu -> -(-x), then nothing matches the new nodes: one pass is a fixpoint
    code, stdout, _ = run(base + ["--rules", files["relu_rules"], "--max-iterations", "1"],
                          capsys)
    r = json.loads(rep.read_text())
    assert code == 0 and r["iterations"] == 1 and r["firings"] == {"relu_to_negneg": 1}
    assert r["cap_hit"] is False and "cap reached" not in stdout
    # with the -(-x) -> x rule too, pass 2 has work: at cap 1 the cap is hit
    code, stdout, _ = run(base + ["--rules", files["both_rules"], "--max-iterations", "1"],
                          capsys)
    r = json.loads(rep.read_text())
    assert r["cap_hit"] is True and "cap reached: not a fixpoint" in stdout
    # and at cap 2 both fired and it is a fixpoint
    code, stdout, _ = run(base + ["--rules", files["both_rules"], "--max-iterations", "2"],
                          capsys)
    r = json.loads(rep.read_text())
    assert r["firings"] == {"relu_to_negneg": 1, "drop_negs": 1} and r["cap_hit"] is False


# -------------------------------------------------------------- benchmark

def test_interleaved_timings_alternate_and_compare():
    calls, now = [], [0.0]

    def clock():
        return now[0]

    def fa():
        calls.append("a")
        now[0] += 2.0

    def fb():
        calls.append("b")
        now[0] += 1.0
    ta, tb = cli.interleaved_timings(fa, fb, rounds=6, warmup=1, clock=clock)
    # a warm-up round, Timer.blocked_autorange on each (a call to size the
    # block, one timed block: 1 call, as a call takes 2 s and 1 s), then
    # the rounds, alternating which goes first
    assert calls[:6] == list("abaabb") and calls[6:] == list("abbaabbaabba")
    assert ta == [2.0] * 6 and tb == [1.0] * 6
    c = cli.compare_timings(ta, tb)
    assert c["speedup"] == 2.0 and not c["noisy"]
    assert not any(ln.startswith("warning") for ln in cli.benchmark_lines(c))
    # overlapping spreads: the ratio is flagged as noise
    c = cli.compare_timings([1.0, 1.5, 2.0, 3.0, 1.2], [1.1, 2.5, 1.4, 1.9, 1.0])
    assert c["noisy"]
    assert c["original"]["min_s"] == 1.0 and c["original"]["max_s"] == 3.0
    assert any("not meaningful" in ln for ln in cli.benchmark_lines(c))


def test_benchmark_times_blocks_on_torchs_synchronizing_clock(monkeypatch):
    """A tiny program is timed in blocks of calls (Timer's block size), each
    time per call; without ``clock``, the clock is ``torch.utils.benchmark``'s
    (which synchronizes the accelerator before it reads the time)."""
    import torch.utils.benchmark as tb_mod
    now, reads = [0.0], []

    def clock():
        reads.append(now[0])
        return now[0]

    def fa():
        now[0] += 1e-5

    def fb():
        now[0] += 3e-5
    monkeypatch.setattr(tb_mod, "timer", clock)
    b = cli.timing.benchmark(fa, fb, rounds=4, warmup=0)
    assert reads  # the default clock is torch.utils.benchmark.timer
    assert b["calls_per_run"] == {"original": 100, "rewritten": 10}
    assert b["original"]["median_s"] == pytest.approx(1e-5)
    assert b["rewritten"]["median_s"] == pytest.approx(3e-5)
    assert b["speedup"] == pytest.approx(1 / 3) and b["runs"] == 4


def test_benchmark_option(files, tmp_path, capsys):
    rep = tmp_path / "r.json"
    code, stdout, err = run(["rewrite", files["negneg"], "--dry-run", "--rules",
                             files["negneg_rules"], "--benchmark", "--benchmark-runs", "5",
                             "--report", rep], capsys)
    assert code == 0, err
    b = json.loads(rep.read_text())["benchmark"]
    assert b["runs"] == 5 and b["original"]["q1_s"] <= b["original"]["median_s"]
    assert b["original"]["min_s"] <= b["original"]["q1_s"] and "noisy" in b
    assert "5 interleaved runs each" in stdout and "IQR" in stdout
    calls = b["calls_per_run"]  # a tiny program: blocks of calls, timed per call
    assert calls["original"] >= 1 and calls["rewritten"] >= 1
    assert ("call(s) of the original" in stdout) == (max(calls.values()) > 1)
    assert ("not meaningful" in err) == b["noisy"]


# ---------------------------------------------------------------- signals

@pytest.mark.parametrize("sig,code,word", [(signal.SIGINT, 130, "interrupted"),
                                           (signal.SIGTERM, 143, "terminated")])
def test_signal_prints_one_line(files, tmp_path, sig, code, word):
    """Ctrl-C (or SIGTERM) in the middle of a rewrite: one line, the
    documented code, nothing written."""
    mark = tmp_path / "firing"
    rules = tmp_path / "slow_rules.py"
    rules.write_text(SLOW_RULES.format(mark=str(mark)))
    work = tmp_path / "work"
    work.mkdir()
    out = work / "o.pt2"
    p = subprocess.Popen([sys.executable, "-m", "pypm_verified", "rewrite", files["negneg"],
                          "-o", str(out), "--rules", str(rules), "--report",
                          str(work / "r.json"), "-q"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        deadline = time.time() + 240
        while not mark.exists() and p.poll() is None and time.time() < deadline:
            time.sleep(0.1)
        assert mark.exists(), p.communicate(timeout=10)
        p.send_signal(sig)
        stdout, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == code, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == f"{word}; nothing written"
    assert os.listdir(work) == []


def test_interrupt_during_save_leaves_nothing(files, tmp_path, capsys, monkeypatch):
    """Ctrl-C while the output is being written (simulated: torch's save
    writes half a file, then the interrupt): one line, 130, and neither the
    output nor a temporary is left."""
    def half_then_interrupt(ep, f, *a, **k):  # f: the file object save_atomic gives
        f.write(b"PK\x03\x04 half an archive")
        raise KeyboardInterrupt
    monkeypatch.setattr(torch.export, "save", half_then_interrupt)
    code, _, err = run(["rewrite", files["negneg"], "-o", tmp_path / "o.pt2", "--rules",
                        files["negneg_rules"], "--report", tmp_path / "r.json"], capsys)
    assert code == 130 and err.strip().splitlines()[-1] == "interrupted; nothing written"
    assert os.listdir(tmp_path) == []


# -------------------------------------------------------------- the docs

def test_exit_codes_documented_identically(capsys):
    table = cli.exit_code_table()
    assert table in cli.__doc__
    assert main(["rewrite", "--help"]) == 0
    help_text = capsys.readouterr().out
    assert table in help_text
    assert main(["--help"]) == 0
    assert table in capsys.readouterr().out
    readme = _exit_code_docs()
    for code, text in cli.EXIT_CODES:
        assert f"| {code} | {text} |" in readme, code
    # the thresholds file --help names exists, and so does the kernels module
    named = re.findall(r"python/pypm_verified/[\w/]+\.(?:json|py)", help_text)
    assert "python/pypm_verified/torch/profitability.json" in named
    for path in named:
        assert os.path.exists(os.path.join(ROOT, path)), path
    assert "pypm_verified/rules/" not in help_text
    assert "import\npypm_verified.torch.kernels" in help_text or \
        "import pypm_verified.torch.kernels" in help_text
    assert "pm.load(path)" in help_text


def _exit_code_docs() -> str:
    """The documentation of the exit codes and mistakes: the README's
    section, or the documentation site's page it moved to."""
    texts = []
    for path in ("README.md", os.path.join("docs", "reference", "exit-codes.md")):
        if os.path.exists(os.path.join(ROOT, path)):
            with open(os.path.join(ROOT, path)) as f:
                text = f.read()
            if "What a user gets for the mistakes" in text or "| 0 | ok" in text:
                texts.append(text)
    assert texts, "no documentation of the exit codes"
    return "\n".join(texts)


def test_readme_lists_the_bad_input_cases():
    docs = _exit_code_docs()
    section = docs[docs.index("What a user gets for the mistakes"):]
    for case in CASES + ["rule body raises NameError", "rule raises at its match",
                         "Ctrl-C", "unwritable directory"]:
        assert f"| {case} |" in section, case


_SIGTERM_LOST_ONCE = r'''
import os, signal, time
from pypm_verified.cli import app
signal.signal(signal.SIGTERM, app._on_sigterm)


class Lands:
    def __del__(self):  # the signal's handler runs here: Python drops its exception
        os.kill(os.getpid(), signal.SIGTERM)
        t = time.monotonic()
        while time.monotonic() - t < 0.5:
            pass


Lands()
t = time.monotonic()
try:
    while time.monotonic() - t < 30:
        time.sleep(0.05)
    print("not terminated")
except app.Terminated:
    print("terminated after %.1f s" % (time.monotonic() - t))
'''


def test_sigterm_lost_in_a_finalizer_is_raised_again():
    """A SIGTERM whose exception Python drops (raised in a ``__del__`` or a
    weakref callback) still ends the command: the handler signals the main
    thread again until it is caught."""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    p = subprocess.run([sys.executable, "-c", _SIGTERM_LOST_ONCE], capture_output=True,
                       text=True, timeout=60, env=env)
    assert "Exception ignored" in p.stderr, p.stderr  # the first one was dropped
    assert p.stdout.startswith("terminated after"), p.stdout + p.stderr
    assert float(p.stdout.split()[2]) < 10
