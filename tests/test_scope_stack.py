"""Scope is part of well-formedness (``Syntax.scoped_def`` inside
``wf_defs``): the C API rejects a body reading a variable that is neither a
parameter nor bound by an enclosing ∃, naming the variable and the
definition. And multi-root matching runs in constant stack
(``Multi.users_map``, ``seq_tr``, ``filter_upto``, ``mall`` build their
lists over every node with accumulators): a match on a 10 M-node graph
uses no more stack than one on 1000 nodes. So does ``pm.dominates``
(``Dominates.topob``, ``users_okb`` and ``dom_all`` over every node, with
the same list functions) on a 2 M-node graph."""
import json
import os
import subprocess
import sys
import textwrap
import threading

import pytest

from pypm_verified import core
from pypm_verified.core import PApp, PCall, PDef, PExists, PExistsF, PFunVar, PVar
from pypm_verified.engines import binding, serialize
from pypm_verified.errors import EngineError

def _load(defs):
    lib = binding.open_engine_library()
    return binding.load_patterns(lib, serialize.encode_patterns(defs, list(range(len(defs)))))


@pytest.mark.parametrize("defs, problem", [
    ([PDef(1, 0, PVar(5))], "definition 0: variable 5 is out of scope"),
    ([PDef(1, 0, PVar(0)), PDef(1, 0, PApp(2, (PVar(0), PVar(3))), (0,))],
     "definition 1: variable 3 is out of scope"),
    ([PDef(1, 0, PVar(0), (0,)), PDef(1, 0, PApp(2, (PVar(0), PCall(0, (7,), ()))), (0,))],
     "definition 1: variable 7 is out of scope"),  # a call's argument
    ([PDef(1, 1, PFunVar(4, (PVar(0),)), (0,))],
     "definition 0: operator variable 4 is out of scope"),
])
def test_out_of_scope_body_is_ill_formed(defs, problem):
    assert not core.wf_defs(defs)
    with pytest.raises(EngineError) as e:
        _load(defs)
    assert e.value.code == binding.open_engine_library().PYPM_E_ILL_FORMED
    assert problem in e.value.detail


def test_variables_of_an_exists_are_in_scope():
    defs = [PDef(1, 1, PApp(2, (PVar(0), PExists(5, PVar(5)), PExistsF(4, PFunVar(4, ())))),
                 (0,))]
    assert core.wf_defs(defs)
    assert _load(defs).value > 0


# The children run the C API on graphs of the sizes given on the command
# line, all in one process. The C API runs OCaml on a private stack
# (pypm_capi.c), whatever the host's ulimit; with PYPM_NO_STACK_TRIM=1 the
# pages it touched stay resident, so the resident size of that mapping
# (/proc/self/smaps) is the most stack any call used. One line per graph:
# the answers and that high-water mark (KiB).
PRELUDE = textwrap.dedent("""
    import json
    import sys
    import numpy as np
    from pypm_verified import core
    from pypm_verified.engines import binding, serialize

    LEAF, RELU, OTHER, NEG = 0, 1, 2, 3
    lib = binding.open_engine_library()
    ffi = binding.ffi

    def stack_kib():
        # the OCaml stack: 1 GiB (or 256 MiB) reserved, less the 1 MiB guard
        sizes = {(1 << 20) - 1024, (256 << 10) - 1024}
        found, rss = False, []
        for line in open("/proc/self/smaps"):
            if "-" in line.split()[0]:
                found = False
            elif line.startswith("Size:"):
                found = int(line.split()[1]) in sizes
            elif line.startswith("Rss:") and found:
                rss.append(int(line.split()[1]))
        assert len(rss) == 1, rss
        return rss[0]

    def load_graph(w):
        out = ffi.new("int64_t *")
        binding.check(lib, lib.pypm_graph_load(ffi.from_buffer("int64_t[]", w), len(w), out),
                      "pypm_graph_load")
        return binding.Handle(lib, out[0])
""")

# Multi-root: graphs of n nodes (a chain of OTHER nodes over a leaf, and at
# the top RELU(c) and NEG(c) of the chain's last node c) and the two-root
# pattern (RELU(x), NEG(x)): at the RELU node (the users table of every
# node, built once) and at every node (match_all).
CHILD = PRELUDE + textwrap.dedent("""
    defs = (core.PDef(1, 0, core.PApp(RELU, (core.PVar(0),)), (0,)),
            core.PDef(1, 0, core.PApp(NEG, (core.PVar(0),)), (0,)))
    ph = binding.load_patterns(lib, serialize.encode_patterns(defs, (0, 1)))
    spec = serialize.encode_multi_spec(1, 0, (0, 1), core.GTrue())
    sbuf = ffi.new("int64_t[]", list(spec))

    def graph(n):
        w = np.zeros(3 + 3 + 4 * (n - 1) + 1, dtype=np.int64)
        w[:6] = (serialize.MAGIC_GRAPH, serialize.VERSION, n, LEAF, 0, 0)
        body = w[6:6 + 4 * (n - 1)].reshape(n - 1, 4)
        body[:, 0] = OTHER
        body[:, 1] = 1
        body[:, 2] = np.arange(n - 1, dtype=np.int64)
        body[-2, 0], body[-2, 2] = RELU, n - 3
        body[-1, 0], body[-1, 2] = NEG, n - 3
        return load_graph(w)

    for n in map(int, sys.argv[1:]):
        g = graph(n)
        answers = []
        for root in (n - 2, -1):
            res, ln = ffi.new("int64_t *"), ffi.new("size_t *")
            binding.check(lib, lib.pypm_match_multi(g.value, ph.value, sbuf, len(spec), root, 0,
                                                    res, ln), "pypm_match_multi")
            answers.append(serialize.decode_match_multi(binding._read_result(lib, res[0], ln[0])))
        g.release()
        print(json.dumps({"n": n, "answers": answers, "stack_kib": stack_kib()}), flush=True)
""")


