"""WRONG: attention scores ``softmax(q @ k^T * s) @ v`` rewritten to SDPA
with the query and key swapped (``sdpa(k, q, v)`` computes ``softmax(k @
q^T * s) @ v``); the guard ties the sequence lengths, so the shapes agree."""
import pypm_verified as pm
from pypm_verified.torch.ops import MatMul, Mul, SDPA, Softmax, Transpose


@pm.pattern
def Attention(q, k, v, s):
    """softmax(q @ k^T * s, -1) @ v, rank 4."""
    assert q.rank == 4 and k.rank == 4 and v.rank == 4
    return MatMul(Softmax(Mul(MatMul(q, Transpose(k, -2, -1)), s), -1, None), v)


@pm.rule(Attention)
def sdpa_qk_swapped(q, k, v, s):
    assert s.is_const and isinstance(s.value, float) and s.value != 0.0
    assert q.dtype in (pm.f32, pm.f64) and k.dtype == q.dtype and v.dtype == q.dtype
    assert tuple(q.shape) == tuple(k.shape)
    return SDPA(k, q, v, None, 0.0, False, s.value, False)  # WRONG: SDPA(q, k, v, ...)


PATTERNS = [Attention]
