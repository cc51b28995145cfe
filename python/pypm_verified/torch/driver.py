"""The rewrite driver on FX graphs (the paper's §2.4).

Walk the nodes in graph order; at each, try the patterns in the given order
(on the term graph, either engine, skipping patterns whose root operator
differs from the node's: :meth:`pypm_verified.engines.PatternSet.candidates`);
on a match,
run the pattern's rules in order. The first rule whose assertions pass
fires: it is called with the bindings as :class:`Value`\\ s (FX values with
their shape, dtype, device and, for constants, ``.value``), and the
operators it calls build new FX nodes in front of the matched root. The
result replaces the root's uses, and what became dead is removed. The
root's users are re-imported into the term graph lazily, when the walk
reaches them (each node at most once per pass, so a pass stays linear in
the graph), and matched in the same pass if their term changed (deferring
them would take a pass per layer: every firing changes the terms of all
that follows it). A re-imported node reuses its import recipe (metadata,
operator, purity) when only its arguments changed, and the walk re-imports
the stale nodes just ahead of it in one batch (``Driver.lookahead``), so the
engine's copy of the term graph is extended once per batch rather than
before nearly every match; exact, as a firing makes them stale again. The
next pass matches only the nodes rules created;
passes repeat until none fires, at most ``max_iterations`` (reported, never
a hang).

Dynamic shapes (a program exported with symbolic sizes): the engine matches
on the sizes' example values, every match is then re-decided for every size
the program's shape environment admits, rule bodies see ``torch.SymInt``
sizes and cannot guard on a fact that is not statically known, and
replacements keep the symbols (:mod:`.dynamic`).
"""
from __future__ import annotations

import contextlib
import sys
import time
import warnings
from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.fx as fx

from .. import core
from ..core.graph import TensorShape
from ..dsl.patterns import Pattern
from ..dsl.rules import short_path
from ..dsl.symbolic import TensorCode
from ..engines.matching import PatternSet, check_engine
from ..errors import PatternError, RewriteWarning
from ..rewriting.report import RewriteReport, validation_status
from . import dynamic, profitability
from .importer import TermGraph, is_list_op, is_pure

ASSERT_METADATA = torch.ops.aten._assert_tensor_metadata.default
TARGETS = profitability.TARGETS
_REFUSAL_FRAMES = 6  # how far up a refusal looks for the rule's assert
#: identity copies a constant goes through before a rule reads it (RuleContext.constant)
_COPIES = (torch.ops.aten.clone.default, torch.ops.aten.lift_fresh_copy.default)


class RewriteError(RuntimeError):
    """A rule built an invalid replacement (wrong shape or dtype, an operator
    without a torch target, a call torch rejects)."""


class RuleContext:
    """What a rule's ``ctx`` parameter receives from the PyTorch driver:
    ``target`` (the device the rewrite optimizes for, "cpu" or "cuda") and
    :meth:`profitable`, the measured profitability table on that target
    (answering True for every kernel when ``check_profitability`` is off,
    e.g. to make every rule fire in a benchmark or a test).

    ``refusals`` lists, since the driver last cleared it (before each rule
    it fires), every ``profitable`` call that answered False: ``(sites,
    reason)``, the ``(file, line)`` of the call and of its callers (a few
    frames up: the guard may call a helper that calls ``profitable``) and
    :func:`~pypm_verified.torch.profitability.refusal`'s reason, so that a
    rule declining on a ``ctx.profitable(...)`` guard is reported with the
    threshold and the size seen (:meth:`explain`)."""

    __slots__ = ("target", "check_profitability", "refusals", "driver")

    def __init__(self, target: str, check_profitability: bool = True):
        if target not in TARGETS:
            raise ValueError(f"unknown target {target!r}; expected one of {TARGETS}")
        self.target = target
        self.check_profitability = check_profitability
        self.refusals: List[Tuple[Tuple[Tuple[str, int], ...], str]] = []
        self.driver = None

    def fold_cat(self, values, dim: int = 0):
        """The concatenation of the weights ``values`` along ``dim``, computed
        now (at rewrite time) and added to the program as a new constant
        input; a :class:`Value`, or None when a value is not a weight of the
        program (then the rule should decline). Reused for the same weights."""
        if self.driver is None:
            return None
        return self.driver.fold_cat(values, dim)

    def constant(self, value) -> Optional[torch.Tensor]:
        """The tensor ``value`` holds when it is a constant of the program (a
        parameter, buffer or lifted tensor constant, maybe copied by
        ``clone``/``lift_fresh_copy``), else None: a rule may read a small
        constant's value (e.g. a 0-d fill) to decide whether it applies."""
        n = getattr(value, "fx", None)
        weights = getattr(self.driver, "weights", None) or {}
        while n is not None and n.op == "call_function" and n.target in _COPIES and n.args:
            n = n.args[0] if isinstance(n.args[0], fx.Node) else None
        if n is None or n.op != "placeholder":
            return None
        return weights.get(n.name)

    def profitable(self, rule: str, *, dtype, variant: str = "default", **sizes) -> bool:
        """:func:`pypm_verified.torch.profitability.profitable` on this target
        (a refusal is recorded in :attr:`refusals`)."""
        if not self.check_profitability:
            return True
        # speed, not correctness: a symbolic size is asked with its example value
        sizes = {k: dynamic.hint(v) if isinstance(v, torch.SymInt) else v
                 for k, v in sizes.items()}
        why = profitability.refusal(rule, self.target, dtype=dtype, variant=variant, **sizes)
        if why is None:
            return True
        sites, frame = [], sys._getframe(1)
        while frame is not None and len(sites) < _REFUSAL_FRAMES:
            sites.append((frame.f_code.co_filename, frame.f_lineno))
            frame = frame.f_back
        self.refusals.append((tuple(sites), why))
        return False

    def explain(self, decline):
        """``decline`` (a :class:`~pypm_verified.dsl.rules.Decline`) with the
        reason of the profitability refusal recorded at its failing assert,
        if there is one."""
        for sites, why in reversed(self.refusals):
            if any(decline.covers(f, ln) for f, ln in sites):
                return decline.with_detail(why)
        return decline

    def __repr__(self):
        return (f"RuleContext(target={self.target!r}"
                + ("" if self.check_profitability else ", check_profitability=False") + ")")


