"""The bundled example: declare operators, patterns and rules, build a graph,
match and rewrite it.

Run with `make example` (sets everything up first) or, once built,
`.venv/bin/python examples/example.py`. Without the verified engine's
library, only the reference engine runs.
"""
import time

import pypm_verified as pm


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
def cublasMM_xyT_f32(x, y):
    return 1


@pm.op(op_class="unary_pointwise")
def Relu(x):
    return 1


@pm.op(op_class="unary_pointwise")
def Gelu(x):
    return 1


@pm.pattern
def MMxyT(x, y):
    """x @ y^T on rank-2 operands (the paper's Figure 1 pattern)."""
    assert x.shape.rank == 2 and y.shape.rank == 2
    yt = Trans(y)
    return MatMul(x, yt)


@pm.rule(MMxyT)
def cublasrule(x, y):
    assert x.elType == pm.f32 and y.elType == pm.f32
    return cublasMM_xyT_f32(x, y)


@pm.pattern
def Half(x):
    return Div(x, 2)


@pm.pattern
def Half(x):  # noqa: F811 -- a second definition is an alternate
    return Mul(x, 0.5)


@pm.pattern
def UnaryChain(x, f):
    """f(f(...f(x))): f is an operator variable, the recursion ends with the
    second alternate (Figure 3)."""
    return f(UnaryChain(x, f))


@pm.pattern
def UnaryChain(x, f):  # noqa: F811
    return f(x)


@pm.pattern
def PwChain(x, a, b):
    """Pointwise operators over a MatMul (Figure 14): a local operator
    variable, a local term variable and a match constraint."""
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


def main():
    engines = ["reference"] + (["verified"] if pm.engine_available() else [])
    if len(engines) == 1:
        print("(the verified engine's library is not available: `make lib` builds it)")
    g = pm.Graph()
    a = g.input("a", shape=(4, 8), dtype=pm.f32)
    b = g.input("b", shape=(16, 8), dtype=pm.f32)
    t = MatMul(a, Trans(b), shape=(4, 16), dtype=pm.f32)
    h1 = Div(t, 2)
    h2 = Mul(a, 0.5)
    epilog = Gelu(Relu(MatMul(a, a)))

    for engine in engines:
        m = pm.match(MMxyT, t, engine=engine)
        assert m is not None and m.bindings == {"x": a, "y": b}, m
        print(f"[{engine:9}] MMxyT at {t}: {m.bindings}")
        for node in (h1, h2):
            m = pm.match(Half, node, engine=engine)
            print(f"[{engine:9}] Half  at {node}: {m.bindings if m else None}")
        m = pm.match(UnaryChain, epilog, engine=engine)
        print(f"[{engine:9}] UnaryChain at {epilog}: {m.bindings}, {m.functions}")
        m = pm.match(MatMulEpilog, epilog, engine=engine)
        print(f"[{engine:9}] MatMulEpilog at {epilog}: {m.bindings}")

    start = time.perf_counter()
    found = pm.match_all([MMxyT, Half, MatMulEpilog], g, engine=engines[-1])
    elapsed = (time.perf_counter() - start) * 1e3
    print(f"match_all over {len(g)} nodes: {len(found)} matches in {elapsed:.2f} ms")
    for pattern, root, m in found:
        print(f"  {pattern.name:12} at {root}: {m.bindings}")

    g.output(h1)
    report = pm.rewrite(g, [MMxyT], engine=engines[-1])
    print(f"rewrite: {report.firings}, {report.iterations} pass(es); outputs {g.outputs}")


if __name__ == "__main__":
    main()
