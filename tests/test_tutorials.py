"""The documentation runs as a reader would run it: the tutorials
(docs/tutorials/*.md) step by step, and every other page of docs/ with a
code block (the guides, the quickstart, the reference), each page in a
scratch directory of its own.

In a page, in order:

* a ``python`` block whose first line is ``# file: NAME`` is written to NAME
  (a rules file, a model script);
* any other ``python`` block runs (one namespace per page; written to a file
  first, so that a pattern can read its own source);
* each line of a ``sh`` block runs as a command (``pypm-verified`` is this
  interpreter's ``-m pypm_verified``; ``python`` is this interpreter,
  ``pytest`` its ``-m pytest``; leading ``NAME=value`` words set
  environment variables); it must exit 0 unless the line ends with ``# exit
  N``; ``examples/...``, ``bench/...`` and ``tests/...`` are the checkout's;
* ``make TARGET`` runs as ``make -n TARGET`` in the checkout (a dry run: the
  target exists and everything it would run expands): each target is a job
  of its own, tested elsewhere or taking minutes to hours (``make test`` is
  what CI runs, ``make wheel`` is tests/test_wheel.py);
* a line whose comment says ``needs: network``, ``needs: GPU`` or ``needs:
  cluster`` is not run, and must be a command that needs it (``NEEDS``: a
  ``pip install`` from the index; ``--device cuda``; a Ray cluster's
  address): the mark cannot hide a command CI could run;
* a ``text`` block right after a ``sh`` block is output the last command
  must print: each of its lines, spaces collapsed, is a line of the
  output (``...`` in it stands for any text: timings, paths).

Blocks in other languages, or none, are not code (diagrams, file layouts).
"""
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

_BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", flags=re.S | re.M)
#: the languages a page's code blocks may have; each runs (see the docstring)
LANGS = ("python", "sh", "text")

#: what a ``needs: WHAT`` mark may excuse, and the commands that need it
NEEDS = {
    "network": re.compile(r"^(python -m )?pip (install|download)\b(?!.*--no-index)"),
    "GPU": re.compile(r"--device[ =]cuda\b|^make bench-gpu\b"),
    "cluster": re.compile(r"--ray[ =](?!auto\b)\S|^(srun|sbatch|salloc|ray start)\b"),
}
_MARK = re.compile(r"#.*\bneeds: (\w+)")


def code_pages():
    """Every page of docs/ with a ``python`` or ``sh`` block."""
    return sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.parts
                  and re.search(r"^```(python|sh)\n", p.read_text(), flags=re.M))


TUTORIALS = [p for p in code_pages() if p.parent.name == "tutorials"]
OTHER_PAGES = [p for p in code_pages() if p.parent.name != "tutorials"]


def _norm(s: str) -> str:
    return " ".join(s.split())


def _command(line: str):
    """``(argv, environment variables)`` of a command line: leading
    ``NAME=value`` words set variables; ``examples/...``, ``bench/...`` and
    ``tests/...`` are the checkout's (the page says it runs from a checkout)."""
    words = shlex.split(line)
    env = {}
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        name, value = words.pop(0).split("=", 1)
        env[name] = value
    words = [str(ROOT / w) if w.startswith(("examples/", "bench/", "tests/")) else w
             for w in words]
    if words[0] == "pypm-verified":
        return [sys.executable, "-m", "pypm_verified", *words[1:]], env
    if words[0] == "python":
        return [sys.executable, *words[1:]], env
    if words[0] == "pytest":
        return [sys.executable, "-m", "pytest", *words[1:]], env
    if words[0] == "make":
        return ["make", "-n", "-C", str(ROOT), *words[1:]], env
    raise AssertionError("a command of the docs must start with pypm-verified, python, pytest "
                         f"or make, or be marked `# needs: {'|'.join(NEEDS)}`: {line}")


def needs(line: str):
    """The ``needs: WHAT`` mark of a command line, checked, or None."""
    m = _MARK.search(line)
    if m is None:
        return None
    what, cmd = m.group(1), line.split(" #")[0].strip()
    assert what in NEEDS, f"unknown mark `needs: {what}` (one of {', '.join(NEEDS)}): {line}"
    assert NEEDS[what].search(cmd), (
        f"`{cmd}` is marked `needs: {what}` but does not need it: the docs test can run it")
    return what


