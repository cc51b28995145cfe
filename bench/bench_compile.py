"""torch.compile: eager, rewritten eager, torch.compile, rewritten + torch.compile.

For BERT, GPT-2 and LLaMA of examples/models.py (random weights, offline) at
the ``base`` width (hidden 768, 12 heads, FFN 3072; LLaMA 4 KV heads) with
few layers (``--layers``, default 2), batch 1 and each sequence length of
``--seqs`` (default 512: cold compiles take minutes on the shared 2-core
machine; 128,512 for both), five programs run side by side in one process:

``eager``          the model as built (HF eager attention)
``rw_eager``       the model exported by the project's loader and rewritten by
                   ``rewrite_program(prog, target="cpu")`` (the shipped rules and
                   CPU profitability table), ``ep.module()`` run eagerly
``compile``        ``torch.compile(model, backend="inductor", dynamic=False)``
``rw_compile``     ``torch.compile(model, backend=pypm_verified.backend(
                   then="inductor"), dynamic=False)``: each captured graph
                   re-exported, rewritten (same rules and table, minus the rules
                   of ``COMPILED_SKIP["inductor"]``), checked, then compiled by
                   Inductor
``rw_compile_all`` the same with ``skip=()``: every rule the table allows,
                   including those ``COMPILED_SKIP`` leaves out (the evidence
                   for that list)

Compile time: the first call of each compiled program (Dynamo, for the
rewritten ones the re-export, rewrite and check, then Inductor with its C++
compilation), each in a fresh Inductor cache (a new directory under
``$TORCHINDUCTOR_CACHE_DIR`` and the in-memory caches cleared), so a program
does not reuse the kernels another one compiled. Latency: warm-up calls,
then repetitions with the programs interleaved in rotated order (machine
noise hits all alike), under ``torch.no_grad()``; medians, and the medians
of the per-repetition paired ratios.

    python bench/bench_compile.py [--quick] [--models bert,gpt2,llama] [--layers 2]
                                  [--seqs 128,512] [--batch 1] [--threads 1]

Writes bench/results/compile.json and compile.md (``--quick``:
compile_quick.*: the ``bench`` width (hidden 256), 1 layer, sequence 128,
fewer repetitions; a few minutes).

``--pass``: the Inductor custom pass instead (``pypm_verified.inductor_pass()``
as ``pre_grad_custom_pass``), three programs -- ``eager``, ``compile``,
``compile + pass`` -- each measured for inference (``torch.no_grad()``) and
for a training step (forward, ``logits.sum()``, backward; dropout off, so
that both compiled programs compute the same function). Default: the
``bench`` width, 2 layers, sequence 128. Writes compile_pass.json and the
section of compile.md after its ``<!-- inductor pass -->`` line (the rest
of compile.md is kept; a run without ``--pass`` keeps that section).
"""
from __future__ import annotations

import argparse
import copy
import gc
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import traceback
import warnings

import common
from common import RESULTS

MODELS = ("bert", "gpt2", "llama")
PROGRAMS = ("eager", "rw_eager", "compile", "rw_compile", "rw_compile_all")
LABELS = {"eager": "eager", "rw_eager": "rewritten eager", "compile": "torch.compile",
          "rw_compile": "rewritten + compile", "rw_compile_all": "rewritten + compile, no skip"}
COMPILED = ("compile", "rw_compile", "rw_compile_all")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _err(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:400]


def _tensors(out):
    import torch
    import torch.utils._pytree as pytree
    if hasattr(out, "to_tuple"):
        out = out.to_tuple()
    return [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]


def max_abs_diff(ref, got) -> float:
    a, b = _tensors(ref), _tensors(got)
    if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b)):
        return float("nan")
    return max((float((x.double() - y.double()).abs().max()) for x, y in zip(a, b)
                if x.is_floating_point() and x.numel()), default=0.0)


