"""Example models to rewrite, built offline with random weights
(``pypm-verified example NAME -o NAME.pt2``).

Two kinds:

* **Plain PyTorch** (:data:`TORCH_MODELS`; the ``torch`` extra is enough):
  ``mlp``, a pre-norm feed-forward block whose GELU is written out by hand
  in its tanh form (the rule library turns it into ``aten.gelu`` and fuses
  the linear layers with their activation), and ``attention``, a multi-head
  self-attention block written by hand (``softmax(q @ k^T / sqrt(d)) @ v``;
  the library turns it into ``scaled_dot_product_attention``, where that is
  profitable: at size ``small`` only with ``--ignore-profitability``).
* **HuggingFace** (:data:`MODELS`; needs the ``hf`` extra, transformers):
  BERT, RoBERTa, DistilBERT, GPT-2, LLaMA and Qwen2 built from configs
  written out here. Attention is the explicit ("eager") implementation,
  which is what the rule library rewrites; decoders are built with
  ``use_cache=False`` (a returned cache object breaks export).

Nothing is downloaded; weights are random and seeded, so the numbers are
reproducible. Every builder returns ``(model, example_inputs)``: an
``nn.Module`` in eval mode and a tuple of tensors. :func:`export` exports one
(``torch.export.export``, then ``run_decompositions({})``: the IR the
rewriter works on), :func:`save` writes it as a ``.pt2`` file, whole or not
at all (:func:`pypm_verified.torch.pipeline.save_atomic`).

Sizes (:data:`SIZES`): ``small`` (hidden 64, 2 layers, sequence 16; what
the tests use), ``bench`` (hidden 256, 4 layers, sequence 128) and
``base`` (BERT-base-like: hidden 768, 12 layers, sequence 128).

This module imports torch and transformers only when a model is built.
"""
from __future__ import annotations

import math
import os
from typing import Callable, Dict, Tuple

__all__ = ["SIZES", "VOCAB", "MODELS", "TORCH_MODELS", "EXAMPLES", "build", "export",
           "export_dynamic", "dynamic_shapes", "input_kwargs", "example_kwargs", "layers",
           "save", "requirement", "UnknownExample", "mlp", "attention", "bert", "roberta",
           "distilbert", "gpt2", "llama", "qwen2"]

SIZES = {
    #        hidden layers heads kv_heads inter  seq batch
    "small": (64, 2, 4, 2, 128, 16, 2),
    "bench": (256, 4, 4, 2, 1024, 128, 2),
    "base": (768, 12, 12, 4, 3072, 128, 1),
}
#: the vocabulary size of the HuggingFace models (token ids are below it)
VOCAB = 1000


class UnknownExample(ValueError):
    """An example model name (or size) that is not one: the message lists
    the names there are."""


def _dims(size: str, layers=None):
    try:
        dims = SIZES[size]
    except (KeyError, TypeError):
        raise UnknownExample(f"unknown size {size!r}; expected one of {sorted(SIZES)}") from None
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


def _hidden_states(batch, seq, hidden, seed=0):
    import torch
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(batch, seq, hidden, generator=g),)


# ------------------------------------------------------------ plain PyTorch

#: the plain-torch example modules' classes, once defined (:func:`_torch_classes`)
_CLASSES = ("FeedForward", "SelfAttention", "Stack")


