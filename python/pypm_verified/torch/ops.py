"""PyPM operators for common ATen ops, bound to their torch targets.

Each operator takes the op's arguments in *full positional form* (every
argument of the schema, in order, keyword-only ones included), which is how
the importer (:mod:`pypm_verified.torch`) presents calls: a call that spelled
a default argument and one that left it out are the same term. So
``Softmax(x, -1, None)`` matches ``torch.softmax(x, -1)`` and
``aten.softmax.int(x, dim=-1, dtype=None)`` alike.

    from ..ops import MatMul, Transpose, Softmax

    @pm.pattern
    def Scores(q, k):
        return Softmax(MatMul(q, Transpose(k, -2, -1)), -1, None)

Operators of unary pointwise ops have ``op_class="unary_pointwise"``,
binary ones ``"binary_pointwise"`` (as the op registry, :mod:`.registry`,
says: each operator here has an entry there, with its signature, cost
class, autograd and symbolic semantics). :data:`BY_NAME` maps the Python names
to the operators. These declarations are the *labels* of their overloads
in term graphs (:mod:`.overloads`): they are bound before any other
declaration, and a user's ``@pm.op(torch=[aten.mul.Tensor])`` is an
operator of its own that matches the same nodes without changing ``Mul``.
Ops not declared here still import (as an operator per overload named
after it, e.g. ``aten.cumsum.default``).
"""
from __future__ import annotations

import keyword
import operator
import sys
from typing import Dict, Optional

import torch

from ..dsl.operators import Op
from . import registry as _registry
from . import overloads as _overloads

aten = torch.ops.aten

BY_NAME: Dict[str, Op] = {}


def _param(name: str, i: int, seen) -> str:
    p = name if name.isidentifier() and not keyword.iskeyword(name) else f"{name}_"
    if p in seen:
        p = f"{p}_{i}"
    seen.add(p)
    return p


def declare(name: str, *targets, op_class: Optional[str] = None) -> Op:
    """An operator called ``name`` bound to ``targets`` (op overloads of one
    arity), with parameters named after the first target's schema. A
    library declaration: it labels its overloads (:mod:`.overloads`). A name
    of the op registry (:mod:`.registry`) must be declared as its entry
    says (its overload; ``op_class`` defaults to the entry's)."""
    entry = _registry.ENTRIES.get(name)
    if entry is not None:
        if list(targets) != [entry.target] or op_class not in (None, entry.op_class):
            raise ValueError(f"{name} is declared as {entry.overload} with op_class "
                             f"{entry.op_class!r} in the op registry (torch/registry.py)")
        op_class = entry.op_class
    schema = getattr(targets[0], "_schema", None)
    if schema is not None:
        seen: set = set()
        params = [_param(a.name, i, seen) for i, a in enumerate(schema.arguments)]
    else:  # operator.getitem
        params = ["container", "index"]
    src = f"def {name}({', '.join(params)}):\n    return 1\n"
    ns: dict = {}
    exec(src, ns)  # noqa: S102 -- builds a plain function with the schema's parameters
    fn = ns[name]
    fn.__doc__ = f"{', '.join(str(t) for t in targets)} (full positional form)"
    fn.__module__ = __name__
    caller = sys._getframe(1)
    from ..dsl.rules import short_path
    where = f"{short_path(caller.f_code.co_filename)}:{caller.f_lineno}"
    o = _overloads.bind_torch(fn, list(targets), op_class, where=where, library=True)
    BY_NAME[name] = o
    return o


UNARY, BINARY = "unary_pointwise", "binary_pointwise"

