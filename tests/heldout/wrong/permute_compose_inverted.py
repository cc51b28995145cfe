"""WRONG: two permutes fused into one with the composition taken the wrong
way round: ``permute(permute(x, p), q)`` is ``permute(x, [p[q[i]]])``; this
rule uses ``[q[p[i]]]`` (equal when p and q commute, wrong for
``p = [0, 2, 3, 1]``, ``q = [1, 0, 2, 3]``, say)."""
import pypm_verified as pm
from pypm_verified.torch.ops import Permute


@pm.pattern
def PermuteTwice(x, p, q):
    return Permute(Permute(x, p), q)


@pm.rule(PermuteTwice)
def permute_compose_inverted(x, p, q):
    assert p.is_const and q.is_const and len(p.value) == len(q.value) == x.rank
    p, q = [d % x.rank for d in p.value], [d % x.rank for d in q.value]
    return Permute(x, [q[p[i]] for i in range(x.rank)])  # WRONG: p[q[i]]


PATTERNS = [PermuteTwice]
