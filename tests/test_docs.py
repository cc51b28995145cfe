"""The README and the documentation site (docs/): their code runs as written.

* every ``python`` block of the README runs, and asserts what it claims
  (the pages of docs/ run, their shell commands too, in
  tests/test_tutorials.py);
* every command line of a ``sh`` block that calls the CLI
  (``pypm-verified ...`` / ``python -m pypm_verified ...``) is accepted by
  the CLI's own argument parser, so an option the docs show exists;
* the README stays short and links only to pages that exist;
* ``mkdocs build --strict`` builds the site with no warning (``make docs``);
* no text in the project names a work item by number or a path outside the
  repository.
"""
import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pypm_verified as pm

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.parts)


def _blocks(text: str, lang: str):
    return re.findall(rf"^```{lang}\n(.*?)^```", text, flags=re.S | re.M)


def _run_python(blocks, tmp_path, monkeypatch, name):
    src = tmp_path / f"{name}.py"  # patterns read their source: a real file
    src.write_text("\n".join(blocks))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    ns = {"__name__": name}
    exec(compile(src.read_text(), str(src), "exec"), ns)  # noqa: S102 -- the docs' code
    return ns


def test_readme_python_blocks_run(tmp_path, monkeypatch, lib):
    blocks = _blocks(README.read_text(), "python")
    assert len(blocks) >= 2
    # the rules file of "A first rule" is a module of its own: run it as one
    rules = next(b for b in blocks if "def to_silu" in b)
    _run_python([rules], tmp_path, monkeypatch, "myrules")
    ns = _run_python([b for b in blocks if b is not rules], tmp_path, monkeypatch,
                     "readme_examples")
    assert ns["report"].firings == {"cublasrule": 1}
    assert ns["m"].bindings == {"x": ns["a"], "y": ns["b"]}


def _cli_lines(text: str):
    """The CLI invocations of the ``sh`` blocks, comments and continuations
    handled, with the program name removed."""
    for block in _blocks(text, "sh"):
        block = block.replace("\\\n", " ")
        for line in block.splitlines():
            line = line.split(" #")[0].strip()
            if line.startswith("$ "):
                line = line[2:]
            for prefix in ("pypm-verified ", "python -m pypm_verified "):
                if line.startswith(prefix):
                    words = shlex.split(line[len(prefix):])
                    cut = [i for i, w in enumerate(words) if w in ("&&", "||", "|", ";", ">")]
                    yield line, words[:cut[0]] if cut else words


def test_docs_command_lines_parse():
    from pypm_verified.cli.parsing import parser
    seen = 0
    for f in [README, *PAGES]:
        for line, words in _cli_lines(f.read_text()):
            seen += 1
            try:
                parser().parse_args(words)
            except SystemExit as e:  # --help and --version exit 0
                assert e.code == 0, f"{f.relative_to(ROOT)}: the CLI rejects {line!r}"
    assert seen >= 10


def test_readme_is_short_and_its_links_resolve():
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    local = [l for l in links if "://" not in l]
    assert len(local) >= 10
    for link in local:
        assert (ROOT / link).exists(), f"README links to a missing file: {link}"
    # the README's two commands stay at its top
    first = _blocks(text, "sh")[0]
    assert first.splitlines()[:2] == [
        "make example   # set everything up, prove, build, match the bundled example, "
        "rewrite a generated GPT-2",
        "make test      # set everything up and pass the tests (what CI runs)"]


