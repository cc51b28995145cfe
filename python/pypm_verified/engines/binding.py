"""cffi (ABI mode) binding to the verified matcher, ``libpypm_verified.so``.

The engine library is found through the environment variable ``PYPM_VERIFIED_LIB``,
else at ``python/pypm_verified/_lib/libpypm_verified.so`` (built by
``make lib``); it must read the format version this package writes
(``serialize.VERSION``) and carry the build id the package expects (the id
of the sources it was built from: :func:`open_engine_library`, override
``PYPM_ALLOW_BUILD_MISMATCH=1``). Graph and pattern-set handles are cached on the
Graph / Pattern objects (released by a weakref finalizer when those die),
so matching in a loop does not re-encode anything.

Fork safety: once the engine library is loaded and a graph's and a pattern set's
handles are made, a match takes no Python lock (the :class:`SetMatcher`
path: only its buffer mutex). The locks (``_lock``, every SetMatcher's
mutex) are made anew in a child process after ``fork()``
(:func:`_after_fork_in_child`): a thread of the parent that held one does
not exist there, and would hold it forever. Every critical section leaves
the state usable when it stops anywhere (a graph handle being extended is
marked, and reloaded whole). cffi's own locks are taken only to parse a
type or find a symbol the first time: the types are parsed at import
(``_CTYPES``), the symbols found when the engine library is loaded. The engine library
waits for a call in progress before a fork (``pthread_atfork``), so the
child's engine is never stopped in the middle of a call; ``fork()`` waits
for the engine library's load and the start of its runtime too (``_start_lock``),
which that handler does not cover.
"""
from __future__ import annotations

import os
import threading
import weakref
from array import array
from collections import OrderedDict
from typing import List, Optional, Sequence, Tuple

from cffi import FFI

from .. import _native, core
from . import serialize
from ..errors import EngineError, EngineUnavailable, MemoryBudget

# Copied from ocaml/capi/pypm_verified.h.
CDEF = """
#define PYPM_OK                 0
#define PYPM_E_MALFORMED        1
#define PYPM_E_BAD_HANDLE       2
#define PYPM_E_OUT_OF_RANGE     3
#define PYPM_E_BUFFER_TOO_SMALL 4
#define PYPM_E_ILL_FORMED       5
#define PYPM_E_TOO_DEEP         6
#define PYPM_E_NULL             7
#define PYPM_E_INTERNAL         8
#define PYPM_E_INIT             9
#define PYPM_E_MEMORY          10

#define PYPM_STATUS_MATCH       0
#define PYPM_STATUS_NO_MATCH    1
#define PYPM_STATUS_OUT_OF_FUEL 2

#define PYPM_REJECT_BEFORE_ILL_FORMED 1
#define PYPM_REJECT_AFTER_ILL_FORMED  2
#define PYPM_REJECT_FIRING            3
#define PYPM_REJECT_MAP               4
#define PYPM_REJECT_NODE              5
#define PYPM_REJECT_ARG               6
#define PYPM_REJECT_OUTPUT            7
#define PYPM_REJECT_DEAD              8
#define PYPM_REJECT_AGREE             9
#define PYPM_REJECT_CERTS             10
#define PYPM_REJECT_MATCH             11
#define PYPM_REJECT_SUBST             12
#define PYPM_REJECT_TEMPLATE          13

int64_t pypm_format_version(void);
const char *pypm_build_id(void);
const char *pypm_coq_version(void);
int pypm_graph_load(const int64_t *buf, size_t len, int64_t *handle);
int pypm_patterns_load(const int64_t *buf, size_t len, int64_t *handle);
int pypm_graph_extend(int64_t graph, const int64_t *buf, size_t len);
int pypm_handle_size(int64_t handle, int64_t *size);
int pypm_release(int64_t handle);
int pypm_match(int64_t graph, int64_t patterns, int64_t pattern_index,
               int64_t root, int64_t fuel,
               int64_t *out, size_t out_cap, size_t *out_len);
int pypm_match_all(int64_t graph, int64_t patterns, int64_t fuel,
                   int64_t *result, size_t *result_len);
int pypm_match_multi(int64_t graph, int64_t patterns, const int64_t *spec, size_t spec_len,
                     int64_t root, int64_t fuel, int64_t *result, size_t *result_len);
int pypm_dominates(int64_t graph, int64_t patterns, const int64_t *spec, size_t spec_len,
                   int64_t root, int64_t fuel, int64_t *result, size_t *result_len);
int pypm_result_read(int64_t result, int64_t *out, size_t out_cap);
int pypm_candidates(int64_t patterns, int64_t symbol, const int64_t *attrs, size_t n_attrs,
                    int64_t *out, size_t out_cap,
                    size_t *out_len);
int pypm_candidates_at(int64_t patterns, int64_t symbol, const int64_t *attrs, size_t n_attrs,
                       const int64_t *kids, size_t kids_len, int64_t *out, size_t out_cap,
                       size_t *out_len);
int pypm_validate_rewrite(const int64_t *buf, size_t len, int64_t *verdict, int64_t *where);
int pypm_validate_firings(int64_t graph, int64_t patterns, int64_t fuel, const int64_t *buf,
                          size_t len, int64_t *verdict, int64_t *where);
const char *pypm_error_name(int code);
const char *pypm_last_error(void);
"""

