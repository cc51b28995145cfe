"""Translation validation of graph surgery: every rewrite pass is checked.

The matcher is proved; the surgery that applies rules (redirecting the uses
of a matched root to its replacement, removing what became dead) is checked
after each pass by the verified validator (``pypm_validate_rewrite``, reached
through :func:`pypm_verified.engines.binding.validate_rewrite`): the graph
after the pass must be the graph before it with every firing applied, up to
a renaming of nodes (docs/internals/format.md describes the buffer).

A pass is one round of firings between two scans of the graph. Per pass, a
driver encodes the graph before and after it (:class:`Encoding`: a label per
node, interned from its operator and non-node arguments, its argument nodes,
the outputs), lists its firings (rule, root, replacement) and the after ->
before correspondence of nodes, and :func:`check_pass` calls the validator;
a rejection raises :class:`RewriteRejected`, naming the firing concerned.

* FX graphs (:mod:`pypm_verified.torch.driver`, mutated in place): nodes
  correspond by identity; nodes the rules created are new. Metadata asserts
  (``aten._assert_tensor_metadata``) are not encoded (the driver removes
  those on dead nodes); impure nodes count as outputs (they are kept even
  without users); a placeholder or attribute leaf is encoded when a node
  uses it; nodes already dead before a pass are left out of it.
* Term graphs (``pm.rewrite``, append-only, hash-consed): the live nodes
  (:meth:`~pypm_verified.core.graph.Graph.live`), checked after each firing
  (:class:`TermChecker` says why); a node corresponds to the node equal to
  it (same label and attributes) over its arguments' images, found
  structurally: a node kept is itself, a rebuilt node the one it rebuilds.

In both, a node that disappears because it became equal to another (FX
common-subexpression merging, hash-consing) is given to the validator as a
firing of that node with the equal node as replacement; it is found
structurally (equal label, arguments the images of its own), never assumed.

``PYPM_VALIDATE=0`` in the environment turns validation off (e.g. to time a
rewrite without it); without the verified engine library (``engine=
"reference"`` on a machine without it) there is nothing to validate with and
passes are not checked.
"""
from __future__ import annotations

import operator
import os
import time
from array import array
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from ..engines.binding import (REJECT_AFTER_ILL_FORMED, REJECT_ARG, REJECT_BEFORE_ILL_FORMED,
                               REJECT_DEAD, REJECT_FIRING, REJECT_MAP, REJECT_NODE,
                               REJECT_OUTPUT)

ENV_VAR = "PYPM_VALIDATE"

#: reason codes of the validator (verdict != 0): (name, what it means)
REASONS = {
    REJECT_BEFORE_ILL_FORMED: ("BEFORE_ILL_FORMED", "the graph before the pass is ill formed"),
    REJECT_AFTER_ILL_FORMED: ("AFTER_ILL_FORMED", "the graph after the pass is ill formed"),
    REJECT_FIRING: ("FIRING", "a firing's root or replacement is invalid"),
    REJECT_MAP: ("MAP", "a node's correspondence to the graph before is invalid"),
    REJECT_NODE: ("NODE", "a node's operator or arity changed"),
    REJECT_ARG: ("ARG", "an argument is neither the original argument nor the replacement "
                        "of a fired root"),
    REJECT_OUTPUT: ("OUTPUT", "an output is neither the original output nor the "
                              "replacement of a fired root"),
    REJECT_DEAD: ("DEAD", "a node is left behind that no output uses"),
}


class RewriteRejected(RuntimeError):
    """The rewrite validator refused a pass: the graph after it is not the
    graph before it with the pass's firings applied. ``verdict`` (reason code,
    :data:`REASONS`), ``where`` (what it concerns, by name), ``firing`` (the
    firing concerned, ``(rule, root, replacement)`` names, or None)."""

    def __init__(self, message: str, verdict: int = 0, where: str = "",
                 firing: Optional[Tuple[str, str, str]] = None):
        super().__init__(message)
        self.verdict = verdict
        self.where = where
        self.firing = firing


