"""The wire format of doc/format.md: graphs and pattern sets as int64 words,
and the decoders of the engine's result buffers."""
from __future__ import annotations

import sys
from array import array
from typing import Iterable, List, Sequence, Tuple

from . import core

MAGIC_GRAPH = 0x485052474D505950  # b"PYPMGRPH" read little-endian
MAGIC_PATTERNS = 0x535441504D505950  # b"PYPMPATS"
VERSION = 1
MAX_DEPTH = 10000
ID_LIMIT = 1 << 62  # node, symbol, variable and attribute ids lie in [0, 2^62)
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

STATUS_MATCH, STATUS_NO_MATCH, STATUS_OUT_OF_FUEL = 0, 1, 2

# prefix-form tags
P_VAR, P_APP, P_ALT, P_GUARD = 1, 2, 3, 4
G_TRUE, G_EQ, G_LT, G_AND, G_OR, G_NOT = 1, 2, 3, 4, 5, 6
E_CONST, E_ATTR, E_ADD, E_SUB, E_MUL = 1, 2, 3, 4, 5


class EncodeError(ValueError):
    """A value that the wire format cannot represent."""


def encode_graph(graph) -> array:
    """Encode a :class:`~pypm_verified.graph.Graph` (``MAGIC_GRAPH`` layout)."""
    words: List[int] = [MAGIC_GRAPH, VERSION, len(graph._labels)]
    app, ext = words.append, words.extend
    for label, children, attrs in zip(graph._labels, graph._children, graph._attrs):
        app(label)
        app(len(children))
        ext(children)
        app(len(attrs))
        for a, v in attrs:
            app(a)
            app(v)
    try:
        return array("q", words)
    except OverflowError:
        raise EncodeError("a graph attribute does not fit in 64 bits") from None


def _id(v: int, what: str) -> int:
    if not isinstance(v, int) or not 0 <= v < ID_LIMIT:
        raise EncodeError(f"{what} {v!r} is not in [0, 2^62)")
    return v


_PATTERNS = (core.PVar, core.PApp, core.PAlt, core.PGuard)
_GUARDS = (core.GTrue, core.GEq, core.GLt, core.GAnd, core.GOr, core.GNot)
_EXPRS = (core.EConst, core.EAttr, core.EAdd, core.ESub, core.EMul)
_KINDS = {"pattern": _PATTERNS, "guard": _GUARDS, "expression": _EXPRS}
_TAG = {core.GEq: G_EQ, core.GLt: G_LT, core.GAnd: G_AND, core.GOr: G_OR,
        core.EAdd: E_ADD, core.ESub: E_SUB, core.EMul: E_MUL}


def _prefix(root, out: List[int]) -> None:
    """Append the pattern ``root`` in prefix form. Iterative, so deep terms do
    not hit Python's recursion limit; nesting is capped at MAX_DEPTH."""
    stack = [(root, 1, "pattern")]
    pop, push = stack.pop, stack.append
    while stack:
        t, depth, kind = pop()
        k = type(t)
        if k not in _KINDS[kind]:
            raise EncodeError(f"expected a {kind}, found {t!r}")
        if depth > MAX_DEPTH:
            raise EncodeError(f"nesting deeper than MAX_DEPTH={MAX_DEPTH}")
        d = depth + 1
        if k is core.PVar:
            out += (P_VAR, _id(t.x, "variable id"))
        elif k is core.PApp:
            out += (P_APP, _id(t.f, "symbol id"), len(t.args))
            for a in reversed(t.args):
                push((a, d, "pattern"))
        elif k is core.PAlt:
            out.append(P_ALT)
            push((t.p2, d, "pattern"))
            push((t.p1, d, "pattern"))
        elif k is core.PGuard:
            out.append(P_GUARD)
            push((t.g, d, "guard"))
            push((t.p, d, "pattern"))
        elif k is core.GTrue:
            out.append(G_TRUE)
        elif k is core.GEq or k is core.GLt:
            out.append(_TAG[k])
            push((t.e2, d, "expression"))
            push((t.e1, d, "expression"))
        elif k is core.GAnd or k is core.GOr:
            out.append(_TAG[k])
            push((t.g2, d, "guard"))
            push((t.g1, d, "guard"))
        elif k is core.GNot:
            out.append(G_NOT)
            push((t.g, d, "guard"))
        elif k is core.EConst:
            if not isinstance(t.z, int) or not INT64_MIN <= t.z <= INT64_MAX:
                raise EncodeError(f"constant {t.z!r} does not fit in 64 bits")
            out += (E_CONST, t.z)
        elif k is core.EAttr:
            out += (E_ATTR, _id(t.x, "variable id"), _id(t.attr, "attribute id"))
        else:  # EAdd, ESub, EMul
            out.append(_TAG[k])
            push((t.e2, d, "expression"))
            push((t.e1, d, "expression"))


def encode_pattern(p: core.Pattern) -> List[int]:
    """One core pattern in prefix form (the words of one pattern entry)."""
    out: List[int] = []
    _prefix(p, out)
    return out


def encode_patterns(patterns: Iterable[core.Pattern]) -> array:
    """A pattern set (``MAGIC_PATTERNS`` layout) of core patterns."""
    patterns = list(patterns)
    words: List[int] = [MAGIC_PATTERNS, VERSION, len(patterns)]
    for p in patterns:
        body = encode_pattern(p)
        words.append(len(body))
        words.extend(body)
    return array("q", words)


def to_bytes(words: Sequence[int]) -> bytes:
    """Little-endian bytes of a word buffer (for files)."""
    arr = array("q", words)
    if sys.byteorder == "big":
        arr.byteswap()
    return arr.tobytes()


def from_bytes(data: bytes) -> array:
    """Inverse of :func:`to_bytes`."""
    if len(data) % 8:
        raise ValueError("buffer length is not a multiple of 8 bytes")
    arr = array("q")
    arr.frombytes(data)
    if sys.byteorder == "big":
        arr.byteswap()
    return arr


# ----------------------------------------------------------------- results

Bindings = List[Tuple[int, int]]


def decode_match(words: Sequence[int]) -> Tuple[int, Bindings]:
    """``status, n, (var, node)*n`` -> ``(status, [(var, node), ...])``."""
    status, n = words[0], words[1]
    if status not in (STATUS_MATCH, STATUS_NO_MATCH, STATUS_OUT_OF_FUEL) or n < 0 \
            or len(words) < 2 + 2 * n:
        raise ValueError(f"malformed match result {list(words[:2])}")
    return status, [(words[2 + 2 * i], words[3 + 2 * i]) for i in range(n)]


def decode_match_all(words: Sequence[int]) -> List[Tuple[int, int, int, Bindings]]:
    """``n_entries, (pattern_index, root, status, n, (var, node)*n)*`` ->
    list of ``(pattern_index, root, status, bindings)``."""
    n_entries = words[0]
    pos, out = 1, []
    for _ in range(n_entries):
        pi, root, status, n = words[pos:pos + 4]
        pos += 4
        out.append((pi, root, status,
                    [(words[pos + 2 * i], words[pos + 2 * i + 1]) for i in range(n)]))
        pos += 2 * n
    if pos != len(words):
        raise ValueError(f"match_all result has {len(words) - pos} trailing words")
    return out
