"""Dynamic shapes: programs exported with symbolic sizes
(``torch.export.export(..., dynamic_shapes=...)``).

A symbolic size is a sympy expression over the program's size symbols
(``s0``, ``s1``, ...), whose admissible values the program's shape
environment (:class:`~torch.fx.experimental.symbolic_shapes.ShapeEnv`: the
ranges of ``range_constraints`` and the facts export recorded) describes. A
rewrite of such a program must be correct for **every** admissible size,
not only for the example the program was exported with. How the rewriter
makes sure of it (``docs/internals/architecture.md``, "Dynamic shapes"):

1. *The engine matches on hints.* The term graph gives the verified engine
   each symbolic size's example value (its hint) as the attribute its
   integer guards read (:class:`~.importer.TermGraph` with
   ``size_hints=True``). A match found so is only a candidate: it holds for
   the example sizes.
2. *Pattern guards are re-decided symbolically* (:func:`confirm`): the
   declarative relation ``p @ ⟨θ, φ⟩ ≈ t`` (:mod:`..engines.declarative`) is
   decided again for the engine's bindings, with every guard evaluated over
   the symbolic sizes: a comparison counts as true (false) only if the
   shape environment proves it true (false) for every admissible size
   (``ShapeEnv._maybe_evaluate_static``, what ``statically_known_true``
   asks); one it cannot decide is *undecided*, and a guard holds only if it
   is true (Kleene logic: undecided ``or`` true is true). Bounded arithmetic
   is checked over the symbols' ranges (``bound_sympy``): an intermediate
   that may leave the engine's bounds at some admissible size makes the
   guard fail, as it would fail in the engine at that size. When no
   derivation has every guard true, the match is declined. Otherwise the
   same derivation is valid at every admissible size: the structure of the
   term graph does not depend on sizes, and every guard holds at each.
3. *Rule bodies see SymInts and cannot guard.* ``x.shape`` of a symbolic
   value is its ``torch.SymInt`` sizes; the rule runs with the shape
   environment in ``error_on_new_guards`` mode (:func:`no_new_guards`), so
   a Python comparison the environment decides statically gives its answer
   and one it cannot decide raises :data:`GuardError`, which the driver
   turns into "the rule declines" (never a guess from the hint). The same
   holds while the replacement's fake values are computed (a meta kernel
   that would need a fact not statically known declines the rule), and the
   replacement's shape must be provably the root's.
4. *Replacements keep the symbols.* A SymInt a rule passes to an operator
   becomes the FX node that computes it (an existing ``sym_size`` node, or
   a new ``aten.sym_size.int`` of a tensor that has it), never its hint.

Profitability (``ctx.profitable``) is a question of speed, not of
correctness: it is asked with the example size (the hint).
"""
from __future__ import annotations

import contextlib
from typing import Dict, Iterator, List, Mapping, Optional, Tuple

import torch
import torch.fx as fx

from .. import core
from ..core import (EAdd, EAttr, EConst, EFAttr, EMul, ESub, GAnd, GEq, GLt, GNot, GOr, GTrue,
                    PExists, PGuard)
from ..engines import declarative, truth

from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

try:  # private in torch 2.13: raised by ShapeEnv.error_on_new_guards
    from torch.fx.experimental.symbolic_shapes import _ShapeEnvGuardError
    _CAN_REFUSE = True
except ImportError:  # pragma: no cover - other torch versions (shape_env_of answers None)
    class _ShapeEnvGuardError(RuntimeError):  # type: ignore[no-redef]
        """Never raised: this torch has no error-on-new-guards mode."""
    _CAN_REFUSE = False

GuardError = (_ShapeEnvGuardError, GuardOnDataDependentSymNode)
"""What a comparison of symbolic sizes raises when the shape environment does
not decide it (inside :func:`no_new_guards`), or when it depends on data (an
unbacked size): the rule declines."""

__all__ = ["GuardError", "SizeUnknown", "shape_env_of", "is_symbolic", "hint", "no_new_guards",
           "confirm", "explain_guard_error", "other_size_inputs"]


class SizeUnknown(AssertionError):
    """A rule (or the replacement it builds) needs a fact about symbolic
    sizes that the shape environment does not decide: the rule declines
    (an AssertionError, so :meth:`pypm_verified.Rule.fire` reports it as a
    failed assert at the line that asked)."""


def _sym_types():
    return (torch.SymInt, torch.SymBool, torch.SymFloat)


