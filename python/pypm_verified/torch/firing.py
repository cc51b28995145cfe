"""Firing a rule the PyTorch driver (:mod:`.driver`) matched: the rule body
runs on :class:`Builder`, whose operator calls build FX nodes in front of the
matched root (their ``meta["val"]`` from the driver's fake values); the
result is checked (shape, dtype; for dynamic shapes at every admissible
size) and replaces the root, and what became dead is removed
(:meth:`Firing.fire_single`). A multi-root rule's results replace all its
roots at once (:meth:`Firing.fire_multi`). Each firing is recorded for the
report, the rewrite validator and the output names."""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.fx as fx

from ..dsl.rules import short_path
from ..errors import PatternError
from . import dynamic
from .deadcode import ASSERT_METADATA
from .metadata import describe, fake_of, ownable_val, returns_fresh_tensor, same_sizes
from .rule_api import RewriteError, Value


def schema_call(target, vals: Sequence) -> tuple:
    """``(args, kwargs)`` calling ``target`` with ``vals``, its arguments in
    full positional (schema) order: keyword-only ones go to ``kwargs``."""
    args = _SCHEMA_ARGS.get(target)
    if args is None:
        schema = getattr(target, "_schema", None)
        if schema is None:
            return list(vals), {}
        # (name, keyword-only) per argument: reading schema.arguments builds
        # new objects on every call
        args = _SCHEMA_ARGS[target] = tuple((a.name, a.kwarg_only) for a in schema.arguments)
    pos, kw = [], {}
    for (name, kwarg_only), v in zip(args, vals):
        if kwarg_only:
            kw[name] = v
        else:
            pos.append(v)
    return pos, kw


_SCHEMA_ARGS: Dict[object, tuple] = {}  # target -> ((argument name, keyword-only), ...)


def sym_node(graph: fx.Graph, tg, size, before: fx.Node,
             created: Optional[List[fx.Node]] = None) -> fx.Node:
    """The FX node computing the symbolic size ``size`` (a SymInt) for a
    replacement inserted before ``before`` in ``graph`` (``tg``: its term
    graph): an earlier node whose value is that size (e.g.
    ``sym_size_int``), else a new ``aten.sym_size.int`` of an earlier tensor
    having it as a dimension (appended to ``created``). A size no earlier
    node has declines the rule (:class:`~.dynamic.SizeUnknown`)."""
    want = dynamic.expr(size)
    tensor_dim = None
    for n in graph.nodes:
        if n is before:
            break
        v = n.meta.get("val")
        if isinstance(v, torch.SymInt) and v.node.expr == want and n in tg.term:
            return n
        if tensor_dim is None and isinstance(v, torch.Tensor) and n in tg.term:
            for i, d in enumerate(v.shape):
                if isinstance(d, torch.SymInt) and d.node.expr == want:
                    tensor_dim = (n, i, d)
                    break
    if tensor_dim is None:
        raise dynamic.SizeUnknown(f"no node computes the symbolic size {want} before "
                                  f"{before.name}")
    n, i, d = tensor_dim
    with graph.inserting_before(before):
        node = graph.call_function(torch.ops.aten.sym_size.int, (n, i))
    node.meta["val"] = d
    kept = tg.add(node)
    if kept is node and created is not None:
        created.append(node)
    return kept