class Value(TensorCode):
    """A bound value in a rule body: an FX value or a constant. It behaves
    as a tensor (:class:`~pypm_verified.dsl.symbolic.TensorCode`): ``torch.*``
    functions, operators and Tensor methods on it build ATen nodes.

    ``fx`` (the FX node, None for constants), ``is_const``, ``value`` (the
    constant's Python/torch value; for a list argument with FX elements, such
    as a view's sizes in a dynamic program, the list of the elements' values:
    numbers, ``torch.SymInt``s, tensors' Values; None for tensors), ``shape`` (a
    :class:`TensorShape`, None when unknown; in a program with dynamic
    shapes a symbolic size is its ``torch.SymInt``, whose comparisons are
    decided for every admissible size or decline the rule),
    ``rank``, ``dtype`` (``pm.f32`` ...), ``torch_dtype``, ``device``.
    """

    __slots__ = ("fx", "term", "is_const", "value", "meta", "symbolic")

    def __init__(self, term, fx_node: Optional[fx.Node], value=None, is_const=False,
                 symbolic: bool = False):
        self.symbolic = symbolic  # dynamic shapes: symbolic sizes as SymInts
        self.term = term
        self.fx = fx_node
        self.is_const = is_const
        self.value = value
        self.meta = fx_node.meta.get("val") if fx_node is not None else None

    @property
    def shape(self) -> Optional[TensorShape]:
        shape = self.term.shape
        # dynamic shapes (the term holds example values): the SymInts instead
        if self.symbolic and shape is not None and isinstance(self.meta, torch.Tensor) \
                and dynamic.is_symbolic(self.meta):
            return TensorShape(self.meta.shape)
        return shape

    @property
    def rank(self) -> Optional[int]:
        return self.term.rank

    @property
    def dtype(self):
        return self.term.dtype

    @property
    def torch_dtype(self) -> Optional[torch.dtype]:
        return getattr(self.meta, "dtype", None)

    @property
    def device(self) -> Optional[torch.device]:
        return getattr(self.meta, "device", None)

    def __repr__(self):
        if self.is_const:
            return f"<const {self.value!r}>"
        return f"<value {self.fx.name if self.fx is not None else '?'}{self.term.type_str()}>"


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


class _Builder:
    """What operator calls in a rule body build on: FX nodes in front of the
    root (the builder of :meth:`pypm_verified.Rule.fire`).

    With ``take_root_val``, the first node built whose ``meta["val"]`` is
    exactly the root's (same sizes, strides, offset, dtype, device,
    requires_grad) takes the root's fake tensor itself instead of a new one
    (usually the replacement of the root: same output); :meth:`settle` then
    gives it a fresh one unless it replaced the root and the root is gone. A
    call that may return a view of that node gives it a fresh one first, so
    that a view's value always views its argument's."""

    def __init__(self, driver: "Driver", root: fx.Node, rule, take_root_val: bool = False):
        self.driver = driver
        self.root = root
        self.rule = rule
        self.created: List[fx.Node] = []
        # (root's fake tensor, its metadata) while not lent to a node yet
        self._lend = _ownable_val(root, driver.fake_mode) if take_root_val else None
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
        if self.holder is not None and not _returns_fresh_tensor(target):
            read = []
            fx.node.map_arg((pos, kw), read.append)
            if self.holder in read:
                self._take_back()
        like = self._lend
        try:
            val = self.driver.meta_val(target, pos, kw, like)
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
            self.holder.meta["val"] = _fake_of(self.driver.fake_mode, self._lent_meta)
        self.holder = None


def _output_nodes(g: fx.Graph) -> List[fx.Node]:
    """The nodes ``g`` outputs, in order (constants in the output left out)."""
    nodes: List[fx.Node] = []
    for n in g.nodes:
        if n.op == "output":
            fx.node.map_arg(n.args, nodes.append)
    return nodes


def count_calls(g: fx.Graph) -> int:
    """Number of call nodes (what node counts report)."""
    return sum(1 for n in g.nodes if n.op.startswith("call"))


