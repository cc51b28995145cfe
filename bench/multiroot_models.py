"""Multi-root fusion on the models of examples/models.py: the
rule library with and without the new rules (library/fusion.py: QKV and
gate/up), firings per layer, outputs agree, eager CPU time of the original
and of both rewritten programs (interleaved, medians).

    PYTHONPATH=python python bench/multiroot_models.py --size base bert llama
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--size", default="base")
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "multiroot_models.md"))
    a = ap.parse_args(argv)
    import torch
    import models
    from pypm_verified.library import default_patterns, fusion
    from pypm_verified.torch.loader import load_model
    from pypm_verified.torch.pipeline import rewrite_program
    torch.set_num_threads(1)
    rows = []
    for name in a.models:
        m, inp = models.build(name, a.size)
        prog = load_model(m, inp)
        base = rewrite_program(prog, default_patterns(), n_random=1)
        t0 = time.perf_counter()
        new = rewrite_program(prog, fusion.PATTERNS + default_patterns(), n_random=1)
        rw_s = time.perf_counter() - t0
        mods = {"original": prog.ep.module(), "library": base.ep.module(),
                "library+fusion": new.ep.module()}
        times = {k: [] for k in mods}
        with torch.no_grad():
            for f in mods.values():
                f(*prog.args, **prog.kwargs)
            for i in range(a.runs):
                for k in (list(mods) if i % 2 == 0 else list(reversed(list(mods)))):
                    t = time.perf_counter()
                    mods[k](*prog.args, **prog.kwargs)
                    times[k].append(time.perf_counter() - t)
        med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        fir = new.report.firings
        rows.append((name, models.layers(a.size), fir.get("qkv_gemm", 0),
                     fir.get("gate_up_gemm", 0), base.numerics.ok and new.numerics.ok,
                     new.numerics.max_abs, med["original"], med["library"],
                     med["library+fusion"], rw_s))
        print(rows[-1], flush=True)
    lines = [f"# Multi-root fusion on examples/models.py ({a.size}, CPU, 1 thread)", "",
             "QKV and gate/up (`library/fusion.py`, multi-root patterns, `theories/Multi.v`)"
             " on top of the rule library; eager time of one forward, median of "
             f"{a.runs} interleaved runs; `ok`: outputs of both rewritten programs agree with "
             "the original (example and random inputs).", "",
             "| model | layers | QKV fired | gate/up fired | ok | max abs diff | original ms |"
             " library ms | library+fusion ms | speedup from fusion | rewrite s |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} | {r[5]:.2g} | {r[6]:.1f} |"
                     f" {r[7]:.1f} | {r[8]:.1f} | {r[7] / r[8]:.2f}x | {r[9]:.1f} |")
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