ffi = FFI()
ffi.cdef(CDEF)
#: every C type a call here names, parsed now: cffi parses a type the first
#: time under locks of its own (a thread of a forked parent may hold them)
_CTYPES = ("int64_t *", "int64_t[]", "int64_t[1]", "size_t *", "uintptr_t")
for _t in _CTYPES:
    ffi.typeof(_t)

ENV_VAR = "PYPM_VERIFIED_LIB"
DEFAULT_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_lib",
                            "libpypm_verified.so")

_lock = threading.RLock()
_engine_libs = {}  # path -> loaded engine library
_matchers: "weakref.WeakSet[SetMatcher]" = weakref.WeakSet()  # their mutexes, for fork
_start_lock = threading.Lock()  # held to load an engine library or start its runtime; fork() waits
_started = set()  # id() of the loaded engine libraries whose OCaml runtime was started


def _start(lib) -> None:
    """Start ``lib``'s OCaml runtime (its first call does) holding
    ``_start_lock``, which ``fork()`` takes first: the engine library's own
    ``pthread_atfork`` handler exists only once the runtime is up, and a
    child forked in the middle of the start hangs in its first call."""
    if id(lib) in _started:
        return
    with _start_lock:
        if id(lib) not in _started:
            lib.pypm_release(0)  # no handle: PYPM_E_BAD_HANDLE (or the start's error)
            _started.add(id(lib))


def _before_fork() -> None:
    _start_lock.acquire()


def _after_fork_in_parent() -> None:
    _start_lock.release()


def _after_fork_in_child() -> None:
    """In the child of ``fork()``: new locks (the ones copied from the parent
    may be held by a thread the child does not have). The child runs this on
    its only thread, before any other code."""
    global _lock
    _lock = threading.RLock()
    for m in list(_matchers):
        m._mutex = threading.Lock()
    _start_lock.release()  # taken by _before_fork


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)


def engine_library_path() -> str:
    """Where the engine library is looked for (``$PYPM_VERIFIED_LIB`` or the default)."""
    return os.environ.get(ENV_VAR) or DEFAULT_PATH


