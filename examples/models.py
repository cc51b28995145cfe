"""Small HuggingFace models built offline from configs, with random weights.

Every builder returns ``(model, example_inputs)``: an ``nn.Module`` in eval
mode and a tuple of tensors for ``torch.export.export``. Attention is the
explicit ("eager") implementation, which is what the rule library rewrites;
decoders are built with ``use_cache=False`` (a returned cache object breaks
export). Nothing is downloaded: configs are written out here and weights are
random (seeded), so the numbers are reproducible.

    python examples/models.py bert -o bert.pt2        # write one as .pt2
    python examples/models.py bert --dynamic -o bert_dyn.pt2   # dynamic batch and sequence
    python examples/models.py --list

Sizes: ``small`` (hidden 64, 2 layers, sequence 16; what the tests use),
``bench`` (hidden 256, 4 layers, sequence 128) and ``base`` (BERT-base-like
hidden 768, 12 layers, sequence 128).
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Dict, Tuple

SIZES = {
    #        hidden layers heads kv_heads inter  seq batch
    "small": (64, 2, 4, 2, 128, 16, 2),
    "bench": (256, 4, 4, 2, 1024, 128, 2),
    "base": (768, 12, 12, 4, 3072, 128, 1),
}
VOCAB = 1000


def _dims(size: str, layers=None):
    try:
        dims = SIZES[size]
    except KeyError:
        raise ValueError(f"unknown size {size!r}; expected one of {sorted(SIZES)}") from None
    if layers is not None:  # override the number of layers (benchmarks: 1..32)
        if int(layers) < 1:
            raise ValueError(f"layers must be >= 1, got {layers!r}")
        dims = (dims[0], int(layers)) + dims[2:]
    return dims


def _ids(batch, seq, seed=0):
    import torch
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (batch, seq), generator=g)
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[0, seq - seq // 4:] = 0  # padding in the first sequence: the mask matters
    return ids, mask


def _build(cls, cfg, seed=0):
    import torch
    torch.manual_seed(seed)
    m = cls(cfg)
    return m.eval()


def bert(size: str = "small", layers=None):
    import transformers as T
    h, n, heads, _, inter, seq, b = _dims(size, layers)
    cfg = T.BertConfig(vocab_size=VOCAB, hidden_size=h, num_hidden_layers=n,
                       num_attention_heads=heads, intermediate_size=inter,
                       max_position_embeddings=max(seq, 64), attn_implementation="eager")
    return _build(T.BertModel, cfg), _ids(b, seq)


def roberta(size: str = "small", layers=None):
    import transformers as T
    h, n, heads, _, inter, seq, b = _dims(size, layers)
    cfg = T.RobertaConfig(vocab_size=VOCAB, hidden_size=h, num_hidden_layers=n,
                          num_attention_heads=heads, intermediate_size=inter,
                          max_position_embeddings=max(seq, 64) + 2,
                          attn_implementation="eager")
    return _build(T.RobertaModel, cfg), _ids(b, seq)


def distilbert(size: str = "small", layers=None):
    import transformers as T
    h, n, heads, _, inter, seq, b = _dims(size, layers)
    cfg = T.DistilBertConfig(vocab_size=VOCAB, dim=h, n_layers=n, n_heads=heads,
                             hidden_dim=inter, max_position_embeddings=max(seq, 64),
                             attn_implementation="eager")
    return _build(T.DistilBertModel, cfg), _ids(b, seq)


def gpt2(size: str = "small", layers=None):
    import transformers as T
    h, n, heads, _, inter, seq, b = _dims(size, layers)
    cfg = T.GPT2Config(vocab_size=VOCAB, n_embd=h, n_layer=n, n_head=heads, n_inner=inter,
                       n_positions=max(seq, 64), use_cache=False,
                       attn_implementation="eager")
    ids, mask = _ids(b, seq)
    # GPT2Model.forward(input_ids, past_key_values, attention_mask, ...)
    return _build(T.GPT2Model, cfg), (ids, None, mask)


def llama(size: str = "small", layers=None):
    import transformers as T
    h, n, heads, kv, inter, seq, b = _dims(size, layers)
    cfg = T.LlamaConfig(vocab_size=VOCAB, hidden_size=h, num_hidden_layers=n,
                        num_attention_heads=heads, num_key_value_heads=kv,
                        intermediate_size=inter, max_position_embeddings=max(seq, 64),
                        use_cache=False, attn_implementation="eager")
    return _build(T.LlamaModel, cfg), _ids(b, seq)


def qwen2(size: str = "small", layers=None):
    import transformers as T
    h, n, heads, kv, inter, seq, b = _dims(size, layers)
    cfg = T.Qwen2Config(vocab_size=VOCAB, hidden_size=h, num_hidden_layers=n,
                        num_attention_heads=heads, num_key_value_heads=kv,
                        intermediate_size=inter, max_position_embeddings=max(seq, 64),
                        use_cache=False, attn_implementation="eager")
    return _build(T.Qwen2Model, cfg), _ids(b, seq)


MODELS: Dict[str, Callable] = {
    "bert": bert, "roberta": roberta, "distilbert": distilbert,
    "gpt2": gpt2, "llama": llama, "qwen2": qwen2,
}
# Attention blocks per model = layers; the tests check every one is rewritten.
def layers(size: str = "small", layers=None) -> int:
    return _dims(size, layers)[1]


def build(name: str, size: str = "small", layers=None):
    """``(model, example_inputs)`` for ``name`` (a key of MODELS); ``layers``
    overrides the size's number of layers."""
    try:
        fn = MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; expected one of {sorted(MODELS)}") from None
    return fn(size, layers)


