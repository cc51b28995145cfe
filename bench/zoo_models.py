"""The model zoo of bench/bench_zoo.py: small architectures built offline.

Every entry of :data:`ZOO` is ``name -> Entry(family, build)``; ``build()``
returns ``(module, example_kwargs, dynamic_shapes)``: an ``nn.Module`` in
eval mode with random (seeded) weights, its example inputs *by keyword*
(``forward(**example_kwargs)``) and a ``dynamic_shapes`` spec for
``torch.export.export(module, (), example_kwargs, dynamic_shapes=...)``
keyed by the same names (a dynamic batch, and a dynamic sequence or length
where the architecture admits one; vision models: the batch only, their
image size is fixed by the position embeddings).

Nothing is downloaded: each model is made from a ``transformers`` config
class (``transformers`` 5.x: text encoders, decoders, encoder-decoders,
vision transformers, CNNs, speech encoders) or from ``torch.nn`` with small
sizes (hidden 64, 2 layers, 4 heads, 2 KV heads, FFN 128; sequence 16, batch
2; images 32x32; audio 800 samples). Attention is the explicit ("eager")
implementation (``attn_implementation="eager"``), which is what the rule
library rewrites; decoders are built with ``use_cache=False``.

    python bench/zoo_models.py --list          # the names, by family
    python bench/zoo_models.py NAME            # build it and run it once
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable, Dict, Tuple

H, LAYERS, HEADS, KV, INTER = 64, 2, 4, 2, 128   # hidden, layers, heads, kv heads, FFN
SEQ, BATCH, VOCAB, POS = 16, 2, 1000, 64         # sequence, batch, vocabulary, positions
IMG, PATCH, CH = 32, 8, 3                         # image side, ViT patch, channels
MAX_BATCH = 64

FAMILIES = ("encoder", "decoder", "encoder-decoder", "vision transformer", "cnn", "speech",
            "torch.nn")


@dataclass(frozen=True)
class Entry:
    family: str
    build: Callable[[], Tuple[object, dict, dict]]
    note: str = ""


ZOO: Dict[str, Entry] = {}


def _entry(name: str, family: str, note: str = ""):
    assert family in FAMILIES, family

    def deco(fn):
        ZOO[name] = Entry(family, fn, note)
        return fn
    return deco


# ------------------------------------------------------------------ helpers

def _seed():
    import torch
    torch.manual_seed(0)


def _mk(model_cls, cfg):
    _seed()
    return model_cls(cfg).eval()


def _dims(seq_max: int = POS, seq_min: int = 2, seq_name: str = "seq"):
    from torch.export import Dim
    return Dim("batch", min=1, max=MAX_BATCH), Dim(seq_name, min=seq_min, max=seq_max)


def _text_inputs(batch=BATCH, seq=SEQ, vocab=VOCAB, mask=True, seed=0):
    import torch
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, vocab, (batch, seq), generator=g)
    kw = {"input_ids": ids}
    if mask:
        m = torch.ones(batch, seq, dtype=torch.long)
        m[0, seq - seq // 4:] = 0  # padding in the first sequence: the mask matters
        kw["attention_mask"] = m
    return kw


def _text(model_cls, cfg, mask=True, seq_max=POS, vocab=VOCAB):
    """A text model taking ``input_ids`` (and ``attention_mask``): dynamic
    batch and sequence."""
    m = _mk(model_cls, cfg)
    kw = _text_inputs(mask=mask, vocab=vocab)
    b, s = _dims(seq_max)
    spec = {k: {0: b, 1: s} for k in kw}
    return m, kw, spec


def _seq2seq(model_cls, cfg, vocab=VOCAB):
    """An encoder-decoder: ``input_ids``, ``attention_mask`` and
    ``decoder_input_ids`` (dynamic batch, source and target lengths)."""
    import torch
    from torch.export import Dim
    m = _mk(model_cls, cfg)
    kw = _text_inputs(vocab=vocab)
    g = torch.Generator().manual_seed(1)
    kw["decoder_input_ids"] = torch.randint(3, vocab, (BATCH, SEQ // 2), generator=g)
    b, s = _dims()
    t = Dim("tgt", min=2, max=POS)
    spec = {"input_ids": {0: b, 1: s}, "attention_mask": {0: b, 1: s},
            "decoder_input_ids": {0: b, 1: t}}
    return m, kw, spec


def _image(model_cls, cfg, size=IMG, channels=CH, key="pixel_values"):
    """A vision model on ``pixel_values`` (batch dynamic)."""
    import torch
    from torch.export import Dim
    m = _mk(model_cls, cfg)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(BATCH, channels, size, size, generator=g)
    return m, {key: x}, {key: {0: Dim("batch", min=1, max=MAX_BATCH)}}


def _T():
    import transformers
    return transformers


_LLM = dict(vocab_size=VOCAB, hidden_size=H, num_hidden_layers=LAYERS,
            num_attention_heads=HEADS, num_key_value_heads=KV, intermediate_size=INTER,
            max_position_embeddings=POS, use_cache=False, attn_implementation="eager")
_BERT = dict(vocab_size=VOCAB, hidden_size=H, num_hidden_layers=LAYERS,
             num_attention_heads=HEADS, intermediate_size=INTER,
             max_position_embeddings=POS + 2, attn_implementation="eager")
_BART = dict(vocab_size=VOCAB, d_model=H, encoder_layers=LAYERS, decoder_layers=LAYERS,
             encoder_attention_heads=HEADS, decoder_attention_heads=HEADS,
             encoder_ffn_dim=INTER, decoder_ffn_dim=INTER, max_position_embeddings=POS,
             use_cache=False, attn_implementation="eager", pad_token_id=1,
             bos_token_id=0, eos_token_id=2, decoder_start_token_id=2)
_VIT = dict(hidden_size=H, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
            intermediate_size=INTER, image_size=IMG, patch_size=PATCH, num_channels=CH,
            attn_implementation="eager")


# ------------------------------------------------------------------ text encoders

@_entry("bert", "encoder")
def bert():
    T = _T()
    return _text(T.BertModel, T.BertConfig(**_BERT))


@_entry("roberta", "encoder")
def roberta():
    T = _T()
    return _text(T.RobertaModel, T.RobertaConfig(**_BERT))


@_entry("xlm_roberta", "encoder")
def xlm_roberta():
    T = _T()
    return _text(T.XLMRobertaModel, T.XLMRobertaConfig(**_BERT))


@_entry("camembert", "encoder")
def camembert():
    T = _T()
    return _text(T.CamembertModel, T.CamembertConfig(**_BERT))


@_entry("albert", "encoder")
def albert():
    T = _T()
    return _text(T.AlbertModel, T.AlbertConfig(embedding_size=32, **_BERT))


@_entry("distilbert", "encoder")
def distilbert():
    T = _T()
    cfg = T.DistilBertConfig(vocab_size=VOCAB, dim=H, n_layers=LAYERS, n_heads=HEADS,
                             hidden_dim=INTER, max_position_embeddings=POS,
                             attn_implementation="eager")
    return _text(T.DistilBertModel, cfg)


@_entry("electra", "encoder")
def electra():
    T = _T()
    return _text(T.ElectraModel, T.ElectraConfig(embedding_size=32, **_BERT))


@_entry("deberta_v2", "encoder")
def deberta_v2():
    T = _T()
    cfg = T.DebertaV2Config(vocab_size=VOCAB, hidden_size=H, num_hidden_layers=LAYERS,
                            num_attention_heads=HEADS, intermediate_size=INTER,
                            max_position_embeddings=POS, relative_attention=True,
                            position_buckets=32, max_relative_positions=POS,
                            pos_att_type=["p2c", "c2p"], attn_implementation="eager")
    return _text(T.DebertaV2Model, cfg)


@_entry("mpnet", "encoder")
def mpnet():
    T = _T()
    return _text(T.MPNetModel, T.MPNetConfig(**_BERT))


@_entry("roformer", "encoder")
def roformer():
    T = _T()
    return _text(T.RoFormerModel, T.RoFormerConfig(embedding_size=H, **_BERT))


@_entry("esm", "encoder")
def esm():
    T = _T()
    cfg = T.EsmConfig(pad_token_id=1, mask_token_id=2, position_embedding_type="rotary",
                      **_BERT)
    return _text(T.EsmModel, cfg)


@_entry("modernbert", "encoder")
def modernbert():
    T = _T()
    cfg = T.ModernBertConfig(vocab_size=VOCAB, hidden_size=H, num_hidden_layers=LAYERS,
                             num_attention_heads=HEADS, intermediate_size=INTER,
                             max_position_embeddings=POS, global_attn_every_n_layers=2,
                             local_attention=8, pad_token_id=0,
                             attn_implementation="eager")
    return _text(T.ModernBertModel, cfg)


@_entry("clip_text", "encoder")
def clip_text():
    T = _T()
    cfg = T.CLIPTextConfig(vocab_size=VOCAB, hidden_size=H, num_hidden_layers=LAYERS,
                           num_attention_heads=HEADS, intermediate_size=INTER,
                           max_position_embeddings=POS, attn_implementation="eager")
    return _text(T.CLIPTextModel, cfg)


# ------------------------------------------------------------------ decoders

@_entry("gpt2", "decoder")
def gpt2():
    T = _T()
    cfg = T.GPT2Config(vocab_size=VOCAB, n_embd=H, n_layer=LAYERS, n_head=HEADS,
                       n_inner=INTER, n_positions=POS, use_cache=False,
                       attn_implementation="eager")
    return _text(T.GPT2Model, cfg)


@_entry("gpt_neo", "decoder")
def gpt_neo():
    T = _T()
    cfg = T.GPTNeoConfig(vocab_size=VOCAB, hidden_size=H, num_layers=LAYERS,
                         num_heads=HEADS, intermediate_size=INTER,
                         attention_types=[[["global", "local"], 1]], window_size=8,
                         max_position_embeddings=POS, use_cache=False,
                         attn_implementation="eager")
    # the causal-mask buffer has max_position_embeddings rows, and the export
    # guards seq != POS ("Constraints violated (seq)"): the sequence stops below
    return _text(T.GPTNeoModel, cfg, seq_max=POS - 1)


@_entry("gptj", "decoder")
def gptj():
    T = _T()
    cfg = T.GPTJConfig(vocab_size=VOCAB, n_embd=H, n_layer=LAYERS, n_head=HEADS,
                       n_inner=INTER, rotary_dim=8, n_positions=POS, use_cache=False,
                       attn_implementation="eager")
    return _text(T.GPTJModel, cfg)


@_entry("gpt_neox", "decoder")
def gpt_neox():
    T = _T()
    cfg = T.GPTNeoXConfig(vocab_size=VOCAB, hidden_size=H, num_hidden_layers=LAYERS,
                          num_attention_heads=HEADS, intermediate_size=INTER,
                          max_position_embeddings=POS, use_cache=False,
                          attn_implementation="eager")
    return _text(T.GPTNeoXModel, cfg)


@_entry("gpt_bigcode", "decoder")
def gpt_bigcode():
    T = _T()
    cfg = T.GPTBigCodeConfig(vocab_size=VOCAB, n_embd=H, n_layer=LAYERS, n_head=HEADS,
                             n_inner=INTER, n_positions=POS, multi_query=True,
                             use_cache=False, attn_implementation="eager")
    return _text(T.GPTBigCodeModel, cfg)


@_entry("opt", "decoder")
def opt():
    T = _T()
    cfg = T.OPTConfig(vocab_size=VOCAB, hidden_size=H, num_hidden_layers=LAYERS,
                      num_attention_heads=HEADS, ffn_dim=INTER, word_embed_proj_dim=H,
                      max_position_embeddings=POS, use_cache=False,
                      attn_implementation="eager")
    return _text(T.OPTModel, cfg)


@_entry("bloom", "decoder")
def bloom():
    T = _T()
    cfg = T.BloomConfig(vocab_size=VOCAB, hidden_size=H, n_layer=LAYERS, n_head=HEADS,
                        use_cache=False, attn_implementation="eager")
    return _text(T.BloomModel, cfg)


@_entry("falcon", "decoder")
def falcon():
    T = _T()
    cfg = T.FalconConfig(vocab_size=VOCAB, hidden_size=H, num_hidden_layers=LAYERS,
                         num_attention_heads=HEADS, new_decoder_architecture=True,
                         num_kv_heads=KV, max_position_embeddings=POS, use_cache=False,
                         attn_implementation="eager")
    return _text(T.FalconModel, cfg)


@_entry("llama", "decoder")
def llama():
    T = _T()
    return _text(T.LlamaModel, T.LlamaConfig(**_LLM))


@_entry("mistral", "decoder")
def mistral():
    T = _T()
    return _text(T.MistralModel, T.MistralConfig(sliding_window=8, **_LLM))


@_entry("mixtral", "decoder")
def mixtral():
    T = _T()
    return _text(T.MixtralModel, T.MixtralConfig(num_local_experts=4, num_experts_per_tok=2,
                                                 **_LLM))


@_entry("qwen2", "decoder")
def qwen2():
    T = _T()
    return _text(T.Qwen2Model, T.Qwen2Config(**_LLM))


@_entry("qwen3", "decoder")
def qwen3():
    T = _T()
    return _text(T.Qwen3Model, T.Qwen3Config(head_dim=H // HEADS, **_LLM))


@_entry("qwen2_moe", "decoder")
def qwen2_moe():
    T = _T()
    cfg = T.Qwen2MoeConfig(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64,
                           shared_expert_intermediate_size=64, **_LLM)
    return _text(T.Qwen2MoeModel, cfg)


@_entry("phi", "decoder")
def phi():
    T = _T()
    return _text(T.PhiModel, T.PhiConfig(**_LLM))


@_entry("phi3", "decoder")
def phi3():
    T = _T()
    return _text(T.Phi3Model, T.Phi3Config(pad_token_id=0, **_LLM))


@_entry("gemma", "decoder")
def gemma():
    T = _T()
    return _text(T.GemmaModel, T.GemmaConfig(head_dim=H // HEADS, **_LLM))


@_entry("gemma2", "decoder")
def gemma2():
    T = _T()
    return _text(T.Gemma2Model, T.Gemma2Config(head_dim=H // HEADS, sliding_window=8, **_LLM))


@_entry("stablelm", "decoder")
def stablelm():
    T = _T()
    return _text(T.StableLmModel, T.StableLmConfig(**_LLM))


@_entry("olmo2", "decoder")
def olmo2():
    T = _T()
    return _text(T.Olmo2Model, T.Olmo2Config(**_LLM))


@_entry("starcoder2", "decoder")
def starcoder2():
    T = _T()
    return _text(T.Starcoder2Model, T.Starcoder2Config(**_LLM))


@_entry("granite", "decoder")
def granite():
    T = _T()
    return _text(T.GraniteModel, T.GraniteConfig(**_LLM))


@_entry("codegen", "decoder")
def codegen():
    T = _T()
    cfg = T.CodeGenConfig(vocab_size=VOCAB, n_embd=H, n_layer=LAYERS, n_head=HEADS,
                          n_inner=INTER, rotary_dim=8, n_positions=POS, n_ctx=POS,
                          use_cache=False, attn_implementation="eager")
    return _text(T.CodeGenModel, cfg)


@_entry("biogpt", "decoder")
def biogpt():
    T = _T()
    cfg = T.BioGptConfig(vocab_size=VOCAB, hidden_size=H, num_hidden_layers=LAYERS,
                         num_attention_heads=HEADS, intermediate_size=INTER,
                         max_position_embeddings=POS + 2, use_cache=False,
                         attn_implementation="eager")
    return _text(T.BioGptModel, cfg)


@_entry("xglm", "decoder")
def xglm():
    T = _T()
    cfg = T.XGLMConfig(vocab_size=VOCAB, d_model=H, num_layers=LAYERS, attention_heads=HEADS,
                       ffn_dim=INTER, max_position_embeddings=POS + 2, use_cache=False,
                       attn_implementation="eager")
    return _text(T.XGLMModel, cfg)


# ------------------------------------------------------------------ encoder-decoders

@_entry("t5", "encoder-decoder")
def t5():
    T = _T()
    cfg = T.T5Config(vocab_size=VOCAB, d_model=H, d_kv=H // HEADS, d_ff=INTER,
                     num_layers=LAYERS, num_heads=HEADS, relative_attention_num_buckets=8,
                     use_cache=False, decoder_start_token_id=0,
                     attn_implementation="eager")
    return _seq2seq(T.T5Model, cfg)


@_entry("mt5", "encoder-decoder")
def mt5():
    T = _T()
    cfg = T.MT5Config(vocab_size=VOCAB, d_model=H, d_kv=H // HEADS, d_ff=INTER,
                      num_layers=LAYERS, num_heads=HEADS, relative_attention_num_buckets=8,
                      use_cache=False, decoder_start_token_id=0,
                      attn_implementation="eager")
    return _seq2seq(T.MT5Model, cfg)


@_entry("bart", "encoder-decoder")
def bart():
    T = _T()
    return _seq2seq(T.BartModel, T.BartConfig(**_BART))


@_entry("mbart", "encoder-decoder")
def mbart():
    T = _T()
    return _seq2seq(T.MBartModel, T.MBartConfig(**_BART))


@_entry("pegasus", "encoder-decoder")
def pegasus():
    T = _T()
    return _seq2seq(T.PegasusModel, T.PegasusConfig(**_BART))


@_entry("marian", "encoder-decoder")
def marian():
    T = _T()
    return _seq2seq(T.MarianModel, T.MarianConfig(**_BART))


# ------------------------------------------------------------------ vision transformers

@_entry("vit", "vision transformer")
def vit():
    T = _T()
    return _image(T.ViTModel, T.ViTConfig(**_VIT))


@_entry("deit", "vision transformer")
def deit():
    T = _T()
    return _image(T.DeiTModel, T.DeiTConfig(**_VIT))


@_entry("beit", "vision transformer")
def beit():
    T = _T()
    return _image(T.BeitModel, T.BeitConfig(use_relative_position_bias=True, **_VIT))


@_entry("dinov2", "vision transformer")
def dinov2():
    T = _T()
    return _image(T.Dinov2Model, T.Dinov2Config(**_VIT))


@_entry("clip_vision", "vision transformer")
def clip_vision():
    T = _T()
    return _image(T.CLIPVisionModel, T.CLIPVisionConfig(**_VIT))


@_entry("siglip_vision", "vision transformer")
def siglip_vision():
    T = _T()
    return _image(T.SiglipVisionModel, T.SiglipVisionConfig(**_VIT))


@_entry("swin", "vision transformer")
def swin():
    T = _T()
    cfg = T.SwinConfig(image_size=IMG, patch_size=2, num_channels=CH, embed_dim=16,
                       depths=[1, 1], num_heads=[2, 4], window_size=4,
                       attn_implementation="eager")
    return _image(T.SwinModel, cfg)


@_entry("segformer", "vision transformer")
def segformer():
    T = _T()
    cfg = T.SegformerConfig(num_channels=CH, num_encoder_blocks=2, depths=[1, 1],
                            sr_ratios=[2, 1], hidden_sizes=[16, 32], patch_sizes=[7, 3],
                            strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2])
    return _image(T.SegformerModel, cfg)


# ------------------------------------------------------------------ CNNs

@_entry("resnet", "cnn")
def resnet():
    T = _T()
    cfg = T.ResNetConfig(num_channels=CH, embedding_size=16, hidden_sizes=[16, 32],
                         depths=[1, 1], layer_type="basic")
    return _image(T.ResNetModel, cfg)


@_entry("regnet", "cnn")
def regnet():
    T = _T()
    cfg = T.RegNetConfig(num_channels=CH, embedding_size=16, hidden_sizes=[16, 32],
                         depths=[1, 1], groups_width=8)
    return _image(T.RegNetModel, cfg)


@_entry("convnext", "cnn")
def convnext():
    T = _T()
    cfg = T.ConvNextConfig(num_channels=CH, hidden_sizes=[16, 32], depths=[1, 1],
                           patch_size=4, num_stages=2)
    return _image(T.ConvNextModel, cfg)


@_entry("mobilenet_v2", "cnn")
def mobilenet_v2():
    T = _T()
    cfg = T.MobileNetV2Config(num_channels=CH, image_size=IMG, depth_multiplier=0.25)
    return _image(T.MobileNetV2Model, cfg)


# ------------------------------------------------------------------ speech

def _audio(model_cls, cfg, length=800):
    """A speech encoder on raw ``input_values`` (batch and length dynamic).
    The length is a multiple of the feature encoder's total stride (the
    product of ``conv_stride``, 20 here) between 400 and 4000 samples: the
    model's own constraint, as torch suggests it (a derived ``Dim``) when a
    free length is asked for ("Constraints violated (samples)")."""
    import math
    import torch
    from torch.export import Dim
    m = _mk(model_cls, cfg)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(BATCH, length, generator=g)
    stride = math.prod(cfg.conv_stride)
    b, _ = _dims()
    frames = Dim("_samples", min=400 // stride, max=4000 // stride)
    return m, {"input_values": x}, {"input_values": {0: b, 1: stride * frames}}


_W2V = dict(hidden_size=H, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
            intermediate_size=INTER, conv_dim=(32, 32, 32), conv_stride=(5, 2, 2),
            conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16,
            num_conv_pos_embedding_groups=4, attn_implementation="eager")


@_entry("wav2vec2", "speech")
def wav2vec2():
    T = _T()
    return _audio(T.Wav2Vec2Model, T.Wav2Vec2Config(**_W2V))


@_entry("hubert", "speech")
def hubert():
    T = _T()
    return _audio(T.HubertModel, T.HubertConfig(**_W2V))


@_entry("whisper_encoder", "speech")
def whisper_encoder():
    """Whisper's encoder alone: log-mel features of a fixed length
    (2 x max_source_positions frames); only the batch is dynamic."""
    import torch
    from torch.export import Dim
    from transformers.models.whisper.modeling_whisper import WhisperEncoder
    T = _T()
    cfg = T.WhisperConfig(vocab_size=VOCAB, d_model=H, encoder_layers=LAYERS,
                          decoder_layers=LAYERS, encoder_attention_heads=HEADS,
                          decoder_attention_heads=HEADS, encoder_ffn_dim=INTER,
                          decoder_ffn_dim=INTER, num_mel_bins=16, max_source_positions=32,
                          max_target_positions=POS, use_cache=False,
                          attn_implementation="eager")
    m = _mk(WhisperEncoder, cfg)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(BATCH, 16, 64, generator=g)
    return m, {"input_features": x}, {"input_features": {0: Dim("batch", min=1,
                                                                max=MAX_BATCH)}}


# ------------------------------------------------------------------ torch.nn

def _nn_tokens(m, key="src", batch_first=True):
    import torch
    g = torch.Generator().manual_seed(0)
    x = torch.randn(BATCH, SEQ, H, generator=g)
    b, s = _dims()
    return m.eval(), {key: x}, {key: {0: b, 1: s}}


@_entry("nn_transformer_encoder", "torch.nn")
def nn_transformer_encoder():
    """``nn.TransformerEncoder`` (batch first): its fast path is off under
    export, so attention is ``nn.MultiheadAttention``'s."""
    import torch.nn as nn
    _seed()
    layer = nn.TransformerEncoderLayer(H, HEADS, INTER, dropout=0.1, batch_first=True)
    return _nn_tokens(nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False))


