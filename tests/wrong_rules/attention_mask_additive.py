"""WRONG on purpose (tests/test_attention_variants.py): attention whose
scores are masked by ``masked_fill(s, b, -inf)``, rewritten as if the
boolean mask were additive -- SDPA gets ``b`` as a float (0/1) added to the
scores instead of -inf where ``b`` is True."""
import pypm_verified as pm
from pypm_verified.torch.ops import MaskedFill, MatMul, SDPA, Softmax, ToCopy, Transpose


@pm.pattern
def FilledAttention(q, k, v, b, fill):
    """softmax(masked_fill(q @ k^T, b, fill), -1) @ v, rank 4."""
    assert q.rank == 4 and k.rank == 4 and v.rank == 4
    return MatMul(Softmax(MaskedFill(MatMul(q, Transpose(k, -2, -1)), b, fill), -1, None), v)


@pm.rule(FilledAttention)
def sdpa_additive_mask(q, k, v, b, fill):
    assert q.dtype == k.dtype and q.dtype == v.dtype and q.dtype in (pm.f32, pm.f64)
    assert fill.is_const and fill.value == float("-inf")
    # wrong: a boolean mask is not an additive one (True would add 1, not -inf)
    return SDPA(q, k, v, ToCopy(b, q.torch_dtype, None, None, None, False, None), 0.0,
                False, 1.0, False)


PATTERNS = [FilledAttention]
