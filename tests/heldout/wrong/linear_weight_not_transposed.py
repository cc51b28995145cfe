"""WRONG: ``linear(x, w, b)`` rewritten to ``x @ w + b`` -- ``linear``
multiplies by ``w^T``; the guard admits square weights, where the shapes
agree and only the values differ."""
import pypm_verified as pm
from pypm_verified.torch.ops import Add, Linear, MatMul


@pm.pattern
def Lin(x, w, b):
    assert w.rank == 2
    return Linear(x, w, b)


@pm.rule(Lin)
def linear_as_matmul(x, w, b):
    assert x.dtype in (pm.f32, pm.f64) and w.dtype == x.dtype
    assert b is not None and not b.is_const and b.dtype == x.dtype and b.rank == 1
    assert w.shape[0] == w.shape[1] == x.shape[-1] == b.shape[0]
    return Add(MatMul(x, w), b, 1)  # WRONG: MatMul(x, T(w))


PATTERNS = [Lin]
