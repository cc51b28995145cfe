"""Load libpypm_verified.so from Python with cffi (ABI mode, ffi.dlopen) and
check a match, a recursive definition, the error path and concurrent calls
from 8 threads (format VERSION 2).

Usage: python ocaml/test/cffi_smoke.py [path/to/libpypm_verified.so]
(default: ocaml/_build/default/capi/libpypm_verified.so)."""
import os
import re
import sys
import threading

import cffi

HERE = os.path.dirname(os.path.abspath(__file__))
HEADER = os.path.join(HERE, "..", "capi", "pypm_verified.h")
LIB = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    HERE, "..", "_build", "default", "capi", "libpypm_verified.so")

MAGIC_GRAPH = 0x485052474D505950
MAGIC_PATTERNS = 0x535441504D505950
MATMUL, TRANS, NEG, LEAF = 1, 2, 4, 10
VERSION = 2

ffi = cffi.FFI()
# the header's declarations without preprocessor lines
ffi.cdef("\n".join(l for l in open(HEADER).read().splitlines()
                   if not l.lstrip().startswith("#")))
lib = ffi.dlopen(LIB)


def check(rc, what):
    if rc != 0:
        raise RuntimeError(f"{what}: {ffi.string(lib.pypm_error_name(rc)).decode()}: "
                           f"{ffi.string(lib.pypm_last_error()).decode()}")


def load(fn, words):
    buf = ffi.new("int64_t[]", words)
    h = ffi.new("int64_t *")
    check(fn(buf, len(words), h), fn.__name__ if hasattr(fn, "__name__") else "load")
    return h[0]


def pattern_set(defs, roots):
    """defs: (n_params, n_fparams, pbinds, pfbinds, body words)"""
    words = [MAGIC_PATTERNS, VERSION, len(defs)]
    for n, m, pb, pfb, body in defs:
        words += [n, m, len(pb), *pb, len(pfb), *pfb, len(body), *body]
    return words + [len(roots), *roots]


# x(0) y(1) Trans(y)(2) MatMul(x, Trans(y))(3), repeated in 1000 blocks
blocks = 1000
words = [MAGIC_GRAPH, VERSION, 4 * blocks]
for b in range(blocks):
    o = 4 * b
    words += [LEAF, 0, 1, 0, 2, LEAF, 0, 0, TRANS, 1, o + 1, 0, MATMUL, 2, o, o + 2, 0]
words += [0]  # no symbol attributes
g = load(lib.pypm_graph_load, words)
pat = [2, MATMUL, 2, 1, 0, 2, TRANS, 1, 1, 1]
p = load(lib.pypm_patterns_load, pattern_set([(2, 0, [0, 1], [], pat)], [0]))

assert lib.pypm_format_version() == VERSION
out = ffi.new("int64_t[16]")
n = ffi.new("size_t *")
check(lib.pypm_match(g, p, 0, 3, 0, out, 16, n), "pypm_match")
assert list(out[0:n[0]]) == [0, 2, 0, 0, 1, 1, 0], list(out[0:n[0]])

# recursion: UnaryChain(x; F) = F(UnaryChain(x; F)) || F(x) over a chain of
# 1000 Negs; P(x) = P(x) matches nothing (a call at the same root adds
# nothing: the interpreter answers no match instead of spending its fuel)
chain = [MAGIC_GRAPH, VERSION, 1001, LEAF, 0, 0]
for i in range(1, 1001):
    chain += [NEG, 1, i - 1, 0]
chain += [0]
gc = load(lib.pypm_graph_load, chain)
uc = [3, 8, 0, 1, 9, 0, 1, 0, 1, 0, 8, 0, 1, 1, 0]
pc = load(lib.pypm_patterns_load,
          pattern_set([(1, 1, [0], [0], uc), (1, 0, [], [], [9, 1, 1, 0, 0])], [0, 1]))
check(lib.pypm_match(gc, pc, 0, 1000, 0, out, 16, n), "pypm_match UnaryChain")
assert list(out[0:n[0]]) == [0, 1, 0, 0, 1, 0, NEG], list(out[0:n[0]])
check(lib.pypm_match(gc, pc, 1, 0, 10000, out, 16, n), "pypm_match P = P(x)")
assert list(out[0:n[0]]) == [1, 0, 0], list(out[0:n[0]])
check(lib.pypm_release(gc), "release")
check(lib.pypm_release(pc), "release")

rc = lib.pypm_match(g, p, 0, 4 * blocks, 0, out, 16, n)
msg = ffi.string(lib.pypm_last_error()).decode()
assert rc == 3 and "out of range" in msg, (rc, msg)
bad = ffi.new("int64_t[]", [MAGIC_GRAPH, VERSION, 1, 5, 1, 7, 0, 0])
h = ffi.new("int64_t *")
rc = lib.pypm_graph_load(bad, len(bad), h)
msg = ffi.string(lib.pypm_last_error()).decode()
assert rc == 1 and msg == "graph: node 0: child 7 out of range [0, 1)", (rc, msg)

r = ffi.new("int64_t *")
rlen = ffi.new("size_t *")
check(lib.pypm_match_all(g, p, 0, r, rlen), "pypm_match_all")
res = ffi.new("int64_t[]", rlen[0])
check(lib.pypm_result_read(r[0], res, rlen[0]), "pypm_result_read")
assert res[0] == blocks
check(lib.pypm_release(r[0]), "pypm_release")

errors = []


def worker(tid):
    o = ffi.new("int64_t[16]")
    k = ffi.new("size_t *")
    for i in range(5000):
        root = (i * 7 + tid) % (4 * blocks)
        rc = lib.pypm_match(g, p, 0, root, 0, o, 16, k)
        got = list(o[0:k[0]])
        b = root - root % 4
        want = [0, 2, 0, b, 1, b + 1, 0] if root % 4 == 3 else [1, 0, 0]
        if rc != 0 or got != want:
            errors.append((tid, root, rc, got))
        if i % 100 == 0:
            rc = lib.pypm_match(g, p, 0, -tid - 1, 0, o, 16, k)
            m = ffi.string(lib.pypm_last_error()).decode()
            if rc != 3 or f"root node {-tid - 1} out of range" not in m:
                errors.append((tid, "last_error", m))


threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert not errors, errors[:5]
check(lib.pypm_release(g), "release")
check(lib.pypm_release(p), "release")
print(f"cffi smoke test OK ({LIB})")
