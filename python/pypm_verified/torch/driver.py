"""The rewrite driver on FX graphs (the paper's §2.4).

Walk the nodes in graph order; at each, try the patterns in the given order
(on the term graph, either engine, skipping patterns whose root operator
differs from the node's: :meth:`pypm_verified.engines.PatternSet.candidates`,
and a node whose operator no pattern's root can have without a try:
:meth:`Driver._root_labels`; the native reader's ``walk`` passes over the
other nodes and re-imports the stale ones); on a match,
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
operator, purity) when only its arguments changed. The engine's copy of
the term graph is extended when a match needs it, so only at the nodes
the shapes index leaves candidates (``PatternSet.candidates_at``); the walk
can also re-import the stale nodes just ahead of it in one batch
(``Driver.lookahead``, off by default: with the shapes index it no longer
saves extensions). The next pass matches only the nodes rules created;
passes repeat until none fires, at most ``max_iterations`` (reported, never
a hang).

Dynamic shapes (a program exported with symbolic sizes): the engine matches
on the sizes' example values, every match is then re-decided for every size
the program's shape environment admits, rule bodies see ``torch.SymInt``
sizes and cannot guard on a fact that is not statically known, and
replacements keep the symbols (:mod:`.dynamic`).

The driver is the walk and its bookkeeping; it composes one collaborator
per job: :mod:`.firing` (a rule's firing, single- and multi-root, and the
:class:`~.firing.Builder` its operator calls build on), :mod:`.metadata`
(the new nodes' fake tensors), :mod:`.deadcode` (what a firing left dead),
:mod:`.folding` (``ctx.fold_cat``'s weights) and :mod:`.rule_api` (what a
rule body receives: :class:`Value`, :class:`RuleContext`,
:class:`RewriteError`; re-exported here).
"""
from __future__ import annotations

import time
import warnings
from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.fx as fx

from .. import _native, core
from ..dsl.patterns import Pattern
from ..engines.matching import PatternSet, check_engine
from ..errors import RewriteWarning
from ..rewriting.report import RewriteReport, validation_status
from . import dynamic
from .deadcode import ASSERT_METADATA, remove_dead
from .firing import Builder, Firing, schema_call, sym_node
from .folding import WeightFolder
from .importer import TermGraph, is_list_op
from .metadata import MetaValues
from .rule_api import TARGETS, RewriteError, RuleContext, Value


def _output_nodes(g: fx.Graph) -> List[fx.Node]:
    """The nodes ``g`` outputs, in order (constants in the output left out)."""
    nodes: List[fx.Node] = []
    for n in g.nodes:
        if n.op == "output":
            fx.node.map_arg(n.args, nodes.append)
    return nodes


# target -> (target, the (position, name) of each argument its schema writes)
_WRITES: Dict[int, tuple] = {}


def _written(node: fx.Node) -> List[object]:
    """The arguments a call writes in place (its schema's ``Tensor(a!)``)."""
    t = node.target
    hit = _WRITES.get(id(t))
    if hit is None or hit[0] is not t:
        schema = getattr(t, "_schema", None) if isinstance(t, torch._ops.OpOverload) else None
        hit = (t, () if schema is None else tuple(
            (i, a.name) for i, a in enumerate(schema.arguments)
            if a.alias_info is not None and a.alias_info.is_write))
        _WRITES[id(t)] = hit
    out: List[object] = []
    for i, name in hit[1]:
        a = node.args[i] if i < len(node.args) else node.kwargs.get(name)
        out.extend(a if isinstance(a, (list, tuple)) else [a])
    return out


def in_place_write(g: fx.Graph) -> Optional[Tuple[fx.Node, object]]:
    """The first call of ``g`` that writes a tensor in place, with the
    argument it writes, or None. A write into an input (a placeholder) at
    that input's last use is not one: every other node reads the input
    before it (``copy_`` of a mutated input at the end of a graph)."""
    order, writes = None, _WRITES
    for n in g.nodes:
        if n.op != "call_function":
            continue
        hit = writes.get(id(n.target))
        if hit is not None and hit[0] is n.target and not hit[1]:
            continue  # the common case: a target that writes nothing
        for a in _written(n):
            if not isinstance(a, fx.Node):
                continue
            if a.op == "placeholder":
                if order is None:
                    order = {m: k for k, m in enumerate(g.nodes)}
                if all(order[u] <= order[n] for u in a.users):
                    continue
            return n, a
    return None