def is_symbolic(v) -> bool:
    """Whether ``v`` (an int, a SymInt, a tensor or fake tensor, a shape)
    involves a size that is not a constant."""
    if isinstance(v, torch.Tensor):
        return any(is_symbolic(d) for d in v.shape)
    if isinstance(v, (list, tuple)):
        return any(is_symbolic(d) for d in v)
    if isinstance(v, _sym_types()):
        return not v.node.expr.is_number
    return False


def shape_env_of(gm: fx.GraphModule, fake_mode=None):
    """The shape environment of ``gm``'s symbolic sizes, or None when every
    size in its metadata is static (the static path then stays as it was)
    or when this torch's ShapeEnv cannot refuse new guards
    (``error_on_new_guards``): then symbolic sizes stay unknown to the
    engine, as before, and nothing is decided on their example values.
    ``fake_mode``: the fake mode of ``gm``'s metadata, when known; a shape
    environment of no symbol at all (a static export) answers None without
    reading every node."""
    env = getattr(fake_mode, "shape_env", None)
    if env is not None:
        # (torch 2.13 names the symbols' example values backed_var_to_val)
        vals = getattr(env, "backed_var_to_val", None)
        if vals is None:
            vals = getattr(env, "var_to_val", True)
        if not vals and not getattr(env, "var_to_range", True):
            return None
    sym = _sym_types()
    for n in gm.graph.nodes:
        v = n.meta.get("val")
        for d in (v.shape if isinstance(v, torch.Tensor) else (v,)):
            if type(d) is not int and isinstance(d, sym) and not d.node.expr.is_number:
                env = getattr(d.node, "shape_env", None)
                if env is not None and _CAN_REFUSE and hasattr(env, "error_on_new_guards") \
                        and hasattr(env, "_maybe_evaluate_static"):
                    return env
    return None


def expr(d):
    """The sympy expression of a size (an int or a SymInt)."""
    import sympy
    if isinstance(d, _sym_types()):
        return d.node.expr
    return sympy.Integer(int(d))


def hint(d) -> Optional[int]:
    """The example value of a size (an int as is; a SymInt's hint, None if
    it has none, e.g. a data-dependent size)."""
    if isinstance(d, torch.SymInt):
        h = d.node.hint
        if h is None:
            env = d.node.shape_env
            h = env.size_hint(d.node.expr, allow_none=True) if env is not None else None
        return None if h is None else int(h)
    if isinstance(d, bool) or not isinstance(d, int):
        return None
    return d


@contextlib.contextmanager
def no_new_guards(env) -> Iterator[None]:
    """Inside, a comparison of symbolic sizes the shape environment cannot
    decide statically raises one of :data:`GuardError` instead of guarding on the
    example value (and nothing is recorded in ``env``). No-op for ``env``
    None (a static program).

    torch's meta kernels also ask questions they do not need answered:
    ``guard_or_false(s == 1)`` / ``guard_or_true(...)`` (e.g. the broadcast
    of ``infer_size``, asked even of a tensor added to a number: a batch
    ``s0`` ranging over ``[1, 64]`` gets ``Eq(s0, 1)``). Such a call means
    "take the default path when the fact is not known": the general path,
    which torch's kernels keep correct for every value of the size (it is
    what they do for data-dependent sizes), checking what it assumes with
    ``torch._check``. Inside, they take it (``backed_size_oblivious``: a
    backed size is treated as an unbacked one there), so the question is not
    a guard; what the general path assumes is still a ``torch._check``,
    which here must be statically known or raises (a new guard or a new
    runtime assert both stop at ``error_on_new_guards``). Not done when a
    backed size of ``env`` is marked size-like (its size-oblivious reading
    would then assume it is not 0 or 1)."""
    if env is None or not hasattr(env, "error_on_new_guards"):
        yield
        return
    with env.error_on_new_guards(), _oblivious_defaults(env):
        yield


def _oblivious_defaults(env):
    """``backed_size_oblivious`` for :func:`no_new_guards` (see there), or a
    no-op when this torch lacks it or ``env`` marks a backed size size-like."""
    cfg = getattr(getattr(torch.fx, "experimental", None), "_config", None)
    backed = getattr(env, "backed_var_to_val", None)
    if backed is None:
        backed = getattr(env, "var_to_val", {})
    if cfg is None or not hasattr(cfg, "backed_size_oblivious") \
            or set(getattr(env, "size_like", ())) & set(backed):
        return contextlib.nullcontext()
    return cfg.patch(backed_size_oblivious=True)


