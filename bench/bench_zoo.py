"""A wide zoo, measured: every model of bench/zoo_models.py (transformers'
encoders, decoders, encoder-decoders, vision transformers, CNNs, speech
encoders, and torch.nn models; small configs, random weights, offline),
exported statically and with dynamic shapes, rewritten by the CLI as a user
would, and reported.

For each model and mode (``static``, ``dynamic``) three steps, each in its
own process with a timeout:

1. **export** (a forked child): build the model, export it with the
   project's loader (``pypm_verified.torch.loader.export_module``:
   ``torch.export.export`` then ``run_decompositions({})``; ``dynamic``
   passes the entry's ``dynamic_shapes``), count its attention blocks,
   save it with ``torch.export.save``. A failure here is the model's or
   torch's and is reported with its message (the loader's one line, which
   quotes torch); a traceback whose innermost frame is in pypm_verified is
   reported as a **crash** of this project instead.
2. **rewrite** (a subprocess): ``python -m pypm_verified rewrite M.pt2 -o
   M.rw.pt2 --report R.json --target cuda -q`` with ``PYPM_TRACEBACK=1``.
   ``--target cuda``: the CUDA profitability table fires the attention rule
   at every size, so the zoo measures what the patterns cover, not this
   CPU's thresholds (sequence >= 512; the zoo's sequences are 16). The exit
   code and the last lines of stderr are kept; the numerics are the CLI's
   own check (example inputs, 2 random input sets, and for a dynamic
   program two other sizes), read from its report.
3. **analyze** (a forked child): load the rewritten program (the original
   when nothing was written), count the blocks left and the SDPA nodes, and
   explain every block left unfused with the project's explain machinery
   (``pypm_verified.explain`` of each pattern of ``library/attention.py``
   at the block's root: the deepest partial match, the sub-pattern and
   alternate that failed, and why); a block the pattern does match was
   declined by its rule, and the reason is the rule's, from the CLI's
   report (``declines``).

**Attention blocks** are counted from the exported graph alone, without the
rules: a block is an ``aten.softmax``/``aten._softmax``/``aten._safe_softmax``
node over the last axis of a rank-3 or rank-4 tensor whose result reaches a
``matmul``/``bmm``/``einsum`` within 4 nodes (through dropout, casts,
views...), plus every ``scaled_dot_product_attention`` (or fused-attention)
node already in the export. **Fused** = the SDPA nodes of the rewritten
program minus those of the original (what the rewrite produced); a block is
left **unfused** when its softmax is still there.

Results are cached per model and mode in build/zoo/results/ (keyed by a hash
of the project's Python sources, the zoo and the torch/transformers
versions), so a run is resumable and a second run only redoes what changed;
``--fresh`` ignores the cache. The jobs (one per model and mode) run on the
executor of ``pypm_verified.parallel``: in this process (default), in
``--jobs N`` local worker processes, or on a Ray cluster (``--ray auto`` or
``--ray ADDRESS``; the repository at the same path on every node, and
PYPM_ZOO_BUILD on storage they share). A record is written atomically, so
two runs at once may redo a job but never leave half of one.

    python bench/bench_zoo.py [--quick] [--only NAME[,NAME]] [--modes static,dynamic]
                              [--jobs N | --ray auto|ADDRESS] [--timeout S] [--fresh]
                              [--list]

Writes bench/results/zoo.md and zoo.json (``--quick``: zoo_quick.*; with
``--only``: nothing, unless ``--results-name`` is given).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import common
from common import RESULTS, ROOT

from pypm_verified.cli.parsing import executor_options  # noqa: E402 -- common: on sys.path
from pypm_verified.parallel import RayUnavailable, executor  # noqa: E402

#: per-job work directories, cached results and locks (PYPM_ZOO_BUILD overrides:
#: the tests use a directory of their own)
BUILD = Path(os.environ.get("PYPM_ZOO_BUILD") or ROOT / "build" / "zoo")
MODES = ("static", "dynamic")
PKG_DIR = str(ROOT / "python" / "pypm_verified")
SOFTMAX = {"aten.softmax.int", "aten._softmax.default", "aten._safe_softmax.default",
           "aten.special_softmax.default"}
SDPA = {"aten.scaled_dot_product_attention.default",
        "aten._scaled_dot_product_flash_attention.default",
        "aten._scaled_dot_product_flash_attention_for_cpu.default",
        "aten._scaled_dot_product_efficient_attention.default",
        "aten._scaled_dot_product_cudnn_attention.default",
        "aten._scaled_dot_product_fused_attention_overrideable.default"}
MATMUL = {"aten.matmul.default", "aten.bmm.default", "aten.einsum.default",
          "aten.mm.default"}
TIMEOUTS = {"export": 300, "rewrite": 420, "analyze": 240}
#: bumped when what a job measures changes (part of the cache key; the report
#: is made from the cached records, so changing it needs no bump)
STEPS_VERSION = 1


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------------ counting

def _target(n) -> str:
    t = n.target
    return str(t) if not callable(t) or not hasattr(t, "name") else f"aten.{t.name()}" \
        if str(t).startswith("aten.") else str(t)


def _tname(n) -> str:
    return str(n.target) if n.op == "call_function" else ""


def _softmax_dim(n) -> Optional[int]:
    a = list(n.args) + [None] * 3
    d = n.kwargs.get("dim", a[1])
    return d if isinstance(d, int) else None


def attention_blocks(graph) -> Tuple[List, List]:
    """``(softmax nodes, SDPA nodes)`` of an FX graph: the attention blocks
    as the module docstring defines them (independent of the rules)."""
    soft, sdpa = [], []
    for n in graph.nodes:
        t = _tname(n)
        if t in SDPA:
            sdpa.append(n)
            continue
        if t not in SOFTMAX:
            continue
        x = n.args[0] if n.args else None
        val = getattr(x, "meta", {}).get("val")
        rank = getattr(val, "ndim", None)
        d = _softmax_dim(n)
        if rank not in (3, 4) or d is None or d % rank != rank - 1:
            continue
        if block_root(n) is not None:
            soft.append(n)
    return soft, sdpa


def block_root(softmax, hops: int = 4):
    """The first matmul/bmm/einsum the softmax's result reaches within
    ``hops`` nodes (breadth first), or None."""
    frontier, seen = [softmax], {softmax}
    for _ in range(hops):
        nxt = []
        for n in frontier:
            for u in n.users:
                if u in seen:
                    continue
                seen.add(u)
                if _tname(u) in MATMUL:
                    return u
                nxt.append(u)
        frontier = nxt
    return None


def count_blocks(ep) -> dict:
    soft, sdpa = attention_blocks(ep.graph)
    return {"softmax_blocks": len(soft), "sdpa": len(sdpa),
            "nodes": sum(1 for n in ep.graph.nodes if n.op == "call_function")}


# ------------------------------------------------------------------ classification

_TB_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)', re.M)
_EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Failure|Interrupt|Exit|"
                       r"Inconsistency|OutOfFuel|Warning)?)(?::\s(.*))?$")


def _in_project(path: str) -> bool:
    p = os.path.abspath(path)
    return p.startswith(PKG_DIR + os.sep) or "/pypm_verified/" in p.replace(os.sep, "/")


def traceback_blocks(text: str) -> List[Tuple[List[str], str]]:
    """The exceptions of a printed traceback chain, in order printed
    (the root cause first): ``(frame files, "Type: message")``."""
    out = []
    for chunk in text.split("Traceback (most recent call last):")[1:]:
        files = [m.group(1) for m in _TB_FRAME.finditer(chunk)]
        lines = [ln for ln in chunk.splitlines() if ln and not ln.startswith(" ")]
        exc = ""
        for ln in lines:
            if _EXC_LINE.match(ln) and not ln.startswith(("The above", "During handling")):
                exc = ln.strip()
                break
        out.append((files, exc))
    return out


_DELIBERATE = ("LoadError", "UsageError", "RuleFailure", "KeyboardInterrupt", "Terminated")


def project_crash(text: str) -> Optional[str]:
    """If the traceback text shows an exception raised inside pypm_verified
    that is not one of its deliberate errors (LoadError, UsageError, ...):
    ``"Type: message (file:line)"``; else None. Only the root cause counts:
    a torch error re-raised as a LoadError is torch's."""
    blocks = traceback_blocks(text)
    if not blocks:
        return None
    files, exc = blocks[0]
    if not files:
        return None
    etype = exc.split(":", 1)[0].rsplit(".", 1)[-1]
    if etype in _DELIBERATE:
        return None
    if _in_project(files[-1]):
        frames = [m for m in _TB_FRAME.finditer(text.split("Traceback (most recent call last):")[1])]
        last = frames[-1]
        rel = os.path.relpath(last.group(1), ROOT) if last.group(1).startswith(str(ROOT)) \
            else last.group(1)
        return f"{exc} ({rel}:{last.group(2)})"
    return None


