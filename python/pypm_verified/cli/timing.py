"""``rewrite --benchmark``: interleaved timings of two programs, their
spreads, and whether the difference is within the noise."""
from __future__ import annotations

import statistics
import time
from typing import Callable, Dict, List, Sequence, Tuple


def interleaved_timings(fa: Callable[[], object], fb: Callable[[], object], rounds: int = 21,
                        warmup: int = 3, clock: Callable[[], float] = time.perf_counter
                        ) -> Tuple[List[float], List[float]]:
    """Time ``fa`` and ``fb`` alternately (a b, b a, a b, ...: neither is
    always first, and drift in the machine's load hits both alike); the
    ``rounds`` times of each, in seconds, after ``warmup`` untimed rounds."""
    for _ in range(warmup):
        fa()
        fb()
    ta, tb = [], []
    for i in range(rounds):
        order = ((fa, ta), (fb, tb)) if i % 2 == 0 else ((fb, tb), (fa, ta))
        for f, ts in order:
            t = clock()
            f()
            ts.append(clock() - t)
    return ta, tb


def spread(ts: Sequence[float]) -> Dict[str, float]:
    """Median, quartiles, min and max of ``ts``."""
    q1, med, q3 = statistics.quantiles(ts, n=4, method="inclusive") if len(ts) > 1 \
        else (ts[0],) * 3
    return {"median_s": med, "q1_s": q1, "q3_s": q3, "min_s": min(ts), "max_s": max(ts)}


def compare_timings(ta: Sequence[float], tb: Sequence[float]) -> dict:
    """Medians and spreads of two interleaved timings, the speedup (median
    a / median b), the per-round ratios' quartiles, and ``noisy``: the
    interquartile ranges overlap, so the ratio is not meaningful."""
    a, b = spread(ta), spread(tb)
    ratios = spread([x / y for x, y in zip(ta, tb) if y > 0] or [float("nan")])
    noisy = a["q1_s"] <= b["q3_s"] and b["q1_s"] <= a["q3_s"]
    return {"runs": len(ta), "original": a, "rewritten": b,
            "speedup": a["median_s"] / b["median_s"] if b["median_s"] > 0 else None,
            "ratio_q1": ratios["q1_s"], "ratio_q3": ratios["q3_s"], "noisy": noisy}


def _ms(s: float) -> str:
    return f"{s * 1e3:.3g}"


def benchmark_lines(bench: dict) -> List[str]:
    a, b = bench["original"], bench["rewritten"]

    def one(d):
        return (f"{_ms(d['median_s'])} ms (IQR {_ms(d['q1_s'])}-{_ms(d['q3_s'])}, "
                f"min-max {_ms(d['min_s'])}-{_ms(d['max_s'])})")
    lines = [f"benchmark, eager, {bench['runs']} interleaved runs each: original {one(a)}, "
             f"rewritten {one(b)}",
             f"speedup {bench['speedup']:.2f}x (median ratio; per-run ratios IQR "
             f"{bench['ratio_q1']:.2f}-{bench['ratio_q3']:.2f}x)"]
    if bench["noisy"]:
        lines.append("warning: the two programs' interquartile ranges overlap: the difference "
                     "is within this machine's noise and the speedup is not meaningful "
                     "(try --benchmark-runs with more runs, or a quieter machine)")
    return lines