class _MHA:  # built lazily: torch is imported only when a builder runs
    cls = None

    @classmethod
    def get(cls):
        if cls.cls is None:
            import torch.nn as nn

            class SelfAttention(nn.Module):
                """``nn.MultiheadAttention`` self-attention returning the
                attention weights too (``need_weights=True``: the explicit
                softmax path)."""

                def __init__(self, need_weights: bool):
                    super().__init__()
                    self.mha = nn.MultiheadAttention(H, HEADS, batch_first=True)
                    self.need_weights = need_weights

                def forward(self, x):
                    out, w = self.mha(x, x, x, need_weights=self.need_weights)
                    return out if w is None else (out, w)
            cls.cls = SelfAttention
        return cls.cls


@_entry("nn_mha", "torch.nn")
def nn_mha():
    _seed()
    return _nn_tokens(_MHA.get()(need_weights=True), key="x")


@_entry("nn_mha_noweights", "torch.nn")
def nn_mha_noweights():
    """``need_weights=False``: ``nn.MultiheadAttention`` calls SDPA itself."""
    _seed()
    return _nn_tokens(_MHA.get()(need_weights=False), key="x")


@_entry("nn_transformer", "torch.nn")
def nn_transformer():
    """``nn.Transformer`` (encoder and decoder, batch first)."""
    import torch
    import torch.nn as nn
    _seed()
    m = nn.Transformer(H, HEADS, LAYERS, LAYERS, INTER, dropout=0.1, batch_first=True).eval()
    g = torch.Generator().manual_seed(0)
    src = torch.randn(BATCH, SEQ, H, generator=g)
    tgt = torch.randn(BATCH, SEQ // 2, H, generator=g)
    b, s = _dims()
    from torch.export import Dim
    t = Dim("tgt", min=2, max=POS)
    return m, {"src": src, "tgt": tgt}, {"src": {0: b, 1: s}, "tgt": {0: b, 1: t}}


@_entry("nn_mlp", "torch.nn")
def nn_mlp():
    import torch.nn as nn
    _seed()
    m = nn.Sequential(nn.Linear(H, INTER), nn.GELU(), nn.Linear(INTER, INTER), nn.ReLU(),
                      nn.Linear(INTER, H))
    return _nn_tokens(m, key="input")


@_entry("nn_cnn", "torch.nn")
def nn_cnn():
    import torch
    import torch.nn as nn
    from torch.export import Dim
    _seed()
    m = nn.Sequential(nn.Conv2d(CH, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                      nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10)).eval()
    x = torch.randn(BATCH, CH, IMG, IMG, generator=torch.Generator().manual_seed(0))
    return m, {"input": x}, {"input": {0: Dim("batch", min=1, max=MAX_BATCH)}}


class _DataDependent:
    cls = None

    @classmethod
    def get(cls):
        if cls.cls is None:
            import torch.nn as nn

            class Gate(nn.Module):
                """A branch on a tensor's values: ``torch.export`` cannot
                trace it (data-dependent control flow)."""

                def __init__(self):
                    super().__init__()
                    self.a, self.b = nn.Linear(H, H), nn.Linear(H, H)

                def forward(self, x):
                    if x.sum() > 0:
                        return self.a(x)
                    return self.b(x)
            cls.cls = Gate
        return cls.cls


@_entry("nn_data_dependent", "torch.nn", note="fails to export by design: a Python "
        "branch on a tensor's values")
def nn_data_dependent():
    _seed()
    return _nn_tokens(_DataDependent.get()(), key="x")


# ------------------------------------------------------------------ lookup

#: near-duplicates of other entries (the same modeling code or attention):
#: bench_zoo.py runs them last
LATE = ("xlm_roberta", "camembert", "mt5", "granite", "olmo2", "starcoder2", "gpt_bigcode",
        "qwen3", "deit", "hubert", "nn_mha_noweights")

#: the --quick selection of bench_zoo.py: one of each kind that matters
QUICK = ("bert", "gpt2", "llama", "t5", "vit", "resnet")


def build(name: str):
    """``(module, example_kwargs, dynamic_shapes)`` of zoo entry ``name``."""
    try:
        e = ZOO[name]
    except KeyError:
        raise ValueError(f"unknown zoo model {name!r}; expected one of {sorted(ZOO)}") from None
    return e.build()


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("name", nargs="?")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args(argv)
    if a.list or not a.name:
        for fam in FAMILIES:
            print(f"{fam}: {', '.join(n for n, e in ZOO.items() if e.family == fam)}")
        print(f"({len(ZOO)} models)")
        return 0
    import torch
    m, kw, _ = build(a.name)
    with torch.no_grad():
        out = m(**kw)
    print(a.name, type(out).__name__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
