"""WRONG on purpose (tests/test_check_rules.py): attention whose softmax axis
is a pattern variable the rule never checks -- the missing softmax-axis
guard. ``check-rules`` must refute it with a softmax over another axis."""
import pypm_verified as pm
from pypm_verified.torch.ops import MatMul, Mul, SDPA, Softmax, Transpose


@pm.pattern
def AttentionAnyAxis(q, k, v, s, dim):
    """softmax(q @ k^T * s, dim) @ v, rank 4."""
    assert q.rank == 4 and k.rank == 4 and v.rank == 4
    return MatMul(Softmax(Mul(MatMul(q, Transpose(k, -2, -1)), s), dim, None), v)


@pm.rule(AttentionAnyAxis)
def sdpa_any_axis(q, k, v, s, dim):
    assert s.is_const and isinstance(s.value, float) and s.value != 0.0
    assert q.dtype == k.dtype and q.dtype == v.dtype
    # missing: assert dim.value in (-1, 3)
    return SDPA(q, k, v, None, 0.0, False, s.value, False)


PATTERNS = [AttentionAnyAxis]
