"""PyTorch code in pattern and rule bodies: pattern variables (and the
values a rule body is given) behave as tensors.

``torch.*`` functions, ``torch.nn.functional.*``, Tensor methods and
Python operators called on them become the ATen call ``torch.export``
records for the same code (the export IR the importer reads, after
``run_decompositions({})``): the overload the Python binding picks,
keyword arguments placed, defaults filled in (the *full positional form*),
applied with the overload's label operator (:func:`.torch_labels.label_for`:
the library's declaration such as ``Mul``, else the operator made on first
sight for that overload, the one the importer labels its nodes with). So ``x * torch.sigmoid(x)`` is
``Mul(x, Sigmoid(x))`` and ``(x - mu).pow(2).mean(-1, keepdim=True)`` is
``Mean(PowScalar(Sub(x, mu, 1), 2), [-1], True, None)``.

How a call is lowered, all from torch's own tables:

* the callable names its ATen packet (``torch.sigmoid``, ``Tensor.sigmoid``
  and ``F.sigmoid`` are ``aten.sigmoid``; operators as :data:`DUNDERS`);
  a ``torch.nn.functional`` function written in Python is bound with its
  own signature first (its defaults applied) and its arguments matched to
  the schema's by name (``input`` is ``self``);
* the overload is the one whose schema the arguments fit best, as the
  Python binding chooses: a Python number in a ``Tensor`` argument is a
  conversion (``x * 2`` is ``aten.mul.Tensor``: the ``Scalar`` overloads of
  ``add``/``sub``/``mul``/``div`` have no Python binding, :data:`HIDDEN`),
  a ``Scalar`` argument takes it as it is (``x.pow(2)`` is
  ``aten.pow.Tensor_Scalar``); a pattern variable may stand for a tensor
  or a constant, so where the two readings pick different overloads the
  pattern matches either (an alternation);
* an overload that ``torch.export`` decomposes (a composite op it does not
  preserve, ``torch._export.utils._is_preservable_cia_op``) has no faithful
  lowering in a pattern and is refused, naming the function, except
  ``reshape`` (:data:`SPECIAL`): ``view`` of the input, or
  ``_unsafe_view`` of its contiguous ``clone`` when it cannot be viewed, as
  export decomposes it. Rule bodies build such ops as they are (they run);
* what the Python binding or export fills in from elsewhere than the
  schema is filled in the same way: ``pin_memory=False`` of factory
  functions (``torch.ones_like``), ``cudnn_enable=False`` of
  ``F.layer_norm`` (export traces with cuDNN off);
* an int index picks a result of an op with several (``x.max(-1)[0]``, an
  ``operator.getitem``); indexing a tensor is refused;
* a cast to a dtype (``x.to(torch.float16)``, ``x.half()``, :data:`_CASTS`)
  is ``_to_copy(x, dtype=...)`` or, where export records nothing (``x``
  already has the dtype), ``x`` itself: the pattern matches either.

In a pattern body the result is a pattern term; in a rule body, a node the
rule's builder adds (:mod:`.building`). Values of a rule body get this
behaviour from :class:`TensorCode` (the PyTorch driver's values derive from
it). Anything else raises a :class:`~pypm_verified.errors.PatternError`
naming the function, when the pattern is traced (at its first use) or the
rule fires.
"""
from __future__ import annotations

import inspect
import re
from typing import Dict, List, Optional, Tuple

import torch

from .. import core
from . import building
from .symbolic import SymTerm, TensorCode, Var
from .torch_labels import TORCH_TO_PM, label_for, list_op, schema_types
from .trace import Unlocated

__all__ = ["TensorCode", "call", "dunder", "method", "getitem", "reversed_axes",
           "pattern_constant", "DUNDERS", "HIDDEN", "SPECIAL", "T_RANKS"]

aten = torch.ops.aten