class Driver:
    """Rewrites the FX graph of ``gm`` (in place) with ``patterns``' rules.

    ``engine`` is "verified" (the Coq-extracted matcher) or "reference";
    ``target`` is "cuda" or "cpu" and ``check_profitability`` whether rules
    consult the measured table (both reach rules as their ``ctx``, a
    :class:`RuleContext`).

    ``observer`` (optional) is told of every match: ``observer.matched(
    pattern, node, match, term_graph)`` before its rules run, and on what it
    returns (if not None) ``.fired(rule name, created nodes)`` or
    ``.declined([(rule name, reason), ...])`` after (the HTML report,
    :mod:`.html`, draws the matches with it)."""

    def __init__(self, gm: fx.GraphModule, patterns: Sequence[Pattern], engine: str = "verified",
                 target: str = "cpu", max_iterations: int = 20, progress=None,
                 recompile: bool = True, check_profitability: bool = True, observer=None,
                 skip=None):
        check_engine(engine)
        self.skip = skip
        self.context = RuleContext(target, check_profitability)
        if not isinstance(max_iterations, int) or max_iterations < 1:
            raise ValueError("max_iterations must be a positive int")
        for p in patterns:
            if not isinstance(p, Pattern):
                raise TypeError(f"expected @pm.pattern patterns, not {p!r}")
        self.patterns = [p for p in patterns if p.rules and not p.is_multi]
        # multi-root patterns (theories/Multi.v): tried after the others
        self.multis = [p for p in patterns if p.rules and p.is_multi]
        self.context.driver = self
        # weights by placeholder name (set by the pipeline: fold_cat reads
        # them) and the constants fold_cat added: [(placeholder, tensor)]
        self.weights: Optional[Dict[str, torch.Tensor]] = None
        self.new_constants: List[Tuple[fx.Node, torch.Tensor]] = []
        self._folded: Dict[tuple, fx.Node] = {}
        self._pending_extra: set = set()  # refreshed by _try_multi: match them too
        self.gm = gm
        self.engine = engine
        self.target = target
        self.max_iterations = max_iterations
        self.progress = progress
        self.observer = observer
        self.recompile = recompile  # lint and regenerate gm's code at the end
        self.fake_mode = _fake_mode_of([n.meta.get("val") for n in gm.graph.nodes])
        graph_mode = self.fake_mode  # the metadata's own (None: no fake tensor in it)
        if self.fake_mode is None:
            from torch._subclasses.fake_tensor import FakeTensorMode
            self.fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
        self.report = RewriteReport(engine=engine, target=target)
        self.renamed: Dict[str, fx.Node] = {}  # replaced root's name -> its replacement
        # (rule, root, replacement) of every firing, for the rewrite validation
        self.firings: List[Tuple[str, fx.Node, fx.Node]] = []
        # the graph's outputs by name -> position: an output may also vanish by
        # hash-consing (the term graph merges equal pure nodes, at import and
        # after a rewrite), which ``renamed`` does not record
        self._output_at: Dict[str, int] = {}
        for i, n in enumerate(_output_nodes(gm.graph)):
            self._output_at.setdefault(n.name, i)
        self._stale: set = set()  # FX nodes whose arguments' terms changed
        self._match_labels: set = set()  # operators some pattern matched at (_look_ahead)
        self._meta_cache: Dict[tuple, tuple] = {}  # meta_val: argument metadata -> result's
        # dynamic shapes: the shape environment of the symbolic sizes (None: static)
        self.shape_env = dynamic.shape_env_of(gm, graph_mode)

    def replacement_name(self, name: str) -> str:
        """The current name of what the node once called ``name`` became: for
        an output of the graph, the node now at its place in the output (two
        outputs rewritten, or merged, into one node both name it)."""
        i = self._output_at.get(name)
        if i is not None:
            now = _output_nodes(self.gm.graph)
            if i < len(now):
                return now[i].name
        seen = set()
        while name in self.renamed and name not in seen:
            seen.add(name)
            name = self.renamed[name].name
        return name

    # ----------------------------------------------------------- helpers

    def value(self, node: fx.Node) -> Value:
        return Value(self.tg.term[node], node, symbolic=self.shape_env is not None)

    def sym_node(self, size, before: fx.Node, created: Optional[List[fx.Node]] = None
                 ) -> fx.Node:
        """The FX node computing the symbolic size ``size`` (a SymInt) for a
        replacement inserted before ``before``: an earlier node whose value is
        that size (e.g. ``sym_size_int``), else a new ``aten.sym_size.int`` of
        an earlier tensor having it as a dimension (appended to ``created``).
        A size no earlier node has declines the rule
        (:class:`~.dynamic.SizeUnknown`)."""
        want = dynamic.expr(size)
        tensor_dim = None
        for n in self.gm.graph.nodes:
            if n is before:
                break
            v = n.meta.get("val")
            if isinstance(v, torch.SymInt) and v.node.expr == want and n in self.tg.term:
                return n
            if tensor_dim is None and isinstance(v, torch.Tensor) and n in self.tg.term:
                for i, d in enumerate(v.shape):
                    if isinstance(d, torch.SymInt) and d.node.expr == want:
                        tensor_dim = (n, i, d)
                        break
        if tensor_dim is None:
            raise dynamic.SizeUnknown(f"no node computes the symbolic size {want} before "
                                      f"{before.name}")
        n, i, d = tensor_dim
        g = self.gm.graph
        with g.inserting_before(before):
            node = g.call_function(torch.ops.aten.sym_size.int, (n, i))
        node.meta["val"] = d
        kept = self.tg.add(node)
        if kept is node and created is not None:
            created.append(node)
        return kept

    def meta_val(self, target, pos, kw, like=None):
        """The ``meta["val"]`` of a new call ``target(*pos, **kw)``: the target
        run on the arguments' fake values (raises what it raises).

        A fake run costs milliseconds (a composite like SDPA decomposes); the
        same call on arguments of the same metadata (every layer of a model)
        gives a result of the same metadata, so for a target returning one
        fresh (non-aliasing) tensor of static sizes, the result's metadata is
        kept under the arguments' (:func:`_meta_key`) and a later call with
        the same key gets a new fake tensor of that metadata (~0.1 ms), or
        ``like[0]`` itself if given (``(fake tensor, its metadata)``, the
        metadata as the cache keeps it) and the metadata is the same
        (:class:`_Builder`: the matched root's value, for its replacement)."""
        key = _meta_key(target, pos, kw)
        if key is not None:
            hit = self._meta_cache.get(key)
            if hit is not None:
                if like is not None and like[1] == hit:
                    return like[0]
                return _fake_of(self.fake_mode, hit)
        fake = fx.node.map_arg((tuple(pos), kw), lambda n: n.meta["val"])
        with self.fake_mode, _no_fake_cache(self.fake_mode, self.shape_env):
            val = target(*fake[0], **fake[1])
        if key is not None:
            meta = _tensor_meta(val, self.fake_mode)
            if meta is not None:
                self._meta_cache[key] = meta
        return val

    def bound_value(self, term) -> object:
        """The :class:`Value` a rule receives for the bound term node ``term``."""
        if term.kind == "const":
            return Value(term, None, self.tg.const_values.get(term.id, term.value), True)
        node = self.tg.fx_of.get(term.id)
        if node is None:
            if term.kind == "op" and is_list_op(term.op):
                # a list argument with FX elements (a view's sizes with SymInts
                # in a dynamic program): the list of its elements' values
                return Value(term, None, [self._element(a) for a in term.args], True)
            raise RewriteError(f"term %{term.id} has no FX node")
        return Value(term, node, symbolic=self.shape_env is not None)

    def _element(self, term) -> object:
        """An element of a bound list: a constant's value, a symbolic
        scalar's ``SymInt``/``SymFloat``, or a tensor's :class:`Value`."""
        v = self.bound_value(term)
        if v.is_const:
            return v.value
        if isinstance(v.meta, (torch.SymInt, torch.SymFloat, torch.SymBool, int, float, bool)):
            return v.meta
        return v

    def _dce(self, start: List[fx.Node]) -> None:
        """Remove what became dead from ``start`` on: pure nodes without
        users, and the metadata asserts on them."""
        g, tg = self.gm.graph, self.tg
        term, erase = tg.term, tg.erase
        stack = list(start)
        while stack:
            n = stack.pop()
            if n.graph is not g or n not in term or n.op != "call_function" or not is_pure(n):
                continue
            users = list(n.users)
            if any(u.target is not ASSERT_METADATA for u in users):
                continue
            for u in users:
                erase(u)
            ins = n.all_input_nodes  # a new list
            erase(n)
            stack.extend(ins)

    # --------------------------------------------------------------- run

    def _matches(self, term):
        """``(pattern index, Match)`` at ``term``, in pattern order, trying
        only the patterns whose root can have ``term``'s label."""
        for i in self.pset.candidates(term.label):
            t0 = time.perf_counter()
            m = self.pset.match(i, term)
            self.report.match_s += time.perf_counter() - t0
            self.report.attempts += 1
            if m is not None:
                yield i, m

    def confirm(self, i: int, m, term) -> Optional[str]:
        """For a program with dynamic shapes, None if match ``m`` of pattern
        ``i`` (found on the sizes' example values) holds for every size the
        shape environment admits, else why not (:func:`.dynamic.confirm`).
        Always None for a static program."""
        if self.shape_env is None:
            return None
        prog = core.Program(self.pset._s.defs, self.pset._s.roots[i])
        t0 = time.perf_counter()
        try:
            return dynamic.confirm(prog, m.substitution, m.fsubstitution, term, self.tg,
                                   self.shape_env)
        finally:
            self.report.match_s += time.perf_counter() - t0

    def fold_cat(self, values, dim: int = 0) -> Optional[Value]:
        """See :meth:`RuleContext.fold_cat`."""
        if self.weights is None or self.shape_env is not None:
            return None
        names, tensors = [], []
        for v in values:
            n = getattr(v, "fx", None)
            if n is None or n.op != "placeholder" or n.name not in self.weights:
                return None
            names.append(n.name)
            tensors.append(self.weights[n.name])
        key = (tuple(names), dim)
        node = self._folded.get(key)
        if node is None or node.graph is not self.gm.graph:
            t = torch.cat([x.detach() for x in tensors], dim).contiguous()
            g = self.gm.graph
            users = [n for n in g.nodes if n.op == "placeholder" and n.name in self.user_inputs]
            anchor = users[0] if users else next(n for n in g.nodes if n.op != "placeholder")
            with g.inserting_before(anchor):
                node = g.placeholder(f"c_pypm_fused_{len(self.new_constants)}")
            with self.fake_mode:
                node.meta["val"] = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype,
                                                       device=t.device)
            self.tg.add(node)
            self.new_constants.append((node, t))
            self.weights[node.name] = t
            self._folded[key] = node
        return self.value(node)

    user_inputs: frozenset = frozenset()
    validation = None  # the rewrite validator of the run (rewriting/validate.py), or None
    _matching = None  # (pattern index, match, root, values) of the rules being tried

    def _try(self, node: fx.Node) -> Optional[List[fx.Node]]:
        """Try every pattern at ``node``; the nodes a firing changed, or None."""
        term = self.tg.term.get(node)
        if term is None:
            return None
        changed = self._try_single(node, term)
        if changed is None and self.multis:
            changed = self._try_multi(node, term)
        return changed

    def _try_multi(self, node: fx.Node, term) -> Optional[List[fx.Node]]:
        """The multi-root patterns with their first root at ``node``."""
        from ..engines import multi
        if self._stale:
            # the other roots may be nodes the walk has not refreshed yet:
            # bring every term up to date before searching among them
            self._pending_extra.update(self.tg.refresh(list(self._stale)))
            self._stale.clear()
        for pattern in self.multis:
            prog = multi.program(pattern)
            if not core.root_admits(prog.defs, prog.roots[0], term.label):
                continue
            t0 = time.perf_counter()
            m = multi.match_multi(pattern, term, self.engine, self.pset.fuel)
            self.report.match_s += time.perf_counter() - t0
            self.report.attempts += 1
            if m is None:
                continue
            self.report.record_match(pattern.name, [r.name for r in pattern.rules])
            declined: List[Tuple[str, str]] = []
            why = self._multi_blocked(m)
            if why is not None:
                declined = [(r.name, why) for r in pattern.rules]
            else:
                values = {k: self.bound_value(t) for k, t in m.bindings.items()}
                values.update(m.functions)
                for rule in pattern.rules:
                    changed = self.fire_multi(rule, values, m, declined)
                    if changed is not None:
                        return changed
            self.report.record_unfired(pattern.name, declined)
        return None

    def _multi_blocked(self, m) -> Optional[str]:
        """Why a multi-root match must not be rewritten, or None: an interior
        node of the matched subgraphs (not a root, not bound to a variable)
        used outside them would stay alive beside the fused replacement (the
        rewrite would be correct but compute it twice), so nothing is done."""
        roots = [self.tg.fx_of.get(t.id) for t in m.roots]
        if any(r is None for r in roots):
            return "a root has no FX node"
        stops = {self.tg.fx_of.get(t.id) for t in m.substitution.values()}
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
        roots = [self.tg.fx_of[t.id] for t in m.roots]
        order = {n: i for i, n in enumerate(self.gm.graph.nodes)}
        first = min(roots, key=order.__getitem__)
        b = _Builder(self, first, rule)
        if self.validation is not None:  # checked in a segment of its own
            self.validation.before_multi()
        ctx = self.context
        ctx.refusals.clear()

        def on_decline(d):
            declined.append((rule.name, ctx.explain(d).reason))

        def undo():
            for n in reversed(b.created):
                if n.graph is self.gm.graph and not n.users:
                    self.tg.erase(n)

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
            raise PatternError(f"rule {rule.name!r} ({rule.where}) returned {out!r}; a "
                               f"multi-root rule returns one tensor per root ({len(roots)})")
        created = set(b.created)
        order = {n: i for i, n in enumerate(self.gm.graph.nodes)}
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
                    or not _same_sizes(old_val, new_val, False)
                    or old_val.dtype != new_val.dtype):
                undo()
                raise RewriteError(f"rule {rule.name!r} ({rule.where}) replaced {root.name} "
                                   f"({_desc(old_val)}) with a value of {_desc(new_val)}")
        for root, v in zip(roots, out):
            if v.fx is root:
                continue
            root.replace_all_uses_with(v.fx, delete_user_cb=lambda u: u not in created)
            self.renamed[root.name] = v.fx
            self.firings.append((rule.name, root, v.fx))
        checker = getattr(self, "validation", None)
        if checker is not None:
            checker.fired_multi(rule.name, roots)
        self.report.record_firing(rule.name, roots[0].name, out[0].fx.name)
        done = [n for n in b.created if n.graph is self.gm.graph and n in self.tg.term]
        self._dce(roots)
        for v in out:
            self._stale.update(v.fx.users)
        return done

    def _try_single(self, node: fx.Node, term) -> Optional[List[fx.Node]]:
        for i, m in self._matches(term):
            pattern = self.patterns[i]
            self._match_labels.add(term.label)
            self.report.record_match(pattern.name, [r.name for r in pattern.rules])
            seen = None if self.observer is None else \
                self.observer.matched(pattern, node, m, self.tg)
            why = self.confirm(i, m, term)
            if why is not None:  # holds for the example sizes only: no rule may fire
                self.report.record_unfired(pattern.name, [(r.name, why) for r in pattern.rules])
                if seen is not None:
                    seen.declined([(r.name, why) for r in pattern.rules])
                continue
            values = {k: self.bound_value(t) for k, t in m.bindings.items()}
            values.update(m.functions)
            self._matching = (i, m, node, values)  # the rewrite validator's certificate
            declined: List[Tuple[str, str]] = []
            illegal = {}  # interior policy -> refusal (legality.py), computed on demand
            for rule in pattern.rules:
                if self.skip is not None and self.skip(rule.name, node.name):
                    declined.append((rule.name, "skipped by the search"))
                    continue
                policy = getattr(rule, "interior", "duplicate")
                if policy != "duplicate":
                    if policy not in illegal:
                        illegal[policy] = self.interior_refusal(pattern, m, node, policy)
                    if illegal[policy] is not None:
                        declined.append((rule.name, illegal[policy]))
                        continue
                changed = self.fire_at(rule, values, node, declined)
                if changed is not None:
                    if seen is not None:
                        seen.fired(rule.name, changed)
                    return changed
            # no rule fired on this match: the report says why, rule by rule
            self.report.record_unfired(pattern.name, declined)
            if seen is not None:
                seen.declined(declined)
        return None

    def interior_refusal(self, pattern, m, root: fx.Node, policy: str) -> Optional[str]:
        """Why ``policy`` refuses match ``m`` at ``root`` because a node it
        covers is used outside it (:func:`.legality.verdict`), or None."""
        from . import legality
        from .html import cover_terms
        bound = {t.id for t in m.bindings.values()}
        region = {root}
        for t in cover_terms(pattern, m):
            n = self.tg.fx_of.get(t.id)
            if n is not None and n.op == "call_function" and t.id not in bound:
                region.add(n)
        return legality.verdict(region, root, policy)[0]

    def fire_at(self, rule, values, root: fx.Node,
                declined: Optional[List[Tuple[str, str]]] = None) -> Optional[List[fx.Node]]:
        """Fire ``rule`` at ``root``: the nodes it created, or None when it
        does not fire -- then ``(rule name, reason)`` is appended to
        ``declined`` if given."""
        if declined is None:
            declined = []
        b = _Builder(self, root, rule, take_root_val=True)
        checker = getattr(self, "validation", None)
        if checker is not None:  # the match, read in the graph the validator checks
            b.trace = checker.attempt(root)
        ctx = self.context
        ctx.refusals.clear()

        def on_decline(d):
            declined.append((rule.name, ctx.explain(d).reason))

        try:
            with dynamic.no_new_guards(self.shape_env):
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
                if n.graph is self.gm.graph and not n.users:
                    self.tg.erase(n)
            b.settle(None)
            raise
        if out is not None and self.shape_env is not None and isinstance(out, Value) \
                and out.fx is not None and out.fx is not root:
            why = self._same_shape(root, out.fx, rule)
            if why is not None:
                declined.append((rule.name, why))
                out = None
        if out is None or (isinstance(out, Value) and out.fx is root):
            if out is not None:
                declined.append((rule.name, "returned the matched root (no change) "
                                            f"[{short_path(rule.where)}]"))
            for n in reversed(b.created):
                if not n.users:
                    self.tg.erase(n)
            b.settle(None)
            return None
        if not isinstance(out, Value) or out.fx is None:
            b.settle(None)
            raise PatternError(f"rule {rule.name!r} ({rule.where}) returned {out!r}; a torch "
                               "rule returns a tensor built by calling operators")
        new = out.fx
        old_val, new_val = root.meta.get("val"), new.meta.get("val")
        if isinstance(old_val, torch.Tensor) and (
                not isinstance(new_val, torch.Tensor)
                or not _same_sizes(old_val, new_val, self.shape_env is not None)
                or old_val.dtype != new_val.dtype):
            b.settle(None)
            raise RewriteError(
                f"rule {rule.name!r} ({rule.where}) replaced {root.name} "
                f"({_desc(old_val)}) with a value of {_desc(new_val)}")
        root.replace_all_uses_with(new, delete_user_cb=lambda u: u is not new)
        self.renamed[root.name] = new
        self.firings.append((rule.name, root, new))
        if checker is not None:  # its certificate: the match and the template it built
            checker.fired(rule.name, root, out, b.trace, values)
        self.report.record_firing(rule.name, root.name, new.name)
        created = [n for n in b.created if n.graph is self.gm.graph and n in self.tg.term]
        self._dce([root])
        b.settle(new)
        # the users' terms are stale: re-imported when the walk reaches them
        self._stale.update(new.users)
        return created

    def _same_shape(self, root: fx.Node, new: fx.Node, rule) -> Optional[str]:
        """Dynamic shapes: None if ``new``'s shape is ``root``'s at every
        admissible size; why not if that is not statically known; a
        :class:`RewriteError` if it is known to differ."""
        old_val, new_val = root.meta.get("val"), new.meta.get("val")
        if not (isinstance(old_val, torch.Tensor) and isinstance(new_val, torch.Tensor)) \
                or old_val.dim() != new_val.dim():
            return None
        attrs = dynamic.SymbolicAttrs(self.tg, self.shape_env)
        import sympy
        for a, b in zip(old_val.shape, new_val.shape):
            v = attrs.decide(sympy.Eq(dynamic.expr(a), dynamic.expr(b)))
            if v is False:
                raise RewriteError(
                    f"rule {rule.name!r} ({rule.where}) replaced {root.name} "
                    f"({_desc(old_val)}) with a value of {_desc(new_val)}")
            if v is not True:
                return (f"the replacement's size {b} is not statically known to equal the "
                        f"matched node's {a} for the program's dynamic shapes "
                        f"[{short_path(rule.where)}]")
        return None

    def _could_match(self, nodes: List[fx.Node]) -> bool:
        """Whether a pattern matches at one of ``nodes`` (what the next pass
        would try). Rules are not run: a match whose rules would all decline
        still counts, so a reported cap may be conservative, never missed."""
        for node in nodes:
            term = self.tg.term.get(node)
            if term is not None and next(self._matches(term), None) is not None:
                return True
        return False

    def prepare(self) -> None:
        """Import the FX graph as a term graph (``tg``) and prepare the
        patterns (``pset``); :meth:`run` starts with it, tools that fire
        rules one at a time (:meth:`fire_at`) call it themselves."""
        self.tg = TermGraph(self.gm.graph, size_hints=self.shape_env is not None).build()
        self.pset = PatternSet(self.patterns, self.engine)
        self.report.merged = self.tg.merged

    #: how many FX nodes past a re-imported one the walk re-imports at once
    #: (0: one at a time, as it reaches them); see :meth:`_look_ahead`
    lookahead: int = 64

    def _look_ahead(self, node: fx.Node, pending: set) -> None:
        """Re-import now the stale nodes among the ``lookahead`` FX nodes that
        follow ``node`` (those the walk would re-import when it reaches them,
        as their arguments' terms changed): the engine's copy of the term
        graph is then extended once for the batch, not once per node (a
        ``pypm_graph_extend`` call before nearly every match). Exact: a
        firing before the walk reaches one of them makes it stale again
        (re-imported then, as without look-ahead); a node that would merge
        with an earlier one stops the look-ahead (merging is left to the
        walk, which merges only what it would merge without look-ahead)."""
        tg, stale, term = self.tg, self._stale, self.tg.term
        n = node.next
        for _ in range(self.lookahead):
            if n.op == "root":
                return
            if n in stale and n in term:
                if term[n].label in self._match_labels:
                    return  # a rule may fire there: what follows may change again
                kind, users = tg.reimport(n, merge=False)
                if kind == "would merge":
                    return
                stale.discard(n)
                stale.update(users)
                if kind == "changed":
                    pending.add(n)
            n = n.next

    def run(self) -> RewriteReport:
        """Rewrite to a fixpoint (or the iteration cap); returns the report."""
        t_start = time.perf_counter()
        g = self.gm.graph
        self.report.nodes_before = count_calls(g)
        self.prepare()
        work = [n for n in g.nodes if n.op == "call_function"]
        term = self.tg.term
        from ..rewriting import validate
        # each pass validated (None: turned off); its time in .validation.seconds
        self.validation = checker = validate.fx_checker(self)
        while work and self.report.iterations < self.max_iterations:
            self.report.iterations += 1
            if checker is not None:
                checker.begin()
            dirty: List[fx.Node] = []
            pending = set(work)
            for node in list(g.nodes):
                if node not in term:
                    continue  # erased by an earlier firing
                if node in self._stale:
                    # Lazy refresh: a firing replaced one of its arguments.
                    # Its arguments come earlier, so they are current now.
                    self._stale.discard(node)
                    kind, users = self.tg.reimport(node)
                    self._stale.update(users)
                    if kind == "merged":
                        continue
                    if kind == "changed":  # a new term: match it in this pass
                        pending.add(node)
                        if self.lookahead and term[node].label not in self._match_labels:
                            self._look_ahead(node, pending)
                if node not in pending and node not in self._pending_extra:
                    continue
                self._pending_extra.discard(node)
                changed = self._try(node)
                if changed:
                    dirty.extend(changed)
                if self.progress is not None:
                    self.progress()
            dirty.extend(self._pending_extra)
            self._pending_extra.clear()
            if self._stale:  # users of nodes created after the walk passed
                dirty.extend(self.tg.refresh(list(self._stale)))
                self._stale.clear()
            if checker is not None:
                checker.end(self.report.iterations)
            work = sorted({n for n in dirty if n in term})
        # the cap cut the rewrite short only if another pass had something to
        # do: a pattern matches at a node it would try (matching only)
        self.report.cap_hit = bool(work) and self._could_match(work)
        self.report.merged = self.tg.merged  # at import and after firings
        if self.recompile:
            g.lint()
            self.gm.recompile()
        self.report.nodes_after = count_calls(g)
        self.report.total_s = time.perf_counter() - t_start
        # validated (passes checked), or why not: never a silent bypass
        self.report.validation = validation_status(checker, "pass")
        return self.report