def classify_cli(rc: Optional[int], stderr: str, timed_out: bool = False) -> dict:
    """What a ``rewrite`` run's exit code and stderr say: ``status`` (ok,
    numerics, load-failed, rule-failed, crash, timeout, interrupted),
    ``crash`` (a crash of this project: an uncaught exception, a rule that
    raised, a signal, or an exception raised in pypm_verified behind an
    error message) and ``message`` (the one-line error)."""
    errs = [ln for ln in stderr.splitlines() if ln.startswith("error: ")]
    msg = errs[-1][len("error: "):] if errs else ""
    crash = project_crash(stderr)
    if timed_out:
        return {"status": "timeout", "crash": False, "message": "timed out"}
    if rc == 0:
        return {"status": "ok", "crash": crash is not None, "message": crash or ""}
    if rc == 1 and "numerics: " in stderr and "Traceback" not in stderr:
        lines = [ln[len("numerics: "):] for ln in stderr.splitlines()
                 if ln.startswith("numerics: ")]
        return {"status": "numerics", "crash": False, "message": lines[0] if lines else msg}
    if rc == 2:
        return {"status": "load-failed", "crash": crash is not None,
                "message": (f"{msg} [raised in pypm_verified: {crash}]" if crash else msg)}
    if rc == 3:
        return {"status": "rule-failed", "crash": True, "message": msg or crash or ""}
    if rc in (130, 143):
        return {"status": "interrupted", "crash": False, "message": msg}
    if rc is not None and rc < 0:
        return {"status": "crash", "crash": True, "message": f"killed by signal {-rc}"}
    blocks = traceback_blocks(stderr)
    last = blocks[-1][1] if blocks else (stderr.strip().splitlines() or [""])[-1]
    return {"status": "crash", "crash": True,
            "message": f"exit {rc}: uncaught {last}" + (f" ({crash})" if crash else "")}


