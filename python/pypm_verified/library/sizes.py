"""The sizes the rules' profitability guards pass to ``ctx.profitable``
(:class:`pypm_verified.torch.driver.RuleContext`, reading the measured table
:mod:`pypm_verified.torch.profitability`). A size that is unknown makes the
guard fail: the original subgraph is kept. In a program with dynamic shapes
a symbolic dimension is a ``torch.SymInt`` (products stay symbolic), which
``ctx.profitable`` asks about at its example value: profitability decides
speed, not correctness."""
from __future__ import annotations

from math import prod
from typing import Optional, Sequence

__all__ = ["numel", "tokens"]


def numel(shape: Optional[Sequence[Optional[int]]]) -> Optional[int]:
    """Number of elements, or None if the shape or any dimension is unknown."""
    if shape is None or any(d is None for d in shape):
        return None
    return prod(shape)


def tokens(shape: Optional[Sequence[Optional[int]]]) -> Optional[int]:
    """Product of the leading dimensions (rows of a GEMM), or None if unknown."""
    if shape is None or len(shape) == 0:
        return None
    return numel(tuple(shape)[:-1])
