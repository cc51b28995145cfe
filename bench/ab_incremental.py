"""Before/after of the fixpoint's incremental re-import, side by side.

Two checkouts of ``python/`` (``--before`` and ``--after``, e.g. a
``git archive`` of the base commit with the shared library copied in, and
this tree's ``python``) are run in alternating subprocesses (rotated order
per round, so machine load hits both alike). Each subprocess exports the
model, runs one untimed fixpoint, then times ``--repeats`` fixpoints per
system in CPU time of the process (``time.process_time``: on a loaded
machine wall time mostly measures the neighbours) and profiles the
verified fixpoint by phase (bench/profile_fixpoint.py, same clock).
Systems: pypm_verified, pypm_reference, inductor_pattern (Inductor's
hand-built PatternMatcherPass, the same in both checkouts).

    python bench/ab_incremental.py --before build/base/python --after python \\
        [--cases bert:12,gpt2:4,llama:4] [--rounds 3] [--repeats 3]

Prints a markdown section (medians over rounds of the per-round medians).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = r"""
import copy, gc, json, statistics, sys, time
sys.path.insert(0, {bench!r})
time.perf_counter = time.process_time  # CPU time of this process, phases included
import common  # noqa (puts this checkout's python/ first on sys.path: undone below)
sys.path.insert(0, {pp!r})
import bench_matchers as bm
import profile_fixpoint as pf
from examples import models
model, layers, reps = {model!r}, {layers}, {reps}
ep = models.export(model, bm.SIZE, layers=layers)
systems, _ = bm.make_systems(["pypm_verified", "pypm_reference", "inductor_pattern"],
                             lambda s: None)
out = {{}}
for name, (kind, fn, _) in systems.items():
    fn(bm._fresh(kind, ep))  # untimed
    ts = []
    for _ in range(reps):
        x = bm._fresh(kind, ep); gc.collect(); gc.disable()
        t = time.process_time(); fn(x); ts.append(time.process_time() - t)
        gc.enable()
    out[name] = statistics.median(ts) * 1e3
prof = pf.profile(ep, "verified", repeats=reps)
import pypm_verified
print("RESULT " + json.dumps({{"systems": out, "prof": prof, "package": pypm_verified.__file__}}))
"""


def child(pythonpath, model, layers, reps):
    env = dict(os.environ, PYTHONPATH=os.path.abspath(pythonpath))
    code = CHILD.format(bench=HERE, model=model, layers=layers, reps=reps,
                        pp=os.path.abspath(pythonpath))
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       check=True)
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    out = json.loads(line[len("RESULT "):])
    want = os.path.join(os.path.abspath(pythonpath), "pypm_verified", "__init__.py")
    if out["package"] != want:
        raise RuntimeError(f"the child imported {out['package']}, not {want}")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--cases", default="bert:12,gpt2:4,llama:4")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    load0 = os.getloadavg()
    res = {}
    for case in args.cases.split(","):
        model, layers = case.split(":")
        runs = {"before": [], "after": []}
        order = ["before", "after"]
        for r in range(args.rounds):
            for which in (order if r % 2 == 0 else order[::-1]):
                runs[which].append(child(getattr(args, which), model, int(layers),
                                         args.repeats))
                print(f"# {case} round {r} {which} done", file=sys.stderr)
        res[case] = runs
    load1 = os.getloadavg()
    med = statistics.median
    L = ["## Incremental re-import: before / after, side by side", "",
         f"`python bench/ab_incremental.py --cases {args.cases} --rounds {args.rounds} "
         f"--repeats {args.repeats}`: before = the base commit, after = this tree; "
         "alternating subprocesses, CPU time of the process (`time.process_time`), "
         f"medians over {args.rounds} rounds of {args.repeats} fixpoints. Load average "
         f"{load0[0]:.1f} at the start, {load1[0]:.1f} at the end, on 2 cores shared "
         "with other jobs: read the ratios, not the absolute times.", "",
         "| model | layers | verified before | verified after | after/before "
         "| reference / verified (before → after) | Inductor hand-built / verified "
         "(before → after) |",
         "|---|---:|---:|---:|---:|---|---|"]
    for case, runs in res.items():
        model, layers = case.split(":")

        def s(which, name):
            return med(x["systems"][name] for x in runs[which])

        vb, va = s("before", "pypm_verified"), s("after", "pypm_verified")
        L.append(f"| {model} | {layers} | {vb:.1f} ms | {va:.1f} ms | {va / vb:.2f} "
                 f"| {s('before', 'pypm_reference') / vb:.2f} → "
                 f"{s('after', 'pypm_reference') / va:.2f} "
                 f"| {s('before', 'inductor_pattern') / vb:.2f} → "
                 f"{s('after', 'inductor_pattern') / va:.2f} |")
    for case, runs in res.items():
        model, layers = case.split(":")
        phases = []
        for x in runs["before"] + runs["after"]:
            for p, _, _ in x["prof"]["phases"]:
                if p not in phases:
                    phases.append(p)

        def ph(which, p):
            vals = [dict((q, (ms, c)) for q, ms, c in x["prof"]["phases"]).get(p, (0.0, 0))
                    for x in runs[which]]
            return med(v[0] for v in vals), vals[-1][1]

        tb = med(x["prof"]["total_ms"] for x in runs["before"])
        ta = med(x["prof"]["total_ms"] for x in runs["after"])
        L += ["", f"**{model}, {layers} layers, verified engine, by phase (CPU ms, "
              f"instrumented): before {tb:.1f} ms, after {ta:.1f} ms ({ta / tb:.2f})**", "",
              "| phase | before ms | % | calls | after ms | % | calls |",
              "|---|---:|---:|---:|---:|---:|---:|"]
        for p in phases:
            (b, bc), (a, ac) = ph("before", p), ph("after", p)
            L.append(f"| {p} | {b:.2f} | {100 * b / tb:.0f} | {bc} | {a:.2f} | "
                     f"{100 * a / ta:.0f} | {ac} |")
    print("\n".join(L))


if __name__ == "__main__":
    main()
