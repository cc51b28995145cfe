"""The path of a pip user, as the README tells it: the example models are a
command of the package (``pypm-verified example``), ``check-rules`` without
the ``[check]`` extra says which extra to install (and ``--no-symbolic``
needs none), the ``[torch]`` extra brings what torch needs to import
quietly, and the documentation builds from the ``[docs]`` extra alone, its
API page rendering the docstrings' cross-references.

A missing package is simulated in a subprocess by a ``sitecustomize`` that
sets ``sys.modules[NAME] = None``: ``import NAME`` then fails as if it were
not installed, and ``importlib.util.find_spec(NAME)`` says None.
(tests/test_wheel.py runs the same commands in a fresh venv with the wheel
and its ``[torch]`` extra only.)
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from pypm_verified import cli

ROOT = Path(__file__).resolve().parents[1]

#: what a docs page shows when a Sphinx role is not rendered
RAW_ROLE = re.compile(r":(?:py:)?(?:mod|class|func|meth|attr|data|exc|obj):(?:<code>|`)")


def _hiding(tmp_path: Path, *modules: str) -> dict:
    """The environment of a subprocess in which ``modules`` are not installed."""
    d = tmp_path / ("hide_" + "_".join(modules))
    d.mkdir(exist_ok=True)
    (d / "sitecustomize.py").write_text(
        "import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in modules))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(d), str(ROOT / "python")]
                                        + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def _cli(args, cwd, env=None, timeout=900):
    return subprocess.run([sys.executable, "-m", "pypm_verified", *args], cwd=str(cwd),
                          env=env, capture_output=True, text=True, timeout=timeout)


def _error_lines(stderr: str):
    return [line for line in stderr.splitlines() if line.strip()]


# ---------------------------------------------------------------- example

def test_example_mlp_writes_a_pt2_that_rewrite_rewrites(tmp_path, lib, capsys):
    torch = pytest.importorskip("torch")
    out = tmp_path / "mlp.pt2"
    assert cli.main(["example", "mlp", "-o", str(out)]) == 0
    assert re.fullmatch(r"wrote .*mlp\.pt2 \(mlp, size small, \d+ bytes\)\n",
                        capsys.readouterr().out)
    ep = torch.export.load(str(out))  # a plain .pt2: loadable without pypm_verified
    x = torch.randn(2, 16, 64)
    assert ep.module()(x=x).shape == (2, 16, 64)
    assert [p.name for p in tmp_path.iterdir()] == ["mlp.pt2"]  # no temporary left
    fast, report = tmp_path / "mlp.fast.pt2", tmp_path / "r.json"
    assert cli.main(["rewrite", str(out), "-o", str(fast), "--report", str(report),
                     "-q"]) == 0
    r = json.loads(report.read_text())
    # the hand-written tanh GELU of each of the 2 blocks becomes aten.gelu,
    # then each linear fuses with it
    assert r["firings"] == {"gelu_tanh": 2, "linear_act": 2}, r["firings"]
    assert fast.stat().st_size > 0


def test_example_attention_fires_sdpa_when_forced(tmp_path, lib):
    pytest.importorskip("torch")
    out = tmp_path / "a.pt2"
    assert cli.main(["example", "attention", "-o", str(out), "-q"]) == 0
    report = tmp_path / "r.json"
    assert cli.main(["rewrite", str(out), "--dry-run", "--ignore-profitability",
                     "--report", str(report), "-q"]) == 0
    assert json.loads(report.read_text())["firings"].get("sdpa") == 2


def test_example_dynamic_accepts_other_shapes(tmp_path):
    torch = pytest.importorskip("torch")
    out = tmp_path / "d.pt2"
    assert cli.main(["example", "mlp", "--dynamic", "--layers", "1", "-o", str(out),
                     "-q"]) == 0
    m = torch.export.load(str(out)).module()
    assert m(x=torch.randn(3, 7, 64)).shape == (3, 7, 64)


def test_example_replaces_a_file_whole(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "m.pt2"
    out.write_bytes(b"old")
    out.chmod(0o640)
    assert cli.main(["example", "mlp", "--layers", "1", "-o", str(out), "-q"]) == 0
    assert out.read_bytes()[:2] == b"PK" and oct(out.stat().st_mode & 0o777) == "0o640"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.pt2"]


@pytest.mark.parametrize("args, message", [
    (["example", "resnet"], "error: argument NAME: invalid choice: 'resnet' (choose from "
                            "'attention', 'bert',"),
    (["example", "mlp", "--size", "huge"], "error: argument --size: invalid choice: 'huge'"),
    (["example", "mlp", "--layers", "0"], "error: argument --layers: 0 is too few"),
    (["example"], "error: example: give a model name (one of attention, bert, distilbert, "
                  "gpt2, llama, mlp, qwen2, roberta) or --list"),
    (["example", "mlp", "-o", "no_dir/m.pt2"], "error: -o no_dir/m.pt2: directory no_dir "
                                               "does not exist"),
    (["example", "mlp", "-o", "."], "error: -o .: is a directory; give a file name"),
])
def test_example_bad_input_is_one_line_and_exit_2(args, message, tmp_path, monkeypatch,
                                                  capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(args) == cli.EXIT_INPUT
    err = _error_lines(capsys.readouterr().err)
    assert len(err) == 1 and err[0].startswith(message), err
    assert list(tmp_path.iterdir()) == []


def test_example_list_names_the_extra(capsys):
    assert cli.main(["example", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "mlp" in lines and "attention" in lines
    assert "bert  (needs the hf extra)" in lines


def test_example_of_a_huggingface_model_without_transformers(tmp_path):
    r = _cli(["example", "bert", "-o", "bert.pt2"], tmp_path,
             env=_hiding(tmp_path, "transformers"))
    assert r.returncode == 2, r.stderr
    assert _error_lines(r.stderr) == [
        "error: example bert needs transformers, which is not installed: pip install "
        "'pypm_verified[hf]' -c requirements/constraints.txt"]
    assert list(tmp_path.glob("*.pt2")) == []


def test_examples_module_api():
    from pypm_verified import examples
    assert set(examples.MODELS) == {"bert", "roberta", "distilbert", "gpt2", "llama", "qwen2"}
    assert set(examples.TORCH_MODELS) == {"mlp", "attention"}
    assert examples.requirement("bert") == ("transformers", "hf")
    assert examples.requirement("mlp") == ("", "")
    with pytest.raises(ValueError, match="unknown example model 'nope'; expected one of"):
        examples.build("nope")
    with pytest.raises(ValueError, match="unknown size 'huge'"):
        examples.build("mlp", "huge")


def test_plain_torch_example_pickles(tmp_path):
    """``fmt="pickle"`` (the script's ``--format pickle``): the plain-torch
    modules' classes are found by name in a fresh process."""
    pytest.importorskip("torch")
    from pypm_verified import examples
    path = tmp_path / "m.pt"
    assert examples.save("attention", str(path), layers=1, fmt="pickle") > 0
    code = ("import torch\n"
            f"d = torch.load({str(path)!r}, weights_only=False)\n"
            "print(type(d['model']).__module__, tuple(d['model'](*d['example_inputs']).shape))")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["pypm_verified.examples", "(2,", "16,", "64)"]
    with pytest.raises(ValueError, match="dynamic shapes need the pt2 format"):
        examples.save("mlp", str(path), dynamic=True, fmt="pickle")


def test_checkout_script_still_works(tmp_path):
    pytest.importorskip("torch")
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "models.py"), "mlp",
                        "--size", "small", "-o", "m.pt2"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("wrote m.pt2 (mlp, size small, ")
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import models
    finally:
        sys.path.remove(str(ROOT / "examples"))
    from pypm_verified import examples
    assert models.build is examples.build and models.MODELS is examples.MODELS


