"""XLA's algebraic simplifier, the rules with ATen equivalents (issue 14, item 5).

Rules of ``xla/service/algebraic_simplifier.cc`` (the rule set TensorRight
verifies, its Table 1) written as PyPM rules over ATen ops, each named after
what it rewrites. They are **not** in the default library: they exist to be
checked (``python -m pypm_verified check-rules --rules
pypm_verified.library.xla_simplifier``; ``bench/results/xla_rules.md``).
Floating dtypes only (the symbolic semantics is over the reals).

Two are XLA's as XLA writes them and are expected *not* to be proved:
``div_by_const`` (``A / c => A * (1/c)``: exact only when ``1/c`` is a double,
so over the reals it differs; ``div_by_pow2`` is the same rule with that
precondition) and ``div_div`` (``(A / B) / C => A / (B * C)``: differs over
the reals where ``B = 0``, z3 finds it). ``exp_mul`` needs ``exp(a)·exp(b) =
exp(a + b)``, which uninterpreted ``exp`` does not give: tested only
(TensorRight's "advanced element-wise" class).
"""
from __future__ import annotations

import math

import pypm_verified as pm
from ..torch.ops import Add, Div, Exp, MatMul, Mul, Neg, Permute, PowScalar, Sub, Transpose

FLOATS = (pm.f32, pm.f16, pm.bf16, pm.f64)


def _const(c) -> bool:
    return c is not None and c.is_const and isinstance(c.value, (int, float)) \
        and not isinstance(c.value, bool)


def _is(c, want) -> bool:
    """``c`` is the constant ``want`` exactly."""
    return _const(c) and c.value == want


# ------------------------------------------------------------ element-wise

@pm.pattern
def AddZero(x, z, a):
    return Add(x, z, a)


@pm.pattern
def AddZero(x, z, a):  # noqa: F811
    return Add(z, x, a)


@pm.rule(AddZero)
def add_zero(x, z, a):
    """``A + 0 => A`` (HandleAdd)."""
    assert _is(z, 0) and _is(a, 1) and x.dtype in FLOATS
    return x


@pm.pattern
def SubZero(x, z, a):
    return Sub(x, z, a)


@pm.rule(SubZero)
def sub_zero(x, z, a):
    """``A - 0 => A`` (HandleSubtract)."""
    assert _is(z, 0) and _is(a, 1) and x.dtype in FLOATS
    return x


@pm.pattern
def MulOne(x, o):
    return Mul(x, o)


@pm.pattern
def MulOne(x, o):  # noqa: F811
    return Mul(o, x)


@pm.rule(MulOne)
def mul_one(x, o):
    """``A * 1 => A`` (HandleMultiply)."""
    assert _is(o, 1) and x.dtype in FLOATS
    return x


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
    assert x.dtype in FLOATS
    return x


@pm.pattern
def SubNeg(x, y, a):
    return Sub(x, Neg(y), a)


@pm.rule(SubNeg)
def sub_neg(x, y, a):
    """``A - (-B) => A + B``."""
    assert _is(a, 1) and x.dtype in FLOATS and y.dtype == x.dtype
    return Add(x, y, 1)


@pm.pattern
def PowOne(x, e):
    return PowScalar(x, e)


@pm.rule(PowOne)
def pow_one(x, e):
    """``pow(A, 1) => A`` (HandlePower)."""
    assert _is(e, 1) and x.dtype in FLOATS
    return x


@pm.pattern
def PowTwo(x, e):
    return PowScalar(x, e)


@pm.rule(PowTwo)
def pow_two(x, e):
    """``pow(A, 2) => A * A`` (HandlePower)."""
    assert _is(e, 2) and x.dtype in FLOATS
    return Mul(x, x)


@pm.pattern
def DivByConst(x, c):
    return Div(x, c)


@pm.rule(DivByConst)
def div_by_const(x, c):
    """``A / c => A * (1/c)`` (HandleDivide, floating c): as XLA writes it."""
    assert _const(c) and c.value != 0 and math.isfinite(c.value) and x.dtype in FLOATS
    return Mul(x, 1.0 / c.value)


@pm.pattern
def DivByPow2(x, c):
    return Div(x, c)


@pm.rule(DivByPow2)
def div_by_pow2(x, c):
    """``A / c => A * (1/c)`` where ``1/c`` is exact (c a power of two)."""
    assert _const(c) and c.value != 0 and math.isfinite(c.value) and x.dtype in FLOATS
    m, _ = math.frexp(abs(c.value))
    assert m == 0.5  # |c| = 2^k
    return Mul(x, 1.0 / c.value)


@pm.pattern
def DivDiv(x, y, z):
    return Div(Div(x, y), z)


@pm.rule(DivDiv)
def div_div(x, y, z):
    """``(A / B) / C => A / (B * C)`` (HandleDivide)."""
    assert x.dtype in FLOATS and not y.is_const and not z.is_const
    assert y.dtype == x.dtype and z.dtype == x.dtype
    return Div(x, Mul(y, z))


@pm.pattern
def ExpMul(x, y):
    return Mul(Exp(x), Exp(y))


@pm.rule(ExpMul)
def exp_mul(x, y):
    """``exp(A) * exp(B) => exp(A + B)`` (HandleMultiply)."""
    assert x.dtype in FLOATS and y.dtype == x.dtype
    return Exp(Add(x, y, 1))


# ------------------------------------------------------------------ layout

def _axes(t, rank) -> tuple:
    return tuple(sorted(a % rank for a in t))


@pm.pattern
def TransposeTranspose(x, a, b, c, d):
    return Transpose(Transpose(x, a, b), c, d)


@pm.rule(TransposeTranspose)
def transpose_transpose(x, a, b, c, d):
    """``transpose(transpose(A, i, j), i, j) => A`` (HandleTranspose)."""
    assert x.dtype in FLOATS and x.rank >= 1
    assert _axes((a.value, b.value), x.rank) == _axes((c.value, d.value), x.rank)
    return x


@pm.pattern
def PermutePermute(x, p, q):
    return Permute(Permute(x, p), q)


@pm.rule(PermutePermute)
def permute_permute(x, p, q):
    """``permute(permute(A, p), q) => permute(A, p∘q)`` (HandleTranspose)."""
    assert x.dtype in FLOATS and x.rank >= 1
    pv, qv = [d % x.rank for d in p.value], [d % x.rank for d in q.value]
    return Permute(x, [pv[i] for i in qv])


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


#: each rule's class in TensorRight's Table 1
CATEGORY = {
    "add_zero": "element-wise, simple", "sub_zero": "element-wise, simple",
    "mul_one": "element-wise, simple", "div_one": "element-wise, simple",
    "neg_neg": "element-wise, simple", "sub_neg": "element-wise, simple",
    "pow_one": "element-wise, simple", "pow_two": "element-wise, simple",
    "div_by_const": "element-wise, simple", "div_div": "element-wise, simple",
    "div_by_pow2": "with preconditions", "exp_mul": "element-wise, advanced",
    "transpose_transpose": "non-element-wise, others",
    "permute_permute": "non-element-wise, others",
    "dot_transposes": "non-element-wise, reductions",
}

PATTERNS = [AddZero, SubZero, MulOne, DivOne, NegNeg, SubNeg, PowOne, PowTwo, DivByConst,
            DivByPow2, DivDiv, ExpMul, TransposeTranspose, PermutePermute, DotTransposes]
