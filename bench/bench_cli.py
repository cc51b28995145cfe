"""Command-line latency: ``pypm-verified rewrite`` of an example model as a
newcomer runs it, beside ``python -c "import torch"``, side by side.

Per model (``pypm-verified example bert``: the 2-layer small one, and with
the full run the 12-layer base one, random weights, written once and not
timed), three commands alternate for ``--rounds`` rounds, each a fresh
process, after one untimed run of each:

``import torch``       ``python -c "import torch"``: the floor any command pays
``rewrite``            ``python -m pypm_verified rewrite MODEL -o OUT -q --force``
``rewrite, no freeze`` the same with ``PYPM_FREEZE_HEAP=0`` (the collector left as it
                       is: cli/heap.py)

Python caches the package's bytecode as it does for any installed package
(pip compiles it at install time; in a checkout, the first run writes
``__pycache__``): the commands run with ``PYTHONDONTWRITEBYTECODE`` removed
from the environment, and an untimed first run of each writes the cache.
What a run pays without that cache (``PYTHONDONTWRITEBYTECODE=1`` in a
checkout) is measured apart: the package's modules a rewrite imports,
each compiled from its source, timed (:func:`compile_time`).

Per process: wall time, and the maximum resident memory (``wait4``). The
collector's own time is measured in separate runs of each rewrite (the
console entry ``pypm_verified.cli.app.run`` started from a snippet that
times every collection with ``gc.callbacks``), as those callbacks cost a
little. Medians.

    python bench/bench_cli.py [--quick] [--rounds N] [--out DIR]

Writes bench/results/cli.json and cli.md (cli_quick.* with --quick).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import common

PY = sys.executable
ROOT = str(common.ROOT)
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(
    [str(common.ROOT / "python")] + ([os.environ["PYTHONPATH"]] if os.environ.get(
        "PYTHONPATH") else [])))
ENV.pop("PYTHONDONTWRITEBYTECODE", None)  # the bytecode cache on, as installed

#: the collector's time in one command: run() after gc.callbacks that time
#: every collection; the totals written by an atexit hook (run ends with
#: os._exit after the atexit hooks)
GC_SNIPPET = r"""
import atexit, gc, json, sys, time
t, tot = [0.0], {"collections": 0, "gc_s": 0.0, "full": 0, "full_s": 0.0}
def cb(phase, info):
    if phase == "start":
        t[0] = time.perf_counter()
        return
    d = time.perf_counter() - t[0]
    tot["collections"] += 1
    tot["gc_s"] += d
    if info["generation"] == 2:
        tot["full"] += 1
        tot["full_s"] += d
gc.callbacks.append(cb)
out = sys.argv[1]
atexit.register(lambda: open(out, "w").write(json.dumps(tot)))
from pypm_verified.cli.app import run
run(sys.argv[2:])
"""


def timed_process(argv, env) -> tuple:
    """``(wall s, max RSS MiB, exit code)`` of ``argv`` run to its end (its
    stderr in a file, so that a long message cannot block it)."""
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            err.seek(0)
            text = err.read().decode(errors="replace")
            raise RuntimeError(f"{' '.join(argv)} exited {p.returncode}: {text[-2000:]}")
    return wall, usage.ru_maxrss / 1024, p.returncode


def systems(model: str, out: str) -> dict:
    rewrite = [PY, "-m", "pypm_verified", "rewrite", model, "-o", out, "-q", "--force"]
    return {
        "import torch": ([PY, "-c", "import torch"], ENV),
        "rewrite": (rewrite, ENV),
        "rewrite, no freeze": (rewrite, dict(ENV, PYPM_FREEZE_HEAP="0")),
    }


def probe(snippet: str, model: str, out: str, env: dict, runs: int) -> dict:
    """Medians over ``runs`` of what ``snippet`` (one of the snippets above:
    a rewrite of ``model`` through the console entry, then a JSON object of
    numbers written to its first argument) records, key by key."""
    got = []
    with tempfile.TemporaryDirectory() as d:
        for k in range(runs):
            path = os.path.join(d, f"probe{k}.json")
            timed_process([PY, "-c", snippet, path, "rewrite", model, "-o", out, "-q",
                           "--force"], env)
            with open(path) as f:
                got.append(json.load(f))
    return {k: statistics.median(g[k] for g in got) for k in got[0]}


def gc_time(model: str, out: str, freeze: bool, runs: int) -> dict:
    """Medians over ``runs`` of the collector's collections and time in one
    rewrite of ``model``."""
    return probe(GC_SNIPPET, model, out, dict(ENV, PYPM_FREEZE_HEAP="1" if freeze else "0"),
                 runs)


#: the package's modules a command imported, each compiled from its source
#: (what a run pays without the bytecode cache): written by an atexit hook
COMPILE_SNIPPET = r"""
import atexit, json, sys, time
out = sys.argv[1]
def done():
    files = sorted({m.__file__ for name, m in list(sys.modules.items())
                    if name.split(".")[0] == "pypm_verified"
                    and (getattr(m, "__file__", None) or "").endswith(".py")})
    t0 = time.perf_counter()
    lines = 0
    for f in files:
        with open(f, "rb") as fh:
            src = fh.read()
        lines += src.count(b"\n")
        compile(src, f, "exec", dont_inherit=True)
    json.dump({"modules": len(files), "lines": lines,
               "compile_s": time.perf_counter() - t0}, open(out, "w"))