# ------------------------------------------------------------ check-rules

Z3_LINE = ("error: check-rules proves the rules with z3, which is not installed: pip install "
           "'pypm_verified[check]' -c requirements/constraints.txt (or pass --no-symbolic to "
           "test the rules without the proofs)")


def test_check_rules_without_z3_is_one_line_and_exit_2(tmp_path, lib):
    pytest.importorskip("torch")
    r = _cli(["check-rules", "--fast", "--rules", "gelu"], tmp_path,
             env=_hiding(tmp_path, "z3"))
    assert r.returncode == 2, r.stderr[-3000:]
    assert _error_lines(r.stderr) == [Z3_LINE]
    assert r.stdout == ""


@pytest.mark.slow
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_check_rules_no_symbolic_needs_no_z3(tmp_path, lib, jobs):
    pytest.importorskip("torch")
    r = _cli(["check-rules", "--fast", "--rules", "gelu", "--no-symbolic", "--jobs", jobs,
              "--report", "r.json", "-q"], tmp_path, env=_hiding(tmp_path, "z3"))
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads((tmp_path / "r.json").read_text())
    assert {x["rule"]: x["status"] for x in doc["rules"]} == {"gelu_erf": "tested",
                                                             "gelu_tanh": "tested"}
    assert "z3" not in r.stderr


