"""No silent bypass of the rewrite validation.

Every rewrite says whether the verified rewrite validator checked it
("validated (N passes)") or why not ("not validated: REASON"), in every
report: the ``RewriteReport`` (``.validation``), the command line's summary
table and result line, ``--report``'s JSON, ``--markdown`` and ``--html``.
The bypasses: ``PYPM_VALIDATE=0``, an engine library that cannot be loaded
(the reference engine runs without it, the validator cannot), a library
whose build id is not the package's (refused at load; used, and reported,
with ``PYPM_ALLOW_BUILD_MISMATCH=1``), and the term-graph search
(:mod:`pypm_verified.rewriting.search`), which the validator does not check.
"""
import html
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

import pypm_verified as pm
from pypm_verified import _version
from pypm_verified.engines import binding
from pypm_verified.rewriting import report as rreport
from pypm_verified.rewriting import search as tsearch

torch = pytest.importorskip("torch")

from pypm_verified.cli import main  # noqa: E402
from pypm_verified.torch.driver import Driver  # noqa: E402
from pypm_verified.torch.ops import Neg  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

RULES = """import pypm_verified as pm
from pypm_verified.torch.ops import Neg

@pm.pattern
def NN(x):
    return Neg(Neg(x))

@pm.rule(NN)
def drop_negs(x):
    return x
"""

OFF = "not validated: validation turned off by PYPM_VALIDATE=0"
NOT_LOADED = "not validated: native library not loaded: "
SEARCH = "not validated: term-graph search is not validated"


class NegNeg(torch.nn.Module):
    def forward(self, x):
        return -(-x) * 2


@pm.pattern
def NN(x):
    return Neg(Neg(x))


@pm.rule(NN)
def drop_negs(x):
    return x


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("validation_status")
    model, rules = d / "negneg.pt2", d / "rules.py"
    torch.export.save(torch.export.export(NegNeg(), (torch.randn(4, 8),)), str(model))
    rules.write_text(RULES)
    return {"model": str(model), "rules": str(rules)}


@pytest.fixture(autouse=True)
def _validation_on(monkeypatch):
    monkeypatch.delenv("PYPM_VALIDATE", raising=False)
    monkeypatch.delenv(binding.ALLOW_MISMATCH_VAR, raising=False)


def _cli(files, tmp_path, capsys, *extra):
    """The rewrite with every report: (exit code, stdout, JSON, Markdown,
    the HTML page's validation line or None without Graphviz)."""
    rep, md, page = tmp_path / "r.json", tmp_path / "r.md", tmp_path / "r.html"
    argv = ["rewrite", files["model"], "--rules", files["rules"], "--dry-run",
            "--report", rep, "--markdown", md, *extra]
    if shutil.which("dot"):
        argv += ["--html", page]
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    shown = None
    if shutil.which("dot"):
        m = re.search(r'<div class="validation"[^>]*>([^<]*)</div>', page.read_text())
        shown = html.unescape(m.group(1))
    return out, json.loads(rep.read_text()), md.read_text(), shown


def _result_line(out: str) -> str:
    return [ln for ln in out.splitlines() if ln.startswith("fired ")][-1]


def _summary_row(out: str) -> str:
    """The summary table's "validation" row, its cell's lines joined."""
    rows, on = [], False
    for ln in out.splitlines():
        cells = [c.strip() for c in ln.strip("│|").split("│")]
        if len(cells) == 2:
            if cells[0] == "validation":
                on = True
            elif cells[0]:
                on = False
            if on:
                rows.append(cells[1])
    return " ".join(rows)


def _graph():
    g = pm.Graph()
    x = g.input("x")
    g.output(g.apply(Neg, g.apply(Neg, x)))
    return g


def _fx():
    return torch.export.export(NegNeg(), (torch.randn(3),)).graph_module


# ------------------------------------------------------------- validated

def test_validated_run_says_how_many_passes(files, tmp_path, capsys, lib):
    out, rep, md, shown = _cli(files, tmp_path, capsys)
    assert rep["firings"] == {"drop_negs": 1}
    assert rep["validation"] == {"validated": True, "reason": None, "checks": 1, "unit": "pass",
                                 "seconds": rep["validation"]["seconds"],
                                 "summary": "validated (1 pass)"}
    assert rep["validation"]["seconds"] > 0
    assert _summary_row(out) == "validated (1 pass)"
    assert "not validated" not in out  # the result line says nothing more
    assert "**Validation:** validated (1 pass)" in md
    assert shown in (None, "validated (1 pass)")
    # the API: the FX driver counts passes, pm.rewrite firings
    assert str(Driver(_fx(), [NN]).run().validation) == "validated (1 pass)"
    r = pm.rewrite(_graph(), [NN])
    assert r.validation.validated and str(r.validation) == "validated (1 firing)"
    assert r.as_dict()["validation"]["checks"] == 1


