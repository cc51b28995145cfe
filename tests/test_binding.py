"""The cffi binding to the verified engine (needs a library reading format
version 2, except for the EngineUnavailable tests) and differential tests
against the reference matcher: random tables of the full calculus, basic
patterns, match_all, and the fuel accounting (5,500 cases in all). Smaller
versions of the differential tests run the same code path against the
simulated engine of tests/wire.py, without the library."""
import contextlib
import gc
import os
import subprocess
import sys
import textwrap
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pypm_verified as pm
import wire
from pypm_verified.engines import matching as api, binding, declarative, serialize
from pypm_verified import core
from pypm_verified.engines.binding import ffi
from pypm_verified.core import (
    EAttr, EConst, EFAttr, GEq, GTrue, PAlt, PApp, PCall, PDef, PExists, PFunVar, PGuard, PVar,
    Program)
from strategies import B2, U1, chain_graphs, graphs, patterns, patterns_for, programs


@pm.op
def Relu(x):
    return 1


@pm.op
def Add(x, y):
    return 1


@pm.pattern
def AddRelu(x, y):
    assert x.rank == 1
    return Add(Relu(x), y)


def test_engine_unavailable(monkeypatch, tmp_path):
    monkeypatch.setenv(binding.ENV_VAR, str(tmp_path / "missing.so"))
    g = pm.Graph()
    n = g.apply(Relu, g.input("a"))
    with pytest.raises(pm.EngineUnavailable, match="make lib"):
        pm.match(AddRelu, n)
    with pytest.raises(pm.EngineUnavailable, match="make lib"):
        pm.match_all([AddRelu], g)
    assert not pm.engine_available()
    assert pm.match(AddRelu, n, engine="reference") is None  # no library needed
    bogus = tmp_path / "bogus.so"
    bogus.write_bytes(b"not an ELF file")
    monkeypatch.setenv(binding.ENV_VAR, str(bogus))
    with pytest.raises(pm.EngineUnavailable, match="cannot load"):
        pm.match(AddRelu, n)


def test_default_library_path(monkeypatch):
    monkeypatch.delenv(binding.ENV_VAR, raising=False)
    assert binding.engine_library_path() == os.path.join(
        os.path.dirname(pm.__file__), "_lib", "libpypm_verified.so")


def test_format_version(lib):
    assert lib.pypm_format_version() == serialize.VERSION == 2


def test_handles_are_cached(lib):
    g = pm.Graph()
    x = g.input("x", shape=(3,))
    n = g.apply(Add, g.apply(Relu, x), x)
    m = pm.match(AddRelu, n)
    assert m.bindings == {"x": x, "y": x}
    gh, ph = g.engine_handle, AddRelu.engine_handle
    assert gh is not None and ph is not None
    assert gh.size() == len(g) and ph.size() == 1
    for _ in range(3):
        assert pm.match(AddRelu, n) == m
    assert g.engine_handle is gh and AddRelu.engine_handle is ph
    # new nodes extend the loaded graph in place (pypm_graph_extend)
    n2 = g.apply(Relu, n)
    assert pm.match(AddRelu, n2) is None
    y = g.input("y", shape=(4,))
    n3 = g.apply(Add, g.apply(Relu, y), n2)
    assert pm.match(AddRelu, n3).bindings == {"x": y, "y": n2}
    assert g.engine_handle is gh and gh.size() == len(g) == gh.key


def test_graph_handle_released_with_graph(lib):
    g = pm.Graph()
    n = g.apply(Relu, g.input("x"))
    pm.match(AddRelu, n)
    value = g.engine_handle.value
    del g, n
    gc.collect()
    assert lib.pypm_handle_size(value, ffi.new("int64_t *")) == lib.PYPM_E_BAD_HANDLE


def _raw_load(lib, fn, words):
    buf = ffi.new("int64_t[]", list(words) or [0])
    return fn(buf, len(words), ffi.new("int64_t *"))


