"""The wire format (docs/internals/format.md), checked with an independent decoder."""
import time

import pytest

import pypm_verified as pm
from pypm_verified.engines import serialize
from pypm_verified.core import symbols
from pypm_verified import core
from pypm_verified.core import (
    EAdd, EAttr, EConst, EFAttr, EMul, ESub, GAnd, GEq, GLt, GNot, GOr, GTrue, PAlt, PApp,
    PCall, PConstr, PDef, PExists, PExistsF, PFunVar, PGuard, PVar)


@pm.op
def Add(x, y):
    return 1


@pm.op(op_class="unary_pointwise")
def Neg(x):
    return 1


from wire import decode_graph, decode_patterns  # noqa: E402  (independent decoder)


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
    nodes, sym_attrs = decode_graph(g.encode())
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
    # the class of every operator labelling a node (Add has none); leaves have
    # the classes "input" and "constant" (pm.is_input(), pm.is_constant())
    ia, ib, c2 = symbols.intern(("input", "a")), symbols.intern(("input", "b")), \
        symbols.const_symbol(2)
    assert sym_attrs == {(Neg.symbol, core.OPCLASS): pm.opclass("unary_pointwise").code,
                         (ia, core.OPCLASS): pm.opclass("input").code,
                         (ib, core.OPCLASS): pm.opclass("input").code,
                         (c2, core.OPCLASS): pm.opclass("constant").code}
    assert g.sym_attr(Neg.symbol, core.OPCLASS) == Neg.op_class.code
    assert g.sym_attr(Add.symbol, core.OPCLASS) is None
    assert g.sym_attr(Neg.symbol, core.RANK) is None
    # attributes are written in increasing id order
    raw = list(g.encode())
    assert raw[3:5] == [nodes[0][0], 0] and raw[5] == 6 and raw[6:18:2] == [0, 1, 100, 101, 200, 201]
    entries = sorted((sym, core.OPCLASS, v) for (sym, _), v in sym_attrs.items())
    assert raw[-13:] == [4] + [w for e in entries for w in e]


def test_empty_graph():
    assert list(pm.Graph().encode()) == [serialize.MAGIC_GRAPH, 2, 0, 0]


def test_pattern_round_trip():
    p1 = PGuard(PAlt(PApp(3, (PVar(0), PApp(4, ()))), PVar(0)),
                GOr(GAnd(GEq(EAttr(0, 0), EConst(-2)), GTrue()),
                    GNot(GLt(EMul(EAdd(EConst(1), EAttr(0, 200)),
                                  ESub(EConst(core.VALUE_MAX), EFAttr(1, 2))),
                             EConst(core.VALUE_MIN)))))
    p2 = PExists(5, PExistsF(3, PConstr(PFunVar(3, (PVar(5), PVar(0))),
                                        PCall(0, (5, 0), (3,)), 5)))
    defs = [PDef(1, 2, p1, (0,), ()), PDef(2, 1, p2, (0,), (0,))]
    words = serialize.encode_patterns(defs, [1, 0, 1])
    assert decode_patterns(words) == (defs, [1, 0, 1])
    body1 = serialize.encode_pattern(p1)
    assert list(words[:11]) == [serialize.MAGIC_PATTERNS, 2, 2, 1, 2, 1, 0, 0, len(body1),
                                *body1[:2]]
    assert serialize.encode_pattern(PVar(7)) == [1, 7]
    assert serialize.encode_pattern(PApp(5, (PVar(1), PVar(2)))) == [2, 5, 2, 1, 1, 1, 2]
    # the tags of docs/internals/format.md, x of a constraint after both patterns
    assert serialize.encode_pattern(PConstr(PVar(1), PVar(2), 3)) == [7, 1, 1, 1, 2, 3]
    assert serialize.encode_pattern(PExists(4, PVar(4))) == [5, 4, 1, 4]
    assert serialize.encode_pattern(PExistsF(4, PFunVar(4, ()))) == [6, 4, 8, 4, 0]
    assert serialize.encode_pattern(PCall(2, (0, 0, 1), (5,))) == [9, 2, 3, 0, 0, 1, 1, 5]
    assert serialize.encode_pattern(PGuard(PVar(0), GEq(EFAttr(1, 2), EConst(3)))) == \
        [4, 1, 0, 2, 6, 1, 2, 1, 3]
    assert list(serialize.encode_patterns([], [])) == [serialize.MAGIC_PATTERNS, 2, 0, 0]
    prog = core.Program(tuple(defs), 1)
    assert list(serialize.encode_program(prog)) == list(serialize.encode_patterns(defs, [1]))


