"""The PyPM paper's running examples, declared once: its operators, the
patterns of Figures 1, 2, 3, 4 and 14 and the Figure 1 rule, written as the
paper writes them.

Used by examples/example.py, the tests (tests/test_paper.py checks every
figure; tests/test_dsl.py and tests/test_match.py use the operators and
patterns) and the synthetic-graph benchmarks (bench/bench_spine.py,
bench_calculus.py, bench_forms.py). It is an example, not part of the
library's API: import it as ``paper_ops`` with examples/ on ``sys.path``
(a script in examples/ has it; tests/conftest.py and bench/common.py add it).

One module, one import name: operators are interned by identity and patterns
registered by (module, qualified name), so a second copy of this file under
another module name would declare *different* operators and patterns, and
graphs built with one would not match patterns of the other. Importing it as
anything but ``paper_ops`` is therefore refused.

Operator classes: Relu, Gelu and Tanh are ``unary_pointwise`` (Figure 14's
epilogue); Softmax is unary but not pointwise (it ends an epilogue); the
others have no class.
"""
import math

import pypm_verified as pm

if __name__ not in ("paper_ops", "__main__"):
    raise ImportError(f"import the paper's examples as `paper_ops` (examples/ on sys.path), "
                      f"not as {__name__!r}: a second copy would declare different operators")

# ----------------------------------------------------------------- operators


@pm.op
def MatMul(x, y):
    return 1


@pm.op
def Trans(x):
    return 1


@pm.op
def Div(x, y):
    return 1


@pm.op
def Mul(x, y):
    return 1


@pm.op
def Add(x, y):
    return 1


@pm.op
def Plus(x, y):  # Figure 2 writes GELU's "1 + erf(...)" with Plus
    return 1


@pm.op
def Erf(x):
    return 1


@pm.op
def Neg(x):
    return 1


@pm.op(op_class="unary_pointwise")
def Relu(x):
    return 1


@pm.op(op_class="unary_pointwise")
def Gelu(x):
    return 1


@pm.op(op_class="unary_pointwise")
def Tanh(x):
    return 1


@pm.op
def Softmax(x):  # unary but not pointwise: ends an epilogue
    return 1


@pm.op
def cublasMM_xyT_f32(x, y):
    return 1


@pm.op
def cublasMM_xyT_i8(x, y):
    return 1


# ------------------------------------------------------------------ Figure 1

@pm.pattern
def MMxyT(x, y):
    """x @ y^T on rank-2 operands."""
    assert x.shape.rank == 2
    assert y.shape.rank == 2
    yt = Trans(y)
    return MatMul(x, yt)


@pm.rule(MMxyT)
def cublasrule(x, y):
    """MMxyT to a cuBLAS call in f32 or i8; other dtypes: the rule does not fire."""
    assert (x.dtype == pm.f32 and y.dtype == pm.f32) or \
        (x.dtype == pm.i8 and y.dtype == pm.i8)
    if x.dtype == pm.f32 and y.dtype == pm.f32:
        return cublasMM_xyT_f32(x, y)
    elif x.dtype == pm.i8 and y.dtype == pm.i8:
        return cublasMM_xyT_i8(x, y)


# ------------------------------------------------------------------ Figure 2

@pm.pattern
def Half(x):
    return Div(x, 2)


@pm.pattern
def Half(x):  # noqa: F811 -- a second definition is an alternate
    return Mul(x, 0.5)


SQRT2 = math.sqrt(2)


@pm.pattern
def GeluPat(x):
    """GELU written out: x/2 * (1 + erf(x/√2)), x/2 through Half (a call)."""
    return Mul(Half(x), Plus(1, Erf(Div(x, SQRT2))))


# ------------------------------------------------------------------ Figure 3

@pm.pattern
def UnaryChain(x, f):
    """f(f(...f(x))): f is an operator variable; the recursion ends with the
    second alternate."""
    return f(UnaryChain(x, f))


@pm.pattern
def UnaryChain(x, f):  # noqa: F811
    return f(x)


# ------------------------------------------------------------------ Figure 4

@pm.pattern
def P(x, f, g):
    """Trees of one unary operator f and one binary operator g: local term
    variables (pm.var()) and match constraints (x <= ...)."""
    y = pm.var()
    x <= f(P(y, f, g))
    return x


@pm.pattern
def P(x, f, g):  # noqa: F811
    y = pm.var()
    z = pm.var()
    x <= g(P(y, f, g), P(z, f, g))
    return x


@pm.pattern
def P(x, f, g):  # noqa: F811
    return x


# ----------------------------------------------------------------- Figure 14

@pm.pattern
def PwChain(x, a, b):
    """Pointwise operators over a MatMul: a local operator variable with an
    op-class guard, a local term variable and a match constraint."""
    UnaryOp = pm.Op(1, 1)
    assert UnaryOp.op_class == pm.opclass("unary_pointwise")
    y = pm.var()
    x <= UnaryOp(PwChain(y, a, b))
    return x


@pm.pattern
def PwChain(x, a, b):  # noqa: F811
    x <= MatMul(a, b)
    return x


@pm.pattern
def MatMulEpilog(x, a, b):
    return PwChain(x, a, b)
