"""The rewrite validator's reading of FX graphs: :class:`FxChecker` validates
the passes of the FX driver (:mod:`pypm_verified.torch.driver`) with the
verified validator (:mod:`pypm_verified.rewriting.validate`: the encodings,
the passes, the certificates), reading each pass's graph as the importer
(:mod:`pypm_verified.torch.importer`) reads it, so that the graph before a
pass agrees with the matcher's term graph."""
from __future__ import annotations

import itertools
import operator
import time
from typing import Dict, List, Optional, Tuple

from .. import _native
from ..core.symbols import intern as _intern
from ..rewriting.validate import (Encoding, Firing, Pass, RewriteRejected, RuleCertificate, Labels, TVar, TNode, REJECT_FIRING, enabled)

_NODE = ("node",)  # marks a node argument in a label key
# FxChecker._target's table, shared by the process's checkers (the targets
# are op overloads, getitem and strings: few, and kept alive by torch)
_TARGETS: Dict[int, tuple] = {}
_TARGET_NUMBERS = itertools.count()
# _template's tables, shared by the process's checkers: trace key ->
# template, constant key -> its template node (labelled by symbols, which
# are the process's); cleared when they grow past the limit
_TEMPLATES: Dict[tuple, object] = {}
_CONST_NODES: Dict[tuple, "TNode"] = {}
_TEMPLATE_LIMIT = 1 << 12
_NAN = ("nan",)
_PLAIN = frozenset((int, float, bool, str, type(None)))  # arguments _template keeps as they are
_TORCH_VALUES = ("dtype", "device", "layout", "memory_format")
_OPERATOR_OF = operator.itemgetter(0)  # a label key's operator symbol (one function: Labels.operators)


def normalize(v, nodes: list, node_type: type):
    """A hashable, deterministic stand-in for an argument structure ``v``:
    node arguments (of type ``node_type``) become a marker and are appended
    to ``nodes`` in order; numbers compare by value (``2`` and ``2.0`` alike,
    bools apart, NaNs equal), lists and tuples alike, dicts by sorted key,
    torch dtypes, devices, layouts and memory formats as themselves, other
    objects by identity."""
    t = type(v)
    if t is node_type:
        nodes.append(v)
        return _NODE
    if t is int or t is str or v is None:
        return v
    if t is float:
        return v if v == v else _NAN
    if t is bool:
        return ("bool", v)
    if isinstance(v, (list, tuple)):
        return ("seq", tuple([normalize(e, nodes, node_type) for e in v]))
    if isinstance(v, dict):
        return ("dict", tuple([(k, normalize(v[k], nodes, node_type))
                               for k in sorted(v, key=repr)]))
    if t is slice:
        return ("slice", normalize(v.start, nodes, node_type),
                normalize(v.stop, nodes, node_type), normalize(v.step, nodes, node_type))
    if t.__name__ in _TORCH_VALUES and (t.__module__ or "").startswith("torch"):
        return ("torch", v)
    return ("object", t.__name__, id(v))


class _NoTemplate(Exception):
    """A rule's replacement that a template cannot express (why, as text)."""


class _PatternSetRef:
    """The driver's pattern set as a certificate names it (``defs``,
    ``roots``, ``owner``: the engine's handle of the table)."""

    __slots__ = ("defs", "roots", "owner")

    def __init__(self, defs, roots, owner):
        self.defs, self.roots, self.owner = defs, roots, owner


