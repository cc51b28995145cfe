"""MkDocs hooks: pages generated from the code at build time.

* ``<!-- cli-reference -->`` in a page becomes the reference of every
  subcommand, read from the argument parser itself (so it cannot drift);
* ``bench/results/*.png`` are added to the site under ``results/`` so the
  benchmarks page shows the plots the benchmarks wrote.
"""
from __future__ import annotations

import argparse
import pathlib
import sys

from mkdocs.structure.files import File

ROOT = pathlib.Path(__file__).resolve().parents[2]
MARKER = "<!-- cli-reference -->"


def _parser() -> argparse.ArgumentParser:
    sys.path.insert(0, str(ROOT / "python"))
    from pypm_verified.cli.parsing import parser
    return parser()


def _help(p: argparse.ArgumentParser) -> str:
    p.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=88)
    return p.format_help()


def cli_reference() -> str:
    """Markdown for the top-level parser and each subcommand's ``--help``."""
    ap = _parser()
    ap.prog = "pypm-verified"
    parts = ["```text\n" + _help(ap) + "```\n"]
    subs = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    for name, sp in subs.choices.items():
        sp.prog = f"pypm-verified {name}"
        parts.append(f"## `{name}`\n\n```text\n{_help(sp)}```\n")
    return "\n".join(parts)


def on_page_markdown(markdown, page, config, files):
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, cli_reference())
    return markdown


def on_files(files, config):
    for png in sorted((ROOT / "bench" / "results").glob("*.png")):
        files.append(File(f"results/{png.name}", str(ROOT / "bench"), config["site_dir"],
                          config["use_directory_urls"]))
    return files