def exception_record(e: BaseException) -> dict:
    """A failure inside the export step: the project's deliberate LoadError
    (torch's reason) or a build error are the model's; any other exception
    whose innermost frame is in pypm_verified is a crash."""
    text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    frames = traceback.extract_tb(e.__traceback__)
    inner = frames[-1].filename if frames else ""
    crash = type(e).__name__ not in _DELIBERATE and _in_project(inner)
    first = (str(e).strip().splitlines() or [""])[0]
    return {"message": f"{type(e).__name__}: {first}"[:800], "crash": crash,
            "where": f"{os.path.relpath(inner, ROOT) if inner.startswith(str(ROOT)) else inner}"
                     f":{frames[-1].lineno}" if frames else "",
            "traceback_tail": text[-2000:]}


# ------------------------------------------------------------------ steps (in children)

def _detail(e: Optional[BaseException], lines: int = 4) -> str:
    """The lines after the first of torch's message (the loader keeps one):
    e.g. which constraint a dynamic dimension violated."""
    if e is None:
        return ""
    text = [ln.strip() for ln in str(e).strip().splitlines()[1:] if ln.strip()]
    text = [ln for ln in text if not ln.startswith(("For more information", "You can suppress",
                                                     "Set TORCH", "from user code"))]
    return " / ".join(text[:lines])[:600]


def step_export(name: str, mode: str, work: Path) -> dict:
    import torch
    import zoo_models
    from pypm_verified.torch.loader import LoadError, export_module
    t0 = time.perf_counter()
    try:
        m, kw, spec = zoo_models.build(name)
    except Exception as e:  # noqa: BLE001 -- the model's constructor
        return {"exported": False, "stage": "build", **exception_record(e)}
    try:
        ep = export_module(m, (), kw, dynamic_shapes=spec if mode == "dynamic" else None)
    except LoadError as e:
        return {"exported": False, "stage": "export", "message": str(e)[:800], "crash": False,
                "detail": _detail(e.__cause__)}
    except Exception as e:  # noqa: BLE001
        return {"exported": False, "stage": "export", **exception_record(e)}
    t_export = time.perf_counter() - t0
    counts = count_blocks(ep)
    dyn = bool(ep.range_constraints) if mode == "dynamic" else False
    try:
        torch.export.save(ep, str(work / "model.pt2"))
    except Exception as e:  # noqa: BLE001 -- torch's serializer
        return {"exported": True, "saved": False, "stage": "save", **exception_record(e),
                "export_s": t_export, **counts}
    return {"exported": True, "saved": True, "export_s": t_export, "symbolic": dyn, **counts}


def _attention_patterns():
    import importlib
    from pypm_verified.library import _patterns_of
    return _patterns_of(importlib.import_module("pypm_verified.library.attention"))


def _norm_reason(s: str) -> str:
    """A reason without what differs from block to block (node names and
    ids, shapes, counts), to group by: ``found where_3 = WhereScalarOther :
    f32[2, 1, 8, 16]`` -> ``found WhereScalarOther``."""
    s = re.sub(r"\b[\w.]+ = (\w+)", r"\1", s)           # "name = Op" -> "Op"
    s = re.sub(r"\s*:\s*\w+\[[^\]]*\]", "", s)          # " : f32[2, 4, 16, 16]"
    s = re.sub(r"%\d+", "%N", s)
    s = re.sub(r"\b([A-Za-z_]+?)_\d+\b", r"\1_N", s)
    s = re.sub(r"\(\d+ of \d+[^)]*\)", "", s)
    s = re.sub(r"saw \d+", "saw N", s)
    return s.strip()