#: Python operators -> (ATen packet, argument order): ``"r"`` swaps the two
#: operands (``2 - x`` is ``rsub(x, 2)``, as ``Tensor.__rsub__``)
DUNDERS: Dict[str, Tuple[str, str]] = {
    "__add__": ("add", ""), "__radd__": ("add", ""),
    "__sub__": ("sub", ""), "__rsub__": ("rsub", ""),
    "__mul__": ("mul", ""), "__rmul__": ("mul", ""),
    "__truediv__": ("div", ""),
    "__matmul__": ("matmul", ""), "__rmatmul__": ("matmul", "r"),
    "__pow__": ("pow", ""), "__rpow__": ("pow", "r"),
    "__neg__": ("neg", ""), "__abs__": ("abs", ""), "__invert__": ("bitwise_not", ""),
    "__and__": ("__and__", ""), "__rand__": ("__and__", ""),  # aten.__and__.Tensor
    "__xor__": ("__xor__", ""), "__rxor__": ("__xor__", ""),
    "__or__": ("__or__", ""), "__ror__": ("__or__", ""),
    "__eq__": ("eq", ""), "__ne__": ("ne", ""), "__lt__": ("lt", ""), "__le__": ("le", ""),
    "__gt__": ("gt", ""), "__ge__": ("ge", ""),
}

#: overloads without a Python binding (torchgen's SKIP_PYTHON_BINDINGS_SIGNATURES):
#: a number there is wrapped into the ``Tensor`` overload
HIDDEN = frozenset({"add.Scalar", "sub.Scalar", "mul.Scalar", "div.Scalar",
                    "div.Scalar_mode"})

#: overloads tried first where several fit equally (the Python binding's order)
_PREFER = {"var": ("dim", "correction"), "std": ("dim", "correction"),
           "var_mean": ("dim", "correction"), "std_mean": ("dim", "correction")}

#: composite ops export decomposes, with the lowering a pattern gets
SPECIAL = ("reshape",)

#: arguments of ``torch.nn.functional`` functions that no schema has
_DROPPED = frozenset({"_stacklevel"})

#: schema arguments a ``torch.nn.functional`` function fills from
#: ``torch.backends.cudnn.enabled``, which ``torch.export`` sets to False
#: while it traces (``F.layer_norm`` exports with ``cudnn_enable=False``)
_BACKEND_FLAGS = frozenset({"cudnn_enable", "cudnn_enabled"})

_NUMBER = (int, float)


# ------------------------------------------------------------------ values


def _is_symbolic(v) -> bool:
    return isinstance(v, SymTerm)


def _const_value(v):
    """The Python value of a rule body's constant value, else ``v``."""
    if isinstance(v, TensorCode) and getattr(v, "is_const", False):
        return v.value
    return v


def _kind(v) -> str:
    """What a value is for overload resolution: tensor, var (a pattern
    variable: a tensor or a constant), none, bool, int, float, str, dtype,
    memfmt, layout, device, list, other."""
    if isinstance(v, Var):
        return "var"
    if isinstance(v, SymTerm):
        return "tensor"
    if isinstance(v, TensorCode):
        if getattr(v, "is_const", False):
            return _kind(v.value)
        return "tensor"
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, torch.SymInt)):  # a size of a program with dynamic shapes
        return "int"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        return "str"
    if isinstance(v, torch.dtype) or isinstance(v, core.DType):
        return "dtype"
    if isinstance(v, torch.memory_format):
        return "memfmt"
    if isinstance(v, torch.layout):
        return "layout"
    if isinstance(v, torch.device):
        return "device"
    if isinstance(v, (list, tuple)):
        return "list"
    if isinstance(v, torch.Tensor):
        return "torch.Tensor"
    from ..core.graph import Node
    if isinstance(v, Node):
        return "tensor"
    return "other"


_ALIAS = re.compile(r"\([a-z][^)]*\)")