def open_engine_library():
    """The loaded engine library; raises :class:`EngineUnavailable` if it is missing,
    cannot be loaded, or reads another format version, and
    :class:`BuildIdMismatch` (one) if its build id is not the package's
    (:func:`pypm_verified._version.package_build_id`) unless
    ``PYPM_ALLOW_BUILD_MISMATCH=1`` (:func:`build_id_mismatch` then says
    why, and rewrites are reported as not validated)."""
    path = engine_library_path()
    lib = _engine_libs.get(path)
    if lib is not None:
        return lib  # loaded: no lock
    with _lock:
        lib = _engine_libs.get(path)
        if lib is not None:
            return lib
        if not os.path.exists(path):
            raise EngineUnavailable(
                f"the verified engine library was not found at {path}: run `make lib` to "
                f"build it, or point {ENV_VAR} at it (engine='reference' needs no library)")
        with _start_lock:  # cffi's locks are taken here: fork() waits
            try:
                lib = ffi.dlopen(path)
            except OSError as e:
                raise EngineUnavailable(
                    f"cannot load the verified engine from {path}: {e}; rebuild it with "
                    "`make lib`") from None
            version = lib.pypm_format_version()
            if version != serialize.VERSION:
                raise EngineUnavailable(
                    f"{path} reads format version {version}, this package writes version "
                    f"{serialize.VERSION}; rebuild it with `make lib`")
            for name in dir(lib):  # found now, not at first use under cffi's lock
                try:
                    getattr(lib, name)
                except AttributeError:
                    pass  # a function an older engine library lacks (pypm_build_id)
            mismatch = _build_id_mismatch(lib, path)
            if mismatch is not None:
                if not allow_build_mismatch():
                    _refused[path] = lib
                    raise BuildIdMismatch(
                        f"{mismatch}; rebuild it with `make lib` (or install the wheel's own "
                        f"library), or set {ALLOW_MISMATCH_VAR}=1 to use it anyway: every "
                        "rewrite is then reported as not validated")
                _mismatches[path] = mismatch
        _engine_libs[path] = lib
        return lib


#: set to 1 to use an engine library whose build id is not the package's (every
#: rewrite's report then says "not validated: build id mismatch")
ALLOW_MISMATCH_VAR = "PYPM_ALLOW_BUILD_MISMATCH"
_mismatches = {}  # path -> why its engine library's build id is not the package's (loaded anyway)
_refused = {}  # path -> an engine library refused for its build id (its ids stay readable)


class BuildIdMismatch(EngineUnavailable):
    """The engine library's build id is not the one this package expects
    (:func:`pypm_verified._version.package_build_id`): it was built from
    other sources than the ones the package (and its proofs) come from."""


def allow_build_mismatch() -> bool:
    """Whether ``PYPM_ALLOW_BUILD_MISMATCH`` (1, true, yes, on) lets a
    engine library with another build id load."""
    return os.environ.get(ALLOW_MISMATCH_VAR, "").strip().lower() in ("1", "true", "yes", "on")


def _build_id_mismatch(lib, path: str) -> Optional[str]:
    """Why ``lib``'s build id is not the package's, or None when it is."""
    from .._version import package_build_id
    expected, source = package_build_id()
    try:
        got = _text(lib.pypm_build_id())
    except AttributeError:
        got = ""
    if not got:
        return f"{path} carries no build id (built before the library had one)"
    if expected is None:
        return (f"{path} has build id {got}, and the build id this package expects is "
                f"unknown: {source}")
    if got != expected:
        return (f"{path} has build id {got}, this package expects {expected} (from "
                f"{source})")
    return None


def build_id_mismatch() -> Optional[str]:
    """Why the loaded engine library's build id is not the package's when it was
    loaded anyway (``PYPM_ALLOW_BUILD_MISMATCH=1``), else None. Does not
    load the engine library."""
    return _mismatches.get(engine_library_path())


def current_engine_library():
    """The engine library :func:`open_engine_library` would return now, or None if it is
    not loaded yet (cheap: no file system access)."""
    return _engine_libs.get(engine_library_path())


def available() -> bool:
    """Whether the verified engine can be loaded."""
    try:
        open_engine_library()
    except EngineUnavailable:
        return False
    return True


