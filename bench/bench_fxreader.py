"""The native FX reader against the Python reader, side by side.

For BERT-like models (examples/models.py, ``base`` size: hidden 768, 12
heads, sequence 128) of 2 and 12 layers (``--models``/``--layers`` for
others), exported as bench_matchers.py exports them, in one process, the
two readers interleaved (``PYPM_NATIVE=0``/``1`` alternating, each on its
own copy of the FX graph), the cyclic GC off during each timed call:

* ``import``: ``TermGraph(fx_graph).build()`` (the walk of the node list,
  the term graph with its maps, duplicates merged);
* ``encode``: the term graph's engine encoding (``encode_graph``), from
  its columns;
* ``fixpoint``: the driver's whole run with the rule library (verified
  engine, validator on), as bench_matchers.py's ``pypm_verified`` system;
* the reading floor: ``bench/floor/readfloor.c`` (compiled here, as
  ``make native`` compiles the reader) reads per FX node only what any
  reader must (op, target, args, kwargs, the fake tensor's shape and
  dtype) and builds nothing; the native import over it is what building
  the Python term graph costs;
* the engine words: ``fxmatch.engine_words``, the engine's encoding of the
  graph's term graph written by the native reader without a Python term
  graph (``_fxreader.engine_graph``), checked equal to the import's.

Times are CPU seconds of this process (``time.process_time``: the 2 shared
cores are loaded by other work, and wall time counts its preemptions) and
wall seconds, medians over the repetitions, per FX node; the ratio is
Python over native, from the same run. Writes ``results/fxreader.md`` and
``fxreader.json`` (``--out``).

    python bench/bench_fxreader.py                    # bert 2 and 12 layers
    python bench/bench_fxreader.py --quick            # fewer repetitions
"""
from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import platform
import statistics
import sys
import time

import common  # noqa: F401  (sys.path: python/, examples/)
from common import RESULTS

MODES = ("python", "native")


def _timed(fn):
    gc.disable()
    try:
        c0, w0 = time.process_time(), time.perf_counter()
        out = fn()
        return time.process_time() - c0, time.perf_counter() - w0, out
    finally:
        gc.enable()


