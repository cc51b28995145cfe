"""WRONG on purpose (tests/test_xla_rules.py): XLA algebraic-simplifier rules
as XLA (or TensorRight, over the reals) states them, wrong in IEEE floating
point. ``pypm_verified.library.xla_simplifier`` ships the narrowed, correct
forms; the checker, with special input values (NaN, infinities, signed
zeros, +-100), refutes each of these. ``WRONG`` maps each rule to why.
"""
import torch

import pypm_verified as pm
from pypm_verified.torch.ops import (Add, Div, Eq, Exp, Ge, Log, Mul, Ne, Sub, SumDim,
                                     ZerosLike)

FLOATS = (pm.f32, pm.f16, pm.bf16, pm.f64)


def _is(c, want) -> bool:
    return c is not None and c.is_const and isinstance(c.value, (int, float)) \
        and not isinstance(c.value, bool) and c.value == want


@pm.pattern
def FAddZero(x, z, a, r):
    r <= Add(x, z, a)
    return r


@pm.rule(FAddZero)
def add_zero_float(x, z, a, r):
    """XLA's ``A + 0 => A`` on floats."""
    assert r.torch_dtype == x.torch_dtype and _is(z, 0) and _is(a, 1) and x.dtype in FLOATS
    return x


@pm.pattern
def FMulZero(x, z, r):
    r <= Mul(x, z)
    return r


@pm.rule(FMulZero)
def mul_zero_float(x, z, r):
    """``A * 0 => 0`` on floats (XLA: integers only)."""
    assert r.torch_dtype == x.torch_dtype and _is(z, 0) and x.dtype in FLOATS
    return ZerosLike(x, None, None, None, None, None)


@pm.pattern
def FSubSelf(x, a):
    return Sub(x, x, a)


@pm.rule(FSubSelf)
def sub_self_float(x, a):
    """``A - A => 0`` on floats (XLA: integers only)."""
    assert _is(a, 1) and x.dtype in FLOATS
    return ZerosLike(x, None, None, None, None, None)


@pm.pattern
def FEqSelf(x):
    return Eq(x, x)


@pm.rule(FEqSelf)
def eq_self_float(x):
    """``A == A => true`` on floats (TensorRight verifies it over the reals;
    XLA: integers only)."""
    assert x.dtype in FLOATS
    return torch_full_bool(x, True)


@pm.pattern
def FNeSelf(x):
    return Ne(x, x)


@pm.rule(FNeSelf)
def ne_self_float(x):
    """``A != A => false`` on floats."""
    assert x.dtype in FLOATS
    return torch_full_bool(x, False)


@pm.pattern
def FGeSelf(x):
    return Ge(x, x)


@pm.rule(FGeSelf)
def ge_self_float(x):
    """``A >= A => true`` on floats."""
    assert x.dtype in FLOATS
    return torch_full_bool(x, True)


@pm.pattern
def DivExp(x, y):
    return Div(x, Exp(y))


@pm.rule(DivExp)
def div_exp(x, y):
    """XLA's ``A / exp(B) => A * exp(-B)``: ``0 / exp(-100)`` is 0 in
    float32 (``exp(-100)`` is subnormal), ``0 * exp(100) = 0 * inf`` is NaN."""
    assert x.dtype in FLOATS and y.dtype == x.dtype
    return Mul(x, Exp(Mul(y, -1)))


@pm.pattern
def LogExp(x):
    return Log(Exp(x))


@pm.rule(LogExp)
def log_exp(x):
    """XLA's ``log(exp(A)) => A``: ``log(exp(-0.0))`` is ``log(1) = +0.0``."""
    assert x.dtype in FLOATS
    return x


@pm.pattern
def FSumUnitAxes(x):
    assert x.shape[0] == 1
    return SumDim(x, [0], True, None)


@pm.rule(FSumUnitAxes)
def sum_unit_axes_float(x):
    """XLA's ``reduce(A)`` over size-1 axes ``=> reshape(A)`` on floats (it
    takes the init value 0 for an identity of ``+``): the sum of ``-0.0`` is
    ``+0.0``."""
    assert x.dtype in FLOATS
    return x


def torch_full_bool(x, v):
    from pypm_verified.torch.ops import FullLike
    return FullLike(x, v, torch.bool, None, None, None, None)


@pm.pattern
def FSubZero(x, z, a, r):
    r <= Sub(x, z, a)
    return r


@pm.rule(FSubZero)
def sub_zero_signed(x, z, a, r):
    """``A - 0 => A`` on floats with a zero compared by value only: the
    constant ``-0.0`` equals 0, and ``A - (-0.0)`` is ``A + 0.0``."""
    assert r.torch_dtype == x.torch_dtype and _is(z, 0) and _is(a, 1) and x.dtype in FLOATS
    return x


#: rule -> why XLA's form is wrong (what the counterexample shows)
WRONG = {
    "add_zero_float": "-0.0 + 0 is +0.0",
    "sub_zero_signed": "-0.0 - (-0.0) is +0.0",
    "mul_zero_float": "NaN * 0 and inf * 0 are NaN; -1 * 0 is -0.0",
    "sub_self_float": "inf - inf and NaN - NaN are NaN",
    "eq_self_float": "NaN == NaN is false",
    "ne_self_float": "NaN != NaN is true",
    "ge_self_float": "NaN >= NaN is false",
    "div_exp": "0 / exp(-100) is 0, 0 * exp(100) is NaN (float32)",
    "log_exp": "log(exp(-0.0)) is +0.0",
    "sum_unit_axes_float": "the sum of a single -0.0 is +0.0",
}

PATTERNS = [FAddZero, FSubZero, FMulZero, FSubSelf, FEqSelf, FNeSelf, FGeSelf, DivExp, LogExp, FSumUnitAxes]