def test_dsl_pattern_round_trip():
    @pm.pattern
    def P(x, y):
        assert x.shape[-1] == y.shape[0] and x.dtype != pm.bool_
        return Add(Neg(x), y)

    @pm.pattern
    def P(x, y):  # noqa: F811
        return Add(y, 1.5)

    @pm.pattern
    def Chain(x, f):
        return f(Chain(x, f))

    @pm.pattern
    def Chain(x, f):  # noqa: F811
        r = pm.var()
        r <= f(x)
        assert f.op_class == pm.opclass("unary_pointwise")
        return r

    @pm.pattern
    def Both(x, y, f):
        return Add(P(x, y), Chain(y, f))
    prog = Both.program
    assert decode_patterns(serialize.encode_program(prog)) == (list(prog.defs), [0])
    # callees follow the root; call indices are the table's
    assert [d.body for d in prog.defs[:2]] == [Both.core, P.core]
    assert prog.defs[2].body == core.shift_calls(Chain.core, 2)


def test_encode_errors():
    for bad in (PVar(-1), PVar(1 << 62), PApp(1 << 62, ()), PVar(True),
                PGuard(PVar(0), GEq(EConst(1 << 62), EConst(0))),
                PGuard(PVar(0), GEq(EConst(-(1 << 62) - 1), EConst(0))),
                PGuard(PVar(0), GEq(EConst(-(1 << 62)), EConst(0))),
                PGuard(PVar(0), GEq(EAttr(0, -1), EConst(0))),
                PGuard(PVar(0), GEq(EFAttr(-1, 2), EConst(0))),
                PExists(-1, PVar(0)), PConstr(PVar(0), PVar(0), 1 << 62),
                PCall(0, (-1,), ()), PCall(-1, (), ()), "x"):
        with pytest.raises(serialize.EncodeError):
            serialize.encode_pattern(bad)
    with pytest.raises(serialize.EncodeError, match="root"):
        serialize.encode_patterns([PDef(0, 0, PVar(0))], [1])
    with pytest.raises(serialize.EncodeError, match="definition"):
        serialize.encode_patterns([PVar(0)], [0])
    for bad in (PApp(1, (GTrue(),)), PGuard(PVar(0), EConst(1)),
                PGuard(PVar(0), GEq(PVar(0), EConst(1))), PExists(0, GTrue())):
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
    assert serialize.decode_match([0, 2, 0, 5, 1, 6, 1, 0, 9]) == \
        (0, [(0, 5), (1, 6)], [(0, 9)])
    assert serialize.decode_match([1, 0, 0]) == (1, [], [])
    for bad in ([3, 0, 0], [0, 1, 0], [0, 0], [0, 0, 0, 7], []):
        with pytest.raises(ValueError):
            serialize.decode_match(bad)
    entries = [2, 0, 3, 0, 1, 0, 7, 1, 2, 4, 1, 4, 2, 0, 0]
    assert serialize.decode_match_all(entries) == [(0, 3, 0, [(0, 7)], [(2, 4)]),
                                                   (1, 4, 2, [], [])]
    assert serialize.decode_match_all([0]) == []
    for bad in ([0, 1], [1, 0, 3, 0, 0], [1, 0, 3, 0, 1, 0]):
        with pytest.raises(ValueError):
            serialize.decode_match_all(bad)


def test_large_graph_encodes_fast():
    g = pm.Graph()
    prev = g.input("a", shape=(4, 8), dtype=pm.f32)
    for i in range(50_000):
        prev = g.apply(Add, prev, g.apply(Neg, prev, shape=(4, 8), dtype=pm.f32))
    assert len(g) == 100_001
    # CPU time, not wall time: other processes on the machine do not count.
    # About 0.02-0.05 s (native, Python); an encoder quadratic in the nodes
    # would take hours here, one that rebuilds the attribute words per node
    # many times this
    start = time.process_time()
    words = g.encode()
    elapsed = time.process_time() - start
    assert elapsed < 1.0, elapsed
    assert words[2] == 100_001 and len(words) > 3 * 100_001