class FxChecker:
    """Validates the passes of an FX driver (:class:`pypm_verified.torch.
    driver.Driver`): :meth:`begin` at the start of a pass (snapshot of the
    graph), :meth:`end` after it (the firings the driver made since).

    The encoding is the importer's (:mod:`pypm_verified.torch.importer`):
    a call's arguments in full positional form, each a node: an FX node, a
    constant leaf (the term graph's, one per value), a list holding tensors
    (``list<n>`` over its elements); a label is the call's operator symbol
    with its target. So each node of the graph before a pass has an image
    in the matcher's term graph (the node's term, when its arguments' are
    its children: :meth:`_images`), and each rule's firing is handed over
    with its certificate (:meth:`attempt`, :meth:`fired`): the pattern and
    the match the driver fired, the replacement as the template the rule
    body's operator calls built (recorded by the builder, over the match's
    bindings and constants). A pass whose firings all have one is checked
    by the certificate checker (``pypm_validate_firings``). A firing whose
    match is not the match at its root's term at the start of the pass (an
    earlier firing of the pass changed what it matched; the driver matches
    the users of a replacement in the same pass) is read back at that term
    by the proved matcher when it finds the same match there (bindings
    standing for the rule's, through the pass's firings); else the pass is
    split there: the firings so far are checked as a segment of their own,
    and the match is certified against the graph as it is now. A firing
    without a certificate (a multi-root rule, a replacement reading a node
    the match does not bind, e.g. a folded weight or a symbolic size) has
    its segment checked as a pass only, ends it, and is listed in
    :attr:`uncertified` (every report shows it)."""

    def __init__(self, driver):
        import torch
        import torch.fx as fx

        from ..torch.firing import schema_call
        from ..torch.importer import (_SCALAR_TYPES, _const_cache_key, _opaque_op, _positional,
                                      is_pure, list_op, op_for, positional_args)
        self._scalar_key = _const_cache_key
        self._schema_call, self._positional = schema_call, _positional  # for _template
        self._scalars = _SCALAR_TYPES
        self.op_overload = torch._ops.OpOverload
        self.sym_types = (torch.SymInt, torch.SymFloat, torch.SymBool)
        self.node_type = fx.Node
        self.map_arg = fx.node.map_arg
        self.is_pure, self.positional_args = is_pure, positional_args
        self.list_op, self.op_for, self._opaque_op = list_op, op_for, _opaque_op
        self.driver = driver
        self.labels = Labels()
        self._label_ids = self.labels.table  # read inline on the hot path
        self._const_specs: Dict[tuple, tuple] = {}  # (type, value) -> ("c", term id)
        # the templates and their constants' nodes (_template): the process's
        self._const_nodes: Dict[tuple, TNode] = _CONST_NODES
        self._templates: Dict[tuple, object] = _TEMPLATES
        self._tg = None  # the term graph the caches read
        self.cache: Dict[object, tuple] = {}  # fx node -> (args, kwargs, node info)
        # id(target) -> (target, its stand-in in label keys, operator symbol):
        # an overload's __hash__ is Python code, so keys carry a small int per
        # target (one table for the process: a checker's first read of each
        # target is then not Python's)
        self._targets: Dict[int, tuple] = _TARGETS
        self._const_labels: Dict[int, tuple] = {}  # constant term id -> (label, operator)
        self.assert_target = torch.ops.aten._assert_tensor_metadata.default
        self.before: Optional[Encoding] = None
        self.known: set = set()  # every FX node of the graph at the start of the pass
        self.start = 0
        self._merged0 = 0
        self.seconds = 0.0  # time spent validating
        self.passes = 0  # passes checked (that changed the graph)
        self.segments = 0  # checks made (a pass is split where a firing needs it)
        self.certified = 0  # rule firings checked with their certificate
        #: rule firings checked as part of a pass only: (rule, root, why)
        self.uncertified: List[Tuple[str, str, str]] = []
        self.in_pass = False
        self.images: List[int] = []  # before node -> its term (-1: none)
        self._imaged = False  # images read for this pass
        self.inverse: Dict[int, int] = {}  # term id -> before node
        self.certs: Dict[object, object] = {}  # root -> RuleCertificate or why not
        self._uncertified = False  # a firing of the segment has no certificate
        self._fired: Dict[object, object] = {}  # root -> replacement (_pass_firings)
        self._back: Dict[object, object] = {}  # replacement -> root (_pass_firings)
        self._fired_upto = 0
        self._pending = None  # (root, (pattern index, substitution) or why not)
        self._patterns = None

    # ---------------------------------------------------------- encoding

    def _target(self, t) -> tuple:
        tk = self._targets.get(id(t))
        if tk is None or tk[0] is not t:
            sym = None
            if t is operator.getitem or isinstance(t, self.op_overload):
                sym = self.op_for(t).symbol
            # a string target (call_method, call_module) stands for itself:
            # equal strings need not be one object
            tk = self._targets[id(t)] = (t, t if type(t) is str
                                         else ("target", next(_TARGET_NUMBERS)), sym)
        return tk

    def _const_key(self, a) -> Optional[tuple]:
        """The key of scalar constant ``a`` in the checker's tables of
        constants: the importer's (by type and value, ``-0.0`` apart from
        ``0.0``); None for a NaN (as the native reader) or a non-scalar."""
        if type(a) not in self._scalars or not a == a:  # noqa: SIM201
            return None
        return self._scalar_key(a)

    def _spec(self, a, fxkids: list):
        """An argument as the importer reads it (``TermGraph.arg``): the FX
        node; ``("l", specs)`` for a list holding nodes; ``("c", term id)``
        for a constant (the term graph's leaf)."""
        if type(a) is self.node_type:
            fxkids.append(a)
            return a
        if isinstance(a, (list, tuple)) and _has_node(a, self.node_type):
            return ("l", tuple([self._spec(e, fxkids) for e in a]))
        # a scalar constant's spec, by type and value (2 and 2.0, True and 1
        # are different leaves, -0.0 is keyed apart; a NaN is left to the importer)
        ck = self._const_key(a)
        if ck is not None:
            hit = self._const_specs.get(ck)
            if hit is not None:
                return hit
        spec = ("c", self.driver.tg.arg(a).id)
        if ck is not None:
            self._const_specs[ck] = spec
        return spec

    def _node(self, n) -> tuple:
        """``(label, argument FX nodes, pure, argument specs, operator)`` of
        FX node ``n`` (cached while its arguments are the same objects)."""
        hit = self.cache.get(n)
        if hit is not None and hit[0] is n.args and hit[1] is n.kwargs and hit[2] is n.target:
            return hit[3]
        nodes: list = []
        specs = None
        sym = None
        leaf = n.op in ("placeholder", "get_attr")
        if leaf:
            sym = _intern(("input", f"{n.op}:{n.name}"))
            key = (sym, n.op, n.target if n.op == "get_attr" else n.name)
            specs = ()
        else:
            args = None
            tk = self._target(n.target)
            if n.op == "call_function" and tk[2] is not None:
                call_args = getattr(getattr(self.driver, "tg", None), "call_args", None)
                try:
                    # the import's positional form (same argument objects)
                    args = call_args(n) if call_args is not None else self.positional_args(n)
                except (TypeError, AttributeError, RuntimeError):
                    args = None
            if args is not None:
                try:
                    spec, node_type, got = self._spec, self.node_type, []
                    for a in args:  # _spec, its common case (a node) inline
                        if type(a) is node_type:
                            nodes.append(a)
                            got.append(a)
                        else:
                            got.append(spec(a, nodes))
                    specs = tuple(got)
                    sym = tk[2]
                    key = (sym, tk[1])
                except Exception:  # noqa: BLE001 -- no term form: folded into the label
                    nodes, specs = [], None
            if specs is None and n.op in ("call_function", "call_method", "call_module"):
                # a call the importer reads as an opaque operator: its
                # arguments, then its keyword arguments' values
                try:
                    specs = tuple([self._spec(a, nodes) for a in
                                   list(n.args) + list(n.kwargs.values())])
                    sym = self._opaque_op(n.target, len(specs)).symbol
                    key = (sym, "opaque", tk[1], tuple(n.kwargs))
                except Exception:  # noqa: BLE001 -- no term form: folded into the label
                    nodes, specs, sym = [], None, None
            if specs is None:
                # no term form: no image, the non-node arguments folded into
                # the label
                key = (None, n.op, tk[1], normalize(list(n.args), nodes, self.node_type),
                       normalize(dict(n.kwargs), nodes, self.node_type))
                specs = tuple(nodes)
        label = self._label_ids.get(key)
        if label is None:
            label = self.labels(key)
        out = (label, nodes, leaf or self.is_pure(n), specs, sym)
        # valid while the node's argument objects and target are the same
        # (FX replaces args and kwargs on every change; a target set in place
        # is read again)
        self.cache[n] = (n.args, n.kwargs, n.target, out)
        return out

    def _const_label(self, tid: int) -> Tuple[int, int]:
        """``(label, operator)`` of the constant leaf ``tid``."""
        hit = self._const_labels.get(tid)
        if hit is None:
            sym = self.driver.tg.graph._labels[tid]
            hit = self._const_labels[tid] = (self.labels((sym, "c")), sym)
        return hit

    def encode(self, before: Optional[Encoding] = None) -> Encoding:
        """The FX graph now. Without ``before``: the nodes the outputs and
        the impure nodes reach. With it (the graph after a pass): those, the
        nodes encoded in ``before`` still there, and the nodes created in
        the pass; the outputs, then ``before``'s impure ones (or their
        replacements). Constants and lists are nodes, before their first
        user."""
        g = self.driver.gm.graph
        native = _native.reader()
        if native is not None:  # the same walk, natively (pypm_verified._native)
            enc = Encoding()
            (enc.labels, enc.args, enc.names, enc.keys, enc.index, enc.mergeable, enc.syms,
             outputs, impure) = native.encode_fx(
                list(g.nodes), self.node_type, self.cache, self._node, self.assert_target,
                self._output_nodes, None if before is None else before.index, self.known,
                self._const_labels, self._const_label, self._list_label, self._fast_tables())
            return self._outputs(enc, outputs, impure, before)
        nodes, info, outputs, impure = [], {}, [], []
        assert_target, node_info, cache = self.assert_target, self._node, self.cache
        for n in g.nodes:
            op = n.op
            if op == "output":
                self.map_arg(n.args, outputs.append)
                continue
            if op == "call_function" and n.target is assert_target:
                continue
            hit = cache.get(n)  # _node's cache, looked up inline (once per node per pass)
            if hit is not None and hit[0] is n.args and hit[1] is n.kwargs and \
                    hit[2] is n.target:
                i = hit[3]
            else:
                i = node_info(n)
            info[n] = i
            nodes.append(n)
            if not i[2]:
                impure.append(n)
        live = set()
        stack = outputs + impure
        while stack:
            n = stack.pop()
            if n not in live and n in info:
                live.add(n)
                stack.extend(info[n][1])
        keep = live
        if before is not None:
            bi, known = before.index, self.known
            # leaves (inputs, weights) are the program's interface: kept when
            # unused, they are encoded only when used
            keep = {n for n in nodes if n in live or (
                (n in bi or n not in known) and n.op not in ("placeholder", "get_attr"))}
            for n in reversed(nodes):  # and what they use
                if n in keep:
                    keep.update(info[n][1])
        enc = Encoding()
        index = enc.index
        labels, args_of, names, keys, mergeable, syms = (enc.labels, enc.args, enc.names,
                                                         enc.keys, enc.mergeable, enc.syms)
        node_type = self.node_type

        def emit(spec, own: int) -> int:
            if type(spec) is node_type:
                # an argument not listed before its user (a cycle, a use
                # before the definition): its user's index, which the
                # validator refuses
                return index.get(spec, own)
            j = index.get(spec)
            if j is not None:
                return j
            lab, sym, kids, name = self._spec_node(spec, lambda s: emit(s, len(labels)))
            j = len(labels)
            labels.append(lab)
            args_of.append(kids)
            names.append(name)
            keys.append(spec)
            mergeable.append(True)
            syms.append(sym)
            index[spec] = j
            return j

        for n in nodes:
            if n not in keep:
                continue
            label, _kids, pure, specs, sym = info[n]
            for s in specs:  # its constants and lists first
                if type(s) is not node_type and s not in index:
                    emit(s, len(labels))
            i = len(labels)
            # an argument not listed before its user (a cycle, a use before
            # the definition): its own index, which the validator refuses
            args = tuple([index.get(s, i) for s in specs])
            labels.append(label)
            args_of.append(args)
            names.append(n.name)
            keys.append(n)
            mergeable.append(pure and n.op == "call_function")
            syms.append(sym)
            index[n] = i
        return self._outputs(enc, outputs, impure, before)

    def _fast_tables(self) -> Optional[tuple]:
        """The tables the native encoding reads :meth:`_node`'s common case
        from (a call whose target and positional form are known), or None."""
        tg = self.driver.tg
        calls, consts = getattr(tg, "_calls", None), getattr(tg, "_consts", None)
        if type(calls) is not dict or type(consts) is not dict or \
                type(self.labels) is not Labels:
            return None
        from ..core import symbols
        from ..torch import importer
        return (self._targets, calls, self._const_specs, self._scalars, tg, self._label_ids,
                importer._pure_targets, importer.is_pure, operator.getitem, symbols._ids,
                consts, tg.graph._labels)

    def _output_nodes(self, n) -> list:
        """The FX nodes the output node ``n`` outputs, in order."""
        outputs: list = []
        self.map_arg(n.args, outputs.append)
        return outputs

    def _outputs(self, enc: Encoding, outputs: list, impure: list,
                 before: Optional[Encoding]) -> Encoding:
        """``enc`` with its outputs: the graph's (``outputs``), then the
        impure nodes (``before``'s, or their replacements, after a pass)."""
        index = enc.index
        enc.outputs = [index[o] for o in outputs if o in index]
        n_real = len(enc.outputs)
        if before is None:
            enc.outputs += [index[n] for n in impure if n in index]
        else:
            rep = {}
            for _rule, root, new in self.driver.firings[self.start:]:
                rep[root] = new
            for i in before.outputs[len(before.outputs) - before.anchors:]:
                n = before.keys[i]
                while n not in index and n in rep:
                    n = rep[n]
                if n in index:
                    enc.outputs.append(index[n])
        enc.anchors = len(enc.outputs) - n_real
        return enc

    def _spec_node(self, spec, kid) -> tuple:
        """``(label, operator, argument indices, name)`` of the node a
        constant or list spec is (:meth:`_spec`), a list's element indices
        from ``kid(element spec)``."""
        if spec[0] == "c":
            lab, sym = self._const_label(spec[1])
            return lab, sym, (), f"constant %{spec[1]}"
        kids = tuple([kid(s) for s in spec[1]])
        lab, sym = self._list_label(len(kids))
        return lab, sym, kids, f"list of {len(kids)}"

    def _list_label(self, k: int) -> Tuple[int, int]:
        sym = self.list_op(k).symbol
        return self.labels((sym, "l")), sym

    def _images(self) -> None:
        """Each before node's image in the matcher's term graph: an FX
        node's term, a constant's leaf, a list's ``list<n>`` node, when its
        operator is the label's and its arguments' images are the term's
        children (else -1: a node whose term is stale, and its users)."""
        b = self.before
        tg = self.driver.tg
        term, graph = tg.term, tg.graph
        gl, gc, gidx = graph._labels, graph._children, graph._index
        from ..core.graph import attrs_of
        no_attrs = attrs_of(None, None)
        node_type = self.node_type
        native = _native.reader()
        if native is not None:  # the same reading, natively
            self.images, self.inverse = native.images(b.keys, b.syms, b.args, node_type, term,
                                                      gl, gc, gidx, no_attrs)
            self._imaged = True
            return
        img = [-1] * len(b)
        inv: Dict[int, int] = {}
        args_of, syms = b.args, b.syms
        for i, key in enumerate(b.keys):
            sym = syms[i]
            if sym is None:
                continue
            if type(key) is node_type:
                t = term.get(key)
                if t is None:
                    continue
                tid = t.id
            elif key[0] == "c":
                tid = key[1]
            else:
                t = gidx.get((sym, tuple([img[a] for a in args_of[i]]), no_attrs))
                if t is None:
                    continue
                tid = t.id
            if tid in inv or gl[tid] != sym:
                continue
            kids, args = gc[tid], args_of[i]
            if len(kids) != len(args):
                continue
            ok = True
            for a, c in zip(args, kids):
                if img[a] != c:
                    ok = False
                    break
            if ok:
                img[i] = tid
                inv[tid] = i
        self.images, self.inverse = img, inv
        self._imaged = True

    # ------------------------------------------------------------ passes

    def begin(self) -> None:
        """At the start of a pass: the graph as it is (the graph after the
        last pass checked, when there is one: nothing changes in between).
        The first pass's graph is read at its first firing (:meth:`_read`):
        a pass that fires nothing leaves the graph as it is, unread."""
        t0 = time.perf_counter()
        if self.driver.tg is not self._tg:
            # a new import (Driver.prepare): the constants' leaves are others
            self._tg = self.driver.tg
            self.cache.clear()
            self._const_specs.clear()
            self._const_labels.clear()
            self.before = None
        if self.before is not None:
            self.known = set(self.driver.gm.graph.nodes)
        self.start = len(self.driver.firings)
        self._merged0 = self.driver.tg.merged  # a pass that fired and merged nothing: unchanged
        self.certs = {}
        self._uncertified = False  # a firing of the segment has no certificate
        self._fired, self._back, self._fired_upto = {}, {}, self.start  # _pass_firings
        self._pending = None
        self._imaged = False  # the images are read at the pass's first firing (_substitution)
        self.in_pass = True
        self.seconds += time.perf_counter() - t0

    def _read(self) -> None:
        """The graph at the start of the pass, read before its first change
        (a firing's rule runs, a multi-root rule's segment begins): the
        driver changes it only by firing (the merges of equal nodes follow
        a firing's re-import)."""
        if self.before is None:
            self.before = self.encode()
            self.known = set(self.driver.gm.graph.nodes)

    def end(self, number: int, final: bool = True) -> None:
        t0 = time.perf_counter()
        try:
            self.in_pass = False
            before = self.before
            fired = self.driver.firings[self.start:]
            if not fired and self.driver.tg.merged == self._merged0:
                return  # nothing changed
            if before is None:  # a change before any firing: no graph to check it against
                raise RewriteRejected(
                    f"rewrite validation (FX driver, pass {number}): the graph changed before "
                    "the pass's first firing, so before the validator read it")
            after = self.encode(before)
            firings = []
            for rule, root, new in fired:
                i = before.index.get(root)
                if i is None:
                    raise RewriteRejected(
                        f"rewrite validation (FX driver, pass {number}): rule {rule!r} "
                        f"fired at {root.name}, which was not in the graph at the start of "
                        f"the pass", REJECT_FIRING, root.name, (rule, root.name, new.name))
                c = self.certs.get(root)
                firings.append(Firing(rule, i, new, root.name, new.name,
                                      c if isinstance(c, RuleCertificate) else None))
            bi = before.index
            identity = {h: g for h, n in enumerate(after.keys) if (g := bi.get(n)) is not None}
            for f in firings:  # a fired root is not kept (keys are one node each)
                h = after.index.get(before.keys[f.root])
                if h is not None and identity.get(h) == f.root:
                    del identity[h]
            p = Pass("FX driver", number, before, after, firings, identity, _fx_resolve)
            self.before = None  # re-encoded at the next pass, unless the check passes
            p.correspond()
            rules = [f for f in p.firings if f.rule is not None]
            # one check: the certificate checker checks the pass as the pass
            # checker does (its verdicts 1-8 are the same), then each firing
            if rules and p.certified():
                p.check_certified(self.driver.tg.graph, self.labels, _OPERATOR_OF,
                                  self.images, fuel=self.driver.pset.fuel)
                self.certified += len(rules)
            else:
                p.check()  # the pass (its rejections say which argument is wrong)
                for f in rules:
                    c = self.certs.get(before.keys[f.root])
                    why = c if isinstance(c, str) else \
                        "checked in a pass with a firing without a certificate"
                    self.uncertified.append((f.rule, f.root_name, why))
            self.before = after
            self.segments += 1
            if final:
                self.passes += 1
        finally:
            self.seconds += time.perf_counter() - t0

    def split(self) -> None:
        """End the current segment of the pass here (checked) and begin
        another."""
        self.end(self.driver.report.iterations, final=False)
        self.begin()

    # ------------------------------------------------------ certificates

    def _no_cert(self, root, why: str) -> None:
        """``root``'s firing has no certificate, because of ``why``."""
        self.certs[root] = why
        self._uncertified = True

    def _pass_firings(self) -> dict:
        """Root -> replacement of the firings of the segment so far (kept up
        to date as the driver's list grows, with :attr:`_back`: replacement
        -> root, None for a node that replaced several)."""
        firings, fired, back = self.driver.firings, self._fired, self._back
        for k in range(self._fired_upto, len(firings)):
            _rule, r, new = firings[k]
            fired[r] = new
            back[new] = None if new in back else r
        self._fired_upto = len(firings)
        return fired

    def _changed(self) -> bool:
        return bool(len(self.driver.firings) > self.start
                    or self.driver.tg.merged != self._merged0)

    def attempt(self, root) -> Optional[list]:
        """Before a rule runs at ``root`` (in a pass): the match the driver
        is firing (``driver._matching``: pattern index, match, root, the
        values the rule gets) is read as a substitution of the graph before
        the pass; when it cannot be (the match is not the one at the root's
        term at the start of the pass), the pass is split here. Returns the
        list the builder records the rule's operator calls in."""
        if not self.in_pass:
            return None
        t0 = time.perf_counter()
        try:
            self._read()
            if self._uncertified and self._changed():
                self.split()  # a firing without certificate: its segment ends with it
            mt = getattr(self.driver, "_matching", None)
            if mt is None or mt[2] is not root:
                self._pending = (root, "no match recorded for the firing")
                return []
            i, m = mt[0], mt[1]
            got = self._substitution(i, m, root)
            if got is None and self._changed():
                self.split()
                got = self._substitution(i, m, root)
            g = self.before.index.get(root)
            if got is None and (g is None or self.images[g] < 0):
                got = ("its root has no image in the matcher's graph (a node below it is "
                       "not encoded as the term graph has it)")
            if got is None:
                # the match as the driver claims it (at the start of a
                # segment, a match the driver really found at ``root`` is
                # one at its term): the certificate checker decides
                keys, inv = self.before.keys, self.inverse
                got = (i, [(x, keys[inv[n.id]] if n.id in inv else ("no node", n.id))
                           for x, n in m.substitution.items()], m)
            self._pending = (root, got)
            return []
        finally:
            self.seconds += time.perf_counter() - t0

    def _substitution(self, i: int, m, root):
        """``(i, [(var, before key)])``: match ``m`` of pattern ``i`` at
        ``root`` read in the graph before the pass, or None."""
        if not self._imaged:
            self._images()
        b = self.before
        g = b.index.get(root)
        if g is None or self.images[g] < 0:
            return None
        t0 = self.images[g]
        inv, keys = self.inverse, b.keys
        driver = self.driver
        fx_of = driver.tg.fx_of
        if m.root.id != t0:
            got = self._read_unchanged(i, m, root)
            if got is not None:
                return got
        if m.root.id == t0:
            subst = []
            for x, n in m.substitution.items():
                j = inv.get(n.id)
                if j is None:
                    return None
                key = keys[j]
                if type(key) is self.node_type and fx_of.get(n.id) is not key:
                    return None  # the rule would get another node than the binding's
                subst.append((x, key))
            return i, subst, m
        # the root's term changed in the pass: the match at its term before
        # the pass, whose bindings must stand for the bindings the rule got
        # (a node, or what a firing of the pass replaced it with)
        m0 = driver.pset.match(i, driver.tg.graph[t0])
        if m0 is None or list(m0.substitution) != list(m.substitution) \
                or m0.fsubstitution != m.fsubstitution:
            return None
        fired = self._pass_firings()
        subst = []
        for x, n0 in m0.substitution.items():
            j = inv.get(n0.id)
            if j is None:
                return None
            key = keys[j]
            n = m.substitution[x]
            if type(key) is self.node_type:
                s, k = key, 0
                while s in fired and k <= len(fired):  # what the pass replaced it with
                    s, k = fired[s], k + 1
                if fx_of.get(n.id) is not s or s._erased:
                    return None
            elif n.id != n0.id:
                return None
            subst.append((x, key))
        return i, subst, m

    #: how many FX nodes :meth:`_read_unchanged` walks before it gives up
    INTERIOR_LIMIT = 64

    def _read_unchanged(self, i: int, m, root):
        """``(i, [(var, before key)], m)``: match ``m`` of pattern ``i`` at
        ``root``, whose term changed in the pass, read in the graph before
        the pass without matching again, where the match at the root's term
        then is the same one:

        - each binding is an FX node of the graph before the pass with an
          image (its key), a term the graph before had (a constant, a list),
          or the replacement a firing of the pass made of such a node (that
          node is its key; the pass replaced it with what the rule got);
        - each FX node from ``root`` down to the bindings is one of the pass
          start, with the same target and the same argument objects, or the
          same but for arguments a firing of the pass replaced, each with a
          binding standing for it (FX replaces the argument objects on every
          change).

        The matcher reads the terms from the root down to the bindings and
        their attributes: at the start of the pass those were the same
        nodes' images, so it finds the same bindings there, the keys'
        images. None otherwise (the caller matches again). The certificate
        checker re-derives the match at the root's image either way;
        ``tests/test_certificates.py`` holds this reading equal to the
        re-match on the model zoo."""
        b, images, inv, keys = self.before, self.images, self.inverse, self.before.keys
        index, fx_of = b.index, self.driver.tg.fx_of
        fired = self._pass_firings()
        back = self._back  # replacement -> the node it replaced, in the pass so far
        native = _native.reader()
        if native is not None:  # the same reading, natively
            got = native.read_unchanged(m.substitution, fx_of, inv, keys, back, index, images,
                                        self.known, self.cache, root, self.INTERIOR_LIMIT,
                                        fired, self.node_type)
            if got is not NotImplemented:
                return None if got is None else (i, got, m)
        subst, key_of = [], {}
        for x, n in m.substitution.items():
            s = fx_of.get(n.id)
            if s is None:  # a constant or a list: the same term
                j = inv.get(n.id)
                if j is None:
                    return None
                subst.append((x, keys[j]))
                continue
            k = key_of.get(s)
            if k is None:
                k, steps = s, 0
                while k in back:  # a replacement stands for the node it replaced
                    k, steps = back[k], steps + 1
                    if k is None or steps > len(back):  # one node replaced several; a cycle
                        return None
                if k is not s and s in index:
                    return None  # a node of the pass start made another's replacement
                j = index.get(k)
                if j is None or images[j] < 0:
                    return None
                key_of[s] = k
            subst.append((x, k))
        known, cache, limit = self.known, self.cache, self.INTERIOR_LIMIT
        stack, seen = [root], set()
        while stack:
            u = stack.pop()
            if u in key_of or u in seen:
                continue
            seen.add(u)
            hit = cache.get(u)
            if len(seen) > limit or hit is None or u not in known or hit[2] is not u.target:
                return None
            if hit[0] is u.args and hit[1] is u.kwargs:
                stack.extend(hit[3][1])
                continue
            # changed: only a fired node's replacement in its place, a binding
            old, new = hit[1], u.kwargs
            if list(old) != list(new) or not _replaced_only(
                    (hit[0], tuple(old.values())), (u.args, tuple(new.values())),
                    fired, key_of, self.node_type):
                return None
            stack.extend(a for a in hit[3][1] if a not in fired)
        return i, subst, m

    def fired(self, rule: str, root, out, trace: Optional[list], values) -> None:
        """After ``rule`` fired at ``root`` (replacement the Value ``out``,
        its operator calls ``trace``): the firing's certificate, or why it
        has none."""
        if not self.in_pass:
            return
        t0 = time.perf_counter()
        try:
            pend, self._pending = self._pending, None
            if pend is None or pend[0] is not root:
                self._no_cert(root, "no match recorded for the firing")
                return
            if isinstance(pend[1], str):
                self._no_cert(root, pend[1])
                return
            i, subst, m = pend[1]
            try:
                t = self._template(out, trace or [], values, m)
            except _NoTemplate as e:
                self._no_cert(root, str(e))
                return
            if isinstance(t, TVar):
                bound = dict(subst).get(t.var)
                if bound is not root and bound in self._pass_firings():  # an earlier one's root
                    self._no_cert(root, "it returns a binding an earlier firing replaced")
                    return
            if self._patterns is None:
                s = self.driver.pset
                self._patterns = _PatternSetRef(s._s.defs, s._s.roots, s._owner)
            self.certs[root] = RuleCertificate(self._patterns, i, subst, t)
        finally:
            self.seconds += time.perf_counter() - t0

    def before_multi(self) -> None:
        """Before a multi-root rule runs: the firings so far are checked
        (with their certificates) in a segment of their own."""
        if not self.in_pass:
            return
        t0 = time.perf_counter()
        try:
            self._read()
            if self._changed():
                self.split()
        finally:
            self.seconds += time.perf_counter() - t0

    def fired_multi(self, rule: str, roots) -> None:
        """A multi-root rule fired at ``roots``: no certificate (its pattern
        is matched by the multi-root matcher, not a root of the set)."""
        if not self.in_pass:
            return
        for r in roots:
            self._no_cert(r, "a multi-root rule (no single-root certificate)")

    def _template(self, out, trace: list, values, m):
        """The replacement ``out`` as a template: the rule's operator calls
        (``trace``: ``(operator, arguments, result)``, the arguments as the
        rule passed them) over the match's bindings (the Values in
        ``values``, by identity) and constants. Kept for the process under
        the calls' shape (:func:`_trace_key`: each operator, each argument a
        binding's variable, an earlier call, or a constant by type and
        value), which is all the template is made of (its nodes are labelled
        by operator symbols and targets, the process's, not by a term
        graph's ids): every layer's firing of a rule shares one, and so do
        the graphs a process rewrites."""
        var_of = {}
        for x, name in zip(m.substitution, m.bindings):
            v = values.get(name)
            if v is not None:
                var_of[id(v)] = x
        key = _trace_key(out, trace, var_of)
        if key is None:
            return self._build_template(out, trace, var_of)
        t = self._templates.get(key)
        if t is None:
            if len(self._templates) >= _TEMPLATE_LIMIT:
                self._templates.clear()
                self._const_nodes.clear()
            t = self._templates[key] = self._build_template(out, trace, var_of)
        return t

    def _build_template(self, out, trace: list, var_of: dict):
        """:meth:`_template`'s template, built (``var_of``: id of a binding's
        Value -> its variable)."""
        schema_call, _positional = self._schema_call, self._positional
        plain = _PLAIN
        made = {id(v): (op, args) for op, args, v in trace}
        memo: Dict[int, object] = {}
        tg = self.driver.tg

        const_nodes = self._const_nodes

        def const(v):
            key = self._const_key(v)  # as _spec's
            t = const_nodes.get(key) if key is not None else None
            if t is not None:
                return t
            try:
                tid = tg.arg(v).id
            except Exception as e:  # noqa: BLE001
                raise _NoTemplate(f"a constant without a term form ({e})") from None
            t = TNode((tg.graph._labels[tid], "c"), ())
            if key is not None:
                const_nodes[key] = t
            return t

        def conv(a):
            if type(a) in plain:  # a constant argument, as it is
                return a
            x = var_of.get(id(a))
            if x is not None:
                return TVar(x)
            e = made.get(id(a))
            if e is not None:
                return call(a, e)
            if type(a) is self.node_type or isinstance(a, self.sym_types):
                raise _NoTemplate("its replacement reads a node (or a symbolic size) that is "
                                  "neither a binding of the match nor built by the rule")
            if hasattr(a, "is_const") and hasattr(a, "fx"):  # a Value
                if a.is_const:
                    return conv(a.value)
                raise _NoTemplate(f"its replacement reads {a.fx.name if a.fx is not None else a}"
                                  ", which is neither a binding of the match nor built by "
                                  "the rule")
            if isinstance(a, (list, tuple)):
                parts = [conv(e) for e in a]
                if any(isinstance(p, (TVar, TNode)) for p in parts):
                    return TNode((self.list_op(len(parts)).symbol, "l"),
                                 [p if isinstance(p, (TVar, TNode)) else const(p)
                                  for p in parts])
                return type(a)(parts)
            return a

        def call(v, e):
            t = memo.get(id(v))
            if t is not None:
                return t
            op, args = e
            targets = getattr(op, "torch_targets", ())
            if not targets:
                raise _NoTemplate(f"it calls {op}, which has no torch target")
            target = targets[0]
            tk = self._target(target)
            if tk[2] is None:
                raise _NoTemplate(f"it calls {target}, which has no operator")
            pos, kw = schema_call(target, [conv(a) for a in args])
            try:
                full = _positional(_Named, target, pos, kw)
            except TypeError as err:
                raise _NoTemplate(str(err)) from None
            t = TNode((tk[2], tk[1]), [a if isinstance(a, (TVar, TNode)) else const(a)
                                       for a in full])
            memo[id(v)] = t
            return t

        t = conv(out)
        if not isinstance(t, (TVar, TNode)):
            raise _NoTemplate("its replacement is not a node")
        return t


