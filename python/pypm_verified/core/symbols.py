"""The process-wide symbol interner.

Operators (by identity) and constant keys are mapped to dense ints ``>= 0``;
graphs and patterns share these ids, so a pattern's ``PApp(f, ...)`` matches a
node whose label is ``f``.
"""
from __future__ import annotations

import math
import os
import threading
from typing import Any, Dict, List, Tuple

_lock = threading.Lock()
_ids: Dict[Any, int] = {}
_keys: List[Any] = []


def _after_fork_in_child() -> None:
    # a thread of the parent holding the lock does not exist in the child; a
    # key it was interning is in _keys at worst, unused (interned again anew)
    global _lock
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def const_key(value) -> Tuple:
    """Key of a constant leaf: numbers by value (``2 == 2.0``; ``-0.0`` is not
    ``0.0``, every NaN is one), bools, strings
    and None separately; lists and tuples of constants by their elements (a
    list and a tuple with equal elements are one key); dtypes
    (:class:`~pypm_verified.core.DType`) by code. Raises TypeError for other
    types."""
    if value is None:
        return ("none",)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        if isinstance(value, float):
            if math.isnan(value):
                return ("num", "nan")
            if value == 0 and math.copysign(1.0, value) < 0:
                return ("num", "-0.0")  # equal to 0.0, but another constant
        return ("num", value)
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, (list, tuple)):
        return ("seq", tuple(const_key(v) for v in value))
    if type(value).__name__ == "DType" and hasattr(value, "code"):
        return ("dtype", value.code)
    raise TypeError(
        f"unsupported constant {value!r} of type {type(value).__name__} "
        "(expected int, float, bool, str, None, a dtype, or a list/tuple of these)")


def is_constant(value) -> bool:
    """True for values usable as constant leaves."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(is_constant(v) for v in value)
    return type(value).__name__ == "DType" and hasattr(value, "code")


def intern(key) -> int:
    """Symbol id of ``key`` (an operator object or a constant key tuple)."""
    sid = _ids.get(key)
    if sid is not None:
        return sid
    with _lock:
        sid = _ids.get(key)
        if sid is None:
            sid = len(_keys)
            _keys.append(key)
            _ids[key] = sid
        return sid


def const_symbol(value) -> int:
    """Symbol id of the constant leaf ``value``."""
    return intern(const_key(value))


def lookup(sid: int):
    """The operator object or constant key interned as ``sid``."""
    return _keys[sid]


def describe(sid: int) -> str:
    """Readable name of a symbol, for reprs."""
    try:
        key = _keys[sid]
    except (IndexError, TypeError):
        return f"#{sid}"
    if isinstance(key, tuple):
        if key[0] == "none":
            return "None"
        if key[0] == "input":
            return f"input {key[1]!r}"
        if key[0] in ("seq", "dtype"):
            return repr(key)
        return key[1] if key[0] == "num" and key[1] in ("nan", "-0.0") else repr(key[1])
    return getattr(key, "name", repr(key))


# ------------------------------------------------------------ operator classes

class OpClass(str):
    """An operator class name (``pm.opclass("unary_pointwise")``), interned:
    ``code`` is the value of the OPCLASS symbol attribute in graphs and the
    constant guards compare it with. Equal to its name as a string."""

    __slots__ = ("code",)

    def __repr__(self) -> str:
        return f"pm.opclass({str.__repr__(self)})"


_classes: Dict[str, OpClass] = {}


def opclass_name(code: int) -> str:
    """The name of the operator class with ``code`` (the code itself, as a
    string, if no class has it)."""
    for c in list(_classes.values()):
        if c.code == code:
            return str(c)
    return str(code)


def opclass(name: str) -> OpClass:
    """The interned operator class ``name`` (codes are 1, 2, … in order of
    first use, per process)."""
    if not isinstance(name, str):
        raise TypeError(f"an operator class is named by a str, not {name!r}")
    c = _classes.get(name)
    if c is None:
        with _lock:
            c = _classes.get(name)
            if c is None:
                c = OpClass(name)
                c.code = len(_classes) + 1
                _classes[str(name)] = c
    return c


def opclasses() -> Dict[str, OpClass]:
    """The operator classes interned so far, by name."""
    with _lock:
        return dict(_classes)
