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

Firing certificates: ``pm.rewrite`` also hands each rule's firing over with
its certificate (:class:`RuleCertificate`: the rule's pattern, the match's
substitution, the rule body's replacement recorded as a template by
:func:`record_template`), and :meth:`Pass.check_certified` runs the
certificate checker (``pypm_validate_firings``, the extracted
``Certify.validate_firings``): the proved matcher must match the pattern at
the root with that substitution, and the replacement must be the template
instantiated with it (docs/internals/format.md, "Firing certificates"). The
FX driver does too (:class:`FxChecker`): its graphs encode constants and
lists as nodes, as the importer's term graph does, so that the graph before
a pass agrees with the matcher's, and each firing's template is what the
rule body's operator calls asked the builder for. A firing that cannot be
given a certificate (a multi-root rule, a replacement reading a node the
match does not bind) is checked as part of its pass only, and listed
(``uncertified``, shown in every report by
:class:`~pypm_verified.rewriting.report.Validation`).

``PYPM_VALIDATE=0`` in the environment turns validation off (e.g. to time a
rewrite without it); without the verified engine library (``engine=
"reference"`` on a machine without it) there is nothing to validate with and
passes are not checked.
"""
from __future__ import annotations

import operator
import os
import time
import weakref
from array import array
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from ..engines.binding import (REJECT_AFTER_ILL_FORMED, REJECT_AGREE, REJECT_ARG,
                               REJECT_BEFORE_ILL_FORMED, REJECT_CERTS, REJECT_DEAD,
                               REJECT_FIRING, REJECT_MAP, REJECT_MATCH, REJECT_NODE,
                               REJECT_OUTPUT, REJECT_SUBST, REJECT_TEMPLATE)

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
    REJECT_AGREE: ("AGREE", "the graph before the pass is not the matcher's graph"),
    REJECT_CERTS: ("CERTS", "not one certificate per firing"),
    REJECT_MATCH: ("MATCH", "the rule's pattern does not match at the root (proved matcher)"),
    REJECT_SUBST: ("SUBST", "the firing's substitution is not the matcher's bindings"),
    REJECT_TEMPLATE: ("TEMPLATE", "the replacement is not the rule's template instantiated "
                                  "with the match"),
}

#: verdicts whose ``where`` is a firing index
_FIRING_VERDICTS = (REJECT_FIRING, REJECT_MATCH, REJECT_SUBST, REJECT_TEMPLATE)


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

    __slots__ = ("labels", "args", "outputs", "names", "keys", "index", "mergeable", "anchors",
                 "syms")

    def __init__(self):
        self.labels: List[int] = []
        self.args: List[Tuple[int, ...]] = []
        self.outputs: List[int] = []
        self.names: List[str] = []
        self.keys: list = []
        self.index: dict = {}  # key -> node index
        self.mergeable: List[bool] = []
        self.anchors = 0  # the last outputs that are not the graph's (FX: impure nodes)
        self.syms: List[Optional[int]] = []  # FX: the matcher's operator of each node's label

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

    __slots__ = ("rule", "root", "replacement", "root_name", "replacement_name", "certificate")

    def __init__(self, rule, root: int, replacement, root_name: str, replacement_name: str,
                 certificate: Optional["RuleCertificate"] = None):
        self.rule = rule
        self.root = root
        self.replacement = replacement
        self.root_name = root_name
        self.replacement_name = replacement_name
        self.certificate = certificate  # what the rule's firing claims (checked when given)

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

    def certified(self) -> bool:
        """Whether every rule's firing of the pass carries a certificate,
        all for one pattern set."""
        certs = [f.certificate for f in self.firings if f.rule is not None]
        return bool(certs) and all(c is not None for c in certs) and \
            len({id(c.patterns) for c in certs}) == 1

    def check_certified(self, graph, labels: "Labels", operator_of: Callable[[object], int],
                        image: Callable[[object], Optional[int]],
                        fuel: Optional[int] = None) -> None:
        """Run the certificate checker (``pypm_validate_firings``, the
        extracted ``Certify.validate_firings``): the pass as :meth:`check`
        does, and each rule's firing a proved match of its pattern, in the
        matcher's ``graph``, replaced by its template. ``labels`` interned
        the encodings' labels; ``operator_of(key)`` is the matcher's
        operator of a label key; ``image(key)`` the matcher's node a before
        node (by key) is, or None. Needs :meth:`certified`."""
        from ..engines import binding
        words = self.words()
        certs = [f.certificate for f in self.firings if f.rule is not None]
        patterns = certs[0].patterns
        tail = certificate_words(self, labels, operator_of, image)
        words.extend(tail)
        verdict, where = binding.validate_firings(graph, patterns.defs, patterns.roots, words,
                                                  fuel=fuel, owner=patterns.owner)
        if verdict:
            raise self.rejection(int(verdict), int(where))

    # ------------------------------------------------------------ messages
    # (a firing's verdict names the firing; AGREE a before node)

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
        if verdict in _FIRING_VERDICTS and 0 <= where < len(self.firings):
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


# ------------------------------------------------------- certificates

class TVar:
    """A pattern variable in a rule's template (``Certify.TVar``)."""

    __slots__ = ("var",)

    def __init__(self, var: int):
        self.var = var

    def __repr__(self) -> str:
        return f"TVar({self.var})"