def _set(*defs, roots=(0,)):
    return list(serialize.encode_patterns(defs, roots))


def test_error_codes(lib):
    good = list(pm.Graph().encode())
    assert _raw_load(lib, lib.pypm_graph_load, good) == lib.PYPM_OK
    G = serialize.MAGIC_GRAPH
    for bad in ([], good[:2], good + [0], [good[0], good[1] + 1, 0, 0], [G, 1, 0],
                [G, 2, 1, 0, 1, 5, 0, 0],  # child out of range
                [G, 2, 1, 0, 0, 1, 0, 1 << 62, 0],  # attribute value out of range
                [G, 2, 1, 0, 0, 0, 2, 0, 2, 1, 0, 2, 2]):  # repeated symbol attribute
        assert _raw_load(lib, lib.pypm_graph_load, bad) == lib.PYPM_E_MALFORMED, bad
    with pytest.raises(pm.EngineError) as ei:
        binding.load_graph(lib, good + [0])
    e = ei.value
    assert e.code == lib.PYPM_E_MALFORMED and e.name and e.name in str(e)
    assert "pypm_graph_load" in str(e) and e.detail
    ok = _set(PDef(1, 0, PVar(0), (0,)))
    assert _raw_load(lib, lib.pypm_patterns_load, ok) == lib.PYPM_OK
    P = serialize.MAGIC_PATTERNS
    assert ok == [P, 2, 1, 1, 0, 1, 0, 0, 2, 1, 0, 1, 0]
    for bad in (ok[:-1], ok + [0], [P, 1] + ok[2:],
                [P, 2, 1, 1, 0, 1, 0, 0, 2, 1, 0, 1, 1],  # root out of range
                [P, 2, 1, 1, 0, 1, 0, 0, 3, 1, 0, 1, 1, 0]):  # body length wrong
        assert _raw_load(lib, lib.pypm_patterns_load, bad) != lib.PYPM_OK, bad
    # ill-formed: a guard reads a variable the pattern does not bind, a wrong
    # pbinds claim, an ∃ that does not bind its variable
    for ill in (PDef(2, 0, PGuard(PVar(0), GEq(EAttr(1, 0), EConst(1))), (0,)),
                PDef(2, 0, PVar(0), (0, 1)),
                PDef(1, 0, PExists(1, PVar(0)), (0,))):
        with pytest.raises(pm.EngineError) as ei:
            binding.load_patterns(lib, _set(ill))
        assert ei.value.code == lib.PYPM_E_ILL_FORMED, ill
    # a call of a missing definition is rejected
    code = _raw_load(lib, lib.pypm_patterns_load, _set(PDef(0, 0, PCall(4, (), ()))))
    assert code in (lib.PYPM_E_MALFORMED, lib.PYPM_E_ILL_FORMED)
    # a variable that is neither a parameter nor ∃-bound has no slot: rejected,
    # or accepted and never matched (ST-MATCH-VAR-CONFLICT); the Python
    # frontend rejects it earlier (core.check_scoped)
    unscoped = _set(PDef(1, 0, PApp(Relu.symbol, (PVar(3),))))
    if _raw_load(lib, lib.pypm_patterns_load, unscoped) == lib.PYPM_OK:
        g = pm.Graph()
        n = g.apply(Relu, g.input("x"))
        assert binding.match(g, n.id, (PDef(1, 0, PApp(Relu.symbol, (PVar(3),))),), (0,))[0] \
            == serialize.STATUS_NO_MATCH
    # too deep: 20001 nested applications, written by hand
    depth = 2 * serialize.MAX_DEPTH
    words = [2, 7, 1] * (depth - 1) + [1, 0]
    deep = [P, 2, 1, 1, 0, 1, 0, 0, len(words)] + words + [1, 0]
    with pytest.raises(pm.EngineError) as ei:
        binding.load_patterns(lib, deep)
    assert ei.value.code == lib.PYPM_E_TOO_DEEP
    # bad handle, out-of-range root and pattern index
    with pytest.raises(pm.EngineError) as ei:
        binding.check(lib, lib.pypm_release(123456789), "pypm_release")
    assert ei.value.code == lib.PYPM_E_BAD_HANDLE
    g = pm.Graph()
    g.input("x")
    gh = binding.graph_handle(lib, g)
    ph = binding.load_patterns(lib, ok)
    out, out_len = ffi.new("int64_t[]", 5), ffi.new("size_t *")
    assert lib.pypm_match(gh.value, ph.value, 0, 5, 0, out, 5, out_len) == lib.PYPM_E_OUT_OF_RANGE
    assert lib.pypm_match(gh.value, ph.value, 1, 0, 0, out, 5, out_len) == lib.PYPM_E_OUT_OF_RANGE
    assert lib.pypm_match(ph.value, gh.value, 0, 0, 0, out, 5, out_len) == lib.PYPM_E_BAD_HANDLE
    # buffer too small: the needed length is reported
    assert lib.pypm_match(gh.value, ph.value, 0, 0, 0, out, 1, out_len) == \
        lib.PYPM_E_BUFFER_TOO_SMALL
    assert out_len[0] == 5
    assert lib.pypm_match(gh.value, ph.value, 0, 0, 0, out, 5, out_len) == lib.PYPM_OK
    assert list(out[0:5]) == [0, 1, 0, 0, 0]  # match, x0 -> node 0, no function bindings
    assert lib.pypm_match(gh.value, ph.value, 0, 0, 0, ffi.NULL, 5, out_len) == lib.PYPM_E_NULL
    assert binding._text(lib.pypm_error_name(lib.PYPM_E_NULL))


