"""``rewrite --benchmark``: interleaved timings of two programs, their
spreads, and whether the difference is within the noise.

The timing is PyTorch's own (:class:`torch.utils.benchmark.Timer`): each
program is warmed up and its block size chosen by ``Timer.blocked_autorange``
(the number of calls per timed run that makes the clock's own cost
negligible: 1 for a program that runs for milliseconds, more for a tiny
one), then the timed runs alternate between the two programs, one block
each, on ``torch.utils.benchmark.timer``: the clock the Timer uses, which
synchronizes the accelerator (CUDA) before it reads the time, so a GPU run
measures the kernels and not their launches. The Timer runs on the
current number of torch threads (its own default is 1)."""
from __future__ import annotations

import statistics
from typing import Callable, Dict, List, Optional, Sequence, Tuple

#: ``Timer.blocked_autorange``'s measuring time per program, in seconds, when
#: it warms a program up and picks its block size (at least one block runs)
CALIBRATION_S = 0.2


def _interleaved(fa: Callable[[], object], fb: Callable[[], object], rounds: int,
                 warmup: int, clock: Optional[Callable[[], float]]
                 ) -> Tuple[List[float], List[float], Tuple[int, int]]:
    import torch
    from torch.utils.benchmark import Timer
    from torch.utils.benchmark import timer as synchronized_clock
    clock = clock or synchronized_clock
    threads = torch.get_num_threads()
    for _ in range(warmup):
        fa()
        fb()
    calls = tuple(Timer("f()", globals={"f": f}, timer=clock, num_threads=threads)
                  .blocked_autorange(min_run_time=CALIBRATION_S).number_per_run
                  for f in (fa, fb))
    ta: List[float] = []
    tb: List[float] = []
    runs = ((fa, ta, calls[0]), (fb, tb, calls[1]))
    for i in range(rounds):
        for f, ts, n in (runs if i % 2 == 0 else runs[::-1]):
            t = clock()
            for _ in range(n):
                f()
            ts.append((clock() - t) / n)
    return ta, tb, calls


def interleaved_timings(fa: Callable[[], object], fb: Callable[[], object], rounds: int = 21,
                        warmup: int = 1, clock: Optional[Callable[[], float]] = None
                        ) -> Tuple[List[float], List[float]]:
    """Time ``fa`` and ``fb`` alternately (a b, b a, a b, ...: neither is
    always first, and drift in the machine's load hits both alike); the
    ``rounds`` times of each, in seconds per call. First ``warmup`` untimed
    calls of each, then ``Timer.blocked_autorange`` warms each up further
    and picks its block size (calls per timed run; a time is the block's
    time over its calls). ``clock``: default ``torch.utils.benchmark.timer``,
    which synchronizes the accelerator."""
    ta, tb, _ = _interleaved(fa, fb, rounds, warmup, clock)
    return ta, tb


def benchmark(fa: Callable[[], object], fb: Callable[[], object], rounds: int = 21,
              warmup: int = 1, clock: Optional[Callable[[], float]] = None) -> dict:
    """:func:`compare_timings` of :func:`interleaved_timings` of ``fa``
    (the original) and ``fb`` (the rewritten program), with
    ``calls_per_run``: each one's block size."""
    ta, tb, calls = _interleaved(fa, fb, rounds, warmup, clock)
    return {**compare_timings(ta, tb),
            "calls_per_run": {"original": calls[0], "rewritten": calls[1]}}


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
    calls = bench.get("calls_per_run") or {}
    blocks = "" if max(calls.values(), default=1) <= 1 else (
        f" (a run: {calls['original']} call(s) of the original, {calls['rewritten']} of the "
        "rewritten; times per call)")
    lines = [f"benchmark, eager, {bench['runs']} interleaved runs each{blocks}: original "
             f"{one(a)}, rewritten {one(b)}",
             f"speedup {bench['speedup']:.2f}x (median ratio; per-run ratios IQR "
             f"{bench['ratio_q1']:.2f}-{bench['ratio_q3']:.2f}x)"]
    if bench["noisy"]:
        lines.append("warning: the two programs' interquartile ranges overlap: the difference "
                     "is within this machine's noise and the speedup is not meaningful "
                     "(try --benchmark-runs with more runs, or a quieter machine)")
    return lines