class TNode:
    """A template node (``Certify.TApp``): ``key``, the label key the
    driver interns for the node the rule builds (its operator and non-node
    arguments), over ``args`` (:class:`TVar` or :class:`TNode`)."""

    __slots__ = ("key", "args")

    def __init__(self, key, args: Sequence[object] = ()):
        self.key = key
        self.args = tuple(args)

    def __repr__(self) -> str:
        return f"TNode({self.key!r}, {list(self.args)!r})"


class RuleCertificate:
    """What a rule's firing claims (``Certify.CRule``): root ``index`` of
    ``patterns`` (an :class:`~pypm_verified.engines.matching.
    PreparedPatterns`: ``defs``, ``roots``, ``owner``) matched at the root,
    with ``substitution`` (pattern variable -> the driver's node key), and
    the replacement is ``template`` over those variables."""

    __slots__ = ("patterns", "index", "substitution", "template")

    def __init__(self, patterns, index: int, substitution: Sequence[Tuple[int, object]],
                 template):
        self.patterns = patterns
        self.index = index
        self.substitution = tuple(sorted(substitution, key=lambda p: p[0]))
        self.template = template


def _template_words(t, labels: "Labels") -> List[int]:
    """``n_tnodes, tnode*, root_arg`` of a template (shared nodes once)."""
    nodes: List[Tuple[int, List[Tuple[int, int]]]] = []
    index: Dict[int, int] = {}

    def arg(u) -> Tuple[int, int]:
        if isinstance(u, TVar):
            return (0, u.var)
        if not isinstance(u, TNode):
            raise TypeError(f"a template is made of TVar and TNode, not {u!r}")
        j = index.get(id(u))
        if j is None:
            args = [arg(a) for a in u.args]
            j = index[id(u)] = len(nodes)
            nodes.append((labels(u.key), args))
        return (1, j)

    root = arg(t)
    w = [len(nodes)]
    for label, args in nodes:
        w += [label, len(args)]
        for tag, v in args:
            w += [tag, v]
    return w + list(root)


def certificate_words(p: "Pass", labels: "Labels", operator_of: Callable[[object], int],
                      image: Callable[[object], Optional[int]]) -> List[int]:
    """The words after a pass's in a firing-certificate buffer
    (docs/internals/format.md, "Firing certificates"): each label's operator,
    each before node's image in the matcher's graph, a certificate per
    firing (a merge for the driver's merges of equal nodes)."""
    before = p.sent_before
    # templates first: they may intern labels the graphs do not have
    cert_words = []
    for f in p.firings:
        c = f.certificate
        if f.rule is None or c is None:
            cert_words.append([1])
            continue
        subst = []
        for x, key in c.substitution:
            i = before.index.get(key)
            if i is None:
                raise RewriteRejected(
                    f"rewrite validation ({p.driver}, pass {p.number}): {f.describe()} binds "
                    f"a variable to a node that is not in the graph before the pass",
                    REJECT_SUBST, f.root_name, f.names())
            subst += [x, i]
        cert_words.append([0, c.index, len(subst) // 2, *subst,
                           *_template_words(c.template, labels)])
    w: List[int] = [len(labels.table)]
    ops = [-1] * len(labels.table)
    for key, label in labels.table.items():
        op = operator_of(key)
        ops[label] = -1 if op is None else op
    w += ops
    for key in before.keys:
        t = image(key)
        w.append(-1 if t is None else t)
    for cw in cert_words:
        w += cw
    return w