def test_function_bindings_and_symbol_attributes(lib):
    g = pm.Graph()
    x = g.input("x")
    n = g.apply(U1, g.apply(U1, x))
    unary = EConst(pm.opclass("unary_pointwise").code)
    p = PGuard(PFunVar(1, (PFunVar(1, (PVar(0),)),)), GEq(EFAttr(1, core.OPCLASS), unary))
    m = pm.match(p, n)
    assert m.substitution == {0: x} and m.fsubstitution == {1: U1.symbol}
    assert m.functions == {1: U1}


def test_match_all_entries(lib):
    g = pm.Graph()
    x = g.input("x", shape=(3,))
    r = g.apply(Relu, x)
    a = g.apply(Add, r, x)
    s = api.PreparedPatterns([AddRelu, PApp(Relu.symbol, (PVar(0),)), PVar(1)])
    assert s.roots == (0, 1, 2)
    entries = binding.match_all(g, s.defs, s.roots)
    assert entries == [
        (2, x.id, 0, [(1, x.id)], []),
        (1, r.id, 0, [(0, x.id)], []), (2, r.id, 0, [(1, r.id)], []),
        (0, a.id, 0, [(0, x.id), (1, x.id)], []), (2, a.id, 0, [(1, a.id)], []),
    ]


# ------------------------------------------------------ differential tests