def step_analyze(name: str, mode: str, work: Path, report: Optional[dict]) -> dict:
    import pypm_verified as pm
    from pypm_verified.engines.explain import node_desc
    from pypm_verified.torch.importer import TermGraph
    from pypm_verified.torch.loader import load_rewritten
    rewritten = work / "model.rw.pt2"
    src = rewritten if rewritten.exists() else work / "model.pt2"
    ep = load_rewritten(str(src))
    soft, sdpa = attention_blocks(ep.graph)
    out = {"analyzed": src.name, "softmax_left": len(soft), "sdpa_after": len(sdpa)}
    if not soft:
        out["unfused"] = []
        return out
    gm = ep.graph_module
    dynamic = bool(ep.range_constraints)
    tg = TermGraph(gm.graph, size_hints=dynamic).build()
    pats = _attention_patterns()
    declines = (report or {}).get("declines", {})

    def describe(n) -> str:
        fx = tg.fx_of.get(n.id)
        return node_desc(n) if fx is None else \
            f"{fx.name} = {node_desc(n)[len(str(n.id)) + 2:]}"

    unfused = []
    for s in soft:
        root = block_root(s)
        item = {"softmax": s.name, "root": root.name, "root_op": _tname(root)}
        node = tg.term.get(root)
        if node is None:
            item.update(kind="import", reason="the block's root is not in the term graph",
                        key="root not imported")
            unfused.append(item)
            continue
        best = None
        for p in pats:
            try:
                e = pm.explain(p, node, describe=describe)
            except Exception as ex:  # noqa: BLE001 -- recorded as what it is
                item.update(kind="explain-error", crash=True,
                            reason=f"explain raised {type(ex).__name__}: {ex}"[:400],
                            key=f"explain raised {type(ex).__name__}")
                best = None
                break
            if e.matched:
                best = e
                break
            if best is None or e.depth > best.depth:
                best = e
        if best is None:
            unfused.append(item)
            continue
        if best.matched:
            why = []
            for rule_reasons in declines.get(best.pattern_name, {}).values():
                why.extend(sorted(rule_reasons, key=lambda r: -rule_reasons[r]))
            reason = why[0] if why else "matched, but no rule fired and the report gives no reason"
            item.update(pattern=best.pattern_name, kind="declined",
                        reason=f"{best.pattern_name} matches; its rule declined: {reason}",
                        key=f"{best.pattern_name}: rule declined: {_norm_reason(reason)}")
        else:
            where = (f"{best.definition}" + (f"[alt {best.alternate}]"
                                             if best.alternate is not None else "")
                     if best.definition else best.pattern_name)
            item.update(pattern=best.pattern_name, kind=best.kind, depth=best.depth,
                        definition=best.definition, alternate=best.alternate,
                        line=best.line, at=describe(best.at) if best.at is not None else None,
                        reason=f"{best.pattern_name}: failed in {where} after {best.depth} "
                               f"step(s): [{best.kind}] {best.message}",
                        key=f"{best.pattern_name}: {where}: [{best.kind}] "
                            f"{_norm_reason(best.message)}")
        unfused.append(item)
    out["unfused"] = unfused
    return out


def _child(fn, args, out_path: str) -> None:
    """Run in a forked child: fn(*args) -> JSON at out_path; an uncaught
    exception is recorded as one (with its traceback)."""
    try:
        res = fn(*args)
    except BaseException as e:  # noqa: BLE001
        res = {"child_error": True, **exception_record(e)}
    tmp = out_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(res, f, indent=1, default=str)
    os.replace(tmp, out_path)


def run_child(fn, args, out_path: Path, timeout: float) -> dict:
    """``fn(*args)`` in a forked child with a timeout; its JSON result, or a
    record of how it died."""
    import multiprocessing as mp
    if out_path.exists():
        out_path.unlink()
    ctx = mp.get_context("fork")
    p = ctx.Process(target=_child, args=(fn, args, str(out_path)))
    t0 = time.perf_counter()
    p.start()
    p.join(timeout)
    if p.is_alive():
        p.kill()
        p.join()
        return {"timeout": True, "seconds": time.perf_counter() - t0,
                "message": f"timed out after {timeout:.0f} s"}
    if not out_path.exists():
        return {"died": True, "exitcode": p.exitcode, "crash": True,
                "message": f"the process died (exit code {p.exitcode})"}
    res = json.loads(out_path.read_text())
    res["seconds"] = time.perf_counter() - t0
    return res


def _shown(arg: str) -> str:
    """A path of the command line as the results show it: relative to the
    repository, or to ``$PYPM_ZOO_BUILD`` when the build directory is
    elsewhere (no directory of the machine the run was on)."""
    if not os.path.isabs(arg):
        return arg
    for base, name in ((ROOT, None), (BUILD, "$PYPM_ZOO_BUILD")):
        rel = os.path.relpath(arg, base)
        if rel != os.pardir and not rel.startswith(os.pardir + os.sep):
            return rel if name is None else f"{name}/{rel}"
    return common.display_path(arg)


def run_cli(work: Path, timeout: float) -> dict:
    cmd = [sys.executable, "-m", "pypm_verified", "rewrite", str(work / "model.pt2"),
           "-o", str(work / "model.rw.pt2"), "--report", str(work / "report.json"),
           "--target", "cuda", "-q"]
    env = dict(os.environ, PYPM_TRACEBACK="1",
               PYTHONPATH=os.pathsep.join([str(ROOT / "python")]
                                          + [p for p in os.environ.get("PYTHONPATH", "")
                                             .split(os.pathsep) if p]))
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(ROOT / "build" / "inductor"))
    for f in ("model.rw.pt2", "report.json"):
        if (work / f).exists():
            (work / f).unlink()
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, cwd=str(ROOT), env=env, text=True, capture_output=True,
                           timeout=timeout)
        rc, err, out, to = p.returncode, p.stderr, p.stdout, False
    except subprocess.TimeoutExpired as e:
        rc, to = None, True
        err = (e.stderr or b"").decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        out = ""
    wall = time.perf_counter() - t0
    cls = classify_cli(rc, err, to)
    rep = None
    if (work / "report.json").exists():
        try:
            rep = json.loads((work / "report.json").read_text())
        except ValueError:
            rep = None
    (work / "cli.stderr").write_text(err)
    (work / "cli.stdout").write_text(out)
    tail = [ln for ln in err.splitlines() if ln.strip()][-6:]
    return {"cmd": " ".join(_shown(c) for c in cmd[1:]),
            "exit": rc, "wall_s": wall, **cls, "stderr_tail": tail,
            "written": (work / "model.rw.pt2").exists(), "report": rep}