# linear algebra
MatMul = declare("MatMul", aten.matmul.default)
Mm = declare("Mm", aten.mm.default)
Bmm = declare("Bmm", aten.bmm.default)
Addmm = declare("Addmm", aten.addmm.default)
Baddbmm = declare("Baddbmm", aten.baddbmm.default)
Linear = declare("Linear", aten.linear.default)
SDPA = declare("SDPA", aten.scaled_dot_product_attention.default)
# layout
Transpose = declare("Transpose", aten.transpose.int)
T = declare("T", aten.t.default)
Permute = declare("Permute", aten.permute.default)
View = declare("View", aten.view.default)
Reshape = declare("Reshape", aten.reshape.default)
UnsafeView = declare("UnsafeView", aten._unsafe_view.default)
Expand = declare("Expand", aten.expand.default)
Unsqueeze = declare("Unsqueeze", aten.unsqueeze.default)
Clone = declare("Clone", aten.clone.default)
ToCopy = declare("ToCopy", aten._to_copy.default)
TypeAs = declare("TypeAs", aten.type_as.default)
Cat = declare("Cat", aten.cat.default)
Split = declare("Split", aten.split.Tensor)
GetItem = declare("GetItem", operator.getitem)
# reductions and normalization
Softmax = declare("Softmax", aten.softmax.int)
SafeSoftmax = declare("SafeSoftmax", aten._safe_softmax.default)
AnyDim = declare("AnyDim", aten.any.dim)
Mean = declare("Mean", aten.mean.dim)
LayerNorm = declare("LayerNorm", aten.layer_norm.default)
RmsNorm = declare("RmsNorm", aten.rms_norm.default)
# pointwise
Add = declare("Add", aten.add.Tensor, op_class=BINARY)
Sub = declare("Sub", aten.sub.Tensor, op_class=BINARY)
Mul = declare("Mul", aten.mul.Tensor, op_class=BINARY)
Div = declare("Div", aten.div.Tensor, op_class=BINARY)
PowScalar = declare("PowScalar", aten.pow.Tensor_Scalar, op_class=BINARY)
Where = declare("Where", aten.where.self)
WhereScalarOther = declare("WhereScalarOther", aten.where.ScalarOther)
WhereScalarSelf = declare("WhereScalarSelf", aten.where.ScalarSelf)
LogicalNot = declare("LogicalNot", aten.logical_not.default)
MaskedFill = declare("MaskedFill", aten.masked_fill.Scalar)
Relu = declare("Relu", aten.relu.default, op_class=UNARY)
Gelu = declare("Gelu", aten.gelu.default, op_class=UNARY)
Silu = declare("Silu", aten.silu.default, op_class=UNARY)
Sigmoid = declare("Sigmoid", aten.sigmoid.default, op_class=UNARY)
Tanh = declare("Tanh", aten.tanh.default, op_class=UNARY)
Erf = declare("Erf", aten.erf.default, op_class=UNARY)
Exp = declare("Exp", aten.exp.default, op_class=UNARY)
Neg = declare("Neg", aten.neg.default, op_class=UNARY)
Rsqrt = declare("Rsqrt", aten.rsqrt.default, op_class=UNARY)
Sqrt = declare("Sqrt", aten.sqrt.default, op_class=UNARY)
# random at training time (impure: never shared by hash-consing)
Dropout = declare("Dropout", aten.dropout.default)
NativeDropout = declare("NativeDropout", aten.native_dropout.default)
Embedding = declare("Embedding", aten.embedding.default)

# XLA simplifier port (library/xla_simplifier.py): element-wise, compare,
# logical, reductions and layout ops
Abs = declare("Abs", aten.abs.default, op_class=UNARY)
Log = declare("Log", aten.log.default, op_class=UNARY)
Reciprocal = declare("Reciprocal", aten.reciprocal.default, op_class=UNARY)
Maximum = declare("Maximum", aten.maximum.default, op_class=BINARY)
Minimum = declare("Minimum", aten.minimum.default, op_class=BINARY)
Clamp = declare("Clamp", aten.clamp.default)
ClampMin = declare("ClampMin", aten.clamp_min.default)
ClampMax = declare("ClampMax", aten.clamp_max.default)
Eq = declare("Eq", aten.eq.Tensor, op_class=BINARY)
Ne = declare("Ne", aten.ne.Tensor, op_class=BINARY)
Lt = declare("Lt", aten.lt.Tensor, op_class=BINARY)
Le = declare("Le", aten.le.Tensor, op_class=BINARY)
Gt = declare("Gt", aten.gt.Tensor, op_class=BINARY)
Ge = declare("Ge", aten.ge.Tensor, op_class=BINARY)
LtScalar = declare("LtScalar", aten.lt.Scalar)
LogicalAnd = declare("LogicalAnd", aten.logical_and.default, op_class=BINARY)
LogicalOr = declare("LogicalOr", aten.logical_or.default, op_class=BINARY)
BitwiseNot = declare("BitwiseNot", aten.bitwise_not.default, op_class=UNARY)
BitwiseAndScalar = declare("BitwiseAndScalar", aten.bitwise_and.Scalar)
BitwiseOrScalar = declare("BitwiseOrScalar", aten.bitwise_or.Scalar)
SumDim = declare("SumDim", aten.sum.dim_IntList)
Squeeze = declare("Squeeze", aten.squeeze.dim)
Slice = declare("Slice", aten.slice.Tensor)
Flip = declare("Flip", aten.flip.default)
ZerosLike = declare("ZerosLike", aten.zeros_like.default)
OnesLike = declare("OnesLike", aten.ones_like.default)
FullLike = declare("FullLike", aten.full_like.default)
ConstantPadNd = declare("ConstantPadNd", aten.constant_pad_nd.default)

# attention as other code bases write it (library/attention.py)
MulScalar = declare("MulScalar", aten.mul.Scalar)
MaskedFillTensor = declare("MaskedFillTensor", aten.masked_fill.Tensor)
# SDPA's core-ATen decomposition (its safe softmax written out)
SoftmaxImpl = declare("SoftmaxImpl", aten._softmax.default)
EqScalar = declare("EqScalar", aten.eq.Scalar)

__all__ = ["BY_NAME", "declare"] + sorted(BY_NAME)

# operators declared with torch= through pypm_verified.dsl.op before this
# layer loaded (their targets recorded, not bound): bound now, after the
# library's own declarations, which label their overloads first
_overloads.bind_requests()