def _fake_mode_of(vals) -> Optional[object]:
    """``torch._guards.detect_fake_mode`` of the tensors among ``vals`` (the
    graph's ``meta["val"]`` s), without its per-tensor pytree walk in the
    common case: no tracing context or active mode, every tensor a plain
    FakeTensor of one fake mode (~1 ms saved on 600 nodes)."""
    from torch._subclasses.fake_tensor import FakeTensor
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack
    tensors = [v for v in vals if isinstance(v, torch.Tensor)]
    if torch._guards.TracingContext.try_get() is None and not _get_current_dispatch_mode_stack():
        modes = {id(t.fake_mode): t.fake_mode for t in tensors if type(t) is FakeTensor}
        if len(modes) == 1 and all(type(t) is FakeTensor for t in tensors):
            return next(iter(modes.values()))
    return torch._guards.detect_fake_mode(tensors)


def _same_sizes(a: torch.Tensor, b: torch.Tensor, decided: bool) -> bool:
    """Whether the shapes are equal, without guarding: symbolic sizes are
    equal only if ``decided`` (:meth:`Driver._same_shape` proved them equal
    for every admissible size, or the rule declined); in a static program a
    symbolic size (e.g. data-dependent) never equals a static one."""
    if not (a._has_symbolic_sizes_strides or b._has_symbolic_sizes_strides):
        return a.shape == b.shape  # int sizes only (the common case, ~20x faster)
    if a.dim() != b.dim():
        return False
    for x, y in zip(a.shape, b.shape):
        if dynamic.is_symbolic(x) or dynamic.is_symbolic(y):
            if decided:
                continue
            return False
        if int(x) != int(y):
            return False
    return True