# Dominators: graphs of n nodes (a chain of OTHER nodes over a leaf, every
# node live, and at the top the output RELU(c) of the chain's last node c)
# and pm.dominates(OTHER(x), NEG(x), RELU(x)): c is the parent, the region
# is {c, RELU}. At the RELU node (Dominates.dom_result: topo and the users
# table checked over every node) and at every node (Dominates.dom_all).
DOM_CHILD = PRELUDE + textwrap.dedent("""
    defs = tuple(core.PDef(1, 0, core.PApp(op, (core.PVar(0),)), (0,)) for op in (OTHER, NEG, RELU))
    ph = binding.load_patterns(lib, serialize.encode_patterns(defs, (0, 1, 2)))

    def graph(n):
        w = np.zeros(3 + 3 + 4 * (n - 1) + 1, dtype=np.int64)
        w[:6] = (serialize.MAGIC_GRAPH, serialize.VERSION, n, LEAF, 0, 0)
        body = w[6:6 + 4 * (n - 1)].reshape(n - 1, 4)
        body[:, 0] = OTHER
        body[:, 1] = 1
        body[:, 2] = np.arange(n - 1, dtype=np.int64)
        body[-1, 0] = RELU
        return load_graph(w)

    def spec(n):
        words = np.full(4 + n, serialize.DOM_LIVE, dtype=np.int64)
        words[:4] = (0, 1, 2, n)
        words[-1] |= serialize.DOM_OUTPUT
        return words

    for n in map(int, sys.argv[1:]):
        g, s = graph(n), spec(n)
        answers = []
        for root in (n - 1, -1):
            res, ln = ffi.new("int64_t *"), ffi.new("size_t *")
            binding.check(lib, lib.pypm_dominates(g.value, ph.value, ffi.from_buffer("int64_t[]", s),
                                                  len(s), root, 0, res, ln), "pypm_dominates")
            answers.append(serialize.decode_dominates(binding._read_result(lib, res[0], ln[0])))
        g.release()
        print(json.dumps({"n": n, "answers": answers, "stack_kib": stack_kib()}), flush=True)
""")


def run_child(sizes, env=None, timeout=900, script=CHILD):
    """Run ``script`` (CHILD by default) on graphs of the given sizes, in one
    process (the OCaml stack's high-water mark only grows), yielding one
    record per size as it comes (the caller may stop early: the child is
    then killed)."""
    env = dict(os.environ if env is None else env, PYPM_NO_STACK_TRIM="1")
    with subprocess.Popen([sys.executable, "-c", script, *map(str, sizes)], text=True, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as p:
        timer = threading.Timer(timeout, p.kill)
        timer.start()
        try:
            for line in p.stdout:
                yield json.loads(line)
            assert p.wait() == 0, p.stderr.read()[-2000:]
        finally:
            timer.cancel()
            p.kill()


def test_multi_root_on_10m_nodes_runs_in_constant_stack():
    base = None
    for rec in run_child([1000, 20_000, 10_000_000]):
        n = rec["n"]
        want = [[n - 2, serialize.STATUS_MATCH, [n - 2, n - 1], [[0, n - 3]], []]]
        assert rec["answers"] == [want, want]
        base = rec["stack_kib"] if base is None else base
        # no more stack than on 1000 nodes (the list functions over every
        # node used to recurse once per node: 32 bytes a node, 600 KiB at
        # 20000 nodes, 300 MiB at 10 M)
        assert rec["stack_kib"] - base <= 256, (n, rec["stack_kib"], base)
    assert n == 10_000_000


def test_dominates_on_2m_nodes_runs_in_constant_stack():
    """The library before ``Dominates`` used ``seq_tr`` and ``filter_upto``
    built ``seq 0 N`` and ``filter isC (seq 0 N)`` by recursion, one frame a
    node: about 64 MiB of stack at 2 M nodes (over 30 MiB more than on 1000
    nodes), where this allows 256 KiB."""
    base = None
    for rec in run_child([1000, 20_000, 2_000_000], script=DOM_CHILD, timeout=600):
        n = rec["n"]
        want = [(n - 1, serialize.STATUS_MATCH, n - 2, [n - 2, n - 1])]
        assert [[tuple(e) for e in a] for a in rec["answers"]] == [want, want]
        base = rec["stack_kib"] if base is None else base
        assert rec["stack_kib"] - base <= 256, (n, rec["stack_kib"], base)
    assert n == 2_000_000
