"""Profitability of the multi-root fusions on this CPU: one GEMM over
concatenated weights + split (what qkv_gemm / gate_up_gemm build) vs the
separate linears, float32, one thread, at the projection sizes of
examples/models.py and a range of token counts. Interleaved, median of
``--runs``.

    PYTHONPATH=python python bench/multiroot_gemm.py
"""
from __future__ import annotations

import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = [  # (name, in features, out features of each root)
    ("QKV BERT-base", 768, (768, 768, 768)),
    ("QKV LLaMA GQA (base: 12 heads, 4 kv)", 768, (768, 256, 256)),
    ("gate/up LLaMA base", 768, (3072, 3072)),
    ("QKV bench", 256, (256, 256, 256)),
]


def main(runs: int = 15) -> int:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    rows = []
    for name, k, outs in CASES:
        ws = [torch.randn(n, k) for n in outs]
        bs = [torch.randn(n) for n in outs]
        W, B = torch.cat(ws), torch.cat(bs)
        for tokens in (16, 128, 512):
            x = torch.randn(tokens, k)

            def sep():
                return [torch.nn.functional.linear(x, w, b) for w, b in zip(ws, bs)]

            def fused():
                return torch.split(torch.nn.functional.linear(x, W, B), list(outs), -1)

            for f in (sep, fused):
                f()
            ts = {sep: [], fused: []}
            for i in range(runs):
                for f in ((sep, fused) if i % 2 == 0 else (fused, sep)):
                    t = time.perf_counter()
                    f()
                    ts[f].append(time.perf_counter() - t)
            a, b = statistics.median(ts[sep]), statistics.median(ts[fused])
            rows.append((name, tokens, a * 1e3, b * 1e3, a / b))
            print(rows[-1], flush=True)
    lines = ["# One GEMM over concatenated weights vs separate linears (CPU, float32, 1 thread)",
             "", f"Median of {runs} interleaved runs on this shared 2-core machine.", "",
             "| case | tokens | separate ms | fused ms | speedup |", "|---|---|---|---|---|"]
    lines += [f"| {r[0]} | {r[1]} | {r[2]:.3f} | {r[3]:.3f} | {r[4]:.2f}x |" for r in rows]
    with open(os.path.join(HERE, "results", "multiroot_gemm.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
