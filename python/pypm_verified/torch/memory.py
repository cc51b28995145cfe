"""The memory a run of a program needs, estimated before it runs, and the
limit it is refused past (``rewrite --max-memory``; ``max_memory=`` of
:func:`~.pipeline.rewrite_program` / :func:`~.pipeline.check_numerics`).

A ``.pt2`` of a few KB can carry a sample input that is an expanded view
(``torch.zeros(1).expand(2**31)``: a 4-byte storage, 2**31 elements); the
program's ops, and the random inputs of the numerics check, materialize it.
:func:`estimate_run_bytes` says from the shapes alone (the graph's fake
values, ``node.meta["val"]``) what running the program on given inputs
costs, so that such a run is refused in a second (exit 2) instead of
allocating 16 GB, or failing half-way and being blamed on a rule.

The estimate (:class:`Estimate`), in bytes, each tensor counted as
``numel x itemsize`` (dense, as if materialized, whatever its storage):

* ``inputs``: the user inputs given (a run of the numerics check on a random
  set allocates them whole);
* ``weights``: the parameters, buffers and constant tensors;
* ``intermediates``: the peak of the node outputs alive at once, walking the
  graph in order: a node's output is allocated when it runs and freed after
  its last user ran (outputs of the program live to the end); an op that
  returns an alias of an input (a view, ``getitem`` of a multi-output node,
  an in-place op) allocates nothing but keeps what it aliases alive while it
  is used.

``total = inputs + weights + intermediates``. Not counted: an op's own
scratch space, the insides of higher-order ops' subgraphs (``cond``,
``map``: only their outputs), allocator fragmentation and the runtime's
own footprint; counted whole although they may share memory: an op whose
schema does not say it aliases (``_unsafe_view``), tied weights. So it is
not a bound either way, but it is exact for the big tensors (inputs,
weights, the activations alive at once), which is what refuses a blown-up
run in time. The numerics check sizes the original program's run, then the
rewritten program's plus the original's outputs (held for the
comparison): :func:`.check.check_run_limit`.

Sizes are those of the inputs given (a dynamic-shape program's size
symbols are bound to them, or to ``sizes``); a symbol nothing binds takes
its hint (the example's size); a data-dependent size (``nonzero``'s rows:
no hint) the upper bound of its range, capped at the most elements of any
tensor before it (what such an op selects among), else its lower bound."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Dict, Iterable, List, Mapping, Optional, Tuple, Union

import torch
import torch.fx as fx
import torch.utils._pytree as pytree

KiB, MiB, GiB, TiB = 1 << 10, 1 << 20, 1 << 30, 1 << 40

#: the default's ceiling: min(16 GiB, half the physical memory)
DEFAULT_CAP = 16 * GiB

_UNITS = {"": 1, "K": KiB, "M": MiB, "G": GiB, "T": TiB}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> Optional[int]:
    """A size as ``--max-memory`` takes it: a number of bytes, or with a unit
    K, M, G or T (powers of 1024; ``8G``, ``1.5G``, ``512M``; a trailing
    ``B``/``iB`` is allowed: ``8GB``, ``8GiB``). ``0`` or ``none``: no limit
    (None). ValueError on anything else (saying what is accepted)."""
    s = str(text).strip()
    if s.lower() in ("none", "off"):
        return None
    m = _SIZE.match(s)
    if not m:
        raise ValueError(f"{text!r} is not a size: give bytes or a number with K, M, G or T "
                         "(e.g. 8G, 512M), or 0 / none for no limit")
    v = int(float(m.group(1)) * _UNITS[m.group(2).upper()])
    return v if v > 0 else None


def format_size(n: int) -> str:
    """``n`` bytes for a person: ``16.0 GiB``, ``512.0 MiB``, ``900 B``."""
    for unit, size in (("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def physical_memory() -> Optional[int]:
    """This machine's physical memory in bytes (None where the OS does not
    say)."""
    try:
        n = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
    return n if n > 0 else None


def default_limit() -> int:
    """The default ``--max-memory``: min(16 GiB, half the physical memory
    (``os.sysconf``); 16 GiB where that is unknown)."""
    phys = physical_memory()
    return DEFAULT_CAP if phys is None else min(DEFAULT_CAP, phys // 2)


def resolve_limit(max_memory: Union[int, str, None] = "default") -> Optional[int]:
    """``max_memory`` as the API takes it, in bytes or None (no limit):
    ``"default"`` -> :func:`default_limit`; None, 0 or ``"none"`` -> None;
    an int (bytes) as is; another string through :func:`parse_size`."""
    if max_memory is None:
        return None
    if isinstance(max_memory, str):
        if max_memory == "default":
            return default_limit()
        return parse_size(max_memory)
    if isinstance(max_memory, bool) or not isinstance(max_memory, int):
        raise TypeError(f"max_memory: {max_memory!r}: give bytes (an int), a size string "
                        "('8G'), 'default' or None")
    if max_memory < 0:
        raise ValueError(f"max_memory: {max_memory} is negative")
    return max_memory or None


@dataclass
class Estimate:
    """What one run needs (bytes; see the module docstring): ``total`` =
    ``inputs + weights + intermediates``; ``largest``: (what, bytes) of the
    single largest tensor (``"input x"``, ``"node add"``, ``"weight
    lin.weight"``); ``outputs``: the program's outputs (kept while a
    comparison runs the other program); ``peak_at``: the node at which the
    intermediates peak."""

    total: int
    largest: Tuple[str, int]
    inputs: int
    weights: int = 0
    intermediates: int = 0
    outputs: int = 0
    peak_at: str = ""

    def describe(self) -> str:
        """What the total is made of: ``inputs 4.0 GiB, weights 0 B,
        intermediates 4.0 GiB at node add; largest: input x, 4.0 GiB``."""
        at = f" at node {self.peak_at}" if self.peak_at and self.intermediates else ""
        return (f"inputs {format_size(self.inputs)}, weights {format_size(self.weights)}, "
                f"intermediates {format_size(self.intermediates)}{at}; largest: "
                f"{self.largest[0]}, {format_size(self.largest[1])}")


class MemoryLimitExceeded(ValueError):
    """A run would need more than the limit: ``what`` (``"the original
    program"``), ``estimate`` (:class:`Estimate`), ``limit`` (bytes),
    ``extra`` (bytes held besides the run: the original's outputs while the
    rewritten program runs). ``str()`` is one line;
    :meth:`line` words the limit as the caller names it (an option)."""

    def __init__(self, what: str, estimate: Estimate, limit: int, extra: int = 0):
        self.what, self.estimate, self.limit, self.extra = what, estimate, limit, extra
        super().__init__(self.line(f"the limit max_memory={format_size(limit)} "
                                   "(None lifts it)"))

    def __reduce__(self):  # picklable (a worker process may raise it)
        return type(self), (self.what, self.estimate, self.limit, self.extra)

    @property
    def needed(self) -> int:
        return self.estimate.total + self.extra

    def line(self, limit_text: str) -> str:
        """``{what} would need about {needed} to run on its sample inputs
        ({what it is made of}), over {limit_text}``."""
        held = (f", plus {format_size(self.extra)} of the original's outputs kept for the "
                "comparison" if self.extra else "")
        return (f"{self.what} would need about {format_size(self.needed)} to run on its sample "
                f"inputs ({self.estimate.describe()}{held}), over {limit_text}")


def check_limit(what: str, estimate: Estimate, limit: Optional[int], extra: int = 0) -> None:
    """Raise :class:`MemoryLimitExceeded` if ``estimate.total + extra``
    exceeds ``limit`` (None: no limit)."""
    if limit is not None and estimate.total + extra > limit:
        raise MemoryLimitExceeded(what, estimate, limit, extra)


# ------------------------------------------------------------------ the estimate

def _itemsize(dtype) -> int:
    n = getattr(dtype, "itemsize", None)
    if n is None:
        n = torch.empty((), dtype=dtype).element_size()
    return int(n)


def _bounds(d, env, cap: Optional[int]) -> Dict[object, int]:
    """Values for the symbols of ``d``'s expression no input bound: the
    shape environment's hint; a data-dependent size (no hint) its range's
    upper bound, capped at ``cap`` (the most elements of a tensor before
    it: ``nonzero``, ``masked_select`` select among those), else its lower
    bound."""
    out = {}
    for s in d.node.expr.free_symbols:
        v = None
        if env is not None:
            hints = getattr(env, "backed_var_to_val", None)
            if hints is None:
                hints = env.var_to_val
            v = hints.get(s)
            if v is None:
                v = (getattr(env, "unbacked_var_to_val", None) or {}).get(s)
            if v is None:
                v = _data_dependent(env.var_to_range.get(s), cap)
        out[s] = 1 if v is None else int(v)
    return out


def _data_dependent(r, cap: Optional[int]) -> Optional[int]:
    if r is None:
        return cap
    try:
        up = int(r.upper)
    except (TypeError, ValueError, OverflowError):  # int_oo
        up = None
    if up is not None and cap is not None:
        return min(up, cap)
    if up is not None or cap is not None:
        return up if up is not None else cap
    try:
        return max(int(r.lower), 0)
    except (TypeError, ValueError, OverflowError):
        return None


def _size(d, subs: Dict[object, int], cap: Optional[int] = None) -> int:
    """A dimension as an int: concrete, or a SymInt evaluated with ``subs``
    (symbols bound to the inputs' sizes), then hints (:func:`_bounds`).
    Never raises."""
    if isinstance(d, int):
        return d
    try:
        import sympy
        node = d.node
        expr = node.expr
        if subs:
            expr = sympy.sympify(expr.xreplace(subs))  # a plain int if wholly replaced
        if not expr.is_number:
            expr = sympy.sympify(expr.xreplace(_bounds(d, getattr(node, "shape_env", None),
                                                       cap)))
        return max(int(expr), 0)
    except Exception:  # noqa: BLE001 -- an expression sympy cannot evaluate
        h = getattr(getattr(d, "node", None), "hint", None)
        try:
            return max(int(h), 0) if h is not None else 1
        except Exception:  # noqa: BLE001
            return 1


def tensor_bytes(t, subs: Optional[Dict[object, int]] = None,
                 cap: Optional[int] = None) -> int:
    """``numel x itemsize`` of ``t`` (a tensor or a fake one, possibly with
    symbolic sizes, evaluated with ``subs`` and hints; ``cap``: see
    :func:`_bounds`): what it takes materialized, whatever its storage (an
    expanded view counts whole)."""
    return _numel(t, subs, cap) * _itemsize_of(t)


def _numel(t, subs: Optional[Dict[object, int]] = None, cap: Optional[int] = None) -> int:
    n = 1
    for d in t.shape:
        n *= _size(d, subs or {}, cap)
    return n


def _itemsize_of(t) -> int:
    try:
        return _itemsize(t.dtype)
    except Exception:  # noqa: BLE001 -- an exotic dtype
        return 8


def _vals(node: fx.Node):
    v = node.meta.get("val", node.meta.get("example_value"))
    return [t for t in pytree.tree_leaves(v) if isinstance(t, torch.Tensor)]


def _aliases(node: fx.Node) -> bool:
    """Whether ``node`` returns (part of) one of its inputs rather than new
    memory: a view, ``getitem`` of a multi-output node, an in-place op."""
    import operator
    if node.target is operator.getitem:
        return True
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return False
    return any(r.alias_info is not None for r in schema.returns)


def _split(program):
    """(graph module, user-input placeholder names or None for all,
    {placeholder name: weight tensor}, name of each weight)."""
    gm = getattr(program, "graph_module", None)
    sig = getattr(program, "graph_signature", None)
    weights: Dict[str, torch.Tensor] = {}
    if gm is None or sig is None:  # a GraphModule: its placeholders are the inputs
        gm = program
        for n in gm.graph.nodes:
            if n.op == "get_attr":
                t = _attr(gm, n.target, None)
                if isinstance(t, torch.Tensor):
                    weights[n.name] = t
        return gm, None, weights, {k: k for k in weights}
    state = getattr(program, "state_dict", {}) or {}
    consts = getattr(program, "constants", {}) or {}
    users, names = [], {}
    for spec in sig.input_specs:
        name = getattr(spec.arg, "name", None)
        kind = getattr(spec.kind, "name", str(spec.kind))
        if kind == "USER_INPUT":
            users.append(name)
            continue
        t = state.get(spec.target, consts.get(spec.target))
        if isinstance(t, torch.Tensor):
            weights[name] = t
            names[name] = spec.target
    for n in gm.graph.nodes:  # constants read with get_attr
        if n.op == "get_attr":
            t = _attr(gm, n.target, None)
            if isinstance(t, torch.Tensor):
                weights[n.name] = t
                names[n.name] = str(n.target)
    return gm, users, weights, names


def _attr(obj, target: str, *default):
    try:
        for part in str(target).split("."):
            obj = getattr(obj, part)
        return obj
    except AttributeError:
        if default:
            return default[0]
        raise


def _bind(metas: List, actual: List, subs: Dict[object, int]) -> None:
    """Bind each symbolic size of the placeholders' fake values (``metas``)
    to the matching size of the actual input."""
    for m, a in zip(metas, actual):
        if isinstance(m, torch.SymInt) and isinstance(a, int):
            if m.node.expr.is_Symbol:
                subs.setdefault(m.node.expr, a)
            continue
        if not (isinstance(m, torch.Tensor) and isinstance(a, torch.Tensor)):
            continue
        if m.dim() != a.dim():
            continue
        for d, v in zip(m.shape, a.shape):
            if isinstance(d, torch.SymInt) and d.node.expr.is_Symbol:
                subs.setdefault(d.node.expr, int(v))


def estimate_run_bytes(program, args: Optional[Iterable] = None,
                       kwargs: Optional[dict] = None,
                       sizes: Optional[Mapping[object, int]] = None) -> Estimate:
    """The memory one run of ``program`` (an ExportedProgram, or an
    ``fx.GraphModule`` whose nodes carry ``meta["val"]``) on ``args``/``kwargs``
    needs, from the shapes alone (nothing runs): see the module docstring.
    Without ``args`` the inputs are the placeholders' fake values (symbolic
    sizes at their hints); ``sizes`` (size symbol -> value, as
    :func:`.dynamic.other_sizes` gives them) sets a dynamic program's sizes
    instead of ``args`` (which are then ignored: nothing is materialized to
    size a run). Never raises on symbolic or data-dependent sizes."""
    gm, users, weights, wnames = _split(program)
    nodes = list(gm.graph.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    user_nodes = [n for n in placeholders if (users is None or n.name in users)
                  and n.name not in weights]
    subs: Dict[object, int] = {}
    if sizes:
        import sympy
        subs.update({k if isinstance(k, sympy.Basic) else sympy.Symbol(str(k)): int(v)
                     for k, v in sizes.items()})
        args = kwargs = None
    candidates: List[Tuple[str, int]] = []
    most = [0]  # the most elements of a tensor so far: caps a data-dependent size

    def nbytes(t) -> int:
        n = _numel(t, subs, most[0] or None)
        most[0] = max(most[0], n)
        return n * _itemsize_of(t)

    inputs = 0
    if args is not None or kwargs:
        flat = pytree.tree_leaves((tuple(args or ()), dict(kwargs or {})))
        metas = [n.meta.get("val") for n in user_nodes]
        if len(metas) == len(flat):
            _bind(metas, flat, subs)
            names = [n.name for n in user_nodes]
        else:  # tensors only, as the loader pairs them
            tens = [t for t in flat if isinstance(t, torch.Tensor)]
            tmeta = [m for m in metas if isinstance(m, torch.Tensor)]
            if len(tens) == len(tmeta):
                _bind(tmeta, tens, subs)
            names = [n.name for n in user_nodes
                     if isinstance(n.meta.get("val"), torch.Tensor)]
            flat = tens
        k = 0
        for i, a in enumerate(flat):
            if isinstance(a, torch.Tensor):
                b = nbytes(a)
                inputs += b
                candidates.append((f"input {names[i] if i < len(names) else f'#{k}'}", b))
                k += 1
    else:  # the placeholders' shapes (with ``sizes``, or hints)
        for n in user_nodes:
            for t in _vals(n):
                b = nbytes(t)
                inputs += b
                candidates.append((f"input {n.name}", b))

    wbytes = 0
    for name, t in weights.items():
        b = nbytes(t)
        wbytes += b
        candidates.append((f"weight {wnames.get(name, name)}", b))

    # the node outputs, alive from their node to their last use (or an alias's)
    root: Dict[fx.Node, fx.Node] = {}
    own: Dict[fx.Node, int] = {}
    last: Dict[fx.Node, int] = {}
    outputs = 0
    for i, n in enumerate(nodes):
        if n.op in ("placeholder", "get_attr"):
            continue
        if n.op == "output":
            for a in n.all_input_nodes:
                r = root.get(a)
                if r is not None:
                    last[r] = len(nodes)
                outputs += sum(nbytes(t) for t in _vals(a))
            continue
        for a in n.all_input_nodes:
            r = root.get(a)
            if r is not None:
                last[r] = max(last[r], i)
        src = next((a for a in n.all_input_nodes if a in root), None)
        if _aliases(n) and src is not None:
            root[n] = root[src]
            continue
        if _aliases(n):  # an alias of an input or a weight: nothing new
            continue
        try:
            b = sum(nbytes(t) for t in _vals(n))
        except Exception:  # noqa: BLE001 -- never fail on an odd value
            b = 0
        root[n], own[n], last[n] = n, b, i
        candidates.append((f"node {n.name}", b))
    frees: Dict[int, List[fx.Node]] = {}
    for r, at in last.items():
        frees.setdefault(at, []).append(r)
    live = peak = 0
    peak_at = ""
    for i, n in enumerate(nodes):
        if own.get(n):
            live += own[n]
            if live > peak:
                peak, peak_at = live, n.name
        for r in frees.get(i, ()):
            live -= own.get(r, 0)

    largest = max(candidates, key=lambda c: c[1], default=("nothing", 0))
    return Estimate(total=inputs + wbytes + peak, largest=largest, inputs=inputs,
                    weights=wbytes, intermediates=peak, outputs=outputs, peak_at=peak_at)


__all__ = ["Estimate", "MemoryLimitExceeded", "estimate_run_bytes", "check_limit",
           "parse_size", "format_size", "default_limit", "resolve_limit",
           "physical_memory", "tensor_bytes"]