_PREPARED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def record_template(rule, pattern, match, graph):
    """A rule's replacement recorded as a template: the rule body run once
    more, on a scratch graph whose leaves stand for the pattern's variables
    (an input per variable, a constant for a variable bound to a constant,
    with the bound node's shape and dtype), read back as :class:`TNode` s
    over :class:`TVar` s. ``(patterns, index, substitution, template)`` for a
    :class:`RuleCertificate`, or None when the body does not build a node
    from the variables alone (it declines, or returns something else)."""
    from ..core.graph import Graph, Node
    from ..engines.matching import PreparedPatterns
    prepared = _PREPARED.get(pattern)
    if prepared is None:  # linked once per pattern (the set caches its engine handle)
        prepared = _PREPARED[pattern] = PreparedPatterns([pattern])
    names = prepared.names[0][0]
    scratch = Graph()
    leaf_var: Dict[int, int] = {}
    values = {}
    for v, n in match.substitution.items():
        if n.kind == "const":
            leaf = scratch.const(n.value, shape=n.shape, dtype=n.dtype)
        else:
            leaf = scratch.input(f"%var{v}", shape=n.shape, dtype=n.dtype)
        leaf_var.setdefault(leaf.id, v)
        values[names[v] if names is not None else v] = leaf
    values.update(match.functions)
    try:
        new = rule.fire(values, scratch)
    except Exception:  # noqa: BLE001 -- a body that needs the real graph: no certificate
        return None
    if not isinstance(new, Node) or new.graph is not scratch:
        return None
    labels, _children, attrs = scratch.columns()
    memo: Dict[int, object] = {}

    def tmpl(n):
        t = memo.get(n.id)
        if t is None:
            v = leaf_var.get(n.id)
            if v is not None:
                t = TVar(v)
            else:
                t = TNode((labels[n.id], attrs[n.id]), [tmpl(a) for a in n.args])
            memo[n.id] = t
        return t

    subst = [(v, n.id) for v, n in match.substitution.items()]
    return prepared, 0, subst, tmpl(new)


