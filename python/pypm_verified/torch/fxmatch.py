"""Every match of a pattern set in an FX graph, read straight into the engine.

:func:`match_fx` is :func:`pypm_verified.match_all` for a torch FX graph,
without a Python term graph: the native reader (``_fxreader.engine_graph``,
:mod:`pypm_verified._native`) walks the node list once and writes the
engine's graph encoding itself, hash-consing the terms in C -- the same
terms, in the same order, with the same ids as
``TermGraph(graph).build().graph`` (tests/test_fxmatch.py compares the
words) -- and one ``pypm_match_all`` call matches every pattern at every
node. Only the matches found are turned into Python objects, named by FX
nodes. The FX graph is never modified (duplicate pure nodes are one term,
not merged in the graph).

Where the reader is not built, or gives up (a call whose arguments do not
fit its operator, where the import raises), or the engine is the reference
one, the graph is imported in Python (:meth:`TermGraph.import_node`,
without merging) and matched by :func:`pypm_verified.match_all`: the same
answers.
"""
from __future__ import annotations

import operator
from array import array
from typing import Any, Dict, List, NamedTuple, Optional, Sequence

import torch
import torch.fx as fx

from .. import _native, core
from ..core import symbols
from ..core.encoding import MAGIC_GRAPH, VERSION
from ..core import graph as graph_mod
from ..core.graph import Node
from ..dsl.patterns import Pattern
from ..engines import binding, matching
from ..errors import GraphError
from . import importer


class FxMatch(NamedTuple):
    """A match in an FX graph: the ``pattern``, its ``root`` FX node,
    ``bindings`` (term parameter name -> FX node, a constant's value, the
    object itself for an argument with no constant form, or a tuple of those
    for a list argument) and ``functions`` (operator parameter name -> the
    bound operator)."""
    pattern: Pattern
    root: fx.Node
    bindings: Dict[str, Any]
    functions: Dict[str, Any]


# The reader's tables, shared by the process (each entry depends on its key
# alone): per target ((target, symbol, pure, arity), the target held so that
# its id is not reused), per constant
# (importer._const_cache_key), per input name, list<n> and output<n> symbols;
# the importer's table of tensor types
_TABLES = ({}, {}, {}, {}, {}, importer._static_types)
_TABLE_LIMIT = 1 << 16


class _Learner:
    """What the native reader asks on a miss: the import's own answers."""

    size_hints = False
    _types = importer._static_types
    _type = importer.TermGraph._type

    @staticmethod
    def learn_target(node: fx.Node):
        t = node.target
        if t is operator.getitem or isinstance(t, torch._ops.OpOverload):
            op = importer.op_for(t)
            return (t, op.symbol, importer.is_pure(node), op.arity)
        return None

    @staticmethod
    def learn_const(a) -> Optional[int]:
        try:  # the symbol of TermGraph._const's leaf
            return symbols.const_symbol(importer.const_value(a))
        except (TypeError, GraphError):
            return None  # the import makes it an opaque input

    @staticmethod
    def learn_opaque_input(a) -> int:
        # TermGraph.arg's leaf for an argument without a constant form (the
        # object named by its id, held by the graph being read)
        return symbols.intern(("input", f"opaque:{id(a)}"))

    @staticmethod
    def learn_input(name: str) -> int:
        return symbols.intern(("input", name))

    @staticmethod
    def learn_list(n: int) -> int:
        return importer.list_op(n).symbol

    @staticmethod
    def learn_output(n: int) -> int:
        return importer._opaque_op("output", n).symbol

    @staticmethod
    def learn_opaque(node: fx.Node, n: int) -> int:
        return importer._opaque_op(node.target, n).symbol

    @staticmethod
    def opaque_args(node: fx.Node) -> list:
        return list(node.args) + list(node.kwargs.values())

    @staticmethod
    def call_args(node: fx.Node):
        try:
            return importer.positional_args(node)
        except TypeError:
            return None

    @staticmethod
    def flatten(args) -> list:
        return list(importer._flatten(args))


_LEARNER = _Learner()


class _Words:
    """The engine's graph encoding of a term graph written by the reader:
    what :func:`binding.match_all` reads of a graph."""

    __slots__ = ("words", "n", "engine_handle")

    def __init__(self, words: array, n: int):
        self.words, self.n, self.engine_handle = words, n, None

    def __len__(self) -> int:
        return self.n

    def encode(self) -> array:
        return self.words


