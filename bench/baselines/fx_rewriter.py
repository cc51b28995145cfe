"""The rules with ``torch.fx.subgraph_rewriter.replace_pattern_with_filters``.

Patterns and replacements are plain functions of ``torch.ops.aten`` overloads,
so ``symbolic_trace`` records exactly the targets of the export IR (tracing
``torch.matmul``/``F.softmax`` would record Python functions that never occur
there). Constants the rules bind or guard (scale, axes, eps, shapes) are
pattern *inputs*: fx's matcher binds a placeholder to a literal argument and
passes it to the replacement; ``match_filters`` are the guards.

What fx cannot express, and how it is worked around here:

* **Alternates.** A pattern is one fixed graph: ``mul`` or ``div`` scaling,
  ``clone`` or ``dropout``, 2- or 3-argument ``softmax``, with or without GQA's
  ``repeat_kv`` are separate patterns -- 16 for attention -- and the
  activation kinds and bias/no-bias of ``linear_act`` another 8. Each is one
  call of ``replace_pattern_with_filters``: a full ``SubgraphMatcher`` pass
  over the graph plus a ``recompile`` of the module, every round.
* **Computed replacement arguments.** A replacement is traced once; a value
  derived from a bound constant (``1/c`` for ``div`` scaling, ``[x.shape[-1]]``
  for ``rms_norm``) becomes Python arithmetic (``operator.truediv``) or
  ``aten.sym_size`` calls in the rewritten graph instead of a folded literal.
* **Variable-length chains / recursion** (e.g. any number of view-like ops
  between nodes) cannot be written; neither rule here needs them.
* Matches whose inner values have other users are rejected by the matcher
  itself (no guard needed, but export's ``_assert_tensor_metadata`` users
  must be removed first -- see ``common``).
"""
from __future__ import annotations

import itertools
import operator
from typing import Callable, Dict, List, Tuple

import torch
import torch.fx as fx
from torch.fx import subgraph_rewriter

from . import common as C
from .common import aten


def _gnode(match, pattern_graph, target):
    """The graph node a pattern node with ``target`` matched."""
    for pn in pattern_graph.nodes:
        if pn.op == "call_function" and pn.target == target:
            return match.nodes_map[pn]
    raise KeyError(target)


def _ph(match, pattern_graph) -> Dict[str, object]:
    """Placeholder name -> bound graph node or literal."""
    return {pn.target: match.nodes_map[pn] for pn in pattern_graph.nodes
            if pn.op == "placeholder" and pn in match.nodes_map}


# --- attention: 16 patterns --------------------------------------------------------

def _attention_pair(scale_op, drop, sm_dtype, gqa):
    """(pattern, replacement, filter) for one combination of alternates."""

    def body(q, k, v, mask, d1, d2, c, sdim, sdt, dp, dtrain):
        s = aten.matmul.default(q, aten.transpose.int(k, d1, d2))
        s = scale_op(s, c)
        s = aten.add.Tensor(s, mask)
        p = aten.softmax.int(s, sdim, sdt) if sm_dtype else aten.softmax.int(s, sdim)
        p = aten.dropout.default(p, dp, dtrain) if drop else aten.clone.default(p)
        return aten.matmul.default(p, v)

    def rep(x, es, vs):
        return aten._unsafe_view.default(
            aten.clone.default(aten.expand.default(aten.unsqueeze.default(x, 2), es),
                               memory_format=torch.contiguous_format), vs)

    def sdpa(q, k, v, mask, c):
        scale = c if scale_op is aten.mul.Tensor else 1.0 / c
        kw = {"scale": scale, "enable_gqa": True} if gqa else {"scale": scale}
        return aten.scaled_dot_product_attention.default(q, k, v, mask, 0.0, False, **kw)

    # Only the inputs a variant uses may be placeholders (fx rejects unused ones).
    names = ["q", "k0" if gqa else "k", "v0" if gqa else "v", "mask", "d1", "d2", "c", "sdim"]
    if sm_dtype:
        names.append("sdt")
    if drop:
        names += ["dp", "dtrain"]
    if gqa:
        names += ["kes", "kvs", "ves", "vvs"]

    def pattern_impl(*a):
        kw = dict(zip(names, a))
        k = rep(kw["k0"], kw["kes"], kw["kvs"]) if gqa else kw["k"]
        v = rep(kw["v0"], kw["ves"], kw["vvs"]) if gqa else kw["v"]
        return body(kw["q"], k, v, kw["mask"], kw["d1"], kw["d2"], kw["c"], kw["sdim"],
                    kw.get("sdt"), kw.get("dp"), kw.get("dtrain"))

    def replacement_impl(*a):
        kw = dict(zip(names, a))
        return sdpa(kw["q"], kw["k0" if gqa else "k"], kw["v0" if gqa else "v"], kw["mask"], kw["c"])

    pattern = _with_signature(pattern_impl, names)
    replacement = _with_signature(replacement_impl, names)

    def guard(match, original_graph, pattern_graph) -> bool:
        b = _ph(match, pattern_graph)
        kt = _gnode(match, pattern_graph, aten.transpose.int)
        add = _gnode(match, pattern_graph, aten.add.Tensor)
        if not isinstance(b["mask"], fx.Node):
            return False
        if not C.last_two_axes(b["d1"], b["d2"], C.rank(kt)):
            return False
        if not C.softmax_ok(add, b["sdim"], b.get("sdt") if sm_dtype else None):
            return False
        if drop and not C.dropout_is_identity(b["dp"], b["dtrain"]):
            return False
        if C.attention_scale(scale_op, b["c"]) is None:
            return False
        if gqa and not C.gqa_ok(b["k0"], b["kes"], b["kvs"], b["v0"], b["ves"], b["vvs"]):
            return False
        return True

    return pattern, replacement, guard


