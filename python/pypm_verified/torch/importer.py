"""FX graph -> PyPM term graph (hash-consed), kept in step with the FX graph.

* One operator per torch target (op overload, or ``operator.getitem``): its
  *label* (:mod:`.overloads`): the library's declaration
  (:mod:`pypm_verified.torch.ops`), else the first declaration of that
  overload alone, else an operator made on first sight and named after the
  overload. Every ``@pm.op(torch=[...])`` declaration of the overload
  matches nodes with that label.
* Calls in full positional form: every schema argument in order, defaults
  filled in, keyword-only ones included, so kwargs and defaults match alike.
* Non-tensor arguments (ints, floats, bools, strings, None, dtypes and lists
  of these) are constant leaves; patterns match them by literal, rules read
  their ``.value``. A list holding tensors is a ``list<n>`` node over its
  elements. Devices, layouts and memory formats are constants named by
  ``repr``; the original objects are kept for rebuilding.
* Pure nodes are hash-consed: a node equal in structure to an earlier one
  *is* that node (the FX duplicate is merged into it, common-subexpression
  elimination). Impure or random nodes (``node.is_impure()``, ops tagged
  ``nondeterministic_seeded``, unknown callables) are never shared.
* Attributes from ``node.meta["val"]``: rank, dtype and the static sizes; a
  symbolic size is left unknown so a guard reading it fails rather than lies
  -- unless ``size_hints`` is set (the driver, on a program with dynamic
  shapes): then the engine reads its example value, and every match is
  re-decided for all sizes before a rule fires (:mod:`.dynamic`).
* A node with several outputs (a tuple) has no tensor attributes; its
  ``operator.getitem`` users are ``GetItem(t, i)`` nodes, as in FX.
"""
from __future__ import annotations

import heapq
import math
import operator
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import FakeTensor

from .. import _native, core
from ..core.graph import Graph, Node, TensorShape, attrs_of
from ..errors import GraphError
from ..dsl.operators import Op
# the labels, list operators and dtype table are shared with the DSL's
# reading of PyTorch code: data of the DSL's (dsl/torch_labels.py)
from ..dsl.torch_labels import (PM_TO_TORCH, TORCH_TO_PM, is_list_op,  # noqa: F401
                                label_for, list_op, make_fn)
# the declared ATen operators (MatMul, Softmax, ...) are bound before any graph
# is imported: a target seen first would get an operator of its own, made on
# first sight, that the library's patterns (declared later) never match
from . import ops as _declared_ops  # noqa: F401,E402

_opaque_ops: Dict[tuple, Op] = {}


def op_for(target) -> Op:
    """The label operator of the torch target ``target`` (made on first use
    when nobody declared one; :func:`pypm_verified.dsl.torch_labels.label_for`)."""
    return label_for(target)


def _opaque_op(target, n: int) -> Op:
    key = (target, n)
    op = _opaque_ops.get(key)
    if op is None:
        name = getattr(target, "__name__", None) or repr(target)
        op = _opaque_ops[key] = Op(make_fn(f"opaque:{name}", n))
    return op


# target's id -> (schema, normalized arguments, positional count, target):
# keyed by id (an OpOverload's __hash__ is Python code, paid per lookup); the
# entry holds the target, so its id is never reused while the entry exists
_schema_specs: Dict[int, tuple] = {}


def _schema_spec(target) -> tuple:
    """``(schema, ((kwarg_only, name, has_default, default), ...), n_pos,
    target, tails)`` of an op overload, computed once per target; ``tails``
    (filled by :func:`positional_args`): number of positional arguments ->
    the defaults that complete a call given without kwargs."""
    spec = _schema_specs.get(id(target))
    if spec is None:
        schema = target._schema
        args = tuple((a.kwarg_only, a.name, a.has_default_value(),
                      a.default_value if a.has_default_value() else None)
                     for a in schema.arguments)
        spec = _schema_specs[id(target)] = (
            schema, args, sum(1 for a in schema.arguments if not a.kwarg_only), target, {})
    return spec


def positional_args(node: fx.Node) -> List[Any]:
    """The call's arguments in full positional form (schema order, defaults
    filled in). Raises TypeError for a call that does not fit the schema."""
    return _positional(node, node.target, node.args, node.kwargs)