class Builder:
    """What operator calls in a rule body build on: FX nodes in front of the
    root (the builder of :meth:`pypm_verified.Rule.fire`), for ``driver``
    (the :class:`~.driver.Driver`: its graph, term graph, fake values).

    With ``take_root_val``, the first node built whose ``meta["val"]`` is
    exactly the root's (same sizes, strides, offset, dtype, device,
    requires_grad) takes the root's fake tensor itself instead of a new one
    (usually the replacement of the root: same output); :meth:`settle` then
    gives it a fresh one unless it replaced the root and the root is gone. A
    call that may return a view of that node gives it a fresh one first, so
    that a view's value always views its argument's.

    The fake runs follow the graph's convention for ``requires_grad``: they
    run with grad mode on exactly when the root's value requires grad. In
    the export IR every call's value is traced below autograd (none requires
    grad, though the weights do); a fake run with grad mode on would give a
    replacement that requires grad, unlike the node it replaces."""

    def __init__(self, driver, root: fx.Node, rule, take_root_val: bool = False):
        self.driver = driver
        self.root = root
        self.rule = rule
        self.created: List[fx.Node] = []
        # (root's fake tensor, its metadata) while not lent to a node yet
        self._lend = ownable_val(root, driver.fake_mode) if take_root_val else None
        val = root.meta.get("val")
        # the grad mode of the fake runs: None, the caller's (the root has no tensor value)
        self._grad = val.requires_grad if isinstance(val, torch.Tensor) else None
        self._lent_meta = None
        self.holder: Optional[fx.Node] = None  # the node given the root's fake tensor
        # the rule's operator calls, (operator, arguments as given, result), when
        # the rewrite validator records the replacement's template
        self.trace: Optional[list] = None

    def _fx_arg(self, a):
        if isinstance(a, Value):
            return self._fx_arg(a.value) if a.is_const else a.fx
        if isinstance(a, (list, tuple)):
            return type(a)(self._fx_arg(e) for e in a)
        if isinstance(a, fx.Node):
            return a
        if isinstance(a, torch.SymInt):
            if not dynamic.is_symbolic(a):
                return int(a.node.expr)
            # the node computing it, not its example value
            return self.driver.sym_node(a, self.root, self.created)
        return a

    def apply(self, op, *args, shape=None, dtype=None):
        targets = getattr(op, "torch_targets", ())
        if not targets:
            raise RewriteError(f"rule {self.rule.name}: operator {op.name} has no torch target "
                               "(declare it with @pm.op(torch=[...]))")
        target = targets[0]
        pos, kw = schema_call(target, [self._fx_arg(a) for a in args])
        if self.holder is not None and not returns_fresh_tensor(target):
            read = []
            fx.node.map_arg((pos, kw), read.append)
            if self.holder in read:
                self._take_back()
        like = self._lend
        try:
            mode = torch.is_grad_enabled()
            if self._grad is None or self._grad == mode:
                val = self.driver.meta_val(target, pos, kw, like)
            else:  # (torch.set_grad_enabled's context costs ~20 us)
                torch._C._set_grad_enabled(self._grad)
                try:
                    val = self.driver.meta_val(target, pos, kw, like)
                finally:
                    torch._C._set_grad_enabled(mode)
        except dynamic.GuardError:
            raise  # needs a size fact not statically known: the rule declines
        except Exception as e:
            raise RewriteError(f"rule {self.rule.name}: {target} rejects the arguments "
                               f"it built ({type(e).__name__}: {e})") from None
        g = self.driver.gm.graph
        with g.inserting_before(self.root):
            node = g.call_function(target, tuple(pos), kw)
        node.meta["val"] = val
        if like is not None and val is like[0]:
            self.holder, self._lent_meta, self._lend = node, like[1], None
        for k in ("nn_module_stack", "stack_trace", "source_fn_stack"):
            if k in self.root.meta:
                node.meta[k] = self.root.meta[k]
        kept = self.driver.tg.add(node)  # hash-consing may keep an equal earlier node
        if kept is node:
            self.created.append(node)
        v = self.driver.value(kept)
        if self.trace is not None:  # what the rule asked for
            self.trace.append((op, args, v))
        return v

    def settle(self, replacement: Optional[fx.Node]) -> None:
        """After the firing (``replacement``: the root's replacement, None if
        the rule did not fire): the node holding the root's fake tensor keeps
        it only if it is the replacement and the root left the graph (the
        root's former users' views then alias the replacement, as they
        should); otherwise it gets a fresh fake tensor of the same metadata,
        so that no two live nodes share one."""
        h = self.holder
        if h is not None and (h is not replacement or not self.root._erased):
            self._take_back()
        self.holder = None

    def _take_back(self) -> None:
        """The node holding the root's fake tensor gets a fresh one."""
        if not self.holder._erased:
            self.holder.meta["val"] = fake_of(self.driver.fake_mode, self._lent_meta)
        self.holder = None