_FRESH: Dict[object, bool] = {}  # target -> returns one tensor aliasing no input


def _returns_fresh_tensor(target) -> bool:
    fresh = _FRESH.get(target)
    if fresh is None:
        schema = getattr(target, "_schema", None)
        fresh = (isinstance(target, torch._ops.OpOverload) and schema is not None
                 and not schema.is_mutable and len(schema.returns) == 1
                 and schema.returns[0].alias_info is None
                 and str(schema.returns[0].type) == "Tensor")
        _FRESH[target] = fresh
    return fresh


_SCALARS = (bool, int, float, str, type(None), torch.dtype, torch.device, torch.layout,
            torch.memory_format)


def _arg_key(a):
    """The part of a call's key an argument gives (None: not cacheable).
    Scalars carry their type (``2`` and ``2.0`` promote differently)."""
    if isinstance(a, fx.Node):
        v = a.meta.get("val")
        # one flag for "a size, stride or the offset is symbolic" (cheaper
        # than testing each); a layout other than strided has no strides
        if not isinstance(v, torch.Tensor) or v._has_symbolic_sizes_strides \
                or v.layout is not torch.strided or getattr(v, "constant", None) is not None:
            return None
        return ("T", v.shape, v.stride(), v.dtype, v.device, v.storage_offset(), v.requires_grad)
    if isinstance(a, (list, tuple)):
        ks = tuple(_arg_key(e) for e in a)
        return None if any(k is None for k in ks) else (type(a).__name__, ks)
    if isinstance(a, _SCALARS) and not isinstance(a, torch.SymInt):
        return (type(a).__name__, a)
    return None


