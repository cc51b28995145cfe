"""What every baseline shares: the rule set's targets and guards, the
replacement ops, graph helpers and the numerical check.

The rules (the same rewrites as the pypm rule library, at the export IR:
``torch.export.export(...).run_decompositions({})``):

``attention``
    ``matmul(q, transpose(k, -2, -1))`` -> ``mul``/``div`` by a constant ->
    ``add(·, mask)`` -> ``softmax(·, -1[, dtype])`` -> eval dropout (``clone``,
    or ``dropout(·, p, train)`` with ``p == 0`` or ``not train``) ->
    ``matmul(·, v)``  =>  ``aten.scaled_dot_product_attention(q, k, v, mask,
    scale=c | 1/c)``; with GQA's ``repeat_kv`` (``unsqueeze(·, 2)`` ->
    ``expand`` -> ``clone`` -> ``_unsafe_view``) on ``k`` and ``v`` the
    un-repeated tensors are passed with ``enable_gqa=True``. Guards: the
    transpose swaps the last two axes of a rank-4 tensor, softmax is over the
    last axis and (when a dtype is given) keeps the input's dtype, the scale
    is a number.
``gelu_tanh``
    GPT-2's NewGELU ``0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x**3)))`` =>
    ``aten.gelu(x, approximate="tanh")``. Guards: every constant.
``rms_norm``
    LLaMA's ``w * (x * rsqrt(mean(x**2, [-1], keepdim=True) + eps))`` =>
    ``aten.rms_norm(x, [D], w, eps)``. Guards: exponent 2, last axis, keepdim,
    ``w`` of shape ``[D]``.
``linear_act``
    ``act(linear(x, W[, b]))`` with ``act`` in relu / gelu / gelu(tanh) / silu
    and the linear used only by the activation  =>
    ``torch.ops.pypm.linear_act(x, W, b, act)``.

Every baseline first drops ``aten._assert_tensor_metadata`` nodes (export's
dtype checks; GPT-2 asserts on the softmax output, LLaMA inside RMSNorm):
they are extra users of values inside the patterns, and fx's and Inductor's
matchers both refuse a match whose inner values escape. That pass is part of
each baseline's timed work.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Iterable, List, Optional

import torch
import torch.fx as fx

aten = torch.ops.aten

RULES = ("attention", "gelu_tanh", "rms_norm", "linear_act")

# --- the fused linear+activation op -----------------------------------------

_LINEAR_ACT = None
LINEAR_ACT_IS_PLACEHOLDER = False
ACTS = {  # graph target (+ approximate) -> act name of pypm::linear_act
    ("relu", "none"): "relu",
    ("gelu", "none"): "gelu",
    ("gelu", "tanh"): "gelu_tanh",
    ("silu", "none"): "silu",
}


def linear_act_op():
    """``torch.ops.pypm.linear_act`` when ``pypm_verified.torch.kernels`` is
    importable; otherwise a placeholder custom op ``pypm_bench::linear_act``
    with the same schema that computes ``F.linear`` + activation (enough to
    time the *matching* and check numerics; it fuses nothing)."""
    global _LINEAR_ACT, LINEAR_ACT_IS_PLACEHOLDER
    if _LINEAR_ACT is not None:
        return _LINEAR_ACT
    try:
        import pypm_verified.torch.kernels  # noqa: F401  (registers pypm::linear_act)
        _LINEAR_ACT = torch.ops.pypm.linear_act.default
        LINEAR_ACT_IS_PLACEHOLDER = False
    except (ImportError, AttributeError):
        if not hasattr(torch.ops.pypm_bench, "linear_act"):
            @torch.library.custom_op("pypm_bench::linear_act", mutates_args=())
            def _linear_act(x: torch.Tensor, weight: torch.Tensor,
                            bias: Optional[torch.Tensor], act: str) -> torch.Tensor:
                y = torch.nn.functional.linear(x, weight, bias)
                if act == "relu":
                    return torch.relu(y)
                if act == "gelu":
                    return torch.nn.functional.gelu(y)
                if act == "gelu_tanh":
                    return torch.nn.functional.gelu(y, approximate="tanh")
                if act == "silu":
                    return torch.nn.functional.silu(y)
                if act == "none":
                    return y
                raise ValueError(f"unknown activation {act!r}")

            @_linear_act.register_fake
            def _(x, weight, bias, act):
                return x.new_empty((*x.shape[:-1], weight.shape[0]))
        _LINEAR_ACT = torch.ops.pypm_bench.linear_act.default
        LINEAR_ACT_IS_PLACEHOLDER = True
    return _LINEAR_ACT


# --- graph helpers -------------------------------------------------------------

def val(n) -> Optional[torch.Tensor]:
    """The fake tensor export recorded for a node (None for literals)."""
    return n.meta.get("val") if isinstance(n, fx.Node) else None


def rank(n) -> Optional[int]:
    v = val(n)
    return v.dim() if isinstance(v, torch.Tensor) else None


def is_number(c) -> bool:
    return isinstance(c, (int, float)) and not isinstance(c, bool)


def strip_asserts(graph: fx.Graph) -> int:
    """Erase ``aten._assert_tensor_metadata`` nodes (no users, checks only)."""
    n = 0
    for node in list(graph.find_nodes(op="call_function",
                                       target=aten._assert_tensor_metadata.default)):
        graph.erase_node(node)
        n += 1
    return n


def erase_if_dead(graph: fx.Graph, nodes: Iterable[fx.Node]) -> None:
    """Erase the given nodes (root first, then inputs) that lost all users."""
    for n in nodes:
        if n is not None and not n._erased and not n.users and n.op == "call_function":
            graph.erase_node(n)


def count_nodes(gm) -> int:
    g = gm.graph if isinstance(gm, fx.GraphModule) else gm
    return len(g.nodes)


def count_rewrites(gm) -> Dict[str, int]:
    """Rewrites performed, read off the result: the replacement ops present.
    (The export IR of these models contains none of them before rewriting;
    ``rewrites(after) - rewrites(before)`` is what callers report.)"""
    g = gm.graph if isinstance(gm, fx.GraphModule) else gm
    la = linear_act_op()
    c = dict.fromkeys(RULES, 0)
    for n in g.nodes:
        if n.op != "call_function":
            continue
        if n.target == aten.scaled_dot_product_attention.default:
            c["attention"] += 1
        elif n.target == aten.gelu.default and n.kwargs.get("approximate") == "tanh":
            c["gelu_tanh"] += 1
        elif n.target == aten.rms_norm.default:
            c["rms_norm"] += 1
        elif n.target == la:
            c["linear_act"] += 1
    return c


# --- guards (shared, so every system checks the same conditions) ------------------

def last_two_axes(d1, d2, r) -> bool:
    if r is None or not isinstance(d1, int) or not isinstance(d2, int):
        return False
    return {d1 % r, d2 % r} == {r - 1, r - 2}


def softmax_ok(sm_input, dim, dtype=None) -> bool:
    r = rank(sm_input)
    if r is None or not isinstance(dim, int) or dim % r != r - 1:
        return False
    if dtype is not None:
        v = val(sm_input)
        return v is not None and v.dtype == dtype  # no up-cast: nothing to cast back
    return True


def dropout_is_identity(p, train) -> bool:
    return train is False or (is_number(p) and p == 0)


def attention_scale(op, c) -> Optional[float]:
    """SDPA's ``scale`` for ``scores * c`` / ``scores / c``; None if unusable."""
    if not is_number(c) or c == 0:
        return None
    return float(c) if op == aten.mul.Tensor else 1.0 / float(c)


