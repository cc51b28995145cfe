"""``example``: write one of the example models (:mod:`pypm_verified.examples`)
as a ``.pt2`` file to rewrite."""
from __future__ import annotations

import argparse
import importlib.util
import warnings

from .checks import check_writable
from .exitcodes import (EXIT_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_TERMINATED,
                        UsageError, exit_code_table)
from .output import say
from .parsing import _verbosity_options, command

EXAMPLE_DESCRIPTION = """\
Write an example model to rewrite, built offline with random (seeded)
weights and exported with torch.export (the IR the rewriter reads). Plain
PyTorch (the torch extra is enough):

  mlp        pre-norm feed-forward blocks with the tanh GELU written out
             (the library fuses it into aten.gelu and the linear layers
             with their activation)
  attention  self-attention blocks written out, softmax(q k^T / sqrt(d)) v
             (fused into scaled_dot_product_attention where profitable;
             at size small: with rewrite --ignore-profitability)

HuggingFace (the hf extra, transformers): bert, roberta, distilbert, gpt2,
llama, qwen2, with the eager attention the library rewrites.
"""


def _names():
    from ..examples import EXAMPLES
    return sorted(EXAMPLES)


def _sizes():
    from ..examples import SIZES
    return sorted(SIZES)


def _configure_example(sub) -> None:
    ex = sub.add_parser("example", help="write an example model (.pt2) to rewrite",
                        description=EXAMPLE_DESCRIPTION,
                        epilog=exit_code_table(codes=EXAMPLE_EXIT_CODES) + """

example:
  pypm-verified example mlp -o mlp.pt2
  pypm-verified rewrite mlp.pt2 -o mlp.fast.pt2
""", formatter_class=argparse.RawDescriptionHelpFormatter)
    ex.add_argument("name", nargs="?", choices=_names(), metavar="NAME",
                    help="the model: " + ", ".join(_names()))
    ex.add_argument("-o", "--output", metavar="OUT.pt2",
                    help="where to write it, whole or not at all (default: NAME.pt2)")
    ex.add_argument("--size", default="small", choices=_sizes(),
                    help="small (hidden 64, 2 layers, sequence 16; the default), bench "
                    "(hidden 256, 4 layers, sequence 128) or base (hidden 768, 12 layers, "
                    "sequence 128)")
    ex.add_argument("--layers", type=_positive, default=None, metavar="N",
                    help="number of layers (default: the size's)")
    ex.add_argument("--dynamic", action="store_true",
                    help="export with a dynamic batch and sequence")
    ex.add_argument("--list", action="store_true", help="list the models and exit")
    _verbosity_options(ex, "errors and the one-line result only")


def _positive(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s!r} is not an integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{v} is too few; give 1 or more")
    return v


#: (code, meaning): ``example``'s exit codes, printed by its ``--help``
EXAMPLE_EXIT_CODES = (
    (EXIT_OK, "ok: the model is written"),
    (EXIT_INPUT, "bad input: an unknown model or size, a path that cannot be written, or a "
                 "package the model needs is not installed (the message names the extra); "
                 "nothing is written"),
    (EXIT_INTERNAL, "internal error: an unexpected exception (a bug); nothing written"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C); nothing written"),
    (EXIT_TERMINATED, "terminated (SIGTERM); nothing written"),
)


@command("example", _configure_example)
def example_main(args, state: dict) -> int:
    """``example``: see :data:`EXAMPLE_DESCRIPTION`."""
    from .. import examples
    if args.list:
        for name in sorted(examples.EXAMPLES):
            extra = examples.requirement(name)[1]
            say(args, f"{name}" + (f"  (needs the {extra} extra)" if extra else ""))
        return EXIT_OK
    if not args.name:
        raise UsageError("example: give a model name (one of "
                         f"{', '.join(sorted(examples.EXAMPLES))}) or --list")
    out = args.output or f"{args.name}.pt2"
    check_writable(out, "-o")
    module, extra = examples.requirement(args.name)
    for module, extra in [("torch", "torch")] + ([(module, extra)] if module else []):
        if importlib.util.find_spec(module) is None:
            raise UsageError(f"example {args.name} needs {module}, which is not installed: "
                             f"pip install 'pypm_verified[{extra}]' "
                             "-c requirements/constraints.txt")
    try:
        with warnings.catch_warnings():
            # torch.export.save's own deprecation noise (its pytree specs)
            warnings.filterwarnings("ignore", category=FutureWarning, message=".*LeafSpec")
            size = examples.save(args.name, out, args.size, args.layers, dynamic=args.dynamic)
    except InterruptedError:  # a signal during the save; the temporary is gone
        raise KeyboardInterrupt from None
    except OSError as e:
        raise UsageError(f"-o {out}: cannot write it: {e.strerror or e}") from None
    state["written"].append(out)
    say(args, f"wrote {out} ({args.name}, size {args.size}"
        + (f", {args.layers} layer(s)" if args.layers else "")
        + (", dynamic batch and sequence" if args.dynamic else "") + f", {size} bytes)")
    return EXIT_OK