def _no_fake_cache(fake_mode, shape_env):
    """Dynamic shapes: the fake run of a replacement without the fake-tensor
    dispatch cache. Filling a cache entry re-makes the output from its
    metadata (``empty.set_(storage, offset, sizes, strides)`` for a view:
    ``expand`` of a where's operands), whose contiguity flags ask size
    questions (``Eq(batch, 1)``) under ``suppress_guards``: torch does not
    record them, the output's sizes do not depend on them, but under
    ``error_on_new_guards`` they raise and would decline the rule. Static
    programs keep the cache."""
    if shape_env is None or not hasattr(fake_mode, "cache_enabled"):
        return contextlib.nullcontext()
    from torch._subclasses.fake_tensor import disable_fake_tensor_cache
    return disable_fake_tensor_cache(fake_mode)


def _meta_key(target, pos, kw) -> Optional[tuple]:
    """The key of :meth:`Driver.meta_val`'s cache for ``target(*pos, **kw)``,
    None when the call is not cached: a target that may alias or mutate, or
    returns other than one tensor; an argument that is not a tensor of
    static metadata or a plain constant; a tensor with known contents (a
    fake constant: an output's size could depend on it)."""
    if not _returns_fresh_tensor(target):
        return None
    parts = []
    for a in list(pos) + [kw[k] for k in sorted(kw)]:
        k = _arg_key(a)
        if k is None:
            return None
        parts.append(k)
    # factories read the default dtype, requires_grad reads the grad mode
    return (target, tuple(sorted(kw)), tuple(parts), torch.get_default_dtype(),
            torch.is_grad_enabled())