def engine_words(nodes: Sequence[fx.Node]):
    """``(words, term ids of nodes, origins)`` of the FX node list ``nodes``
    read natively (the full ``MAGIC_GRAPH`` encoding, an ``array('q')``; per
    term its first FX node, a constant's value, or Ellipsis for a list), or None
    where the native reader is not built or cannot read a node."""
    native = _native.reader()
    if native is None:
        return None
    if any(len(t) > _TABLE_LIMIT for t in _TABLES[:5]):
        for t in _TABLES[:5]:
            t.clear()
    with torch._C.DisableTorchFunctionSubclass():  # as TermGraph.build
        got = native.engine_graph(list(nodes), importer._native_ctx(), _TABLES, _LEARNER,
                                  graph_mod._LEAF_CLASS, _op_class, MAGIC_GRAPH, VERSION,
                                  core.OPCLASS)
    if got is None:
        return None
    words, ids, origin = got
    out = array("q")
    out.frombytes(words)
    return out, ids, origin


def _op_class(symbol: int) -> Optional[int]:
    """The class code of the operator ``symbol`` (``Graph.sym_attrs``'s)."""
    return graph_mod.sym_attr(symbol, core.OPCLASS)


def match_fx(patterns: Sequence[Pattern], graph, engine: str = "verified",
             fuel: Optional[int] = None) -> List[FxMatch]:
    """Every match of every pattern at every node of ``graph`` (a
    ``torch.fx.Graph`` or ``GraphModule``), in term order then pattern order,
    as :func:`pypm_verified.match_all` gives them on its term graph. Raises
    :class:`pypm_verified.OutOfFuel` as it does. The graph is not modified."""
    matching.check_engine(engine)
    g = graph.graph if isinstance(graph, fx.GraphModule) else graph
    if not isinstance(g, fx.Graph):
        raise TypeError(f"match_fx() takes a torch.fx Graph or GraphModule, not {graph!r}")
    patterns = list(patterns)
    for p in patterns:
        if not isinstance(p, Pattern) or p.is_multi or getattr(p, "_is_dominates", False):
            raise TypeError(f"match_fx() takes single-root @pm.pattern patterns, not {p!r}")
    if not patterns:
        return []
    nodes = list(g.nodes)
    got = engine_words(nodes) if engine == "verified" else None
    if got is None:
        return _match_python(patterns, nodes, engine, fuel)
    words, ids, origin = got
    s = matching.PreparedPatterns(patterns)
    out = []
    terms = None
    for i, root, status, binds, fbinds in binding.match_all(
            _Words(words, len(origin)), s.defs, s.roots, matching._fuel(fuel),
            matching._owner_of(s)):
        if status == binding.serialize.STATUS_OUT_OF_FUEL:
            raise matching._out_of_fuel(patterns[i], root)
        tn, fn = s.names[i]
        values = {}
        for v, n in binds:
            o = origin[n]
            if o is Ellipsis:  # a list: its elements
                if terms is None:
                    terms = _children(words, len(origin))
                o = tuple(origin[k] for k in terms[n])
            values[tn[v]] = o
        out.append(FxMatch(patterns[i], origin[root], values,
                           {fn[F]: symbols.lookup(f) for F, f in fbinds}))
    return out


def _children(words: array, n: int) -> List[tuple]:
    """The child ids of each of the ``n`` terms of a ``MAGIC_GRAPH`` encoding."""
    out, k = [], 3
    for _ in range(n):
        nk = words[k + 1]
        out.append(tuple(words[k + 2:k + 2 + nk]))
        k += 2 + nk
        k += 1 + 2 * words[k]
    return out


def _match_python(patterns, nodes, engine, fuel) -> List[FxMatch]:
    """:func:`match_fx` through a Python term graph (imported node by node,
    duplicates not merged) and :func:`pypm_verified.match_all`."""
    tg = importer.TermGraph(nodes[0].graph if nodes else fx.Graph())
    with _native.paths(False):
        for n in nodes:
            tg.import_node(n)
    fx_of, consts = tg.fx_of, tg.const_values
    objects: Dict[str, Any] = {}  # an argument with no constant form: the input "opaque:<id>"

    def note(a) -> None:
        objects.setdefault(f"opaque:{id(a)}", a)
        if isinstance(a, (list, tuple)):
            for e in a:
                note(e)
        elif isinstance(a, dict):
            for e in a.values():
                note(e)

    for n in nodes:
        note(n.args)
        note(n.kwargs)

    def value(t: Node):
        if t.id in fx_of:
            return fx_of[t.id]
        if t.kind == "const":
            return consts.get(t.id, t.value)
        if t.kind == "input":
            return objects.get(t.name, t.name)
        return tuple(value(k) for k in t.args)

    out = []
    for p, root, m in matching.match_all(patterns, tg.graph, engine, fuel):
        out.append(FxMatch(p, fx_of[root.id], {k: value(t) for k, t in m.bindings.items()},
                           dict(m.functions)))
    return out


__all__ = ["FxMatch", "match_fx", "engine_words"]
