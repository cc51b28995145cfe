"""WRONG on purpose (tests/test_attention_variants.py): ``masked_fill(s, b,
-inf)`` masks where ``b`` is True, SDPA's boolean mask keeps where it is
True; this rule passes ``b`` without negating it."""
import pypm_verified as pm
from pypm_verified.torch.ops import MaskedFill, MatMul, SDPA, Softmax, Transpose


@pm.pattern
def FilledAttention(q, k, v, b, fill):
    """softmax(masked_fill(q @ k^T, b, fill), -1) @ v, rank 4."""
    assert q.rank == 4 and k.rank == 4 and v.rank == 4
    return MatMul(Softmax(MaskedFill(MatMul(q, Transpose(k, -2, -1)), b, fill), -1, None), v)


@pm.rule(FilledAttention)
def sdpa_polarity(q, k, v, b, fill):
    assert q.dtype == k.dtype and q.dtype == v.dtype and q.dtype in (pm.f32, pm.f64)
    assert fill.is_const and fill.value == float("-inf")
    return SDPA(q, k, v, b, 0.0, False, 1.0, False)  # wrong: should be logical_not(b)


PATTERNS = [FilledAttention]
