"""The term graph as int64 words (docs/internals/format.md, VERSION 2): the
``MAGIC_GRAPH`` layout :meth:`~pypm_verified.core.graph.Graph.encode` gives
and the ``MAGIC_EXTENSION`` layout of the nodes added since. The graph's own
encoding, so it lives with the graph; the pattern tables and the engine's
result buffers are :mod:`pypm_verified.engines.serialize`'s, which
re-exports these names."""
from __future__ import annotations

from array import array
from typing import List

from .. import _native
from .wire import VALUE_MAX, VALUE_MIN

MAGIC_GRAPH = 0x485052474D505950  # b"PYPMGRPH" read little-endian
MAGIC_EXTENSION = 0x545845474D505950  # b"PYPMGEXT"
VERSION = 2
ID_LIMIT = 1 << 62  # node, symbol, variable and attribute ids lie in [0, 2^62)


class EncodeError(ValueError):
    """A value that the wire format cannot represent."""


def _value(v: int, what: str) -> int:
    if not isinstance(v, int) or not VALUE_MIN <= v <= VALUE_MAX:
        raise EncodeError(f"{what} {v!r} is not in (-2^62, 2^62)")
    return v


def _id(v: int, what: str) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < ID_LIMIT:
        raise EncodeError(f"{what} {v!r} is not in [0, 2^62)")
    return v


def encode_graph(graph) -> array:
    """Encode a :class:`~pypm_verified.core.graph.Graph` (``MAGIC_GRAPH`` layout,
    nodes then symbol attributes)."""
    return _encode_nodes(graph, [MAGIC_GRAPH, VERSION, len(graph)], 0)


def encode_graph_extension(graph, base: int) -> array:
    """Encode the nodes ``base ..`` of ``graph`` as a graph extension
    (``MAGIC_EXTENSION`` layout), for ``pypm_graph_extend`` on a handle that
    holds the first ``base`` nodes."""
    n = len(graph)
    if not 0 <= base <= n:
        raise EncodeError(f"extension base {base} outside [0, {n}]")
    return _encode_nodes(graph, [MAGIC_EXTENSION, VERSION, base, n - base], base)


def _encode_nodes(graph, words: List[int], base: int) -> array:
    app, ext = words.append, words.extend
    labels, kids, attrs_of = graph.columns(base)
    native = _native.reader()
    if native is not None:  # the same words, written natively (pypm_verified._native)
        tail = []
        sym = graph.sym_attrs(labels)
        tail.append(len(sym))
        for s, a, v in sym:
            tail.extend((s, a, _value(v, "symbol attribute value")))
        try:
            return array("q", native.encode_columns(words, labels, kids, attrs_of, tail))
        except OverflowError:
            raise EncodeError("a graph attribute does not fit in 64 bits") from None
    # a node's attributes as words, once per attribute tuple: nodes of one
    # tensor type share one tuple object (id -> (tuple, words), the tuple
    # kept so that its id is not reused while the table lives)
    flat = {}
    for label, children, attrs in zip(labels, kids, attrs_of):
        app(label)
        app(len(children))
        ext(children)
        hit = flat.get(id(attrs))
        if hit is None:
            w = [len(attrs)]
            for a, v in attrs:
                w += (a, v)
            hit = flat[id(attrs)] = (attrs, w)
        ext(hit[1])
    sym = graph.sym_attrs(labels)
    app(len(sym))
    for s, a, v in sym:
        ext((s, a, _value(v, "symbol attribute value")))
    try:
        return array("q", words)
    except OverflowError:
        raise EncodeError("a graph attribute does not fit in 64 bits") from None
