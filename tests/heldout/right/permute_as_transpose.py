"""RIGHT: ``permute(x, [0, 2, 1, 3])`` (rank 4) rewritten to ``transpose(x,
1, 2)``."""
import pypm_verified as pm
from pypm_verified.torch.ops import Permute, Transpose


@pm.pattern
def PermuteHeads(x, perm):
    assert x.rank == 4
    return Permute(x, perm)


@pm.rule(PermuteHeads)
def permute_as_transpose(x, perm):
    assert perm.is_const and list(perm.value) == [0, 2, 1, 3]
    return Transpose(x, 1, 2)


PATTERNS = [PermuteHeads]