def __getattr__(name):
    """``FeedForward``, ``SelfAttention`` and ``Stack`` (the plain-torch
    modules), defined on first use: this module imports torch only then
    (and a pickled example finds its classes here)."""
    if name in _CLASSES:
        _torch_classes()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _torch_classes():
    """The plain-torch example modules (defined on first use: torch is
    imported only then), as module attributes of this module."""
    if "Stack" in globals():
        return tuple(globals()[n] for n in _CLASSES)
    import torch
    from torch import nn

    class FeedForward(nn.Module):
        """``x + down(gelu_tanh(up(layer_norm(x))))``, the GELU written out."""

        def __init__(self, hidden, inter):
            super().__init__()
            self.norm = nn.LayerNorm(hidden)
            self.up = nn.Linear(hidden, inter)
            self.down = nn.Linear(inter, hidden)

        def forward(self, x):
            h = self.up(self.norm(x))
            h = 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi)
                                            * (h + 0.044715 * torch.pow(h, 3.0))))
            return x + self.down(h)

    class SelfAttention(nn.Module):
        """Multi-head self-attention written out: ``softmax(q k^T / sqrt(d)) v``."""

        def __init__(self, hidden, heads):
            super().__init__()
            self.heads = heads
            self.qkv = nn.Linear(hidden, 3 * hidden)
            self.out = nn.Linear(hidden, hidden)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(x).split(d, dim=-1)
            q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2)
                       for z in (q, k, v))
            a = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // self.heads), dim=-1)
            return x + self.out((a @ v).transpose(1, 2).reshape(b, t, d))

    class Stack(nn.Module):
        def __init__(self, blocks):
            super().__init__()
            self.blocks = nn.ModuleList(blocks)

        def forward(self, x):
            for blk in self.blocks:
                x = blk(x)
            return x

    classes = (FeedForward, SelfAttention, Stack)
    for cls in classes:  # picklable: found by name in this module
        cls.__qualname__, cls.__module__ = cls.__name__, __name__
        globals()[cls.__name__] = cls
    return classes


def mlp(size: str = "small", layers=None):
    """Plain PyTorch: ``layers`` pre-norm feed-forward blocks, each
    ``x + down(gelu_tanh(up(layer_norm(x))))`` with the tanh GELU written
    out; input ``x`` of shape (batch, sequence, hidden)."""
    import torch
    h, n, _, _, inter, seq, b = _dims(size, layers)
    ff, _, stack = _torch_classes()
    torch.manual_seed(0)
    return stack([ff(h, inter) for _ in range(n)]).eval(), _hidden_states(b, seq, h)


def attention(size: str = "small", layers=None):
    """Plain PyTorch: ``layers`` residual self-attention blocks with the
    attention written out; input ``x`` of shape (batch, sequence, hidden)."""
    import torch
    h, n, heads, _, _, seq, b = _dims(size, layers)
    _, sa, stack = _torch_classes()
    torch.manual_seed(0)
    return stack([sa(h, heads) for _ in range(n)]).eval(), _hidden_states(b, seq, h)


# ------------------------------------------------------------ HuggingFace

def bert(size: str = "small", layers=None):
    """HuggingFace ``BertModel`` (needs transformers)."""
    import transformers as T
    h, n, heads, _, inter, seq, b = _dims(size, layers)
    cfg = T.BertConfig(vocab_size=VOCAB, hidden_size=h, num_hidden_layers=n,
                       num_attention_heads=heads, intermediate_size=inter,
                       max_position_embeddings=max(seq, 64), attn_implementation="eager")
    return _build(T.BertModel, cfg), _ids(b, seq)


def roberta(size: str = "small", layers=None):
    """HuggingFace ``RobertaModel`` (needs transformers)."""
    import transformers as T
    h, n, heads, _, inter, seq, b = _dims(size, layers)
    cfg = T.RobertaConfig(vocab_size=VOCAB, hidden_size=h, num_hidden_layers=n,
                          num_attention_heads=heads, intermediate_size=inter,
                          max_position_embeddings=max(seq, 64) + 2,
                          attn_implementation="eager")
    return _build(T.RobertaModel, cfg), _ids(b, seq)


def distilbert(size: str = "small", layers=None):
    """HuggingFace ``DistilBertModel`` (needs transformers)."""
    import transformers as T
    h, n, heads, _, inter, seq, b = _dims(size, layers)
    cfg = T.DistilBertConfig(vocab_size=VOCAB, dim=h, n_layers=n, n_heads=heads,
                             hidden_dim=inter, max_position_embeddings=max(seq, 64),
                             attn_implementation="eager")
    return _build(T.DistilBertModel, cfg), _ids(b, seq)