class Firing:
    """Fires rules for ``host`` (the :class:`~.driver.Driver`: its graph and
    term graph, rule context, report, validator, dead-code removal), and
    records what fired there: ``renamed`` and ``firings`` (rule, root,
    replacement) of the host, the replacements' users in its ``stale``
    nodes (their terms changed: re-imported when the walk reaches them)."""

    def __init__(self, host):
        self.host = host

    def fire_single(self, rule, values, root: fx.Node,
                    declined: Optional[List[Tuple[str, str]]] = None
                    ) -> Optional[List[fx.Node]]:
        """Fire ``rule`` at ``root``: the nodes it created, or None when it
        does not fire -- then ``(rule name, reason)`` is appended to
        ``declined`` if given."""
        drv = self.host
        if declined is None:
            declined = []
        b = Builder(drv, root, rule, take_root_val=True)
        checker = drv.validation
        if checker is not None:  # the match, read in the graph the validator checks
            b.trace = checker.attempt(root)
        ctx = drv.context
        ctx.refusals.clear()

        def on_decline(d):
            declined.append((rule.name, ctx.explain(d).reason))

        try:
            with dynamic.no_new_guards(drv.shape_env):
                out = rule.fire(values, b, ctx, on_decline=on_decline)
        except dynamic.GuardError as e:
            # a comparison of symbolic sizes the shape environment does not decide
            d = rule.decline(e)
            d = d.with_detail(dynamic.explain_guard_error(e) + (
                f": assert {d.text}" if d.is_assert else ""))
            declined.append((rule.name, d.reason))
            out = None
        except Exception:
            for n in reversed(b.created):
                if n.graph is drv.gm.graph and not n.users:
                    drv.tg.erase(n)
            b.settle(None)
            raise
        if out is not None and drv.shape_env is not None and isinstance(out, Value) \
                and out.fx is not None and out.fx is not root:
            why = self.same_shape(root, out.fx, rule)
            if why is not None:
                declined.append((rule.name, why))
                out = None
        if out is None or (isinstance(out, Value) and out.fx is root):
            if out is not None:
                declined.append((rule.name, "returned the matched root (no change) "
                                            f"[{short_path(rule.where)}]"))
            for n in reversed(b.created):
                if not n.users:
                    drv.tg.erase(n)
            b.settle(None)
            return None
        if not isinstance(out, Value) or out.fx is None:
            b.settle(None)
            raise PatternError(f"rule {rule.name!r} ({short_path(rule.where)}) returned "
                               f"{out!r}; a torch rule returns a tensor built by calling "
                               "operators")
        new = out.fx
        old_val, new_val = root.meta.get("val"), new.meta.get("val")
        if isinstance(old_val, torch.Tensor) and (
                not isinstance(new_val, torch.Tensor)
                or not same_sizes(old_val, new_val, drv.shape_env is not None)
                or old_val.dtype != new_val.dtype):
            b.settle(None)
            raise RewriteError(
                f"rule {rule.name!r} ({short_path(rule.where)}) replaced {root.name} "
                f"({describe(old_val)}) with a value of {describe(new_val)}")
        root.replace_all_uses_with(new, delete_user_cb=lambda u: u is not new)
        drv.renamed[root.name] = new
        drv.firings.append((rule.name, root, new))
        if checker is not None:  # its certificate: the match and the template it built
            checker.fired(rule.name, root, out, b.trace, values)
        drv.report.record_firing(rule.name, root.name, new.name)
        created = [n for n in b.created if n.graph is drv.gm.graph and n in drv.tg.term]
        drv.remove_dead([root])
        b.settle(new)
        # the users' terms are stale: re-imported when the walk reaches them
        drv.stale.update(new.users)
        return created

    def same_shape(self, root: fx.Node, new: fx.Node, rule) -> Optional[str]:
        """Dynamic shapes: None if ``new``'s shape is ``root``'s at every
        admissible size; why not if that is not statically known; a
        :class:`RewriteError` if it is known to differ."""
        drv = self.host
        old_val, new_val = root.meta.get("val"), new.meta.get("val")
        if not (isinstance(old_val, torch.Tensor) and isinstance(new_val, torch.Tensor)) \
                or old_val.dim() != new_val.dim():
            return None
        attrs = dynamic.SymbolicAttrs(drv.tg, drv.shape_env)
        import sympy
        for a, b in zip(old_val.shape, new_val.shape):
            v = attrs.decide(sympy.Eq(dynamic.expr(a), dynamic.expr(b)))
            if v is False:
                raise RewriteError(
                    f"rule {rule.name!r} ({short_path(rule.where)}) replaced {root.name} "
                    f"({describe(old_val)}) with a value of {describe(new_val)}")
            if v is not True:
                return (f"the replacement's size {b} is not statically known to equal the "
                        f"matched node's {a} for the program's dynamic shapes "
                        f"[{short_path(rule.where)}]")
        return None

    def multi_blocked(self, m) -> Optional[str]:
        """Why a multi-root match must not be rewritten, or None: an interior
        node of the matched subgraphs (not a root, not bound to a variable)
        used outside them would stay alive beside the fused replacement (the
        rewrite would be correct but compute it twice), so nothing is done."""
        drv = self.host
        roots = [drv.tg.fx_of.get(t.id) for t in m.roots]
        if any(r is None for r in roots):
            return "a root has no FX node"
        stops = {drv.tg.fx_of.get(t.id) for t in m.substitution.values()}
        inside = set(roots)
        interior = []
        stack = list(roots)
        while stack:
            n = stack.pop()
            for a in n.all_input_nodes:
                if a in stops or a in inside or a.op == "placeholder":
                    continue
                inside.add(a)
                interior.append(a)
                if len(interior) > 64:
                    return "the matched subgraph is too large to check its interior uses"
                stack.append(a)
        for a in interior:
            for u in a.users:
                if u not in inside and u.target is not ASSERT_METADATA:
                    return (f"interior node {a.name} of the match is used outside it "
                            f"(by {u.name})")
        return None

    def fire_multi(self, rule, values, m, declined) -> Optional[List[fx.Node]]:
        """Fire a multi-root rule: it returns one replacement per root; all
        roots are replaced at once, the replacement built before the first
        root in graph order (so it precedes every use of every root), and
        only if every node it reads is defined there."""
        drv = self.host
        roots = [drv.tg.fx_of[t.id] for t in m.roots]
        order = {n: i for i, n in enumerate(drv.gm.graph.nodes)}
        first = min(roots, key=order.__getitem__)
        b = Builder(drv, first, rule)
        if drv.validation is not None:  # checked in a segment of its own
            drv.validation.before_multi()
        ctx = drv.context
        ctx.refusals.clear()

        def on_decline(d):
            declined.append((rule.name, ctx.explain(d).reason))

        def undo():
            for n in reversed(b.created):
                if n.graph is drv.gm.graph and not n.users:
                    drv.tg.erase(n)

        try:
            out = rule.fire(values, b, ctx, on_decline=on_decline)
        except Exception:
            undo()
            raise
        if out is None:
            undo()
            return None
        if not isinstance(out, tuple) or len(out) != len(roots) or \
                not all(isinstance(v, Value) and v.fx is not None for v in out):
            undo()
            raise PatternError(f"rule {rule.name!r} ({short_path(rule.where)}) returned "
                               f"{out!r}; a multi-root rule returns one tensor per root "
                               f"({len(roots)})")
        created = set(b.created)
        order = {n: i for i, n in enumerate(drv.gm.graph.nodes)}
        for n in b.created:
            for a in n.all_input_nodes:
                if a not in created and order[a] >= order[first]:
                    undo()
                    declined.append((rule.name, f"{a.name} is defined after the first root "
                                                f"{first.name}"))
                    return None
        for root, v in zip(roots, out):
            old_val, new_val = root.meta.get("val"), v.fx.meta.get("val")
            if isinstance(old_val, torch.Tensor) and (
                    not isinstance(new_val, torch.Tensor)
                    or not same_sizes(old_val, new_val, False)
                    or old_val.dtype != new_val.dtype):
                undo()
                raise RewriteError(f"rule {rule.name!r} ({short_path(rule.where)}) replaced "
                                   f"{root.name} ({describe(old_val)}) with a value of "
                                   f"{describe(new_val)}")
        for root, v in zip(roots, out):
            if v.fx is root:
                continue
            root.replace_all_uses_with(v.fx, delete_user_cb=lambda u: u not in created)
            drv.renamed[root.name] = v.fx
            drv.firings.append((rule.name, root, v.fx))
        checker = drv.validation
        if checker is not None:
            checker.fired_multi(rule.name, roots)
        drv.report.record_firing(rule.name, roots[0].name, out[0].fx.name)
        done = [n for n in b.created if n.graph is drv.gm.graph and n in drv.tg.term]
        drv.remove_dead(roots)
        for v in out:
            drv.stale.update(v.fx.users)
        return done


__all__ = ["Builder", "Firing", "schema_call", "sym_node"]