def _commands(block: str):
    """The command lines of a ``sh`` block (continuations joined, comment
    lines dropped)."""
    for line in block.replace("\\\n", " ").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            yield line


def sh_lines(text: str):
    """The command lines of every ``sh`` block of ``text``."""
    for lang, body in _BLOCK.findall(text):
        if lang == "sh":
            yield from _commands(body)


def run_page(page: Path, workdir: Path) -> int:
    """Run ``page``'s steps in ``workdir``; the number of steps checked."""
    env = {**os.environ, "COLUMNS": "120", "PYTHONPATH": str(workdir)}
    ns = {"__name__": "page_" + page.stem.replace("-", "_")}
    last_out = None
    steps = 0
    cwd = os.getcwd()
    os.chdir(workdir)
    sys.path.insert(0, str(workdir))
    try:
        for i, (lang, body) in enumerate(_BLOCK.findall(page.read_text())):
            assert lang in LANGS, f"{page.name}: a ```{lang} block (run: {', '.join(LANGS)})"
            if lang == "python":
                first = body.splitlines()[0]
                m = re.match(r"# file: (\S+)$", first)
                if m:
                    (workdir / m.group(1)).write_text(body)
                    for mod in [k for k in sys.modules if k == Path(m.group(1)).stem]:
                        del sys.modules[mod]  # a rules file rewritten by a later step
                else:
                    src = workdir / f"_{ns['__name__']}_{i}.py"  # a pattern reads its source
                    src.write_text(body)
                    exec(compile(body, str(src), "exec"), ns)  # noqa: S102 -- the docs' code
                steps += 1
                last_out = None
            elif lang == "sh":
                for line in _commands(body):
                    if needs(line):
                        continue
                    want = 0
                    m = re.search(r"#\s*exit (\d+)\s*$", line)
                    if m:
                        want = int(m.group(1))
                    cmd = line.split(" #")[0].strip()
                    argv, extra = _command(cmd)
                    out = subprocess.run(argv, cwd=workdir, env={**env, **extra},
                                         capture_output=True, text=True, timeout=900)
                    last_out = out.stdout + out.stderr
                    assert out.returncode == want, (
                        f"{page.name}: `{cmd}` exited {out.returncode}, the page says {want}:"
                        f"\n{last_out[-4000:]}")
                    steps += 1
            elif lang == "text" and last_out is not None:
                lines = [_norm(l) for l in last_out.splitlines()]
                for want in body.splitlines():
                    if want.strip():
                        rx = re.compile(".*".join(map(re.escape, _norm(want).split("..."))))
                        assert any(rx.fullmatch(l) for l in lines), (
                            f"{page.name}: the output lacks the line {want!r}:\n"
                            f"{last_out[-4000:]}")
                steps += 1
    finally:
        os.chdir(cwd)
        sys.path.remove(str(workdir))
    return steps


@pytest.mark.slow
@pytest.mark.parametrize("page", TUTORIALS, ids=lambda p: p.stem)
def test_tutorial_runs(page, tmp_path, lib):
    assert run_page(page, tmp_path) >= 5


@pytest.mark.slow
@pytest.mark.parametrize("page", OTHER_PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_page_runs(page, tmp_path, lib):
    assert run_page(page, tmp_path) >= 1


def test_needs_marks_only_what_ci_cannot_run():
    """A ``needs:`` mark on a command that does not need it fails, an
    unknown one too; the commands of the docs so marked are few."""
    assert needs("pip install torch==2.13.0   # needs: network; the CPU build is enough")
    assert needs("python -m pypm_verified rewrite m.pt2 --device cuda  # needs: GPU")
    for bad in ("python -m pypm_verified rewrite m.pt2 --target cuda  # needs: GPU",
                "pip install --no-index x.whl  # needs: network",
                "python -m pypm_verified check-rules --ray auto  # needs: cluster",
                "make test  # needs: time"):
        with pytest.raises(AssertionError):
            needs(bad)
    marked = [line for p in code_pages() for line in sh_lines(p.read_text()) if needs(line)]
    assert len(marked) <= 6, marked