atexit.register(done)
from pypm_verified.cli.app import run
run(sys.argv[2:])
"""


def compile_time(model: str, out: str, runs: int) -> dict:
    """Medians over ``runs`` of the time to compile the package's modules a
    rewrite of ``model`` imports, from their sources."""
    return probe(COMPILE_SNIPPET, model, out, ENV, runs)


def bench_model(name: str, layers: int, size: str, rounds: int, work: str, log) -> dict:
    model = os.path.join(work, f"{name}{layers}_{size}.pt2")
    subprocess.run([PY, "-m", "pypm_verified", "example", name, "--layers", str(layers),
                    "--size", size, "-o", model, "-q"], env=ENV, cwd=ROOT, check=True)
    out = os.path.join(work, "out.pt2")
    cmds = systems(model, out)
    names = list(cmds)
    for n in names:  # untimed: the bytecode cache written, the files in the page cache
        timed_process(*cmds[n])
    runs = {n: [] for n in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]  # rotated
        for n in order:
            argv, env = cmds[n]
            wall, rss, _ = timed_process(argv, env)
            runs[n].append((wall, rss))
        log(f"  round {r + 1}: " + ", ".join(f"{n} {runs[n][-1][0]:.2f}s" for n in names))
    row = {"model": name, "layers": layers, "size": size,
           "file_bytes": os.path.getsize(model), "rounds": rounds, "systems": {}}
    for n in names:
        walls = [w for w, _ in runs[n]]
        row["systems"][n] = {"wall_s": statistics.median(walls), "runs_s": walls,
                             "max_rss_mib": statistics.median(m for _, m in runs[n])}
    base = row["systems"]["import torch"]["wall_s"]
    for n in names[1:]:
        row["systems"][n]["beyond_import_s"] = row["systems"][n]["wall_s"] - base
    gc_runs = max(3, rounds // 2)
    row["collector"] = {"rewrite": gc_time(model, out, True, gc_runs),
                        "rewrite, no freeze": gc_time(model, out, False, gc_runs),
                        "runs": gc_runs}
    row["compile"] = compile_time(model, out, 3)
    return row


def write_markdown(res: dict, path) -> None:
    L = ["# Command-line latency, side by side", "",
         f"Generated by `bench/bench_cli.py` on {res['machine']}, Python {res['python']}, "
         f"commit `{res['commit']}`{' (with changes)' if res['dirty'] else ''}, "
         f"{res['when']}; load average (1 min) {res['load_start']:.1f} at the start, "
         f"{res['load_end']:.1f} at the end. Each command a fresh process, the three "
         "alternating (rotated order) for the rounds after one untimed run of each; "
         "medians of wall time and of the maximum resident memory. *beyond import*: the "
         "rewrite's median minus `python -c \"import torch\"`'s, same run. *no freeze*: "
         "`PYPM_FREEZE_HEAP=0` "
         "(python/pypm_verified/cli/heap.py: the command line freezes what is alive once "
         "torch, the library and the rules are imported and once the model is loaded, "
         "so that the collector's full collections no longer walk them).", "",
         "| model | file | rounds | `import torch` | rewrite | rewrite, no freeze "
         "| beyond import: rewrite / no freeze | max RSS MiB: rewrite / no freeze |",
         "|---|---:|---:|---:|---:|---:|---|---|"]
    for r in res["rows"]:
        s = r["systems"]
        L.append(f"| BERT-{r['layers']} ({r['size']}) | {r['file_bytes'] / 2**20:.1f} MiB | "
                 f"{r['rounds']} | {s['import torch']['wall_s']:.2f} s | "
                 f"{s['rewrite']['wall_s']:.2f} s | {s['rewrite, no freeze']['wall_s']:.2f} s | "
                 f"{s['rewrite']['beyond_import_s']:.2f} / "
                 f"{s['rewrite, no freeze']['beyond_import_s']:.2f} s | "
                 f"{s['rewrite']['max_rss_mib']:.0f} / "
                 f"{s['rewrite, no freeze']['max_rss_mib']:.0f} |")
    c = res["rows"][0]["compile"]
    L += ["", "The commands read the bytecode cache Python keeps for the package (pip "
          "compiles it at install time; in a checkout the first run writes `__pycache__`; "
          "an untimed first run of each command here). Without it "
          "(`PYTHONDONTWRITEBYTECODE=1` in a checkout), every run also compiles the "
          f"package's {c['modules']:.0f} modules it imports ({c['lines']:.0f} lines): "
          f"{c['compile_s']:.2f} s (median of 3, timed in the process after a rewrite)."]
    L += ["", "The collector in one rewrite (separate runs, "
          "`gc.callbacks` timing every collection; medians):", "",
          "| model | runs | collections: rewrite / no freeze | collector ms: rewrite / no freeze "
          "| full collections: rewrite / no freeze | their ms: rewrite / no freeze |",
          "|---|---:|---|---|---|---|"]
    for r in res["rows"]:
        a, b = r["collector"]["rewrite"], r["collector"]["rewrite, no freeze"]
        L.append(f"| BERT-{r['layers']} ({r['size']}) | {r['collector']['runs']} | "
                 f"{a['collections']:.0f} / {b['collections']:.0f} | "
                 f"{a['gc_s'] * 1e3:.0f} / {b['gc_s'] * 1e3:.0f} | "
                 f"{a['full']:.0f} / {b['full']:.0f} | "
                 f"{a['full_s'] * 1e3:.0f} / {b['full_s'] * 1e3:.0f} |")
    common.write_md(path, L + [""])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="the 2-layer model only, 3 rounds")
    ap.add_argument("--rounds", type=int, default=None, help="rounds (default 9; quick 3)")
    ap.add_argument("--out", default=None, help="results directory (default bench/results)")
    args = ap.parse_args(argv)
    rounds = args.rounds or (3 if args.quick else 9)
    models = [("bert", 2, "small")] + ([] if args.quick else [("bert", 12, "base")])
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    res = {"machine": common.machine(), "python": sys.version.split()[0],
           "commit": common.git_commit(short=True), "dirty": common.git_dirty(),
           "when": common.when(), "load_start": (common.loadavg() or [0])[0],
           "argv": common.display_argv(sys.argv), "rows": []}
    with tempfile.TemporaryDirectory() as work:
        for name, layers, size in models:
            log(f"{name}-{layers} ({size}):")
            res["rows"].append(bench_model(name, layers, size, rounds, work, log))
    res["load_end"] = (common.loadavg() or [0])[0]
    d = common.results_dir(args.out)
    stem = common.stem("cli", args.quick)
    common.write_json(d / f"{stem}.json", res)
    write_markdown(res, d / f"{stem}.md")
    print((d / f"{stem}.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
