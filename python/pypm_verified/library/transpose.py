"""The paper's Figure 1 rule: a matmul whose right operand is a transposed
2-D matrix -> ``aten.linear(x, y)``, which computes ``x @ y.T`` in one GEMM
that reads ``y`` transposed for free (cuBLAS/oneDNN "NT"), instead of
materializing nothing but a strided view and dispatching a general matmul.

Guards: ``y`` is 2-D and the transpose swaps its two axes (any spelling),
``x`` has rank >= 1 and the contracted sizes agree, one floating dtype.
"""
from __future__ import annotations

import pypm_verified as pm
from ..torch.ops import Linear, MatMul, T, Transpose

from .sizes import tokens


@pm.pattern
def YT(y):
    """y with its two axes swapped (y 2-D)."""
    assert y.rank == 2
    return Transpose(y, 0, 1)


@pm.pattern
def YT(y):  # noqa: F811
    assert y.rank == 2
    return Transpose(y, 1, 0)


@pm.pattern
def YT(y):  # noqa: F811
    assert y.rank == 2
    return Transpose(y, -1, -2)


@pm.pattern
def YT(y):  # noqa: F811
    assert y.rank == 2
    return Transpose(y, -2, -1)


@pm.pattern
def YT(y):  # noqa: F811
    """``y.t()``."""
    assert y.rank == 2
    return T(y)


@pm.pattern
def MMxyT(x, y):
    """x @ y^T with y 2-D (Figure 1)."""
    assert 1 <= x.rank and x.shape[-1] == y.shape[-1]
    return MatMul(x, YT(y))


@pm.rule(MMxyT)
def linear_nt(x, y, ctx):
    """-> aten.linear(x, y, None)."""
    assert x.dtype == y.dtype and x.dtype in (pm.f32, pm.f16, pm.bf16, pm.f64)
    assert ctx.profitable("matmul_t", dtype=x.torch_dtype, tokens=tokens(x.shape))
    return Linear(x, y, None)


PATTERNS = [MMxyT]
