"""Computation graphs: hash-consed DAGs of operator applications.

Nodes are inputs (named leaves), constant leaves, or applications of an
:class:`~pypm_verified.dsl.Op` to earlier nodes. Building the same
``(label, children, attributes)`` twice returns the same node. Each node
carries the attributes guards read (docs/internals/format.md): rank, dtype code, and
``shape[i]`` / ``shape[-(j+1)]`` for every known dimension; each operator
symbol its class (the OPCLASS symbol attribute).

Nodes are immutable and the graph is append-only. A graph may designate
outputs (:meth:`Graph.output`); :meth:`Graph.replace` substitutes one node
for another in everything the outputs reach (building new nodes), which is
how rules rewrite a graph. Nodes the outputs no longer reach stay in the
graph but are not :meth:`live <Graph.live>`.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from .. import core
from . import symbols
from ..errors import GraphError

ShapeLike = Optional[Sequence[Optional[int]]]


class TensorShape(tuple):
    """A node's shape: a tuple of dimensions (``None`` for an unknown one)
    with ``.rank``, so rule bodies can write ``x.shape.rank``."""

    __slots__ = ()

    @property
    def rank(self) -> int:
        return len(self)


def _norm_shape(shape: ShapeLike) -> Optional[TensorShape]:
    if shape is None:
        return None
    try:
        dims = tuple(shape)
    except TypeError:
        raise GraphError(f"shape must be a sequence of ints, not {shape!r}") from None
    if len(dims) > core.MAX_RANK:
        raise GraphError(f"rank {len(dims)} exceeds the maximum {core.MAX_RANK}")
    for d in dims:
        if d is not None and (not isinstance(d, int) or isinstance(d, bool)
                              or not core.VALUE_MIN <= d <= core.VALUE_MAX):
            raise GraphError(f"shape dimensions must be ints in (-2^62, 2^62) or None, "
                             f"not {d!r}")
    return TensorShape(dims)


_MISSING = object()
_attrs_cache: Dict[tuple, Tuple[Tuple[int, int], ...]] = {}


def _attrs(shape, dtype) -> Tuple[Tuple[int, int], ...]:
    """Attribute (id, value) pairs, sorted by id (memoized: graphs repeat types)."""
    key = (shape, dtype)
    out = _attrs_cache.get(key)
    if out is None:
        out = _attrs_cache[key] = _compute_attrs(shape, dtype)
        if len(_attrs_cache) > 4096:
            _attrs_cache.clear()
    return out


def attrs_of(shape: Optional[Tuple[Optional[int], ...]], dtype
             ) -> Tuple[Tuple[int, int], ...]:
    """The sorted ``(attribute id, value)`` pairs a node of ``shape`` (a tuple
    of ints / None, already checked, or None) and ``dtype`` (a DType or None)
    carries (memoized)."""
    return _attrs(shape, dtype)


def _compute_attrs(shape, dtype) -> Tuple[Tuple[int, int], ...]:
    out: List[Tuple[int, int]] = []
    if shape is not None:
        out.append((core.RANK, len(shape)))
    if dtype is not None:
        out.append((core.DTYPE, dtype.code))
    if shape is not None:
        n = len(shape)
        out.extend((core.SHAPE_BASE + i, d) for i, d in enumerate(shape) if d is not None)
        out.extend((core.SHAPE_NEG_BASE + j, shape[n - 1 - j])
                   for j in range(n) if shape[n - 1 - j] is not None)
    return tuple(out)


class Node:
    """A node of a :class:`Graph`.

    ``id`` (dense, in creation order), ``op`` (the Op, or None for inputs and
    constants), ``args`` (child nodes), ``shape`` (a :class:`TensorShape`,
    None if unknown), ``rank`` (None if unknown), ``dtype`` (DType or None;
    alias ``elType``), ``kind`` ("op", "input" or "const"), ``name`` (inputs)
    and ``value`` (constants). Equal iff same graph and id. Calling an Op on
    nodes adds a node (``MatMul(a, b)`` is ``graph.apply(MatMul, a, b)``).
    """

    __slots__ = ("graph", "id", "op", "args", "shape", "dtype", "kind", "name", "value",
                 "label", "__weakref__")

    def __init__(self, graph, nid, label, kind, op, args, shape, dtype, name=None, value=None):
        self.graph = graph
        self.id = nid
        self.label = label
        self.kind = kind
        self.op = op
        self.args = args
        self.shape = shape
        self.dtype = dtype
        self.name = name
        self.value = value

    def __eq__(self, other):
        return (isinstance(other, Node) and self.graph is other.graph
                and self.id == other.id)

    def __hash__(self):
        return hash((id(self.graph), self.id))

    @property
    def attrs(self) -> Dict[int, int]:
        """Attribute id -> value for the attributes this node knows."""
        return self.graph.attr_map(self.id)

    @property
    def rank(self) -> Optional[int]:
        return None if self.shape is None else len(self.shape)

    @property
    def elType(self):
        """The paper's name of ``dtype``."""
        return self.dtype

    def type_str(self) -> str:
        """`` : dtype[shape]`` as in reprs (empty when unknown)."""
        if self.shape is None and self.dtype is None:
            return ""
        dt = self.dtype.name if self.dtype is not None else "?"
        if self.shape is None:
            return f" : {dt}[?]"
        dims = ", ".join("?" if d is None else str(d) for d in self.shape)
        return f" : {dt}[{dims}]"

    def __repr__(self) -> str:
        if self.kind == "input":
            body = f"input {self.name!r}"
        elif self.kind == "const":
            body = f"const {self.value!r}"
        else:
            body = f"{self.op.name}({', '.join(f'%{a.id}' for a in self.args)})"
        return f"<Node %{self.id} = {body}{self.type_str()}>"


