"""The attention variants on small models with random weights
(offline): T5, MPNet, BLOOM, DeBERTa-v2 (with and without its relative
attention), nn.MultiheadAttention (need_weights=True) and
nn.TransformerEncoderLayer, rewritten with the attention rules for CUDA
(profitability at every size) and checked against the original.

    python examples/attention_models.py            # all of them, a table
    python examples/attention_models.py bloom t5   # some

Prints, per model: attention blocks fused (``sdpa`` firings) of the
softmaxes in the exported graph, softmaxes left, declines with their
reasons, and the largest difference of the outputs (example and random
inputs, `pypm_verified.torch.check`).
"""
from __future__ import annotations

import sys
import time

SEQ, BATCH, VOCAB = 8, 2, 100


def _ids():
    import torch
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    mask[0, SEQ - 2:] = 0  # padding in the first sequence
    return {"input_ids": ids, "attention_mask": mask}  # by keyword (BLOOM's 2nd is a cache)


def t5(layers=2):
    import transformers as T
    cfg = T.T5Config(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=layers,
                     num_heads=4, attn_implementation="eager")
    return T.T5EncoderModel(cfg), _ids()


def mpnet(layers=2):
    import transformers as T
    cfg = T.MPNetConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=layers,
                        num_attention_heads=4, intermediate_size=64,
                        attn_implementation="eager")
    return T.MPNetModel(cfg), _ids()


def bloom(layers=2):
    import transformers as T
    cfg = T.BloomConfig(vocab_size=VOCAB, hidden_size=32, n_layer=layers, n_head=4,
                        use_cache=False, attn_implementation="eager")
    return T.BloomModel(cfg), _ids()


def deberta(layers=2, relative=False):
    import transformers as T
    kw = dict(relative_attention=True, pos_att_type=["c2p", "p2c"],
              max_relative_positions=-1, position_buckets=-1) if relative else {}
    cfg = T.DebertaV2Config(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=layers,
                            num_attention_heads=4, intermediate_size=64,
                            max_position_embeddings=64, attn_implementation="eager", **kw)
    return T.DebertaV2Model(cfg), _ids()


def deberta_relative(layers=2):
    return deberta(layers, relative=True)


def mha(layers=1):
    import torch
    import torch.nn as nn

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = nn.MultiheadAttention(32, 4, batch_first=True)

        def forward(self, x):
            return self.m(x, x, x)[0]  # need_weights=True: the weights path
    return M(), {"x": torch.randn(BATCH, SEQ, 32)}


def encoder_layer(layers=1):
    import torch
    import torch.nn as nn
    return nn.TransformerEncoderLayer(32, 4, 64, batch_first=True), \
        {"src": torch.randn(BATCH, SEQ, 32)}


MODELS = {"t5": t5, "mpnet": mpnet, "bloom": bloom, "deberta": deberta,
          "deberta_relative": deberta_relative, "mha": mha, "encoder_layer": encoder_layer}


def build(name: str, layers=None):
    """``(model in eval mode, example inputs by keyword)``, seeded."""
    import torch
    torch.manual_seed(0)
    m, inputs = MODELS[name]() if layers is None else MODELS[name](layers)
    return m.eval(), inputs


def run(name: str, layers=None):
    """Rewrite ``name`` with the attention rules (target cuda): a dict of what
    happened."""
    import torch
    from pypm_verified.library import default_patterns
    from pypm_verified.torch.loader import load_model
    from pypm_verified.torch.pipeline import rewrite_program
    m, inputs = build(name, layers)
    t = time.perf_counter()
    prog = load_model(m, (), inputs)
    soft = (torch.ops.aten.softmax.int, torch.ops.aten._safe_softmax.default)
    sdpa = torch.ops.aten.scaled_dot_product_attention.default
    before = [n.target for n in prog.ep.graph.nodes if n.op == "call_function"]
    r = rewrite_program(prog, default_patterns(("attention",)), target="cuda")
    after = [n.target for n in r.ep.graph.nodes if n.op == "call_function"]
    return {"model": name, "softmax_before": sum(t in soft for t in before),
            "sdpa_before": before.count(sdpa), "fused": r.report.firings.get("sdpa", 0),
            "softmax_after": sum(t in soft for t in after), "sdpa_after": after.count(sdpa),
            "declines": r.report.declines.get("Attention", {}).get("sdpa", {}),
            "numerics_ok": r.numerics.ok, "max_abs": r.numerics.max_abs,
            "seconds": time.perf_counter() - t}


def main(argv=None) -> int:
    names = (argv if argv is not None else sys.argv[1:]) or list(MODELS)
    print("| model | softmax (SDPA) in the export | fused | softmax left | max abs diff | "
          "declined |")
    print("|---|---|---|---|---|---|")
    ok = True
    for n in names:
        d = run(n)
        ok &= d["numerics_ok"]
        why = "; ".join(f"{k} ({v})" for k, v in d["declines"].items()) or "-"
        print(f"| {n} | {d['softmax_before']} ({d['sdpa_before']}) | {d['fused']} | "
              f"{d['softmax_after']} | {d['max_abs']:.2g} | {why} |", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
