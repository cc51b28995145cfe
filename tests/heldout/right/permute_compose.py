"""RIGHT: two permutes fused into one: ``permute(permute(x, p), q)`` is
``permute(x, [p[q[i]] for i])``."""
import pypm_verified as pm
from pypm_verified.torch.ops import Permute


@pm.pattern
def PermuteTwice(x, p, q):
    return Permute(Permute(x, p), q)


@pm.rule(PermuteTwice)
def permute_compose(x, p, q):
    assert p.is_const and q.is_const and len(p.value) == len(q.value) == x.rank
    p, q = [d % x.rank for d in p.value], [d % x.rank for d in q.value]
    return Permute(x, [p[q[i]] for i in range(x.rank)])


PATTERNS = [PermuteTwice]