def diff(n):
    return settings(max_examples=n, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


FUEL = 20_000
OUT = "out of fuel"


def outcome(engine, p, node, fuel):
    try:
        m = pm.match(p, node, engine=engine, fuel=fuel)
    except pm.OutOfFuel:
        return OUT
    return None if m is None else (m.substitution, m.fsubstitution)


@st.composite
def problems(draw):
    g = draw(st.one_of(graphs(), chain_graphs()))
    root = g.nodes[draw(st.integers(0, len(g) - 1))]
    return g, root, draw(programs(root))


@st.composite
def basic_problems(draw):
    g = draw(graphs())
    root = g.nodes[draw(st.integers(0, len(g) - 1))]
    return g, root, draw(st.one_of(patterns, patterns_for(root)))


@contextlib.contextmanager
def simulated():
    """binding.match / match_all answered by tests/wire.py's simulated engine."""
    with mock.patch.object(binding, "match", wire.match), \
            mock.patch.object(binding, "match_all", wire.match_all):
        yield


def _agree(p, root):
    ref = outcome("reference", p, root, FUEL)
    ver = outcome("verified", p, root, 1 << 22)
    if ref == OUT and ver != OUT:  # the verified engine had more fuel
        ref = outcome("reference", p, root, 1 << 22)
    assert ver == ref
    if ver not in (None, OUT):  # and the match is one the declarative rules derive
        assert declarative.check(core.as_program(p), ver[0], root, ver[1])


@pytest.mark.slow
@diff(5000)  # >= 5,000 full-calculus cases in CI
@given(problems())
def test_verified_agrees_with_reference(lib, prob):
    _agree(prob[2], prob[1])


@pytest.mark.slow
@diff(1000)
@given(basic_problems())
def test_verified_agrees_with_reference_basic(lib, prob):
    _agree(prob[2], prob[1])


@diff(500)
@given(problems(), st.integers(1, 400))
def test_fuel_is_counted_in_machine_steps(lib, prob, fuel):
    """Both engines count ``Interpreter.run``'s steps, so they run out of fuel
    on the same problems."""
    g, root, p = prob
    assert outcome("verified", p, root, fuel) == outcome("reference", p, root, fuel)


@diff(300)
@given(st.one_of(problems(), basic_problems()))
def test_simulated_engine_agrees_with_reference(prob):
    g, root, p = prob
    with simulated():
        assert outcome("verified", p, root, FUEL) == outcome("reference", p, root, FUEL)


@st.composite
def match_all_problems(draw):
    g = draw(st.one_of(graphs(), chain_graphs()))
    table = draw(programs())
    items = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.integers(0, 2))
        if kind == 0:
            items.append(Program(table.defs, draw(st.integers(0, len(table.defs) - 1))))
        elif kind == 1:
            items.append(draw(patterns))
        else:
            items.append(draw(st.sampled_from(_DSL)))
    return g, items


@pytest.mark.slow
@diff(1000)
@given(match_all_problems())
def test_match_all_agrees_with_reference(lib, prob):
    g, items = prob
    try:
        ref = pm.match_all(items, g, engine="reference", fuel=FUEL)
    except pm.OutOfFuel:
        return
    ver = pm.match_all(items, g, engine="verified", fuel=1 << 22)
    assert [(p, r, m.substitution, m.fsubstitution) for p, r, m in ver] == \
        [(p, r, m.substitution, m.fsubstitution) for p, r, m in ref]


@diff(150)
@given(match_all_problems())
def test_simulated_match_all_agrees_with_reference(prob):
    g, items = prob
    with simulated():
        try:
            ver = pm.match_all(items, g, engine="verified", fuel=FUEL)
        except pm.OutOfFuel:
            ver = "out of fuel"
    try:
        ref = pm.match_all(items, g, engine="reference", fuel=FUEL)
    except pm.OutOfFuel:
        assert ver == "out of fuel"
        return
    assert [(p, r, m.substitution, m.fsubstitution) for p, r, m in ver] == \
        [(p, r, m.substitution, m.fsubstitution) for p, r, m in ref]


@pm.pattern
def Chain(x, f):
    return f(Chain(x, f))


@pm.pattern
def Chain(x, f):  # noqa: F811
    return f(x)


@pm.pattern
def Pw(x):
    U = pm.Op(1, 1)
    assert U.op_class == pm.opclass("unary_pointwise")
    y = pm.var()
    x <= U(Pw(y))
    return x


@pm.pattern
def Pw(x):  # noqa: F811
    a = pm.var()
    b = pm.var()
    x <= B2(a, b)
    return x


@pm.pattern
def Tree(x, f, g):
    y = pm.var()
    x <= f(Tree(y, f, g))
    return x


@pm.pattern
def Tree(x, f, g):  # noqa: F811
    y = pm.var()
    z = pm.var()
    x <= g(Tree(y, f, g), Tree(z, f, g))
    return x


@pm.pattern
def Tree(x, f, g):  # noqa: F811
    return x


