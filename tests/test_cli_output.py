"""What the rewrite command writes and prints: ``-o PATH`` always writes
PATH (said unchanged when no rule fired), ``--ignore-profitability``,
``--report -`` (JSON alone on stdout), ``-q``/``-v`` (logging levels;
library warnings logged), a subcommand's unknown option pointing to its own
help, ``--version``, and ``--rules`` taking every library module."""
import importlib.metadata
import json
import os
import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("rich")


from pypm_verified import cli  # noqa: E402
from pypm_verified.cli import main  # noqa: E402




from test_cli import NEGNEG_RULES, LinRelu  # noqa: E402 -- the CLI tests' rule and model

WARNING_RULES = NEGNEG_RULES + """
import warnings
open(__file__ + ".ran", "w").close()
warnings.warn("a note from the rules file", UserWarning)
"""
WARN_LINE = WARNING_RULES.splitlines().index(
    'warnings.warn("a note from the rules file", UserWarning)') + 1


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli_output")
    torch.manual_seed(0)
    f = {"linrelu": str(d / "linrelu.pt2"), "negneg_rules": str(d / "negneg_rules.py"),
         "warning_rules": str(d / "warning_rules.py"),
         "warning_rules_2": str(d / "warning_rules_2.py")}
    torch.export.save(torch.export.export(LinRelu().eval(), (torch.randn(4, 8),)),
                      f["linrelu"])
    for k, text in (("negneg_rules", NEGNEG_RULES), ("warning_rules", WARNING_RULES),
                    ("warning_rules_2", WARNING_RULES)):
        with open(f[k], "w") as fh:
            fh.write(text)
    return f