def sym_attr(symbol: int, attr: int) -> Optional[int]:
    """Attribute ``attr`` of the operator ``symbol`` in the symbol table
    (its class code for OPCLASS), None when unknown. Leaves have a class
    too: ``"input"`` for inputs, ``"constant"`` for constant leaves
    (``pm.is_input()`` and ``pm.is_constant()`` test it)."""
    if attr != core.OPCLASS:
        return None
    try:
        key = symbols.lookup(symbol)
    except (IndexError, TypeError):
        return None
    if isinstance(key, tuple):  # a leaf: its class is "input" or "constant"
        code = _LEAF_CLASS[symbol] = \
            symbols.opclass("input" if key[0] == "input" else "constant").code
        return code
    cls = getattr(key, "op_class", None)
    return getattr(cls, "code", None)


# sym_attr of the leaf symbols (a leaf's class follows from its key, and a
# class keeps its code): one table for the process, read first by
# Graph.sym_attrs (an encoding of a new graph names every input and constant)
_LEAF_CLASS: Dict[int, int] = {}


class Graph:
    """A hash-consed computation graph (append-only), with designated outputs."""

    def __init__(self):
        self.nodes: List[Node] = []
        self._labels: List[int] = []
        self._children: List[Tuple[int, ...]] = []
        self._attrs: List[Tuple[Tuple[int, int], ...]] = []
        self._index: Dict[tuple, Node] = {}
        self._inputs: Dict[str, Node] = {}
        self._outputs: List[Node] = []
        self._encoded = None  # (n_nodes, words) cache for encode()
        self._sym_cache: Dict[int, Optional[int]] = {}  # sym_attrs: symbol -> class code
        self._label_counts = None  # label_counts(): (n_nodes, Counter)
        self.engine_handle = None  # the verified engine's copy of this graph (engines.binding)

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self):
        return iter(self.nodes)

    def __getitem__(self, nid: int) -> Node:
        return self.nodes[nid]

    def __repr__(self) -> str:
        return f"<Graph with {len(self.nodes)} nodes>"

    def _add(self, key, label, kind, op, args, shape, dtype, attrs, name=None, value=None,
             ids=None) -> Node:
        node = self._index.get(key)
        if node is not None:
            return node
        return self._new(key, label, kind, op, args, shape, dtype, attrs, name, value,
                         ids if ids is not None else tuple([a.id for a in args]))

    def _new(self, key, label, kind, op, args, shape, dtype, attrs, name, value, ids) -> Node:
        """Append a node that ``key`` does not index yet."""
        nodes = self.nodes
        node = Node(self, len(nodes), label, kind, op, args, shape, dtype, name, value)
        nodes.append(node)
        self._labels.append(label)
        self._children.append(ids)
        self._attrs.append(attrs)
        self._index[key] = node
        return node

    def attr_map(self, nid: int) -> Dict[int, int]:
        """Node ``nid``'s attributes: attribute id -> value."""
        return dict(self._attrs[nid])

    def columns(self, base: int = 0) -> Tuple[List[int], List[Tuple[int, ...]],
                                              List[Tuple[Tuple[int, int], ...]]]:
        """The nodes from id ``base`` on as three columns: labels, child ids
        and sorted ``(attribute, value)`` pairs (what the encoding carries)."""
        return self._labels[base:], self._children[base:], self._attrs[base:]

    def label_counts(self) -> Dict[int, int]:
        """How many nodes carry each label (operator or leaf symbol): a
        :class:`collections.Counter`, label -> count (0 for an absent label).
        Computed once per size of the graph (it only grows); do not mutate."""
        hit = self._label_counts
        if hit is None or hit[0] != len(self._labels):
            import collections
            hit = self._label_counts = (len(self._labels), collections.Counter(self._labels))
        return hit[1]

    def sinks(self) -> List[Node]:
        """The nodes no node uses, in id order."""
        used = {c for kids in self._children for c in kids}
        return [n for n in self.nodes if n.id not in used]

    def input(self, name: str, shape: ShapeLike = None, dtype=None) -> Node:
        """The input leaf ``name`` (one per name; re-declaring it with the same
        shape and dtype returns the same node, with others raises GraphError)."""
        if not isinstance(name, str):
            raise GraphError(f"input name must be a str, not {name!r}")
        shape = _norm_shape(shape)
        dtype = None if dtype is None else core.as_dtype(dtype)
        old = self._inputs.get(name)
        if old is not None:
            if old.shape != shape or old.dtype != dtype:
                raise GraphError(f"input {name!r} already declared as {old!r}")
            return old
        label = symbols.intern(("input", name))
        attrs = _attrs(shape, dtype)
        node = self._add(("input", name), label, "input", None, (), shape, dtype, attrs,
                         name=name)
        self._inputs[name] = node
        return node

    def input_typed(self, name: str, shape: Optional[TensorShape], dtype,
                    attrs: Tuple[Tuple[int, int], ...]) -> Node:
        """:meth:`input` for a caller that guarantees its types (the FX
        importer's per-type table): ``name`` a str, ``shape`` a
        :class:`TensorShape` of checked dimensions or None, ``dtype`` a DType
        or None and ``attrs`` what :func:`attrs_of` gives for them. The same
        node as :meth:`input` would give; a re-declaration with another type
        raises GraphError."""
        old = self._inputs.get(name)
        if old is not None:
            if old.shape != shape or old.dtype != dtype:
                raise GraphError(f"input {name!r} already declared as {old!r}")
            return old
        node = self._add(("input", name), symbols.intern(("input", name)), "input", None, (),
                         shape, dtype, attrs, name=name)
        self._inputs[name] = node
        return node

    def const(self, value, shape: ShapeLike = None, dtype=None) -> Node:
        """The constant leaf ``value`` (numbers compare by value: 2 and 2.0 are
        one symbol, -0.0 and 0.0 two; bools, strings and None are distinct)."""
        try:
            label = symbols.const_symbol(value)
        except TypeError as e:
            raise GraphError(str(e)) from None
        shape = _norm_shape(shape)
        dtype = None if dtype is None else core.as_dtype(dtype)
        attrs = _attrs(shape, dtype)
        return self._add((label, (), attrs), label, "const", None, (), shape, dtype, attrs,
                         value=value)

    def apply(self, op, *args, shape: ShapeLike = None, dtype=None,
              distinct: bool = False) -> Node:
        """The node ``op(*args)``; args are nodes of this graph or Python
        constants (which become constant leaves). ``distinct=True`` adds a
        node that is never shared (an impure operation: two calls are two
        nodes even when their structure is equal)."""
        arity = getattr(op, "arity", None)
        if arity is None or getattr(op, "symbol", None) is None:
            raise GraphError(f"apply() needs an @pm.op operator, not {op!r}")
        if len(args) != arity:
            raise GraphError(f"operator {op.name} takes {op.arity} argument(s), got {len(args)}")
        children = []
        for a in args:
            if isinstance(a, Node):
                if a.graph is not self:
                    raise GraphError(f"{a!r} belongs to another graph")
                children.append(a)
            elif symbols.is_constant(a):
                children.append(self.const(a))
            else:
                raise GraphError(f"argument {a!r} of {op.name} is neither a node nor a constant")
        shape = _norm_shape(shape)
        dtype = None if dtype is None else core.as_dtype(dtype)
        attrs = _attrs(shape, dtype)
        label = op.symbol
        children = tuple(children)
        key = (label, tuple(c.id for c in children), attrs)
        if distinct:
            key = ("distinct", len(self.nodes))
        return self._add(key, label, "op", op, children, shape, dtype, attrs)

    def apply_nodes(self, op, children: Tuple["Node", ...], shape: Optional[tuple],
                    dtype, distinct: bool = False) -> Node:
        """:meth:`apply` for a caller that guarantees what it checks (the FX
        importer, per node): ``children`` a tuple of nodes of this graph,
        ``shape`` None or a tuple of ints in range / None of rank at most
        ``MAX_RANK``, ``dtype`` a DType or None. Only the arity is checked."""
        if len(children) != op.arity:
            raise GraphError(f"operator {op.name} takes {op.arity} argument(s), "
                             f"got {len(children)}")
        if shape is not None:
            shape = TensorShape(shape)
        attrs = _attrs(shape, dtype)
        label = op.symbol
        ids = tuple([c.id for c in children])
        key = ("distinct", len(self.nodes)) if distinct else (label, ids, attrs)
        return self._add(key, label, "op", op, children, shape, dtype, attrs, ids=ids)

    def apply_ids(self, op, label: int, children: Tuple["Node", ...], ids: Tuple[int, ...],
                  shape: Optional[TensorShape], dtype, attrs: Tuple[Tuple[int, int], ...],
                  distinct: bool = False) -> Node:
        """:meth:`apply_nodes` with everything precomputed by a caller that
        guarantees it (the FX importer's per-shape table): ``label`` is
        ``op.symbol``, ``ids`` the children's ids, ``shape`` a
        :class:`TensorShape` or None and ``attrs`` what :func:`_attrs` gives
        for ``(shape, dtype)``. Only the arity is checked."""
        if len(ids) != op.arity:
            raise GraphError(f"operator {op.name} takes {op.arity} argument(s), "
                             f"got {len(ids)}")
        key = ("distinct", len(self.nodes)) if distinct else (label, ids, attrs)
        node = self._index.get(key)
        if node is not None:
            return node
        return self._new(key, label, "op", op, children, shape, dtype, attrs, None, None, ids)

    # --------------------------------------------------------- symbol attributes

    def sym_attr(self, symbol: int, attr: int) -> Optional[int]:
        """Attribute ``attr`` of the operator ``symbol`` (its class code for
        OPCLASS), None when unknown: :func:`sym_attr`, the symbol table's."""
        return sym_attr(symbol, attr)

    def sym_attrs(self, labels=None) -> List[Tuple[int, int, int]]:
        """``(symbol, attr_id, value)`` of the labels of this graph's nodes
        (or of ``labels``), sorted (what the graph encoding carries)."""
        out = []
        cache = self._sym_cache
        # a graph whose classes are the symbol table's reads the leaves'
        # from the process's table
        leaves = _LEAF_CLASS if type(self).sym_attr is Graph.sym_attr else {}
        for sym in sorted(set(self._labels if labels is None else labels)):
            # a symbol's class is fixed once this graph's encoding carried it
            # (the engine refuses an extension that changes it): cached
            v = cache.get(sym, _MISSING)
            if v is _MISSING:
                v = leaves.get(sym, _MISSING)
                if v is _MISSING:
                    v = self.sym_attr(sym, core.OPCLASS)
                cache[sym] = v
            if v is not None:
                out.append((sym, core.OPCLASS, v))
        return out

    # ----------------------------------------------------- outputs, rewriting

    def output(self, node: Node) -> Node:
        """Designate ``node`` as an output (kept once, in order); returns it."""
        self._own(node)
        if node not in self._outputs:
            self._outputs.append(node)
        return node

    @property
    def outputs(self) -> Tuple[Node, ...]:
        """The designated outputs, in order."""
        return tuple(self._outputs)

    def live(self) -> List[Node]:
        """The nodes the outputs reach, in id order (every node when no output
        is designated)."""
        if not self._outputs:
            return list(self.nodes)
        seen = set()
        stack = [o.id for o in self._outputs]
        while stack:
            i = stack.pop()
            if i not in seen:
                seen.add(i)
                stack.extend(self._children[i])
        return [self.nodes[i] for i in sorted(seen)]

    def replace(self, old: Node, new: Node) -> None:
        """Substitute ``new`` for every occurrence of ``old`` in the terms the
        outputs denote: each live node that reaches ``old`` is rebuilt over the
        replaced children (same operator, shape and dtype) and the outputs are
        updated. ``new`` itself is inserted as it is (a replacement may contain
        ``old``). Needs designated outputs."""
        self._own(old)
        self._own(new)
        if not self._outputs:
            raise GraphError("replace() needs designated outputs (graph.output(node))")
        memo: Dict[int, Node] = {old.id: new}
        for node in self.live():  # id order is topological: children first
            if node.id in memo or not node.args:
                continue
            args = tuple(memo.get(a.id, a) for a in node.args)
            if any(a is not b for a, b in zip(args, node.args)):
                memo[node.id] = self.apply(node.op, *args, shape=node.shape, dtype=node.dtype)
        self._outputs = list(dict.fromkeys(memo.get(o.id, o) for o in self._outputs))

    def _own(self, node) -> None:
        if not isinstance(node, Node) or node.graph is not self:
            raise GraphError(f"{node!r} is not a node of this graph")

    def encode(self):
        """The graph as int64 words (docs/internals/format.md), an ``array('q')``; cached
        until the next node is added. Do not mutate the returned array."""
        n = len(self.nodes)
        if self._encoded is None or self._encoded[0] != n:
            from .encoding import encode_graph  # imports the native writer when first used
            self._encoded = (n, encode_graph(self))
        return self._encoded[1]