def _types(schema) -> List[str]:
    """The schema's argument types as spelled (``Tensor?``, ``int[1]?``,
    ``ScalarType?``), alias annotations removed."""
    ts = schema_types(schema) or [str(a.type) for a in schema.arguments]
    return [_ALIAS.sub("", t) for t in ts]


_CONV = 1  # the cost of a number wrapped into a Tensor argument


def _fit(t: str, v) -> Optional[Tuple[int, bool, object]]:
    """``(cost, read a variable as a constant, converted value)`` of ``v`` in
    an argument of type ``t``, or None when it does not fit."""
    opt = t.endswith("?")
    base = t[:-1] if opt else t
    k = _kind(v)
    if k == "none":
        return (0, False, None) if opt else None
    if base == "Tensor":
        if k in ("tensor", "var"):
            return 0, False, v
        if k in ("bool", "int", "float"):
            return _CONV, False, v
        return None
    if base == "Scalar":
        if k in ("bool", "int", "float"):
            return 0, False, v
        return (0, True, v) if k == "var" else None
    if base in ("int", "SymInt"):
        return (0, False, v) if k == "int" else None
    if base == "float":
        return (0, False, v) if k in ("int", "float") else None
    if base == "bool":
        return (0, False, v) if k == "bool" else None
    if base in ("str", "Dimname"):
        return (0, False, v) if k == "str" else None
    if base == "ScalarType":
        return (0, False, v) if k == "dtype" else None
    if base == "MemoryFormat":
        return (0, False, v) if k == "memfmt" else None
    if base == "Layout":
        return (0, False, v) if k == "layout" else None
    if base == "Device":
        return (0, False, v) if k in ("device", "str") else None
    m = re.fullmatch(r"(\w+)\[\d*\]", base)
    if m:
        elem = m.group(1)
        items = list(_const_value(v)) if k == "list" else None
        if elem in ("int", "SymInt"):
            if k == "int":
                return 0, False, [v]
            if items is not None and all(_kind(e) == "int" for e in items):
                return 0, False, items
            return None
        if elem == "float":
            if items is not None and all(_kind(e) in ("int", "float") for e in items):
                return 0, False, items
            return None
        if elem == "bool":
            if items is not None and all(_kind(e) == "bool" for e in items):
                return 0, False, items
            return None
        if elem == "Tensor":
            if items is not None and items and all(_kind(e) in ("tensor", "var") for e in items):
                return 0, False, _TensorList(items)
            return None
    return None


class _TensorList(list):
    """A list argument of tensors (a ``list<n>`` node in a pattern)."""


# -------------------------------------------------------------- resolution


class _Call:
    """One overload's binding of a call: ``values`` (full positional form),
    ``cost`` and ``var_scalar`` (a pattern variable read as a constant)."""

    def __init__(self, overload, values, cost, var_scalar):
        self.overload = overload
        self.values = values
        self.cost = cost
        self.var_scalar = var_scalar


_CANDIDATES: Dict[str, object] = {}
_TYPES: Dict[object, List[str]] = {}


def _candidates(packet_name: str):
    """The functional overloads of ``aten.<packet_name>`` with a Python
    binding, in the binding's order of preference (None: no such packet);
    computed once per packet."""
    if packet_name not in _CANDIDATES:
        _CANDIDATES[packet_name] = _find_candidates(packet_name)
    return _CANDIDATES[packet_name]


def _find_candidates(packet_name: str):
    packet = getattr(aten, packet_name, None)
    if packet is None or not isinstance(packet, torch._ops.OpOverloadPacket):
        return None
    names = list(packet.overloads())
    prefer = _PREFER.get(packet_name, ())
    names.sort(key=lambda n: prefer.index(n) if n in prefer else len(prefer))
    out = []
    for n in names:
        if f"{packet_name}.{n}" in HIDDEN or n.endswith("out"):
            continue
        try:
            o = getattr(packet, n)
        except RuntimeError:  # an overload of TorchScript's only (aten::mul.int)
            continue
        schema = o._schema
        if schema.is_mutable or any(a.is_out for a in schema.arguments):
            continue
        if not any("Tensor" in str(r.type) for r in schema.returns):
            continue  # on Python numbers (aten::tanh.Scalar): TorchScript's, not the dispatcher's
        out.append(o)
    return out


