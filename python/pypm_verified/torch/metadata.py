"""The fake tensors (``meta["val"]``) of the FX nodes a rewrite builds.

:class:`MetaValues` holds a graph's fake mode (a new one when its metadata
has no fake tensor) and shape environment (dynamic shapes; None when every
size is static), and gives a new call its ``meta["val"]``
(:meth:`MetaValues.val`: a fake run of its target, its result's metadata
cached under its arguments'). The helpers around it: the cache's key
(:func:`meta_key`), a fake tensor's static metadata (:func:`tensor_meta`)
and a new one of given metadata (:func:`fake_of`), whether a root's value
may pass to its replacement (:func:`ownable_val`), shape comparison without
guards (:func:`same_sizes`)."""
from __future__ import annotations

import contextlib
from typing import Dict, Optional

import torch
import torch.fx as fx

from . import dynamic


class MetaValues:
    """The fake values of the graph of ``gm``: ``fake_mode`` (its metadata's,
    or a new ``FakeTensorMode``), ``shape_env`` (the shape environment of its
    symbolic sizes, None when static: :func:`.dynamic.shape_env_of`) and
    ``cache`` (:meth:`val`'s: argument metadata -> result's)."""

    def __init__(self, gm: fx.GraphModule):
        self.fake_mode = fake_mode_of([n.meta.get("val") for n in gm.graph.nodes])
        graph_mode = self.fake_mode  # the metadata's own (None: no fake tensor in it)
        if self.fake_mode is None:
            from torch._subclasses.fake_tensor import FakeTensorMode
            self.fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
        self.cache: Dict[tuple, tuple] = _RESULTS  # shared by the process's graphs
        # dynamic shapes: the shape environment of the symbolic sizes (None: static)
        self.shape_env = dynamic.shape_env_of(gm, graph_mode)

    def val(self, target, pos, kw, like=None):
        """The ``meta["val"]`` of a new call ``target(*pos, **kw)``: the target
        run on the arguments' fake values (raises what it raises).

        A fake run costs milliseconds (a composite like SDPA decomposes); the
        same call on arguments of the same metadata (every layer of a model)
        gives a result of the same metadata, so for a target returning one
        fresh (non-aliasing) tensor of static sizes, the result's metadata is
        kept under the arguments' (:func:`meta_key`; one cache for the
        process, see ``_RESULTS``) and a later call with
        the same key gets a new fake tensor of that metadata (~0.1 ms). A
        cached call gets ``like[0]`` itself instead, if given (``(fake
        tensor, its metadata)``, the metadata as the cache keeps it) and the
        metadata is the same, on a hit or after the run
        (:class:`.firing.Builder`: the matched root's value, for its
        replacement)."""
        key = meta_key(target, pos, kw)
        if key is not None:
            hit = self.cache.get(key)
            if hit is not None:
                if like is not None and like[1] == hit:
                    return like[0]
                return fake_of(self.fake_mode, hit)
        fake = fx.node.map_arg((tuple(pos), kw), lambda n: n.meta["val"])
        with self.fake_mode, _no_fake_cache(self.fake_mode, self.shape_env):
            val = target(*fake[0], **fake[1])
        if key is not None:
            meta = tensor_meta(val, self.fake_mode)
            if meta is not None:
                cache = self.cache
                cache[key] = meta
                if len(cache) > _RESULTS_SIZE:
                    try:  # the oldest entry (another thread's driver may be changing it)
                        del cache[next(iter(cache))]
                    except (RuntimeError, KeyError, StopIteration):
                        pass
                if like is not None and like[1] == meta:
                    return like[0]  # as on a hit: the run's own value is dropped
        return val