def gpt2(size: str = "small", layers=None):
    """HuggingFace ``GPT2Model`` (needs transformers)."""
    import transformers as T
    h, n, heads, _, inter, seq, b = _dims(size, layers)
    cfg = T.GPT2Config(vocab_size=VOCAB, n_embd=h, n_layer=n, n_head=heads, n_inner=inter,
                       n_positions=max(seq, 64), use_cache=False,
                       attn_implementation="eager")
    ids, mask = _ids(b, seq)
    # GPT2Model.forward(input_ids, past_key_values, attention_mask, ...)
    return _build(T.GPT2Model, cfg), (ids, None, mask)


def llama(size: str = "small", layers=None):
    """HuggingFace ``LlamaModel`` (needs transformers)."""
    import transformers as T
    h, n, heads, kv, inter, seq, b = _dims(size, layers)
    cfg = T.LlamaConfig(vocab_size=VOCAB, hidden_size=h, num_hidden_layers=n,
                        num_attention_heads=heads, num_key_value_heads=kv,
                        intermediate_size=inter, max_position_embeddings=max(seq, 64),
                        use_cache=False, attn_implementation="eager")
    return _build(T.LlamaModel, cfg), _ids(b, seq)


def qwen2(size: str = "small", layers=None):
    """HuggingFace ``Qwen2Model`` (needs transformers)."""
    import transformers as T
    h, n, heads, kv, inter, seq, b = _dims(size, layers)
    cfg = T.Qwen2Config(vocab_size=VOCAB, hidden_size=h, num_hidden_layers=n,
                        num_attention_heads=heads, num_key_value_heads=kv,
                        intermediate_size=inter, max_position_embeddings=max(seq, 64),
                        use_cache=False, attn_implementation="eager")
    return _build(T.Qwen2Model, cfg), _ids(b, seq)


#: the HuggingFace models (need the ``hf`` extra): name -> builder
MODELS: Dict[str, Callable] = {
    "bert": bert, "roberta": roberta, "distilbert": distilbert,
    "gpt2": gpt2, "llama": llama, "qwen2": qwen2,
}
#: the plain-PyTorch models (the ``torch`` extra is enough): name -> builder
TORCH_MODELS: Dict[str, Callable] = {"mlp": mlp, "attention": attention}
#: every example: name -> builder
EXAMPLES: Dict[str, Callable] = {**TORCH_MODELS, **MODELS}


def layers(size: str = "small", layers=None) -> int:
    """The number of layers (attention blocks, for the HuggingFace models)
    of ``size``, or ``layers`` when given."""
    return _dims(size, layers)[1]


def requirement(name: str) -> Tuple[str, str]:
    """``(module, extra)``: the module example ``name`` needs beyond torch
    and the extra that installs it (``("", "")`` for a plain-torch one)."""
    _check_name(name)
    return ("transformers", "hf") if name in MODELS else ("", "")


def _check_name(name: str) -> None:
    if name not in EXAMPLES:
        raise UnknownExample(f"unknown example model {name!r}; expected one of "
                             f"{', '.join(sorted(EXAMPLES))}")


def build(name: str, size: str = "small", layers=None):
    """``(model, example_inputs)`` for ``name`` (a key of :data:`EXAMPLES`);
    ``layers`` overrides the size's number of layers. An unknown name or
    size raises :class:`UnknownExample` (a ``ValueError``)."""
    _check_name(name)
    _dims(size, layers)
    return EXAMPLES[name](size, layers)


def input_kwargs(inputs) -> dict:
    """A HuggingFace model's example inputs as keyword arguments. Pass them
    by name: GPT-2's ``forward`` takes ``past_key_values`` second, so a
    positional mask would land there (export fails with 'FakeTensor' has no
    'get_seq_length')."""
    ids, mask = inputs[0], inputs[-1]  # GPT-2's positional form is (ids, None, mask)
    return {"input_ids": ids, "attention_mask": mask}


