"""The end of a pass checked on the region it changed, built and measured.

``bench_validator.py --windows`` (``window_end_parts``) runs each fixpoint's
passes two ways, alternately: as the validator does (``FxChecker.end``: the
whole graph after the pass encoded, the correspondence, the certificate
check on the whole graphs) and with :func:`check_window` in its place, which
reads the graph after the pass only where the pass changed it
(``theories/Window.v`` says checking the windows suffices, given that the
graph outside them is unchanged):

1. **the sweep**: one look at each FX node finds the nodes the pass created
   (not in the graph before it) and those it changed (their arguments,
   keyword arguments or target other objects than when the graph before the
   pass was read: FX replaces them on every change). Every other node of the
   graph before the pass is *kept*.
2. **reading the region**: the matches' interiors (each firing's root down
   to its bindings) and the changed nodes before the pass (from the whole
   encoding of the graph before it, which the validator has), the created
   and changed nodes after it (``FxChecker._node``), closed so that every
   argument of a copy that is not kept is a copy, and a kept copy on one
   side is one on the other.
3. **the windows**: each node a copy of its node or a frontier leaf (a kept
   node the region reads, under a label of its own, the same on both
   sides); constants and lists copies; the windows' outputs each node on
   both sides (a node outside may read it) and the graph's outputs and
   impure nodes the pass touched.
4. **the matcher's window**: each before window node's image, a frontier
   node's as a leaf with its operator and attributes, **loaded** into the
   engine.
5. **correspond** and **check**: ``Pass.correspond`` and
   ``Pass.check_certified`` on the windows.

A pass the window does not cover (a firing without certificate, a merge, a
fired root still in the graph, a created node reading a node dead at the
start, outputs that changed in number) is checked on the whole graphs. The
driver's own validator keeps the whole graphs: measured here, this path in
Python costs more than it saves (``results/validator.md``), so it is a
measurement of the design, not the validator's path."""
from __future__ import annotations

import time
from typing import Dict, List

from pypm_verified.rewriting.validate import (Encoding, Firing, Pass, RewriteRejected,
                                              REJECT_FIRING)


class WindowGraph:
    """A window of the matcher's graph as the engine's encoding reads it
    (``columns``, ``sym_attrs``: the whole graph's, for its labels), and its
    handle once loaded (``engine_handle``)."""

    __slots__ = ("_cols", "_whole", "engine_handle")

    def __init__(self, labels, kids, attrs, whole):
        self._cols = (labels, kids, attrs)
        self._whole = whole
        self.engine_handle = None

    def __len__(self):
        return len(self._cols[0])

    def columns(self, base=0):
        return tuple(c[base:] for c in self._cols)

    def sym_attrs(self, labels=None):
        return self._whole.sym_attrs(self._cols[0] if labels is None else labels)


def matcher_window(graph, images, nodes, copies):
    """The window of the matcher's ``graph`` for a before window whose
    nodes are the before nodes ``nodes`` (in order; ``images[g]``: node
    ``g``'s image, -1 for none): each image once, a copy's (``g`` in
    ``copies``) with its children's window nodes, a frontier node's as a
    leaf with its operator and attributes. Returns ``(window graph, the
    window nodes' images in it, -1 for none)``."""
    gl, gc, ga = graph._labels, graph._children, graph._attrs
    glabels, gkids, gattrs, gw, wimages = [], [], [], {}, []
    for g in nodes:
        t = images[g]
        j = -1
        if t >= 0 and t not in gw:
            cs = () if g not in copies else tuple([gw.get(c, -1) for c in gc[t]])
            if -1 not in cs:
                j = gw[t] = len(glabels)
                glabels.append(gl[t])
                gkids.append(cs)
                gattrs.append(ga[t])
        wimages.append(j)
    return WindowGraph(glabels, gkids, gattrs, graph), wimages


def load(wg: WindowGraph) -> None:
    """Load window graph ``wg`` into the engine (its ``engine_handle``)."""
    from pypm_verified.core.encoding import MAGIC_GRAPH, VERSION, _encode_nodes
    from pypm_verified.engines import binding
    n = len(wg)
    wg.engine_handle = binding.load_graph(binding.open_engine_library(),
                                          _encode_nodes(wg, [MAGIC_GRAPH, VERSION, n], 0), key=n)


class _NotCovered(Exception):
    """The pass is one the window does not cover (the whole graphs check it)."""