def build_info() -> Optional[Tuple[str, str]]:
    """``(build_id, coq_version)`` compiled into the engine library (see
    :mod:`pypm_verified._version`), or None if it cannot be loaded or was
    built before the engine library carried them; one refused for its build id
    (:class:`BuildIdMismatch`) is read too. Does not start the OCaml runtime."""
    try:
        lib = open_engine_library()
    except BuildIdMismatch:
        lib = _refused.get(engine_library_path())  # refused, but what it carries is shown
    except EngineUnavailable:
        return None
    try:
        return _text(lib.pypm_build_id()), _text(lib.pypm_coq_version())
    except AttributeError:
        return None


def _text(ptr) -> str:
    return "" if ptr == ffi.NULL else ffi.string(ptr).decode("utf-8", "replace")


def check(lib, code: int, call: str) -> None:
    """Raise :class:`EngineError` for a non-zero error code."""
    if code == lib.PYPM_E_MEMORY:
        raise MemoryBudget(_text(lib.pypm_last_error()))
    if code != 0:
        raise EngineError(code, _text(lib.pypm_error_name(code)),
                          _text(lib.pypm_last_error()), call)


def _release(lib, handle: int) -> None:
    lib.pypm_release(handle)


class Handle:
    """An owned engine library handle, released when this object is collected (or by
    :meth:`release`)."""

    __slots__ = ("lib", "value", "key", "caps", "_fin", "__weakref__")

    def __init__(self, lib, value: int, key=None):
        self.lib = lib
        self.value = value
        self.key = key
        self.caps = None  # pattern sets: result-buffer size per pattern
        self._fin = weakref.finalize(self, _release, lib, value)
        self._fin.atexit = False  # never call into the runtime during shutdown

    def release(self) -> None:
        self._fin()

    def size(self) -> int:
        out = ffi.new("int64_t *")
        check(self.lib, self.lib.pypm_handle_size(self.value, out), "pypm_handle_size")
        return out[0]


def load_graph(lib, words: Sequence[int], key=None) -> Handle:
    _start(lib)
    buf = words if isinstance(words, array) else array("q", words)
    out = ffi.new("int64_t *")
    check(lib, lib.pypm_graph_load(ffi.from_buffer("int64_t[]", buf), len(buf), out),
          "pypm_graph_load")
    return Handle(lib, out[0], key)


def load_patterns(lib, words: Sequence[int], key=None, caps=None) -> Handle:
    """Load a pattern-set buffer; ``caps`` (result words per root) sizes
    :func:`match`'s output buffer."""
    _start(lib)
    buf = words if isinstance(words, array) else array("q", words)
    out = ffi.new("int64_t *")
    check(lib, lib.pypm_patterns_load(ffi.from_buffer("int64_t[]", buf), len(buf), out),
          "pypm_patterns_load")
    h = Handle(lib, out[0], key)
    h.caps = caps
    return h


def _caps(defs, roots) -> list:
    return [3 + 2 * defs[r].nparams + 2 * defs[r].nfparams for r in roots]


def extend_graph(lib, h: Handle, words: Sequence[int]) -> None:
    """``pypm_graph_extend``: append the extension ``words`` to ``h``."""
    buf = words if isinstance(words, array) else array("q", words)
    check(lib, lib.pypm_graph_extend(h.value, ffi.from_buffer("int64_t[]", buf), len(buf)),
          "pypm_graph_extend")


def graph_handle(lib, graph) -> Handle:
    """The cached handle of ``graph``. A graph only grows (nodes never
    change), so after nodes were added the handle is extended with the new
    ones (O(new nodes) to encode) instead of reloaded. The handle's ``key``
    is its number of nodes, None while it is being extended (a handle left
    so, by an error or in a child forked meanwhile, is reloaded whole)."""
    h = graph.engine_handle
    if h is not None and h.lib is lib and h.key == len(graph):
        return h  # up to date: no lock
    with _lock:
        h = graph.engine_handle
        n = len(graph)
        if h is None or h.lib is not lib or h.key is None:
            h = load_graph(lib, graph.encode(), key=n)
            graph.engine_handle = h
        elif h.key != n:
            base, h.key = h.key, None
            extend_graph(lib, h, serialize.encode_graph_extension(graph, base))
            h.key = n
        return h