def count_calls(g: fx.Graph) -> int:
    """Number of call nodes (what node counts report)."""
    return sum(1 for n in g.nodes if n.op.startswith("call"))


class Driver:
    """Rewrites the FX graph of ``gm`` (in place) with ``patterns``' rules.

    ``engine`` is "verified" (the Coq-extracted matcher, with the native
    reader of :mod:`pypm_verified._native` when it is built) or "reference"
    (the Python reference matcher and the Python reader throughout: the
    independent path the differential tests hold the native one equal to);
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
        # the collaborators: ctx.fold_cat's weights, the new nodes' fake
        # tensors (and the shape environment), the firing of rules
        self.folding = WeightFolder(self)
        self._pending_extra: set = set()  # refreshed by _try_multi: match them too
        self.gm = gm
        self.engine = engine
        self.native = engine == "verified"  # the native reader's paths (_native.paths)
        self.target = target
        self.max_iterations = max_iterations
        self.progress = progress
        self.observer = observer
        self.recompile = recompile  # lint and regenerate gm's code at the end
        self.metadata = MetaValues(gm)
        self.firing = Firing(self)
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
        # FX nodes whose arguments' terms changed (a firing marks its
        # replacement's users): re-imported when the walk reaches them
        self.stale: set = set()
        self._match_labels: set = set()  # operators some pattern matched at (_look_ahead)
        # dynamic shapes: the shape environment of the symbolic sizes (None: static)
        self.shape_env = self.metadata.shape_env
        self.fake_mode = self.metadata.fake_mode  # the new nodes' fake tensors' mode

    validation = None  # the rewrite validator of the run (rewriting/validate.py), or None
    #: (pattern index, match, root, values) of the rules being tried at a node:
    #: the rewrite validator's certificate of a firing (rewriting/validate.py)
    matching = None

    @property
    def _matching(self):
        """The name :mod:`~pypm_verified.rewriting.validate` reads:
        :attr:`matching`."""
        return self.matching

    @_matching.setter
    def _matching(self, value) -> None:
        self.matching = value

    # -------------------------------------------- ctx.fold_cat's weights

    @property
    def weights(self) -> Optional[Dict[str, torch.Tensor]]:
        """The program's weights by placeholder name (set by the pipeline:
        ``ctx.fold_cat`` and ``ctx.constant`` read them; None: unknown)."""
        return self.folding.weights

    @weights.setter
    def weights(self, value) -> None:
        self.folding.weights = value

    @property
    def user_inputs(self) -> frozenset:
        """The names of the program's user inputs (set by the pipeline)."""
        return self.folding.user_inputs

    @user_inputs.setter
    def user_inputs(self, value) -> None:
        self.folding.user_inputs = value

    @property
    def new_constants(self) -> List[Tuple[fx.Node, torch.Tensor]]:
        """The constants ``ctx.fold_cat`` added: ``[(placeholder, tensor)]``."""
        return self.folding.new_constants

    @property
    def folded(self) -> Dict[tuple, fx.Node]:
        """(weight names, dim) -> the placeholder of their concatenation."""
        return self.folding.folded

    _folded = folded  # the name checking/evaluate.py reads

    def fold_cat(self, values, dim: int = 0) -> Optional[Value]:
        """See :meth:`RuleContext.fold_cat` (:class:`~.folding.WeightFolder`)."""
        return self.folding.fold_cat(values, dim)

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
        """The FX node computing the symbolic size ``size`` before ``before``
        (:func:`.firing.sym_node`)."""
        return sym_node(self.gm.graph, self.tg, size, before, created)

    def meta_val(self, target, pos, kw, like=None):
        """The ``meta["val"]`` of a new call ``target(*pos, **kw)``
        (:meth:`.metadata.MetaValues.val`: a fake run, its result's
        metadata cached)."""
        return self.metadata.val(target, pos, kw, like)

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

    def remove_dead(self, start: List[fx.Node]) -> None:
        """Remove what became dead from ``start`` on (:func:`.deadcode.remove_dead`)."""
        remove_dead(self.gm.graph, self.tg, start)

    # --------------------------------------------------------------- run

    def _matches(self, term):
        """``(pattern index, Match)`` at ``term``, in pattern order, trying
        only the patterns whose root can have ``term``'s label and whose
        root's arguments can have its arguments' labels
        (:meth:`PatternSet.candidates_at`)."""
        cands = self.pset.candidates_at(term)
        k, report = 0, self.report
        while k < len(cands):
            t0 = time.perf_counter()
            got = self.pset.first_match(cands, term, k)  # one engine call for the run
            report.match_s += time.perf_counter() - t0
            if got is None:
                report.attempts += len(cands) - k
                return
            j, m = got
            report.attempts += j + 1 - k
            k = j + 1
            yield cands[j], m

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
        if self.stale:
            # the other roots may be nodes the walk has not refreshed yet:
            # bring every term up to date before searching among them
            self._pending_extra.update(self.tg.refresh(list(self.stale)))
            self.stale.clear()
        for pattern in self.multis:
            prog = multi.program(pattern)
            if not core.root_admits(prog.defs, prog.roots[0], term):
                continue
            t0 = time.perf_counter()
            m = multi.match_multi(pattern, term, self.engine, self.pset.fuel)
            self.report.match_s += time.perf_counter() - t0
            self.report.attempts += 1
            if m is None:
                continue
            self.report.record_match(pattern.name, [r.name for r in pattern.rules])
            declined: List[Tuple[str, str]] = []
            why = self.firing.multi_blocked(m)
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

    def fire_multi(self, rule, values, m, declined) -> Optional[List[fx.Node]]:
        """Fire a multi-root rule (:meth:`.firing.Firing.fire_multi`): it
        returns one replacement per root; all roots are replaced at once,
        the replacement built before the first root in graph order (so it
        precedes every use of every root), and only if every node it reads
        is defined there."""
        return self.firing.fire_multi(rule, values, m, declined)

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
            self.matching = (i, m, node, values)  # the rewrite validator's certificate
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
        """Fire ``rule`` at ``root`` (:meth:`.firing.Firing.fire_single`): the
        nodes it created, or None when it does not fire -- then ``(rule
        name, reason)`` is appended to ``declined`` if given."""
        with _native.paths(self.native):
            return self.firing.fire_single(rule, values, root, declined)

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
        with _native.paths(self.native):
            self._prepare()

    def _prepare(self) -> None:
        w = in_place_write(self.gm.graph)
        if w is not None:
            n, a = w
            raise RewriteError(
                f"the graph writes a tensor in place: {n.name} = {n.target}(...) writes "
                f"{getattr(a, 'name', a)}; the rewrite (its sharing of equal nodes, each "
                "rule's replacement) assumes a functional graph: functionalize it first "
                "(torch.export, or torch.func.functionalize before make_fx)")
        self.tg = TermGraph(self.gm.graph, size_hints=self.shape_env is not None).build()
        self.pset = PatternSet(self.patterns, self.engine)
        self.report.merged = self.tg.merged

    #: how many FX nodes past a re-imported one the walk re-imports at once
    #: (0: one at a time, as it reaches them); see :meth:`_look_ahead`. Off:
    #: it batched the engine's graph extensions when nearly every node was
    #: matched; with the shapes index only candidates are, the extensions
    #: are as few without it (BERT-12 36 / 35, GPT-2-12 35 / 35, LLaMA-12
    #: 61 / 61) and the fixpoint 0.1-0.6 ms faster
    lookahead: int = 0

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
        tg, stale, term = self.tg, self.stale, self.tg.term
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

    def _walk(self, pending: set, dirty: list, may_root) -> None:
        """The walk of a pass in Python: each node of the graph in order
        (:meth:`_reach`), tried (:meth:`_try`) when pending and some pattern
        may root at it; what the firings changed added to ``dirty``."""
        term = self.tg.term
        for node in list(self.gm.graph.nodes):
            if node not in term:
                continue  # erased by an earlier firing
            if not self._reach(node, pending):
                continue
            if may_root(term[node].label):
                changed = self._try(node)
                if changed:
                    dirty.extend(changed)
            if self.progress is not None:
                self.progress()

    def _reach(self, node: fx.Node, pending: set) -> bool:
        """The walk reaching ``node`` (it has a term): if stale, re-imported
        (lazily: a firing replaced one of its arguments, which come earlier,
        so they are current now) and, when its term changed, pending (matched
        in this pass); whether it is to be tried (pending, or refreshed by a
        multi-root search: taken out of those)."""
        stale, extra = self.stale, self._pending_extra
        if node in stale:
            stale.discard(node)
            kind, users = self.tg.reimport(node)
            stale.update(users)
            if kind == "merged":
                return False
            if kind == "changed":
                pending.add(node)
                if self.lookahead and self.tg.term[node].label not in self._match_labels:
                    self._look_ahead(node, pending)
        if node not in pending and node not in extra:
            return False
        extra.discard(node)
        return True

    def _native_walk(self):
        """``(reader, state)`` for the native walk of a pass (the native
        reader's ``walk``: :meth:`_walk_natively`), or None: the walk is
        Python's (the reference engine, the look-ahead, a progress
        callback, a reader built without it)."""
        if self.lookahead or self.progress is not None:
            return None
        got = self.tg.native_state()
        if not got or not hasattr(got[0], "walk"):
            return None
        return got

    def _walk_natively(self, walk, pending: set, dirty: list, may_root) -> None:
        """:meth:`_walk` with the native reader passing over the nodes that
        need nothing and re-importing the stale ones up to each node to try
        (or to re-import in Python: the uncommon cases, a merge); the same
        steps in the same order (``tests/test_fxreader.py`` holds them
        equal)."""
        reader, state = walk
        term = self.tg.term
        # the answers so far (none: the reader asks for every pending node)
        nodes, i, labels = list(self.gm.graph.nodes), 0, getattr(may_root, "seen", {})
        while True:
            i, node, what = reader.walk(state, nodes, i, self.stale, pending,
                                        self._pending_extra, labels)
            if what == 0:
                return
            if what == 2:  # re-imported in Python
                i += 1
                if not self._reach(node, pending):
                    continue
            if not may_root(term[node].label):
                continue
            changed = self._try(node)
            if changed:
                dirty.extend(changed)

    def _root_labels(self):
        """``may_root(label)``: False when no pattern can match at a term
        labelled ``label``, whatever its arguments: no single-root pattern
        is a candidate there (:meth:`PatternSet.candidates`, the proved
        root index) and no multi-root pattern's first root admits the
        operator (:func:`core.root_admits`'s index, conditions on a node's
        attributes counted as admitting). Cached per label for the run; the
        walk skips the nodes it says no to (their :meth:`_try` would find
        nothing)."""
        pset, graph, seen = self.pset, self.tg.graph, {}
        firsts = []
        if self.multis:
            from ..engines import multi
            for pattern in self.multis:
                prog = multi.program(pattern)
                firsts.append(core.root_symbols(prog.defs)[prog.roots[0]])

        def may_root(label) -> bool:
            hit = seen.get(label)
            if hit is None:
                hit = bool(pset.candidates(label, graph)) or any(
                    rs is None or label in rs or any(type(x) is tuple for x in rs)
                    for rs in firsts)
                seen[label] = hit
            return hit
        may_root.seen = seen  # the answers so far (the native walk reads them)
        return may_root

    def run(self) -> RewriteReport:
        """Rewrite to a fixpoint (or the iteration cap); returns the report."""
        with _native.paths(self.native):
            return self._run()

    def _run(self) -> RewriteReport:
        t_start = time.perf_counter()
        g = self.gm.graph
        self.report.nodes_before = count_calls(g)
        self.prepare()
        work = [n for n in g.nodes if n.op == "call_function"]
        term = self.tg.term
        from . import validate_fx
        # each pass validated (None: turned off); its time in .validation.seconds
        self.validation = checker = validate_fx.fx_checker(self)
        may_root = self._root_labels()
        while work and self.report.iterations < self.max_iterations:
            self.report.iterations += 1
            if checker is not None:
                checker.begin()
            dirty: List[fx.Node] = []
            pending = set(work)
            walk = self._native_walk()
            if walk is not None:
                self._walk_natively(walk, pending, dirty, may_root)
            else:
                self._walk(pending, dirty, may_root)
            dirty.extend(self._pending_extra)
            self._pending_extra.clear()
            if self.stale:  # users of nodes created after the walk passed
                dirty.extend(self.tg.refresh(list(self.stale)))
                self.stale.clear()
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
    rules over ATen ops cannot match it. A graph that writes a tensor in
    place (:func:`in_place_write`: not functionalized) raises
    :class:`RewriteError` before anything changes."""
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
           "count_calls", "in_place_write", "schema_call", "Builder", "TARGETS", "ASSERT_METADATA"]