def floor_module(log):
    """``bench/floor/readfloor.c`` compiled with the interpreter's headers
    into a temporary directory and imported, or None (said in ``log``)."""
    import importlib.machinery
    import importlib.util
    import subprocess
    import sysconfig
    import tempfile
    from pathlib import Path
    from pypm_verified._native import build  # the compiler and flags of the reader's build
    src = Path(__file__).resolve().parent / "floor" / "readfloor.c"
    out = Path(tempfile.mkdtemp(prefix="readfloor")) / ("readfloor" +
                                                        sysconfig.get_config_var("EXT_SUFFIX"))
    cmd = build.compile_command(str(src), str(out))
    try:
        r = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        log(f"reading floor: not measured (no compiler: {e})")
        return None
    if r.returncode != 0:
        log(f"reading floor: not measured (the compiler failed: {r.stderr.strip()[:300]})")
        return None
    loader = importlib.machinery.ExtensionFileLoader("readfloor", str(out))
    spec = importlib.util.spec_from_loader("readfloor", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def bench_model(model: str, layers: int, repeats: int, fixpoint_repeats: int, log,
                floor=None) -> dict:
    from examples import models
    from pypm_verified import _native
    from pypm_verified.engines import serialize
    from pypm_verified.torch.importer import TermGraph
    ep = models.export(model, "base", layers=layers)
    n = len(ep.graph_module.graph.nodes)
    log(f"{model} x{layers}: {n} FX nodes")
    times = {ph: {m: {"cpu": [], "wall": []} for m in MODES} for ph in ("import", "encode",
                                                                          "fixpoint")}
    words = {}
    for mode in MODES:  # untimed: the shared tables warmed, the first call of each reader
        os.environ[_native.ENV] = "1" if mode == "native" else "0"
        serialize.encode_graph(TermGraph(copy.deepcopy(ep.graph_module.graph)).build().graph)
    gc.collect()
    for i in range(2 * repeats):
        mode = MODES[i % 2] if (i // 2) % 2 == 0 else MODES[1 - i % 2]  # ABBA order
        os.environ[_native.ENV] = "1" if mode == "native" else "0"
        g = copy.deepcopy(ep.graph_module.graph)
        cpu, wall, tg = _timed(lambda: TermGraph(g).build())
        times["import"][mode]["cpu"].append(cpu)
        times["import"][mode]["wall"].append(wall)
        cpu, wall, w = _timed(lambda: serialize.encode_graph(tg.graph))
        times["encode"][mode]["cpu"].append(cpu)
        times["encode"][mode]["wall"].append(wall)
        words[mode] = list(w)
        del tg, g
    assert words["python"] == words["native"], "the readers' encodings differ"
    floor_times = {"cpu": [], "wall": []}
    engine_times = {"cpu": [], "wall": []}  # the engine's words written natively
    if floor is not None:  # each on a fresh copy, as the import reads one
        import torch
        from torch._subclasses.fake_tensor import FakeTensor
        from pypm_verified.torch.fxmatch import engine_words
        os.environ[_native.ENV] = "1"
        for _ in range(repeats):
            nodes = list(copy.deepcopy(ep.graph_module.graph).nodes)
            with torch._C.DisableTorchFunctionSubclass():  # as the native import reads
                cpu, wall, _ = _timed(lambda: floor.walk(nodes, FakeTensor))
            floor_times["cpu"].append(cpu)
            floor_times["wall"].append(wall)
            nodes = list(copy.deepcopy(ep.graph_module.graph).nodes)
            cpu, wall, got = _timed(lambda: engine_words(nodes))
            assert got is not None and list(got[0]) == words["native"], \
                "the engine words differ from the import's encoding"
            engine_times["cpu"].append(cpu)
            engine_times["wall"].append(wall)
            del nodes, got
    if fixpoint_repeats:
        from pypm_verified.library import default_patterns
        from pypm_verified.torch.driver import Driver
        pats = default_patterns()
        firings = {}
        for mode in MODES:  # untimed: the pattern set prepared, each reader's first run
            os.environ[_native.ENV] = "1" if mode == "native" else "0"
            Driver(copy.deepcopy(ep.graph_module), pats, engine="verified", target="cpu",
                   recompile=False, check_profitability=False).run()
        for i in range(2 * fixpoint_repeats):
            mode = MODES[i % 2] if (i // 2) % 2 == 0 else MODES[1 - i % 2]
            os.environ[_native.ENV] = "1" if mode == "native" else "0"
            gm = copy.deepcopy(ep.graph_module)
            gc.collect()
            cpu, wall, rep = _timed(lambda: Driver(gm, pats, engine="verified", target="cpu",
                                                   recompile=False,
                                                   check_profitability=False).run())
            times["fixpoint"][mode]["cpu"].append(cpu)
            times["fixpoint"][mode]["wall"].append(wall)
            firings[mode] = dict(rep.firings)
        assert firings["python"] == firings["native"], firings
    os.environ.pop(_native.ENV, None)
    row = {"model": model, "layers": layers, "nodes": n, "repeats": repeats,
           "fixpoint_repeats": fixpoint_repeats, "phases": {}}
    if floor_times["cpu"]:
        imp = statistics.median(times["import"]["native"]["wall"])
        fw = statistics.median(floor_times["wall"])
        enc = statistics.median(times["encode"]["native"]["wall"])
        ew = statistics.median(engine_times["wall"])
        row["floor"] = {"us_per_node": statistics.median(floor_times["cpu"]) / n * 1e6,
                        "wall_ms": fw * 1e3, "native_import_wall_ms": imp * 1e3,
                        "import_over_floor": imp / fw, "raw": floor_times,
                        "engine_words_wall_ms": ew * 1e3,
                        "import_encode_over_words": (imp + enc) / ew,
                        "words_over_floor": ew / fw, "raw_words": engine_times}
        log(f"  reading floor: {row['floor']['wall_ms']:.3f} ms, the native import "
            f"{row['floor']['import_over_floor']:.1f}x that; the engine words "
            f"{ew * 1e3:.3f} ms ({row['floor']['words_over_floor']:.1f}x the floor)")
    for ph, by_mode in times.items():
        if not by_mode["python"]["cpu"]:
            continue
        med = {m: {k: statistics.median(v) for k, v in by_mode[m].items()} for m in MODES}
        row["phases"][ph] = {
            "python_us_per_node": med["python"]["cpu"] / n * 1e6,
            "native_us_per_node": med["native"]["cpu"] / n * 1e6,
            "ratio_cpu": med["python"]["cpu"] / med["native"]["cpu"],
            "python_wall_ms": med["python"]["wall"] * 1e3,
            "native_wall_ms": med["native"]["wall"] * 1e3,
            "ratio_wall": med["python"]["wall"] / med["native"]["wall"],
            "raw": by_mode}
        log(f"  {ph}: python {row['phases'][ph]['python_us_per_node']:.2f} us/node, native "
            f"{row['phases'][ph]['native_us_per_node']:.2f} us/node (cpu ratio "
            f"{row['phases'][ph]['ratio_cpu']:.2f}, wall ratio {row['phases'][ph]['ratio_wall']:.2f})")
    return row


#: what a profile of the native import shows (perf on BERT-12, this design);
#: written into the results as it stands, not measured by this script
NOTES = (
    "What bounds the native import (a `perf` profile of `build` on BERT-12): the reader "
    "still builds the Python term graph the rest of pypm reads -- per FX node a `Node` "
    "object, its hash-consing key and index entry, the entries of the term, FX-of, recipe "
    "and call maps -- and reads torch's fake-tensor `shape` and `dtype` (torch's getters; "
    "their `__torch_function__` override lookup is off during the walk); allocation and "
    "dict updates are most of the rest, and the Python methods it hands what is not the "
    "common case to (the first sight of an overload or a constant in a term graph, calls "
    "that fit no schema, the output node) about a tenth. The reading floor (below) is what "
    "is left without the Python term graph. The interpreter overhead it removes is what "
    "the import ratio shows; in the fixpoint the reader is the initial import and the "
    "engine encodings, a few percent of its time. The engine words (below) are the first "
    "step of the term graph in arrays: the same encoding written with no Python object "
    "per node, hash-consed in C, 1.7-2.5x faster than the import and its encoding; it "
    "serves matching (`match_fx`), while the driver still reads the Python term graph. "
    "What is left over the floor is the writer's own reading of what the floor skips: "
    "the positional form of each call, the table of tensor types keyed by (sizes, "
    "dtype), the FX node -> term map.")


def write_markdown(res: dict, path) -> None:
    L = ["# The native FX reader vs the Python reader, side by side", "",
         f"Generated by `bench/bench_fxreader.py` on {res['machine']}, torch {res['torch']}, "
         f"Python {res['python']}; load average (1 min) {res['load_start']:.1f} at the start, "
         f"{res['load_end']:.1f} at the end (the 2 cores are shared: compare the ratios, "
         "not times across runs).", "",
         "Models: examples/models.py `base` size (hidden 768, 12 heads, sequence 128), "
         "exported as in `bench_matchers.py`. The two readers alternate (ABBA) in one "
         "process, each on its own copy of the FX graph, the cyclic GC off during each "
         "timed call; medians. *CPU µs/node*: `time.process_time` of this process over the "
         "FX node count (the wall time counts the preemptions of a loaded machine); "
         "*ratio*: Python over native, CPU and wall. Both readers give the same term graph "
         "and the same encoding word for word (checked here on every run, and by "
         "tests/test_fxreader.py).", "",
         "| model | layers | FX nodes | phase | Python CPU µs/node | native CPU µs/node "
         "| ratio (CPU) | Python wall ms | native wall ms | ratio (wall) |",
         "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    for row in res["rows"]:
        for ph, r in row["phases"].items():
            L.append(f"| {row['model']} | {row['layers']} | {row['nodes']} | {ph} | "
                     f"{r['python_us_per_node']:.2f} | {r['native_us_per_node']:.2f} | "
                     f"{r['ratio_cpu']:.2f} | {r['python_wall_ms']:.2f} | "
                     f"{r['native_wall_ms']:.2f} | {r['ratio_wall']:.2f} |")
    L += ["", "Phases: *import* is `TermGraph(fx_graph).build()`; *encode* the engine "
          "encoding of the imported term graph (`encode_graph`); *fixpoint* the driver's "
          "whole run with the rule library (verified engine, rewrite validation on; its "
          "µs/node is over the FX nodes before rewriting), in which the reader is the "
          "initial import, the engine's graph encoding and its extensions. Repetitions: "
          + ", ".join(f"{r['model']}-{r['layers']}: {r['repeats']} (fixpoint "
                      f"{r['fixpoint_repeats']})" for r in res["rows"]) + " per reader.", "",
          NOTES, ""]
    floors = [r for r in res["rows"] if "floor" in r]
    if floors:
        L += ["## The reading floor", "",
              "`bench/floor/readfloor.c` reads per FX node only what any reader must (op, "
              "target, args, kwargs, the fake tensor's shape and dtype) and builds nothing; "
              "each repetition on a fresh copy of the graph, as the import's. *import / "
              "floor*: the native import's wall time over the floor's, same run: what "
              "building the Python term graph costs.", "",
              "| model | layers | FX nodes | floor CPU µs/node | floor wall ms "
              "| native import wall ms | import / floor | engine words wall ms "
              "| words / floor | import + encode / words |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in floors:
            f = r["floor"]
            L.append(f"| {r['model']} | {r['layers']} | {r['nodes']} | {f['us_per_node']:.2f} "
                     f"| {f['wall_ms']:.3f} | {f['native_import_wall_ms']:.3f} "
                     f"| {f['import_over_floor']:.1f} | {f['engine_words_wall_ms']:.3f} "
                     f"| {f['words_over_floor']:.1f} | {f['import_encode_over_words']:.1f} |")
        L += ["", "*engine words*: `pypm_verified.torch.fxmatch.engine_words`, the engine's "
              "encoding of the graph's term graph written by the native reader with no Python "
              "term graph (`_fxreader.engine_graph`: hash-consing in C), each on a fresh copy; "
              "checked here to be the import's encoding word for word. *import + encode / "
              "words*: the native import and the encoding of its term graph over it, same "
              "run."]
        L.append("")
    path.write_text("\n".join(L))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="bert")
    ap.add_argument("--layers", default="2,12")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--fixpoint-repeats", type=int, default=5)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=str(RESULTS))
    a = ap.parse_args(argv)
    from pypm_verified import _native
    if _native.reader() is None:
        print(_native.status() + " -- build it with `make native`", file=sys.stderr)
        return 1
    import torch
    repeats = 5 if a.quick else a.repeats
    fix = 2 if a.quick else a.fixpoint_repeats

    def log(msg):
        print(msg, flush=True)
    res = {"machine": f"{platform.machine()} ({os.cpu_count()} CPUs)", "torch": torch.__version__,
           "python": platform.python_version(), "load_start": os.getloadavg()[0], "rows": []}
    floor = floor_module(log)
    for model in a.models.split(","):
        for layers in (int(x) for x in a.layers.split(",")):
            res["rows"].append(bench_model(model, layers, repeats, fix, log, floor))
    res["load_end"] = os.getloadavg()[0]
    from pathlib import Path
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    name = "fxreader_quick" if a.quick else "fxreader"
    (out / f"{name}.json").write_text(json.dumps(res, indent=1))
    write_markdown(res, out / f"{name}.md")
    log(f"wrote {out / (name + '.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
