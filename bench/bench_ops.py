"""The operators of the synthetic-graph benchmarks (bench_spine, bench_calculus,
bench_forms): declared once, so every benchmark matches the same symbols."""
import pypm_verified as pm


@pm.op
def MatMul(x, y):
    return 1


@pm.op
def Trans(x):
    return 1


@pm.op
def Add(x, y):
    return 1


@pm.op
def Mul(x, y):
    return 1


@pm.op
def Div(x, y):
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