def _trace_key(out, trace: list, var_of: dict) -> Optional[tuple]:
    """What a template is made of, hashable: the rule's calls (operator, and
    each argument as ``("v", variable)`` for a binding, ``("m", k)`` for the
    result of call ``k``, a constant by type and value (a float by its
    ``repr``: ``-0.0`` and ``nan`` are constants of their own), lists
    element by element) and its result; None when an argument is none of
    those (the template is built, or refused, as it is)."""
    made = {id(v): k for k, (_op, _args, v) in enumerate(trace)}

    def key(a):
        t = type(a)
        if t is float:
            return (float, repr(a))
        if t in _PLAIN:
            return (t, a)
        x = var_of.get(id(a))
        if x is not None:
            return ("v", x)
        k = made.get(id(a))
        if k is not None:
            return ("m", k)
        if t is list or t is tuple:
            parts = tuple([key(e) for e in a])
            return None if None in parts else (t, parts)
        if hasattr(a, "is_const") and hasattr(a, "fx"):  # a Value
            return key(a.value) if a.is_const else None
        if t.__name__ in _TORCH_VALUES and (t.__module__ or "").startswith("torch"):
            return ("torch", a)
        return None

    calls = []
    for op, args, _v in trace:
        ks = tuple([key(a) for a in args])
        if None in ks:
            return None
        calls.append((op, ks))
    k = key(out)
    return None if k is None else (k, tuple(calls))


