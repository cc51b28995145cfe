"""A cost model for FX graphs: predicted eager latency
from shapes and dtypes, corrected by the kernel measurements behind the
profitability table.

**Per node** (a ``call_function`` whose ``meta["val"]`` is known): FLOPs
by the op's FLOP class in the op registry (:mod:`.registry`,
``COST_CLASSES``: matrix products ``2·M·N·K``, batched as the shapes say;
SDPA ``4·B·H·S·S'·D`` plus its softmax; every other op one per output
element, five for transcendental ones) and bytes moved (every tensor argument read once, the
output written once, at its dtype's size). Its time is the roofline bound
``max(flops / peak_flops, bytes / bandwidth)`` plus a fixed per-kernel
overhead (eager dispatch and launch), with the target's constants in
:data:`MACHINES` or, better, measured on the machine by :func:`calibrate`
(a GEMM's FLOP rate, an add's bandwidth, a one-element add's overhead,
what an ``exp`` element costs; ``CostModel(target, machine=calibrate())``,
what ``bench/bench_search.py`` and ``rewrite --search`` use). Views, ``getitem``, ``sym_size`` and metadata asserts
cost nothing (no kernel runs).

**Measured profiles.** For a fused kernel the rule library emits
(``scaled_dot_product_attention``, ``gelu``, ``rms_norm``,
``pypm.linear_act``) the roofline is not what was measured: the model takes
the cost, under this same model, of the subgraph the kernel replaces
(:func:`unfused_cost`: e.g. ``linear`` then the activation; attention's
two matrix products, scale, mask, softmax) and divides it by the speedup
``bench/bench_kernels.py`` measured for that kernel, variant and dtype at
the nearest measured sizes (``bench/results/kernels_1thread.json``, the
file the CPU profitability table was built from). So a fusion measured
slower than its subgraph at that size (``linear_act`` with ReLU below 512
tokens on this CPU) costs more than the subgraph, and one measured faster
costs less. Where no measurement exists (another target or dtype, a file
missing) the roofline of the fused node is used.

**Whole graph**: the sum over its call nodes (:func:`graph_cost`); eager
PyTorch runs one kernel at a time, so the sum is the latency model.
:func:`node_cost` is per node. The ranking this gives is checked against
measured latency in ``bench/results/search.md`` (Spearman's rank
correlation over the example models and their rewritten variants).
"""
from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path
from typing import Dict, Optional

import torch
import torch.fx as fx

from . import registry

aten = torch.ops.aten

# peak FLOP/s, bytes/s, per-kernel overhead (s): modest single-thread CPU
# figures (the measurements were taken with 1 thread), an H100 for cuda
MACHINES = {
    "cpu": {"flops": 5.0e10, "bandwidth": 1.0e10, "overhead": 4.0e-6, "transcendental": 5.0},
    "cuda": {"flops": 4.0e14, "bandwidth": 2.0e12, "overhead": 6.0e-6, "transcendental": 5.0},
}
PROFILE = Path(__file__).resolve().parents[3] / "bench" / "results" / "kernels_1thread.json"

# each op's FLOP class is the op registry's (torch/registry.py: the DSL's
# ops, and the other ops the model prices); an op neither has is elementwise
_FREE = registry.packets("free")
_TRANSCENDENTAL = registry.packets("transcendental")


def _name(target) -> str:
    if target is getattr(__import__("operator"), "getitem"):
        return "getitem"
    name = getattr(target, "__name__", str(target))
    return name.split(".")[0]


def _numel(shape) -> int:
    n = 1
    for d in shape:
        try:
            n *= int(d)
        except (TypeError, ValueError):
            return 0
    return n


def _bytes(t) -> int:
    if not isinstance(t, torch.Tensor):
        return 0
    return _numel(t.shape) * t.element_size()


def _roof(flops: float, nbytes: float, machine: dict) -> float:
    return max(flops / machine["flops"], nbytes / machine["bandwidth"]) + machine["overhead"]


def _val(a):
    return a.meta.get("val") if isinstance(a, fx.Node) else None


def _mm_flops(x, w) -> float:
    """2·(x's elements)·(w's last dim) for x @ w."""
    return 2.0 * _numel(x.shape) * int(w.shape[-1]) if x.dim() and w.dim() else 0.0


