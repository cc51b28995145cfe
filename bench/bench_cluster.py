"""check-rules on 1 and 2 workers: the executor's split measured.

Each configuration runs ``python -m pypm_verified check-rules --rules R ...
--report X.json -q`` (``--jobs 1``, ``--jobs 2``, ``--ray auto`` when Ray is
installed) as a user would, and reads from the report: the wall time (the
command's, start included), the tasks (one per rule, then one per structure
to prove) and their times (median, largest, total). The reports of all
configurations must be the same but for the times and the ``executor``
entry; the table says so. Then the start-up of the workers: the time for
``--jobs 2``'s pool (and a local Ray cluster) to run its first task, which
imports what a check-rules task imports (torch, the checker, the library),
against a second task on the warm workers.

The machine's load (``uptime``'s 1-minute average) is noted before and after
each run: compare configurations by their ratios, under the stated load.

    python bench/bench_cluster.py --fast --rules gelu --rules transpose
    python bench/bench_cluster.py --full --rules transpose --out bench/results/cluster.md
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common

CHECK_RULES = [sys.executable, "-m", "pypm_verified", "check-rules"]


def _same_part(doc: dict) -> dict:
    """The report but its times and its executor entry (what must not
    depend on the executor)."""
    doc = {k: v for k, v in doc.items() if k not in ("seconds", "executor")}
    doc["rules"] = [{k: v for k, v in r.items() if k != "seconds"} for r in doc["rules"]]
    for r in doc["rules"]:
        r["module"] = re.sub(r"_\d+$", "", r["module"])
    return doc


def run_config(rules, mode: str, how: list, tmp: Path) -> dict:
    """One check-rules run: wall time, load before and after, the report."""
    report = tmp / f"report_{len(list(tmp.iterdir()))}.json"
    cmd = CHECK_RULES + [a for r in rules for a in ("--rules", r)] + \
        (["--fast"] if mode == "fast" else []) + ["--report", str(report), "-q", *how]
    load0 = common.loadavg()
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=common.ROOT, text=True, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT)
    wall = time.perf_counter() - t0
    if p.returncode not in (0, 1):  # 1: a rule refuted or vacuous, still a report
        raise SystemExit(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stdout[-3000:]}")
    doc = json.loads(report.read_text())
    return {"how": " ".join(how) or "--jobs 1", "wall": wall, "load": [load0, common.loadavg()],
            "executor": doc["executor"], "seconds": doc["seconds"],
            "statuses": {r["rule"]: r["status"] for r in doc["rules"]},
            "same": _same_part(doc)}


def _warm_task():
    """What a check-rules worker imports before its first task."""
    import pypm_verified.checking  # noqa: F401
    from pypm_verified.library import default_patterns
    return len(default_patterns())


def startup(ray: bool) -> list:
    """Seconds to the first task's result on fresh workers (start-up and
    imports) and to a second round on the warm ones, for ``--jobs 2`` and a
    local Ray cluster of 2 CPUs."""
    sys.path.insert(0, str(common.ROOT / "python"))
    from pypm_verified.parallel import executor
    out = []
    kinds = [("local, 2 processes", dict(jobs=2))]
    if ray:
        kinds.append(("ray, local cluster of 2 CPUs", dict(ray="auto")))
    for name, kw in kinds:
        t0 = time.perf_counter()
        if "ray" in kw:
            import ray as _ray
            _ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        with executor(sys_path=[str(common.HERE)], **kw) as ex:
            t1 = time.perf_counter()
            ex.run(_warm_task, [()] * 2, progress=False)
            t2 = time.perf_counter()
            ex.run(_warm_task, [()] * 2, progress=False)
            t3 = time.perf_counter()
        if "ray" in kw:
            _ray.shutdown()
        out.append({"executor": name, "start": t1 - t0, "first": t2 - t1, "warm": t3 - t2})
    return out


def _stats(t: dict) -> str:
    return f"{t['median']:.2f} / {t['max']:.2f} / {t['total']:.1f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rules", action="append", required=True, help="as check-rules' --rules")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--fast", dest="mode", action="store_const", const="fast", default="fast")
    g.add_argument("--full", dest="mode", action="store_const", const="full")
    ap.add_argument("--no-ray", action="store_true", help="skip --ray auto")
    ap.add_argument("--out", default=None, metavar="R.md", help="append the section to "
                    "R.md (e.g. bench/results/cluster.md; default: print only)")
    args = ap.parse_args(argv)
    try:
        import ray  # noqa: F401
        has_ray = not args.no_ray
    except ImportError:
        has_ray = False
    configs = [[], ["--jobs", "2"]] + ([["--ray", "auto"]] if has_ray else [])
    with tempfile.TemporaryDirectory() as tmp:
        runs = [run_config(args.rules, args.mode, how, Path(tmp)) for how in configs]
    same = all(r["same"] == runs[0]["same"] for r in runs)
    starts = startup(has_ray)
    cmd = "python bench/bench_cluster.py " + " ".join(
        common.display_argv(sys.argv[1:] if argv is None else argv))
    base = runs[0]["wall"]
    lines = [f"## {args.mode} mode: {', '.join(args.rules)}", "", f"`{cmd}` ({args.mode} mode, rules: {', '.join(args.rules)}; commit "
             f"{common.git_commit(short=True)}{'+' if common.git_dirty() else ''}; "
             f"{common.machine()}; {common.when()})", "",
             "| executor | wall (s) | vs 1 worker | check-rules' own (s) | tasks (rules + "
             "structures) | rule task s: median / max / total | z3 task s: median / max / "
             "total | load before -> after |", "|---|---|---|---|---|---|---|---|"]
    for r in runs:
        t = r["executor"]["tasks"]
        lines.append(f"| {r['how']} ({r['executor']['kind']}, {r['executor']['workers']} "
                     f"worker(s)) | {r['wall']:.1f} | {base / r['wall']:.2f}x | "
                     f"{r['seconds']:.1f} | {t['rules']} + {t['structures']} | "
                     f"{_stats(t['seconds']['rules'])} | {_stats(t['seconds']['structures'])} "
                     f"| {r['load'][0][0]:.2f} -> {r['load'][1][0]:.2f} |")
    lines += ["", f"Same report in every configuration (times and the executor entry "
              f"aside): {'yes' if same else 'NO'}. Statuses: "
              + ", ".join(f"{k} {v}" for k, v in runs[0]["statuses"].items()) + ".", "",
              "Worker start-up (a task importing the checker and the library):", "",
              "| executor | start (s) | first round, 2 tasks (s) | warm round (s) |",
              "|---|---|---|---|"]
    lines += [f"| {s['executor']} | {s['start']:.1f} | {s['first']:.1f} | {s['warm']:.2f} |"
              for s in starts]
    print("\n".join(lines))
    if args.out:
        with open(args.out, "a") as f:
            f.write("\n".join(lines) + "\n\n")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