def _positional(node: fx.Node, target, args, kwargs) -> List[Any]:
    """:func:`positional_args` of ``node`` with its target, args and kwargs."""
    if target is operator.getitem:
        return list(args)
    schema, spec, n_pos, _, tails = _schema_specs.get(id(target)) or _schema_spec(target)
    if len(args) > n_pos:
        raise TypeError(f"{node.name}: arguments {list(args[n_pos:])} do not fit {schema}")
    out = list(args)
    if not kwargs:
        if len(out) == len(spec):
            return out  # the common case: every argument given positionally
        tail = tails.get(len(out))
        if tail is not None:  # the next most common: the defaults of the rest
            out.extend(tail)
            return out
    used = 0
    for i in range(len(out), len(spec)):
        kwarg_only, name, has_default, default = spec[i]
        if name in kwargs:
            out.append(kwargs[name])
            used += 1
        elif has_default:
            out.append(default)
        else:
            raise TypeError(f"{node.name}: {target} is missing argument {name!r}")
    if used != len(kwargs):
        extra = sorted(k for k in kwargs if k not in {a[1] for a in spec[len(args):]})
        raise TypeError(f"{node.name}: arguments {extra} do not fit {schema}")
    if not kwargs:
        tails[len(args)] = tuple(out[len(args):])
    return out


def tensor_info(val, size_hints: bool = False):
    """``(shape, dtype)`` for guards from a ``meta["val"]`` (None, None when
    it is not a tensor; symbolic sizes None, or with ``size_hints`` their
    example values: only for a caller that re-decides matches symbolically,
    :func:`.dynamic.confirm`)."""
    if not isinstance(val, torch.Tensor):
        return None, None
    dims = []
    for d in val.shape:
        if isinstance(d, int):
            dims.append(d)
        elif size_hints:
            from .dynamic import hint
            dims.append(hint(d))
        else:
            dims.append(None)
    if len(dims) > core.MAX_RANK:
        return None, TORCH_TO_PM.get(val.dtype)
    return tuple(dims), TORCH_TO_PM.get(val.dtype)


# op overload's id -> (pure, the overload): purity depends on the overload only
_pure_targets: Dict[int, tuple] = {}


def is_pure(node: fx.Node) -> bool:
    """Whether ``node`` may be shared with an equal node (hash-consing)."""
    t = node.target
    if t is operator.getitem:
        return True
    if node.op == "call_function":
        hit = _pure_targets.get(id(t))
        if hit is not None:
            return hit[0]
    if not isinstance(t, torch._ops.OpOverload):
        return False
    if torch.Tag.nondeterministic_seeded in t.tags:
        return False
    pure = not node.is_impure()
    if node.op == "call_function":
        # for an op overload, fx's is_impure reads the overload only (mutable
        # schema, side-effectful or effectful, random): the same for every call
        _pure_targets[id(t)] = (pure, t)
    return pure