_set_cache: "OrderedDict[tuple, Handle]" = OrderedDict()
_SET_CACHE_SIZE = 32


def pattern_set_handle(lib, defs: Tuple[core.PDef, ...], roots: Tuple[int, ...],
                       owner=None) -> Handle:
    """A handle for the pattern set ``(defs, roots)``; cached on ``owner`` (a
    Pattern) when given, else in a small LRU keyed by the set."""
    key = (defs, roots)
    if owner is not None:
        h = owner.engine_handle
        if h is not None and h.lib is lib and (
                (h.key[0] is defs and h.key[1] == roots) or h.key == key):
            return h  # cached on the pattern: no lock
    with _lock:
        if owner is not None:
            h = owner.engine_handle
            if h is not None and h.lib is lib and (
                    (h.key[0] is defs and h.key[1] == roots) or h.key == key):
                return h
        else:
            h = _set_cache.get((id(lib), key))
            if h is not None:
                _set_cache.move_to_end((id(lib), key))
                return h
        h = load_patterns(lib, serialize.encode_patterns(defs, roots), key=key,
                          caps=_caps(defs, roots))
        if owner is not None:
            owner.engine_handle = h
        else:
            _set_cache[(id(lib), key)] = h
            while len(_set_cache) > _SET_CACHE_SIZE:
                _set_cache.popitem(last=False)
        return h


Result = Tuple[int, List[Tuple[int, int]], List[Tuple[int, int]]]


def match(graph, root: int, defs: Tuple[core.PDef, ...], roots: Tuple[int, ...],
          index: int = 0, fuel: Optional[int] = None, owner=None) -> Result:
    """Run ``pypm_match`` for root ``index``: ``(status, [(var, node_id)],
    [(fvar, symbol)])``."""
    lib = open_engine_library()
    gh = graph_handle(lib, graph)
    ph = pattern_set_handle(lib, defs, roots, owner)
    cap = ph.caps[index]
    out_len = ffi.new("size_t *")
    while True:
        out = ffi.new("int64_t[]", cap)
        code = lib.pypm_match(gh.value, ph.value, index, root, fuel or 0, out, cap, out_len)
        if code == lib.PYPM_E_BUFFER_TOO_SMALL and out_len[0] > cap:
            cap = out_len[0]
            continue
        check(lib, code, "pypm_match")
        return serialize.decode_match(ffi.unpack(out, out_len[0]))