def roofline(node: fx.Node, machine: dict) -> float:
    """The roofline time of ``node`` (no measured correction)."""
    name = _name(node.target)
    cls = registry.cost_class(name)
    if cls == "free":
        return 0.0
    out = node.meta.get("val")
    ins = [v for v in (_val(a) for a in node.all_input_nodes) if isinstance(v, torch.Tensor)]
    nbytes = sum(_bytes(v) for v in ins) + (
        sum(_bytes(o) for o in out) if isinstance(out, (tuple, list)) else _bytes(out))
    n_out = _numel(out.shape) if isinstance(out, torch.Tensor) else 0
    flops = float(n_out) * (machine.get("transcendental", 5.0) if cls == "transcendental"
                            else 1.0)
    if cls == "matmul" and len(ins) >= 2:
        flops = 2.0 * n_out * int(ins[0].shape[-1])
    elif cls == "linear" and len(ins) >= 2:
        x = ins[1] if name in ("addmm", "baddbmm") else ins[0]  # addmm(bias, x, w)
        flops = 2.0 * n_out * int(x.shape[-1])
    elif cls == "attention" and len(ins) >= 3:
        q, k = ins[0], ins[1]
        s_q, s_k, d = int(q.shape[-2]), int(k.shape[-2]), int(q.shape[-1])
        batch = _numel(q.shape[:-2])
        flops = 4.0 * batch * s_q * s_k * d + 5.0 * batch * s_q * s_k
    return _roof(flops, nbytes, machine)


# ------------------------------------------------------- measured profiles

@lru_cache(maxsize=4)
def _profile(path: str):
    try:
        rows = json.loads(Path(path).read_text())["rows"]
    except (OSError, ValueError, KeyError):
        return {}
    table: Dict[tuple, list] = {}
    for r in rows:
        if r.get("ratio"):
            table.setdefault((r["rule"], r["variant"], r["dtype"]), []).append(
                (r["sizes"], r["ratio"]))
    return table


def measured_ratio(rule: str, variant: str, dtype: torch.dtype, sizes: Dict[str, int],
                   path: Optional[Path] = None) -> Optional[float]:
    """The measured speedup (unfused / fused) of ``rule``'s kernel at the
    measured row nearest ``sizes`` (e.g. ``{"tokens": 4, "in": 256, "out":
    1024}``): the least sum of ``|log(measured / wanted)|`` over the size
    names both have; None when not measured."""
    rows = _profile(str(path or PROFILE)).get((rule, variant, str(dtype).replace("torch.", "")))
    if not rows or not sizes or any(not isinstance(v, int) or v <= 0 for v in sizes.values()):
        return None

    def dist(row_sizes):
        return sum(abs(math.log(max(int(row_sizes[k]), 1)) - math.log(v))
                   for k, v in sizes.items() if k in row_sizes)

    return min(rows, key=lambda r: dist(r[0]))[1]


def unfused_cost(node: fx.Node, machine: dict) -> Optional[tuple]:
    """``(cost, rule, variant, sizes)``: the modelled cost of the
    subgraph a fused kernel replaces, and where to look its measurement up;
    None for other nodes."""
    name = _name(node.target)
    out = node.meta.get("val")
    if not isinstance(out, torch.Tensor):
        return None
    n, e = _numel(out.shape), out.element_size()
    pw = _roof(n, 2 * n * e, machine)            # one pointwise kernel over the output
    pw2 = _roof(n, 3 * n * e, machine)           # a binary one
    tr = machine.get("transcendental", 5.0)
    tpw = _roof(tr * n, 2 * n * e, machine)      # a transcendental one (exp, erf, tanh, ...)
    ins = [v for v in (_val(a) for a in node.all_input_nodes) if isinstance(v, torch.Tensor)]
    if name == "linear_act" and len(ins) >= 2:
        act = node.args[3] if len(node.args) > 3 else node.kwargs.get("act", "relu")
        x, w = ins[0], ins[1]
        lin = _roof(2.0 * n * int(x.shape[-1]),
                    _bytes(x) + _bytes(w) + (_bytes(ins[2]) if len(ins) > 2 else 0) + n * e,
                    machine)
        tokens = _numel(x.shape[:-1])
        return lin + (pw if act == "relu" else tpw), "linear_act", str(act), {
            "tokens": tokens, "in": int(x.shape[-1]), "out": int(w.shape[0])}
    if name == "gelu":
        approx = node.kwargs.get("approximate", node.args[1] if len(node.args) > 1 else "none")
        if approx == "tanh":
            # x^3, tanh; *c, +x, *c, +1, *0.5, *x
            return 2 * tpw + 3 * pw + 3 * pw2, "gelu", "tanh", {"numel": n}
        # erf; x/sqrt2, +1, *0.5, *x
        return tpw + 2 * pw + 2 * pw2, "gelu", "erf", {"numel": n}
    if name == "rms_norm" and ins:
        rows = _numel(out.shape[:-1])
        red = _roof(n, n * e + rows * e, machine)
        small = _roof(rows, 2 * rows * e, machine)
        # x^2, mean, +eps, rsqrt, x*r, w*y
        return tpw + red + 2 * small + 2 * pw2, "rms_norm", "default", {"numel": n}
    if name == "scaled_dot_product_attention" and len(ins) >= 3:
        q, k, v = ins[:3]
        batch = _numel(q.shape[:-2])
        s_q, s_k, d = int(q.shape[-2]), int(k.shape[-2]), int(q.shape[-1])
        sc = batch * s_q * s_k
        qk = _roof(2.0 * sc * d, _bytes(q) + _bytes(k) + sc * e, machine)
        av = _roof(2.0 * sc * d, sc * e + _bytes(v) + n * e, machine)
        scale = _roof(sc, 2 * sc * e, machine)
        soft = _roof(tr * sc, 2 * sc * e, machine)
        has_mask = len(ins) >= 4
        causal = bool(node.kwargs.get("is_causal", False))
        mask = _roof(sc, 3 * sc * e, machine) if has_mask else 0.0
        return (qk + scale + mask + soft + av, "attention",
                "causal" if causal else "mask",
                {"seq": s_q, "batch": int(q.shape[0]) if q.dim() == 4 else 1,
                 "heads": int(q.shape[1]) if q.dim() == 4 else 1, "head_dim": d})
    return None