# ------------------------------------------------------------------ one job

def cache_key() -> str:
    h = hashlib.sha256()
    files = sorted(Path(PKG_DIR).rglob("*.py")) + sorted(Path(PKG_DIR).rglob("*.json")) + [
        common.HERE / "zoo_models.py"]
    h.update(f"steps {STEPS_VERSION}".encode())
    for f in files:
        h.update(str(f.relative_to(ROOT)).encode())
        h.update(f.read_bytes())
    try:
        import torch
        import transformers
        h.update(f"{torch.__version__} {transformers.__version__}".encode())
    except ImportError:
        pass
    return h.hexdigest()[:16]


def _summ_report(rep: Optional[dict]) -> dict:
    if not rep:
        return {}
    keep = ("firings", "matches", "iterations", "nodes_before", "nodes_after", "match_s",
            "total_s", "numerics", "dynamic_sizes_checked", "timings_s", "fired", "declines")
    return {k: rep.get(k) for k in keep}


def run_job(name: str, mode: str, key: str, timeouts: Dict[str, float]) -> dict:
    import zoo_models
    work = BUILD / "work" / f"{name}.{mode}"
    work.mkdir(parents=True, exist_ok=True)
    rec = {"model": name, "mode": mode, "family": zoo_models.ZOO[name].family, "key": key,
           "when": common.when()}
    t0 = time.perf_counter()
    ex = run_child(step_export, (name, mode, work), work / "export.json",
                   timeouts["export"])
    rec["export"] = ex
    if ex.get("exported") and ex.get("saved"):
        cli = run_cli(work, timeouts["rewrite"])
        rep = cli.pop("report")
        rec["rewrite"] = {**cli, "report": _summ_report(rep)}
        if not cli["written"] and not ex.get("softmax_blocks"):
            # nothing to explain, and the program is the one exported: skip a load
            an = {"skipped": "no softmax block and no rewritten program",
                  "softmax_left": 0, "sdpa_after": ex.get("sdpa") or 0, "unfused": []}
        else:
            an = run_child(step_analyze, (name, mode, work, rep), work / "analyze.json",
                           timeouts["analyze"])
        rec["analysis"] = an
    rec["seconds"] = time.perf_counter() - t0
    rec.update(summarize(rec))
    return rec


def summarize(rec: dict) -> dict:
    """The report's fields of one job."""
    ex = rec.get("export", {})
    rw = rec.get("rewrite") or {}
    an = rec.get("analysis") or {}
    rep = rw.get("report") or {}
    crash = bool(ex.get("crash") or rw.get("crash") or an.get("crash")
                 or an.get("child_error") and an.get("crash")
                 or any(u.get("crash") for u in an.get("unfused", [])))
    before = (ex.get("softmax_blocks") or 0) + (ex.get("sdpa") or 0)
    fused = None
    if "sdpa_after" in an and rw.get("written"):
        fused = an["sdpa_after"] - (ex.get("sdpa") or 0)
    elif "sdpa_after" in an:
        fused = 0
    num = rep.get("numerics")
    if rw.get("status") == "ok" and not num:
        numerics = "not checked (no rule fired)" if not rep.get("fired") else "not checked"
    elif num:
        numerics = (f"ok (max abs {num['max_abs']:.2g}, {num['runs']} runs"
                    + (f", {len(rep.get('dynamic_sizes_checked') or [])} other sizes"
                       if rep.get("dynamic_sizes_checked") else "") + ")") \
            if num.get("ok") else f"MISMATCH (max abs {num['max_abs']:.2g})"
    else:
        numerics = ""
    if ex.get("timeout"):
        exported = "timeout"
    elif not ex.get("exported"):
        exported = "crash" if ex.get("crash") else "no"
    elif not ex.get("saved", True):
        exported = "not saved"
    else:
        exported = "yes"
    return {"exported": exported, "crash": crash, "blocks_before": before,
            "fused": fused, "unfused_count": len(an.get("unfused") or []),
            "rewritten": rw.get("status"), "fired": rep.get("firings") or {},
            "numerics": numerics,
            "rewrite_s": (rep.get("timings_s") or {}).get("rewrite"),
            "failure": (ex.get("message") if not ex.get("exported") or not ex.get("saved", True)
                        else (rw.get("message") if rw.get("status") not in ("ok", None)
                              else None))}