class TermGraph:
    """The term graph of an FX graph: ``graph`` (a :class:`pm.Graph`),
    ``term`` (FX node -> term node) and ``fx_of`` (term id -> FX node),
    ``const_values`` (term id of a constant leaf -> the original value).
    ``size_hints``: symbolic sizes are given to the engine as their example
    values (the caller must re-decide every match: :func:`.dynamic.confirm`).

    Built by :meth:`build`, which merges duplicate pure FX nodes into the
    first (``merged`` counts them); :meth:`reimport` and :meth:`refresh`
    re-import FX nodes whose arguments changed (the driver does it lazily,
    when its walk reaches them).
    """

    def __init__(self, fx_graph: fx.Graph, size_hints: bool = False):
        self.fx_graph = fx_graph
        self.size_hints = size_hints  # symbolic sizes as their example values
        self.graph = Graph()
        self.term: Dict[fx.Node, Node] = {}
        self.fx_of: Dict[int, fx.Node] = {}
        self.const_values: Dict[int, Any] = {}
        self.merged = 0
        self._consts: Dict[tuple, Node] = {}  # arg(): constant leaves by typed value
        # import_node: per FX node, what a re-import reads besides the arguments
        # (meta["val"] object, target, op, shape, dtype, distinct), so a node
        # re-imported after a rewrite upstream (its arguments' terms changed,
        # its own metadata did not) skips tensor_info and the operator lookup
        self._recipe: Dict[fx.Node, tuple] = {}
        # the per-overload table, filled once per target: id(target) ->
        # (target, label op, its symbol, pure), op None for a target that is
        # neither an op overload nor operator.getitem; call_function nodes only
        self._targets: Dict[int, tuple] = {}
        # (sizes, torch dtype) of a meta["val"] with static sizes -> (shape,
        # dtype, attributes): every layer of a model repeats its tensor types
        # (shared by all term graphs: the entry depends on the key alone)
        self._types: Dict[tuple, tuple] = _static_types
        # call_args: FX node -> (args object, kwargs object, positional form)
        self._calls: Dict[fx.Node, tuple] = {}
        # reimport's native path: (the reader, its state tuple), False without
        # it (_native_state; read at the first re-import)
        self._native = None

    # ------------------------------------------------------------- constants

    def _const(self, v) -> Node:
        key = v
        if isinstance(v, torch.dtype):
            key = TORCH_TO_PM.get(v) or repr(v)
        elif isinstance(v, (torch.device, torch.layout, torch.memory_format)):
            key = repr(v)
        elif isinstance(v, (list, tuple)):
            key = [const_value(e) for e in v]
        n = self.graph.const(key)
        self.const_values.setdefault(n.id, v)
        return n

    def arg(self, a) -> Node:
        """The term node of an FX argument (a node, a constant, a list)."""
        if isinstance(a, fx.Node):
            return self.term[a]
        ck = _const_cache_key(a)
        if ck is not None:
            n = self._consts.get(ck)
            if n is not None:
                return n
        elif isinstance(a, (list, tuple)) and _has_node(a):
            kids = [self.arg(e) for e in a]
            return self.graph.apply(list_op(len(kids)), *kids)
        try:
            n = self._const(a)
        except (TypeError, GraphError):
            # an argument with no constant form (e.g. a tensor constant): opaque
            return self.graph.input(f"opaque:{id(a)}")
        if ck is not None:
            self._consts[ck] = n
        return n

    # ----------------------------------------------------------------- nodes

    def call_args(self, node: fx.Node) -> Optional[List[Any]]:
        """:func:`positional_args` of a call_function ``node`` (None when the
        call does not fit its schema), kept while ``node.args``,
        ``node.kwargs`` and ``node.target`` are the same objects (FX replaces
        the first two on every change), so the rewrite validator reads what
        the import computed.
        Do not mutate the returned list."""
        # the fields behind the args and kwargs properties (cheaper to read)
        args, kwargs, target = node._args, node._kwargs, node.target
        hit = self._calls.get(node)
        if hit is not None and hit[0] is args and hit[1] is kwargs and hit[2] is target:
            return hit[3]
        try:
            pos = _positional(node, target, args, kwargs)
        except TypeError:
            pos = None
        self._calls[node] = (args, kwargs, target, pos)
        return pos

    def _type(self, val) -> tuple:
        """``(shape, dtype, attributes)`` of the term of a node whose
        ``meta["val"]`` is ``val`` (:func:`tensor_info`), from the table of
        tensor types when its sizes are static."""
        if type(val) is not _FakeTensor and not isinstance(val, torch.Tensor):
            return _NO_TYPE
        key = (val.shape, val.dtype)
        try:
            hit = self._types.get(key)
        except TypeError:  # a symbolic size is unhashable
            hit = None
        if hit is not None:  # the table holds static sizes only
            return hit
        if not all([type(d) is int for d in key[0]]):
            key = None
        shape, dtype = tensor_info(val, self.size_hints)
        if shape is not None:
            shape = TensorShape(shape)
        hit = (shape, dtype, attrs_of(shape, dtype))
        if key is not None:
            if len(self._types) > 4096:
                self._types.clear()
            self._types[key] = hit
        return hit

    def _target(self, node: fx.Node) -> tuple:
        """``(target, label op, symbol, pure)`` of a call_function node (the
        per-overload table: purity depends on the overload only,
        :func:`is_pure`); op, symbol and pure None when the target is neither
        an op overload nor ``operator.getitem``."""
        t = node.target
        hit = self._targets.get(id(t))
        if hit is None or hit[0] is not t:
            if t is operator.getitem or isinstance(t, torch._ops.OpOverload):
                op = op_for(t)
                hit = (t, op, op.symbol, is_pure(node))
            else:
                hit = (t, None, None, None)
            self._targets[id(t)] = hit
        return hit

    def _kids(self, args) -> Tuple[Tuple[Node, ...], Tuple[int, ...]]:
        """The term nodes of call arguments, and their ids."""
        term, consts, node_type, scalars = self.term, self._consts, fx.Node, _SCALAR_TYPES
        kids = []
        app = kids.append
        for a in args:
            t = type(a)
            if t is node_type:
                app(term[a])
            elif t in scalars:  # arg()'s table of constants, read directly (but -0.0)
                k = consts.get((t, a)) if t is not float or a != 0 else None
                app(k if k is not None else self.arg(a))
            else:
                app(self.arg(a))
        return tuple(kids), tuple([k.id for k in kids])

    def import_node(self, node: fx.Node) -> Node:
        """(Re-)import ``node`` from its current arguments; returns its term."""
        g = self.graph
        val = node.meta.get("val")
        target = node.target
        rec = self._recipe.get(node)
        if rec is not None and rec[0] is val and rec[1] is target:
            # re-import of a call already imported with this metadata: only
            # the arguments are read again (the common case after a rewrite)
            args = self.call_args(node)
            if args is not None:
                kids, ids = self._kids(args)
                typ = rec[4]
                t = g.apply_ids(rec[2], rec[3], kids, ids, typ[0], typ[1], typ[2],
                                distinct=rec[5])
                self.term[node] = t
                self.fx_of.setdefault(t.id, node)
                return t
        kind = node.op
        if kind == "call_function":
            hit = self._targets.get(id(target))
            if hit is None or hit[0] is not target:
                hit = self._target(node)
            op = hit[1]
            # the common case, in one pass: the overload's table entry, the
            # tensor type's, the arguments' terms, one append to the graph
            args = self.call_args(node) if op is not None else None
            if args is not None:
                label, pure = hit[2], hit[3]
                typ = self._type(val)
                kids, ids = self._kids(args)
                t = g.apply_ids(op, label, kids, ids, typ[0], typ[1], typ[2],
                                distinct=not pure)
                self._recipe[node] = (val, target, op, label, typ, not pure)
                self.term[node] = t
                self.fx_of.setdefault(t.id, node)
                return t
        if kind == "placeholder" or kind == "get_attr":
            typ = self._type(val)
            t = g.input_typed(f"{kind}:{node.name}", typ[0], typ[1], typ[2])
            self.term[node] = t
            self.fx_of.setdefault(t.id, node)
            return t
        shape, dtype = tensor_info(val, self.size_hints)
        if node.op in ("call_function", "call_method", "call_module"):
            # a call that fits no schema, or not an operator: opaque, never shared
            kids = [self.arg(a) for a in node.args] + [self.arg(v) for v in
                                                      node.kwargs.values()]
            t = g.apply(_opaque_op(target, len(kids)), *kids, shape=shape, dtype=dtype,
                        distinct=True)
        else:  # output
            kids = [self.arg(a) for a in _flatten(node.args)]
            t = g.apply(_opaque_op("output", len(kids)), *kids, distinct=True)
        self.term[node] = t
        self.fx_of.setdefault(t.id, node)
        return t

    def erase(self, node: fx.Node) -> None:
        """Erase ``node`` from the FX graph and forget its term."""
        t = self.term.pop(node, None)
        self._recipe.pop(node, None)
        self._calls.pop(node, None)
        if t is not None and self.fx_of.get(t.id) is node:
            del self.fx_of[t.id]
        self.fx_graph.erase_node(node)

    def add(self, node: fx.Node) -> fx.Node:
        """Import ``node``, just created in the FX graph, hash-consing it: when
        an equal pure node exists, one of the two is kept (the earlier one in
        graph order, which takes over the other's uses) and returned."""
        t = self.import_node(node)
        first = self.fx_of.get(t.id)
        if first is not node and first is not None and first.graph is self.fx_graph \
                and self.term.get(first) is t and is_pure(node):
            if first < node:
                self.term.pop(node, None)
                self._recipe.pop(node, None)
                self.fx_graph.erase_node(node)
                return first
            first.replace_all_uses_with(node)
            self.fx_of[t.id] = node
            self.erase(first)
        self.fx_of[t.id] = node
        return node

    def build(self) -> "TermGraph":
        """Import every node in order, merging duplicate pure nodes (in one
        native walk when the reader is built, :mod:`pypm_verified._native`:
        the same result as this loop)."""
        native = _native.reader()
        if native is not None:
            # the walk reads every node's fake tensor (shape, dtype): with
            # subclass __torch_function__ off, torch's attribute getters skip
            # their override lookup (nothing here calls a tensor function)
            with torch._C.DisableTorchFunctionSubclass():
                dups = native.build(self, list(self.fx_graph.nodes), _native_ctx())
        else:
            dups = self._build_nodes()
        for node in reversed(dups):
            self.fx_graph.erase_node(node)
            del self.term[node]
            self._recipe.pop(node, None)
        self.merged = len(dups)
        return self

    def _build_nodes(self) -> List[fx.Node]:
        """:meth:`build`'s walk in Python: import every node, merge each
        duplicate into the first; returns the duplicates (to erase)."""
        dups = []
        for node in list(self.fx_graph.nodes):
            t = self.import_node(node)
            first = self.fx_of[t.id]
            if first is not node:
                node.replace_all_uses_with(first)
                self.term[node] = t
                dups.append(node)
        return dups

    def native_state(self):
        """``(reader, state)`` of the native reader for this term graph (what
        its ``import_again`` and ``walk`` read), or False without it."""
        native = self._native
        if native is None:
            native = self._native = _native_state(self)
        return native

    def reimport(self, node: fx.Node, merge: bool = True
                 ) -> Tuple[Optional[str], List[fx.Node]]:
        """Re-import ``node`` from its current arguments. Returns ``(kind,
        users)``: kind None when its term is unchanged, "changed" when it
        changed, "merged" when it now equals an earlier FX node, which takes
        over its uses (``node`` is erased); ``users`` are the nodes whose
        arguments' terms changed (empty when kind is None).

        ``merge=False`` (the driver's look-ahead): a node that would merge is
        left as it was (its old term kept, nothing erased) and the kind is
        "would merge", users empty: the merge is decided when the walk
        reaches it, as without look-ahead."""
        old = self.term.get(node)
        native = self.native_state()
        t = native[0].import_again(native[1], node) if native else None
        if t is None:
            t = self.import_node(node)
        if old is not None and old is t:
            return None, []
        first = self.fx_of.get(t.id)
        # an FX node whose current term is t (fx_of may still name a node for
        # a term it had before a later re-import gave it another)
        mergeable = first is not node and first in self.term and self.term[first] is t \
            and first < node
        if mergeable and not merge:
            self.term[node] = old
            return "would merge", []
        users = list(node.users)
        if mergeable:
            node.replace_all_uses_with(first)
            self.fx_graph.erase_node(node)
            del self.term[node]
            self._recipe.pop(node, None)
            self.merged += 1
            return "merged", users
        self.fx_of[t.id] = node
        return "changed", users

    def refresh(self, nodes) -> List[fx.Node]:
        """Re-import ``nodes`` and, transitively, the users of those whose
        term changed (in graph order; see :meth:`reimport`). Returns the FX
        nodes whose term changed."""
        heap = [(n._sort_key, i, n) for i, n in enumerate(nodes) if n in self.term]
        heapq.heapify(heap)
        seen, changed, k = set(), [], len(heap)
        while heap:
            node = heapq.heappop(heap)[2]
            if node in seen or node not in self.term:
                continue
            seen.add(node)
            kind, users = self.reimport(node)
            if kind == "changed":
                changed.append(node)
            for u in users:
                k += 1
                heapq.heappush(heap, (u._sort_key, k, u))
        return changed


