"""XLA's algebraic simplifier, the rules with ATen equivalents.

Rules of ``xla/service/algebraic_simplifier.cc`` (the rule set TensorRight
verifies, its Table 1) written as PyPM rules over ATen ops, each named after
what it rewrites, with the XLA handler it comes from. They are **not** in
the default library: they exist to be checked (``python -m pypm_verified
check-rules --rules pypm_verified.library.xla_simplifier --special-values
0.3 --dtype-hints``; ``bench/results/xla_rules.md``).

Each rule is meant to be exact for everything its guards admit, in IEEE
arithmetic and not only over the reals: NaN, infinities and signed zeros
included (``bench/xla_rules.py`` checks with such inputs), integers with
their wrap-around. Where XLA applies a rule more widely than that, the rule
here is narrowed and says why:

* ``A + 0 => A`` only for integers (``-0.0 + 0`` is ``+0.0``); for floats
  ``A + (-0.0) => A``, which is exact. The term graph keeps ``-0.0`` and
  ``0.0`` two constants, and ``_is`` tells them apart (``A - (-0.0)`` is
  ``A + 0.0``: ``A - 0 => A`` holds for ``+0`` only); it interns ``2`` and
  ``2.0`` as one, so rules whose result type depends on a constant's type
  check the root's dtype, bound as ``r``;
* ``A * 0 => 0``, ``A - A => 0`` and ``A == A => true`` (and ``!=``, ``>=``,
  ``<=``) only for integers and booleans (``NaN * 0``, ``inf - inf``,
  ``NaN == NaN``); XLA does the same, TensorRight verifies them over the
  reals;
* reassociations of constants (``(A + c1) + c2``, ``(A * c1) * c2``) and the
  distributive law only for integers (float rounding and overflow differ).

* a sum over size-1 axes is ``A + 0.0`` for floats, not ``A``: the sum
  starts from ``+0.0``, so a ``-0.0`` comes out ``+0.0`` (XLA's reshape
  keeps ``-0.0``).

Rules right only up to rounding (``A / c => A * (1/c)``, ``(A / B) / C =>
A / (B * C)``, ``A / sqrt(B) => A * rsqrt(B)``, a sum of sums) are kept and
come out "tested" or "proved over the reals"; they change results by
rounding, or where the original overflows (``exp(A) * exp(B) => exp(A +
B)``, ``log(exp(A)) => A + 0.0``) towards the exact value. XLA rules that are
*wrong* in floating point (``A / exp(B) => A * exp(-B)``: ``0 / exp(-100)``
is 0, ``0 * exp(100)`` NaN in float32; the float forms of the integer-only
rules above) are not here: they are the wrong variants of
``tests/wrong_rules/xla_wrong.py``, refuted by the checker.
"""
from __future__ import annotations

import math

import torch

import pypm_verified as pm
from ..torch.ops import (Abs, Add, BitwiseAndScalar, BitwiseNot, BitwiseOrScalar, Clamp,
                         ConstantPadNd,
                         ClampMax, ClampMin, Div, Eq, Exp, Expand, Flip, FullLike, Ge, Gt, Le,
                         Log, LogicalAnd, LogicalNot, Lt, LtScalar, MatMul, Maximum, Mean, Mul,
                         Ne, Neg, OnesLike, Permute, PowScalar, Reciprocal, Rsqrt, Slice, Sqrt,
                         Squeeze, Sub, SumDim, ToCopy, Transpose, Unsqueeze, Where, ZerosLike)

FLOATS = (pm.f32, pm.f16, pm.bf16, pm.f64)
INTS = (pm.i64, pm.i32, pm.i16, pm.i8)
BOOLS = (pm.bool_,)
#: the dtypes whose arithmetic here is exact (integers wrap, booleans are 0/1)
EXACT = INTS + BOOLS
NUMERIC = FLOATS + INTS
#: "to the end of the axis" in an exported slice
INT64_MAX = 9223372036854775807


def _const(c) -> bool:
    return c is not None and c.is_const and isinstance(c.value, (int, float)) \
        and not isinstance(c.value, bool)


def _is(c, want) -> bool:
    """``c`` is the constant ``want`` exactly (``-0.0`` is not ``0``)."""
    return _const(c) and c.value == want and \
        math.copysign(1.0, c.value) == math.copysign(1.0, want)


def _finite(c) -> bool:
    return _const(c) and math.isfinite(c.value)


def _small_int(c, bits: int = 15) -> bool:
    """``c`` is an int constant of at most ``bits`` bits (its products and
    sums stay in range; a helper, so that the bound is no hint of c's value)."""
    return _const(c) and type(c.value) is int and abs(c.value) < 2 ** bits


def _positive(c) -> bool:
    return _finite(c) and c.value > 0


def _shape(v) -> tuple:
    return tuple(v.shape)


def _into(u, x) -> bool:
    """``u``'s shape broadcasts to ``x``'s without growing it."""
    us, xs = _shape(u), _shape(x)
    return len(us) <= len(xs) and all(a == 1 or a == b for a, b in zip(reversed(us),
                                                                         reversed(xs)))


def _axes(t, rank) -> tuple:
    return tuple(sorted(a % rank for a in t))


def _zeros(x):
    return ZerosLike(x, None, None, None, None, None)


def _full_bool(x, v: bool):
    return FullLike(x, v, torch.bool, None, None, None, None)


# ================================================= element-wise, simple

@pm.pattern
def AddZero(x, z, a, r):
    r <= Add(x, z, a)
    return r