def check_window(ck, number: int, fired: list, clock=None) -> bool:
    """Check the pass ``ck`` (an ``FxChecker`` at the end of a pass whose
    graph before it is ``ck.before``) made with the driver's ``fired``
    (``(rule, root, replacement)``) on its windows: True when checked (a
    rejection raises :class:`RewriteRejected`), False when the window does
    not cover the pass (the caller checks the whole graphs)."""
    tick = (lambda part: None) if clock is None else _ticker(clock)
    try:
        built = _windows(ck, number, fired, tick)
    except _NotCovered:
        return False
    p, wg, wimages = built
    p.correspond()
    tick("correspond")
    p.check_certified(wg, ck.labels, _operator_of, wimages, fuel=ck.driver.pset.fuel)
    tick("check")
    return True


def _ticker(clock: dict):
    """``tick(part)``: the time since the last tick added to ``clock[part]``."""
    last = [time.perf_counter()]

    def tick(part):
        t = time.perf_counter()
        clock[part] = clock.get(part, 0.0) + t - last[0]
        last[0] = t
    return tick


def _operator_of(key):
    return key[0]


def _windows(ck, number: int, fired: list, tick):
    """``(pass on the windows, window of the matcher's graph, images)``, or
    :class:`_NotCovered`."""
    before: Encoding = ck.before
    driver = ck.driver
    bi, bkeys, bargs = before.index, before.keys, before.args
    node_type = ck.node_type
    certs, firings = ck.certs, []
    roots = set()
    for rule, root, new in fired:
        c = certs.get(root)
        g = bi.get(root)
        if g is None:
            raise RewriteRejected(
                f"rewrite validation (FX driver, pass {number}): rule {rule!r} fired at "
                f"{root.name}, which was not in the graph at the start of the pass",
                REJECT_FIRING, root.name, (rule, root.name, new.name))
        if type(c) is str or c is None or not root._erased or g in roots:
            raise _NotCovered
        roots.add(g)
        firings.append(Firing(rule, g, new, root.name, new.name, c))
    if not firings or driver.tg.merged != ck._merged0 or \
            len({id(f.certificate.patterns) for f in firings}) != 1:
        raise _NotCovered
    if not ck._imaged:
        ck._images()

    # 1. the sweep: created and changed nodes, in graph order
    cache, known, assert_target = ck.cache, ck.known, ck.assert_target
    region: List[object] = []  # after the pass: created or changed FX nodes
    changed_b: List[int] = []  # their before indices (the changed ones)
    out_nodes = None
    for n in driver.gm.graph.nodes:
        op = n.op
        if op == "output":
            out_nodes = ck._output_nodes(n)
            continue
        if op == "call_function" and n.target is assert_target:
            continue
        g = bi.get(n)
        if g is not None:
            hit = cache.get(n)
            if hit is not None and hit[0] is n.args and hit[1] is n.kwargs and \
                    hit[2] is n.target:
                continue  # kept
            changed_b.append(g)
            region.append(n)
        elif n not in known:
            region.append(n)  # created
        # else: dead at the start of the pass (encoded only if the region reads it)
    if out_nodes is None:
        raise _NotCovered
    tick("sweep")

    # a before node is kept: its FX node is still in the graph, unchanged,
    # and not a fired root
    gone = set(changed_b) | roots

    def kept(g: int) -> bool:
        k = bkeys[g]
        return type(k) is node_type and g not in gone and not k._erased

    # 2. the windows. Before: copies of the matches (each from its root down
    # to its bindings) and of the changed nodes, then of every argument of a
    # copy that is not kept (erased, changed; constants and lists)
    cb = set(changed_b)
    for f in firings:
        bound = set()
        for _x, key in f.certificate.substitution:
            j = bi.get(key)
            if j is None:
                raise _NotCovered
            bound.add(j)
        if f.root in bound:  # the match binds its own root
            raise _NotCovered
        stack, seen = [f.root], set()
        while stack:
            u = stack.pop()
            if u not in seen and u not in bound:
                seen.add(u)
                stack.extend(bargs[u])
        cb |= seen
    stack = list(cb)
    while stack:
        for x in bargs[stack.pop()]:
            if x not in cb and not kept(x):
                cb.add(x)
                stack.append(x)
    # after: the region and the kept nodes copied before (a node outside the
    # windows may read them); what they read is either of those or a kept
    # node (a frontier leaf)
    infos = {n: ck._node(n) for n in region}
    for g in cb:
        if kept(g):
            infos[bkeys[g]] = ck._node(bkeys[g])
    ca = set(infos)
    for n in list(ca):
        for a in infos[n][1]:  # its argument FX nodes
            if a not in ca:
                g = bi.get(a)
                if g is None or not kept(g):
                    raise _NotCovered  # a node dead at the start, or erased, read

    tick("reading the region")

    # outputs: the graph's, then the impure nodes before the pass (or their
    # replacements); pairs the pass touched
    n_real = len(before.outputs) - before.anchors
    if len(out_nodes) != n_real:
        raise _NotCovered
    rep = {root: new for _rule, root, new in fired}
    pairs = []  # (after FX node, before index)
    for o, go in zip(out_nodes, before.outputs[:n_real]):
        pairs.append((o, go))
    for go in before.outputs[n_real:]:
        n, k = bkeys[go], 0
        while n in rep and k <= len(rep):
            n, k = rep[n], k + 1
        if n._erased:
            raise _NotCovered
        pairs.append((n, go))
    touched = []
    for o, go in pairs:
        g = bi.get(o)
        if g is not None and g == go and kept(g) and g not in cb:
            continue  # the same kept node: outside the window
        if o not in ca:
            g = bi.get(o)
            if g is None or not kept(g):
                raise _NotCovered
        touched.append((o, go))

    # the frontier: kept nodes read from the window, the same on both sides
    fa = {a for n in ca for a in infos[n][1] if a not in ca}  # after: kept nodes read
    for o, go in touched:
        if o not in ca:
            fa.add(o)
        if go not in cb and not kept(go):
            raise _NotCovered
    for f in firings:  # each replacement is in the window (a kept one a leaf)
        r = f.replacement
        if r not in ca:
            g = bi.get(r)
            if g is None or not kept(g):
                raise _NotCovered
            fa.add(r)
    fb = {x for g in cb for x in bargs[g] if x not in cb}
    fb |= {bi[a] for a in fa}
    fb |= {go for _o, go in touched if go not in cb}

    labels = ck.labels
    front: Dict[object, int] = {}  # FX node -> its frontier number

    def frontier_label(sym, key) -> int:
        k = front.get(key)
        if k is None:
            k = front[key] = len(front)
        return labels((sym, "frontier", k))

    # before window: the before encoding's nodes, in order
    wb = Encoding()
    ib: Dict[int, int] = {}
    bsyms = before.syms
    for g in sorted(cb | fb):
        key = bkeys[g]
        if g in cb:
            lab = before.labels[g]
            args = tuple([ib[x] for x in bargs[g]])
            merge = before.mergeable[g]
        else:
            lab, args, merge = frontier_label(bsyms[g], key), (), False
        ib[g] = wb.add(key, lab, args, before.names[g], merge)
        wb.syms.append(bsyms[g])

    # after window: copies in graph order (constants and lists before their
    # first user), frontier leaves before their first reader
    wa = Encoding()
    index = wa.index

    def emit_leaf(a) -> int:
        j = index.get(a)
        if j is None:
            g = bi[a]
            j = wa.add(a, frontier_label(bsyms[g], a), (), a.name, False)
            wa.syms.append(bsyms[g])
        return j

    def emit_spec(spec) -> int:
        if type(spec) is node_type:
            j = index.get(spec)
            return emit_leaf(spec) if j is None else j
        j = index.get(spec)
        if j is not None:
            return j
        lab, sym, kids, name = ck._spec_node(spec, emit_spec)
        j = wa.add(spec, lab, kids, name, True)
        wa.syms.append(sym)
        return j

    for n in driver.gm.graph.nodes:
        if n not in ca:
            continue
        label, _kids, pure, specs, sym = infos[n]
        args = tuple([emit_spec(s) for s in specs])
        wa.add(n, label, args, n.name, pure and n.op == "call_function")
        wa.syms.append(sym)
    if len(wa) == 0:
        raise _NotCovered
    for a in sorted(fa, key=bi.get):  # the frontier no copy reads (outputs, replacements)
        emit_leaf(a)
    # the windows' outputs: each node on both sides (a changed node, a kept
    # copy: nodes outside the window may read it), then the graph's touched
    # outputs
    both = [(h, ib[g]) for h, key in enumerate(wa.keys)
            if type(key) is node_type and key in ca and (g := bi.get(key)) is not None]
    wb.outputs = [g for _h, g in both] + [ib[go] for _o, go in touched]
    wa.outputs = [h for h, _g in both] + [index[o] for o, _go in touched]
    wb.anchors = wa.anchors = 0
    identity = {}  # as the whole graphs': the same key (an FX node, a constant, a list)
    for h, key in enumerate(wa.keys):
        g = bi.get(key)
        if g is not None and g not in roots and g in ib:
            identity[h] = ib[g]
    wfirings = [Firing(f.rule, ib[f.root], f.replacement, f.root_name, f.replacement_name,
                       f.certificate) for f in firings]
    from pypm_verified.torch.validate_fx import _fx_resolve
    p = Pass("FX driver", number, wb, wa, wfirings, identity, _fx_resolve)
    tick("the windows")

    wg, wimages = matcher_window(driver.tg.graph, ck.images, sorted(ib), cb)
    tick("the matcher's window")
    load(wg)
    tick("loading it")
    return p, wg, wimages


__all__ = ["WindowGraph", "check_window", "load", "matcher_window"]
