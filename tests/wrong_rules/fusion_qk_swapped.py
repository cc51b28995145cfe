"""WRONG on purpose (tests/test_multi_torch.py): QKV fusion whose split
hands the query's slice to the key's root and the key's to the query's
(a wrong variant of library/fusion.py's ``qkv_gemm``); wrong for every
shape the guards admit, equal projection sizes included."""
import pypm_verified as pm
from pypm_verified.library.fusion import SplitWithSizes
from pypm_verified.torch.ops import GetItem, Linear


@pm.pattern
def QKVSwapped(x, wq, bq, wk, bk, wv, bv):
    """library/fusion.py's QKV (its own pattern, so only this rule fires)."""
    assert wq.rank == 2 and wk.rank == 2 and wv.rank == 2
    return Linear(x, wq, bq), Linear(x, wk, bk), Linear(x, wv, bv)


@pm.rule(QKVSwapped)
def qkv_gemm_qk_swapped(x, wq, bq, wk, bk, wv, bv, ctx):
    assert x.dtype in (pm.f32, pm.bf16, pm.f16) and x.shape is not None
    ws, bs = (wq, wk, wv), (bq, bk, bv)
    for w in ws:
        assert w.dtype == x.dtype and w.rank == 2 and w.shape[1] == x.shape[-1]
        assert w.shape[0] == wq.shape[0]  # equal sizes: the swap keeps the shapes
    assert all(b is not None and not (b.is_const and b.value is None) for b in bs)
    for b, w in zip(bs, ws):  # as qkv_gemm: 1-D biases of the weights' rows
        assert b.rank == 1 and b.shape[0] == w.shape[0] and b.dtype == x.dtype
    weight, bias = ctx.fold_cat(ws, 0), ctx.fold_cat(bs, 0)
    assert weight is not None and bias is not None
    parts = SplitWithSizes(Linear(x, weight, bias), [int(w.shape[0]) for w in ws], -1)
    return GetItem(parts, 1), GetItem(parts, 0), GetItem(parts, 2)  # q and k swapped


PATTERNS = [QKVSwapped]
