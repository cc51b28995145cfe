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
FX driver does too (:class:`pypm_verified.torch.validate_fx.FxChecker`, the
reading of FX graphs, in the torch layer): its graphs encode constants and
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

import itertools
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
    from .. import _native
    native = _native.reader()
    if native is not None:  # the same words, written natively
        w = array("q")
        w.frombytes(native.pass_words(
            _as_list(before.labels), _as_list(before.args), _as_list(before.outputs),
            _as_list(after.labels), _as_list(after.args), _as_list(after.outputs),
            [(r, h) for r, h in firings], _as_list(amap)))
        return w
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


def _as_list(x) -> list:
    return x if type(x) is list else list(x)


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
        self._fired = fired = {f.root: f for f in self.firings}
        image: List[Optional[int]] = self.image
        merges: List[Firing] = []
        from .. import _native
        native = _native.reader()
        if native is not None and not image and type(before.mergeable) is list and \
                all(type(c) is list for c in (before.labels, before.args, after.labels,
                                               after.args)):
            # the same walk, natively
            for g, h in native.correspond(len(before), self.identity, fired, before.mergeable,
                                          before.labels, before.args, after.labels, after.args,
                                          self.claim_rebuilt, self._resolve, self, image, amap,
                                          inverse):
                merges.append(Firing(None, g, h, before.names[g], after.names[h]))
            self._merged(merges, amap)
            return
        for h, g in self.identity.items():
            amap[h] = g
            inverse[g] = h
        keyed = None  # (label, args) -> first after node, built when needed
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
        self._merged(merges, amap)

    def _merged(self, merges: List[Firing], amap: List[int]) -> None:
        """:meth:`correspond`'s end: every replacement is in the graph after
        the pass; the merges join the firings."""
        image = self.image
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
                        image, fuel: Optional[int] = None) -> None:
        """Run the certificate checker (``pypm_validate_firings``, the
        extracted ``Certify.validate_firings``): the pass as :meth:`check`
        does, and each rule's firing a proved match of its pattern, in the
        matcher's ``graph``, replaced by its template. ``labels`` interned
        the encodings' labels; ``operator_of(key)`` is the matcher's
        operator of a label key; ``image(key)`` the matcher's node a before
        node (by key) is, or None (or ``image`` is the list of them by before
        node, -1 for none). Needs :meth:`certified`."""
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
    """``n_tnodes, tnode*, root_arg`` of a template (shared nodes once);
    kept per template object in ``labels``."""
    hit = labels.templates.get(id(t))
    if hit is not None and hit[0] is t:
        return hit[1]
    w = _words_of_template(t, labels)
    labels.templates[id(t)] = (t, w)
    return w


def _words_of_template(t, labels: "Labels") -> List[int]:
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
                      image) -> List[int]:
    """The words after a pass's in a firing-certificate buffer
    (docs/internals/format.md, "Firing certificates"): each label's operator,
    each before node's image in the matcher's graph (``image(key)``, or the
    list of them by before node, -1 for none), a certificate per firing (a
    merge for the driver's merges of equal nodes)."""
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
    w += labels.operators(operator_of)
    if isinstance(image, list) and before is p.before:
        w += image  # the images by before node already (-1: none)
    else:
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

    __slots__ = ("table", "_ops", "templates")

    def __init__(self):
        self.table: Dict[object, int] = {}
        self._ops: Tuple[object, List[int]] = (None, [])
        #: id of a template -> (the template, its words): :func:`_template_words`
        #: (a driver's firings of one rule share their template)
        self.templates: Dict[int, tuple] = {}

    def operators(self, operator_of: Callable[[object], Optional[int]]) -> List[int]:
        """Each label's operator, by label (``operator_of(key)``, -1 for
        None): kept from call to call while ``operator_of`` is the same
        function (labels are only added)."""
        fn, ops = self._ops
        if fn is not operator_of:
            ops = []
            self._ops = (operator_of, ops)
        if len(ops) < len(self.table):
            for key in itertools.islice(self.table, len(ops), None):
                op = operator_of(key)
                ops.append(-1 if op is None else op)
        return ops

    def __call__(self, key) -> int:
        t = self.table
        v = t.get(key)
        if v is None:
            v = t[key] = len(t)
        return v


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
            if p.certified():
                # the pass and the rule's claim in one check; labels are
                # (operator, attributes), a node's image in the matcher's
                # graph is itself
                p.check_certified(self.graph, self.labels, lambda key: key[0],
                                  lambda nid: nid)
                self.certified += 1
            else:
                p.check()  # the pass (its rejections say which argument is wrong)
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
           "TermChecker", "encode_words", "enabled", "term_checker"]