class SetMatcher:
    """``pypm_match`` for many calls on one pattern set (the rewrite driver's
    loop): the engine library, the set's handle, the entry point and the
    result buffer are looked up once, not per call (the per-call Python cost
    was ~10x the engine library's). It is the one :func:`open_engine_library`
    gave when this object was made."""

    __slots__ = ("lib", "handle", "_call", "_pv", "_out", "_cap", "_len", "_mutex",
                 "_address", "__weakref__")

    def __init__(self, defs: Tuple[core.PDef, ...], roots: Tuple[int, ...], owner=None):
        self.lib = open_engine_library()
        self.handle = pattern_set_handle(self.lib, defs, roots, owner)
        self._call = self.lib.pypm_match
        self._pv = self.handle.value
        self._cap = max(self.handle.caps or [1])
        self._out = ffi.new("int64_t[]", self._cap)
        self._len = ffi.new("size_t *")
        self._mutex = threading.Lock()  # the result buffer is shared by the calls
        self._address = None  # pypm_match's address, for the native loop (first)
        _matchers.add(self)  # a new mutex after fork (the buffer is scratch space)

    def _graph(self, graph) -> Handle:
        """``graph``'s handle in this matcher's library, extended with the
        nodes added since it was loaded (:func:`graph_handle`)."""
        gh = graph.engine_handle
        if gh is None or gh.lib is not self.lib or gh.key != len(graph):
            gh = graph_handle(self.lib, graph)
        return gh

    def match(self, graph, root: int, index: int, fuel: Optional[int] = None) -> Result:
        """As :func:`match`: ``(status, [(var, node_id)], [(fvar, symbol)])``."""
        gh = self._graph(graph)
        with self._mutex:
            out = self._out
            code = self._call(gh.value, self._pv, index, root, fuel or 0, out, self._cap,
                              self._len)
            if code == 0 and out[0] == serialize.STATUS_NO_MATCH:
                return serialize.STATUS_NO_MATCH, [], []  # the common answer (no bindings)
            n = self._len[0]
            if code == self.lib.PYPM_E_BUFFER_TOO_SMALL and n > self._cap:
                self._out = out = ffi.new("int64_t[]", n)
                self._cap = n  # after the buffer: never more than its size
                code = self._call(gh.value, self._pv, index, root, fuel or 0, out, n,
                                  self._len)
                n = self._len[0]
            check(self.lib, code, "pypm_match")
            words = ffi.unpack(out, n)
        return serialize.decode_match(words)

    def first(self, graph, root: int, indices: Tuple[int, ...], start: int = 0,
              fuel: Optional[int] = None) -> Optional[Tuple[int, Result]]:
        """:meth:`match` for ``indices[start]``, ``indices[start + 1]``, ...
        until one answers other than no match: ``(position, answer)``, or
        None. With the native reader (:mod:`pypm_verified._native`) the
        engine is called from C for each index (no Python per pattern)."""
        native = _native.reader()
        if native is None:
            for k in range(start, len(indices)):
                r = self.match(graph, root, indices[k], fuel)
                if r[0] != serialize.STATUS_NO_MATCH:
                    return k, r
            return None
        gh = self._graph(graph)
        if self._address is None:
            self._address = int(ffi.cast("uintptr_t", self._call))
        got = native.first_match(self._address, gh.value, self._pv, root, fuel or 0, indices,
                                 start, serialize.STATUS_NO_MATCH, self._cap)
        if got is None:
            return None
        k, words = got
        if words is None:  # an error code or a longer answer: the per-call path
            return k, self.match(graph, root, indices[k], fuel)
        return k, serialize.decode_match(words)


def _read_result(lib, handle: int, n: int):
    """The ``n`` words of the result behind ``handle``, which is released."""
    rh = Handle(lib, handle)
    try:
        out = ffi.new("int64_t[]", max(n, 1))
        check(lib, lib.pypm_result_read(rh.value, out, n), "pypm_result_read")
        return ffi.unpack(out, n)
    finally:
        rh.release()


def match_all(graph, defs: Tuple[core.PDef, ...], roots: Tuple[int, ...],
              fuel: Optional[int] = None, owner=None):
    """Run ``pypm_match_all``: list of ``(root_index, node, status, bindings,
    function_bindings)``; ``owner`` caches the set's handle (as in
    :func:`pattern_set_handle`)."""
    lib = open_engine_library()
    gh = graph_handle(lib, graph)
    ph = pattern_set_handle(lib, defs, roots, owner)
    result = ffi.new("int64_t *")
    length = ffi.new("size_t *")
    check(lib, lib.pypm_match_all(gh.value, ph.value, fuel or 0, result, length),
          "pypm_match_all")
    return serialize.decode_match_all(_read_result(lib, result[0], length[0]))


def candidates(defs: Tuple[core.PDef, ...], roots: Tuple[int, ...], symbol: int,
               attrs: Tuple[Tuple[int, int], ...] = (), owner=None) -> Tuple[int, ...]:
    """Run ``pypm_candidates``: the root indices (increasing) whose
    root-operator index admits operator ``symbol`` with attributes
    ``attrs`` (``(attr, value)`` pairs: :func:`core.node_attrs`)
    (``Entry.set_candidates``); the others answer no match at every node
    with that operator and those attributes."""
    return _indices(defs, roots, owner, "pypm_candidates", symbol, attrs)