def _bind(overload, pos, named, python: bool = True) -> Optional[_Call]:
    schema = overload._schema
    params = schema.arguments
    types = _TYPES.get(overload)
    if types is None:
        types = _TYPES[overload] = _types(schema)
    positional = [i for i, a in enumerate(params) if not a.kwarg_only]
    pos = list(pos)
    if len(pos) > len(positional) and positional:
        last = positional[-1]
        if re.fullmatch(r"(int|SymInt)\[\d*\]\??", types[last]) and \
                all(_kind(v) == "int" for v in pos[len(positional) - 1:]):
            pos = pos[:len(positional) - 1] + [list(pos[len(positional) - 1:])]  # view(2, 4, 8)
    if len(pos) > len(positional):
        return None
    given: Dict[int, object] = dict(zip(positional, pos))
    index = {a.name: i for i, a in enumerate(params)}
    for k, v in named.items():
        i = index.get(k)
        if i is None and k == "input":
            i = index.get("self")
        if i is None or i in given:
            return None
        given[i] = v
    cost, var_scalar, values = 0, False, []
    for i, a in enumerate(params):
        if i in given:
            f = _fit(types[i], given[i])
            if f is None:
                return None
            cost += f[0]
            var_scalar = var_scalar or f[1]
            values.append(f[2])
        elif python and a.name == "pin_memory" and types[i] == "bool?":
            values.append(False)  # the Python binding of factory functions passes False
        elif a.has_default_value():
            values.append(a.default_value)
        else:
            return None
    return _Call(overload, values, cost, var_scalar)


def _resolve(fname: str, packet_name: str, pos, named, building_mode: bool,
             python: bool = True) -> List[_Call]:
    """The overload(s) the call binds to: one, or two (a pattern variable
    read as a tensor, then as a constant)."""
    cands = _candidates(packet_name)
    if cands is None:
        raise Unlocated(f"{fname}: no ATen operator aten.{packet_name}, so no lowering; write "
                        "the ATen ops it computes with the operators of pypm_verified.torch.ops")
    for v in list(pos) + list(named.values()):
        if _kind(v) == "torch.Tensor":
            raise Unlocated(f"{fname}: a torch.Tensor argument in a pattern or rule body (only "
                            "pattern variables, the rule's values and Python constants are)")
    calls = [c for c in (_bind(o, pos, named, python) for o in cands) if c is not None]
    if not calls:
        if not _candidates(packet_name) and any(
                getattr(aten, packet_name).overloads()):
            raise Unlocated(f"{fname}: in-place or out= only; use the functional form")
        raise Unlocated(f"{fname}: the arguments fit no overload of aten.{packet_name} "
                        f"({_describe(pos, named)}); its overloads: "
                        + "; ".join(str(o._schema) for o in cands[:6]))
    best = min(c.cost for c in calls)
    calls = [c for c in calls if c.cost == best]
    as_tensor = [c for c in calls if not c.var_scalar]
    as_const = [c for c in calls if c.var_scalar]
    chosen = ([as_tensor[0]] if as_tensor else []) + ([as_const[0]] if as_const else [])
    return chosen if not building_mode else chosen[:1]


def _describe(pos, named) -> str:
    parts = [_kind(v) for v in pos] + [f"{k}={_kind(v)}" for k, v in named.items()]
    return ", ".join(parts) or "no arguments"


def _preserved(overload) -> bool:
    """Whether ``torch.export`` (with ``run_decompositions({})``) keeps the
    overload as it is."""
    try:
        from torch._export.utils import _is_cia_op, _is_preservable_cia_op
    except ImportError:  # pragma: no cover - another torch
        return True
    return not _is_cia_op(overload) or _is_preservable_cia_op(overload)


