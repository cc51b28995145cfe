"""WRONG: ``where(c, x, y)`` rewritten to ``where(logical_not(c), x, y)`` --
the condition negated without swapping the branches (two variables taken as
each other)."""
import pypm_verified as pm
from pypm_verified.torch.ops import LogicalNot, Where


@pm.pattern
def Select(c, x, y):
    return Where(c, x, y)


@pm.rule(Select)
def where_negated(c, x, y):
    assert c.dtype == pm.bool_ and x.dtype in (pm.f32, pm.f64) and y.dtype == x.dtype
    return Where(LogicalNot(c), x, y)  # WRONG: Where(LogicalNot(c), y, x)


PATTERNS = [Select]