@pm.rule(AddZero)
def add_zero(x, z, a, r):
    """``A + 0 => A`` (HandleAdd), integers; floats with ``-0.0``: ``-0.0 +
    0`` is ``+0.0`` (XLA applies it to floats too), ``A + (-0.0)`` is ``A``."""
    assert r.torch_dtype == x.torch_dtype  # 2 and 2.0 are one constant
    assert _is(a, 1)
    assert _is(z, 0) and x.dtype in INTS or _is(z, -0.0) and x.dtype in FLOATS
    return x


@pm.pattern
def SubZero(x, z, a, r):
    r <= Sub(x, z, a)
    return r


@pm.rule(SubZero)
def sub_zero(x, z, a, r):
    """``A - 0 => A`` (HandleSubtract): ``-0.0 - 0`` is ``-0.0`` (but ``A -
    (-0.0)`` is ``A + 0.0``: ``_is`` refuses ``-0.0``)."""
    assert r.torch_dtype == x.torch_dtype  # 2 and 2.0 are one constant
    assert _is(z, 0) and _is(a, 1) and x.dtype in NUMERIC
    return x


@pm.pattern
def SubSelf(x, a):
    return Sub(x, x, a)


@pm.rule(SubSelf)
def sub_self(x, a):
    """``A - A => 0`` (HandleSubtract, integers as in XLA: ``inf - inf``)."""
    assert _is(a, 1) and x.dtype in INTS
    return _zeros(x)


@pm.pattern
def SubConst(x, c, a, r):
    r <= Sub(x, c, a)
    return r


@pm.rule(SubConst)
def sub_const(x, c, a, r):
    """``A - c => A + (-c)`` (HandleSubtract): exact in IEEE and integers."""
    assert r.torch_dtype == x.torch_dtype  # 2 and 2.0 are one constant
    assert _finite(c) and _is(a, 1) and x.dtype in NUMERIC
    assert x.dtype in FLOATS or _small_int(c, 7)
    return Add(x, -c.value, 1)


@pm.pattern
def MulOne(x, o, r):
    r <= Mul(x, o)
    return r


@pm.rule(MulOne)
def mul_one(x, o, r):
    """``A * 1 => A`` (HandleMultiply)."""
    assert r.torch_dtype == x.torch_dtype  # 2 and 2.0 are one constant
    assert _is(o, 1) and x.dtype in NUMERIC
    return x


@pm.pattern
def MulZero(x, z, r):
    r <= Mul(x, z)
    return r


@pm.rule(MulZero)
def mul_zero(x, z, r):
    """``A * 0 => 0`` (HandleMultiply, integers as in XLA: ``NaN * 0``)."""
    assert r.torch_dtype == x.torch_dtype  # 2 and 2.0 are one constant
    assert _is(z, 0) and x.dtype in INTS
    return _zeros(x)


@pm.pattern
def AddConstConst(x, c1, c2, a1, a2, r):
    r <= Add(Add(x, c1, a1), c2, a2)
    return r


@pm.rule(AddConstConst)
def add_const_const(x, c1, c2, a1, a2, r):
    """``(A + c1) + c2 => A + (c1 + c2)`` (HandleAdd), integers."""
    assert r.torch_dtype == x.torch_dtype  # 2 and 2.0 are one constant
    assert _is(a1, 1) and _is(a2, 1) and x.dtype in INTS
    assert _small_int(c1, 30) and _small_int(c2, 30)
    return Add(x, c1.value + c2.value, 1)


@pm.pattern
def MulConstConst(x, c1, c2, r):
    r <= Mul(Mul(x, c1), c2)
    return r


@pm.rule(MulConstConst)
def mul_const_const(x, c1, c2, r):
    """``(A * c1) * c2 => A * (c1 * c2)`` (HandleMultiply), integers."""
    assert r.torch_dtype == x.torch_dtype  # 2 and 2.0 are one constant
    assert _small_int(c1) and _small_int(c2) and x.dtype in INTS
    return Mul(x, c1.value * c2.value)


@pm.pattern
def MulDistribute(x, y, z, a):
    return Add(Mul(x, z), Mul(y, z), a)


@pm.rule(MulDistribute)
def mul_distribute(x, y, z, a):
    """``A*C + B*C => (A + B)*C`` (HandleAdd), integers."""
    assert _is(a, 1) and x.dtype in INTS and y.dtype == x.dtype and z.dtype == x.dtype
    return Mul(Add(x, y, 1), z)


@pm.pattern
def MulAbsAbs(x):
    return Mul(Abs(x), Abs(x))


@pm.rule(MulAbsAbs)
def mul_abs_abs(x):
    """``abs(A) * abs(A) => A * A`` (HandleMultiply)."""
    assert x.dtype in NUMERIC
    return Mul(x, x)


@pm.pattern
def AbsAbs(x):
    return Abs(Abs(x))


@pm.rule(AbsAbs)
def abs_abs(x):
    """``abs(abs(A)) => abs(A)`` (HandleAbs: the operand is non-negative)."""
    assert x.dtype in NUMERIC
    return Abs(x)


@pm.pattern
def DivOne(x, o):
    return Div(x, o)


@pm.rule(DivOne)
def div_one(x, o):
    """``A / 1 => A`` (HandleDivide)."""
    assert _is(o, 1) and x.dtype in FLOATS
    return x


@pm.pattern
def NegNeg(x):
    return Neg(Neg(x))


@pm.rule(NegNeg)
def neg_neg(x):
    """``-(-A) => A`` (HandleNegate)."""
    assert x.dtype in NUMERIC
    return x


@pm.pattern
def SubNeg(x, y, a):
    return Sub(x, Neg(y), a)