_NO_TYPE = (None, None, attrs_of(None, None))  # the term type of a non-tensor value
_static_types: Dict[tuple, tuple] = {}  # TermGraph._type's table
_FakeTensor = FakeTensor  # the usual meta["val"] type

_CONST_SCALARS = (bool, int, float, str, type(None), torch.dtype, torch.device, torch.layout,
                  torch.memory_format)
_SCALAR_TYPES = frozenset(_CONST_SCALARS)


# -0.0 equals 0.0 and hashes alike, but is another constant (x * -0.0 is
# -0.0 for x > 0): its key holds this instead of the value
_NEG_ZERO = "-0.0"


def _signbit(x: float) -> bool:
    return math.copysign(1.0, x) < 0


def _const_cache_key(a) -> Optional[tuple]:
    """A key telling constants apart by type and value (``2`` and ``2.0``,
    ``[1]`` and ``(1,)`` differ: the first seen is the one kept as the
    original value), None for what is not a plain constant."""
    t = type(a)
    if t in _SCALAR_TYPES:
        return (t, _NEG_ZERO) if t is float and a == 0 and _signbit(a) else (t, a)
    # FX gives list arguments as its immutable_list (a list subclass): a list
    if isinstance(a, (list, tuple)):
        ts = tuple(map(type, a))
        if _SCALAR_TYPES.issuperset(ts):  # flat (sizes, dims): the same key, at once
            pairs = tuple(zip(ts, a)) if float not in ts else \
                tuple([_const_cache_key(e) for e in a])
            return (tuple if isinstance(a, tuple) else list, pairs)
        ks = []
        for e in a:
            k = _const_cache_key(e)
            if k is None:
                return None
            ks.append(k)
        return (tuple if isinstance(a, tuple) else list, tuple(ks))
    return None