def test_report_made_by_hand_is_not_validated():
    r = pm.RewriteReport()
    assert not r.validation.validated
    assert str(r.validation) == "not validated: no validation was recorded for this rewrite"
    assert r.as_dict()["validation"]["validated"] is False
    assert "**Validation: not validated:" in r.markdown()


# ------------------------------------------------------------- bypasses

def test_pypm_validate_0_shows_everywhere(files, tmp_path, capsys, monkeypatch, lib):
    monkeypatch.setenv("PYPM_VALIDATE", "0")
    out, rep, md, shown = _cli(files, tmp_path, capsys)
    assert rep["firings"] == {"drop_negs": 1}
    assert rep["validation"]["validated"] is False
    assert rep["validation"]["summary"] == OFF
    assert rep["validation"]["reason"] == "validation turned off by PYPM_VALIDATE=0"
    assert _result_line(out).endswith("; " + OFF)  # shown with -q too
    assert _summary_row(out) == OFF
    assert f"**Validation: {OFF}**" in md
    assert shown in (None, OFF)
    assert str(Driver(_fx(), [NN]).run().validation) == OFF
    assert str(pm.rewrite(_graph(), [NN]).validation) == OFF
    code = main(["rewrite", files["model"], "--rules", files["rules"], "--dry-run", "-q"])
    out, _ = capsys.readouterr()
    assert code == 0 and out.splitlines() == [
        f"fired 1 rewrite(s): drop_negs x1; numerics ok; not written (--dry-run); {OFF}"]


def test_library_not_loaded_shows_everywhere(files, tmp_path, capsys, monkeypatch):
    missing = tmp_path / "missing.so"
    monkeypatch.setenv(binding.ENV_VAR, str(missing))
    out, rep, md, shown = _cli(files, tmp_path, capsys, "--engine", "reference")
    assert rep["firings"] == {"drop_negs": 1} and rep["engine"] == "reference"
    why = f"the verified engine library was not found at {missing}"
    summary = rep["validation"]["summary"]
    assert summary.startswith(NOT_LOADED + why) and rep["validation"]["validated"] is False
    assert _result_line(out).endswith("; " + summary)
    assert _summary_row(out).replace(" ", "") == summary.replace(" ", "")  # wrapped
    assert f"**Validation: {summary}**" in md
    assert shown in (None, summary)
    v = Driver(_fx(), [NN], engine="reference").run().validation
    assert str(v) == summary
    v = pm.rewrite(_graph(), [NN], engine="reference").validation
    assert not v.validated and v.reason.startswith("native library not loaded: " + why)


def test_term_graph_search_is_not_validated(lib):
    for strategy in ("greedy", "best_first"):
        res = tsearch.search(_graph(), [NN], strategy)
        assert res.steps and res.cost < res.start_cost  # it did rewrite
        assert str(res.validation) == SEARCH
        assert res.as_dict()["validation"]["summary"] == SEARCH
        assert res.as_dict()["validation"]["validated"] is False


# ------------------------------------------------------------- build id

def test_package_build_id_of_the_checkout(lib):
    expected, where = _version.package_build_id()
    assert expected == _version.expected_build_id(ROOT) == binding.build_info()[0]
    assert where == f"the sources in {os.path.join(ROOT, 'ocaml')}"
    assert binding.build_id_mismatch() is None


def test_package_build_id_recorded_by_a_wheel(monkeypatch, tmp_path):
    """Outside a checkout (an installed wheel), the id its build recorded."""
    monkeypatch.setattr(_version, "checkout_root", lambda: None)
    recorded = tmp_path / "BUILD_ID"
    monkeypatch.setattr(_version, "RECORDED_BUILD_ID", str(recorded))
    got, why = _version.package_build_id()
    assert got is None and "no build id recorded with the package" in why
    recorded.write_text("not an id\n")
    assert _version.package_build_id() == (None, f"{recorded} does not hold a build id")
    recorded.write_text("ab" * 32 + "\n")
    assert _version.package_build_id() == (
        "ab" * 32, f"recorded by the package's build in {recorded}")


def test_mismatch_message(lib, monkeypatch):
    """The check itself, on the loaded library with the package's id
    replaced (in a subprocess below: a real other library)."""
    own = binding.build_info()[0]
    assert binding._build_id_mismatch(lib, "L.so") is None
    monkeypatch.setattr(_version, "package_build_id", lambda: ("f" * 64, "the sources in S"))
    assert binding._build_id_mismatch(lib, "L.so") == (
        f"L.so has build id {own}, this package expects {'f' * 64} (from the sources in S)")
    monkeypatch.setattr(_version, "package_build_id", lambda: (None, "why unknown"))
    assert binding._build_id_mismatch(lib, "L.so") == (
        f"L.so has build id {own}, and the build id this package expects is unknown: "
        "why unknown")


