"""The floor: bare Python walks over ``graph.nodes``.

``bare_walk`` visits every node once and checks its target against the rules'
root operators -- the least any matcher must do (no matching, no rewriting).

``handwritten`` is the rule set written as plain Python: the same walk, and at
each root a hand-coded chain of ``if``s over ``node.args`` (what one writes
with no matching library), then the graph surgery of ``common.emit_*``;
repeated to a fixpoint. Every alternate, guard and binding is code.
"""
from __future__ import annotations

from typing import Dict

import torch.fx as fx

from . import common as C
from .common import aten

ROOTS = frozenset({aten.matmul.default, aten.mul.Tensor, *C.ACT_TARGETS})


def bare_walk(gm: fx.GraphModule) -> int:
    """Count the nodes whose target is a rule's root operator."""
    n = 0
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in ROOTS:
            n += 1
    return n


def _is(n, target) -> bool:
    return isinstance(n, fx.Node) and n.op == "call_function" and n.target == target


def _one_user(*nodes) -> bool:
    return all(len(n.users) == 1 for n in nodes)


def _repeat_kv(n):
    """``_unsafe_view(clone(expand(unsqueeze(x, 2), E)), V)`` -> (x, E, V) or None."""
    if not (_is(n, aten._unsafe_view.default) and _is(n.args[0], aten.clone.default)):
        return None
    cl = n.args[0]
    ex = cl.args[0]
    if cl.kwargs.get("memory_format") is None or not _is(ex, aten.expand.default):
        return None
    un = ex.args[0]
    if not (_is(un, aten.unsqueeze.default) and un.args[1] == 2 and _one_user(cl, ex, un)):
        return None
    return un.args[0], ex.args[1], n.args[1], (n, cl, ex, un)


def try_attention(g: fx.Graph, m2: fx.Node) -> bool:
    p, v = m2.args[0], m2.args[1]
    dead = [m2]
    if _is(p, aten.clone.default) and not p.kwargs:
        dead.append(p)
        p = p.args[0]
    elif _is(p, aten.dropout.default) and C.dropout_is_identity(p.args[1], p.args[2]):
        dead.append(p)
        p = p.args[0]
    else:
        return False
    if not _is(p, aten.softmax.int):
        return False
    sm = p
    add = sm.args[0]
    if not (_is(add, aten.add.Tensor) and
            C.softmax_ok(add, sm.args[1], sm.args[2] if len(sm.args) > 2 else None)):
        return False
    sc, mask = add.args[0], add.args[1]
    if not isinstance(mask, fx.Node) or not isinstance(sc, fx.Node) \
            or sc.op != "call_function" or sc.target not in (aten.mul.Tensor, aten.div.Tensor):
        return False
    scale = C.attention_scale(sc.target, sc.args[1])
    m1 = sc.args[0]
    if scale is None or not _is(m1, aten.matmul.default):
        return False
    q, kt = m1.args
    if not (_is(kt, aten.transpose.int) and C.last_two_axes(kt.args[1], kt.args[2], C.rank(kt))):
        return False
    if not _one_user(sm, add, sc, m1, kt, *dead[1:]):
        return False
    k = kt.args[0]
    dead += [sm, add, sc, m1, kt]
    rk, rv = _repeat_kv(k), _repeat_kv(v)
    gqa = False
    if rk and rv and C.gqa_ok(rk[0], rk[1], rk[2], rv[0], rv[1], rv[2]):
        k, v, gqa = rk[0], rv[0], True
        dead += [*rk[3], *rv[3]]
    C.emit_sdpa(g, m2, q, k, v, mask, scale, gqa)
    C.erase_if_dead(g, dead)
    return True


def try_gelu_tanh(g: fx.Graph, root: fx.Node) -> bool:
    # mul(mul(x, .5), add(tanh(mul(add(x, mul(pow(x, 3.), .044715)), s)), 1.))
    a, b = root.args
    if not (_is(a, aten.mul.Tensor) and _is(b, aten.add.Tensor)):
        return False
    x, half = a.args
    th, one = b.args
    if not _is(th, aten.tanh.default):
        return False
    m3 = th.args[0]
    if not _is(m3, aten.mul.Tensor):
        return False
    ad, s = m3.args
    if not (_is(ad, aten.add.Tensor) and ad.args[0] is x and _is(ad.args[1], aten.mul.Tensor)):
        return False
    m2 = ad.args[1]
    pw, cubic = m2.args
    if not (_is(pw, aten.pow.Tensor_Scalar) and pw.args[0] is x):
        return False
    if not C.gelu_consts_ok(half, pw.args[1], cubic, s, one):
        return False
    if not _one_user(a, b, th, m3, ad, m2, pw):
        return False
    C.emit_gelu_tanh(g, root, x)
    C.erase_if_dead(g, [root, a, b, th, m3, ad, m2, pw])
    return True


def try_rms_norm(g: fx.Graph, root: fx.Node) -> bool:
    # mul(w, mul(x, rsqrt(add(mean.dim(pow(x, 2), [-1], True), eps))))
    w, inner = root.args
    if not (isinstance(w, fx.Node) and _is(inner, aten.mul.Tensor)):
        return False
    x, rs = inner.args
    if not _is(rs, aten.rsqrt.default):
        return False
    ad = rs.args[0]
    if not (_is(ad, aten.add.Tensor) and _is(ad.args[0], aten.mean.dim)):
        return False
    mean, eps = ad.args
    pw = mean.args[0]
    keepdim = mean.args[2] if len(mean.args) > 2 else mean.kwargs.get("keepdim", False)
    if not (_is(pw, aten.pow.Tensor_Scalar) and pw.args[0] is x):
        return False
    if not C.rms_ok(x, w, pw.args[1], mean.args[1], keepdim, eps):
        return False
    if not _one_user(inner, rs, ad, mean, pw):
        return False
    C.emit_rms_norm(g, root, x, w, eps)
    C.erase_if_dead(g, [root, inner, rs, ad, mean, pw])
    return True


def try_linear_act(g: fx.Graph, root: fx.Node) -> bool:
    act = C.act_name(root)
    lin = root.args[0]
    if act is None or not _is(lin, aten.linear.default) or not _one_user(lin):
        return False
    x, w = lin.args[0], lin.args[1]
    b = lin.args[2] if len(lin.args) > 2 else lin.kwargs.get("bias")
    C.emit_linear_act(g, root, x, w, b, act)
    C.erase_if_dead(g, [root, lin])
    return True


def handwritten(gm: fx.GraphModule, max_rounds: int = 100) -> Dict[str, int]:
    g = gm.graph
    C.strip_asserts(g)
    fired = dict.fromkeys(C.RULES, 0)
    for _ in range(max_rounds):
        changed = 0
        for node in list(g.nodes):
            if node._erased or node.op != "call_function":
                continue
            t = node.target
            if t == aten.matmul.default:
                if try_attention(g, node):
                    fired["attention"] += 1
                    changed += 1
            elif t == aten.mul.Tensor:
                if try_gelu_tanh(g, node):
                    fired["gelu_tanh"] += 1
                    changed += 1
                elif try_rms_norm(g, node):
                    fired["rms_norm"] += 1
                    changed += 1
            elif t in C.ACT_TARGETS:
                if try_linear_act(g, node):
                    fired["linear_act"] += 1
                    changed += 1
        if not changed:
            break
    return fired
