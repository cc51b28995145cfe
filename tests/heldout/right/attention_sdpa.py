"""RIGHT: attention scores ``softmax(q @ k^T * s, -1) @ v`` (rank 4)
rewritten to ``scaled_dot_product_attention(q, k, v, scale=s)``."""
import pypm_verified as pm
from pypm_verified.torch.ops import MatMul, Mul, SDPA, Softmax, Transpose


@pm.pattern
def Attention(q, k, v, s):
    assert q.rank == 4 and k.rank == 4 and v.rank == 4
    return MatMul(Softmax(Mul(MatMul(q, Transpose(k, -2, -1)), s), -1, None), v)


@pm.rule(Attention)
def sdpa(q, k, v, s):
    assert s.is_const and isinstance(s.value, float) and s.value != 0.0
    assert q.dtype in (pm.f32, pm.f64) and k.dtype == q.dtype and v.dtype == q.dtype
    assert tuple(q.shape[:2]) == tuple(k.shape[:2]) == tuple(v.shape[:2])
    return SDPA(q, k, v, None, 0.0, False, s.value, False)


PATTERNS = [Attention]