def enabled() -> bool:
    """Whether passes are validated: not turned off by ``PYPM_VALIDATE=0``
    and the engine library (with its validator) loadable."""
    if os.environ.get(ENV_VAR, "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    from ..engines import binding
    return binding.available()


class Encoding:
    """One graph as the validator reads it: ``labels[i]``, ``args[i]`` (the
    indices of node i's arguments, each smaller than i), ``outputs``
    (indices), and per node its ``names[i]`` (for messages) and ``keys[i]``
    (the driver's node: FX node or term node id, for the correspondence);
    ``mergeable[i]``: node i may be merged into an equal node."""

    __slots__ = ("labels", "args", "outputs", "names", "keys", "index", "mergeable", "anchors")

    def __init__(self):
        self.labels: List[int] = []
        self.args: List[Tuple[int, ...]] = []
        self.outputs: List[int] = []
        self.names: List[str] = []
        self.keys: list = []
        self.index: dict = {}  # key -> node index
        self.mergeable: List[bool] = []
        self.anchors = 0  # the last outputs that are not the graph's (FX: impure nodes)

    def add(self, key, label: int, args: Tuple[int, ...], name: str, mergeable: bool) -> int:
        i = len(self.labels)
        self.labels.append(label)
        self.args.append(args)
        self.names.append(name)
        self.keys.append(key)
        self.mergeable.append(mergeable)
        self.index[key] = i
        return i

    def __len__(self) -> int:
        return len(self.labels)


class Firing:
    """A firing as the driver saw it: ``rule`` (None for a merge of equal
    nodes), ``root`` (before index), ``replacement`` (the driver's node) and
    their names."""

    __slots__ = ("rule", "root", "replacement", "root_name", "replacement_name")

    def __init__(self, rule, root: int, replacement, root_name: str, replacement_name: str):
        self.rule = rule
        self.root = root
        self.replacement = replacement
        self.root_name = root_name
        self.replacement_name = replacement_name

    def describe(self) -> str:
        if self.rule is None:
            return (f"the merge of {self.root_name} into the equal node "
                    f"{self.replacement_name}")
        return f"rule {self.rule!r} at {self.root_name} (replaced by {self.replacement_name})"

    def names(self) -> Tuple[str, str, str]:
        return ("" if self.rule is None else self.rule, self.root_name, self.replacement_name)


def encode_words(before: Encoding, after: Encoding, firings: Sequence[Tuple[int, int]],
                 amap: Sequence[int]) -> array:
    """The validator's buffer (int64 words) for one pass."""
    w = array("q")
    for g in (before, after):
        w.append(len(g))
        for label, args in zip(g.labels, g.args):
            w.append(label)
            w.append(len(args))
            w.extend(args)
        w.append(len(g.outputs))
        w.extend(g.outputs)
    w.append(len(firings))
    for r, h in firings:
        w.append(r)
        w.append(h)
    w.extend(amap)
    return w


class Pass:
    """One pass to validate: the encodings, the driver's firings, the
    correspondence. :meth:`correspond` completes it (images of the nodes,
    merges), :meth:`check` runs the validator."""

    def __init__(self, driver: str, number: int, before: Encoding, after: Encoding,
                 firings: List[Firing], identity: Dict[int, int],
                 resolve: Callable[[object, "Pass"], Optional[int]],
                 claim_rebuilt: bool = False, dedup_outputs: bool = False):
        self.driver = driver
        self.number = number
        self.before = before
        self.after = after
        self.firings = firings
        self.identity = identity  # after index -> before index, known by identity
        self._resolve = resolve  # (driver's replacement node, pass) -> after index
        self.claim_rebuilt = claim_rebuilt
        self.dedup_outputs = dedup_outputs
        self.image: List[Optional[int]] = []
        self.amap: List[int] = []
        self._fired: dict = {}
        self._inverse: dict = {}
        self.sent_before = before  # the before graph given to the validator

    def resolve_before(self, g: int, depth: int = 0) -> Optional[int]:
        """The after node before node ``g`` became (its image; for a node
        after the one :meth:`correspond` is at, only when it is kept or
        fired)."""
        if g < len(self.image):
            return self.image[g]
        f = self._fired.get(g)
        if f is not None and depth < len(self.firings):
            r = f.replacement
            h = self.after.index.get(r)
            if h is not None:
                return h
            r = self.before.index.get(r)
            return None if r is None else self.resolve_before(r, depth + 1)
        return self._inverse.get(g)

    def correspond(self) -> None:
        """Images of the before nodes in order: a fired root's is its
        replacement's; a node kept is itself; a node gone is the after node
        equal to it over its arguments' images (a rebuilt node, or a merge),
        else None (dead). Fills ``amap`` and adds the merges as firings."""
        before, after = self.before, self.after
        amap = [-1] * len(after)
        self._inverse = inverse = {}
        for h, g in self.identity.items():
            amap[h] = g
            inverse[g] = h
        self._fired = fired = {f.root: f for f in self.firings}
        keyed = None  # (label, args) -> first after node, built when needed
        image: List[Optional[int]] = self.image
        merges: List[Firing] = []
        for g in range(len(before)):
            f = fired.get(g)
            if f is not None:
                image.append(self._resolve(f.replacement, self))
                continue
            h = inverse.get(g)
            if h is not None or not before.mergeable[g]:
                image.append(h)
                continue
            imgs = tuple(image[a] for a in before.args[g])
            if None in imgs:
                image.append(None)
                continue
            if keyed is None:
                keyed = {}
                for i, (lab, args) in enumerate(zip(after.labels, after.args)):
                    keyed.setdefault((lab, args), i)
            h = keyed.get((before.labels[g], imgs))
            image.append(h)
            if h is None:
                continue
            if self.claim_rebuilt and amap[h] == -1:
                amap[h] = g  # the rebuilt node
            else:
                merges.append(Firing(None, g, h, before.names[g], after.names[h]))
        for f in self.firings:
            if image[f.root] is None:
                raise RewriteRejected(
                    f"rewrite validation ({self.driver}, pass {self.number}): the replacement "
                    f"of {f.describe()} is no longer in the graph after the pass",
                    REJECT_FIRING, f.root_name, f.names())
        self.firings = self.firings + merges
        self.amap = amap

    def words(self) -> array:
        before = self.before
        if self.dedup_outputs:
            # the driver keeps each output once: an output whose image repeats
            # an earlier one's is dropped (Graph.replace)
            seen, outs = set(), []
            for o in before.outputs:
                img = self.image[o]
                if img not in seen or img is None:
                    seen.add(img)
                    outs.append(o)
            if len(outs) != len(before.outputs):
                b = Encoding()
                b.labels, b.args, b.names, b.keys = before.labels, before.args, \
                    before.names, before.keys
                b.outputs = outs
                before = b
        self.sent_before = before
        return encode_words(before, self.after,
                            [(f.root, self.image[f.root]) for f in self.firings], self.amap)

    def check(self) -> None:
        """Run the validator; :class:`RewriteRejected` on a rejection."""
        from ..engines import binding
        verdict, where = binding.validate_rewrite(self.words())
        if verdict:
            raise self.rejection(int(verdict), int(where))

    # ------------------------------------------------------------ messages

    def _firing_of_root(self, g) -> Optional[Firing]:
        for f in self.firings:
            if f.root == g:
                return f
        return None

    def _firing_near(self, h: int) -> Optional[Firing]:
        """The firing an after node ``h`` concerns: one whose root is an
        argument of ``h``'s original, or whose root its original was an
        argument of (``h`` was inside the match), or whose replacement
        ``h`` is or uses."""
        g = self.amap[h] if 0 <= h < len(self.amap) else -1
        if g >= 0:
            for a in self.before.args[g]:
                f = self._firing_of_root(a)
                if f is not None:
                    return f
            for f in self.firings:
                if g in self.before.args[f.root]:
                    return f
        for f in self.firings:
            r = self.image[f.root]
            if r == h or (r is not None and h in self.after.args[r]):
                return f
        return None

    def rejection(self, verdict: int, where: int) -> RewriteRejected:
        """The error for the validator's ``(verdict, where)``, in names."""
        code, what = REASONS.get(verdict, (f"REASON_{verdict}", "rejected"))
        before, after = self.sent_before, self.after
        firing, place, detail = None, str(where), ""
        if verdict == REJECT_FIRING and 0 <= where < len(self.firings):
            firing = self.firings[where]
            place = f"firing {where}"
        elif verdict in (REJECT_MAP, REJECT_NODE, REJECT_ARG, REJECT_DEAD,
                         REJECT_AFTER_ILL_FORMED) and 0 <= where < len(after):
            place = after.names[where]
            firing = self._firing_near(where)
            detail = self._arg_detail(where) if verdict == REJECT_ARG else ""
            g = self.amap[where]
            if verdict == REJECT_MAP and g >= 0:
                detail = f": it stands for {before.names[g]}"
                firing = self._firing_of_root(g) or firing
        elif verdict == REJECT_OUTPUT:
            if where == -1:
                place = "the outputs"
                detail = (f": {len(before.outputs)} outputs before the pass, "
                          f"{len(after.outputs)} after")
                outs = set(before.outputs)
                firing = next((f for f in self.firings if f.root in outs), None)
            elif 0 <= where < len(before.outputs):
                o = before.outputs[where]
                place = f"output {where} ({before.names[o]})"
                firing = self._firing_of_root(o)
                if where < len(after.outputs):
                    detail = f": it is {after.names[after.outputs[where]]} after the pass"
        elif verdict == REJECT_BEFORE_ILL_FORMED and 0 <= where < len(before):
            place = before.names[where]
        if firing is None and len(self.firings) == 1:
            firing = self.firings[0]
        if firing is None and self.firings:
            shown = "; ".join(f.describe() for f in self.firings[:3])
            more = f" and {len(self.firings) - 3} more" if len(self.firings) > 3 else ""
            concerned = f" (the pass's firings: {shown}{more})"
        elif firing is not None:
            concerned = f"; firing concerned: {firing.describe()}"
        else:
            concerned = ""
        msg = (f"rewrite validation rejected pass {self.number} of the {self.driver} "
               f"({code}: {what}) at {place}{detail}{concerned}")
        return RewriteRejected(msg, verdict, place, None if firing is None else firing.names())

    def _arg_detail(self, h: int) -> str:
        g = self.amap[h]
        if g < 0:
            return ""
        fired = {f.root: f for f in self.firings}
        for i, (a, b) in enumerate(zip(self.before.args[g], self.after.args[h])):
            f = fired.get(a)
            want = self.image[a] if f is not None else None
            ok = (b == want) if f is not None else (self.amap[b] == a)
            if not ok:
                exp = (f"the replacement {self.after.names[want]} of {self.before.names[a]}"
                       if f is not None and want is not None else self.before.names[a])
                return f": argument {i} is {self.after.names[b]}, expected {exp}"
        return ""


# ------------------------------------------------------------------ labels

class Labels:
    """Interns hashable keys as labels (small non-negative ints), per run."""

    __slots__ = ("table",)

    def __init__(self):
        self.table: Dict[object, int] = {}

    def __call__(self, key) -> int:
        t = self.table
        v = t.get(key)
        if v is None:
            v = t[key] = len(t)
        return v


_NODE = ("node",)  # marks a node argument in a label key
_NAN = ("nan",)
_TORCH_VALUES = ("dtype", "device", "layout", "memory_format")


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


# ------------------------------------------------------------- FX driver

class FxChecker:
    """Validates the passes of an FX driver (:class:`pypm_verified.torch.
    driver.Driver`): :meth:`begin` at the start of a pass (snapshot of the
    graph), :meth:`end` after it (the firings the driver made since)."""

    def __init__(self, driver):
        import torch
        import torch.fx as fx

        from ..torch.importer import is_pure, positional_args
        self.op_overload = torch._ops.OpOverload
        self.node_type = fx.Node
        self.map_arg = fx.node.map_arg
        self.is_pure, self.positional_args = is_pure, positional_args
        self.driver = driver
        self.labels = Labels()
        self.cache: Dict[object, tuple] = {}  # fx node -> (args, kwargs, label, arg nodes)
        # id(target) -> (target, its stand-in in label keys): an overload's
        # __hash__ is Python code, so keys carry a small int per target
        self._targets: Dict[int, tuple] = {}
        self.assert_target = torch.ops.aten._assert_tensor_metadata.default
        self.before: Optional[Encoding] = None
        self.known: set = set()  # every FX node of the graph at the start of the pass
        self.start = 0
        self._merged0 = 0
        self.seconds = 0.0  # time spent validating
        self.passes = 0

    def _node(self, n) -> tuple:
        """``(label, argument nodes, pure)`` of FX node ``n`` (cached while
        its arguments are the same objects)."""
        hit = self.cache.get(n)
        if hit is not None and hit[0] is n.args and hit[1] is n.kwargs:
            return hit[2]
        nodes: list = []
        is_node = self.node_type
        leaf = n.op in ("placeholder", "get_attr")
        if leaf:
            key = (n.op, n.target if n.op == "get_attr" else n.name)
        else:
            args = None
            if n.op == "call_function":
                call_args = getattr(getattr(self.driver, "tg", None), "call_args", None)
                try:
                    # the import's positional form when it has it (same
                    # argument objects), else computed here
                    args = call_args(n) if call_args is not None and (
                        n.target is operator.getitem or isinstance(n.target, self.op_overload)) \
                        else self.positional_args(n)
                except (TypeError, AttributeError, RuntimeError):
                    args = None
            t = n.target
            tk = self._targets.get(id(t))
            if tk is None or tk[0] is not t:
                # a string target (call_method, call_module) stands for itself:
                # equal strings need not be one object
                tk = self._targets[id(t)] = (t, t if type(t) is str
                                             else ("target", len(self._targets)))
            if args is not None:
                # normalize(args) with the common arguments (nodes, ints,
                # strings, None) handled inline
                parts = []
                for a in args:
                    ta = type(a)
                    if ta is is_node:
                        nodes.append(a)
                        parts.append(_NODE)
                    elif ta is int or ta is str or a is None:
                        parts.append(a)
                    else:
                        parts.append(normalize(a, nodes, is_node))
                key = (n.op, tk[1], ("seq", tuple(parts)))
            else:
                key = (n.op, tk[1], normalize(list(n.args), nodes, is_node),
                       normalize(dict(n.kwargs), nodes, is_node))
        out = (self.labels(key), nodes, leaf or self.is_pure(n))
        self.cache[n] = (n.args, n.kwargs, out)
        return out

    def encode(self, before: Optional[Encoding] = None) -> Encoding:
        """The FX graph now. Without ``before``: the nodes the outputs and
        the impure nodes reach. With it (the graph after a pass): those, the
        nodes encoded in ``before`` still there, and the nodes created in
        the pass; the outputs, then ``before``'s impure ones (or their
        replacements)."""
        g = self.driver.gm.graph
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
            if hit is not None and hit[0] is n.args and hit[1] is n.kwargs:
                i = hit[2]
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
        labels, args_of, names, keys, mergeable = (enc.labels, enc.args, enc.names, enc.keys,
                                                   enc.mergeable)
        i = 0
        for n in nodes:
            if n not in keep:
                continue
            label, kids, pure = info[n]
            # an argument not listed before its user (a cycle, a use before
            # the definition): its own index, which the validator refuses
            labels.append(label)
            args_of.append(tuple([index.get(k, i) for k in kids]))
            names.append(n.name)
            keys.append(n)
            mergeable.append(pure and n.op == "call_function")
            index[n] = i
            i += 1
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

    def begin(self) -> None:
        """At the start of a pass: the graph as it is (the graph after the
        last pass checked, when there is one: nothing changes in between)."""
        t0 = time.perf_counter()
        if self.before is None:
            self.before = self.encode()
        self.known = set(self.driver.gm.graph.nodes)
        self.start = len(self.driver.firings)
        self._merged0 = self.driver.tg.merged  # a pass that fired and merged nothing: unchanged
        self.seconds += time.perf_counter() - t0

    def end(self, number: int) -> None:
        t0 = time.perf_counter()
        try:
            before = self.before
            fired = self.driver.firings[self.start:]
            if not fired and self.driver.tg.merged == self._merged0:
                return  # nothing changed
            after = self.encode(before)
            firings = []
            for rule, root, new in fired:
                i = before.index.get(root)
                if i is None:
                    raise RewriteRejected(
                        f"rewrite validation (FX driver, pass {number}): rule {rule!r} "
                        f"fired at {root.name}, which was not in the graph at the start of "
                        f"the pass", REJECT_FIRING, root.name, (rule, root.name, new.name))
                firings.append(Firing(rule, i, new, root.name, new.name))
            identity = {h: before.index[n] for h, n in enumerate(after.keys)
                        if n in before.index}
            roots = {f.root for f in firings}
            identity = {h: g for h, g in identity.items() if g not in roots}
            p = Pass("FX driver", number, before, after, firings, identity, _fx_resolve)
            self.before = None  # re-encoded at the next pass, unless the check passes
            p.correspond()
            p.check()
            self.before = after
            self.passes += 1
        finally:
            self.seconds += time.perf_counter() - t0


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


# ------------------------------------------------------------ term graphs

class TermChecker:
    """Validates the rewrites of ``pm.rewrite`` on a :class:`pm.Graph`, one
    firing at a time (:meth:`fired`, after each :meth:`Graph.replace`).

    Not a pass at a time: the driver fires at roots it matched at the start
    of the pass, and after an earlier firing, hash-consing may have made such
    a root stand for another node of the graph before the pass (the chain
    ``f(f(f(x)))`` with ``f(f(x)) -> f(x)`` rebuilt is the old ``f(f(x))``):
    in terms of that graph, the firings are not simultaneous."""

    def __init__(self, graph):
        self.graph = graph
        self.labels = Labels()
        self.before: Optional[Encoding] = None
        self.seconds = 0.0
        self.passes = 0  # firings checked

    def encode(self) -> Encoding:
        """The live nodes (labels from operator and attributes)."""
        g = self.graph
        labels, children, attrs = g.columns()
        enc = Encoding()
        index = enc.index
        for n in g.live():
            i = n.id
            enc.add(i, self.labels((labels[i], attrs[i])),
                    tuple([index[c] for c in children[i]]), _term_name(n), True)
        enc.outputs = [index[o.id] for o in g.outputs]
        return enc

    def begin(self) -> None:
        """Before a pass: the graph as it is (kept from the last firing)."""
        if self.before is None:
            t0 = time.perf_counter()
            self.before = self.encode()
            self.seconds += time.perf_counter() - t0

    def fired(self, number: int, rule: str, root, new) -> None:
        """Check the firing of ``rule`` that just replaced ``root`` with
        ``new`` (in pass ``number``)."""
        t0 = time.perf_counter()
        try:
            before = self.before
            self.before = None
            after = self.encode()
            firings = [Firing(rule, before.index[root.id], new.id, _term_name(root),
                              _term_name(new))]
            # no correspondence by node id: hash-consing may make a rebuilt
            # node an existing one that stood for another; it is found
            # structurally (a node's image: the node equal to it over its
            # arguments' images)
            p = Pass("pm.rewrite driver", number, before, after, firings, {},
                     lambda nid, p: p.after.index.get(nid), claim_rebuilt=True,
                     dedup_outputs=True)
            p.correspond()
            p.check()
            self.before = after
            self.passes += 1
        finally:
            self.seconds += time.perf_counter() - t0


def _term_name(n) -> str:
    if n.kind == "input":
        return f"%{n.id} (input {n.name!r})"
    if n.kind == "const":
        return f"%{n.id} (constant {n.value!r})"
    return f"%{n.id} ({n.op.name})"


def term_checker(graph) -> Optional[TermChecker]:
    """A checker for ``pm.rewrite``'s passes on ``graph``, or None when
    validation is off (:func:`enabled`)."""
    return TermChecker(graph) if enabled() else None


__all__ = ["ENV_VAR", "REASONS", "RewriteRejected", "Encoding", "Firing", "Pass",
           "FxChecker", "TermChecker", "encode_words", "enabled", "fx_checker", "normalize",
           "term_checker"]
