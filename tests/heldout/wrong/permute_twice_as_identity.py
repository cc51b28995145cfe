"""WRONG: ``permute(permute(x, p), p)`` rewritten to ``x`` -- the author
assumed a permutation undoes itself. True for swaps such as ``[0, 2, 1,
3]``, false for a cycle such as ``[0, 2, 3, 1]`` (NCHW -> NHWC), whose
inverse is ``[0, 3, 1, 2]``."""
import pypm_verified as pm
from pypm_verified.torch.ops import Permute


@pm.pattern
def PermuteTwice(x, p, q):
    assert x.rank == 4
    return Permute(Permute(x, p), q)


@pm.rule(PermuteTwice)
def permute_twice_identity(x, p, q):
    assert p.is_const and q.is_const and list(p.value) == list(q.value)
    assert sorted(p.value) == [0, 1, 2, 3]
    # missing: q must be p's inverse, [p.index(i) for i in range(4)]
    return x


PATTERNS = [PermuteTwice]