def _indices(defs, roots, owner, name: str, symbol: int, attrs, *more) -> Tuple[int, ...]:
    """Call ``name(patterns, symbol, attrs, n_attrs, *more, out, out_cap,
    out_len)`` on the set's handle: the root indices it writes."""
    lib = open_engine_library()
    ph = pattern_set_handle(lib, defs, roots, owner)
    cap = 1 + len(roots)
    out = ffi.new("int64_t[]", cap)
    out_len = ffi.new("size_t *")
    words = ffi.new("int64_t[]", [w for pair in attrs for w in pair] or [0])
    check(lib, getattr(lib, name)(ph.value, symbol, words, len(attrs), *more, out, cap,
                                  out_len), name)
    return tuple(out[1:1 + out[0]])


def candidates_at(defs: Tuple[core.PDef, ...], roots: Tuple[int, ...], symbol: int,
                  attrs: Tuple[Tuple[int, int], ...],
                  kids: Tuple[Tuple[int, Tuple[Tuple[int, int], ...]], ...],
                  owner=None) -> Tuple[int, ...]:
    """Run ``pypm_candidates_at``: :func:`candidates` refined by the
    operators of the node's arguments (``kids``: per argument, in order,
    its symbol and its ``(attr, value)`` pairs) through the children's
    index (``Entry.set_candidates_at``, ``KidIndex.kid_index``): the others
    have no match at a node with that operator and those arguments'."""
    flat = []
    for sym, at in kids:
        flat.append(sym)
        flat.append(len(at))
        for a, v in at:
            flat.append(a)
            flat.append(v)
    return _indices(defs, roots, owner, "pypm_candidates_at", symbol, attrs,
                    ffi.new("int64_t[]", flat or [0]), len(flat))


def match_multi(graph, defs: Tuple[core.PDef, ...], roots: Tuple[int, ...], spec: Sequence[int],
                root: int, fuel: Optional[int] = None, owner=None):
    """Run ``pypm_match_multi`` (``Multi.match_multi`` at node ``root``, or
    ``Multi.match_all_multi`` when ``root < 0``): list of ``(root, status,
    nodes, bindings, function_bindings)``. ``spec`` names root indices of
    the pattern set ``(defs, roots)``."""
    lib = open_engine_library()
    gh = graph_handle(lib, graph)
    ph = pattern_set_handle(lib, defs, roots, owner)
    sbuf = ffi.new("int64_t[]", list(spec))
    result = ffi.new("int64_t *")
    length = ffi.new("size_t *")
    check(lib, lib.pypm_match_multi(gh.value, ph.value, sbuf, len(spec), root, fuel or 0,
                                    result, length), "pypm_match_multi")
    return serialize.decode_match_multi(_read_result(lib, result[0], length[0]))


def dominates(graph, defs: Tuple[core.PDef, ...], roots: Tuple[int, ...], spec: Sequence[int],
              root: int, fuel: Optional[int] = None, owner=None):
    """Run ``pypm_dominates`` (``Dominates.dom_result`` at node ``root``, or at
    every node when ``root < 0``): list of ``(root, status, parent, region)``.
    ``spec`` is :func:`serialize.encode_dominates_spec` over root indices of
    the pattern set ``(defs, roots)``."""
    lib = open_engine_library()
    gh = graph_handle(lib, graph)
    ph = pattern_set_handle(lib, defs, roots, owner)
    sbuf = ffi.from_buffer("int64_t[]", spec)
    result = ffi.new("int64_t *")
    length = ffi.new("size_t *")
    check(lib, lib.pypm_dominates(gh.value, ph.value, sbuf, len(spec), root, fuel or 0,
                                  result, length), "pypm_dominates")
    return serialize.decode_dominates(_read_result(lib, result[0], length[0]))