@pytest.mark.docs
def test_docs_site_builds_strict(tmp_path):
    mkdocs = shutil.which("mkdocs", path=os.path.dirname(sys.executable))
    if mkdocs is None:
        if os.environ.get("PYPM_REQUIRE_TOOLS"):
            pytest.fail("mkdocs is not installed (the [docs] extra; make venv installs it)")
        pytest.skip("mkdocs is not installed (the [docs] extra)")
    out = subprocess.run([mkdocs, "build", "--strict", "-d", str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "WARNING" not in out.stderr, out.stderr[-3000:]
    cli = (tmp_path / "site" / "reference" / "cli.html").read_text()
    assert "--ignore-profitability" in cli and "check-rules" in cli  # generated from the parser
    assert (tmp_path / "site" / "results" / "matchers.png").exists()  # the plots


# A work item by number (the word, a space or dash, an optional hash, digits),
# or a path that leaves the repository (the papers folder beside it).
_OUTSIDE = re.compile(r"\bissues?[ -]#?\d+|\.\./shared\b|/work/shared\b", re.I)


def _tracked_lines(skip_suffixes):
    """``(file, line number, line)`` of every tracked text file but this one
    (it holds the patterns) and those ending in ``skip_suffixes``."""
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    for f in files:
        p = ROOT / f
        if f == "tests/test_docs.py" or p.suffix in skip_suffixes or not p.is_file():
            continue
        try:
            text = p.read_text()
        except UnicodeDecodeError:
            continue
        for i, line in enumerate(text.splitlines(), 1):
            yield f, i, line


def test_no_text_names_work_items_or_outside_paths():
    bad = []
    for f, i, line in _tracked_lines((".png", ".so", ".pdf", ".json")):
        if _OUTSIDE.search(line):
            bad.append(f"{f}:{i}: {line.strip()[:100]}")
    assert not bad, "\n".join(bad[:40])


# An absolute path of some machine: a home directory (/home/NAME/, /Users/NAME/,
# C:\Users\NAME\), a work, temporary or scratch directory (/work/X, /tmp/X,
# /private/var/..., /mnt/X, /scratch/X, /root/X), or a file:// URL of one. A
# path inside a word or a URL (``build/zoo/work/``, ``https://x.org/home/``) is
# not one; system paths (/dev/null, /usr/bin/env, /proc/..., /etc/...) are
# not matched at all.
_MACHINE_PATH = re.compile(
    r"(?:(?<![\w.~$/-])|(?<=file://))"
    r"/(?:home|Users)/[\w.-]+/"
    r"|(?:(?<![\w.~$/-])|(?<=file://))/(?:work|tmp|private|mnt|scratch|root)/[\w.$-]+"
    r"|\b[A-Za-z]:\\+Users\\+[\w.-]+")
#: Illustrative paths the documentation may show (placeholders, no one's machine).
_ILLUSTRATIVE_PATHS = frozenset({"/home/user/", "/Users/user/"})


def test_no_tracked_text_holds_a_machines_absolute_path():
    """Results, reports and docs name files relative to the repository (or
    by rule ``module:line``), never where they happened to be generated."""
    bad = []
    for f, i, line in _tracked_lines((".png", ".so", ".pdf", ".pt2", ".pt")):
        for m in _MACHINE_PATH.finditer(line):
            if m.group(0) not in _ILLUSTRATIVE_PATHS:
                bad.append(f"{f}:{i}: {m.group(0)}")
    assert not bad, f"{len(bad)} absolute path(s):\n" + "\n".join(bad[:40])


@pytest.mark.parametrize("text,found", [
    ("rule 'x' (/work/wt/xla/python/pypm_verified/library/gelu.py:83)", True),
    ('"library": "/home/alice/src/lib.so"', True),
    ("--out /tmp/calib/recheck", True),
    ("see file:///Users/bob/report.html", True),
    (r"C:\Users\carol\proj", True),
    ("build/zoo/work/bert.static/model.pt2", False),
    ("$PYPM_ZOO_BUILD/work/bert.static/model.pt2", False),
    ("https://example.org/home/page", False),
    ("#!/usr/bin/env python; > /dev/null; /proc/meminfo; /etc/hosts", False),
    ("python/pypm_verified/library/gelu.py:83", False),
])
def test_machine_path_pattern(text, found):
    assert bool(_MACHINE_PATH.search(text)) is found