_DSL = [Chain, Pw, Tree, AddRelu]


def test_large_graph_match_all(lib):
    g = pm.Graph()
    prev = g.input("x", shape=(8,))
    for i in range(20_000):
        prev = g.apply(Add, g.apply(Relu, prev), i % 3)
    found = pm.match_all([AddRelu], g)
    assert len(found) == 1  # only the first Relu reads a rank-1 node
    assert found[0][2].bindings["x"] is g.nodes[0]
    assert pm.match(PGuard(PVar(0), GTrue()), prev).bindings == {0: prev}


def test_deep_recursion(lib):
    g = pm.Graph()
    n = g.input("x")
    for _ in range(5_000):
        n = g.apply(U1, n)
    m = pm.match(Chain, n)
    assert m.bindings == {"x": g.nodes[0]} and m.functions == {"f": U1}
    assert pm.match(Chain, n, engine="reference") == m


def _replay(g, into, node):
    """Add ``node`` of ``g`` to ``into`` (nodes replayed in id order get the
    same ids)."""
    if node.kind == "input":
        return into.input(node.name, shape=node.shape, dtype=node.dtype)
    if node.kind == "const":
        return into.const(node.value, shape=node.shape, dtype=node.dtype)
    return into.apply(node.op, *[into.nodes[a.id] for a in node.args], shape=node.shape,
                      dtype=node.dtype)


@diff(120)
@given(match_all_problems(), st.lists(st.integers(0, 12), max_size=4))
def test_grown_graph_matches_like_a_fresh_one(lib, prob, cuts):
    """A graph handle extended batch by batch (the driver's case) answers
    like the graph loaded whole, and like the reference engine."""
    g, items = prob
    try:
        ref = pm.match_all(items, g, engine="reference", fuel=FUEL)
    except pm.OutOfFuel:
        return
    grown = pm.Graph()
    handle = None
    for node in g.nodes:
        assert _replay(g, grown, node).id == node.id
        if len(grown) in cuts:  # load, or extend by the nodes added since
            pm.match_all(items, grown, engine="verified", fuel=1 << 22)
            handle = handle or grown.engine_handle
            assert grown.engine_handle is handle and handle.size() == len(grown)
    ver = pm.match_all(items, grown, engine="verified", fuel=1 << 22)
    assert grown.engine_handle.size() == len(g)

    def ids(results):  # nodes of different graphs never compare equal
        return [(p, r.id, {v: n.id for v, n in m.substitution.items()}, m.fsubstitution)
                for p, r, m in results]
    assert ids(ver) == ids(ref)


def test_graph_extension_errors(lib):
    g = pm.Graph()
    n = g.apply(Relu, g.input("x"))
    h = binding.graph_handle(lib, g)
    g.apply(Relu, n)
    words = serialize.encode_graph_extension(g, 2)
    with pytest.raises(pm.EngineError, match="starts at node 1, but graph .* has 2 nodes") as e:
        binding.extend_graph(lib, h, serialize.encode_graph_extension(g, 1))
    assert e.value.name == "PYPM_E_OUT_OF_RANGE"
    binding.extend_graph(lib, h, words)
    assert h.size() == 3
    with pytest.raises(pm.EngineError, match="PYPM_E_MALFORMED"):
        binding.extend_graph(lib, h, list(words)[:-1])
    assert h.size() == 3
    with pytest.raises(serialize.EncodeError):
        serialize.encode_graph_extension(g, 4)


@diff(150)
@given(match_all_problems())
def test_root_symbols_never_exclude_a_match(lib, prob):
    """The driver's index (core.root_symbols via PatternSet.candidates) skips
    only patterns that cannot match: every match the reference engine finds
    is at a candidate, and PatternSet.match answers as pm.match."""
    g, items = prob
    pset = pm.engines.matching.PatternSet(items, engine="verified", fuel=1 << 22)
    for node in g.nodes:
        cands = pset.candidates(node.label)
        at = pset.candidates_at(node)  # the shapes index (KidIndex.v)
        for i, it in enumerate(items):
            try:
                m = pm.match(it, node, engine="reference", fuel=FUEL)
            except pm.OutOfFuel:
                continue
            if m is not None:
                assert i in cands and i in at
            assert pset.match(i, node) == m