def const_value(v):
    """The value the constant leaf of the FX argument ``v`` stands for (what
    :meth:`pypm_verified.Graph.const` takes): dtypes by name, devices,
    layouts and memory formats by ``repr``, lists element-wise. Raises
    TypeError for a value with no constant form."""
    if isinstance(v, torch.dtype):
        return TORCH_TO_PM.get(v) or repr(v)
    if isinstance(v, (torch.device, torch.layout, torch.memory_format)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return [const_value(e) for e in v]
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    raise TypeError(f"unsupported constant {v!r}")


def _has_node(a) -> bool:
    for e in a:
        if isinstance(e, fx.Node) or (isinstance(e, (list, tuple, dict)) and any(
                isinstance(x, fx.Node) for x in _flatten(e))):
            return True
    return False


def _flatten(a):
    if isinstance(a, (list, tuple)):
        for e in a:
            yield from _flatten(e)
    elif isinstance(a, dict):
        for e in a.values():
            yield from _flatten(e)
    else:
        yield a


def _native_ctx() -> tuple:
    """What the native reader reads besides the term graph: the types it
    tells apart and the shared tables (module-level, never rebound)."""
    global _NATIVE_CTX
    if _NATIVE_CTX is None:
        from ..core import graph as _graph, symbols as _symbols
        _NATIVE_CTX = (_FakeTensor, fx.Node, _SCALAR_TYPES, operator.getitem, _graph.Node,
                       _symbols._ids, _schema_specs)
    return _NATIVE_CTX


_NATIVE_CTX: Optional[tuple] = None


def _native_state(tg: "TermGraph"):
    """``(reader, state)`` for the native reader's ``import_again`` on
    ``tg`` (the objects it reads, never rebound), or False when the reader
    is not used (:mod:`pypm_verified._native`)."""
    native = _native.reader()
    if native is None:
        return False
    g = tg.graph
    return native, (tg, g, tg.term, tg.fx_of, tg._recipe, tg._calls, tg._targets, tg._types,
                    tg._consts, g.nodes, g._labels, g._children, g._attrs, g._index,
                    g._inputs, _native_ctx())


def import_graph(fx_graph: fx.Graph) -> TermGraph:
    """The term graph of ``fx_graph`` (merging its duplicate pure nodes)."""
    return TermGraph(fx_graph).build()
