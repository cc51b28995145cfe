"""Build paper/paper.md from paper/sections/*.md, docs/guarantees/correspondence.md and
the measured results in bench/results/.

Placeholders in a section, each on a line of its own:
  {{results:NAME}}   the Markdown table bench/results/NAME.md (its title line
                     becomes a caption, its headings move two levels down
                     under the paper's); a missing file is an error unless
                     --allow-missing, which inserts a visible "not measured".
  {{figure:NAME}}    bench/results/NAME.png, embedded by relative path.
  {{theorems}}       the theorem table of docs/guarantees/correspondence.md.

Usage: python paper/build.py [--allow-missing]   (make paper)
"""
import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
PLACEHOLDER = re.compile(r"^\{\{(results|figure|theorems)(?::([\w.-]+))?\}\}\s*$")


def theorems() -> str:
    text = (ROOT / "docs" / "guarantees" / "correspondence.md").read_text()
    body = text.split("## Theorems", 1)[1]
    return body.strip()


def results(name: str, allow_missing: bool) -> str:
    p = RESULTS / f"{name}.md"
    if not p.exists():
        if allow_missing:
            return f"> **not measured yet**: `bench/results/{name}.md` is missing (run `make bench`)."
        raise SystemExit(f"paper: bench/results/{name}.md is missing; run `make bench` first "
                         "(or pass --allow-missing)")
    lines = p.read_text().strip().splitlines()
    if lines and lines[0].startswith("#"):  # the title becomes a caption
        lines[0] = "**" + lines[0].lstrip("# ").strip() + "**"
    # the file's own headings sit below the paper's "### 5.x" subsections
    fence = False
    for i, line in enumerate(lines[1:], 1):
        if line.startswith("```"):
            fence = not fence
        elif not fence and re.match(r"#{1,4} ", line):
            lines[i] = "#" * min(6, line.index(" ") + 2) + line[line.index(" "):]
    return "\n".join(lines)


def figure(name: str, allow_missing: bool) -> str:
    p = RESULTS / f"{name}.png"
    if not p.exists():
        if allow_missing:
            return f"> **not measured yet**: `bench/results/{name}.png` is missing."
        raise SystemExit(f"paper: bench/results/{name}.png is missing; run `make bench` first")
    return f"![{name}](../bench/results/{name}.png)"


def build(allow_missing: bool) -> str:
    out = []
    for sec in sorted((ROOT / "paper" / "sections").glob("*.md")):
        for line in sec.read_text().splitlines():
            m = PLACEHOLDER.match(line)
            if not m:
                out.append(line)
            elif m.group(1) == "theorems":
                out.append(theorems())
            elif m.group(1) == "results":
                out.append(results(m.group(2), allow_missing))
            else:
                out.append(figure(m.group(2), allow_missing))
        out.append("")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Build paper/paper.md from the sections and results.")
    ap.add_argument("--allow-missing", action="store_true")
    args = ap.parse_args(argv)
    text = build(args.allow_missing)
    dst = ROOT / "paper" / "paper.md"
    tmp = dst.with_suffix(".md.tmp")
    tmp.write_text(text)
    tmp.replace(dst)  # written whole or not at all
    print(f"wrote {dst.relative_to(ROOT)} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