def test_root_symbols_of_calls_and_alternates():
    r, a, m = Relu.symbol, Add.symbol, B2.symbol
    defs = (
        # P0 = Relu(x) || P1(x); P1 = P1(x) || B2(x, x); P2 = F(x); P3 = P3(x) || Add(x, x)
        core.PDef(1, 0, PAlt(PApp(r, (PVar(0),)), PCall(1, (0,)))),
        core.PDef(1, 0, PAlt(PCall(1, (0,)), PApp(m, (PVar(0), PVar(0))))),
        core.PDef(1, 1, PFunVar(0, (PVar(0),))),
        core.PDef(1, 0, PAlt(PCall(3, (0,)), PGuard(PApp(a, (PVar(0), PVar(0))), core.GTrue()))),
    )
    assert core.root_symbols(defs) == (frozenset({r, m}), frozenset({m}), None, frozenset({a}))


# A child forked while another thread of the parent holds one of the locks a
# match can take (the binding's, the pattern registry's, the symbol
# interner's, a SetMatcher's result-buffer mutex, cffi's) must still match:
# the lock is held by a thread that does not exist in the child.
_FORK_SCRIPT = textwrap.dedent("""
    import os, signal, sys, threading, time, traceback
    import cffi.cparser
    import pypm_verified as pm
    from pypm_verified.core import symbols
    from pypm_verified.dsl import patterns
    from pypm_verified.engines import binding
    from pypm_verified.engines.matching import PatternSet

    @pm.op
    def Relu(x):
        return 1

    @pm.op
    def Neg(x):
        return 1

    @pm.pattern
    def R(x):
        return Relu(x)

    @pm.pattern
    def N(x):
        return Neg(x)

    @pm.pattern
    def NR(x):  # first used in the children: traced and linked there
        return Neg(Relu(x))

    g = pm.Graph()
    a = g.input("a")
    n = g.apply(Relu, a)
    assert pm.match(R, n, engine="verified").bindings == {"x": a}  # library loaded
    pset = PatternSet([R], engine="verified")
    assert pset.match(0, n) is not None  # the shared SetMatcher made
    # cffi's: to find a symbol used first (pypm_match_all) or parse a type
    locks = [binding._lock, patterns._lock, symbols._lock, pset._matcher._mutex,
             binding.ffi._lock, cffi.cparser.lock]
    held, done = threading.Event(), threading.Event()

    def hold():
        for lock in locks:
            lock.acquire()
        held.set()
        done.wait()
        for lock in reversed(locks):
            lock.release()

    threading.Thread(target=hold, daemon=True).start()
    held.wait()

    def child():
        signal.alarm(60)  # never outlive the test
        assert pm.match(R, n, engine="verified").bindings == {"x": a}
        assert pset.match(0, n).bindings == {"x": a}

        @pm.op
        def Fresh(x):  # a new symbol
            return 1

        g2 = pm.Graph()
        b = g2.input("b")
        m = g2.apply(Neg, g2.apply(Fresh, b))  # a new graph
        assert pm.match(N, m, engine="verified").root is m
        assert pm.match(NR, m, engine="verified") is None
        assert len(pm.match_all([R, N, NR], g2, engine="verified")) == 1  # a new set
        g2.apply(Neg, g2.apply(Relu, b))  # the graph's handle extended
        assert len(pm.match_all([R, N, NR], g2, engine="verified")) == 4

    for i in range(5):
        pid = os.fork()
        if pid == 0:
            try:
                child()
            except BaseException:
                traceback.print_exc()
                os._exit(1)
            os._exit(0)
        deadline = time.monotonic() + float(sys.argv[1])
        while True:
            done_pid, status = os.waitpid(pid, os.WNOHANG)
            if done_pid:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                sys.exit(f"child {i} hung")
            time.sleep(0.01)
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"child {i} failed: exit status {os.waitstatus_to_exitcode(status)}")
    done.set()
    print("ok")
""")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_fork_while_another_thread_holds_the_locks(lib, tmp_path):
    script = tmp_path / "fork_child.py"
    script.write_text(_FORK_SCRIPT)
    path = os.path.dirname(os.path.dirname(os.path.abspath(pm.__file__)))
    env = dict(os.environ, PYPM_VERIFIED_LIB=binding.engine_library_path(),
               PYTHONPATH=os.pathsep.join(filter(None, [path, os.environ.get("PYTHONPATH")])))
    p = subprocess.run([sys.executable, str(script), "20"], capture_output=True, text=True,
                       env=env, timeout=180)
    assert (p.returncode, p.stdout.strip()) == (0, "ok"), p.stderr[-3000:]