def explain_guard_error(e: BaseException) -> str:
    """A :data:`GuardError`'s message for a user: which fact is unknown."""
    text = (str(e).strip().splitlines() or [type(e).__name__])[0]
    prefix = "Guard attempted while ShapeEnv guards are frozen: "
    if text.startswith(prefix):
        fact, _, val = text[len(prefix):].rpartition(" == ")
        text = f"{fact} (true for the example sizes)" if val == "True" else \
            f"{fact} (false for the example sizes)" if val == "False" else \
            f"{fact} (= {val} for the example sizes)"
    return ("the size fact " + text + " is not statically known for the program's dynamic "
            "shapes")


# ------------------------------------------------ symbolic re-check of a match

_UNDECIDED = truth.UNDECIDED  # defined at every size, true at some, maybe false at others
_UNKNOWN = truth.UNKNOWN      # the engine's "unknown" at some admissible size: the guard fails


class SymbolicAttrs:
    """Attribute values of term nodes with symbolic sizes as sympy
    expressions: ``tg`` (the :class:`~.importer.TermGraph`), ``env`` (the
    shape environment)."""

    def __init__(self, tg, env):
        self.tg = tg
        self.env = env

    def attr(self, node, attr):
        """The attribute as an int or a sympy expression; ``_UNKNOWN``."""
        if core.SHAPE_BASE <= attr < core.SHAPE_BASE + core.MAX_RANK or \
                core.SHAPE_NEG_BASE <= attr < core.SHAPE_NEG_BASE + core.MAX_RANK:
            # from the FX value's own sizes: the term graph holds example
            # values for symbolic ones, never to be read as facts here
            fxn = self.tg.fx_of.get(node.id)
            val = fxn.meta.get("val") if fxn is not None else None
            if not isinstance(val, torch.Tensor):
                return _UNKNOWN
            dims = tuple(val.shape)
            i = attr - core.SHAPE_BASE if attr < core.SHAPE_NEG_BASE else \
                len(dims) - 1 - (attr - core.SHAPE_NEG_BASE)
            if not 0 <= i < len(dims) or len(dims) > core.MAX_RANK:
                return _UNKNOWN
            e = expr(dims[i])
            return int(e) if e.is_number else e
        v = node.graph.attr_map(node.id).get(attr)
        return _UNKNOWN if v is None else v

    def within(self, e, bound: int) -> bool:
        """Whether ``-bound < e < bound`` at every admissible size."""
        if isinstance(e, int):
            return -bound < e < bound
        try:
            r = self.env.bound_sympy(e)
            lo, hi = r.lower, r.upper
            if not (getattr(lo, "is_Integer", False) and getattr(hi, "is_Integer", False)):
                return False  # an infinite (or non-integer) end
            return -bound < int(lo) and int(hi) < bound
        except Exception:  # noqa: BLE001 -- no bound: not within
            return False

    def decide(self, fact) -> object:
        """True / False if ``fact`` (a sympy relation) holds / fails at every
        admissible size, else ``_UNDECIDED``."""
        if fact is True or fact is False:
            return fact
        import sympy
        if fact == sympy.true:
            return True
        if fact == sympy.false:
            return False
        try:
            r = self.env._maybe_evaluate_static(fact)
        except Exception:  # noqa: BLE001 -- cannot decide: undecided
            return _UNDECIDED
        if r == sympy.true:
            return True
        if r == sympy.false:
            return False
        return _UNDECIDED


class _SymbolicGuards(truth.Evaluator):
    """The engine's guard semantics (the one evaluator,
    :class:`..engines.truth.Evaluator`) over symbolic sizes: ``x.α`` from
    :class:`SymbolicAttrs` (an int or a sympy expression), bounded over the
    sizes' ranges (:meth:`SymbolicAttrs.within`), compared by the shape
    environment (:meth:`SymbolicAttrs.decide`: true / false at every
    admissible size, else :data:`_UNDECIDED`, under Kleene's logic and
    strict in the unknown, as the engine). ``ctx = (theta, phi)``."""

    __slots__ = ("graph", "attrs")

    def __init__(self, graph, attrs: SymbolicAttrs):
        self.graph, self.attrs = graph, attrs

    def attr(self, x, attr, ctx):
        theta = ctx[0]
        return self.attrs.attr(theta[x], attr) if x in theta else _UNKNOWN

    def fattr(self, F, attr, ctx):
        phi = ctx[1]
        if F not in phi or self.graph is None:
            return _UNKNOWN
        return self.graph.sym_attr(phi[F], attr)

    def within(self, v, bound: int) -> bool:
        return self.attrs.within(v, bound)

    def arith(self, kind, a, b):
        r = super().arith(kind, a, b)
        return int(r) if not isinstance(r, int) and r.is_number else r

    def compare(self, eq: bool, a, b):
        if isinstance(a, int) and isinstance(b, int):
            return a == b if eq else a < b
        import sympy
        return self.attrs.decide(sympy.Eq(a, b) if eq else sympy.Lt(a, b))


