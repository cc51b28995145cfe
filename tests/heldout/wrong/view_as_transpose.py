"""WRONG: ``transpose(x, 0, 1)`` of a 2-D tensor rewritten to
``reshape(x, [n, m])`` -- the same shape, not the same elements (a reshape
never moves data)."""
import pypm_verified as pm
from pypm_verified.torch.ops import Reshape, Transpose


@pm.pattern
def Transposed2D(x):
    assert x.rank == 2
    return Transpose(x, 0, 1)


@pm.rule(Transposed2D)
def transpose_as_reshape(x):
    return Reshape(x, [x.shape[1], x.shape[0]])  # WRONG: a reshape keeps row-major order


PATTERNS = [Transposed2D]