class FreshCache:
    """A new Inductor cache directory under the current one, in-memory caches
    cleared: the compile inside does not reuse another's kernels."""

    def __init__(self, root):
        self.root = root

    def __enter__(self):
        from torch._inductor.utils import clear_inductor_caches
        self.old = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
        self.dir = tempfile.mkdtemp(prefix="bench_compile_", dir=self.root)
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = self.dir
        clear_inductor_caches()
        return self

    def __exit__(self, *exc):
        if self.old is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = self.old
        shutil.rmtree(self.dir, ignore_errors=True)


def bench_one(model, batch, seq, args, size_key):
    import torch
    import pypm_verified as pm
    from examples import models as M
    from pypm_verified.torch.loader import load_model
    from pypm_verified.torch.pipeline import rewrite_program
    row = {"model": model, "batch": batch, "seq": seq, "error": None, "programs": {}}
    tag = f"{model} b{batch} s{seq}"
    progs = row["programs"]
    try:
        m, inputs = M.build(model, size_key)
        kwargs = M.input_kwargs(inputs)
    except Exception as e:
        row["error"] = f"build: {_err(e)}"
        return row
    fns = {}
    with torch.no_grad():
        ref = m(**kwargs)
    fns["eager"] = m
    progs["eager"] = {}
    # rewritten eager: the CLI's pipeline
    t0 = time.perf_counter()
    try:
        prog = load_model(copy.deepcopy(m), (), kwargs)
        res = rewrite_program(prog, target="cpu", engine="verified", check=True, n_random=0)
        fns["rw_eager"] = res.ep.module()
        progs["rw_eager"] = {"rewrite_s": round(time.perf_counter() - t0, 2),
                             "firings": dict(res.report.firings),
                             "numerics_ok": res.numerics.ok if res.numerics else None}
    except Exception as e:
        progs["rw_eager"] = {"error": _err(e)}
        log(f"{tag}: ! rw_eager {_err(e)}")
    cache_root = os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR",
                                       str(common.ROOT / "build" / "inductor"))
    os.makedirs(cache_root, exist_ok=True)
    backends = {"compile": lambda: "inductor",
                "rw_compile": lambda: pm.backend(then="inductor"),
                "rw_compile_all": lambda: pm.backend(then="inductor", skip=())}
    for name in COMPILED:
        e = progs[name] = {}
        try:
            be = backends[name]()
            c = torch.compile(copy.deepcopy(m), backend=be, dynamic=False)
            from torch._dynamo.utils import counters
            counters["inductor"].clear()
            with FreshCache(cache_root), torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t0 = time.perf_counter()
                c(**kwargs)
                e["compile_s"] = round(time.perf_counter() - t0, 2)
            # Inductor's own attention fusion (fx_passes/fuse_attention.py: attention
            # written out -> SDPA), the pass the library's sdpa rule competes with
            e["inductor_fuse_attention"] = int(counters["inductor"].get("fuse_attention", 0))
            if not isinstance(be, str):
                e["graphs"] = [{"status": r.status, "note": r.note, "nodes": r.nodes,
                                "firings": r.firings, "export_s": round(r.export_s, 2),
                                "rewrite_s": round(r.rewrite_s, 2),
                                "check_s": round(r.check_s, 2), "then_s": round(r.then_s, 2),
                                "skipped": list(be.skip)} for r in be.records]
                e["firings"] = be.firings
            fns[name] = c
        except Exception as ex:
            e["error"] = _err(ex)
            log(f"{tag}: ! {name} {_err(ex)}")
            log(traceback.format_exc(limit=4))
    names = [n for n in PROGRAMS if n in fns]
    times = {n: [] for n in names}
    with torch.no_grad():
        for n in names:
            out = fns[n](**kwargs)
            progs[n]["max_abs_diff"] = max_abs_diff(ref, out)
            for _ in range(args.warmup):
                fns[n](**kwargs)
        gc.collect()
        gc.disable()
        try:
            for r in range(args.repeats):
                order = names[r % len(names):] + names[:r % len(names)]
                for n in order:
                    t0 = time.perf_counter()
                    fns[n](**kwargs)
                    times[n].append(time.perf_counter() - t0)
        finally:
            gc.enable()
    for n in names:
        ts = times[n]
        q = statistics.quantiles(ts, n=4, method="inclusive") if len(ts) > 1 else [ts[0]] * 3
        progs[n].update(median_ms=statistics.median(ts) * 1e3, q1_ms=q[0] * 1e3,
                        q3_ms=q[2] * 1e3, runs_ms=[round(t * 1e3, 3) for t in ts])

    def paired(a, b):  # median of per-repetition ratios a/b (> 1: b is faster)
        if a in times and b in times:
            return statistics.median(x / y for x, y in zip(times[a], times[b]))
        return None
    row["ratios"] = {
        "eager/rw_eager": paired("eager", "rw_eager"),
        "eager/compile": paired("eager", "compile"),
        "compile/rw_compile": paired("compile", "rw_compile"),
        "compile/rw_compile_all": paired("compile", "rw_compile_all"),
        "eager/rw_compile": paired("eager", "rw_compile"),
    }
    row["repeats"] = args.repeats
    cells = "  ".join(f"{n} {progs[n]['median_ms']:.1f}ms" for n in names)
    log(f"{tag}: {cells}  compile/rw_compile x{row['ratios']['compile/rw_compile'] or 0:.3f}"
        f"  compile s: " + ", ".join(f"{n} {progs[n].get('compile_s', '?')}" for n in COMPILED))
    del fns, m
    gc.collect()
    return row


