"""WRONG on purpose (tests/test_check_rules.py): a batched ``x @ y^T`` whose
replacement transposes the wrong axes of ``y`` (0 and 2 instead of 1 and
2)."""
import pypm_verified as pm
from pypm_verified.torch.ops import Bmm, MatMul, Transpose


@pm.pattern
def BatchedNT(x, y):
    """x @ y^T over the last two axes, x and y of rank 3."""
    assert x.rank == 3 and y.rank == 3
    return MatMul(x, Transpose(y, -1, -2))


@pm.rule(BatchedNT)
def bmm_nt_wrong_axes(x, y):
    assert x.dtype == y.dtype
    return Bmm(x, Transpose(y, 0, 2))  # should be Transpose(y, 1, 2)


PATTERNS = [BatchedNT]