def test_every_ctype_is_parsed_at_import():
    """binding.py names C types only from _CTYPES (parsed at import: cffi
    parses a new one under its own locks, which a forked child may find held
    by a thread it does not have)."""
    import re
    src = open(binding.__file__).read()
    used = set(re.findall(r'ffi\.(?:new|from_buffer|cast|typeof|sizeof)\(\s*"([^"]+)"', src))
    assert used and used <= set(binding._CTYPES), used - set(binding._CTYPES)


# A child forked while another thread makes the process's first engine call
# (the library starting the OCaml runtime: its pthread_atfork handler does
# not exist yet) must still match. Each trial forks a process that has not
# started the runtime (A), whose thread starts it while A forks (B).
_START_SCRIPT = textwrap.dedent("""
    import os, signal, sys, threading, time
    import pypm_verified as pm
    from pypm_verified.engines import binding

    @pm.op
    def Relu(x):
        return 1

    @pm.pattern
    def R(x):
        return Relu(x)

    g = pm.Graph()
    n = g.apply(Relu, g.input("a"))
    binding.open_engine_library()  # loaded, the runtime not started
    R.linked

    def trial():
        t = threading.Thread(target=lambda: pm.match(R, n, engine="verified"))
        t.start()
        pid = os.fork()
        if pid == 0:
            signal.alarm(int(sys.argv[1]))  # a hang ends the child (SIGALRM)
            g2 = pm.Graph()
            assert pm.match(R, g2.apply(Relu, g2.input("b")), engine="verified")
            os._exit(0)
        t.join()
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])

    for i in range(int(sys.argv[2])):
        pid = os.fork()
        if pid == 0:
            os._exit(trial() & 0xff)
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        if code != 0:
            sys.exit(f"trial {i}: the child forked during the start failed: {code}")
    print("ok")
""")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_fork_while_another_thread_starts_the_runtime(lib, tmp_path):
    script = tmp_path / "fork_start.py"
    script.write_text(_START_SCRIPT)
    path = os.path.dirname(os.path.dirname(os.path.abspath(pm.__file__)))
    env = dict(os.environ, PYPM_VERIFIED_LIB=binding.engine_library_path(),
               PYTHONPATH=os.pathsep.join(filter(None, [path, os.environ.get("PYTHONPATH")])))
    p = subprocess.run([sys.executable, str(script), "20", "10"], capture_output=True,
                       text=True, env=env, timeout=180)
    assert (p.returncode, p.stdout.strip()) == (0, "ok"), p.stderr[-3000:]


def test_cffi_smoke_script(lib):
    """ocaml/test/cffi_smoke.py (the C API from cffi's ABI mode, documented
    in ocaml/README.md) passes on the installed library."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    so = os.path.join(root, "python", "pypm_verified", "_lib", "libpypm_verified.so")
    r = subprocess.run([sys.executable, os.path.join(root, "ocaml", "test", "cffi_smoke.py"),
                        so], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "cffi smoke test OK" in r.stdout, r.stdout + r.stderr