# --------------------------------------------------------------------------------------


def _f(x, fmt="{:.3f}"):
    return "—" if x is None else fmt.format(x)


def write_markdown(res, path):
    env = res["env"]
    L = ["# torch.compile: eager, rewritten eager, compile, rewritten + compile (CPU)", "",
         f"Generated by `{('python bench/bench_compile.py ' + ' '.join(res['argv'])).strip()}` "
         f"on {env['platform']} ({env['cpus']} CPUs, torch {env['torch']} with "
         f"**{env['threads']} intra-op thread(s)**, transformers {env['transformers']}), "
         f"{env['when']}; 1-minute load average {env['loadavg_start']:.1f} at the start, "
         f"{env['loadavg_end']:.1f} at the end; {res['wall_s']:.0f} s.", "",
         f"Models: examples/models.py, `{res['size']}` width (hidden {res['dims']['hidden']}, "
         f"{res['dims']['heads']} heads, FFN {res['dims']['inter']}; LLaMA "
         f"{res['dims']['kv_heads']} KV heads), **{res['layers']} layer(s)**, random weights, "
         "float32, first sequence padded by a quarter. Programs (one process, side by side):",
         "",
         "- **eager**: the HF model (eager attention);",
         "- **rewritten eager**: exported by the loader, `rewrite_program(prog, target=\"cpu\")`"
         " (shipped rules, CPU profitability table), `ep.module()` run eagerly;",
         "- **compile**: `torch.compile(model, backend=\"inductor\", dynamic=False)`;",
         "- **rewritten + compile**: `torch.compile(model, backend=pypm_verified.backend("
         "then=\"inductor\"), dynamic=False)` — the same rules and table, minus "
         f"`COMPILED_SKIP[\"inductor\"]` = {res['compiled_skip'] or 'nothing'};",
         "- **rewritten + compile, no skip**: the same with `skip=()`.", "",
         "Compile time = the first call (Dynamo; for the rewritten programs also the "
         "re-export, rewrite and numerics check; then Inductor with C++ compilation), each "
         "in a fresh Inductor cache, after a warm-up compile of a one-line function paid the "
         f"process's one-time costs ({res['warmup_compile_s']:.1f} s). Latency: "
         f"{res['warmup']} warm-up call(s) each, then {res['repeats']} repetitions with the "
         "programs interleaved (rotated order), `torch.no_grad()`; median [q1–q3] in ms. "
         "Ratios are medians of the per-repetition paired ratios (> 1: the second program is "
         "faster).", ""]
    if env["loadavg_start"] > env["cpus"] * 0.5 or env["loadavg_end"] > env["cpus"] * 0.5:
        L += ["> Caveat: the machine was shared with other CPU-bound jobs during the run (load "
              "averages above); ratios within about ±10% of 1 are noise.", ""]
    L += ["## Latency (ms) and compile time (s)", "",
          "| model | b×s | eager | rewritten eager | compile | rewritten + compile | "
          "rewritten + compile, no skip | compile s: compile / rw+compile / no skip |",
          "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in res["rows"]:
        if r["error"]:
            L.append(f"| {r['model']} | {r['batch']}×{r['seq']} | error: {r['error']} |"
                     + " |" * 5)
            continue
        p = r["programs"]

        def lat(n):
            e = p.get(n) or {}
            if "median_ms" not in e:
                return "error" if e.get("error") else "—"
            return f"{e['median_ms']:.1f} [{e['q1_ms']:.1f}–{e['q3_ms']:.1f}]"
        cs = " / ".join(_f((p.get(n) or {}).get("compile_s"), "{:.1f}") for n in COMPILED)
        L.append(f"| {r['model']} | {r['batch']}×{r['seq']} | " + " | ".join(
            lat(n) for n in PROGRAMS) + f" | {cs} |")
    L += ["", "## Ratios (paired medians)", "",
          "| model | b×s | eager / rewritten eager | eager / compile | "
          "**compile / rewritten + compile** | compile / rewritten + compile, no skip | "
          "eager / rewritten + compile |",
          "|---|---|---:|---:|---:|---:|---:|"]
    for r in res["rows"]:
        if r["error"]:
            continue
        q = r["ratios"]
        L.append(f"| {r['model']} | {r['batch']}×{r['seq']} | {_f(q['eager/rw_eager'])} | "
                 f"{_f(q['eager/compile'])} | **{_f(q['compile/rw_compile'])}** | "
                 f"{_f(q['compile/rw_compile_all'])} | {_f(q['eager/rw_compile'])} |")
    L += ["", "## What fired", "",
          "| model | b×s | rewritten eager | rewritten + compile | no skip | "
          "rw+compile: export / rewrite / check / Inductor s |",
          "|---|---|---|---|---|---|"]

    def fire(e):
        if not e or e.get("error"):
            return "error"
        return ", ".join(f"{k}×{n}" for k, n in sorted((e.get("firings") or {}).items())) \
            or "none"
    for r in res["rows"]:
        if r["error"]:
            continue
        p = r["programs"]
        gs = (p.get("rw_compile") or {}).get("graphs") or []
        split = " + ".join(f"{g['export_s']:.1f} / {g['rewrite_s']:.1f} / {g['check_s']:.1f}"
                           f" / {g['then_s']:.1f}" for g in gs) or "—"
        L.append(f"| {r['model']} | {r['batch']}×{r['seq']} | {fire(p.get('rw_eager'))} | "
                 f"{fire(p.get('rw_compile'))} | {fire(p.get('rw_compile_all'))} | {split} |")
    L += ["", "Inductor's own attention fusion (`fuse_attention` pattern replacements counted "
          "in the compile): " + "; ".join(
              f"{r['model']} s{r['seq']}: " + ", ".join(
                  f"{n} {(r['programs'].get(n) or {}).get('inductor_fuse_attention', '?')}"
                  for n in COMPILED) for r in res["rows"] if not r["error"]) + "."]
    notes = [(r, n, g) for r in res["rows"] if not r["error"] for n in COMPILED[1:]
             for g in (r["programs"].get(n) or {}).get("graphs") or [] if g["note"]]
    if notes:
        L += ["", "Backend notes:", ""]
        L += [f"- {r['model']} {n}: {g['status']}: {g['note']}" for r, n, g in notes]
    L += ["", "Max |Δ| of the outputs against eager on the example inputs: " + "; ".join(
        f"{r['model']} s{r['seq']}: " + ", ".join(
            f"{n} {r['programs'][n]['max_abs_diff']:.1e}" for n in PROGRAMS[1:]
            if "max_abs_diff" in (r["programs"].get(n) or {}))
        for r in res["rows"] if not r["error"]) + ".", ""]
    if res.get("conclusion"):
        L += ["## Reading", ""] + res["conclusion"] + [""]
    common.write_md(path, L + _pass_section(path))


PASS_MARK = "<!-- inductor pass -->"
PASS_PROGRAMS = ("eager", "compile", "compile_pass")
PASS_LABELS = {"eager": "eager", "compile": "compile", "compile_pass": "compile + pass"}


def _pass_section(path) -> list:
    """The ``--pass`` section of the Markdown at ``path`` (from its mark on), if any."""
    try:
        text = path.read_text()
    except OSError:
        return []
    i = text.find(PASS_MARK)
    return text[i:].rstrip("\n").split("\n") if i >= 0 else []


def _loss(out):
    import torch
    if hasattr(out, "logits"):
        out = out.logits
    elif not isinstance(out, torch.Tensor):
        out = _tensors(out)[0]
    return out.float().sum()


def bench_pass(model, batch, seq, args, size_key):
    """eager / compile / compile + pass, for inference and a training step."""
    import torch
    import pypm_verified as pm
    from examples import models as M
    row = {"model": model, "batch": batch, "seq": seq, "error": None, "modes": {}}
    tag = f"{model} b{batch} s{seq}"
    try:
        m, inputs = M.build(model, size_key)
        m.eval()  # dropout off: the training step computes the same function in each program
        kwargs = M.input_kwargs(inputs)
    except Exception as e:
        row["error"] = f"build: {_err(e)}"
        return row
    cache_root = os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR",
                                       str(common.ROOT / "build" / "inductor"))
    for mode in ("inference", "training"):
        torch._dynamo.reset()
        progs = row["modes"][mode] = {n: {} for n in PASS_PROGRAMS}
        models = {n: copy.deepcopy(m) for n in PASS_PROGRAMS}

        def step(n, f):
            if mode == "inference":
                with torch.no_grad():
                    return f(**kwargs)
            models[n].zero_grad(set_to_none=True)
            out = f(**kwargs)
            _loss(out).backward()
            # an unused parameter: no grad in eager, zeros from a compiled backward
            return [torch.zeros_like(p) if p.grad is None else p.grad
                    for p in models[n].parameters()]
        fns = {"eager": models["eager"]}
        for n in PASS_PROGRAMS[1:]:
            e = progs[n]
            try:
                opts = {}
                if n == "compile_pass":
                    p = pm.inductor_pass(target="cpu")
                    opts = {"pre_grad_custom_pass": p}
                c = torch.compile(models[n], dynamic=False, options=opts)
                with FreshCache(cache_root), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    t0 = time.perf_counter()
                    step(n, c)
                    e["compile_s"] = round(time.perf_counter() - t0, 2)
                if n == "compile_pass":
                    e["firings"] = p.firings
                    e["graphs"] = [{"status": r.status, "note": r.note,
                                    "trace_s": round(r.export_s, 2),
                                    "rewrite_s": round(r.rewrite_s, 2)} for r in p.records]
                    e["declines"] = sorted({why for r in p.reports
                                            for rules in r.declines.values()
                                            for whys in rules.values() for why in whys})
                fns[n] = c
            except Exception as ex:
                e["error"] = _err(ex)
                log(f"{tag} {mode}: ! {n} {_err(ex)}")
        ref = step("eager", fns["eager"])
        names = [n for n in PASS_PROGRAMS if n in fns]
        times = {n: [] for n in names}
        for n in names:
            progs[n]["max_abs_diff"] = max_abs_diff(ref, step(n, fns[n]))
            for _ in range(args.warmup):
                step(n, fns[n])
        for r in range(args.repeats):
            order = names[r % len(names):] + names[:r % len(names)]
            for n in order:
                t0 = time.perf_counter()
                step(n, fns[n])
                times[n].append(time.perf_counter() - t0)
        for n in names:
            ts = times[n]
            progs[n].update(median_ms=statistics.median(ts) * 1e3,
                            runs_ms=[round(t * 1e3, 3) for t in ts])
        ratios = row.setdefault("ratios", {})
        for a, b in (("eager", "compile"), ("compile", "compile_pass"), ("eager", "compile_pass")):
            if a in times and b in times:
                ratios[f"{mode}:{a}/{b}"] = statistics.median(
                    x / y for x, y in zip(times[a], times[b]))
        log(f"{tag} {mode}: " + "  ".join(f"{n} {progs[n]['median_ms']:.1f}ms"
                                          for n in names)
            + f"  compile/pass x{ratios.get(f'{mode}:compile/compile_pass') or 0:.3f}")
        del fns, models
        gc.collect()
    return row