def result_path(name: str, mode: str) -> Path:
    return BUILD / "results" / f"{name}.{mode}.json"


def cached(name: str, mode: str, key: Optional[str]) -> Optional[dict]:
    """The cached record of a job measured with cache key ``key`` (any key
    when None), or None."""
    p = result_path(name, mode)
    if not p.exists():
        return None
    try:
        rec = json.loads(p.read_text())
    except ValueError:
        return None
    return rec if key is None or rec.get("key") == key else None


def do_job(name: str, mode: str, key: str, timeouts, fresh: bool) -> dict:
    """The job's record: from the cache, or run and cached."""
    if not fresh:
        rec = cached(name, mode, key)
        if rec is not None:
            return rec
    rec = run_job(name, mode, key, timeouts)
    p = result_path(name, mode)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(rec, indent=1, default=str) + "\n")
    os.replace(tmp, p)
    return rec


def zoo_task(name: str, mode: str, key: str, timeouts, fresh: bool, build: str) -> bool:
    """One task of the executor: the job ``name``/``mode`` (:func:`do_job`)
    in a worker whose steps fork from it; ``build``: this run's BUILD (a
    worker elsewhere may not have its PYPM_ZOO_BUILD). False when the job
    itself failed (the report then says it was not run)."""
    global BUILD
    BUILD = Path(build)
    import torch  # noqa: F401 -- imported once per worker, before the forks
    import transformers  # noqa: F401
    import pypm_verified.torch.loader  # noqa: F401
    import zoo_models  # noqa: F401
    t = time.perf_counter()
    try:
        rec = do_job(name, mode, key, timeouts, fresh)
    except Exception:  # noqa: BLE001 -- one job's bug must not end the run
        log(f"[zoo] {name} {mode}: the job failed:\n{traceback.format_exc()}")
        return False
    log(f"[zoo] {name:24s} {mode:7s} exported={rec['exported']:4s} "
        f"rewrite={rec.get('rewritten')} blocks {rec['blocks_before']} -> fused "
        f"{rec['fused']} numerics={rec['numerics'][:20]!r}"
        f"{' CRASH' if rec['crash'] else ''} ({time.perf_counter() - t:.0f} s)")
    return True


# ------------------------------------------------------------------ the report

def _cell(s) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def _short(s: Optional[str], n: int = 160) -> str:
    s = s or ""
    return s if len(s) <= n else s[:n - 1] + "…"


def _paths(line: str) -> str:
    """Paths in a report line relative to the checkout (and site-packages)."""
    line = line.replace(str(ROOT) + os.sep, "")
    return re.sub(r"/\S*?/site-packages/", "site-packages/", line)