# The verdicts of validate_rewrite (pypm_verified.h's PYPM_REJECT_*); 0: accepted.
REJECT_BEFORE_ILL_FORMED = 1
REJECT_AFTER_ILL_FORMED = 2
REJECT_FIRING = 3
REJECT_MAP = 4
REJECT_NODE = 5
REJECT_ARG = 6
REJECT_OUTPUT = 7
REJECT_DEAD = 8
# The further verdicts of validate_firings (certificates).
REJECT_AGREE = 9
REJECT_CERTS = 10
REJECT_MATCH = 11
REJECT_SUBST = 12
REJECT_TEMPLATE = 13


def validate_rewrite(words) -> Tuple[int, int]:
    """Run ``pypm_validate_rewrite`` (``Rewrite.validate``) on a
    rewrite-validation buffer (docs/internals/format.md, "Rewrite
    validation"): ``(0, -1)`` when the after graph is the before graph with
    every firing applied, else ``(reason, where)`` with ``reason`` one of the
    ``REJECT_*`` codes. ``words`` is a sequence of ints or an ``array('q')``.
    Raises :class:`EngineError` (code ``PYPM_E_MALFORMED``) when the buffer
    does not parse, a word outside int64 included."""
    lib = open_engine_library()
    _start(lib)
    if isinstance(words, array) and words.typecode == "q":
        buf = words
    else:
        try:
            buf = array("q", words)
        except OverflowError as e:
            raise EngineError(lib.PYPM_E_MALFORMED, "PYPM_E_MALFORMED",
                              f"rewrite-validation buffer: a word is outside int64 ({e})",
                              "pypm_validate_rewrite") from None
    verdict = ffi.new("int64_t *")
    where = ffi.new("int64_t *")
    # an empty array has no storage: pass a one-word buffer with length 0
    cbuf = ffi.from_buffer("int64_t[]", buf) if len(buf) else ffi.new("int64_t[1]")
    check(lib, lib.pypm_validate_rewrite(cbuf, len(buf), verdict, where),
          "pypm_validate_rewrite")
    return verdict[0], where[0]


def _words(lib, words, what: str, call: str) -> array:
    if isinstance(words, array) and words.typecode == "q":
        return words
    try:
        return array("q", words)
    except OverflowError as e:
        raise EngineError(lib.PYPM_E_MALFORMED, "PYPM_E_MALFORMED",
                          f"{what}: a word is outside int64 ({e})", call) from None


def validate_firings(graph, defs: Tuple[core.PDef, ...], roots: Tuple[int, ...], words,
                     fuel: Optional[int] = None, owner=None) -> Tuple[int, int]:
    """Run ``pypm_validate_firings`` (``Certify.validate_firings``) on a
    firing-certificate buffer (docs/internals/format.md, "Firing
    certificates") against the matcher's ``graph`` and the pattern set
    ``(defs, roots)`` the certificates' pattern indices name: ``(0, -1)``
    when the pass is one :func:`validate_rewrite` accepts and each firing is
    a proved match of its pattern replaced by its template, else
    ``(reason, where)`` with ``reason`` one of the ``REJECT_*`` codes
    (``where``: the firing, for ``REJECT_MATCH``, ``REJECT_SUBST`` and
    ``REJECT_TEMPLATE``). Raises :class:`EngineError` (``PYPM_E_MALFORMED``)
    when the buffer does not parse."""
    lib = open_engine_library()
    gh = graph_handle(lib, graph)
    ph = pattern_set_handle(lib, defs, roots, owner)
    buf = _words(lib, words, "firing-certificate buffer", "pypm_validate_firings")
    verdict = ffi.new("int64_t *")
    where = ffi.new("int64_t *")
    cbuf = ffi.from_buffer("int64_t[]", buf) if len(buf) else ffi.new("int64_t[1]")
    check(lib, lib.pypm_validate_firings(gh.value, ph.value, fuel or 0, cbuf, len(buf), verdict,
                                         where), "pypm_validate_firings")
    return verdict[0], where[0]
