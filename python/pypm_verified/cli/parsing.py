"""The argument parser: one-line usage errors, argument types shared by the
subcommands, the options several subcommands take, and the registry of
subcommands (:data:`COMMANDS`)."""
from __future__ import annotations

import argparse
from typing import Callable, Dict, Tuple

from .exitcodes import EXIT_INPUT, exit_code_table


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (and exit code 2)."""

    def error(self, message):
        from .text import printable  # an argument may be a file's name: shown inert
        self.exit(EXIT_INPUT, f"error: {printable(message)} (see `{self.prog} --help`)\n")


def _int_at_least(lo: int, what: str):
    def parse(s: str) -> int:
        try:
            v = int(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{s!r} is not an integer") from None
        if v < lo:
            raise argparse.ArgumentTypeError(f"{v} is {what}; give {lo} or more")
        return v
    return parse


COMMANDS: Dict[str, Tuple[Callable, Callable]] = {}  # name -> (configure, run)


def command(name: str, configure: Callable):
    """Register a subcommand: ``configure(subparsers)`` adds its parser, the
    decorated ``run(args, state) -> exit code`` runs it (``state["written"]``:
    the files it wrote, for the message if it is interrupted)."""
    def deco(run):
        COMMANDS[name] = (configure, run)
        return run
    return deco


class _Version(argparse.Action):
    """``--version``: :func:`.version.version_text` (computed only when asked)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help="print the version (and the engine library's path) and exit"):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from .version import version_text
        print(version_text())
        parser.exit()


def parser() -> argparse.ArgumentParser:
    """The parser of every subcommand in :data:`COMMANDS`; ``.commands`` maps
    each name to its own parser (whose usage errors point to its ``--help``)."""
    ap = _Parser(prog="python -m pypm_verified", description="pypm_verified command line",
                 epilog=exit_code_table(), formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", action=_Version)
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND",
                            parser_class=_Parser)
    for configure, _ in COMMANDS.values():
        configure(sub)
    ap.commands = dict(sub.choices)
    return ap


def parse(ap: argparse.ArgumentParser, argv) -> argparse.Namespace:
    """``ap.parse_args(argv)``, but an option the subcommand does not know
    is that subcommand's usage error (pointing to its own ``--help``)."""
    args, extra = ap.parse_known_args(argv)
    if extra:
        ap.commands[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _verbosity_options(ap, quiet: str = "errors and the one-line result only") -> None:
    """``-v``/``--verbose`` and ``-q``/``--quiet``: the messages' level
    (:mod:`.logs`), as ``args.verbosity`` (1, 0 or -1)."""
    g = ap.add_mutually_exclusive_group()
    g.add_argument("-v", "--verbose", dest="verbosity", action="store_const", const=1,
                   default=0, help="more messages (debug level; tracebacks of errors)")
    g.add_argument("-q", "--quiet", dest="verbosity", action="store_const", const=-1,
                   help=f"fewer messages: {quiet}")


def _import_option(ap) -> None:
    """``--import MODULE`` and ``--allow-pickle``: what loading the model
    may run (nothing from the file without them)."""
    ap.add_argument("--import", action="append", dest="imports", metavar="MODULE",
                    help="import MODULE before loading the model (repeatable): the library "
                    "that registers a custom operator or a pytree type the program uses "
                    "(known ones are imported without it, e.g. transformers.integrations.moe "
                    "for torch.ops.transformers.*; a module a file names is never imported "
                    "otherwise), or that defines a pickled model's class")
    ap.add_argument("--allow-pickle", action="store_true",
                    help="let loading use Python's full unpickler, which RUNS CODE from the "
                    "file: needed for a torch.save'd nn.Module (and a .pt2 whose pickled "
                    "parts hold more than tensors); without it such a file is refused "
                    "(exit 2). Only for files you trust")


#: the most steps ``--fuel`` takes (the engines' fuel is a 63-bit integer)
MAX_FUEL = (1 << 62) - 1


def _fuel(s: str) -> int:
    v = _int_at_least(1, "too little")(s)
    if v > MAX_FUEL:
        raise argparse.ArgumentTypeError(f"{v} is too much; give at most {MAX_FUEL}")
    return v


def _fuel_option(ap) -> None:
    ap.add_argument("--fuel", type=_fuel, default=None, metavar="N",
                    help="machine steps one match may take before it is left undecided "
                    "(a positive integer; default 1<<26): a pattern that runs out of it is "
                    "reported, naming the pattern and the node")


def _html_options(ap, what: str) -> None:
    ap.add_argument("--html", metavar="REPORT.html",
                    help=f"also write a self-contained HTML picture (atomically): {what}; "
                    "laid out by Graphviz's dot, which must be installed")
    ap.add_argument("--html-layers", type=_int_at_least(1, "too few"), default=None,
                    metavar="N", help="with --html: repeated layers drawn in full at most "
                    "(default 3; the others are one box each, saying what matched in them)")


_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _max_memory(s: str) -> int:
    """``--max-memory``'s value in bytes, 0 for no limit: bytes, or a
    number with K, M, G or T (powers of 1024, ``B``/``iB`` allowed after
    it); ``0``/``none``: no limit. The same grammar as
    :func:`pypm_verified.torch.memory.parse_size` (which needs torch; a
    parse must not)."""
    import re
    t = s.strip()
    if t.lower() in ("none", "off"):
        return 0
    m = re.match(r"^(\d+(?:\.\d*)?|\.\d+)\s*([KMGT]?)(?:I?B)?$", t, re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"{s!r} is not a size; give bytes or a number with "
                                         "K, M, G or T (e.g. 8G, 512M), or 0 / none for no "
                                         "limit")
    return int(float(m.group(1)) * _SIZE_UNITS[m.group(2).upper()])


def _max_memory_option(ap) -> None:
    """``--max-memory SIZE`` as ``args.max_memory`` (bytes; 0: no limit;
    None: the default, :func:`pypm_verified.torch.memory.default_limit`)."""
    ap.add_argument("--max-memory", type=_max_memory, default=None, metavar="SIZE",
                    help="refuse (exit 2) to run a program on its sample inputs (the "
                    "numerics check, --benchmark) when that would need more memory than SIZE "
                    "by an estimate from its shapes: inputs counted whole (as materialized), "
                    "weights, and the peak of the values alive at once. The original is "
                    "sized right after loading, the rewritten program before it runs. SIZE: "
                    "bytes, or with K, M, G or T (powers of 1024; e.g. 8G); default min(16G, "
                    "half the physical memory); 0 or none: no limit")


def _share(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {s!r}") from None
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"{s}: not in [0, 1]")
    return v


def _ray_address(s: str) -> str:
    if not s.strip():
        raise argparse.ArgumentTypeError("empty; give 'auto' or a cluster's address "
                                         "(HOST:PORT or ray://HOST:PORT)")
    return s


def executor_options(ap, unit: str = "tasks") -> None:
    """``--jobs N`` (local worker processes) and ``--ray auto|ADDRESS``: the
    executor of :mod:`pypm_verified.parallel`, as ``args.jobs``/``args.ray``."""
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--jobs", type=_int_at_least(1, "too few"), default=1, metavar="N",
                   help=f"run the {unit} in N local worker processes (default 1: in this "
                   "process, one after the other); the results are the same")
    g.add_argument("--ray", type=_ray_address, default=None, metavar="auto|ADDRESS",
                   help=f"run the {unit} on a Ray cluster: 'auto' joins the one RAY_ADDRESS "
                   "or `ray start` names, else starts a local one; ADDRESS joins that "
                   "cluster (needs the 'cluster' extra; the same code and files on every "
                   "node)")
