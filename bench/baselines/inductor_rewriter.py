"""The rules with Inductor's pattern matcher (``torch._inductor.pattern_matcher``),
two ways, both applied with ``PatternMatcherPass.apply`` until it reports no
match:

``InductorReplacement`` -- ``register_replacement`` (search and replacement
    written as functions, traced into patterns). Its default trace function
    (``fwd_only``) runs ``make_fx`` with Inductor's decomposition table, so a
    search function comes out in core ATen (``gelu`` -> the erf formula,
    ``softmax`` -> ``_softmax``, ``linear``/``matmul`` -> ``mm``/``bmm``) and
    matches nothing at the export IR. Here ``trace_fn`` is ``same_ir_trace``:
    ``make_fx(..., pre_dispatch=True)`` with an empty table, which records
    ``aten.matmul``/``softmax``/``linear``/``gelu`` as export does. Constants
    are ``scalar_workaround`` keyword arguments (scale, eps, dropout p); the
    first match ignores ints/floats/lists, then ``check_fn`` *re-traces* the
    search function on the match's fake tensors, re-matches the specific
    pattern and traces the replacement -- two ``make_fx`` traces per match, the
    price of this API.
``InductorGraphPattern`` -- ``register_graph_pattern`` with hand-built
    ``CallFunction``/``KeywordArg`` patterns; guards in ``extra_check``; the
    handler does the same graph surgery as the hand-written walk.

What cannot be expressed, and how it is worked around:

* **Alternates of different shape** (``clone`` vs 3-argument ``dropout``, 2- vs
  3-argument ``softmax``, GQA's ``repeat_kv`` or not, ``linear`` with or
  without bias, ``gelu`` with or without ``approximate=``) are separate
  patterns. ``CallFunction([mul, div], ...)`` expresses alternates among
  operators of the same arity (graph patterns only: a traced search function
  is one graph, so ``register_replacement`` also needs a pattern per
  ``mul``/``div`` and per transpose-axes spelling, ``(2, 3)`` vs ``(-1, -2)``:
  the re-traced specific pattern compares those ints literally). Hence 32
  attention patterns with ``register_replacement``, 8 with graph patterns.
* **Guards on constants** are Python in ``extra_check``; with
  ``register_replacement`` a constant that is not a ``scalar_workaround`` must
  equal the traced one (softmax axis -1, not 3).
* **Variable-length chains / recursion**: not expressible (``RepeatedExpr`` is
  a fixed multi-output repeat, not a chain); not needed by these rules.
* Inner values with other users fail ``_users=1`` (export's
  ``_assert_tensor_metadata`` users are removed first -- see ``common``).
"""
from __future__ import annotations

import functools
import itertools
from typing import Dict

import torch
import torch.fx as fx
from torch._inductor import pattern_matcher as pm
from torch._inductor.pattern_matcher import CallFunction, KeywordArg as KA
from torch.fx.experimental.proxy_tensor import make_fx

from . import common as C
from .common import aten


def _apply_to_fixpoint(passes, gm: fx.GraphModule, max_rounds: int = 100) -> int:
    total = 0
    for _ in range(max_rounds):
        n = sum(p.apply(gm.graph) for p in passes)
        total += n
        if not n:
            break
    return total


# ------------------------------------------------------------------------------------
# register_replacement, with search functions traced at the export IR

def same_ir_trace(fn, args, *, get_decomp_fn=None, run_functional_passes=True):
    """A ``trace_fn`` for ``register_replacement`` that keeps the export IR:
    pre-dispatch ``make_fx`` with no decompositions (so ``matmul``,
    ``softmax.int``, ``linear``, ``gelu`` and ``clone`` stay as they are)."""
    gm = make_fx(fn, {}, tracing_mode="real", pre_dispatch=True)(*args)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


def _t(*shape):
    return torch.randn(*shape)


