"""The tutorials (docs/tutorials/*.md) run step by step, as a reader would.

In a page, in order:

* a ``python`` block whose first line is ``# file: NAME`` is written to NAME
  (a rules file, a model script);
* any other ``python`` block runs (one namespace per page);
* each line of a ``sh`` block runs as a command (``pypm-verified`` is this
  interpreter's ``-m pypm_verified``; ``python`` is this interpreter); it
  must exit 0 unless the line ends with ``# exit N``; ``examples/...`` is
  the checkout's;
* a ``text`` block right after a ``sh`` block is output the last command
  must print: each of its lines, spaces collapsed, is a line of the
  output (``...`` in it stands for any text: timings, paths).
"""
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
TUTORIALS = sorted(p for p in (DOCS / "tutorials").glob("*.md")
                   if re.search(r"^```sh\n", p.read_text(), flags=re.M))

_BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", flags=re.S | re.M)


def _norm(s: str) -> str:
    return " ".join(s.split())


ROOT = DOCS.parent


def _command(line: str):
    """The command's argv: ``examples/...`` is the checkout's (the page says
    it runs from a checkout)."""
    words = [str(ROOT / w) if w.startswith("examples/") else w for w in shlex.split(line)]
    if words[0] == "pypm-verified":
        return [sys.executable, "-m", "pypm_verified", *words[1:]]
    if words[0] == "python":
        return [sys.executable, *words[1:]]
    raise AssertionError(f"a tutorial command must start with pypm-verified or python: {line}")


def run_page(page: Path, workdir: Path) -> int:
    """Run ``page``'s steps in ``workdir``; the number of steps checked."""
    env = {**os.environ, "COLUMNS": "120", "PYTHONPATH": str(workdir)}
    ns = {"__name__": "tutorial"}
    last_out = None
    steps = 0
    cwd = os.getcwd()
    os.chdir(workdir)
    sys.path.insert(0, str(workdir))
    try:
        for lang, body in _BLOCK.findall(page.read_text()):
            if lang == "python":
                first = body.splitlines()[0]
                m = re.match(r"# file: (\S+)$", first)
                if m:
                    (workdir / m.group(1)).write_text(body)
                    for mod in [k for k in sys.modules if k == Path(m.group(1)).stem]:
                        del sys.modules[mod]  # a rules file rewritten by a later step
                else:
                    exec(compile(body, f"{page.name}:python", "exec"), ns)  # noqa: S102
                steps += 1
                last_out = None
            elif lang == "sh":
                for line in body.replace("\\\n", " ").splitlines():
                    line = line.strip()
                    if not line or line.startswith("#"):
                        continue
                    want = 0
                    m = re.search(r"#\s*exit (\d+)\s*$", line)
                    if m:
                        want = int(m.group(1))
                    cmd = line.split(" #")[0].strip()
                    out = subprocess.run(_command(cmd), cwd=workdir, env=env,
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


@pytest.mark.parametrize("page", TUTORIALS, ids=lambda p: p.stem)
def test_tutorial_runs(page, tmp_path, lib):
    assert run_page(page, tmp_path) >= 5