def _best_time(fn, repeat: int = 21) -> float:
    import time
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def calibrate(device: str = "cpu") -> dict:
    """The machine constants measured here (a second or two): the FLOP rate
    of a float32 GEMM (256x768 @ 768x768), the bandwidth of a float32 add
    over 2^20 elements, the per-kernel overhead of an add of one element,
    and ``transcendental``: the FLOPs an ``exp`` element costs at that
    rate. Best of a few runs (the machine may be shared)."""
    dev = torch.device(device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    a = torch.randn(256, 768, device=dev)
    b = torch.randn(768, 768, device=dev)
    x = torch.randn(1 << 20, device=dev)
    y = torch.randn(1 << 20, device=dev)
    one = torch.randn(1, device=dev)
    with torch.inference_mode():
        overhead = _best_time(lambda: (torch.add(one, one), sync()), 31)
        t_mm = _best_time(lambda: (torch.mm(a, b), sync())) - overhead
        t_add = _best_time(lambda: (torch.add(x, y), sync())) - overhead
        t_exp = _best_time(lambda: (torch.exp(x), sync())) - overhead
    flops = 2.0 * 256 * 768 * 768 / max(t_mm, 1e-9)
    bandwidth = 3.0 * 4 * (1 << 20) / max(t_add, 1e-9)
    transcendental = max(1.0, t_exp * flops / (1 << 20))
    return {"flops": flops, "bandwidth": bandwidth, "overhead": overhead,
            "transcendental": transcendental}


class CostModel:
    """Per-node and whole-graph cost for ``target`` ("cpu" or "cuda").
    ``machine`` overrides the target's constants (:data:`MACHINES`; e.g.
    :func:`calibrate`'s measurement of this machine). ``profile`` is the
    kernel measurements file (default: the 1-thread CPU measurements; only
    used for ``target="cpu"`` unless given)."""

    def __init__(self, target: str = "cpu", profile: Optional[Path] = None,
                 machine: Optional[dict] = None):
        if target not in MACHINES:
            raise ValueError(f"unknown target {target!r}; expected one of {sorted(MACHINES)}")
        self.target = target
        self.machine = dict(MACHINES[target], **(machine or {}))
        for k in ("flops", "bandwidth", "overhead"):
            v = self.machine.get(k)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0 or (
                    k != "overhead" and v == 0):
                raise ValueError(f"machine constant {k!r} must be a positive number, not {v!r}")
        self.profile = profile if profile is not None else (PROFILE if target == "cpu" else None)

    def node_cost(self, node: fx.Node) -> float:
        if node.op != "call_function":
            return 0.0
        if self.profile is not None:
            u = unfused_cost(node, self.machine)
            if u is not None:
                cost, rule, variant, sizes = u
                out = node.meta["val"]
                ratio = measured_ratio(rule, variant, out.dtype, sizes, self.profile)
                if ratio is not None and ratio > 0:
                    return cost / ratio
        return roofline(node, self.machine)

    def graph_cost(self, g: fx.Graph) -> float:
        return sum(self.node_cost(n) for n in g.nodes)


def graph_cost(gm, target: str = "cpu") -> float:
    """The predicted latency (seconds) of ``gm`` (an ``fx.GraphModule``,
    ``fx.Graph`` or ``ExportedProgram``) on ``target``."""
    g = getattr(gm, "graph_module", gm)
    g = getattr(g, "graph", g)
    return CostModel(target).graph_cost(g)


def node_cost(node: fx.Node, target: str = "cpu") -> float:
    return CostModel(target).node_cost(node)


__all__ = ["CostModel", "graph_cost", "node_cost", "measured_ratio", "unfused_cost",
           "roofline", "calibrate", "MACHINES"]