class _SymbolicDecider(declarative._Decider):
    """The declarative relation with guards decided for every admissible
    size; ``failed`` collects the guards that were not (for the report)."""

    def __init__(self, defs, graph, attrs: SymbolicAttrs):
        super().__init__(defs, graph)
        self.attrs = attrs
        self.guards = _SymbolicGuards(graph, attrs)
        self.failed: List[Tuple[object, object]] = []
        self._order: Dict[int, list] = {}

    def witnesses(self, t) -> list:
        """Every node, those below ``t`` first (nearest first): a local
        variable of a pattern is usually bound to a sub-term of the node
        matched, and ``any`` stops at the first witness that works. The same
        nodes as the declarative decider tries, so the same answer."""
        order = self._order.get(t.id)
        if order is None:
            seen, order, frontier = {t.id}, [t], [t]
            while frontier:
                nxt = []
                for n in frontier:
                    for c in n.args:
                        if c.id not in seen:
                            seen.add(c.id)
                            order.append(c)
                            nxt.append(c)
                frontier = nxt
            order += [n for n in self.nodes if n.id not in seen]
            self._order[t.id] = order
        return order

    def holds(self, p, theta, phi, t) -> bool:
        if isinstance(p, PExists):
            return any(self.holds(p.p, {**theta, p.x: w}, phi, t) for w in self.witnesses(t))
        if isinstance(p, PGuard):
            if not self.holds(p.p, theta, phi, t):
                return False
            v = self.guards.truth(p.g, (theta, phi))
            if v is not True:
                self.failed.append((p.g, v))
            return v is True
        return super().holds(p, theta, phi, t)


def _show(g) -> str:
    """A lowered guard as text (variables by number)."""
    ops = {EAdd: "+", ESub: "-", EMul: "*"}
    match g:
        case EConst(z):
            return str(z)
        case EAttr(x, attr):
            return f"v{x}.{core.attr_name(attr)}"
        case EFAttr(F, attr):
            return f"F{F}.op_class"
        case EAdd(a, b) | ESub(a, b) | EMul(a, b):
            return f"({_show(a)} {ops[type(g)]} {_show(b)})"
        case GTrue():
            return "True"
        case GEq(a, b):
            return f"{_show(a)} == {_show(b)}"
        case GLt(a, b):
            return f"{_show(a)} < {_show(b)}"
        case GNot(GEq(a, b)):
            return f"{_show(a)} != {_show(b)}"
        case GNot(h):
            return f"not ({_show(h)})"
        case GAnd(a, b):
            return f"{_show(a)} and {_show(b)}"
        case GOr(a, b):
            return f"({_show(a)} or {_show(b)})"
    return repr(g)


def confirm(program: core.Program, theta: Mapping, phi: Mapping, node, tg, env
            ) -> Optional[str]:
    """None if ``program``'s root matches ``node`` with ``θ, φ`` at every
    size ``env`` admits (some derivation whose every guard holds at each);
    otherwise why not (one line)."""
    attrs = SymbolicAttrs(tg, env)
    d = _SymbolicDecider(program.defs, node.graph, attrs)
    body = program.defs[program.root].body
    if d.holds(body, dict(theta), dict(phi or {}), node):
        return None
    for g, v in d.failed:
        if v is _UNDECIDED:
            return (f"a pattern guard is not statically known for the program's dynamic "
                    f"shapes ({_show(g)}); it holds for the example sizes only")
    return ("the match holds for the example sizes but not for every size the program's "
            "shape environment admits")


# ---------------------------------------------------- inputs of other sizes

