"""Multi-root fusions (``theories/Multi.v``): sibling linears over one input
become one GEMM over concatenated weights and a split.

* ``QKV``: the query, key and value projections of attention (BERT,
  RoBERTa, DistilBERT, LLaMA, Qwen2; grouped-query k/v of another size
  included: the split takes each projection's own size);
* ``GateUp``: two linears over one input (the gate and up projections of
  LLaMA / Qwen2 / Mistral MLPs; also any remaining pair of siblings).

The weights (and biases) are concatenated at rewrite time
(``ctx.fold_cat``) and become constants of the exported program, so the
rewritten model does one larger GEMM and no concatenation at run time.
Guards: 2-D weights over the input's last axis, one floating dtype, biases
all present (1-D of the weight's rows) or all absent, every weight a
parameter or constant of the program (else ``fold_cat`` declines).
Profitability: ``bench/multiroot_gemm.py`` times one GEMM of N1+N2+N3
outputs (+ split) against the separate linears; on this (shared, loaded)
2-core CPU, float32, one thread, the fused GEMM measured 0.83x-1.02x at the
projection sizes of ``examples/models.py`` (``bench/results/multiroot_gemm.md``):
no gain, so the module is not in the library's default modules (use
``--rules fusion``) and has no ``ctx.profitable`` entry yet (the table's CPU
thresholds are derived from ``bench/bench_kernels.py`` rows, which do not
cover it). On CUDA, where one larger GEMM fills the device better, it is
expected to pay; that default is pending a GPU measurement.
"""
from __future__ import annotations

import torch

import pypm_verified as pm
from ..torch.ops import GetItem, Linear, declare

SplitWithSizes = declare("SplitWithSizes", torch.ops.aten.split_with_sizes.default)


@pm.pattern
def QKV(x, wq, bq, wk, bk, wv, bv):
    """linear(x, wq, bq), linear(x, wk, bk), linear(x, wv, bv): three roots."""
    assert wq.rank == 2 and wk.rank == 2 and wv.rank == 2
    return Linear(x, wq, bq), Linear(x, wk, bk), Linear(x, wv, bv)


@pm.pattern
def GateUp(x, wg, bg, wu, bu):
    """linear(x, wg, bg), linear(x, wu, bu): two roots."""
    assert wg.rank == 2 and wu.rank == 2
    return Linear(x, wg, bg), Linear(x, wu, bu)


def _absent(b) -> bool:
    return b is None or (b.is_const and b.value is None)


def _fuse(x, ws, bs, ctx):
    assert x.dtype in (pm.f32, pm.bf16, pm.f16) and x.shape is not None
    for w in ws:
        assert w.dtype == x.dtype and w.rank == 2 and w.shape[1] == x.shape[-1]
    absent = [_absent(b) for b in bs]
    assert all(absent) or not any(absent)
    bias = None
    if not any(absent):
        for b, w in zip(bs, ws):
            assert b.rank == 1 and b.shape[0] == w.shape[0] and b.dtype == x.dtype
        bias = ctx.fold_cat(bs, 0)
        assert bias is not None
    weight = ctx.fold_cat(ws, 0)
    assert weight is not None
    y = Linear(x, weight, bias)
    parts = SplitWithSizes(y, [int(w.shape[0]) for w in ws], -1)
    return tuple(GetItem(parts, i) for i in range(len(ws)))


@pm.rule(QKV)
def qkv_gemm(x, wq, bq, wk, bk, wv, bv, ctx):
    """-> getitem(split_with_sizes(linear(x, [wq; wk; wv], [bq; bk; bv])), i)."""
    return _fuse(x, (wq, wk, wv), (bq, bk, bv), ctx)


@pm.rule(GateUp)
def gate_up_gemm(x, wg, bg, wu, bu, ctx):
    """-> getitem(split_with_sizes(linear(x, [wg; wu], [bg; bu])), i)."""
    return _fuse(x, (wg, wu), (bg, bu), ctx)


PATTERNS = [QKV, GateUp]
