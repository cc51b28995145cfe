"""An independent reading of docs/internals/format.md for the tests: decoders of graph
and pattern-set buffers, and a simulated engine that answers
``binding.match`` / ``binding.match_all`` from the encoded buffers alone
(decoded here, matched by the ``Interpreter.v`` transcription in
machine.py, results encoded as the format says and decoded by the
package). It lets the verified-engine code path be tested without the
shared library."""
from pypm_verified.engines import serialize
from pypm_verified.core import (
    EAdd, EAttr, EConst, EFAttr, EMul, ESub, GAnd, GEq, GLt, GNot, GOr, GTrue, PAlt, PApp,
    PCall, PConstr, PDef, PExists, PExistsF, PFunVar, PGuard, PVar, Program)


class Reader:
    def __init__(self, words):
        self.w, self.i = list(words), 0

    def next(self):
        v = self.w[self.i]
        self.i += 1
        return v

    def done(self):
        assert self.i == len(self.w), "trailing words"


def decode_graph(words):
    r = Reader(words)
    assert r.next() == int.from_bytes(b"PYPMGRPH", "little")
    assert r.next() == 2
    nodes = []
    for _ in range(r.next()):
        label = r.next()
        children = [r.next() for _ in range(r.next())]
        attrs = {}
        for _ in range(r.next()):
            a = r.next()
            assert a not in attrs
            attrs[a] = r.next()
        nodes.append((label, children, attrs))
    sym_attrs = {}
    for _ in range(r.next()):
        s, a, v = r.next(), r.next(), r.next()
        assert (s, a) not in sym_attrs
        sym_attrs[(s, a)] = v
    r.done()
    return nodes, sym_attrs


def read_expr(r):
    tag = r.next()
    if tag == 1:
        return EConst(r.next())
    if tag == 2:
        return EAttr(r.next(), r.next())
    if tag == 6:
        return EFAttr(r.next(), r.next())
    return {3: EAdd, 4: ESub, 5: EMul}[tag](read_expr(r), read_expr(r))


def read_guard(r):
    tag = r.next()
    if tag == 1:
        return GTrue()
    if tag in (2, 3):
        return (GEq if tag == 2 else GLt)(read_expr(r), read_expr(r))
    if tag in (4, 5):
        return (GAnd if tag == 4 else GOr)(read_guard(r), read_guard(r))
    assert tag == 6
    return GNot(read_guard(r))


def read_pattern(r):
    tag = r.next()
    if tag == 1:
        return PVar(r.next())
    if tag in (2, 8):
        f, n = r.next(), r.next()
        return (PApp if tag == 2 else PFunVar)(f, tuple(read_pattern(r) for _ in range(n)))
    if tag == 3:
        return PAlt(read_pattern(r), read_pattern(r))
    if tag == 4:
        return PGuard(read_pattern(r), read_guard(r))
    if tag in (5, 6):
        x = r.next()
        return (PExists if tag == 5 else PExistsF)(x, read_pattern(r))
    if tag == 7:
        p, p2 = read_pattern(r), read_pattern(r)
        return PConstr(p, p2, r.next())
    assert tag == 9
    P = r.next()
    xs = tuple(r.next() for _ in range(r.next()))
    Fs = tuple(r.next() for _ in range(r.next()))
    return PCall(P, xs, Fs)


def decode_patterns(words):
    """-> (defs, roots)"""
    r = Reader(words)
    assert r.next() == int.from_bytes(b"PYPMPATS", "little")
    assert r.next() == 2
    defs = []
    for _ in range(r.next()):
        n, m = r.next(), r.next()
        pb = tuple(r.next() for _ in range(r.next()))
        pfb = tuple(r.next() for _ in range(r.next()))
        length = r.next()
        start = r.i
        body = read_pattern(r)
        assert r.i - start == length
        defs.append(PDef(n, m, body, pb, pfb))
    roots = [r.next() for _ in range(r.next())]
    r.done()
    return defs, roots



# --------------------------------------------------------- simulated engine


class WireNode:
    def __init__(self, graph, nid, label):
        self.graph, self.id, self.label, self.args = graph, nid, label, ()


