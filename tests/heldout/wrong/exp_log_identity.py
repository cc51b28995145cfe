"""WRONG: ``exp(log(x))`` rewritten to ``x``: true only for x > 0 (log of a
negative number is NaN, of zero -inf, whose exp is 0 -- that one agrees)."""
import pypm_verified as pm
from pypm_verified.torch.ops import Exp, Log


@pm.pattern
def ExpLog(x):
    return Exp(Log(x))


@pm.rule(ExpLog)
def exp_log_identity(x):
    assert x.dtype in (pm.f32, pm.f64)
    # missing: x > 0, which no guard can know
    return x


PATTERNS = [ExpLog]
