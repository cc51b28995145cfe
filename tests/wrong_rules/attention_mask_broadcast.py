"""WRONG on purpose (tests/test_check_rules.py): attention with an additive
mask whose shape the rule never checks against the scores ``q @ k^T`` -- a
mask that does not broadcast to them (it is larger) is passed to SDPA."""
import pypm_verified as pm
from pypm_verified.torch.ops import Add, MatMul, SDPA, Softmax, Transpose


@pm.pattern
def MaskedAttention(q, k, v, mask):
    """softmax(q @ k^T + mask, -1) @ v, rank 4."""
    assert q.rank == 4 and k.rank == 4 and v.rank == 4
    return MatMul(Softmax(Add(MatMul(q, Transpose(k, -2, -1)), mask, 1), -1, None), v)


@pm.rule(MaskedAttention)
def sdpa_masked(q, k, v, mask):
    assert not mask.is_const and mask.dtype == q.dtype
    assert q.dtype == k.dtype and q.dtype == v.dtype
    # missing: the mask must broadcast to q.shape[:-1] + (k.shape[-2],)
    return SDPA(q, k, v, mask, 0.0, False, 1.0, False)


PATTERNS = [MaskedAttention]