@pytest.fixture(scope="module")
def other_library(tmp_path_factory):
    """A copy of the library with another build id compiled in (its one
    occurrence of the id replaced by zeros): a library built from other
    sources, as far as the check can tell."""
    path = binding.engine_library_path()
    if not os.path.isfile(path) or binding.build_info() is None:
        pytest.skip("no engine library")
    own = binding.build_info()[0].encode()
    data = open(path, "rb").read()
    assert data.count(own) == 1
    other = tmp_path_factory.mktemp("other_lib") / "libpypm_verified.so"
    other.write_bytes(data.replace(own, b"0" * 64))
    return str(other), own.decode()


def _run(args, **env):
    e = {k: v for k, v in os.environ.items()
         if k not in ("PYPM_VALIDATE", binding.ALLOW_MISMATCH_VAR)}
    e.update(PYTHONPATH=os.path.join(ROOT, "python"), **env)
    return subprocess.run([sys.executable, *args], env=e, capture_output=True, text=True,
                          timeout=600)


def test_mismatch_is_refused(other_library, files, tmp_path):
    other, own = other_library
    p = _run(["-c", "from pypm_verified.engines import binding\n"
                    "try:\n    binding.open_engine_library()\n"
                    "except binding.BuildIdMismatch as e:\n    print('refused:', e)\n"
                    "print(binding.available(), binding.build_info()[0])"],
             PYPM_VERIFIED_LIB=other)
    assert p.returncode == 0, p.stderr
    refused, last = p.stdout.strip().splitlines()
    assert refused.startswith(f"refused: {other} has build id {'0' * 64}, this package "
                              f"expects {own} (from the sources in ")
    assert "rebuild it with `make lib`" in refused and "PYPM_ALLOW_BUILD_MISMATCH=1" in refused
    assert last == f"False {'0' * 64}"  # not available; its id still readable
    p = _run(["-m", "pypm_verified", "rewrite", files["model"], "--rules", files["rules"],
              "-o", tmp_path / "o.pt2"], PYPM_VERIFIED_LIB=other)
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert p.returncode == 2 and len(errors) == 1, p.stderr
    assert errors[0].startswith(f"error: --engine verified: {other} has build id {'0' * 64}, "
                                f"this package expects {own}")
    assert not (tmp_path / "o.pt2").exists()
    p = _run(["-m", "pypm_verified", "--version"], PYPM_VERIFIED_LIB=other)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[1] == f"engine build id: {'0' * 64}"
    assert lines[-1].startswith(f"this package expects build id {own} (the sources in ")
    assert lines[-1].endswith("refused unless PYPM_ALLOW_BUILD_MISMATCH=1")


def test_mismatch_override_is_reported(other_library, files, tmp_path):
    other, own = other_library
    rep, md = tmp_path / "r.json", tmp_path / "r.md"
    p = _run(["-m", "pypm_verified", "rewrite", files["model"], "--rules", files["rules"],
              "--dry-run", "--report", rep, "--markdown", md],
             PYPM_VERIFIED_LIB=other, PYPM_ALLOW_BUILD_MISMATCH="1")
    assert p.returncode == 0, p.stderr
    v = json.loads(rep.read_text())["validation"]
    why = (f"build id mismatch: {other} has build id {'0' * 64}, this package expects {own}")
    assert v["validated"] is False and v["reason"].startswith(why)
    assert v["reason"].endswith("(used because PYPM_ALLOW_BUILD_MISMATCH is set)")
    assert v["checks"] == 1  # the mismatched validator ran, and does not count
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("fired ")][-1]
    assert line.endswith(f"; not validated: {v['reason']}")
    assert f"**Validation: not validated: {why}" in md.read_text()
    # the API
    p = _run(["-c", "import pypm_verified as pm\n"
                    "from pypm_verified.torch.ops import Neg\n"
                    "@pm.pattern\ndef NN(x):\n    return Neg(Neg(x))\n"
                    "@pm.rule(NN)\ndef drop(x):\n    return x\n"
                    "g = pm.Graph(); g.output(g.apply(Neg, g.apply(Neg, g.input('x'))))\n"
                    "print(pm.rewrite(g, [NN]).validation)"],
             PYPM_VERIFIED_LIB=other, PYPM_ALLOW_BUILD_MISMATCH="1")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().startswith(f"not validated: {why}")


def test_validation_strings():
    v = rreport.Validation
    assert str(v(True, "", 3)) == "validated (3 passes)"
    assert str(v(True, "", 2, "firing")) == "validated (2 firings)"
    assert str(v(True, "", 0)) == "validated (no pass changed the graph)"
    assert str(v(False, "why")) == "not validated: why"