def markdown(recs: List[dict], meta: dict) -> List[str]:
    import zoo_models
    L = [f"# The zoo: {meta['models']} architectures, static and dynamic", "",
         f"`python bench/bench_zoo.py{' --quick' if meta['quick'] else ''}` "
         f"({meta['when']}, commit {meta['commit']}{' + changes' if meta['dirty'] else ''}, "
         f"torch {meta['torch']}, transformers {meta['transformers']}; "
         f"{meta['wall_s'] / 60:.0f} min of jobs on {meta['machine']}, load "
         f"{[round(x, 1) for x in meta['load'] or []]}; cache keys "
         f"{', '.join(meta['cache_keys'])}). "
         "How each column is measured: the docstring of bench/bench_zoo.py and "
         "docs/benchmarks.md (section \"The zoo\").", ""] + ([meta["note"], ""] if meta.get("note") else [])
    by_mode = {m: [r for r in recs if r["mode"] == m] for m in MODES}
    L += ["## Summary", "", "| | static | dynamic |", "|---|---|---|"]

    def tot(rs, f):
        return sum(f(r) for r in rs)
    rows = [
        ("models", lambda rs: len(rs)),
        ("exported", lambda rs: tot(rs, lambda r: r["exported"] == "yes")),
        ("export failed (the model's or torch's)",
         lambda rs: tot(rs, lambda r: r["exported"] in ("no", "not saved"))),
        ("timed out (export or rewrite)",
         lambda rs: tot(rs, lambda r: r["exported"] == "timeout"
                        or r["rewritten"] == "timeout")),
        ("not run (the run was stopped first)",
         lambda rs: tot(rs, lambda r: r["exported"] == "not run")),
        ("rewritten by the CLI (exit 0)", lambda rs: tot(rs, lambda r: r["rewritten"] == "ok")),
        ("numerics mismatch (exit 1)", lambda rs: tot(rs, lambda r: r["rewritten"] == "numerics")),
        ("crashes of this project", lambda rs: tot(rs, lambda r: r["crash"])),
        ("attention blocks before", lambda rs: tot(rs, lambda r: r["blocks_before"])),
        ("of which SDPA already in the export",
         lambda rs: tot(rs, lambda r: (r.get("export") or {}).get("sdpa") or 0)),
        ("fused (SDPA produced)", lambda rs: tot(rs, lambda r: r["fused"] or 0)),
        ("left unfused", lambda rs: tot(rs, lambda r: r["unfused_count"])),
        ("models with attention blocks", lambda rs: tot(rs, lambda r: r["blocks_before"] > 0)),
        ("models with every block fused (or already SDPA)",
         lambda rs: tot(rs, lambda r: r["blocks_before"] > 0 and r["unfused_count"] == 0
                        and r["exported"] == "yes" and r["rewritten"] == "ok")),
    ]
    for label, f in rows:
        L.append(f"| {label} | {f(by_mode['static'])} | {f(by_mode['dynamic'])} |")
    L.append("")
    for mode in MODES:
        rs = by_mode[mode]
        if not rs:
            continue
        L += [f"## {mode.capitalize()} export", "",
              "| model | family | exported? | rewritten? | attention blocks before → fused "
              "| rules fired | numerics | rewrite s |",
              "|---|---|---|---|---|---|---|---|"]
        for r in rs:
            fired = ", ".join(f"{k} {v}" for k, v in sorted(r["fired"].items())) or "—"
            pre = (r.get("export") or {}).get("sdpa") or 0
            b = f"{r['blocks_before']}" + (f" ({pre} SDPA already)" if pre else "")
            bf = (f"{b} → {r['fused']}" if r["fused"] is not None
                  else f"{b} → —") if r["exported"] == "yes" else "—"
            if r["unfused_count"]:
                bf += f" ({r['unfused_count']} unfused)"
            rw = r["rewritten"] or "—"
            if r["crash"]:
                rw = f"**CRASH** ({rw})"
            t = f"{r['rewrite_s']:.2f}" if r.get("rewrite_s") is not None else "—"
            L.append(f"| {r['model']} | {r['family']} | {r['exported']} | {rw} | {bf} | "
                     f"{_cell(fired)} | {_cell(r['numerics'] or '—')} | {t} |")
        L.append("")
    # reasons
    groups: Dict[str, Dict] = {}
    for r in recs:
        for u in (r.get("analysis") or {}).get("unfused", []):
            g = groups.setdefault(_norm_reason(u.get("reason") or u.get("key") or "?"),
                                  {"n": 0, "models": set(), "example": u})
            g["n"] += 1
            g["models"].add(f"{r['model']} ({r['mode'][0]})")
    L += ["## Why blocks were left unfused", "",
          "Every block left unfused, grouped by the reason the explain machinery gives at "
          "its root (the deepest partial match of the attention patterns: pattern, "
          "sub-pattern[alternate], [kind] and message; or the rule's own reason where the "
          "pattern matched). (s) static, (d) dynamic.", ""]
    if not groups:
        L.append("(none)")
    for k, g in sorted(groups.items(), key=lambda kv: -kv[1]["n"]):
        u = g["example"]
        L.append(f"* **{g['n']} block(s)**: {_cell(_short(u.get('reason'), 400))}"
                 + (f" — at `{_cell(_short(u.get('at'), 120))}`" if u.get("at") else "")
                 + (f" ({u['line']})" if u.get("line") else ""))
        L.append(f"  models: {', '.join(sorted(g['models']))}")
    L.append("")
    L += ["## Failures", "", "Export failures are the model's or torch's (the loader's "
          "one line, quoting torch); a crash is an exception raised in pypm_verified, a rule "
          "that raised, or a process that died.", ""]
    fails = [r for r in recs if (r.get("failure") or r["crash"])
             and r["exported"] != "not run"]
    if not fails:
        L.append("(none)")
    for r in fails:
        what = "CRASH" if r["crash"] else ("export" if r["exported"] != "yes" else
                                           r["rewritten"])
        msg = r.get("failure") or ""
        if r["crash"]:
            an = r.get("analysis") or {}
            ex = r.get("export") or {}
            msg = msg or ex.get("message") or an.get("message") or ""
            where = ex.get("where") or an.get("where")
            if where:
                msg += f" (at {where})"
        detail = (r.get("export") or {}).get("detail")
        L.append(f"* {r['model']} ({r['mode']}), {what}: {_cell(_short(msg, 600))}"
                 + (f" — {_cell(_short(detail, 400))}" if detail else ""))
    L.append("")
    not_run = [f"{r['model']} ({r['mode'][0]})" for r in recs if r["exported"] == "not run"]
    if not_run:
        L += [f"**Not run** ({len(not_run)} jobs; the run was stopped before them, "
              "`python bench/bench_zoo.py` resumes it from the cache): "
              + ", ".join(not_run), ""]
    fam = {}
    for n, e in zoo_models.ZOO.items():
        fam.setdefault(e.family, []).append(n)
    L += ["## The zoo", ""] + [f"* {f}: {', '.join(ns)}" for f, ns in fam.items()] + [""]
    return L


# ------------------------------------------------------------------ main