@pm.rule(SubNeg)
def sub_neg(x, y, a):
    """``A - (-B) => A + B``."""
    assert _is(a, 1) and x.dtype in NUMERIC and y.dtype == x.dtype
    return Add(x, y, 1)


@pm.pattern
def NotNot(x):
    return LogicalNot(LogicalNot(x))


@pm.rule(NotNot)
def not_not(x):
    """``!(!A) => A`` (HandleNot), booleans."""
    assert x.dtype in BOOLS
    return x


@pm.pattern
def BitwiseNotNot(x):
    return BitwiseNot(BitwiseNot(x))


@pm.rule(BitwiseNotNot)
def bitwise_not_not(x):
    """``~(~A) => A`` (HandleNot), booleans and signed integers."""
    assert x.dtype in EXACT
    return x


@pm.pattern
def PowZero(x, e, r):
    r <= PowScalar(x, e)
    return r


@pm.rule(PowZero)
def pow_zero(x, e, r):
    """``pow(A, 0) => 1`` (HandlePower): ``pow(NaN, 0)`` is 1 too."""
    assert r.torch_dtype == x.torch_dtype  # 2 and 2.0 are one constant
    assert _is(e, 0) and x.dtype in NUMERIC
    return OnesLike(x, None, None, None, None, None)


@pm.pattern
def PowOne(x, e, r):
    r <= PowScalar(x, e)
    return r


@pm.rule(PowOne)
def pow_one(x, e, r):
    """``pow(A, 1) => A`` (HandlePower)."""
    assert r.torch_dtype == x.torch_dtype  # 2 and 2.0 are one constant
    assert _is(e, 1) and x.dtype in NUMERIC
    return x


@pm.pattern
def PowTwo(x, e, r):
    r <= PowScalar(x, e)
    return r


@pm.rule(PowTwo)
def pow_two(x, e, r):
    """``pow(A, 2) => A * A`` (HandlePower)."""
    assert r.torch_dtype == x.torch_dtype  # 2 and 2.0 are one constant
    assert _is(e, 2) and x.dtype in NUMERIC
    return Mul(x, x)


@pm.pattern
def PowNegOne(x, e):
    return PowScalar(x, e)


@pm.rule(PowNegOne)
def pow_neg_one(x, e):
    """``pow(A, -1) => 1 / A`` (HandlePower), floats."""
    assert _is(e, -1) and x.dtype in FLOATS
    return Reciprocal(x)


@pm.pattern
def DivByConst(x, c):
    return Div(x, c)


@pm.rule(DivByConst)
def div_by_const(x, c):
    """``A / c => A * (1/c)`` (HandleDivide, floating c): as XLA writes it,
    exact only where ``1/c`` is (``div_by_pow2``), else one rounding off."""
    assert _const(c) and c.value != 0 and math.isfinite(c.value) and x.dtype in FLOATS
    return Mul(x, 1.0 / c.value)


@pm.pattern
def DivDiv(x, y, z):
    return Div(Div(x, y), z)


@pm.rule(DivDiv)
def div_div(x, y, z):
    """``(A / B) / C => A / (B * C)`` (HandleDivide): over the reals where
    ``B, C != 0``; in floats up to rounding (and the overflow of ``B * C``)."""
    assert x.dtype in FLOATS and not y.is_const and not z.is_const
    assert y.dtype == x.dtype and z.dtype == x.dtype
    return Div(x, Mul(y, z))


@pm.pattern
def DivDivDiv(x, y, z, w):
    return Div(Div(x, y), Div(z, w))


@pm.rule(DivDivDiv)
def div_div_div(x, y, z, w):
    """``(A / B) / (C / D) => (A * D) / (B * C)`` (HandleDivide): over the
    reals where ``B, C, D != 0``; in floats up to rounding and overflow."""
    assert x.dtype in FLOATS and all(not v.is_const and v.dtype == x.dtype for v in (y, z, w))
    return Div(Mul(x, w), Mul(y, z))


@pm.pattern
def DivByDiv(x, y, z):
    return Div(x, Div(y, z))


@pm.rule(DivByDiv)
def div_by_div(x, y, z):
    """``A / (B / C) => (A * C) / B`` (HandleDivide): over the reals where
    ``B, C != 0``; in floats up to rounding and overflow."""
    assert x.dtype in FLOATS and all(not v.is_const and v.dtype == x.dtype for v in (y, z))
    return Div(Mul(x, z), y)


@pm.pattern
def DivSqrt(x, y):
    return Div(x, Sqrt(y))


@pm.rule(DivSqrt)
def div_sqrt(x, y):
    """``A / sqrt(B) => A * rsqrt(B)`` (HandleDivide): up to rounding."""
    assert x.dtype in FLOATS and y.dtype == x.dtype
    return Mul(x, Rsqrt(y))


@pm.pattern
def DivRsqrt(x, y):
    return Div(x, Rsqrt(y))


@pm.rule(DivRsqrt)
def div_rsqrt(x, y):
    """``A / rsqrt(B) => A * sqrt(B)`` (HandleDivide): up to rounding."""
    assert x.dtype in FLOATS and y.dtype == x.dtype
    return Mul(x, Sqrt(y))


@pm.pattern
def ExpMul(x, y):
    return Mul(Exp(x), Exp(y))


@pm.rule(ExpMul)
def exp_mul(x, y):
    """``exp(A) * exp(B) => exp(A + B)`` (HandleMultiply): where the
    original overflows (``exp(100) * exp(-100)`` is ``inf * 3.7e-44`` in
    float32) the rewrite gives the exact value; tested (``exp`` is
    uninterpreted: TensorRight proves it with cvc5)."""
    assert x.dtype in FLOATS and y.dtype == x.dtype
    return Exp(Add(x, y, 1))