class _Named:
    name = "the rule's call"


def _replaced_only(old, new, fired: dict, key_of: dict, node_type: type) -> bool:
    """Whether argument structure ``new`` is ``old`` (the same objects) but
    for FX nodes ``old`` holds that the pass replaced (``fired``, through its
    chains) where ``new`` holds the replacement, a binding standing for that
    node (``key_of``)."""
    if old is new:
        return True
    if type(old) is node_type:
        s, k = old, 0
        while s in fired and k <= len(fired):
            s, k = fired[s], k + 1
        return s is new and key_of.get(new) is old
    if isinstance(old, (tuple, list)):
        return isinstance(new, (tuple, list)) and len(old) == len(new) and all(
            _replaced_only(a, b, fired, key_of, node_type) for a, b in zip(old, new))
    return False


def _has_node(a, node_type) -> bool:
    for e in a:
        if type(e) is node_type:
            return True
        if isinstance(e, (list, tuple)) and _has_node(e, node_type):
            return True
        if isinstance(e, dict) and _has_node(list(e.values()), node_type):
            return True
    return False


def _fx_resolve(node, p: Pass) -> Optional[int]:
    h = p.after.index.get(node)
    if h is not None:
        return h
    g = p.before.index.get(node)
    if g is not None:
        return p.resolve_before(g)
    return None


def fx_checker(driver) -> Optional[FxChecker]:
    """A checker for ``driver``'s passes, or None when validation is off
    (:func:`enabled`)."""
    return FxChecker(driver) if enabled() else None




__all__ = ["FxChecker", "fx_checker", "normalize"]