def _tensor_meta(val, fake_mode) -> Optional[tuple]:
    from torch._subclasses.fake_tensor import FakeTensor
    if type(val) is not FakeTensor or val.fake_mode is not fake_mode:
        return None
    shape, stride, off = tuple(val.shape), val.stride(), val.storage_offset()
    if not all(type(d) is int for d in shape + stride) or off != 0 \
            or val.is_conj() or val.is_neg() or val.layout is not torch.strided:
        return None
    return (shape, stride, off, val.dtype, val.device, val.requires_grad)


def _ownable_val(node: fx.Node, fake_mode) -> Optional[tuple]:
    """``(val, metadata)`` of ``node``'s ``meta["val"]`` if a replacement of
    ``node`` may take that fake tensor as its own: a plain fake tensor of
    ``fake_mode`` with static metadata (:func:`_tensor_meta`) and its own
    storage. A tensor shares storage only with what it is a view of (its
    inputs', directly or through them) or views of it (its users, which
    then view the replacement); ``_unsafe_view`` shares its input's storage
    without a view's ``_base``, so the storages are compared. Else None."""
    val = node.meta.get("val")
    meta = _tensor_meta(val, fake_mode)
    if meta is None or val.constant is not None or val._base is not None:
        return None
    mine = val.untyped_storage()._cdata
    for a in node.all_input_nodes:
        v = a.meta.get("val")
        if isinstance(v, torch.Tensor) and v.layout is torch.strided and \
                v.untyped_storage()._cdata == mine:
            return None
    return val, meta