@pm.pattern
def ExpDiv(x, y):
    return Div(Exp(x), Exp(y))


@pm.rule(ExpDiv)
def exp_div(x, y):
    """``exp(A) / exp(B) => exp(A - B)`` (HandleDivide): where the original
    is ``inf / inf`` the rewrite gives the exact value; tested."""
    assert x.dtype in FLOATS and y.dtype == x.dtype
    return Exp(Sub(x, y, 1))


@pm.pattern
def LogExp(x):
    return Log(Exp(x))


@pm.rule(LogExp)
def log_exp(x):
    """``log(exp(A)) => A + 0.0`` (HandleLog's ``=> A``, but ``log(exp(-0.0))``
    is ``+0.0``): where ``exp`` overflows (``A = 100`` in float32) the
    rewrite gives the exact value."""
    assert x.dtype in FLOATS
    return Add(x, 0.0, 1)


# ------------------------------------------------------- compare, logical

@pm.pattern
def GtSelf(x):
    return Gt(x, x)


@pm.rule(GtSelf)
def gt_self(x):
    """``A > A => false`` (HandleCompare): NaN > NaN is false too."""
    assert x.dtype in NUMERIC
    return _full_bool(x, False)


@pm.pattern
def LtSelf(x):
    return Lt(x, x)


@pm.rule(LtSelf)
def lt_self(x):
    """``A < A => false`` (HandleCompare)."""
    assert x.dtype in NUMERIC
    return _full_bool(x, False)


@pm.pattern
def NeSelf(x):
    return Ne(x, x)


@pm.rule(NeSelf)
def ne_self(x):
    """``A != A => false`` (HandleCompare, integers: NaN != NaN)."""
    assert x.dtype in EXACT
    return _full_bool(x, False)


@pm.pattern
def EqSelf(x):
    return Eq(x, x)


@pm.rule(EqSelf)
def eq_self(x):
    """``A == A => true`` (HandleCompare, integers: NaN == NaN is false)."""
    assert x.dtype in EXACT
    return _full_bool(x, True)


@pm.pattern
def GeSelf(x):
    return Ge(x, x)


@pm.rule(GeSelf)
def ge_self(x):
    """``A >= A => true`` (HandleCompare, integers)."""
    assert x.dtype in EXACT
    return _full_bool(x, True)


@pm.pattern
def LeSelf(x):
    return Le(x, x)


@pm.rule(LeSelf)
def le_self(x):
    """``A <= A => true`` (HandleCompare, integers)."""
    assert x.dtype in EXACT
    return _full_bool(x, True)


@pm.pattern
def GtMax(x, y):
    return Gt(Maximum(x, y), y)


@pm.rule(GtMax)
def gt_max(x, y):
    """``max(A, B) > B => A > B`` (TensorRight's XLA compare rules):
    ``maximum`` propagates NaN, so NaN on either side is false both ways."""
    assert x.dtype in NUMERIC and y.dtype == x.dtype
    return Gt(x, y)


@pm.pattern
def GtMaxLeft(x, y):
    return Gt(Maximum(x, y), x)


@pm.rule(GtMaxLeft)
def gt_max_left(x, y):
    """``max(A, B) > A => B > A``."""
    assert x.dtype in NUMERIC and y.dtype == x.dtype
    return Gt(y, x)


@pm.pattern
def AndLtLt(x, c1, c2):
    return LogicalAnd(LtScalar(x, c1), LtScalar(x, c2))


@pm.rule(AndLtLt)
def and_lt_lt(x, c1, c2):
    """``A < c1 && A < c2 => A < min(c1, c2)`` (HandleAnd; ``c2 > A`` is
    ``lt(A, c2)`` in ATen)."""
    assert _finite(c1) and _finite(c2) and x.dtype in NUMERIC
    return LtScalar(x, min(c1.value, c2.value))


@pm.pattern
def OrScalar(x, c):
    return BitwiseOrScalar(x, c)


@pm.rule(OrScalar)
def or_true(x, c):
    """``A | true => true`` (HandleOr), booleans."""
    assert c.is_const and c.value is True and x.dtype in BOOLS
    return _full_bool(x, True)


@pm.rule(OrScalar)
def or_false(x, c):
    """``A | false => A`` (HandleOr), booleans; ``A | 0 => A`` for integers."""
    assert c.is_const and (c.value is False if x.dtype in BOOLS else
                           (x.dtype in INTS and type(c.value) is int and c.value == 0))
    return x


@pm.pattern
def AndScalar(x, c):
    return BitwiseAndScalar(x, c)


@pm.rule(AndScalar)
def and_true(x, c):
    """``A & true => A`` (HandleAnd), booleans; ``A & -1 => A`` for integers."""
    assert c.is_const and (c.value is True if x.dtype in BOOLS else
                           (x.dtype in INTS and type(c.value) is int and c.value == -1))
    return x


@pm.rule(AndScalar)
def and_false(x, c):
    """``A & false => false`` (HandleAnd), booleans; ``A & 0 => 0`` for integers."""
    assert c.is_const and (c.value is False if x.dtype in BOOLS else
                           (x.dtype in INTS and type(c.value) is int and c.value == 0))
    return _zeros(x)


# ----------------------------------------------------------------- select

@pm.pattern
def WhereSame(p, x):
    return Where(p, x, x)