def test_the_checker_imports_and_tests_without_z3(tmp_path):
    """Only the symbolic proofs need z3: the checker's modules import
    without it, and a rule is tested with ``symbolic=False``."""
    pytest.importorskip("torch")
    code = ("import sys\n"
            "from pypm_verified.checking import check_rule\n"
            "from pypm_verified.library import gelu\n"
            "assert 'pypm_verified.checking.smt' not in sys.modules\n"
            "r = check_rule(gelu.GeluTanh, gelu.gelu_tanh, examples=4, guards=False,\n"
            "               symbolic=False)\n"
            "print(r.status, 'pypm_verified.checking.smt' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                       text=True, env=_hiding(tmp_path, "z3"), timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["tested", "False"], r.stdout


# ---------------------------------------------------------------- extras

def _pins():
    pins = {}
    for line in (ROOT / "requirements" / "constraints.txt").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==(\S+)", line)
        if m:
            pins[m.group(1).lower()] = m.group(2)
    return pins


def test_torch_extra_brings_numpy_pinned_as_installed():
    """torch warns "Failed to initialize NumPy" at import without numpy: the
    [torch] extra brings it, pinned with torch (make venv installs the pins)."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    names = [re.split(r"[<>=!~ ;\[]", r, maxsplit=1)[0].lower() for r in extras["torch"]]
    assert "numpy" in names and "torch" in names
    pins = _pins()
    assert "numpy" in pins and "torch" in pins
    from importlib.metadata import version
    assert version("numpy") == pins["numpy"]
    assert version("torch").split("+")[0] == pins["torch"]


def test_torch_imports_without_a_numpy_warning(tmp_path):
    pytest.importorskip("torch")
    r = subprocess.run([sys.executable, "-W", "default", "-c", "import torch, torch.export"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "NumPy" not in r.stderr, r.stderr
    # and what the extra prevents: without numpy, torch warns
    r = subprocess.run([sys.executable, "-c", "import torch; torch.zeros(1)"], cwd=tmp_path,
                       capture_output=True, text=True, env=_hiding(tmp_path, "numpy"),
                       timeout=300)
    assert "Failed to initialize NumPy" in r.stderr, r.stderr


# ------------------------------------------------------------------ docs

def _mkdocs():
    mkdocs = shutil.which("mkdocs", path=os.path.dirname(sys.executable))
    if mkdocs is None:
        if os.environ.get("PYPM_REQUIRE_TOOLS"):
            pytest.fail("mkdocs is not installed (the [docs] extra; make venv installs it)")
        pytest.skip("mkdocs is not installed (the [docs] extra)")
    return mkdocs


@pytest.fixture(scope="module")
def site_without_torch(tmp_path_factory):
    """The site built with torch (and transformers, z3) hidden: what the
    [docs] extra alone builds."""
    mkdocs = _mkdocs()
    tmp = tmp_path_factory.mktemp("docs")
    env = _hiding(tmp, "torch", "transformers", "z3")
    env["NO_MKDOCS_2_WARNING"] = "1"
    r = subprocess.run([mkdocs, "build", "--strict", "-d", str(tmp / "site")], cwd=ROOT,
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "WARNING" not in r.stderr, r.stderr[-3000:]
    assert "operators page: torch is not installed; keeping the committed table" in r.stderr
    return tmp / "site"


@pytest.mark.docs
def test_docs_build_without_torch(site_without_torch):
    ops = (site_without_torch / "reference" / "operators.html").read_text()
    assert "aten.gelu" in ops  # the committed table
    cli_page = (site_without_torch / "reference" / "cli.html").read_text()
    assert "pypm-verified example" in cli_page and "--no-symbolic" in cli_page


@pytest.mark.docs
def test_api_page_renders_the_cross_references(site_without_torch):
    api = (site_without_torch / "reference" / "api.html").read_text()
    raw = RAW_ROLE.findall(api)
    assert not raw, f"{len(raw)} raw Sphinx roles on the API page"
    links = dict((href, title) for href, title in re.findall(
        r'<a class="autorefs autorefs-internal"[^>]*href="([^"]*)"[^>]*><code>([^<]*)</code>',
        api))
    # :exc:`OutOfFuel` in the engines' docstrings, an import of errors.OutOfFuel
    assert "#pypm_verified.errors.OutOfFuel" in links
    # :meth:`input` in a method of Graph: relative to the class
    assert links.get("#pypm_verified.Graph.input") == "input"
    # a target the site does not document is the name in code font, no link
    assert '<span title="collections.Counter"><code>collections.Counter</code></span>' in api


def test_roles_resolve_relative_names():
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    try:
        import roles
    finally:
        sys.path.remove(str(ROOT / "docs" / "hooks"))
    griffe = pytest.importorskip("griffe")
    loader = griffe.GriffeLoader(search_paths=[str(ROOT / "python")])
    pkg = loader.load("pypm_verified")
    loader.resolve_aliases(external=False)
    col = loader.modules_collection
    cli_pkg = pkg["cli"]
    sym = pkg["cli.checkrules"]
    assert roles.resolve(pkg, ".core", col) == "pypm_verified.core"  # a package: its own
    assert roles.resolve(cli_pkg, ".rewrite", col) == "pypm_verified.cli.rewrite"
    # a module: from its package; an import followed to what it imports
    assert roles.resolve(sym, ".exitcodes.UsageError", col) == \
        "pypm_verified.cli.exitcodes.UsageError"
    assert roles.resolve(sym["check_rules_main"], "UsageError", col) == \
        "pypm_verified.cli.exitcodes.UsageError"
    out = roles.convert("see :func:`~pypm_verified._atomic.write_atomic` and "
                        ":class:`the graph <pypm_verified.Graph>`", pkg, col)
    assert out == ('see <autoref identifier="pypm_verified._atomic.write_atomic" optional>'
                   '<code>write_atomic</code></autoref> and <autoref identifier='
                   '"pypm_verified.core.graph.Graph" optional><code>the graph</code></autoref>')