def certificate_for(rule, pattern, match, graph) -> Optional[RuleCertificate]:
    """The certificate of ``rule``'s firing on ``match`` (of the single-root
    ``pattern``): :func:`record_template`, or None when the rule's body
    cannot be recorded (the firing is then checked without its rule)."""
    if getattr(pattern, "is_multi", False) or getattr(pattern, "_is_dominates", False):
        return None
    try:
        rec = record_template(rule, pattern, match, graph)
    except Exception:  # noqa: BLE001 -- recording must not stop a rewrite
        return None
    return None if rec is None else RuleCertificate(*rec)


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

        from ..torch.importer import _opaque_op, is_pure, list_op, op_for, positional_args
        self.op_overload = torch._ops.OpOverload
        self.sym_types = (torch.SymInt, torch.SymFloat, torch.SymBool)
        self.node_type = fx.Node
        self.map_arg = fx.node.map_arg
        self.is_pure, self.positional_args = is_pure, positional_args
        self.list_op, self.op_for, self._opaque_op = list_op, op_for, _opaque_op
        self.driver = driver
        self.labels = Labels()
        self.cache: Dict[object, tuple] = {}  # fx node -> (args, kwargs, node info)
        # id(target) -> (target, its stand-in in label keys, operator symbol):
        # an overload's __hash__ is Python code, so keys carry a small int per target
        self._targets: Dict[int, tuple] = {}
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
        self.inverse: Dict[int, int] = {}  # term id -> before node
        self.certs: Dict[object, object] = {}  # root -> RuleCertificate or why not
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
                                         else ("target", len(self._targets)), sym)
        return tk

    def _spec(self, a, fxkids: list):
        """An argument as the importer reads it (``TermGraph.arg``): the FX
        node; ``("l", specs)`` for a list holding nodes; ``("c", term id)``
        for a constant (the term graph's leaf)."""
        if type(a) is self.node_type:
            fxkids.append(a)
            return a
        if isinstance(a, (list, tuple)) and _has_node(a, self.node_type):
            return ("l", tuple([self._spec(e, fxkids) for e in a]))
        return ("c", self.driver.tg.arg(a).id)

    def _node(self, n) -> tuple:
        """``(label, argument FX nodes, pure, argument specs, operator)`` of
        FX node ``n`` (cached while its arguments are the same objects)."""
        hit = self.cache.get(n)
        if hit is not None and hit[0] is n.args and hit[1] is n.kwargs:
            return hit[2]
        nodes: list = []
        specs = None
        sym = None
        leaf = n.op in ("placeholder", "get_attr")
        if leaf:
            from ..core import symbols
            sym = symbols.intern(("input", f"{n.op}:{n.name}"))
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
                    specs = tuple([self._spec(a, nodes) for a in args])
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
        out = (self.labels(key), nodes, leaf or self.is_pure(n), specs, sym)
        self.cache[n] = (n.args, n.kwargs, out)
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
        labels, args_of, names, keys, mergeable, syms = (enc.labels, enc.args, enc.names,
                                                         enc.keys, enc.mergeable, enc.syms)
        node_type = self.node_type
        list_label = self._list_label

        def emit(spec, own: int) -> int:
            if type(spec) is node_type:
                # an argument not listed before its user (a cycle, a use
                # before the definition): its user's index, which the
                # validator refuses
                return index.get(spec, own)
            j = index.get(spec)
            if j is not None:
                return j
            if spec[0] == "c":
                lab, sym = self._const_label(spec[1])
                kids = ()
                name = f"constant %{spec[1]}"
            else:
                kids = tuple([emit(s, len(labels)) for s in spec[1]])
                lab, sym = list_label(len(kids))
                name = f"list of {len(kids)}"
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

    # ------------------------------------------------------------ passes

    def begin(self) -> None:
        """At the start of a pass: the graph as it is (the graph after the
        last pass checked, when there is one: nothing changes in between)."""
        t0 = time.perf_counter()
        if self.before is None:
            self.before = self.encode()
        self.known = set(self.driver.gm.graph.nodes)
        self.start = len(self.driver.firings)
        self._merged0 = self.driver.tg.merged  # a pass that fired and merged nothing: unchanged
        self.certs = {}
        self._pending = None
        self._images()
        self.in_pass = True
        self.seconds += time.perf_counter() - t0

    def end(self, number: int, final: bool = True) -> None:
        t0 = time.perf_counter()
        try:
            self.in_pass = False
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
                c = self.certs.get(root)
                firings.append(Firing(rule, i, new, root.name, new.name,
                                      c if isinstance(c, RuleCertificate) else None))
            identity = {h: before.index[n] for h, n in enumerate(after.keys)
                        if n in before.index}
            roots = {f.root for f in firings}
            identity = {h: g for h, g in identity.items() if g not in roots}
            p = Pass("FX driver", number, before, after, firings, identity, _fx_resolve)
            self.before = None  # re-encoded at the next pass, unless the check passes
            p.correspond()
            p.check()  # the pass (its rejections say which argument is wrong)
            rules = [f for f in p.firings if f.rule is not None]
            if rules and p.certified():
                imgs, bidx, tg = self.images, before.index, self.driver.tg
                p.check_certified(tg.graph, self.labels, operator.itemgetter(0),
                                  lambda key: imgs[bidx[key]], fuel=self.driver.pset.fuel)
                self.certified += len(rules)
            else:
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
            if any(isinstance(c, str) for c in self.certs.values()) and self._changed():
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
        b = self.before
        g = b.index.get(root)
        if g is None or self.images[g] < 0:
            return None
        t0 = self.images[g]
        inv, keys = self.inverse, b.keys
        driver = self.driver
        fx_of = driver.tg.fx_of
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
        fired = {r: new for _rule, r, new in driver.firings[self.start:]}
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
                self.certs[root] = "no match recorded for the firing"
                return
            if isinstance(pend[1], str):
                self.certs[root] = pend[1]
                return
            i, subst, m = pend[1]
            try:
                t = self._template(out, trace or [], values, m)
            except _NoTemplate as e:
                self.certs[root] = str(e)
                return
            if isinstance(t, TVar):
                bound = dict(subst).get(t.var)
                if any(r is bound for _rule, r, _n in self.driver.firings[self.start:-1]):
                    self.certs[root] = "it returns a binding an earlier firing replaced"
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
        if self.in_pass and self._changed():
            t0 = time.perf_counter()
            try:
                self.split()
            finally:
                self.seconds += time.perf_counter() - t0

    def fired_multi(self, rule: str, roots) -> None:
        """A multi-root rule fired at ``roots``: no certificate (its pattern
        is matched by the multi-root matcher, not a root of the set)."""
        if not self.in_pass:
            return
        for r in roots:
            self.certs[r] = "a multi-root rule (no single-root certificate)"

    def _template(self, out, trace: list, values, m):
        """The replacement ``out`` as a template: the rule's operator calls
        (``trace``: ``(operator, arguments, result)``, the arguments as the
        rule passed them) over the match's bindings (the Values in
        ``values``, by identity) and constants."""
        from ..torch.driver import schema_call
        from ..torch.importer import _positional
        var_of = {}
        for x, name in zip(m.substitution, m.bindings):
            v = values.get(name)
            if v is not None:
                var_of[id(v)] = x
        made = {id(v): (op, args) for op, args, v in trace}
        memo: Dict[int, object] = {}
        tg = self.driver.tg

        def const(v):
            try:
                tid = tg.arg(v).id
            except Exception as e:  # noqa: BLE001
                raise _NoTemplate(f"a constant without a term form ({e})") from None
            return TNode((tg.graph._labels[tid], "c"), ())

        def conv(a):
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


