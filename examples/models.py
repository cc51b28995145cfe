"""The example models of :mod:`pypm_verified.examples`, from a checkout.

The builders live in the package (a pip install has them as
``pypm-verified example NAME -o NAME.pt2``); this script and module keep the
checkout's spelling working (``import models`` in the tests and benchmarks).
:data:`MODELS` are the HuggingFace models (the ``hf`` extra), :data:`TORCH_MODELS`
the plain-PyTorch ones.

    python examples/models.py bert -o bert.pt2        # write one as .pt2
    python examples/models.py bert --dynamic -o bert_dyn.pt2   # dynamic batch and sequence
    python examples/models.py mlp -o mlp.pt2          # plain PyTorch, no transformers
    python examples/models.py --list

Sizes: ``small`` (hidden 64, 2 layers, sequence 16; what the tests use),
``bench`` (hidden 256, 4 layers, sequence 128) and ``base`` (BERT-base-like
hidden 768, 12 layers, sequence 128).
"""
from __future__ import annotations

import argparse
import os
import sys

try:
    import pypm_verified  # noqa: F401
except ImportError:  # run from a checkout without the package installed
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from pypm_verified.examples import (  # noqa: E402,F401 -- this module's API
    EXAMPLES, MODELS, SIZES, TORCH_MODELS, VOCAB, UnknownExample, _build, _dims, _ids, attention,
    bert, build, distilbert, dynamic_shapes, example_kwargs, export, export_dynamic, gpt2,
    input_kwargs, layers, llama, mlp, qwen2, roberta, save)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?", choices=sorted(EXAMPLES))
    ap.add_argument("-o", "--output", help="where to write (default: MODEL.pt2)")
    ap.add_argument("--size", default="small", choices=sorted(SIZES))
    ap.add_argument("--format", default="pt2", choices=("pt2", "pickle"),
                    help="pt2: torch.export.save'd ExportedProgram; pickle: torch.save'd "
                         "{'model': module, 'example_inputs': inputs} (unpickling it runs "
                         "code: the rewriter reads it only with --allow-pickle)")
    ap.add_argument("--list", action="store_true", help="list the models and exit")
    ap.add_argument("--dynamic", action="store_true",
                    help="export with a dynamic batch and sequence (pt2 only)")
    args = ap.parse_args(argv)
    if args.list or not args.model:
        for k in sorted(EXAMPLES):
            print(k)
        return 0
    if args.dynamic and args.format != "pt2":
        ap.error("--dynamic needs --format pt2")
    out = args.output or f"{args.model}.pt2"
    n = save(args.model, out, args.size, dynamic=args.dynamic, fmt=args.format)
    print(f"wrote {out} ({args.model}, size {args.size}, {n} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