def _with_signature(fn, names):
    """A function with named positional parameters ``names`` (fx's tracer
    makes one placeholder per parameter)."""
    src = f"def f({', '.join(names)}):\n    return _impl({', '.join(names)})\n"
    ns = {"_impl": fn}
    exec(src, ns)
    return ns["f"]


# --- GELU (tanh), RMSNorm, linear + activation -----------------------------------------

def _gelu_pattern(x, half, power, cubic, s, one):
    inner = aten.add.Tensor(x, aten.mul.Tensor(aten.pow.Tensor_Scalar(x, power), cubic))
    return aten.mul.Tensor(aten.mul.Tensor(x, half),
                           aten.add.Tensor(aten.tanh.default(aten.mul.Tensor(inner, s)), one))


def _gelu_replacement(x, half, power, cubic, s, one):
    return aten.gelu.default(x, approximate="tanh")


def _gelu_guard(match, original_graph, pattern_graph):
    b = _ph(match, pattern_graph)
    return C.gelu_consts_ok(b["half"], b["power"], b["cubic"], b["s"], b["one"])


def _rms_pattern(x, w, power, dims, keepdim, eps):
    ms = aten.mean.dim(aten.pow.Tensor_Scalar(x, power), dims, keepdim)
    return aten.mul.Tensor(w, aten.mul.Tensor(x, aten.rsqrt.default(aten.add.Tensor(ms, eps))))


def _rms_replacement(x, w, power, dims, keepdim, eps):
    return aten.rms_norm.default(x, [aten.sym_size.int(x, -1)], w, eps)


def _rms_guard(match, original_graph, pattern_graph):
    b = _ph(match, pattern_graph)
    return C.rms_ok(b["x"], b["w"], b["power"], b["dims"], b["keepdim"], b["eps"])


def _linear_act_pair(act_target, approximate, bias):
    act = C.ACTS[("relu" if act_target is aten.relu.default else
                  "silu" if act_target is aten.silu.default else "gelu", approximate)]
    la = C.linear_act_op()

    def apply_act(y):
        if act_target is aten.gelu.default and approximate == "tanh":
            return act_target(y, approximate="tanh")
        return act_target(y)

    if bias:
        def pattern(x, w, b):
            return apply_act(aten.linear.default(x, w, b))

        def replacement(x, w, b):
            return la(x, w, b, act)
    else:
        def pattern(x, w):
            return apply_act(aten.linear.default(x, w))

        def replacement(x, w):
            return la(x, w, None, act)
    return pattern, replacement, None


# --- the rule set -----------------------------------------------------------------------

def rule_set() -> List[Tuple[str, Callable, Callable, list]]:
    """[(rule, pattern, replacement, match_filters)] in application order."""
    rules = []
    # GQA first: otherwise the plain pattern matches with k = repeat_kv(k).
    for gqa, scale_op, drop, sm_dtype in itertools.product(
            (True, False), (aten.mul.Tensor, aten.div.Tensor), (False, True), (False, True)):
        p, r, g = _attention_pair(scale_op, drop, sm_dtype, gqa)
        rules.append(("attention", p, r, [g]))
    rules.append(("gelu_tanh", _gelu_pattern, _gelu_replacement, [_gelu_guard]))
    rules.append(("rms_norm", _rms_pattern, _rms_replacement, [_rms_guard]))
    for act_target, approx in ((aten.relu.default, "none"), (aten.gelu.default, "none"),
                               (aten.gelu.default, "tanh"), (aten.silu.default, "none")):
        for bias in (True, False):
            p, r, _ = _linear_act_pair(act_target, approx, bias)
            rules.append(("linear_act", p, r, []))
    return rules


class FxRewriter:
    """Patterns are traced once (``symbolic_trace``) at construction."""

    def __init__(self):
        self.rules = [(name, fx.symbolic_trace(p), fx.symbolic_trace(r), f)
                      for name, p, r, f in rule_set()]

    @property
    def n_patterns(self) -> int:
        return len(self.rules)

    def __call__(self, gm: fx.GraphModule, max_rounds: int = 100) -> Dict[str, int]:
        C.strip_asserts(gm.graph)
        fired = dict.fromkeys(C.RULES, 0)
        for _ in range(max_rounds):
            changed = 0
            for name, p, r, filters in self.rules:
                n = len(subgraph_rewriter.replace_pattern_with_filters(gm, p, r, filters))
                fired[name] += n
                changed += n
            if not changed:
                break
        return fired
