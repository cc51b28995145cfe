"""RIGHT: ``transpose(transpose(x, a, b), c, d)`` rewritten to ``x`` when
both swap the same pair of axes."""
import pypm_verified as pm
from pypm_verified.torch.ops import Transpose


@pm.pattern
def TransposeTwice(x, a, b, c, d):
    return Transpose(Transpose(x, a, b), c, d)


@pm.rule(TransposeTwice)
def transpose_twice_identity(x, a, b, c, d):
    assert x.rank >= 1
    assert all(v.is_const and isinstance(v.value, int) for v in (a, b, c, d))
    n = x.rank
    assert {a.value % n, b.value % n} == {c.value % n, d.value % n}
    return x


PATTERNS = [TransposeTwice]