def _register_attention(pass_, scale_op, dims, drop, sm_dtype, gqa):
    d1, d2 = dims

    def core(q, k, v, mask, c, dp):
        s = aten.matmul.default(q, aten.transpose.int(k, d1, d2))
        s = scale_op(s, c)
        s = aten.add.Tensor(s, mask)
        p = aten.softmax.int(s, -1, q.dtype) if sm_dtype else aten.softmax.int(s, -1)
        p = aten.dropout.default(p, dp, False) if drop else aten.clone.default(p)
        return aten.matmul.default(p, v)

    def rep(x, n_heads):
        b, kv, s, d = x.shape
        e = aten.expand.default(aten.unsqueeze.default(x, 2), [b, kv, n_heads // kv, s, d])
        return aten._unsafe_view.default(
            aten.clone.default(e, memory_format=torch.contiguous_format), [b, n_heads, s, d])

    scale_of = (lambda c: c) if scale_op is aten.mul.Tensor else (lambda c: 1.0 / c)

    if gqa:
        def search(q, k, v, mask, c, dp):
            return core(q, rep(k, q.shape[1]), rep(v, q.shape[1]), mask, c, dp)

        def replace(q, k, v, mask, c, dp):
            return aten.scaled_dot_product_attention.default(
                q, k, v, mask, 0.0, False, scale=scale_of(c), enable_gqa=True)
        kv_shape = (2, 2, 16, 8)
    else:
        search = core

        def replace(q, k, v, mask, c, dp):
            return aten.scaled_dot_product_attention.default(
                q, k, v, mask, 0.0, False, scale=scale_of(c))
        kv_shape = (2, 4, 16, 8)
    if not drop:  # drop the unused ``dp`` parameter: register_replacement needs it bound
        s0, r0 = search, replace
        search = lambda q, k, v, mask, c: s0(q, k, v, mask, c, None)  # noqa: E731
        replace = lambda q, k, v, mask, c: r0(q, k, v, mask, c, None)  # noqa: E731
    example = [_t(2, 4, 16, 8), _t(*kv_shape), _t(*kv_shape), _t(2, 1, 16, 16)]
    workaround = {"c": 0.125}
    if drop:
        workaround["dp"] = 0.1

    def guard(match) -> bool:
        return C.attention_scale(scale_op, match.kwargs["c"]) is not None and \
            isinstance(match.kwargs["mask"], fx.Node)

    pm.register_replacement(search, replace, example, same_ir_trace, pass_,
                            extra_check=guard, scalar_workaround=workaround)


def _register_gelu(pass_):
    def search(x):
        inner = aten.add.Tensor(x, aten.mul.Tensor(aten.pow.Tensor_Scalar(x, 3.0), 0.044715))
        return aten.mul.Tensor(aten.mul.Tensor(x, 0.5), aten.add.Tensor(
            aten.tanh.default(aten.mul.Tensor(inner, 0.7978845608028654)), 1.0))

    def replace(x):
        return aten.gelu.default(x, approximate="tanh")
    pm.register_replacement(search, replace, [_t(2, 16, 32)], same_ir_trace, pass_)


def _register_rms(pass_):
    def search(x, w, eps):
        ms = aten.mean.dim(aten.pow.Tensor_Scalar(x, 2), [-1], True)
        return aten.mul.Tensor(w, aten.mul.Tensor(x, aten.rsqrt.default(aten.add.Tensor(ms, eps))))

    def replace(x, w, eps):
        return aten.rms_norm.default(x, [x.shape[-1]], w, eps)

    def guard(match):
        return C.is_number(match.kwargs["eps"])
    pm.register_replacement(search, replace, [_t(2, 16, 32), _t(32)], same_ir_trace, pass_,
                            extra_check=guard, scalar_workaround={"eps": 1e-6})


def _register_linear_act(pass_, act_target, approximate, bias):
    act = C.ACTS[("relu" if act_target is aten.relu.default else
                  "silu" if act_target is aten.silu.default else "gelu", approximate)]
    la = C.linear_act_op()

    def apply_act(y):
        return act_target(y, approximate="tanh") if approximate == "tanh" else act_target(y)
    if bias:
        def search(x, w, b):
            return apply_act(aten.linear.default(x, w, b))

        def replace(x, w, b):
            return la(x, w, b, act)
        example = [_t(2, 16, 32), _t(64, 32), _t(64)]
    else:
        def search(x, w):
            return apply_act(aten.linear.default(x, w))

        def replace(x, w):
            return la(x, w, None, act)
        example = [_t(2, 16, 32), _t(64, 32)]
    pm.register_replacement(search, replace, example, same_ir_trace, pass_)


class InductorReplacement:
    """Patterns are registered (traced) once at construction."""

    def __init__(self):
        C.linear_act_op()
        self.pass_ = pm.PatternMatcherPass(pass_name="pypm_bench_replacement")
        n = 0
        # GQA first: otherwise the plain pattern matches with k = repeat_kv(k).
        for gqa, scale_op, dims, drop, sm_dtype in itertools.product(
                (True, False), (aten.mul.Tensor, aten.div.Tensor), ((2, 3), (-1, -2)),
                (False, True), (False, True)):
            _register_attention(self.pass_, scale_op, dims, drop, sm_dtype, gqa)
            n += 1
        _register_gelu(self.pass_)
        _register_rms(self.pass_)
        n += 2
        for act_target, approx in ((aten.relu.default, "none"), (aten.gelu.default, "none"),
                                   (aten.gelu.default, "tanh"), (aten.silu.default, "none")):
            for bias in (True, False):
                _register_linear_act(self.pass_, act_target, approx, bias)
                n += 1
        self.n_patterns = n

    def __call__(self, gm: fx.GraphModule) -> Dict[str, int]:
        C.strip_asserts(gm.graph)
        total = _apply_to_fixpoint([self.pass_], gm)
        return {"total": total}


# ------------------------------------------------------------------------------------
# register_graph_pattern with hand-built patterns

def _kv(gqa, name):
    if not gqa:
        return KA(name)
    return CallFunction(aten._unsafe_view.default, CallFunction(
        aten.clone.default, CallFunction(aten.expand.default, CallFunction(
            aten.unsqueeze.default, KA(name + "0"), 2), KA(name + "_es")),
        memory_format=torch.contiguous_format), KA(name + "_vs"))


def _attention_pattern(drop, sm_dtype, gqa):
    scores = CallFunction(aten.matmul.default, KA("q"),
                          CallFunction(aten.transpose.int, _kv(gqa, "k"), KA("d1"), KA("d2")))
    scaled = CallFunction([aten.mul.Tensor, aten.div.Tensor], scores, KA("c"))
    add = CallFunction(aten.add.Tensor, scaled, KA("mask"))
    sm = (CallFunction(aten.softmax.int, add, KA("sdim"), KA("sdt")) if sm_dtype
          else CallFunction(aten.softmax.int, add, KA("sdim")))
    p = (CallFunction(aten.dropout.default, sm, KA("dp"), KA("dtrain")) if drop
         else CallFunction(aten.clone.default, sm))
    return CallFunction(aten.matmul.default, p, _kv(gqa, "v"))


def _find(match, *targets):
    for n in match.nodes:
        if n.op == "call_function" and n.target in targets:
            return n
    raise KeyError(targets)


def _register_attention_graph(pass_, drop, sm_dtype, gqa):
    def guard(match) -> bool:
        kw = match.kwargs
        kt = _find(match, aten.transpose.int)
        add = _find(match, aten.add.Tensor)
        sc = _find(match, aten.mul.Tensor, aten.div.Tensor)
        return (isinstance(kw["mask"], fx.Node)
                and C.last_two_axes(kw["d1"], kw["d2"], C.rank(kt))
                and C.softmax_ok(add, kw["sdim"], kw.get("sdt"))
                and (not drop or C.dropout_is_identity(kw["dp"], kw["dtrain"]))
                and C.attention_scale(sc.target, kw["c"]) is not None
                and (not gqa or C.gqa_ok(kw["k0"], kw["k_es"], kw["k_vs"],
                                         kw["v0"], kw["v_es"], kw["v_vs"])))

    @pm.register_graph_pattern(_attention_pattern(drop, sm_dtype, gqa), extra_check=guard,
                               pass_dict=pass_)
    def handler(match, **kw):
        sc = _find(match, aten.mul.Tensor, aten.div.Tensor)
        k, v = (kw["k0"], kw["v0"]) if gqa else (kw["k"], kw["v"])
        C.emit_sdpa(match.graph, match.output_node(), kw["q"], k, v, kw["mask"],
                    C.attention_scale(sc.target, kw["c"]), gqa)
        match.erase_nodes()


def _register_gelu_graph(pass_):
    x = KA("x")
    inner = CallFunction(aten.add.Tensor, x, CallFunction(
        aten.mul.Tensor, CallFunction(aten.pow.Tensor_Scalar, x, KA("power")), KA("cubic")))
    pat = CallFunction(aten.mul.Tensor, CallFunction(aten.mul.Tensor, x, KA("half")),
                       CallFunction(aten.add.Tensor, CallFunction(aten.tanh.default, CallFunction(
                           aten.mul.Tensor, inner, KA("s"))), KA("one")))

    def guard(match):
        kw = match.kwargs
        return C.gelu_consts_ok(kw["half"], kw["power"], kw["cubic"], kw["s"], kw["one"])

    @pm.register_graph_pattern(pat, extra_check=guard, pass_dict=pass_)
    def handler(match, **kw):
        C.emit_gelu_tanh(match.graph, match.output_node(), kw["x"])
        match.erase_nodes()


def _register_rms_graph(pass_):
    x = KA("x")
    ms = CallFunction(aten.mean.dim, CallFunction(aten.pow.Tensor_Scalar, x, KA("power")),
                      KA("dims"), KA("keepdim"))
    pat = CallFunction(aten.mul.Tensor, KA("w"), CallFunction(
        aten.mul.Tensor, x, CallFunction(aten.rsqrt.default, CallFunction(aten.add.Tensor, ms, KA("eps")))))

    def guard(match):
        kw = match.kwargs
        return C.rms_ok(kw["x"], kw["w"], kw["power"], kw["dims"], kw["keepdim"], kw["eps"])

    @pm.register_graph_pattern(pat, extra_check=guard, pass_dict=pass_)
    def handler(match, **kw):
        C.emit_rms_norm(match.graph, match.output_node(), kw["x"], kw["w"], kw["eps"])
        match.erase_nodes()


def _register_linear_act_graph(pass_, tanh, bias):
    lin = (CallFunction(aten.linear.default, KA("x"), KA("w"), KA("b")) if bias
           else CallFunction(aten.linear.default, KA("x"), KA("w")))
    if tanh:
        pat = CallFunction(aten.gelu.default, lin, approximate="tanh")
    else:
        pat = CallFunction([aten.relu.default, aten.gelu.default, aten.silu.default], lin)

    @pm.register_graph_pattern(pat, pass_dict=pass_)
    def handler(match, **kw):
        root = match.output_node()
        C.emit_linear_act(match.graph, root, kw["x"], kw["w"], kw.get("b"), C.act_name(root))
        match.erase_nodes()


class InductorGraphPattern:
    def __init__(self):
        C.linear_act_op()
        self.pass_ = pm.PatternMatcherPass(pass_name="pypm_bench_graph_pattern")
        n = 0
        for gqa, drop, sm_dtype in itertools.product((True, False), (False, True), (False, True)):
            _register_attention_graph(self.pass_, drop, sm_dtype, gqa)
            n += 1
        _register_gelu_graph(self.pass_)
        _register_rms_graph(self.pass_)
        n += 2
        for tanh in (False, True):
            for bias in (True, False):
                _register_linear_act_graph(self.pass_, tanh, bias)
                n += 1
        self.n_patterns = n

    def __call__(self, gm: fx.GraphModule) -> Dict[str, int]:
        C.strip_asserts(gm.graph)
        total = _apply_to_fixpoint([self.pass_], gm)
        return {"total": total}