@pm.rule(WhereSame)
def where_same(p, x):
    """``select(P, A, A) => A`` (HandleSelect)."""
    assert p.dtype in BOOLS and _into(p, x)
    return x


@pm.pattern
def WhereNot(p, x, y):
    return Where(LogicalNot(p), x, y)


@pm.rule(WhereNot)
def where_not(p, x, y):
    """``select(!P, A, B) => select(P, B, A)`` (HandleSelect)."""
    assert p.dtype in BOOLS
    return Where(p, y, x)


@pm.pattern
def WhereTrue(q, d, x, y):
    return Where(OnesLike(q, d, None, None, None, None), x, y)


@pm.rule(WhereTrue)
def where_true(q, d, x, y):
    """``select(true, A, B) => A`` (HandleSelect; a constant true predicate
    is ``ones_like(_, dtype=bool)`` in ATen)."""
    assert d.is_const and d.value == torch.bool
    assert _into(q, x) and _into(y, x) and y.dtype == x.dtype
    return x


@pm.pattern
def WhereFalse(q, d, x, y):
    return Where(ZerosLike(q, d, None, None, None, None), x, y)


@pm.rule(WhereFalse)
def where_false(q, d, x, y):
    """``select(false, A, B) => B`` (HandleSelect)."""
    assert d.is_const and d.value == torch.bool
    assert _into(q, y) and _into(x, y) and y.dtype == x.dtype
    return y


# ------------------------------------------------------------ max, min, clamp

@pm.pattern
def MaxNegInf(x, c):
    return ClampMin(x, c)


@pm.rule(MaxNegInf)
def max_neg_inf(x, c):
    """``max(A, -inf) => A`` (HandleMaximum; ``clamp_min`` in ATen)."""
    assert _is(c, -math.inf) and x.dtype in FLOATS
    return x


@pm.pattern
def MinInf(x, c):
    return ClampMax(x, c)


@pm.rule(MinInf)
def min_inf(x, c):
    """``min(A, inf) => A`` (HandleMinimum; ``clamp_max`` in ATen)."""
    assert _is(c, math.inf) and x.dtype in FLOATS
    return x


@pm.pattern
def ClampClamp(x, lo, hi, r):
    r <= Clamp(Clamp(x, lo, hi), lo, hi)
    return r


@pm.rule(ClampClamp)
def clamp_clamp(x, lo, hi, r):
    """``clamp(lo, clamp(lo, A, hi), hi) => clamp(lo, A, hi)`` (HandleClamp)."""
    assert r.torch_dtype == x.torch_dtype  # 2 and 2.0 are one constant
    assert x.dtype in NUMERIC and (_finite(lo) or _finite(hi))
    assert lo.value is None or _finite(lo)
    assert hi.value is None or _finite(hi)
    return Clamp(x, lo.value, hi.value)


@pm.pattern
def MinMaxToClamp(x, lo, hi, r):
    r <= ClampMax(ClampMin(x, lo), hi)
    return r


@pm.rule(MinMaxToClamp)
def min_max_to_clamp(x, lo, hi, r):
    """``min(max(A, lo), hi) => clamp(lo, A, hi)`` (HandleMinimum): torch's
    clamp is this composition, ``lo > hi`` included."""
    assert r.torch_dtype == x.torch_dtype  # 2 and 2.0 are one constant
    assert _finite(lo) and _finite(hi) and x.dtype in NUMERIC
    return Clamp(x, lo.value, hi.value)


@pm.pattern
def MaxMinToClamp(x, lo, hi, r):
    r <= ClampMin(ClampMax(x, hi), lo)
    return r


@pm.rule(MaxMinToClamp)
def max_min_to_clamp(x, lo, hi, r):
    """``max(min(A, hi), lo) => clamp(lo, A, hi)`` where ``lo <= hi``
    (HandleMaximum's precondition)."""
    assert r.torch_dtype == x.torch_dtype  # 2 and 2.0 are one constant
    assert _finite(lo) and _finite(hi) and lo.value <= hi.value and x.dtype in NUMERIC
    return Clamp(x, lo.value, hi.value)


# ====================================================== with preconditions

@pm.pattern
def DivByPow2(x, c):
    return Div(x, c)


@pm.rule(DivByPow2)
def div_by_pow2(x, c):
    """``A / c => A * (1/c)`` where ``1/c`` is exact (c a power of two,
    ``2^-14 <= |c| <= 2^14``: normal in every float dtype, so is ``1/c``)."""
    assert _const(c) and c.value != 0 and math.isfinite(c.value) and x.dtype in FLOATS
    m, e = math.frexp(abs(c.value))
    assert m == 0.5 and -13 <= e <= 15  # |c| = 2^(e-1)
    return Mul(x, 1.0 / c.value)


# ======================================================= reductions

def _norm_dims(dims, rank):
    ds = [dims] if isinstance(dims, int) else list(dims)
    return [d % rank for d in ds] if rank else []


@pm.pattern
def SumUnitAxes(x, dims, keep):
    return SumDim(x, dims, keep, None)


@pm.rule(SumUnitAxes)
def sum_unit_axes(x, dims, keep):
    """``reduce(A)`` over size-1 axes ``=> A`` (keepdim) (HandleReduce): for
    floats ``=> A + 0.0``, as the sum starts from ``+0.0`` (XLA's reshape
    turns a ``-0.0`` sum of ``-0.0`` into ``-0.0``: ``sum`` gives ``+0.0``)."""
    assert keep.value is True and x.dtype in FLOATS + (pm.i64,) and x.rank >= 1
    assert dims.value and all(x.shape[d] == 1 for d in _norm_dims(dims.value, x.rank))
    return x if x.dtype in INTS else Add(x, 0.0, 1)  # 0.0 + A: +0.0 for -0.0


