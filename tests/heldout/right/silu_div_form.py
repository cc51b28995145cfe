"""RIGHT: SiLU written as ``x / (1 + exp(-x))`` rewritten to ``silu(x)``."""
import pypm_verified as pm
from pypm_verified.torch.ops import Add, Div, Exp, Neg, Silu


@pm.pattern
def SiluDiv(x, one):
    return Div(x, Add(Exp(Neg(x)), one, 1))


@pm.rule(SiluDiv)
def silu_div(x, one):
    assert one.is_const and one.value == 1
    assert x.dtype in (pm.f32, pm.f64)
    return Silu(x)


PATTERNS = [SiluDiv]
