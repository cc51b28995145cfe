"""RIGHT: ``(a @ b)^T`` rewritten to ``b^T @ a^T`` (2-D)."""
import pypm_verified as pm
from pypm_verified.torch.ops import Mm, T


@pm.pattern
def TransposedProduct(a, b):
    return T(Mm(a, b))


@pm.rule(TransposedProduct)
def transpose_product(a, b):
    assert a.dtype == b.dtype
    return Mm(T(b), T(a))


PATTERNS = [TransposedProduct]