def example_kwargs(name: str, inputs) -> dict:
    """Example ``name``'s inputs as the keyword arguments its ``forward``
    takes: :func:`input_kwargs` for a HuggingFace model, ``{"x": ...}`` for
    a plain-torch one."""
    _check_name(name)
    return input_kwargs(inputs) if name in MODELS else {"x": inputs[0]}


def export(name: str, size: str = "small", layers=None):
    """The model exported (``torch.export.export``, then
    ``run_decompositions({})``: the IR the rewriter works on). Inputs are
    passed by keyword (see :func:`input_kwargs`); ``layers`` overrides the
    size's number of layers."""
    import torch
    m, inputs = build(name, size, layers)
    with torch.no_grad():
        ep = torch.export.export(m, (), example_kwargs(name, inputs))
    return ep.run_decompositions({})


def dynamic_shapes(name: str, max_seq: int = 64) -> dict:
    """``dynamic_shapes`` for ``torch.export.export`` with the inputs passed by
    keyword (:func:`example_kwargs`): a dynamic batch (1..64) and sequence
    (2..``max_seq``; the position embeddings hold 64 positions at size
    ``small``) on the ids and the mask (on ``x`` for a plain-torch model)."""
    from torch.export import Dim
    batch, seq = Dim("batch", min=1, max=64), Dim("seq", min=2, max=max_seq)
    if name in TORCH_MODELS:
        return {"x": {0: batch, 1: seq}}
    return {"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}}


def export_dynamic(name: str, size: str = "small", layers=None):
    """:func:`export` with a dynamic batch and sequence
    (:func:`dynamic_shapes`): the program accepts other batch and sequence
    sizes than the example's (the example batch is at least 2)."""
    import torch
    m, _ = build(name, size, layers)
    h, _, _, _, _, seq, batch = _dims(size, layers)
    # an example batch of 1 would be specialized (torch's 0/1 rule): use 2 then
    inputs = (_hidden_states(max(batch, 2), seq, h) if name in TORCH_MODELS
              else _ids(max(batch, 2), seq))
    with torch.no_grad():
        ep = torch.export.export(m, (), example_kwargs(name, inputs),
                                 dynamic_shapes=dynamic_shapes(name, max(seq, 64)))
    return ep.run_decompositions({})


def save(name: str, path: str, size: str = "small", layers=None, dynamic: bool = False,
         fmt: str = "pt2") -> int:
    """Write example ``name`` to ``path``, whole or not at all (a hidden
    temporary renamed over ``path``: :mod:`pypm_verified._atomic`); returns
    the file's size in bytes. ``fmt="pt2"``: the exported program
    (:func:`export`, or :func:`export_dynamic` with ``dynamic``), as
    ``torch.export.save`` writes it; ``fmt="pickle"``: ``torch.save`` of
    ``{"model": module, "example_inputs": inputs}`` (loading it runs code:
    the rewriter reads it only with ``--allow-pickle``)."""
    if fmt not in ("pt2", "pickle"):
        raise ValueError(f"unknown format {fmt!r}; expected 'pt2' or 'pickle'")
    if dynamic and fmt != "pt2":
        raise ValueError("dynamic shapes need the pt2 format")
    import torch
    from ._atomic import write_atomic
    path = os.fspath(path)
    if fmt == "pt2":
        ep = (export_dynamic if dynamic else export)(name, size, layers)
        write_atomic(path, lambda f: torch.export.save(ep, f), what=f"saving {path}")
    else:
        m, inputs = build(name, size, layers)
        write_atomic(path, lambda f: torch.save({"model": m, "example_inputs": inputs}, f),
                     what=f"saving {path}")
    return os.path.getsize(path)