class WireGraph:
    """A graph rebuilt from its encoding (what the machine transcription reads)."""

    def __init__(self, words):
        nodes, self.syms = decode_graph(words)
        self.nodes = [WireNode(self, i, label) for i, (label, _, _) in enumerate(nodes)]
        for n, (_, children, _) in zip(self.nodes, nodes):
            n.args = tuple(self.nodes[c] for c in children)
        self.attrs = [dict(attrs) for _, _, attrs in nodes]

    def attr_map(self, nid):
        return dict(self.attrs[nid])

    def sym_attr(self, symbol, attr):
        return self.syms.get((symbol, attr))


def _run(graph, defs, root, node, fuel):
    from machine import OUT_OF_FUEL, match_root
    out = match_root(Program(tuple(defs), root), graph.nodes[node],
                     fuel if fuel and fuel > 0 else 1 << 26)
    if out == OUT_OF_FUEL:
        return [serialize.STATUS_OUT_OF_FUEL, 0, 0]
    if out is None:
        return [serialize.STATUS_NO_MATCH, 0, 0]
    theta, phi = out
    words = [serialize.STATUS_MATCH, len(theta)]
    for v in sorted(theta):
        words += (v, theta[v].id)
    words.append(len(phi))
    for F in sorted(phi):
        words += (F, phi[F])
    return words


def match(graph, root, defs, roots, index=0, fuel=None, owner=None):
    """``binding.match`` answered from the buffers."""
    g = WireGraph(serialize.encode_graph(graph))
    table, rs = decode_patterns(serialize.encode_patterns(defs, roots))
    return serialize.decode_match(_run(g, table, rs[index], root, fuel))


class SetMatcher:
    """``binding.SetMatcher`` answered from the buffers (by :func:`match`)."""

    lib = None

    def __init__(self, defs, roots, owner=None):
        self.defs, self.roots = defs, roots

    def match(self, graph, root, index, fuel=None):
        return match(graph, root, self.defs, self.roots, index, fuel)

    def first(self, graph, root, indices, start=0, fuel=None):
        for k in range(start, len(indices)):
            r = self.match(graph, root, indices[k], fuel)
            if r[0] != serialize.STATUS_NO_MATCH:
                return k, r
        return None


def candidates(defs, roots, symbol, attrs=(), owner=None):
    """``binding.candidates`` answered from the buffer, by the transcription
    of ``RootIndex.root_index`` (``attrs``: the operator's ``(attr, value)``
    pairs)."""
    from machine import ANY, root_index
    table, rs = decode_patterns(serialize.encode_patterns(defs, roots))
    idx = root_index(table)
    return tuple(i for i, r in enumerate(rs)
                 if idx.get(r, ANY) == ANY or symbol in idx[r][1]
                 or any(c in idx[r][2] for c in attrs))


def candidates_at(defs, roots, symbol, attrs=(), kids=(), owner=None):
    """``binding.candidates_at`` answered from the buffer: the roots of
    :func:`candidates` whose shapes (the transcription ``core.kid_symbols``
    of ``KidIndex.kid_index``, on the decoded table) admit the node's
    operator and arguments ``kids`` (``(symbol, attrs)`` pairs)."""
    from pypm_verified import core
    table, rs = decode_patterns(serialize.encode_patterns(defs, roots))
    shapes = core.kid_symbols(table)
    return tuple(i for i in candidates(defs, roots, symbol, attrs, owner)
                 if core.kids_admit(shapes[rs[i]], symbol, attrs, kids))


def match_all(graph, defs, roots, fuel=None, owner=None):
    """``binding.match_all`` answered from the buffers."""
    g = WireGraph(serialize.encode_graph(graph))
    table, rs = decode_patterns(serialize.encode_patterns(defs, roots))
    entries = []
    for node in range(len(g.nodes)):
        for i, r in enumerate(rs):
            res = _run(g, table, r, node, fuel)
            if res[0] != serialize.STATUS_NO_MATCH:
                entries.append([i, node] + res)
    return serialize.decode_match_all([len(entries)] + [w for e in entries for w in e])