@pm.pattern
def SumUnitAxis(x, dim, keep):
    return SumDim(x, dim, keep, None)


@pm.rule(SumUnitAxis)
def sum_unit_axis_squeeze(x, dim, keep):
    """``reduce(A)`` over one size-1 axis ``=> reshape(A)`` (HandleReduce;
    floats ``+ 0.0``, see ``sum_unit_axes``)."""
    assert keep.value is False and x.dtype in FLOATS + (pm.i64,) and x.rank >= 1
    ds = _norm_dims(dim.value, x.rank) if dim.value else []
    assert len(ds) == 1 and x.shape[ds[0]] == 1
    y = Squeeze(x, ds[0])
    return y if x.dtype in INTS else Add(y, 0.0, 1)  # 0.0 + A: +0.0 for -0.0


@pm.pattern
def MeanUnitAxes(x, dims, keep):
    return Mean(x, dims, keep, None)


@pm.rule(MeanUnitAxes)
def mean_unit_axes(x, dims, keep):
    """``mean(A)`` over size-1 axes ``=> A`` (keepdim; ``A + 0.0``, see
    ``sum_unit_axes``)."""
    assert keep.value is True and x.dtype in FLOATS and x.rank >= 1
    assert dims.value and all(x.shape[d] == 1 for d in _norm_dims(dims.value, x.rank))
    return x if x.dtype in INTS else Add(x, 0.0, 1)  # 0.0 + A: +0.0 for -0.0


@pm.pattern
def SumSum(x, d1, d2):
    return SumDim(SumDim(x, d1, False, None), d2, False, None)


@pm.rule(SumSum)
def sum_sum(x, d1, d2):
    """``reduce(reduce(A, d1), d2) => reduce(A, d1 ∪ d2)`` (HandleReduce)."""
    assert x.dtype in FLOATS + (pm.i64,) and x.rank >= 2
    assert d1.value and d2.value
    inner = _norm_dims(d1.value, x.rank)
    rest = [i for i in range(x.rank) if i not in inner]
    assert len(set(inner)) == len(inner) and rest
    outer = [rest[d] for d in _norm_dims(d2.value, len(rest))]
    assert len(set(outer)) == len(outer)
    return SumDim(x, sorted(inner + outer), False, None)


@pm.pattern
def SumExpand(x, sizes, dims):
    return SumDim(Expand(x, sizes, False), dims, True, None)


@pm.rule(SumExpand)
def sum_expand(x, sizes, dims):
    """``reduce(broadcast(A))`` over broadcast axes ``=> A * n``
    (HandleReduce), keepdim; floats ``A * n + 0.0`` (XLA's ``A * n`` turns
    the sum's ``+0.0`` of ``-0.0`` into ``-0.0``)."""
    assert x.dtype in FLOATS + (pm.i64,) and x.rank >= 1 and len(sizes.value) == x.rank
    assert dims.value
    ds = set(_norm_dims(dims.value, x.rank))
    n = 1
    for i, m in enumerate(sizes.value):
        if i in ds:
            assert x.shape[i] == 1 and m >= 1
            n *= m
        else:
            assert m in (-1, x.shape[i])
    # the sum starts from +0.0: a sum of -0.0s is +0.0, n * -0.0 is -0.0
    return Mul(x, n) if x.dtype in INTS else Add(Mul(x, n), 0.0, 1)


@pm.pattern
def MulSum(x, dims, keep, c, r):
    r <= Mul(SumDim(x, dims, keep, None), c)
    return r


@pm.rule(MulSum)
def mul_sum(x, dims, keep, c, r):
    """``c * reduce(A) => reduce(c * A)`` (TensorRight's XLA reduce rules);
    for floats ``c > 0``: a sum is never ``-0.0``, ``c * 0.0`` is for ``c <= 0``."""
    assert r.torch_dtype == x.torch_dtype  # 2 and 2.0 are one constant
    assert _finite(c) and x.dtype in FLOATS + (pm.i64,) and dims.value
    assert isinstance(c.value, int) or x.dtype in FLOATS
    assert x.dtype == pm.i64 or _positive(c)  # c * +0.0 is -0.0 for c < 0; a sum is never
    return SumDim(Mul(x, c.value), dims.value, keep.value, None)


@pm.pattern
def DotTransposes(x, y, a, b, c, d):
    assert x.rank == 2 and y.rank == 2
    return MatMul(Transpose(x, a, b), Transpose(y, c, d))


@pm.rule(DotTransposes)
def dot_transposes(x, y, a, b, c, d):
    """``dot(Aᵀ, Bᵀ) => (B A)ᵀ`` for 2-D A, B (HandleDot)."""
    assert x.dtype in FLOATS and y.dtype == x.dtype
    assert _axes((a.value, b.value), 2) == (0, 1) == _axes((c.value, d.value), 2)
    return Transpose(MatMul(y, x), 0, 1)


# ========================================================= layout, others

@pm.pattern
def TransposeTranspose(x, a, b, c, d):
    return Transpose(Transpose(x, a, b), c, d)


@pm.rule(TransposeTranspose)
def transpose_transpose(x, a, b, c, d):
    """``transpose(transpose(A, i, j), i, j) => A`` (HandleTranspose)."""
    assert x.rank >= 1
    assert _axes((a.value, b.value), x.rank) == _axes((c.value, d.value), x.rank)
    return x


@pm.pattern
def TransposeSameAxis(x, a, b):
    return Transpose(x, a, b)


