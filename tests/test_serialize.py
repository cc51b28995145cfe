"""The wire format (doc/format.md), checked with an independent decoder."""
import time

import pytest

import pypm_verified as pm
from pypm_verified import serialize, symbols
from pypm_verified.core import (EAdd, EAttr, EConst, EMul, ESub, GAnd, GEq, GLt, GNot, GOr,
                                GTrue, PAlt, PApp, PGuard, PVar)


@pm.op
def Add(x, y):
    return 1


@pm.op
def Neg(x):
    return 1


# ---------------------------------------------------------------- decoder


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
    assert r.next() == 1
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
    r.done()
    return nodes


def read_expr(r):
    tag = r.next()
    if tag == 1:
        return EConst(r.next())
    if tag == 2:
        return EAttr(r.next(), r.next())
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
    if tag == 2:
        f, n = r.next(), r.next()
        return PApp(f, tuple(read_pattern(r) for _ in range(n)))
    if tag == 3:
        return PAlt(read_pattern(r), read_pattern(r))
    assert tag == 4
    return PGuard(read_pattern(r), read_guard(r))


def decode_patterns(words):
    r = Reader(words)
    assert r.next() == int.from_bytes(b"PYPMPATS", "little")
    assert r.next() == 1
    out = []
    for _ in range(r.next()):
        n = r.next()
        start = r.i
        out.append(read_pattern(r))
        assert r.i - start == n
    r.done()
    return out


# ------------------------------------------------------------------ tests


def test_magics():
    assert serialize.to_bytes([serialize.MAGIC_GRAPH]) == b"PYPMGRPH"
    assert serialize.to_bytes([serialize.MAGIC_PATTERNS]) == b"PYPMPATS"


def test_graph_round_trip():
    g = pm.Graph()
    a = g.input("a", shape=(4, 8), dtype=pm.f32)
    b = g.input("b")
    s = g.apply(Add, a, b, shape=(4, 8))
    n = g.apply(Neg, s, dtype=pm.i8)
    g.apply(Add, n, 2)
    nodes = decode_graph(g.encode())
    assert len(nodes) == len(g) == 6
    for node, (label, children, attrs) in zip(g, nodes):
        assert label == node.label
        assert children == [c.id for c in node.args]
        assert attrs == node.attrs
    assert nodes[0] == (symbols.intern(("input", "a")), [],
                        {0: 2, 1: pm.f32.code, 100: 4, 101: 8, 200: 8, 201: 4})
    assert nodes[2][1:] == ([0, 1], {0: 2, 100: 4, 101: 8, 200: 8, 201: 4})
    assert nodes[3] == (Neg.symbol, [2], {1: pm.i8.code})
    assert nodes[4] == (symbols.const_symbol(2), [], {})
    # attributes are written in increasing id order
    raw = list(g.encode())
    assert raw[3:5] == [nodes[0][0], 0] and raw[5] == 6 and raw[6:18:2] == [0, 1, 100, 101, 200, 201]


def test_empty_graph():
    assert list(pm.Graph().encode()) == [serialize.MAGIC_GRAPH, 1, 0]


def test_pattern_round_trip():
    p1 = PGuard(PAlt(PApp(3, (PVar(0), PApp(4, ()))), PVar(0)),
                GOr(GAnd(GEq(EAttr(0, 0), EConst(-2)), GTrue()),
                    GNot(GLt(EMul(EAdd(EConst(1), EAttr(0, 200)), ESub(EConst(1 << 62), EConst(3))),
                             EConst(-(1 << 63))))))
    p2 = PVar(7)
    words = serialize.encode_patterns([p1, p2])
    assert decode_patterns(words) == [p1, p2]
    assert list(words[:5]) == [serialize.MAGIC_PATTERNS, 1, 2, len(serialize.encode_pattern(p1)), 4]
    assert serialize.encode_pattern(p2) == [1, 7]
    assert serialize.encode_pattern(PApp(5, (PVar(1), PVar(2)))) == [2, 5, 2, 1, 1, 1, 2]
    assert list(serialize.encode_patterns([])) == [serialize.MAGIC_PATTERNS, 1, 0]


def test_dsl_pattern_round_trip():
    @pm.pattern
    def P(x, y):
        assert x.shape[-1] == y.shape[0] and x.dtype != pm.bool_
        return Add(Neg(x), y)

    @pm.pattern
    def P(x, y):  # noqa: F811
        return Add(y, 1.5)
    assert decode_patterns(serialize.encode_patterns([P.core])) == [P.core]


def test_encode_errors():
    for bad in (PVar(-1), PVar(1 << 62), PApp(1 << 62, ()),
                PGuard(PVar(0), GEq(EConst(1 << 63), EConst(0))),
                PGuard(PVar(0), GEq(EAttr(0, -1), EConst(0))), "x"):
        with pytest.raises(serialize.EncodeError):
            serialize.encode_pattern(bad)
    for bad in (PApp(1, (GTrue(),)), PGuard(PVar(0), EConst(1)), PGuard(PVar(0), GEq(PVar(0), EConst(1)))):
        with pytest.raises(serialize.EncodeError, match="expected a"):
            serialize.encode_pattern(bad)


def nest(depth):
    """A pattern of exactly ``depth`` nesting levels (iteratively built)."""
    p = PVar(0)
    for _ in range(depth - 1):
        p = PApp(1, (p,))
    return p


def test_depth_limit():
    words = serialize.encode_pattern(nest(serialize.MAX_DEPTH))
    assert len(words) == 3 * (serialize.MAX_DEPTH - 1) + 2
    with pytest.raises(serialize.EncodeError, match="MAX_DEPTH"):
        serialize.encode_pattern(nest(serialize.MAX_DEPTH + 1))
    g = GTrue()
    for _ in range(serialize.MAX_DEPTH - 1):
        g = GNot(g)
    with pytest.raises(serialize.EncodeError, match="MAX_DEPTH"):
        serialize.encode_pattern(PGuard(PVar(0), g))  # guards count towards the depth


def test_bytes_round_trip():
    words = [serialize.MAGIC_GRAPH, -1, 0, 1 << 62]
    data = serialize.to_bytes(words)
    assert len(data) == 32 and data[8:16] == b"\xff" * 8
    assert list(serialize.from_bytes(data)) == words
    with pytest.raises(ValueError):
        serialize.from_bytes(b"123")


def test_result_decoders():
    assert serialize.decode_match([0, 2, 0, 5, 1, 6]) == (0, [(0, 5), (1, 6)])
    assert serialize.decode_match([1, 0]) == (1, [])
    with pytest.raises(ValueError):
        serialize.decode_match([3, 0])
    entries = [2, 0, 3, 0, 1, 0, 7, 1, 4, 2, 0]
    assert serialize.decode_match_all(entries) == [(0, 3, 0, [(0, 7)]), (1, 4, 2, [])]
    assert serialize.decode_match_all([0]) == []
    with pytest.raises(ValueError):
        serialize.decode_match_all([0, 1])


def test_large_graph_encodes_fast():
    g = pm.Graph()
    prev = g.input("a", shape=(4, 8), dtype=pm.f32)
    for i in range(50_000):
        prev = g.apply(Add, prev, g.apply(Neg, prev, shape=(4, 8), dtype=pm.f32))
    assert len(g) == 100_001
    start = time.perf_counter()
    words = g.encode()
    elapsed = time.perf_counter() - start
    assert elapsed < 1.0, elapsed
    assert words[2] == 100_001 and len(words) > 3 * 100_001