def _fake_of(fake_mode, meta):
    """A new fake tensor (own storage, offset 0) of the metadata ``meta``."""
    from torch._subclasses.fake_tensor import FakeTensor
    shape, stride, _, dtype, device, requires_grad = meta
    with torch._C._DisableTorchDispatch():
        elem = torch.empty_strided(shape, stride, dtype=dtype, device="meta")
    out = FakeTensor(fake_mode, elem, device)
    if requires_grad:
        out.requires_grad_(True)
    return out


def _desc(v) -> str:
    if isinstance(v, torch.Tensor):
        return f"shape {tuple(v.shape)}, dtype {v.dtype}"
    return type(v).__name__


def _warn_if_not_aten(gm: fx.GraphModule) -> None:
    """Warn when ``gm`` calls things but no ATen operator: a torch-level
    graph (``torch.fx.symbolic_trace``), which no rule over ATen ops matches."""
    calls = [n for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]
    if not calls or any(isinstance(n.target, torch._ops.OpOverload) for n in calls):
        return
    shown = sorted({getattr(n.target, "__name__", None) or str(n.target) for n in calls})
    more = ", ..." if len(shown) > 4 else ""
    warnings.warn(
        f"the graph calls no ATen operator (it calls {', '.join(shown[:4])}{more}: a "
        "torch-level graph, e.g. from torch.fx.symbolic_trace), so no rule over ATen ops "
        "can match it; export the model instead: torch.export.export(model, args)"
        ".run_decompositions({}), and rewrite that program (or its graph_module)",
        RewriteWarning, stacklevel=3)


def rewrite_graph_module(gm, patterns: Sequence[Pattern],
                         engine: str = "verified", target: str = "cpu",
                         max_iterations: int = 20, recompile: bool = True,
                         check_profitability: bool = True) -> RewriteReport:
    """Rewrite ``gm`` in place with the rules of ``patterns``; the report.
    ``recompile=False`` leaves ``gm.recompile()`` (and the graph lint) to the
    caller.

    ``gm`` is an ATen-level ``fx.GraphModule`` (an exported program's
    ``graph_module``) or a ``torch.export.ExportedProgram``, rewritten in
    place as well: its graph, the output names of its signature (a rewritten
    output is renamed), and the weights rules concatenated (new constants of
    the program). A graph calling no ATen operator (``torch.fx.symbolic_trace``
    of a model) warns with :class:`~pypm_verified.errors.RewriteWarning`:
    rules over ATen ops cannot match it."""
    ep = None
    exported = getattr(torch.export, "ExportedProgram", None)
    if exported is not None and isinstance(gm, exported):
        ep, gm = gm, gm.graph_module
    elif not isinstance(gm, fx.GraphModule):
        raise TypeError(f"rewrite_graph_module() needs a torch.fx.GraphModule or a "
                        f"torch.export.ExportedProgram, not {type(gm).__name__}")
    _warn_if_not_aten(gm)
    driver = Driver(gm, patterns, engine, target, max_iterations, recompile=recompile,
                    check_profitability=check_profitability)
    if ep is None:
        return driver.run()
    from .pipeline import run_on_program  # the pipeline's program bookkeeping
    return run_on_program(driver, ep)


__all__ = ["Driver", "RewriteError", "RuleContext", "Value", "rewrite_graph_module",
           "count_calls"]