# ----------------------------------------------------------------- lowering


def pattern_constant(v):
    """A constant of torch's as a pattern constant, as the importer reads
    it: a dtype as the DSL's (``pm.f32``), a memory format, layout or device
    by its ``repr``; lists elementwise; other values unchanged."""
    if isinstance(v, torch.dtype):
        return TORCH_TO_PM.get(v) or repr(v)
    if isinstance(v, (torch.memory_format, torch.layout, torch.device)):
        return repr(v)
    if isinstance(v, (list, tuple)) and not isinstance(v, _TensorList):
        return [pattern_constant(e) for e in v]
    return v


def _apply(overload, values, building_mode: bool):
    op = label_for(overload)  # the library's declaration, once the PyTorch layer is loaded
    if building_mode:
        return op(*values)
    vals = []
    for v in values:
        if isinstance(v, _TensorList):
            v = list_op(len(v))(*[pattern_constant(e) for e in v])
        else:
            v = pattern_constant(v)
        vals.append(v)
    return op(*vals)


def _alt(terms):
    if len(terms) == 1:
        return terms[0]
    p = terms[-1].core
    for t in reversed(terms[:-1]):
        p = core.PAlt(t.core, p)
    return SymTerm(p, " | ".join(t.text for t in terms))


def _lower(fname: str, packet_name: str, pos, named, python: bool = True):
    """The call of ``aten.<packet_name>`` (``python``: as the Python binding
    makes it, e.g. ``pin_memory=False``; else as export's own decompositions
    do): a pattern term, or a built node in a rule body."""
    flat = list(pos) + list(named.values())
    for v in list(flat):
        if isinstance(v, (list, tuple)):
            flat.extend(v)
    pattern_mode = any(_is_symbolic(v) for v in flat)
    building_mode = not pattern_mode and building.current_builder() is not None
    if not pattern_mode and not building_mode:
        raise Unlocated(f"{fname}: PyTorch code on pattern variables builds a pattern only "
                        "inside a @pm.pattern body, and nodes only inside a @pm.rule body "
                        "that is firing")
    calls = _resolve(fname, packet_name, pos, named, building_mode, python)
    out = []
    for c in calls:
        name = c.overload.name().split("::")[-1]
        if building_mode:
            return _apply(c.overload, c.values, True)
        if name in SPECIAL:
            out.append(_special(name, c))
            continue
        if not _preserved(c.overload):
            raise Unlocated(
                f"{fname}: torch.export decomposes {c.overload} (a composite op whose "
                "decomposition depends on the tensor, or that may alias it), so it has no "
                "faithful lowering in a pattern; write the ATen ops export produces with the "
                "operators of pypm_verified.torch.ops")
        out.append(_apply(c.overload, c.values, False))
    return _alt(out)


def _special(name: str, c: _Call):
    if name == "reshape":  # export: view when the input can be viewed, else clone + _unsafe_view
        x, shape = c.values
        viewed = _apply(aten.view.default, [x, shape], False)
        copied = _apply(aten.clone.default, [x, torch.contiguous_format], False)
        return _alt([viewed, _apply(aten._unsafe_view.default, [copied, shape], False)])
    raise AssertionError(name)  # pragma: no cover


def _fname(func) -> str:
    mod = getattr(func, "__module__", None) or ""
    qual = getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))
    if qual.startswith(("TensorBase.", "Tensor.")):
        return "Tensor." + qual.split(".", 1)[1]
    if mod.startswith("torch.nn.functional") or mod == "torch._C._nn":
        return f"torch.nn.functional.{getattr(func, '__name__', qual)}"
    return f"torch.{getattr(func, '__name__', qual)}"


