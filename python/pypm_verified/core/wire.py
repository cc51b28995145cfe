"""Wire-level tables shared by the calculus, the binary format
(docs/internals/format.md) and the engines: attribute ids, the bounds on attribute
values and guard arithmetic, and the element types (dtype codes)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple, Union

# ---------------------------------------------------------------- attributes

RANK = 0
DTYPE = 1
OPCLASS = 2
SHAPE_BASE = 100
SHAPE_NEG_BASE = 200
MAX_RANK = 64

# Attribute values and guard constants lie in [VALUE_MIN, VALUE_MAX]; guard
# arithmetic is exact and bounded (Declarative.option_map2): + and - are
# known only when both operands are below ADD_BOUND in magnitude, * only when
# both are below MUL_BOUND.
VALUE_MIN, VALUE_MAX = -(1 << 62) + 1, (1 << 62) - 1
ADD_BOUND = 1 << 61
MUL_BOUND = 1 << 31


def shape_attr(i: int) -> int:
    """Attribute id of ``shape[i]``; negative ``i`` counts from the end."""
    if not isinstance(i, int) or isinstance(i, bool):
        raise TypeError(f"shape index must be an int, not {type(i).__name__}")
    if 0 <= i < MAX_RANK:
        return SHAPE_BASE + i
    if -MAX_RANK <= i < 0:
        return SHAPE_NEG_BASE + (-i - 1)
    raise IndexError(f"shape index {i} out of range [-{MAX_RANK}, {MAX_RANK})")


def attr_name(attr: int) -> str:
    """Readable name of an attribute id (for reprs and messages)."""
    if attr == RANK:
        return "rank"
    if attr == DTYPE:
        return "dtype"
    if attr == OPCLASS:
        return "op_class"
    if SHAPE_BASE <= attr < SHAPE_BASE + MAX_RANK:
        return f"shape[{attr - SHAPE_BASE}]"
    if SHAPE_NEG_BASE <= attr < SHAPE_NEG_BASE + MAX_RANK:
        return f"shape[{-(attr - SHAPE_NEG_BASE) - 1}]"
    return f"attr{attr}"


# -------------------------------------------------------------------- dtypes


@dataclass(frozen=True)
class DType:
    """An element type; ``code`` is the value of the DTYPE attribute."""

    name: str
    code: int

    def __repr__(self) -> str:
        return f"pm.{self.name if self.name != 'bool' else 'bool_'}"


f32 = DType("f32", 1)
f16 = DType("f16", 2)
bf16 = DType("bf16", 3)
f64 = DType("f64", 4)
i8 = DType("i8", 5)
i16 = DType("i16", 6)
i32 = DType("i32", 7)
i64 = DType("i64", 8)
u8 = DType("u8", 9)
bool_ = DType("bool", 10)

DTYPES: Tuple[DType, ...] = (f32, f16, bf16, f64, i8, i16, i32, i64, u8, bool_)
DTYPE_BY_CODE = {d.code: d for d in DTYPES}
DTYPE_BY_NAME = {d.name: d for d in DTYPES}


def as_dtype(d: Union[DType, str]) -> DType:
    """Accept a :class:`DType` or its name (``"f32"``, ``"bool"``)."""
    if isinstance(d, DType):
        return d
    if isinstance(d, str) and d in DTYPE_BY_NAME:
        return DTYPE_BY_NAME[d]
    raise ValueError(f"unknown dtype {d!r}; expected one of {sorted(DTYPE_BY_NAME)}")