def gqa_ok(k0, k_expand_size, k_view_size, v0, v_expand_size, v_view_size) -> bool:
    """``repeat_kv``: [b, kv, s, d] -> [b, kv, rep, s, d] -> [b, kv*rep, s, d],
    the same repetition for k and v."""
    for x, es, vs in ((k0, k_expand_size, k_view_size), (v0, v_expand_size, v_view_size)):
        v = val(x)
        if v is None or v.dim() != 4 or not isinstance(es, (list, tuple)) \
                or not isinstance(vs, (list, tuple)) or len(es) != 5 or len(vs) != 4:
            return False
        b, kv, s, d = v.shape
        if list(es) != [b, kv, es[2], s, d] or list(vs) != [b, kv * es[2], s, d]:
            return False
    return k_expand_size[2] == v_expand_size[2]


GELU_CONSTS = (0.5, 3.0, 0.044715, math.sqrt(2.0 / math.pi), 1.0)


def gelu_consts_ok(half, power, cubic, sqrt_2_pi, one) -> bool:
    got = (half, power, cubic, sqrt_2_pi, one)
    return all(is_number(a) and math.isclose(a, b, rel_tol=1e-6) for a, b in zip(got, GELU_CONSTS))


def rms_ok(x, w, power, dims, keepdim, eps) -> bool:
    vx, vw = val(x), val(w)
    if vx is None or vw is None or not is_number(eps) or power != 2:
        return False
    if not isinstance(dims, (list, tuple)) or len(dims) != 1 or dims[0] % vx.dim() != vx.dim() - 1:
        return False
    return keepdim is True and list(vw.shape) == [vx.shape[-1]]


