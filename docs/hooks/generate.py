"""MkDocs hooks: pages generated from the code at build time.

* ``<!-- cli-reference -->`` in a page becomes the reference of every
  subcommand, read from the argument parser itself (so it cannot drift);
* the table between ``<!-- operators:begin -->`` and ``<!-- operators:end -->``
  (``reference/operators.md``) is the op registry's
  (``pypm_verified.torch.registry.markdown``): regenerated at build time
  when torch is installed (else the committed table is kept), and written
  into the page by ``python docs/hooks/generate.py operators``
  (``tests/test_registry.py`` checks the page is up to date);
* ``bench/results/*.png`` are added to the site under ``results/`` so the
  benchmarks page shows the plots the benchmarks wrote.
"""
from __future__ import annotations

import argparse
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
MARKER = "<!-- cli-reference -->"
OPERATORS = ROOT / "docs" / "reference" / "operators.md"


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


def _registry():
    sys.path.insert(0, str(ROOT / "python"))
    from pypm_verified.torch import registry
    return registry


def operators_page(text: str) -> str:
    """``text`` (the operators page) with the op registry's table. Without
    torch (``make docs`` needs only the ``docs`` extra) the page's committed
    table is kept: ``tests/test_registry.py`` checks it is the registry's."""
    import importlib.util
    if importlib.util.find_spec("torch") is None:
        import logging
        logging.getLogger("mkdocs").info("operators page: torch is not installed; "
                                         "keeping the committed table")
        return text
    return _registry().render_page(text)


def on_page_markdown(markdown, page, config, files):
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, cli_reference())
    if "<!-- operators:begin -->" in markdown:
        markdown = operators_page(markdown)
    return markdown


def on_files(files, config):
    from mkdocs.structure.files import File
    for png in sorted((ROOT / "bench" / "results").glob("*.png")):
        files.append(File(f"results/{png.name}", str(ROOT / "bench"), config["site_dir"],
                          config["use_directory_urls"]))
    return files


if __name__ == "__main__":  # python docs/hooks/generate.py operators
    if sys.argv[1:] != ["operators"]:
        sys.exit("usage: python docs/hooks/generate.py operators")
    OPERATORS.write_text(operators_page(OPERATORS.read_text()))