def call(func, args, kwargs):
    """Lower the torch callable ``func`` applied to ``args``/``kwargs``
    (what ``__torch_function__`` receives): a pattern term in a pattern
    body, a built node in a rule body."""
    kwargs = dict(kwargs or {})
    fname = _fname(func)
    name = getattr(func, "__name__", None)
    if name is None or not isinstance(name, str):
        raise Unlocated(f"{fname!s}: not supported on pattern variables")
    if name in DUNDERS:
        return dunder(name, *args)
    if name in _CASTS and _fname(func).startswith("Tensor."):
        return _cast(fname, name, args, kwargs)
    if name.endswith("_") and not name.endswith("__"):
        raise Unlocated(f"{fname}: in-place operations are not supported; use the functional "
                        f"form {name[:-1]}")
    if inspect.isfunction(func):  # written in Python (torch.nn.functional, torch/_tensor.py)
        try:
            sig = inspect.signature(func)
            bound = sig.bind(*args, **kwargs)
        except (TypeError, ValueError) as e:
            raise Unlocated(f"{fname}: {e}") from None
        bound.apply_defaults()
        params = list(sig.parameters.values())
        named = {}
        packet = getattr(aten, name, None)
        if not isinstance(packet, torch._ops.OpOverloadPacket):
            raise Unlocated(f"{fname}: no ATen operator aten.{name}, so no lowering; write the "
                            "ATen ops it computes with the operators of pypm_verified.torch.ops")
        schema_names = set()
        for o in _candidates(name):
            schema_names.update(a.name for a in o._schema.arguments)
        for p in params:
            v = bound.arguments.get(p.name)
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                if v:
                    raise Unlocated(f"{fname}: variadic arguments are not supported")
                continue
            if p.name == "inplace":
                if v:
                    raise Unlocated(f"{fname}: inplace=True is not supported; use "
                                    "inplace=False")
                continue
            if p.name in _DROPPED:
                continue
            key = p.name
            if key not in schema_names:
                if key == "input" and "self" in schema_names:
                    key = "self"
                elif p.default is not inspect.Parameter.empty and v is p.default and v is None:
                    continue
                else:
                    raise Unlocated(
                        f"{fname}: its argument {p.name!r} has no counterpart in aten.{name}, "
                        "so no faithful lowering; write the ATen ops it computes with the "
                        "operators of pypm_verified.torch.ops")
            named[key] = v
        for flag in _BACKEND_FLAGS & schema_names:
            named.setdefault(flag, False)  # torch.export turns cuDNN off while it traces
        return _lower(fname, name, (), named)
    return _lower(fname, name, args, kwargs)


#: Tensor methods that cast: the dtype they cast to (``to``/``type``: their argument)
_CASTS = {"to": None, "type": None, "float": torch.float32, "half": torch.float16,
          "bfloat16": torch.bfloat16, "double": torch.float64}


def _cast(fname: str, name: str, args, kwargs):
    """``x.to(dtype)``, ``x.float()``, ...: export records ``_to_copy(x,
    dtype=...)`` where the dtype changes and nothing where it does not, so a
    pattern matches either (the cast first); a rule body casts only a value
    of another dtype."""
    x, rest = args[0], list(args[1:])
    dtype = _CASTS[name]
    if dtype is None:
        kw = dict(kwargs)
        if rest and isinstance(rest[0], torch.dtype) and "dtype" not in kw:
            dtype = rest.pop(0)
        else:
            dtype = kw.pop("dtype", None)
        if not isinstance(dtype, torch.dtype) or rest or kw:
            raise Unlocated(f"{fname}: only a cast to a dtype ({fname}(torch.float16)) has a "
                            "faithful lowering (to a device, or like another tensor, does not)")
    elif rest or kwargs:
        raise Unlocated(f"{fname}: takes no arguments here")
    if _is_symbolic(x):
        copied = _lower(fname, "_to_copy", (x,), {"dtype": dtype}, python=False)
        return _alt([copied, x])
    if building.current_builder() is not None and isinstance(x, TensorCode):
        if getattr(x, "torch_dtype", None) == dtype:
            return x
        return _lower(fname, "_to_copy", (x,), {"dtype": dtype}, python=False)
    raise Unlocated(f"{fname}: PyTorch code builds a pattern only inside a @pm.pattern body, "
                    "and nodes only inside a @pm.rule body that is firing")