# MetaValues.val's cache, shared by every graph (and fake mode) of the
# process: a call's result metadata is a function of its key alone (the
# target, its arguments' metadata and constants, the default dtype and
# device, the grad mode), so the fake run of a replacement is paid once per
# process, not once per rewrite (the torch.compile backend and the Inductor
# pass rewrite graph after graph of the same layers); bounded, the oldest
# entry dropped first
_RESULTS: Dict[tuple, tuple] = {}
_RESULTS_SIZE = 4096


def fake_mode_of(vals) -> Optional[object]:
    """``torch._guards.detect_fake_mode`` of the tensors among ``vals`` (the
    graph's ``meta["val"]`` s), without its per-tensor pytree walk in the
    common case: no tracing context or active mode, every tensor a plain
    FakeTensor of one fake mode (~1 ms saved on 600 nodes)."""
    from torch._subclasses.fake_tensor import FakeTensor
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack
    tensors = [v for v in vals if isinstance(v, torch.Tensor)]
    if torch._guards.TracingContext.try_get() is None and not _get_current_dispatch_mode_stack():
        modes = {id(t.fake_mode): t.fake_mode for t in tensors if type(t) is FakeTensor}
        if len(modes) == 1 and all(type(t) is FakeTensor for t in tensors):
            return next(iter(modes.values()))
    return torch._guards.detect_fake_mode(tensors)


def same_sizes(a: torch.Tensor, b: torch.Tensor, decided: bool) -> bool:
    """Whether the shapes are equal, without guarding: symbolic sizes are
    equal only if ``decided`` (:meth:`.firing.Firing.same_shape` proved them
    equal for every admissible size, or the rule declined); in a static
    program a symbolic size (e.g. data-dependent) never equals a static one."""
    if not (a._has_symbolic_sizes_strides or b._has_symbolic_sizes_strides):
        return a.shape == b.shape  # int sizes only (the common case, ~20x faster)
    if a.dim() != b.dim():
        return False
    for x, y in zip(a.shape, b.shape):
        if dynamic.is_symbolic(x) or dynamic.is_symbolic(y):
            if decided:
                continue
            return False
        if int(x) != int(y):
            return False
    return True


_FRESH: Dict[object, bool] = {}  # target -> returns one tensor aliasing no input


def returns_fresh_tensor(target) -> bool:
    fresh = _FRESH.get(target)
    if fresh is None:
        schema = getattr(target, "_schema", None)
        fresh = (isinstance(target, torch._ops.OpOverload) and schema is not None
                 and not schema.is_mutable and len(schema.returns) == 1
                 and schema.returns[0].alias_info is None
                 and str(schema.returns[0].type) == "Tensor")
        _FRESH[target] = fresh
    return fresh


_SCALARS = (bool, int, float, str, type(None), torch.dtype, torch.device, torch.layout,
            torch.memory_format)


def _arg_key(a):
    """The part of a call's key an argument gives (None: not cacheable).
    Scalars carry their type (``2`` and ``2.0`` promote differently)."""
    if isinstance(a, fx.Node):
        v = a.meta.get("val")
        # one flag for "a size, stride or the offset is symbolic" (cheaper
        # than testing each); a layout other than strided has no strides
        if not isinstance(v, torch.Tensor) or v._has_symbolic_sizes_strides \
                or v.layout is not torch.strided or getattr(v, "constant", None) is not None:
            return None
        return ("T", v.shape, v.stride(), v.dtype, v.device, v.storage_offset(), v.requires_grad)
    if isinstance(a, (list, tuple)):
        ks = tuple(_arg_key(e) for e in a)
        return None if any(k is None for k in ks) else (type(a).__name__, ks)
    if isinstance(a, _SCALARS) and not isinstance(a, torch.SymInt):
        return (type(a).__name__, a)
    return None