@pm.rule(TransposeSameAxis)
def transpose_same_axis(x, a, b):
    """``transpose(A, i, i) => A`` (HandleTranspose: the identity permutation)."""
    assert x.rank >= 1 and a.value % x.rank == b.value % x.rank
    return x


@pm.pattern
def PermutePermute(x, p, q):
    return Permute(Permute(x, p), q)


@pm.rule(PermutePermute)
def permute_permute(x, p, q):
    """``permute(permute(A, p), q) => permute(A, p∘q)`` (HandleTranspose)."""
    assert x.rank >= 1
    pv, qv = [d % x.rank for d in p.value], [d % x.rank for d in q.value]
    return Permute(x, [pv[i] for i in qv])


@pm.pattern
def PermuteIdentity(x, p):
    return Permute(x, p)


@pm.rule(PermuteIdentity)
def permute_identity(x, p):
    """``transpose(A, identity) => A`` (HandleTranspose)."""
    assert x.rank >= 1 and [d % x.rank for d in p.value] == list(range(x.rank))
    return x


@pm.pattern
def FlipFlip(x, d1, d2):
    return Flip(Flip(x, d1), d2)


@pm.rule(FlipFlip)
def flip_flip(x, d1, d2):
    """``reverse(reverse(A, dims), dims) => A`` (HandleReverse)."""
    assert x.rank >= 1
    assert set(_norm_dims(d1.value, x.rank)) == set(_norm_dims(d2.value, x.rank))
    return x


@pm.pattern
def FlipUnitAxes(x, dims):
    return Flip(x, dims)


@pm.rule(FlipUnitAxes)
def flip_unit_axes(x, dims):
    """``reverse(A, dims) => A`` where the axes have size 1 (HandleReverse)."""
    assert x.rank >= 1 and all(x.shape[d] == 1 for d in _norm_dims(dims.value, x.rank))
    return x


@pm.pattern
def ExpandExpand(x, y, s1, s2):
    y <= Expand(x, s1, False)
    return Expand(y, s2, False)


@pm.rule(ExpandExpand)
def expand_expand(x, y, s1, s2):
    """``broadcast(broadcast(A)) => broadcast(A)`` (HandleBroadcast)."""
    sizes = list(s2.value)
    off = len(sizes) - y.rank
    return Expand(x, [y.shape[i - off] if m == -1 else m for i, m in enumerate(sizes)], False)


@pm.pattern
def ExpandSame(x, s):
    return Expand(x, s, False)


@pm.rule(ExpandSame)
def expand_same(x, s):
    """``broadcast(A)`` to its own shape ``=> A`` (HandleBroadcast)."""
    assert len(s.value) == x.rank
    assert all(m in (-1, n) for m, n in zip(s.value, _shape(x)))
    return x


@pm.pattern
def SqueezeUnsqueeze(x, d1, d2):
    return Squeeze(Unsqueeze(x, d1), d2)


@pm.rule(SqueezeUnsqueeze)
def squeeze_unsqueeze(x, d1, d2):
    """``reshape(reshape(A)) => A``: a unit axis added and removed (HandleReshape)."""
    r = x.rank + 1
    assert d1.value % r == d2.value % r
    return x


@pm.pattern
def UnsqueezeSqueeze(x, d1, d2):
    return Unsqueeze(Squeeze(x, d1), d2)


@pm.rule(UnsqueezeSqueeze)
def unsqueeze_squeeze(x, d1, d2):
    """``reshape(reshape(A)) => A``: a unit axis removed and put back (HandleReshape)."""
    assert x.rank >= 1
    d = d1.value % x.rank
    assert x.shape[d] == 1 and d2.value % x.rank == d
    return x


@pm.pattern
def SliceFull(x, d, s, e, st):
    return Slice(x, d, s, e, st)


@pm.rule(SliceFull)
def slice_full(x, d, s, e, st):
    """``slice(A)`` of a whole axis ``=> A`` (HandleSlice): start 0, step 1,
    end the exported "to the end" (``INT64_MAX``) or None."""
    assert x.rank >= 1 and st.value == 1 and s.value in (None, 0)
    assert e.value is None or e.value == INT64_MAX
    return x


@pm.pattern
def SliceSlice(x, d1, s1, e1, st1, d2, s2, e2, st2):
    return Slice(Slice(x, d1, s1, e1, st1), d2, s2, e2, st2)


@pm.rule(SliceSlice)
def slice_slice(x, d1, s1, e1, st1, d2, s2, e2, st2):
    """``slice(slice(A)) => slice(A)`` on one axis (HandleSlice), for
    non-negative bounds (independent of the axis' size)."""
    assert x.rank >= 1 and d1.value % x.rank == d2.value % x.rank
    a1 = 0 if s1.value is None else s1.value
    b1 = INT64_MAX if e1.value is None else e1.value
    a2 = 0 if s2.value is None else s2.value
    b2 = INT64_MAX if e2.value is None else e2.value
    assert min(a1, b1, a2, b2) >= 0 and st1.value >= 1 and st2.value >= 1
    end = min(b1, a1 + b2 * st1.value, INT64_MAX)
    return Slice(x, d1.value % x.rank, a1 + a2 * st1.value, end, st1.value * st2.value)


@pm.pattern
def PadZero(x, p, v):
    return ConstantPadNd(x, p, v)


@pm.rule(PadZero)
def pad_zero(x, p, v):
    """``pad(A, v, 0_0_0) => A`` (HandlePad): no padding on any side."""
    assert p.value is not None and not any(p.value)
    return x