class _Named:
    name = "the rule's call"


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
        self.certified = 0  # of which checked with the rule's certificate
        #: the others (checked as a firing without its rule): (rule, root, why)
        self.uncertified: List[Tuple[str, str, str]] = []

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

    def fired(self, number: int, rule: str, root, new,
              certificate: Optional[RuleCertificate] = None) -> None:
        """Check the firing of ``rule`` that just replaced ``root`` with
        ``new`` (in pass ``number``); with ``certificate`` (what the rule
        claims: its pattern, the match, its template, e.g. from
        :func:`record_template`), by the certificate checker, which also
        checks that claim against the proved matcher."""
        t0 = time.perf_counter()
        try:
            before = self.before
            self.before = None
            after = self.encode()
            firings = [Firing(rule, before.index[root.id], new.id, _term_name(root),
                              _term_name(new), certificate)]
            # no correspondence by node id: hash-consing may make a rebuilt
            # node an existing one that stood for another; it is found
            # structurally (a node's image: the node equal to it over its
            # arguments' images)
            p = Pass("pm.rewrite driver", number, before, after, firings, {},
                     lambda nid, p: p.after.index.get(nid), claim_rebuilt=True,
                     dedup_outputs=True)
            p.correspond()
            p.check()  # the pass (its rejections say which argument is wrong)
            if p.certified():
                # and the rule's claim; labels are (operator, attributes), a
                # node's image in the matcher's graph is itself
                p.check_certified(self.graph, self.labels, lambda key: key[0],
                                  lambda nid: nid)
                self.certified += 1
            else:
                self.uncertified.append((rule, _term_name(root), "no template was recorded "
                                         "from the rule body (a multi-root pattern, or a "
                                         "body that needs the real graph)"))
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
           "TVar", "TNode", "RuleCertificate", "certificate_for", "certificate_words",
           "record_template",
           "FxChecker", "TermChecker", "encode_words", "enabled", "fx_checker", "normalize",
           "term_checker"]