def write_pass_markdown(res, path):
    """The ``--pass`` section (replacing the old one) after the rest of ``path``."""
    env = res["env"]
    try:
        text = path.read_text()
        i = text.find(PASS_MARK)
        head = (text[:i] if i >= 0 else text).rstrip("\n").split("\n") + [""]
    except OSError:
        head = []
    L = [PASS_MARK, "## The Inductor custom pass (`--pass`)", "",
         f"Generated by `{('python bench/bench_compile.py ' + ' '.join(res['argv'])).strip()}`"
         f" ({env['cpus']} CPUs, torch {env['torch']}, **{env['threads']} intra-op "
         f"thread(s)**), {env['when']}; 1-minute load average {env['loadavg_start']:.1f} at "
         f"the start, {env['loadavg_end']:.1f} at the end; {res['wall_s']:.0f} s. Models: "
         f"`{res['size']}` width (hidden {res['dims']['hidden']}), **{res['layers']} "
         "layer(s)**, dropout off (`eval()`), float32. **compile**: `torch.compile(model, "
         "dynamic=False)`; **compile + pass**: the same with `options={\"pre_grad_custom_pass\":"
         " pm.inductor_pass()}` (shipped rules, CPU profitability table, `COMPILED_SKIP`). "
         "Inference under `torch.no_grad()`; a training step is forward, `logits.sum()`, "
         f"backward. {res['repeats']} interleaved repetitions after {res['warmup']} warm-up "
         "call(s); medians in ms; ratios are medians of paired ratios (> 1: the second "
         "program is faster). Compile time: the first call (forward and backward for "
         "training), in a fresh Inductor cache.", ""]
    if env["loadavg_start"] > env["cpus"] * 0.5 or env["loadavg_end"] > env["cpus"] * 0.5:
        L += ["> Caveat: the machine was shared with other CPU-bound jobs during the run; "
              "ratios within about ±10% of 1 are noise.", ""]
    L += ["| model | b×s | mode | eager | compile | compile + pass | **compile / (compile + "
          "pass)** | compile s: compile / + pass | fired (pass) | max abs diff vs eager |",
          "|---|---|---|---:|---:|---:|---:|---:|---|---|"]
    for r in res["rows"]:
        if r["error"]:
            L.append(f"| {r['model']} | {r['batch']}×{r['seq']} | error: {r['error']} |"
                     + " |" * 7)
            continue
        for mode, progs in r["modes"].items():
            def lat(n):
                e = progs.get(n) or {}
                return f"{e['median_ms']:.1f}" if "median_ms" in e else \
                    ("error" if e.get("error") else "—")
            pe = progs.get("compile_pass") or {}
            fired = ", ".join(f"{k}×{v}" for k, v in sorted((pe.get("firings") or {}).items())) \
                or ("error" if pe.get("error") else "none")
            cs = " / ".join(_f((progs.get(n) or {}).get("compile_s"), "{:.1f}")
                            for n in PASS_PROGRAMS[1:])
            diff = ", ".join(f"{PASS_LABELS[n]} {progs[n]['max_abs_diff']:.1e}"
                             for n in PASS_PROGRAMS[1:] if "max_abs_diff" in progs.get(n, {}))
            L.append(f"| {r['model']} | {r['batch']}×{r['seq']} | {mode} | {lat('eager')} | "
                     f"{lat('compile')} | {lat('compile_pass')} | "
                     f"**{_f(r['ratios'].get(f'{mode}:compile/compile_pass'))}** | {cs} | "
                     f"{fired} | {diff} |")
    L += [""]
    for mode in ("inference", "training"):
        rs = [r["ratios"][f"{mode}:compile/compile_pass"] for r in res["rows"]
              if not r["error"] and r["ratios"].get(f"{mode}:compile/compile_pass")]
        fired = sum(1 for r in res["rows"] if not r["error"]
                    and ((r["modes"].get(mode) or {}).get("compile_pass") or {}).get("firings"))
        if rs:
            L.append(f"- {mode}: the pass fired in {fired} of {len(res['rows'])} model(s); "
                     f"compile / (compile + pass) {min(rs):.3f} to {max(rs):.3f} (geomean "
                     f"{common_geomean(rs):.3f}).")
    declines = sorted({(r["model"], mode, d) for r in res["rows"] if not r["error"]
                       for mode, progs in r["modes"].items()
                       for d in (progs.get("compile_pass") or {}).get("declines", [])})
    if declines:
        L += ["", "Declined by the pass:", ""]
        L += [f"- {m} ({mode}): {d}" for m, mode, d in declines]
    common.write_md(path, head + L + [""])


