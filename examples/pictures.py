"""The docs' pictures of the HTML pages, and the headless Chromium the
tests open them in.

    python examples/pictures.py            # = make pictures

exports the small LLaMA of ``examples/models.py``, rewrites it for CUDA
with the CLI (``--dry-run --html``: nothing else is written), and takes a
screenshot of the page in headless Chromium (the Debian package
``chromium``) into ``docs/img/rewrite_report.png``; then runs the model
script of docs/tutorials/why-not-matched.md (its ``# file: models.py``
block) and ``explain scaled.pt2 --pattern Attention --rules attention
--node matmul_1 --html``, the page opened on the node where the match
failed, into ``docs/img/explain.png``. The pages are left in
``build/pictures/``. ``tests/test_html.py`` uses :func:`dump_dom` and
:func:`screenshot`.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
SIZE = (1600, 1150)
EXPLAIN_SIZE = (1200, 640)
TUTORIAL = os.path.join(ROOT, "docs", "tutorials", "why-not-matched.md")


def chromium() -> Optional[str]:
    """The headless browser's path (Debian's ``chromium`` first), or None."""
    for b in BROWSERS:
        p = shutil.which(b)
        if p:
            return p
    return None


def _run(args: List[str], timeout: float) -> subprocess.CompletedProcess:
    exe = chromium()
    if exe is None:
        raise FileNotFoundError("chromium is not installed (apt-get install chromium, or "
                                "make apt-deps)")
    with tempfile.TemporaryDirectory(prefix="pypm-chromium-") as profile:
        # a profile of its own: runs beside other Chromiums never share one
        cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--no-first-run", "--disable-extensions", "--mute-audio",
               f"--user-data-dir={profile}", *args]
        return subprocess.run(cmd, capture_output=True, timeout=timeout, text=True)


def _url(path: str) -> str:
    return "file://" + os.path.abspath(path)


def dump_dom(html: str, fragment: str = "", timeout: float = 90) -> str:
    """The DOM of ``html`` (opened at ``#fragment`` if given) after its
    scripts ran, as Chromium serializes it."""
    r = _run(["--dump-dom", _url(html) + (f"#{fragment}" if fragment else "")], timeout)
    if r.returncode != 0 or "<html" not in r.stdout:
        raise RuntimeError(f"chromium --dump-dom failed ({r.returncode}): {r.stderr[-2000:]}")
    return r.stdout


def screenshot(html: str, png: str, size: Tuple[int, int] = SIZE, timeout: float = 90,
               fragment: str = "") -> str:
    """A PNG of ``html`` (opened at ``#fragment`` if given) in a ``size``
    window; returns ``png``."""
    if os.path.exists(png):
        os.unlink(png)
    # every tile painted before the capture (the page scrolls its panels on load)
    r = _run([f"--window-size={size[0]},{size[1]}", f"--screenshot={os.path.abspath(png)}",
              "--run-all-compositor-stages-before-draw", "--virtual-time-budget=500",
              _url(html) + (f"#{fragment}" if fragment else "")], timeout)
    if r.returncode != 0 or not os.path.exists(png):
        raise RuntimeError(f"chromium --screenshot failed ({r.returncode}): {r.stderr[-2000:]}")
    return png


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="llama", help="examples/models.py model (default llama)")
    ap.add_argument("--target", default="cuda", help="rewrite target (default cuda: the "
                    "rules fire where the measured table says the kernel pays)")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "img", "rewrite_report.png"))
    ap.add_argument("--explain-out", default=os.path.join(ROOT, "docs", "img", "explain.png"))
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "pictures"))
    args = ap.parse_args(argv)
    os.makedirs(args.build, exist_ok=True)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    pt2 = os.path.join(args.build, f"{args.model}.pt2")
    page = os.path.join(args.build, f"{args.model}.html")
    py = sys.executable
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python") + os.pathsep
               + os.environ.get("PYTHONPATH", ""))
    subprocess.run([py, os.path.join(ROOT, "examples", "models.py"), args.model, "-o", pt2],
                   check=True, env=env)
    cmd = [py, "-m", "pypm_verified", "rewrite", pt2, "--target", args.target, "--dry-run",
           "--no-check", "-q", "--html", page]
    print("$ python -m pypm_verified " + " ".join(cmd[3:]), flush=True)
    subprocess.run(cmd, check=True, env=env)
    screenshot(page, args.out)
    print(f"wrote {args.out} ({os.path.getsize(args.out) // 1024} KiB) from {page}")
    explain_picture(args.build, args.explain_out, env)
    return 0


def tutorial_file(name: str, page: str = TUTORIAL) -> str:
    """The body of the ``python`` block of ``page`` that starts with
    ``# file: NAME`` (the tutorial's own code, as the reader copies it)."""
    for body in re.findall(r"^```python\n(.*?)^```", open(page).read(), flags=re.S | re.M):
        if body.startswith(f"# file: {name}\n"):
            return body
    raise ValueError(f"{page} has no python block starting with '# file: {name}'")


def explain_picture(build: str, out: str, env) -> str:
    """``explain --html`` on the tutorial's ``scaled.pt2`` (its attention
    block scaled after the softmax), screenshot at the failing node."""
    work = os.path.join(os.path.abspath(build), "explain")
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, "models.py"), "w") as f:
        f.write(tutorial_file("models.py"))
    subprocess.run([sys.executable, "models.py"], check=True, cwd=work, env=env)
    page = os.path.join(work, "explain.html")
    cmd = [sys.executable, "-m", "pypm_verified", "explain", "scaled.pt2", "--pattern",
           "Attention", "--rules", "attention", "--node", "matmul_1", "--html", "explain.html"]
    print("$ python -m pypm_verified " + " ".join(cmd[3:]), flush=True)
    subprocess.run(cmd, check=True, cwd=work, env=env, stdout=subprocess.DEVNULL)
    screenshot(page, out, EXPLAIN_SIZE, fragment="model_mul")
    print(f"wrote {out} ({os.path.getsize(out) // 1024} KiB) from {page}")
    return out


if __name__ == "__main__":
    sys.exit(main())
