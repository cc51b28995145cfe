"""WRONG on purpose (tests/test_attention_variants.py): ``masked_fill(s, b,
-inf)`` rewritten to SDPA with the negated mask but without restoring the
NaN of fully masked rows: eager softmax gives NaN on a row of -inf, SDPA
(CPU, torch 2.13) gives 0 (the library's rule wraps it in
``where(any(keep, -1), sdpa, nan)``)."""
import pypm_verified as pm
from pypm_verified.torch.ops import LogicalNot, MaskedFill, MatMul, SDPA, Softmax, Transpose


@pm.pattern
def FilledAttention(q, k, v, b, fill):
    """softmax(masked_fill(q @ k^T, b, fill), -1) @ v, rank 4."""
    assert q.rank == 4 and k.rank == 4 and v.rank == 4
    return MatMul(Softmax(MaskedFill(MatMul(q, Transpose(k, -2, -1)), b, fill), -1, None), v)


@pm.rule(FilledAttention)
def sdpa_no_nan_rows(q, k, v, b, fill):
    assert q.dtype == k.dtype and q.dtype == v.dtype and q.dtype in (pm.f32, pm.f64)
    assert fill.is_const and fill.value == float("-inf")
    scores = tuple(q.shape[:-1]) + (k.shape[-2],)  # the mask broadcasts to q k^T
    assert b.rank <= 4 and all(a in (1, s) for a, s in zip(reversed(b.shape), reversed(scores)))
    return SDPA(q, k, v, LogicalNot(b), 0.0, False, 1.0, False)  # wrong on rows of -inf


PATTERNS = [FilledAttention]