@pm.pattern
def PadPad(x, p1, p2, v, y):
    y <= ConstantPadNd(x, p1, v)
    return ConstantPadNd(y, p2, v)


@pm.rule(PadPad)
def pad_pad(x, p1, p2, v, y):
    """``pad(pad(A, v, L1, H1), v, L2, H2) => pad(A, v, L1 + L2, H1 + H2)``
    with the same value and non-negative pads (TensorRight's XLA pad rules)."""
    assert _finite(v) or (v.is_const and isinstance(v.value, bool))
    a, b = list(p1.value), list(p2.value)
    assert min(a + b) >= 0
    n = max(len(a), len(b))
    a, b = a + [0] * (n - len(a)), b + [0] * (n - len(b))
    return ConstantPadNd(x, [i + j for i, j in zip(a, b)], v.value)


@pm.pattern
def ConvertSame(x, t):
    return ToCopy(x, t, None, None, None, False, None)


@pm.rule(ConvertSame)
def convert_same(x, t):
    """``convert(A)`` to its own type ``=> A`` (HandleConvert)."""
    assert t.is_const and t.value == x.torch_dtype
    return x


#: casts that every value of the first type survives
_WIDER = {torch.float16: (torch.float32, torch.float64), torch.bfloat16: (torch.float32,
                                                                          torch.float64),
          torch.float32: (torch.float64,), torch.int8: (torch.int16, torch.int32, torch.int64),
          torch.int16: (torch.int32, torch.int64), torch.int32: (torch.int64, torch.float64),
          torch.bool: (torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
                       torch.bfloat16, torch.float32, torch.float64)}


@pm.pattern
def ConvertConvert(x, t1, t2):
    return ToCopy(ToCopy(x, t1, None, None, None, False, None), t2, None, None, None, False, None)


@pm.rule(ConvertConvert)
def convert_convert(x, t1, t2):
    """``convert(convert(A, T1), T0) => A`` where ``T0`` is A's type and
    ``T1`` holds every value of it (HandleConvert)."""
    assert t1.is_const and t2.is_const and t2.value == x.torch_dtype
    assert t1.value in _WIDER.get(x.torch_dtype, ())
    return x


#: each rule's class in TensorRight's Table 1
CATEGORY = {
    **{r: "element-wise, simple" for r in (
        "add_zero", "sub_zero", "sub_self", "sub_const", "mul_one",
        "mul_zero", "add_const_const", "mul_const_const", "mul_distribute", "mul_abs_abs",
        "abs_abs", "div_one", "neg_neg", "sub_neg", "not_not", "bitwise_not_not", "pow_zero",
        "pow_one", "pow_two", "pow_neg_one", "div_by_const", "div_div", "div_div_div",
        "div_by_div", "gt_self", "lt_self", "ne_self", "eq_self", "ge_self", "le_self",
        "gt_max", "gt_max_left", "and_lt_lt", "or_true", "or_false", "and_true", "and_false",
        "where_same", "where_not", "where_true", "where_false", "max_neg_inf", "min_inf",
        "clamp_clamp", "min_max_to_clamp")},
    **{r: "element-wise, advanced" for r in ("div_sqrt", "div_rsqrt", "exp_mul", "exp_div",
                                             "log_exp")},
    **{r: "with preconditions" for r in ("div_by_pow2", "max_min_to_clamp")},
    **{r: "non-element-wise, reductions" for r in (
        "sum_unit_axes", "sum_unit_axis_squeeze", "mean_unit_axes", "sum_sum", "sum_expand",
        "mul_sum", "dot_transposes")},
    **{r: "non-element-wise, layout-sensitive" for r in (
        "squeeze_unsqueeze", "unsqueeze_squeeze", "convert_convert", "convert_same")},
    **{r: "non-element-wise, others" for r in (
        "transpose_transpose", "transpose_same_axis", "permute_permute", "permute_identity",
        "flip_flip", "flip_unit_axes", "expand_expand", "expand_same", "slice_full",
        "slice_slice", "pad_zero", "pad_pad")},
}

PATTERNS = [AddZero, SubZero, SubSelf, SubConst, MulOne, MulZero, AddConstConst, MulConstConst,
            MulDistribute, MulAbsAbs, AbsAbs, DivOne, NegNeg, SubNeg, NotNot, BitwiseNotNot,
            PowZero, PowOne, PowTwo, PowNegOne, DivByConst, DivDiv, DivDivDiv, DivByDiv, DivSqrt,
            DivRsqrt, ExpMul, ExpDiv, LogExp, GtSelf, LtSelf, NeSelf, EqSelf, GeSelf, LeSelf,
            GtMax, GtMaxLeft, AndLtLt, OrScalar, AndScalar, WhereSame, WhereNot, WhereTrue,
            WhereFalse, MaxNegInf, MinInf, ClampClamp, MinMaxToClamp, MaxMinToClamp, DivByPow2,
            SumUnitAxes, SumUnitAxis, MeanUnitAxes, SumSum, SumExpand, MulSum, DotTransposes,
            TransposeTranspose, TransposeSameAxis, PermutePermute, PermuteIdentity, FlipFlip,
            FlipUnitAxes, ExpandExpand, ExpandSame, SqueezeUnsqueeze, UnsqueezeSqueeze,
            SliceFull, SliceSlice, PadZero, PadPad, ConvertSame, ConvertConvert]

#: the check's options for this module (bench/xla_rules.py; the CLI flags
#: ``--special-values 0.3 --dtype-hints``)
CHECK_OPTIONS = {"special_values": 0.3, "dtype_hints": True}
