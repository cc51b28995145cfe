"""WRONG: ``(a @ b)^T`` rewritten to ``a^T @ b^T`` (2-D) -- the transpose of
a product is ``b^T @ a^T``. Square matrices get through torch's shape
checks and differ in value."""
import pypm_verified as pm
from pypm_verified.torch.ops import Mm, T


@pm.pattern
def TransposedProduct(a, b):
    return T(Mm(a, b))


@pm.rule(TransposedProduct)
def transpose_product(a, b):
    assert a.dtype == b.dtype
    return Mm(T(a), T(b))  # WRONG: Mm(T(b), T(a))


PATTERNS = [TransposedProduct]