def _no_fake_cache(fake_mode, shape_env):
    """Dynamic shapes: the fake run of a replacement without the fake-tensor
    dispatch cache. Filling a cache entry re-makes the output from its
    metadata (``empty.set_(storage, offset, sizes, strides)`` for a view:
    ``expand`` of a where's operands), whose contiguity flags ask size
    questions (``Eq(batch, 1)``) under ``suppress_guards``: torch does not
    record them, the output's sizes do not depend on them, but under
    ``error_on_new_guards`` they raise and would decline the rule. Static
    programs keep the cache."""
    if shape_env is None or not hasattr(fake_mode, "cache_enabled"):
        return contextlib.nullcontext()
    from torch._subclasses.fake_tensor import disable_fake_tensor_cache
    return disable_fake_tensor_cache(fake_mode)


def meta_key(target, pos, kw) -> Optional[tuple]:
    """The key of :meth:`MetaValues.val`'s cache for ``target(*pos, **kw)``,
    None when the call is not cached: a target that may alias or mutate, or
    returns other than one tensor; an argument that is not a tensor of
    static metadata or a plain constant; a tensor with known contents (a
    fake constant: an output's size could depend on it)."""
    if not returns_fresh_tensor(target):
        return None
    parts = []
    for a in list(pos) + [kw[k] for k in sorted(kw)]:
        k = _arg_key(a)
        if k is None:
            return None
        parts.append(k)
    # factories read the default dtype (and device: a call without a tensor
    # argument), requires_grad reads the grad mode
    device = None if any(p[0] == "T" for p in parts) else str(torch.get_default_device())
    return (target, tuple(sorted(kw)), tuple(parts), torch.get_default_dtype(), device,
            torch.is_grad_enabled())


def tensor_meta(val, fake_mode) -> Optional[tuple]:
    from torch._subclasses.fake_tensor import FakeTensor
    if type(val) is not FakeTensor or val.fake_mode is not fake_mode:
        return None
    shape, stride, off = tuple(val.shape), val.stride(), val.storage_offset()
    if not all(type(d) is int for d in shape + stride) or off != 0 \
            or val.is_conj() or val.is_neg() or val.layout is not torch.strided:
        return None
    return (shape, stride, off, val.dtype, val.device, val.requires_grad)


def ownable_val(node: fx.Node, fake_mode) -> Optional[tuple]:
    """``(val, metadata)`` of ``node``'s ``meta["val"]`` if a replacement of
    ``node`` may take that fake tensor as its own: a plain fake tensor of
    ``fake_mode`` with static metadata (:func:`tensor_meta`) and its own
    storage. A tensor shares storage only with what it is a view of (its
    inputs', directly or through them) or views of it (its users, which
    then view the replacement); ``_unsafe_view`` shares its input's storage
    without a view's ``_base``, so the storages are compared. Else None."""
    val = node.meta.get("val")
    meta = tensor_meta(val, fake_mode)
    if meta is None or val.constant is not None or val._base is not None:
        return None
    mine = val.untyped_storage()._cdata
    for a in node.all_input_nodes:
        v = a.meta.get("val")
        if isinstance(v, torch.Tensor) and v.layout is torch.strided and \
                v.untyped_storage()._cdata == mine:
            return None
    return val, meta


def fake_of(fake_mode, meta):
    """A new fake tensor (own storage, offset 0) of the metadata ``meta``."""
    from torch._subclasses.fake_tensor import FakeTensor
    shape, stride, _, dtype, device, requires_grad = meta
    with torch._C._DisableTorchDispatch():
        elem = torch.empty_strided(shape, stride, dtype=dtype, device="meta")
    out = FakeTensor(fake_mode, elem, device)
    if requires_grad:
        out.requires_grad_(True)
    return out


def describe(v) -> str:
    """A value's shape and dtype, for an error message."""
    if isinstance(v, torch.Tensor):
        return f"shape {tuple(v.shape)}, dtype {v.dtype}"
    return type(v).__name__


__all__ = ["MetaValues", "fake_mode_of", "same_sizes", "returns_fresh_tensor", "meta_key",
           "tensor_meta", "ownable_val", "fake_of", "describe"]
