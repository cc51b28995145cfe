"""RIGHT: ``a @ (b + c)`` rewritten to ``a @ b + a @ c`` (2-D) where ``b``
and ``c`` have one shape."""
import pypm_verified as pm
from pypm_verified.torch.ops import Add, MatMul


@pm.pattern
def MatMulOfSum(a, b, c):
    assert a.rank == 2 and b.rank == 2
    return MatMul(a, Add(b, c, 1))


@pm.rule(MatMulOfSum)
def matmul_distribute(a, b, c):
    assert a.dtype in (pm.f32, pm.f64) and b.dtype == a.dtype and c.dtype == a.dtype
    assert not c.is_const and tuple(c.shape) == tuple(b.shape)
    return Add(MatMul(a, b), MatMul(a, c), 1)


PATTERNS = [MatMulOfSum]