def dunder(name: str, *args):
    """A Python operator (``x * y``: ``dunder("__mul__", x, y)``)."""
    if name == "__rtruediv__":  # Tensor.__rtruediv__: reciprocal(self) * other
        x, other = args
        return dunder("__mul__", _lower("Tensor.__rtruediv__", "reciprocal", (x,), {}), other)
    packet, order = DUNDERS[name]
    if order == "r":
        args = tuple(reversed(args))
    return _lower(f"Tensor.{name}", packet, args, {})


_NOT_METHODS = frozenset({
    "numel", "item", "tolist", "cpu", "cuda", "numpy", "data_ptr", "storage",
    "untyped_storage", "type", "register_hook", "backward", "size", "dim", "stride",
    "element_size", "nelement", "is_contiguous", "is_floating_point", "get_device",
    "apply_", "map_", "dim_order", "is_complex", "is_signed", "is_set_to",
})


def method(obj, name: str):
    """``obj.name`` for a Tensor method ``name`` (bound: calling it lowers
    ``torch.Tensor.name``), or AttributeError."""
    if name.startswith("_") or name in _NOT_METHODS:
        raise AttributeError(name)
    f = getattr(torch.Tensor, name, None)
    if f is None or not callable(f) or isinstance(inspect.getattr_static(torch.Tensor, name),
                                                 (property,)):
        raise AttributeError(name)

    def bound(*args, **kwargs):
        return call(f, (obj,) + args, kwargs)

    bound.__name__ = name
    return bound


def _multi_output(v) -> bool:
    """Whether ``v`` (a pattern term or a rule body's value) is a tuple of
    tensors (``max.dim``, ``split``): indexing it is ``operator.getitem``."""
    from .operators import OpTerm
    if isinstance(v, OpTerm):
        targets = getattr(v.op, "torch_targets", ())
        schema = getattr(targets[0], "_schema", None) if targets else None
        return schema is not None and (len(schema.returns) > 1 or any(
            str(r.type).startswith("List[") for r in schema.returns))
    meta = getattr(v, "meta", None)
    return isinstance(v, TensorCode) and not isinstance(v, SymTerm) \
        and isinstance(meta, (tuple, list))


def getitem(obj, index):
    """``obj[index]``: the ``index``-th result of an op with several
    (``x.max(-1)[0]``, ``operator.getitem`` as in the exported graph).
    Indexing a tensor is refused (export lowers it to ``select``/``slice``
    by the index's form)."""
    import operator
    if isinstance(index, int) and not isinstance(index, bool) and _multi_output(obj):
        return label_for(operator.getitem)(obj, index)
    raise Unlocated(f"indexing {obj!r}[{index!r}]: indexing a tensor is not supported in "
                    "PyTorch code in a pattern or rule; use torch.select, torch.narrow, "
                    "x.unbind or the operator Slice (an int index picks a result of "
                    "an op with several, such as x.max(-1)[0])")


#: the ranks a pattern's ``x.T`` matches at
T_RANKS = range(1, 7)


def reversed_axes(x):
    """``x.T``: ``permute(x, [r-1, ..., 0])``, as export records it; the
    permutation spells the rank, so a pattern is the alternation over the
    ranks of :data:`T_RANKS`, and a rule body reads the value's rank."""
    if _is_symbolic(x):
        return _alt([_lower("Tensor.T", "permute", (x, list(reversed(range(r)))), {})
                     for r in T_RANKS])
    rank = getattr(x, "rank", None)
    if not isinstance(rank, int):
        raise Unlocated(f"Tensor.T of {x!r}: its rank is unknown")
    return _lower("Tensor.T", "permute", (x, list(reversed(range(rank)))), {})