def run(argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# ------------------------------------------------------- -o always writes

def test_o_writes_even_when_nothing_fired(files, tmp_path, capsys):
    out, rep = tmp_path / "out.pt2", tmp_path / "r.json"
    code, stdout, err = run(["rewrite", files["linrelu"], "-o", out, "--rules",
                             files["negneg_rules"], "--report", rep], capsys)
    assert code == 0, err
    assert out.exists()
    assert f"no rule fired (the program is unchanged): wrote it to {out}" in stdout
    assert "nothing fired (the program is unchanged)" in stdout  # the summary's row
    r = json.loads(rep.read_text())
    assert r["fired"] is False and r["output"] == str(out) and r["firings"] == {}
    x = torch.randn(4, 8)
    ep = torch.export.load(str(out))
    ref = torch.export.load(files["linrelu"]).module()(x)
    assert torch.allclose(ep.module()(x), ref)


def test_without_o_nothing_fired_writes_nothing(files, tmp_path, capsys):
    model = tmp_path / "m.pt2"
    model.write_bytes(open(files["linrelu"], "rb").read())
    code, stdout, err = run(["rewrite", model, "--rules", files["negneg_rules"]], capsys)
    assert code == 0, err
    assert os.listdir(tmp_path) == ["m.pt2"]
    assert "nothing written (-o PATH or --write-unchanged" in stdout


# --------------------------------------------------- --ignore-profitability

def test_ignore_profitability_fires_what_the_table_declines(files, tmp_path, capsys,
                                                            monkeypatch):
    """Linear+relu at 4 tokens on cpu: the measured table declines it; with
    --ignore-profitability the rule fires (numerics checked)."""
    monkeypatch.setenv("COLUMNS", "250")
    rep = tmp_path / "r.json"
    argv = ["rewrite", files["linrelu"], "--rules", "epilogue", "--target", "cpu", "--dry-run",
            "--report", rep]
    code, stdout, err = run(argv, capsys)
    assert code == 0, err
    r = json.loads(rep.read_text())
    assert r["firings"] == {} and r["fired"] is False and r["profitability"] is True
    [reason] = r["declines"]["LinearEpilog"]["linear_act"]
    assert reason.startswith("not profitable on cpu")
    code, stdout, err = run(argv + ["--ignore-profitability"], capsys)
    assert code == 0, err
    r = json.loads(rep.read_text())
    assert r["firings"] == {"linear_act": 1} and r["fired"] is True
    assert r["profitability"] is False and r["numerics"]["ok"]
    assert r["target_reason"].endswith("; profitability ignored (--ignore-profitability)")
    assert "profitability ignored (--ignore-profitability)" in stdout
    assert "fired 1 rewrite(s): linear_act x1; numerics ok; not written (--dry-run)" in stdout


# --------------------------------------------------------------- --report -

def test_report_dash_is_json_alone_on_stdout(files, tmp_path, capsys):
    code, stdout, err = run(["rewrite", files["linrelu"], "--rules", "epilogue", "--dry-run",
                             "--report", "-", "--ignore-profitability"], capsys)
    assert code == 0, err
    r = json.loads(stdout)  # nothing else on stdout
    assert r["firings"] == {"linear_act": 1}
    assert "why not fired" in err and "fired 1 rewrite(s)" in err  # tables, result: stderr
    assert not os.path.exists("-")


# ---------------------------------------------------------------- -q and -v

def test_quiet_prints_only_the_result_line(files, tmp_path, capsys):
    out = tmp_path / "o.pt2"
    code, stdout, err = run(["rewrite", files["linrelu"], "--rules", "epilogue", "-o", out,
                             "--ignore-profitability", "-q"], capsys)
    assert code == 0, err
    assert stdout.splitlines() == [
        f"fired 1 rewrite(s): linear_act x1; numerics ok; wrote {out}"]
    assert err == ""


def test_quiet_still_prints_errors(files, tmp_path, capsys):
    code, stdout, err = run(["rewrite", tmp_path / "nope.pt2", "-q"], capsys)
    assert code == 2 and stdout == ""
    assert err.startswith("error: MODEL") and "no such file" in err


def test_verbose_adds_the_traceback(files, tmp_path, capsys):
    code, _, err = run(["rewrite", tmp_path / "nope.pt2", "--dry-run"], capsys)
    assert code == 2 and "Traceback" not in err
    code, _, err = run(["rewrite", tmp_path / "nope.pt2", "--dry-run", "-v"], capsys)
    assert code == 2 and "Traceback" in err and "UsageError" in err


def test_library_warnings_go_through_logging(files, tmp_path, capsys):
    """A warning raised while the rules load is one `warning:` line on
    stderr, and -q hides it (a second file: a rules file is executed once
    per process, and so warns once)."""
    argv = ["rewrite", files["linrelu"], "--dry-run", "--no-check", "--rules"]
    code, _, err = run(argv + [files["warning_rules"]], capsys)
    assert code == 0, err
    [line] = [ln for ln in err.splitlines() if "a note from the rules file" in ln]
    assert line.startswith("warning: UserWarning: a note from the rules file (")
    assert line.endswith(f"warning_rules.py:{WARN_LINE})")
    code, _, err = run(argv + [files["warning_rules_2"], "-q"], capsys)
    assert code == 0 and "a note from the rules file" not in err
    assert os.path.exists(files["warning_rules_2"] + ".ran")  # it was run, and warned


def test_logging_levels_and_restore():
    import logging
    from pypm_verified.cli.logs import level_of, logging_to_stderr
    assert [level_of(v) for v in (-1, 0, 1)] == [logging.ERROR, logging.INFO, logging.DEBUG]
    pkg = logging.getLogger("pypm_verified")
    before = (pkg.level, pkg.propagate, list(pkg.handlers), warnings.showwarning)
    with logging_to_stderr(1):
        assert pkg.level == logging.DEBUG
    assert (pkg.level, pkg.propagate, list(pkg.handlers), warnings.showwarning) == before


# -------------------------------------------- usage errors, --version, --rules

def test_unknown_option_points_to_the_subcommands_help(files, capsys):
    code, _, err = run(["explain", files["linrelu"], "--pattern", "Attention", "--bogus"],
                       capsys)
    assert code == 2
    assert err.strip() == ("error: unrecognized arguments: --bogus "
                           "(see `python -m pypm_verified explain --help`)")
    # -q is an option of every subcommand now
    assert "-q, --quiet" in cli.parser().commands["explain"].format_help()


def test_version(capsys):
    """--version: the package, and the engine's build id (checked against
    this checkout's sources) and Coq version, or where the library is missing."""
    import subprocess
    from pypm_verified import _version
    from pypm_verified.engines import binding
    code, out, _ = run(["--version"], capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"pypm_verified {importlib.metadata.version('pypm_verified')}"
    assert out.strip() == cli.version_text()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if binding.build_info() is not None:
        assert lines[1] == f"engine build id: {_version.expected_build_id(root)}"
        coq = subprocess.run(["coqc", "--version"], capture_output=True, text=True)
        if coq.returncode == 0:
            assert lines[2].split()[-1] in coq.stdout
        assert lines[3] == f"engine library: {os.path.abspath(binding.engine_library_path())}"
    else:
        assert lines[1].startswith("engine library: ")


def test_version_falls_back_to_pyproject(monkeypatch):
    import re
    from pypm_verified import _version as version

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)
    monkeypatch.setattr(importlib.metadata, "version", missing)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "pyproject.toml")) as f:
        expected = re.search(r'^version\s*=\s*"([^"]+)"', f.read(), re.M).group(1)
    assert version.package_version() == expected


def test_rules_takes_every_library_module(files, tmp_path, capsys):
    """`--rules fusion` (in the README) names a library module outside the
    default set: accepted; the list the CLI names comes from the library."""
    from pypm_verified.library import ALL_MODULES, EXTRA_MODULES, MODULES
    assert "fusion" in EXTRA_MODULES and ALL_MODULES == MODULES + EXTRA_MODULES
    code, stdout, err = run(["rewrite", files["linrelu"], "--rules", "fusion", "--dry-run",
                             "--no-check", "-q"], capsys)
    assert code == 0, err
    code, _, err = run(["rewrite", files["linrelu"], "--rules", "nosuchmodule", "--dry-run"],
                       capsys)
    assert code == 2 and ", ".join(ALL_MODULES) in err