def input_kwargs(inputs) -> dict:
    """The example inputs as keyword arguments. Pass them by name: GPT-2's
    ``forward`` takes ``past_key_values`` second, so a positional mask would
    land there (export fails with 'FakeTensor' has no 'get_seq_length')."""
    ids, mask = inputs[0], inputs[-1]  # GPT-2's positional form is (ids, None, mask)
    return {"input_ids": ids, "attention_mask": mask}


def export(name: str, size: str = "small", layers=None):
    """The model exported (``torch.export.export``, then
    ``run_decompositions({})``: the IR the rewriter works on). Inputs are
    passed by keyword (see ``input_kwargs``); ``layers`` overrides the size's
    number of layers."""
    import torch
    m, inputs = build(name, size, layers)
    with torch.no_grad():
        ep = torch.export.export(m, (), input_kwargs(inputs))
    return ep.run_decompositions({})


def dynamic_shapes(name: str, max_seq: int = 64) -> dict:
    """``dynamic_shapes`` for ``torch.export.export`` with the inputs passed by
    keyword (``input_kwargs``): a dynamic batch (1..64) and sequence
    (2..``max_seq``; the position embeddings hold 64 positions at size
    ``small``) on the ids and the mask."""
    from torch.export import Dim
    batch, seq = Dim("batch", min=1, max=64), Dim("seq", min=2, max=max_seq)
    return {"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}}


def export_dynamic(name: str, size: str = "small", layers=None):
    """``export`` with a dynamic batch and sequence (``dynamic_shapes``): the
    program accepts other batch and sequence sizes than the example's (the
    example batch is at least 2)."""
    import torch
    m, _ = build(name, size, layers)
    seq, batch = _dims(size, layers)[5:]
    # an example batch of 1 would be specialized (torch's 0/1 rule): use 2 then
    with torch.no_grad():
        ep = torch.export.export(m, (), input_kwargs(_ids(max(batch, 2), seq)),
                                 dynamic_shapes=dynamic_shapes(name, max(seq, 64)))
    return ep.run_decompositions({})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?", choices=sorted(MODELS))
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
        for k in sorted(MODELS):
            print(k)
        return 0
    import torch
    out = args.output or f"{args.model}.pt2"
    if args.format == "pt2":
        torch.export.save((export_dynamic if args.dynamic else export)(args.model, args.size),
                          out)
    else:
        m, inputs = build(args.model, args.size)
        torch.save({"model": m, "example_inputs": inputs}, out)
    print(f"wrote {out} ({args.model}, size {args.size}, {os.path.getsize(out)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
