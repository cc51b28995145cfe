"""The bundled example: declare operators and patterns, build a graph, match.

Run with `make example` (sets everything up first) or, once built,
`.venv/bin/python examples/example.py`.
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


@pm.pattern
def MMxyT(x, y):
    """x @ y^T on rank-2 operands (the paper's Figure 1 pattern)."""
    assert x.shape.rank == 2 and y.shape.rank == 2
    yt = Trans(y)
    return MatMul(x, yt)


@pm.pattern
def Half(x):
    return Div(x, 2)


@pm.pattern
def Half(x):  # noqa: F811 -- a second definition is an alternate
    return Mul(x, 0.5)


def main():
    g = pm.Graph()
    a = g.input("a", shape=(4, 8), dtype=pm.f32)
    b = g.input("b", shape=(16, 8), dtype=pm.f32)
    t = g.apply(MatMul, a, g.apply(Trans, b), shape=(4, 16), dtype=pm.f32)
    h1 = g.apply(Div, t, 2)
    h2 = g.apply(Mul, a, 0.5)

    for engine in ("verified", "reference"):
        m = pm.match(MMxyT, t, engine=engine)
        assert m is not None and m.bindings == {"x": a, "y": b}, m
        print(f"[{engine:9}] MMxyT at {t}: {m.bindings}")
        for node in (h1, h2):
            m = pm.match(Half, node, engine=engine)
            print(f"[{engine:9}] Half  at {node}: {m.bindings if m else None}")

    start = time.perf_counter()
    found = pm.match_all([MMxyT, Half], g)
    elapsed = (time.perf_counter() - start) * 1e3
    print(f"match_all over {len(g)} nodes: {len(found)} matches in {elapsed:.2f} ms")
    for pattern, root, m in found:
        print(f"  {pattern.name:6} at {root}: {m.bindings}")


if __name__ == "__main__":
    main()
