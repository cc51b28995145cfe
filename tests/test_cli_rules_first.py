"""Mistakes in a rules file are found before the model is touched: every
pattern and rule loaded, linked and loaded into the engine first, so an
operator called with the wrong number of arguments or a rule parameter its
pattern never binds is exit 2 naming the file and line, in seconds, and the
model is never loaded. Order: rules errors first, then model errors (both
exit 2)."""
import os
import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("rich")

from pypm_verified.cli import main  # noqa: E402

HEAD = ("import pypm_verified as pm\n"
        "from pypm_verified.torch.ops import Mul, Sigmoid, Silu\n\n\n"
        "@pm.pattern\n")

# y * sigmoid(y) -> silu(y), with the replacement given two arguments (line 12)
ARITY = HEAD + """def SiluWritten(y):
    return Mul(y, Sigmoid(y))


@pm.rule(SiluWritten)
def to_silu(y):
    return Silu(y, y)
"""

# the rule takes z, which the pattern never binds (always None when it fires)
UNBOUND = HEAD + """def SiluWritten(y, z):
    return Mul(y, Sigmoid(y))


@pm.rule(SiluWritten)
def to_silu(y, z):
    return Silu(z)
"""

GOOD = HEAD + """def SiluWritten(y):
    return Mul(y, Sigmoid(y))


@pm.rule(SiluWritten)
def to_silu(y):
    return Silu(y)
"""


class SiluWritten(torch.nn.Module):
    def forward(self, y):
        return y * torch.sigmoid(y)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("rules_first") / "silu.pt2"
    torch.export.save(torch.export.export(SiluWritten(), (torch.randn(8, 16),)), str(path))
    return str(path)


@pytest.fixture
def loads(monkeypatch):
    """The model loader, instrumented: the paths it was asked to load."""
    from pypm_verified.torch import loader
    calls = []
    real = loader.load_model

    def spy(path, *a, **k):
        calls.append(path)
        return real(path, *a, **k)
    monkeypatch.setattr(loader, "load_model", spy)
    return calls


def _rules(tmp_path, text, name="myrules.py"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _error(err):
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("command", ["rewrite", "explain"])
@pytest.mark.parametrize("text,line,needle", [
    (ARITY, 12, "operator Silu takes 1 argument(s), got 2"),
    (UNBOUND, 10, "its parameter 'z' is bound by no alternate of pattern 'SiluWritten'"),
])
def test_rules_error_is_exit_2_before_the_model_is_loaded(command, text, line, needle, model,
                                                          loads, tmp_path, capsys):
    rules = _rules(tmp_path, text)
    out = tmp_path / "out.pt2"
    argv = [command, model, "--rules", rules] + (
        ["-o", str(out)] if command == "rewrite" else ["--pattern", "SiluWritten"])
    t = time.perf_counter()
    code = main(argv)
    err = _error(capsys.readouterr().err)
    assert code == 2, err
    assert f"{rules}:{line}" in err and needle in err
    assert loads == [] and not out.exists()
    assert time.perf_counter() - t < 60  # no export (seconds on an idle machine)


def test_rules_error_is_reported_before_a_missing_model(tmp_path, loads, capsys):
    """Both the rules and the model are wrong: the rules' error is the one
    reported (then, once they are fixed, the model's); both exit 2."""
    rules = _rules(tmp_path, ARITY)
    missing = str(tmp_path / "missing.pt2")
    assert main(["rewrite", missing, "--rules", rules, "--dry-run"]) == 2
    err = _error(capsys.readouterr().err)
    assert f"{rules}:12" in err and "missing.pt2" not in err
    good = _rules(tmp_path, GOOD, "good.py")
    assert main(["rewrite", missing, "--rules", good, "--dry-run"]) == 2
    err = _error(capsys.readouterr().err)
    assert "missing.pt2: no such file" in err
    assert loads == []


def test_good_rules_still_fire(model, tmp_path, capsys):
    """The checks refuse nothing that works: the same rule, written right,
    fires on the model."""
    rules = _rules(tmp_path, GOOD)
    rep = tmp_path / "r.json"
    assert main(["rewrite", model, "--rules", rules, "--dry-run", "--report", str(rep),
                 "--ignore-profitability"]) == 0, capsys.readouterr().err
    import json
    assert json.loads(rep.read_text())["firings"] == {"to_silu": 1}


def test_library_passes_the_checks():
    """Every library module (the default ones and those only --rules NAME
    loads) passes the up-front checks, on both engines."""
    from pypm_verified.cli.checks import check_patterns
    from pypm_verified.library import ALL_MODULES, load_rules
    for name in ALL_MODULES:
        pats = load_rules(name)
        for engine in ("verified", "reference"):
            if engine == "verified" and not os.environ.get("PYPM_REQUIRE_LIB"):
                from pypm_verified.engines import binding
                if not os.path.exists(binding.engine_library_path()):
                    continue
            check_patterns(pats, engine)