def act_name(node: fx.Node) -> Optional[str]:
    """The linear_act activation for an activation node, or None."""
    t = node.target
    if t == aten.relu.default:
        return "relu"
    if t == aten.silu.default:
        return "silu"
    if t == aten.gelu.default:
        approx = node.kwargs.get("approximate", node.args[1] if len(node.args) > 1 else "none")
        return ACTS.get(("gelu", approx))
    return None


ACT_TARGETS = (aten.relu.default, aten.gelu.default, aten.silu.default)


# --- replacements as graph surgery (hand-written walk, Inductor graph patterns) ----

def _new(graph, root, target, args, kwargs=None):
    with graph.inserting_before(root):
        n = graph.call_function(target, tuple(args), kwargs or {})
    n.meta.update({k: v for k, v in root.meta.items() if k in ("val", "tensor_meta", "stack_trace")})
    root.replace_all_uses_with(n)
    return n


def emit_sdpa(graph, root, q, k, v, mask, scale, gqa):
    kw = {"scale": scale}
    if gqa:
        kw["enable_gqa"] = True
    return _new(graph, root, aten.scaled_dot_product_attention.default,
                (q, k, v, mask, 0.0, False), kw)


def emit_gelu_tanh(graph, root, x):
    return _new(graph, root, aten.gelu.default, (x,), {"approximate": "tanh"})


def emit_rms_norm(graph, root, x, w, eps):
    return _new(graph, root, aten.rms_norm.default, (x, [val(x).shape[-1]], w, float(eps)))


def emit_linear_act(graph, root, x, w, b, act):
    return _new(graph, root, linear_act_op(), (x, w, b, act))


# --- running and checking ------------------------------------------------------------

def flat_inputs(ep) -> List[Any]:
    """Positional inputs of ``ep.graph_module``: parameters, buffers and lifted
    constants in signature order, and the example inputs (``ep.example_inputs``;
    keyword inputs by their placeholder's name)."""
    from torch.export.graph_signature import InputKind
    args, kwargs = ep.example_inputs
    pos = iter(torch.utils._pytree.tree_leaves(args))
    out = []
    for spec in ep.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            out.append(kwargs[spec.arg.name] if spec.arg.name in kwargs else next(pos))
        elif spec.kind == InputKind.PARAMETER:
            out.append(ep.state_dict[spec.target])
        elif spec.kind == InputKind.BUFFER:
            out.append(ep.state_dict[spec.target] if spec.persistent else ep.constants[spec.target])
        elif spec.kind in (InputKind.CONSTANT_TENSOR, InputKind.CUSTOM_OBJ):
            out.append(ep.constants[spec.target])
        else:
            raise NotImplementedError(f"input kind {spec.kind}")
    return out


def run_graph(gm: fx.GraphModule, inputs) -> List[torch.Tensor]:
    gm.recompile()
    with torch.no_grad():
        out = gm(*inputs)
    return [o for o in torch.utils._pytree.tree_leaves(out) if isinstance(o, torch.Tensor)]


def max_abs_diff(a: List[torch.Tensor], b: List[torch.Tensor]) -> float:
    assert len(a) == len(b), (len(a), len(b))
    return max(float((x.double() - y.double()).abs().max()) for x, y in zip(a, b))


def equivalent(a, b, atol=1e-4, rtol=1e-4) -> bool:
    return len(a) == len(b) and all(
        x.shape == y.shape and torch.allclose(x, y, atol=atol, rtol=rtol) for x, y in zip(a, b))


def expected_rewrites(model: str, layers: int) -> Dict[str, int]:
    """What the rule set must do on examples/models.py's architectures."""
    e = dict.fromkeys(RULES, 0)
    e["attention"] = layers
    if model == "bert":
        e["linear_act"] = layers            # intermediate dense + GELU (the pooler's tanh is no act)
    elif model == "gpt2":
        e["gelu_tanh"] = layers             # NewGELU; its MLP is addmm (Conv1D), not linear
    elif model == "llama":
        e["rms_norm"] = 2 * layers + 1      # input, post-attention, final norm
        e["linear_act"] = layers            # gate_proj + SiLU
    return e

