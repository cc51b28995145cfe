"""What reaches the terminal from a file or an exception is inert (untrusted
inputs): control characters and bidi controls are shown escaped
(``\\x1b``), never sent raw (a device string in a .pt2's model.json once set
the window title, erased the line and printed a fake green "fired ...;
wrote out.pt2"); a path with ``[...]`` in it is printed as it is, not read
as rich markup (``-o '[/x].pt2'`` once crashed after the whole rewrite with
exit 1, the numerics-mismatch code); and an unexpected exception is exit 70
(internal error), never 1."""
import os
import subprocess
import sys
import zipfile

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("rich")

import torch.nn as nn  # noqa: E402

from pypm_verified import cli  # noqa: E402
from pypm_verified.cli import main  # noqa: E402
from pypm_verified.cli.text import printable  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), COLUMNS="200")

#: what the forged model.json's device string holds: set the window title
#: (OSC 0, ended by BEL), erase the line, print a fake green result line
EVIL = ("cpu\u001b]0;pwned\u0007\u001b[2K\u001b[32mfired 9 rewrite(s); numerics ok; "
        "wrote out.pt2\u001b[0m")


class TwoLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


@pytest.fixture(scope="module")
def pt2(tmp_path_factory):
    """A tiny torch.export.save'd program, and the same with EVIL as the
    device of its tensors' meta in models/model.json (the zip rebuilt:
    fresh CRCs, so it passes the loader's checks up to torch's device
    parser, whose error message quotes the string)."""
    import json
    d = tmp_path_factory.mktemp("terminal")
    torch.manual_seed(0)
    good, evil = d / "m.pt2", d / "evil.pt2"
    torch.export.save(torch.export.export(TwoLayers().eval(), (torch.randn(4, 8),)), good)
    forged = '"type": ' + json.dumps(EVIL)  # JSON-escaped: \u001b in the file
    with zipfile.ZipFile(good) as zin, zipfile.ZipFile(evil, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename.endswith("models/model.json"):
                text = data.decode()
                assert '"type": "cpu"' in text
                data = text.replace('"type": "cpu"', forged).encode()
            zout.writestr(info.filename, data)
    return {"good": str(good), "evil": str(evil)}


def _inert(text) -> None:
    raw = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text
    for b in (b"\x1b", b"\x07", b"\r", "\u202e".encode()):
        assert b not in raw, (b, raw[-600:])


# ------------------------------------------------------------ the sanitizer

def test_printable_escapes_controls_and_bidi():
    assert printable("plain: model[v2].pt2, caf\u00e9, \u4e2d\u6587\tx") == \
        "plain: model[v2].pt2, caf\u00e9, \u4e2d\u6587\tx"
    assert printable("a\x1b[2Kb\x07") == "a\\x1b[2Kb\\x07"
    assert printable("\x00\x08\x0b\x1f") == "\\x00\\x08\\x0b\\x1f"
    assert printable("over\rwrite") == "over\\rwrite"
    assert printable("del\x7f c1\x80\x9b\x9f") == "del\\x7f c1\\x80\\x9b\\x9f"
    bidi = "".join(chr(c) for c in [*range(0x202A, 0x202F), *range(0x2066, 0x206A)])
    assert printable(f"evil{bidi}.pt2") == "evil" + "".join(
        f"\\u{ord(c):04x}" for c in bidi) + ".pt2"
    assert printable("\u2028\u200f\u061c") == "\\u2028\\u200f\\u061c"
    # an undecodable file name's byte (surrogateescape) cannot be written as
    # UTF-8: escaped too
    assert printable(os.fsdecode(b"m\xff.pt2")) == "m\\udcff.pt2"
    # one message, one line; an explanation or a traceback keeps its lines
    assert printable("a\nb") == "a\\nb"
    assert printable("a\nb\x1b", lines=True) == "a\nb\\x1b"
    assert printable(ValueError("x\x9b")) == "x\\x9b"
    assert cli.printable is printable


# ----------------------------------------------- escapes from a model file

def test_escape_sequence_in_model_json_is_shown_escaped(pt2, tmp_path):
    """The forged device string reaches the error line (and, with
    PYPM_TRACEBACK=1, the traceback) escaped; bad input: exit 2."""
    out = tmp_path / "out.pt2"
    p = subprocess.run([sys.executable, "-m", "pypm_verified", "rewrite", pt2["evil"],
                        "-o", str(out)], capture_output=True, env=dict(ENV, PYPM_TRACEBACK="1"),
                       timeout=300)
    assert p.returncode == 2, p.stderr[-2000:]
    _inert(p.stdout)
    _inert(p.stderr)
    err = p.stderr.decode()
    assert "error: " in err and "\\x1b]0;pwned\\x07\\x1b[2K" in err, err[-2000:]
    assert "Traceback" in err  # PYPM_TRACEBACK=1's, inert too
    assert not out.exists()


def test_warning_from_a_rules_file_is_shown_escaped(pt2, tmp_path, capsys):
    rules = tmp_path / "loud_rules.py"
    rules.write_text("import warnings\nimport pypm_verified as pm\n"
                     "from pypm_verified.torch.ops import Neg\n"
                     "warnings.warn('done\\x1b[2K\\r\\u202efake', UserWarning)\n"
                     "@pm.pattern\ndef NN(x):\n    return Neg(Neg(x))\n"
                     "@pm.rule(NN)\ndef drop_negs(x):\n    return x\n")
    code = main(["rewrite", pt2["good"], "--dry-run", "--rules", str(rules)])
    out, err = capsys.readouterr()
    _inert(out)
    _inert(err)
    assert "warning: " in err and "done\\x1b[2K\\r\\u202efake" in err, err


def test_usage_error_quoting_an_argument_is_shown_escaped(capsys):
    assert main(["rewrite", "m.pt2", "--bogus\x1b]0;t\x07"]) == 2
    _, err = capsys.readouterr()
    _inert(err)
    assert "--bogus\\x1b]0;t\\x07" in err


# ------------------------------------------------- rich markup in a path

def _summary_output(stdout: str) -> str:
    rows = [ln for ln in stdout.splitlines() if ln.strip("│ ").startswith("output ")]
    assert len(rows) == 1, stdout
    return rows[0].strip("│ ").split("│")[-1].strip()


def test_output_path_with_brackets_is_named_as_given(pt2, tmp_path, monkeypatch, capsys):
    """``-o 'model[v2].pt2'``: the summary says ``model[v2].pt2``, not
    ``model.pt2`` (``[v2]`` was read as a style)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")
    code = main(["rewrite", pt2["good"], "-o", "model[v2].pt2"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert _summary_output(out) == "model[v2].pt2"
    assert "wrote it to model[v2].pt2" in out
    assert os.path.isfile(tmp_path / "model[v2].pt2")


def test_output_path_that_looks_like_a_closing_tag(pt2, tmp_path, monkeypatch, capsys):
    """``-o '[/x].pt2'`` (a folder ``[`` exists): a rule fires, the numerics
    are checked, the file is written and named, exit 0; no MarkupError."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")
    (tmp_path / "[").mkdir()
    code = main(["rewrite", pt2["good"], "-o", "[/x].pt2", "--ignore-profitability"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "Traceback" not in err and "MarkupError" not in err
    assert _summary_output(out) == "[/x].pt2"
    assert "numerics ok; wrote [/x].pt2" in out
    assert os.path.isfile(tmp_path / "[" / "x].pt2")


# ------------------------------------------------ an internal error is not 1

def test_an_exception_while_printing_is_an_internal_error(pt2, tmp_path, monkeypatch, capsys):
    """An unexpected exception (here: rendering the tables) is one error line
    and exit 70, saying what was written; never exit 1 (a numerics
    mismatch) with a traceback."""
    from rich.errors import MarkupError
    import pypm_verified.cli.rewrite as rw

    def broken(*a, **k):
        raise MarkupError("closing tag '[/x]' \x1b[2K doesn't match any open tag")
    monkeypatch.setattr(rw, "_table", broken)
    out_path = tmp_path / "o.pt2"
    code = main(["rewrite", pt2["good"], "-o", str(out_path)])
    _, err = capsys.readouterr()
    assert code == cli.EXIT_INTERNAL == 70
    assert code in {c for c, _ in cli.EXIT_CODES}  # documented in --help and the docs
    assert "Traceback" not in err
    _inert(err)
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: internal error") and "MarkupError" in last, err
    assert f"wrote {out_path}" in last