def input_symbols(ep) -> Dict[object, Tuple[int, int, int, str]]:
    """The size symbols of ``ep``'s user inputs: symbol -> (hint, lower,
    upper, where), the range from ``ep.range_constraints`` (upper capped),
    ``where`` the first input axis of that size (``input_ids.shape[1]``)."""
    out = {}
    sig = ep.graph_signature
    users = set(getattr(sig, "user_inputs", ()))
    for n in ep.graph_module.graph.nodes:
        if n.op != "placeholder" or (users and n.name not in users):
            continue
        v = n.meta.get("val")
        if not isinstance(v, torch.Tensor):
            continue
        for axis, d in enumerate(v.shape):
            if isinstance(d, torch.SymInt) and not d.node.expr.is_number:
                for s in d.node.expr.free_symbols:
                    if s in out:
                        continue
                    r = ep.range_constraints.get(s)
                    lo = int(r.lower) if r is not None else 2
                    try:
                        hi = int(r.upper) if r is not None else 1 << 20
                    except (TypeError, ValueError, OverflowError):
                        hi = 1 << 20
                    out[s] = (hint(d) if d.node.expr == s else None, lo, hi,
                              f"{n.name}.shape[{axis}]")
    return out


def other_size_inputs(ep, args, kwargs, values: Mapping[object, int], seed: int = 0):
    """Random inputs like ``(args, kwargs)`` but with every dynamic size
    symbol set to ``values[symbol]``: floats normal, integers within the
    example's range (token ids stay ids), bools random. Returns ``(args,
    kwargs)``; raises ValueError if an input's shape cannot be evaluated."""
    import sympy
    import torch.utils._pytree as pytree
    g = torch.Generator().manual_seed(seed)
    flat, spec = pytree.tree_flatten((args, kwargs))
    metas = [n.meta.get("val") for n in ep.graph_module.graph.nodes
             if n.op == "placeholder" and n.name in set(ep.graph_signature.user_inputs)]
    tensors = [t for t in flat if isinstance(t, torch.Tensor)]
    if len(metas) != len(tensors):
        raise ValueError("the inputs do not correspond to the program's placeholders")
    it = iter(metas)
    out = []
    for t in flat:
        if not isinstance(t, torch.Tensor):
            out.append(t)
            continue
        m = next(it)
        shape = []
        for d in m.shape:
            e = sympy.sympify(expr(d).xreplace({k: sympy.Integer(v) for k, v in values.items()}))
            if not e.is_number:
                raise ValueError(f"size {d} of an input depends on {e.free_symbols}")
            shape.append(int(e))
        if t.is_floating_point():
            out.append(torch.randn(shape, generator=g, dtype=t.dtype).to(t.device))
        elif t.dtype == torch.bool:
            out.append((torch.rand(shape, generator=g) < 0.5).to(t.device))
        else:
            lo, hi = (int(t.min()), int(t.max())) if t.numel() else (0, 0)
            out.append(torch.randint(lo, hi + 1, shape, generator=g, dtype=t.dtype)
                       .to(t.device))
    return pytree.tree_unflatten(out, spec)


def other_sizes(ep, k: int = 2) -> List[Dict[object, int]]:
    """``k`` assignments of the input size symbols other than the example's,
    inside their ranges: each symbol moved up by 1, 3, ... from its hint
    (down when the range ends), one at a time then together."""
    syms = input_symbols(ep)
    if not syms:
        return []
    outs: List[Dict[object, int]] = []
    for step in range(1, k + 1):
        vals = {}
        for s, (h, lo, hi, _) in syms.items():
            h = h if h is not None else lo
            v = h + 2 * step - 1
            if v > hi:
                v = max(lo, h - (2 * step - 1))
            vals[s] = v
        if all(vals[s] == (syms[s][0] or syms[s][1]) for s in vals):
            continue
        if _in_ranges(ep, vals):
            outs.append(vals)
    return outs


def _in_ranges(ep, vals: Mapping[object, int]) -> bool:
    """Whether the assignment satisfies every ``ep.range_constraints`` entry
    it determines (derived sizes, e.g. ``2*s0``, included)."""
    import sympy
    sub = {k: sympy.Integer(v) for k, v in vals.items()}
    for e, r in ep.range_constraints.items():
        v = sympy.sympify(e).xreplace(sub)
        if not v.is_number:
            continue
        lo, hi = r.lower, r.upper
        if (getattr(lo, "is_Integer", False) and v < lo) or \
                (getattr(hi, "is_Integer", False) and v > hi):
            return False
    return True