def interleaved(zoo) -> List[str]:
    """The zoo's names one family after the other, round robin (the first
    encoder, the first decoder, ...): an interrupted run has some of each."""
    import zoo_models
    fams: Dict[str, List[str]] = {}
    for n, e in zoo.items():
        fams.setdefault(e.family, []).append(n)
    for ns in fams.values():  # near-duplicates last
        ns.sort(key=lambda n: n in zoo_models.LATE)
    out, i = [], 0
    while len(out) < len(zoo):
        for ns in fams.values():
            if i < len(ns):
                out.append(ns[i])
        i += 1
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="6 models (zoo_models.QUICK)")
    ap.add_argument("--only", action="append", metavar="NAME[,NAME]",
                    help="these models only (repeatable)")
    ap.add_argument("--modes", default="static,dynamic")
    executor_options(ap, "jobs (a model in a mode each)")
    ap.add_argument("--timeout", type=float, default=1.0, metavar="SCALE",
                    help="scale the per-step timeouts (export 300 s, rewrite 420 s, "
                    "analyze 240 s)")
    ap.add_argument("--fresh", action="store_true", help="ignore cached results")
    ap.add_argument("--list", action="store_true", help="list the models and exit")
    ap.add_argument("--report-only", action="store_true",
                    help="run nothing: write the report from the cached records, whatever "
                    "sources they were measured with (their cache keys are listed)")
    ap.add_argument("--results-name", default=None,
                    help="results file stem (default zoo, zoo_quick; none with --only)")
    ap.add_argument("--out", default=None, help="results directory (default bench/results)")
    ap.add_argument("--note", default=None, help="a paragraph for the report's header")
    a = ap.parse_args(argv)
    import zoo_models
    if a.list:
        return zoo_models.main(["--list"])
    timeouts = {k: v * a.timeout for k, v in TIMEOUTS.items()}
    names = interleaved(zoo_models.ZOO)
    if a.quick:
        names = list(zoo_models.QUICK)
    if a.only:
        want = [n for spec in a.only for n in spec.split(",") if n]
        bad = [n for n in want if n not in zoo_models.ZOO]
        if bad:
            ap.error(f"--only: unknown model(s) {', '.join(bad)}; see --list")
        names = want
    modes = [m for m in a.modes.split(",") if m]
    if any(m not in MODES for m in modes):
        ap.error(f"--modes: expected some of {', '.join(MODES)}")
    key = cache_key()
    # every model's first mode before any model's second: a run stopped early
    # covers as many architectures as it can
    jobs = [(n, m) for m in modes for n in names]
    if a.report_only:
        key = None
        a.fresh = False
    if a.fresh:  # forget these jobs' results
        for j in jobs:
            if result_path(*j).exists():
                result_path(*j).unlink()
    todo = [] if a.report_only else [j for j in jobs if cached(*j, key) is None]
    try:
        ex = executor(jobs=a.jobs, ray=a.ray, sys_path=[str(common.HERE), str(ROOT / "python")])
    except RayUnavailable as e:
        ap.error(f"--ray: {e}")
    how = ex.describe()
    log(f"[zoo] {len(jobs)} jobs ({len(names)} models x {len(modes)} modes), "
        f"{len(jobs) - len(todo)} cached, {len(todo)} to run ({how['kind']}, "
        f"{how['workers']} worker(s)); cache key {key or '(any: --report-only)'}")
    t0 = time.perf_counter()
    with ex:
        ex.run(zoo_task, [(n, m, key, timeouts, False, str(BUILD)) for n, m in todo],
               labels=[f"{n} {m}" for n, m in todo], what="zoo")
    recs = []
    for n, m in jobs:
        rec = cached(n, m, key)
        if rec is None:
            log(f"[zoo] {n} {m}: no result (the job failed or was not run)")
            rec = {"model": n, "mode": m, "family": zoo_models.ZOO[n].family,
                   "exported": "not run", "crash": False, "blocks_before": 0, "fused": None,
                   "unfused_count": 0, "rewritten": None, "fired": {}, "numerics": "",
                   "rewrite_s": None, "failure": "no result: the job did not finish in this "
                   "run (interrupted, or it failed: see the log)"}
        recs.append(rec)
    wall = time.perf_counter() - t0
    if a.only and not a.results_name:
        for r in recs:
            print(json.dumps({k: r[k] for k in ("model", "mode", "exported", "rewritten",
                                                "blocks_before", "fused", "unfused_count",
                                                "fired", "numerics", "crash", "failure")}))
        return 0
    import torch
    import transformers
    meta = {"models": len(names), "quick": a.quick, "when": common.when(),
            "commit": common.git_commit(short=True), "dirty": common.git_dirty(),
            "torch": torch.__version__, "transformers": transformers.__version__,
            "wall_s": sum(r.get("seconds", 0) for r in recs), "machine": common.machine(),
            "load": common.loadavg(), "jobs": how["workers"], "executor": ex.describe(),
            "cache_keys": sorted({r.get("key") for r in recs if r.get("key")}),
            "run_wall_s": wall, "note": a.note}
    stem = a.results_name or common.stem("zoo", a.quick)
    out = common.results_dir(a.out)
    common.write_json(out / f"{stem}.json", {"meta": meta, "results": recs})
    lines = common.write_md(out / f"{stem}.md", [_paths(ln) for ln in markdown(recs, meta)])
    print("\n".join(lines[:40]))
    log(f"[zoo] wrote {out / stem}.md and .json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