def conclusion(res):
    rows = [r for r in res["rows"] if not r["error"]]
    rc = [r["ratios"]["compile/rw_compile"] for r in rows if r["ratios"]["compile/rw_compile"]]
    ra = [r["ratios"]["compile/rw_compile_all"] for r in rows
          if r["ratios"]["compile/rw_compile_all"]]
    out = []
    if rc:
        out.append(f"- rewritten + compile vs compile alone: paired ratio {min(rc):.3f} to "
                   f"{max(rc):.3f} (geomean {common_geomean(rc):.3f}) over {len(rc)} "
                   "model × size pairs; < 0.95 in "
                   f"{sum(1 for x in rc if x < 0.95)}, > 1.05 in {sum(1 for x in rc if x > 1.05)}.")
    if ra:
        out.append(f"- without the compiled-path skip list (`skip=()`): {min(ra):.3f} to "
                   f"{max(ra):.3f} (geomean {common_geomean(ra):.3f}).")
    return out


def common_geomean(xs):
    import math
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def _ints(s):
    return [int(x) for x in s.split(",") if x.strip()]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="bench width (hidden 256), 1 layer, seq 128, fewer repetitions")
    ap.add_argument("--models", help="comma-separated subset of " + ",".join(MODELS))
    ap.add_argument("--size", help="examples/models.py width (default base; quick bench)")
    ap.add_argument("--layers", type=int, help="layers per model (default 2; quick 1)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seqs", help="comma-separated sequence lengths (default 512; quick 128)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch intra-op threads (default 1: the machine is shared)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeats", type=int, help="timed repetitions (default 15; quick 5)")
    ap.add_argument("--out", default=str(RESULTS), help="results directory")
    ap.add_argument("--results-name", help="file stem (default compile; quick compile_quick)")
    ap.add_argument("--pass", dest="inductor_pass", action="store_true",
                    help="eager / compile / compile + pypm_verified.inductor_pass(), inference "
                         "and a training step (bench width, 2 layers, seq 128 by default)")
    args = ap.parse_args(argv)
    q = args.quick
    args.size = args.size or ("bench" if q or args.inductor_pass else "base")
    args.layers = args.layers or (1 if q else 2)
    args.repeats = args.repeats or (5 if q or args.inductor_pass else 15)
    seqs = _ints(args.seqs or ("128" if q or args.inductor_pass else "512"))
    models_ = (args.models or ",".join(MODELS)).split(",")
    name = args.results_name or common.stem("compile", q)
    try:
        import torch
        import transformers
    except ImportError as e:
        log(f"bench_compile: {e}; skipping")
        return 0
    warnings.filterwarnings("ignore")
    transformers.logging.set_verbosity_error()
    from examples import models as M
    for m in models_:
        if m not in M.MODELS:
            ap.error(f"unknown model {m!r}")
    torch.set_num_threads(args.threads)
    import logging
    logging.getLogger("torch._inductor").setLevel(logging.ERROR)
    from pypm_verified.torch.backend import COMPILED_SKIP
    t_start = time.perf_counter()
    load0 = common.loadavg()[0]
    hidden, _, heads, kv, inter = M.SIZES[args.size][:5]
    log(f"bench_compile: {len(models_)} models x seq {seqs}, {args.size} width, "
        f"{args.layers} layer(s), {torch.get_num_threads()} thread(s), load {load0:.1f}")
    # one-time costs of the first Inductor compile in a process (imports, the compile
    # workers, the C++ prefix header) paid here, not by whichever program compiles first
    t0 = time.perf_counter()
    with FreshCache(os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR",
                                          str(common.ROOT / "build" / "inductor"))):
        torch.compile(lambda x: torch.relu(x) + 1, dynamic=False)(torch.randn(8))
    warm_s = time.perf_counter() - t0
    torch._dynamo.reset()
    log(f"warm-up compile {warm_s:.1f} s")
    rows = []
    for s in seqs:
        for m in models_:
            key = f"_bench_compile_b{args.batch}_s{s}_l{args.layers}_{args.size}"
            M.SIZES[key] = (hidden, args.layers, heads, kv, inter, s, args.batch)
            torch._dynamo.reset()
            rows.append((bench_pass if args.inductor_pass else bench_one)(
                m, args.batch, s, args, key))
    env = {"torch": torch.__version__, "transformers": transformers.__version__,
           "threads": torch.get_num_threads(), "platform": platform.platform(),
           "cpus": os.cpu_count(), "loadavg_start": load0,
           "loadavg_end": common.loadavg()[0], "when": common.when(),
           "git": common.git_commit(short=True)}
    res = {"benchmark": "compile", "quick": q,
           "argv": common.display_argv(argv if argv is not None else sys.argv[1:]),
           "size": args.size, "layers": args.layers, "batch": args.batch, "seqs": seqs,
           "dims": {"hidden": hidden, "heads": heads, "kv_heads": kv, "inter": inter},
           "models": models_, "warmup": args.warmup, "repeats": args.repeats,
           "compiled_skip": list(COMPILED_SKIP.get("inductor", ())),
           "warmup_compile_s": round(warm_s, 2),
           "programs": LABELS, "env": env, "rows": rows}
    res["wall_s"] = round(time.perf_counter() - t_start, 1)
    out = common.results_dir(args.out)
    if args.inductor_pass:
        res["benchmark"] = "compile_pass"
        pass_name = args.results_name or common.stem("compile_pass", q)
        common.write_json(out / f"{pass_name}.json", res, indent=1)
        write_pass_markdown(res, out / f"{name}.md")
        log(f"wrote {out / (pass_name + '.json')}, {out / (name + '.md')} ({res['wall_s']} s)")
        return 0
    res["conclusion"] = conclusion(res)
    common.write_json(out / f"{name}.json", res, indent=1)
    write_markdown(res, out / f"{name}.md")
    for line in res["conclusion"]:
        log(line)
    log(f"wrote {out / (name + '.json')}, {out / (name + '.md')} ({res['wall_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
