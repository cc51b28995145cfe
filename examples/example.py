"""The bundled example: the paper's operators, patterns and Figure 1 rule
(declared in examples/paper_ops.py, next to this file) on a small graph:
match each pattern, match them all at once, and rewrite.

Run with `make example` (sets everything up first) or, once built,
`.venv/bin/python examples/example.py`. Without the verified engine's
library, only the reference engine runs.
"""
import time

import pypm_verified as pm
from paper_ops import Div, Gelu, Half, MatMul, MatMulEpilog, MMxyT, Mul, Relu, Trans, UnaryChain


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
