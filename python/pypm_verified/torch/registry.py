"""The op registry: one entry per ATen operator the DSL declares
(:mod:`.ops`), with what every part of the tool needs to know of it.

An :class:`OpEntry` gives

* ``name``: the DSL operator (``LayerNorm``), and ``overload``: its torch
  overload's name (``aten.layer_norm.default``; :attr:`OpEntry.target`
  resolves it);
* :attr:`OpEntry.signature`: the positional signature, names, types and
  defaults, read from the overload's schema (``_schema.arguments``): the
  DSL operator takes them all, keyword-only ones included, in this order
  (the *full positional form*);
* ``op_class``: the DSL's operator class (``unary_pointwise`` /
  ``binary_pointwise``), which :func:`.ops.declare` reads;
* ``cost``: its FLOP class in the cost model (:data:`COST_CLASSES`;
  :mod:`.cost` reads it, and :data:`OTHER_COSTS` for the ATen ops it prices
  that the DSL does not declare);
* :attr:`OpEntry.differentiable`: whether torch has an autograd formula for
  it (:func:`has_autograd`; the Inductor pass, :mod:`.inductor`, reads
  :func:`differentiable` for the ops its rules emit);
* ``semantics``: what ``check-rules``' symbolic proofs read it as
  (``checking/smt.py``: ``smt.handlers(entry.key)`` are the functions
  that give it; the check-rules layer reads this table, not the other
  way round), with ``kind`` "defined" (a term of real
  arithmetic and the primitives), "primitive" (an uninterpreted function
  with laws true of the real one: ``exp``, ``log``, ``erf``, ``sqrt``) or
  "none" (no semantics: ``semantics`` says why);
* :attr:`OpEntry.shape_rule`: the rule of ``check-rules``' instance
  generator that picks its operands' shapes (:data:`SHAPE_RULES`, a name
  ``checking/shapes.py`` implements),
  and ``shape_note``, where that is the generator's same-shape fallback,
  whether that is right for it or why no rule fits.

``tests/test_registry.py`` checks that every operator of :mod:`.ops` has an
entry, the signatures against the schemas and the declarations, the
semantics against torch's values on concrete inputs, and that the
operator table of the documentation (``docs/reference/operators.md``,
:func:`markdown`) is this registry's.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from functools import cached_property
from typing import Dict, FrozenSet, Optional, Tuple

import torch

# the schema types as spelled: read by the DSL's PyTorch code too (dsl/torch_labels.py)
from ..dsl.torch_labels import schema_types as _schema_types

UNARY, BINARY = "unary_pointwise", "binary_pointwise"

#: the cost model's FLOP classes (:mod:`.cost`)
COST_CLASSES: Dict[str, str] = {
    "free": "no kernel runs (a view, a getitem): costs nothing",
    "elementwise": "one FLOP per output element",
    "transcendental": "the machine's `transcendental` FLOPs (an exp's) per output element",
    "matmul": "2·(output elements)·K, K the contracted size",
    "linear": "2·(output elements)·(input features) (`addmm`, `baddbmm`: of the first product operand)",
    "attention": "4·B·S·S'·D for the two products, 5·B·S·S' for the softmax",
}

#: the ATen ops (by packet name) that the cost model prices and the DSL
#: does not declare, and their class
OTHER_COSTS: Dict[str, str] = {
    **{n: "free" for n in (
        "select", "alias", "detach", "sym_size", "lift_fresh_copy",
        "_assert_tensor_metadata", "sym_numel", "sym_stride", "chunk", "unbind",
        "as_strided", "contiguous_noop")},
    **{n: "transcendental" for n in ("log_softmax", "sin", "cos")},
    "linear_act": "linear",  # pypm::linear_act (torch/kernels.py)
}

#: the shape rule of ``check-rules``' instance generator for each ATen op
#: (by packet; ``checking/shapes.py`` implements each name): how its tensor
#: operands' shapes follow from its output's. An op not here takes
#: "pointwise" (broadcasting operands) when torch tags it pointwise, else
#: "same_shape" (every tensor operand has the output's shape; the entry's
#: ``shape_note`` says whether that is right for it)
SHAPE_RULES: Dict[str, str] = {
    "constant_pad_nd": "pad", "unsqueeze": "unsqueeze", "squeeze": "squeeze",
    "expand": "expand", "slice": "slice",
    "matmul": "matmul", "mm": "mm", "bmm": "bmm", "linear": "linear", "addmm": "addmm",
    "baddbmm": "baddbmm",
    "view": "view", "_unsafe_view": "view", "reshape": "view",
    "transpose": "transpose", "t": "t", "permute": "permute",
    "softmax": "softmax", "log_softmax": "softmax", "_softmax": "softmax",
    "_log_softmax": "softmax", "_safe_softmax": "softmax",
    "mean": "reduction", "sum": "reduction", "amax": "reduction", "amin": "reduction",
    "any": "reduction",
    "rms_norm": "norm", "layer_norm": "norm",
    "scaled_dot_product_attention": "sdpa",
}


def shape_rule_of(target) -> str:
    """The name of the shape rule (:data:`SHAPE_RULES`) of the ATen op
    ``target``."""
    packet = getattr(getattr(target, "overloadpacket", None), "__name__", None)
    rule = SHAPE_RULES.get(packet)
    if rule is not None:
        return rule
    return "pointwise" if torch.Tag.pointwise in getattr(target, "tags", ()) else "same_shape"


#: a shape note saying that the instance generator's same-shape fallback
#: (every tensor operand has the output's shape) is right for the op
SAME_SHAPE = "same shape: every tensor operand has the output's shape"

_NO_DEFAULT = object()


@dataclass(frozen=True)
class Param:
    """One argument of an operator's positional signature."""
    name: str
    type: str
    default: object = _NO_DEFAULT
    kwarg_only: bool = False

    @property
    def has_default(self) -> bool:
        return self.default is not _NO_DEFAULT

    def __str__(self) -> str:
        d = f"={_show(self.default)}" if self.has_default else ""
        return f"{self.type} {self.name}{d}"


def _show(v) -> str:
    if isinstance(v, str):
        return f'"{v}"'
    return repr(v)


def resolve(overload: str):
    """The torch overload (or ``operator.getitem``) named ``overload``
    (``aten.add.Tensor``, ``pypm.linear_act.default``, ``operator.getitem``)."""
    if overload == "operator.getitem":
        return operator.getitem
    ns, packet, name = overload.split(".")
    if ns == "pypm":
        from . import kernels  # noqa: F401 -- registers torch.ops.pypm.*
    return getattr(getattr(getattr(torch.ops, ns), packet), name)


def has_autograd(target) -> bool:
    """Whether torch has an autograd formula for ``target``: an ATen op's
    derivative (a kernel for the Autograd key) or a composite one (its
    decomposition is differentiated); a ``torch.library.custom_op`` only with
    a registered backward (``register_autograd``)."""
    if target is operator.getitem:
        return True
    schema = getattr(target, "_schema", None)
    if schema is None:
        return False
    try:
        from torch._library.custom_ops import OPDEFS
        opdef = OPDEFS.get(schema.name)
    except ImportError:  # pragma: no cover - older torch
        opdef = None
    if opdef is not None:
        return getattr(opdef, "_backward_fn", None) is not None
    name = target.name()
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    return bool(has(name, "CompositeImplicitAutograd") or has(name, "Autograd"))


def differentiable(overload: str) -> bool:
    """:func:`has_autograd` of the overload named ``overload``."""
    return has_autograd(resolve(overload))


@dataclass(frozen=True)
class OpEntry:
    """One ATen operator of the DSL (see the module docstring)."""
    name: str
    overload: str
    cost: str
    semantics: str
    kind: str = "defined"
    op_class: Optional[str] = None
    shape_note: str = ""

    @cached_property
    def target(self):
        """The torch overload (``operator.getitem`` for ``GetItem``)."""
        return resolve(self.overload)

    @property
    def packet(self) -> str:
        """The overload packet's name (``layer_norm``): what the cost model
        and the instance generator key on."""
        return "getitem" if self.overload == "operator.getitem" else self.overload.split(".")[1]

    @property
    def key(self) -> str:
        """The name its semantics are filed under in ``checking/smt.py``."""
        return "getitem" if self.overload == "operator.getitem" else self.overload

    @cached_property
    def signature(self) -> Tuple[Param, ...]:
        """The positional signature, from the overload's schema."""
        schema = getattr(self.target, "_schema", None)
        if schema is None:  # operator.getitem
            return (Param("container", "Any"), Param("index", "int"))
        types = _schema_types(schema)
        return tuple(
            Param(a.name, types[i] if types else str(a.type),
                  a.default_value if a.has_default_value() else _NO_DEFAULT, a.kwarg_only)
            for i, a in enumerate(schema.arguments))

    @cached_property
    def differentiable(self) -> bool:
        """Whether torch has an autograd formula for it (:func:`has_autograd`)."""
        return has_autograd(self.target)

    @property
    def shape_rule(self) -> str:
        """The name of the instance generator's shape rule for it
        (:func:`shape_rule_of`)."""
        return shape_rule_of(self.target)

    def signature_text(self) -> str:
        """``Tensor input, SymInt[] normalized_shape, Tensor? weight=None, ...``
        (keyword-only ones after ``*``; the DSL takes them positionally)."""
        parts, star = [], False
        for p in self.signature:
            if p.kwarg_only and not star:
                parts.append("*")
                star = True
            parts.append(str(p))
        return ", ".join(parts)


def _e(name, overload, cost, semantics, kind="defined", op_class=None, shape=""):
    return OpEntry(name, overload, cost, semantics, kind, op_class, shape)


_MASK = "a boolean mask (`-inf` fills are not reals)"

#: every ATen operator of the DSL, by its name there (in :mod:`.ops`' order)
ENTRIES: Dict[str, OpEntry] = {e.name: e for e in [
    # linear algebra
    _e("MatMul", "aten.matmul.default", "matmul",
       "Σ over the contracted axis; 1-D operands and broadcast batch axes as `torch.matmul`"),
    _e("Mm", "aten.mm.default", "matmul", "Σ_k a[i,k]·b[k,j] (2-D operands)"),
    _e("Bmm", "aten.bmm.default", "matmul", "Σ_k a[b,i,k]·c[b,k,j] (3-D, equal batch)"),
    _e("Addmm", "aten.addmm.default", "linear", "beta·self + alpha·(mat1 @ mat2)"),
    _e("Baddbmm", "aten.baddbmm.default", "linear",
       "beta·self + alpha·bmm(batch1, batch2)"),
    _e("Linear", "aten.linear.default", "linear", "x·wᵀ + b (w 2-D)"),
    _e("SDPA", "aten.scaled_dot_product_attention.default", "attention",
       "softmax(q·kᵀ·scale + mask)·v with a float mask and a given scale; the default "
       "scale 1/√E (irrational), dropout, is_causal, enable_gqa and " + _MASK
       + " are unsupported"),
    # layout
    _e("Transpose", "aten.transpose.int", "free", "index map: two axes swapped"),
    _e("T", "aten.t.default", "free", "index map: axes 0 and 1 swapped (rank < 2: identity)"),
    _e("Permute", "aten.permute.default", "free", "index map: the axes permuted"),
    _e("View", "aten.view.default", "free",
       "row-major index map between the shapes: an axis kept keeps any size; the axes it "
       "splits or merges have the instance's sizes"),
    _e("Reshape", "aten.reshape.default", "free", "as `View`"),
    _e("UnsafeView", "aten._unsafe_view.default", "free", "as `View`"),
    _e("Expand", "aten.expand.default", "free",
       "broadcast index map (an axis the instance expands from 1 has size 1)"),
    _e("Unsqueeze", "aten.unsqueeze.default", "free", "index map: a new axis of size 1"),
    _e("Clone", "aten.clone.default", "elementwise", "the identity"),
    _e("ToCopy", "aten._to_copy.default", "elementwise",
       "the identity between floating dtypes; to an integer dtype truncates, to bool is ≠ 0",
       shape=SAME_SHAPE),
    _e("TypeAs", "aten.type_as.default", "elementwise", "the identity (a cast)",
       shape="same shape: `other` is only read for its dtype (given the output's shape)"),
    _e("Cat", "aten.cat.default", "elementwise",
       "piecewise index map on `dim` (equal ranks, equal sizes off `dim`)",
       shape="none: a list operand (the same-shape fallback gives every piece the output's "
             "shape)"),
    _e("Split", "aten.split.Tensor", "free",
       "pieces of `split_size` on `dim`, the last the rest; as many pieces as on the instance",
       shape="none: a list result"),
    _e("GetItem", "operator.getitem", "free", "the piece of a split (or tuple) it picks",
       shape="none: no ATen overload (the operand is a list or tuple)"),
    # reductions and normalization
    _e("Softmax", "aten.softmax.int", "transcendental", "exp(x) / Σ exp(x) over `dim`"),
    _e("SafeSoftmax", "aten._safe_softmax.default", "transcendental",
       "as `Softmax` (they differ only on rows of -inf, which the reals lack)"),
    _e("AnyDim", "aten.any.dim", "elementwise", "Σ [x ≠ 0] > 0 over `dim` (boolean)"),
    _e("Mean", "aten.mean.dim", "elementwise",
       "Σ / (count) over `dim` (all when empty), `keepdim`"),
    _e("LayerNorm", "aten.layer_norm.default", "elementwise",
       "(x − μ)·rsqrt(σ² + eps)·weight + bias over the last len(normalized_shape) axes, μ "
       "their mean and σ² the mean of (x − μ)² (biased); weight and bias exactly "
       "normalized_shape"),
    _e("RmsNorm", "aten.rms_norm.default", "elementwise",
       "x·rsqrt(mean(x²) + eps)·weight over the last len(normalized_shape) axes; eps=None "
       "(the dtype's epsilon) is unsupported"),
    # pointwise
    _e("Add", "aten.add.Tensor", "elementwise", "self + alpha·other", op_class=BINARY),
    _e("Sub", "aten.sub.Tensor", "elementwise", "self − alpha·other", op_class=BINARY),
    _e("Mul", "aten.mul.Tensor", "elementwise", "self·other", op_class=BINARY),
    _e("Div", "aten.div.Tensor", "elementwise", "self / other (x / 0 is unconstrained)",
       op_class=BINARY),
    _e("PowScalar", "aten.pow.Tensor_Scalar", "transcendental",
       "x multiplied out for an integer |e| ≤ 4 (1 / … below 0), sqrt / rsqrt for e = ±0.5; "
       "another exponent an uninterpreted function `pow_e`", op_class=BINARY),
    _e("Where", "aten.where.self", "elementwise", "If(condition, self, other)"),
    _e("WhereScalarOther", "aten.where.ScalarOther", "elementwise",
       "If(condition, self, other); a finite scalar", shape=SAME_SHAPE),
    _e("WhereScalarSelf", "aten.where.ScalarSelf", "elementwise",
       "If(condition, self, other); a finite scalar", shape=SAME_SHAPE),
    _e("LogicalNot", "aten.logical_not.default", "elementwise", "[x = 0]"),
    _e("MaskedFill", "aten.masked_fill.Scalar", "elementwise",
       "If(mask, value, self); a finite value, the mask broadcast to self"),
    _e("Relu", "aten.relu.default", "elementwise", "If(x > 0, x, 0)", op_class=UNARY),
    _e("Gelu", "aten.gelu.default", "transcendental",
       "x·½·(1 + erf(x·M_SQRT1_2)); approximate=\"tanh\": ½·x·(1 + tanh(β·(x + κ·x³))) with "
       "PyTorch's β and κ", op_class=UNARY),
    _e("Silu", "aten.silu.default", "transcendental", "x·sigmoid(x)", op_class=UNARY),
    _e("Sigmoid", "aten.sigmoid.default", "transcendental", "1 / (1 + exp(−x))",
       op_class=UNARY),
    _e("Tanh", "aten.tanh.default", "transcendental", "2 / (1 + exp(−2x)) − 1",
       op_class=UNARY),
    _e("Erf", "aten.erf.default", "transcendental",
       "erf: uninterpreted, with the laws −1 < erf(a) < 1, erf(−a) = −erf(a), increasing",
       kind="primitive", op_class=UNARY),
    _e("Exp", "aten.exp.default", "transcendental",
       "exp: uninterpreted, with the laws exp(a) > 0, exp(0) = 1, exp(a)·exp(b) = exp(a + b), "
       "increasing, log(exp(a)) = a", kind="primitive", op_class=UNARY),
    _e("Neg", "aten.neg.default", "elementwise", "−x", op_class=UNARY),
    _e("Rsqrt", "aten.rsqrt.default", "transcendental", "1 / sqrt(x)", op_class=UNARY),
    _e("Sqrt", "aten.sqrt.default", "transcendental",
       "sqrt: uninterpreted, with the laws sqrt(t) ≥ 0 and sqrt(t)² = t for t ≥ 0",
       kind="primitive", op_class=UNARY),
    # random at training time
    _e("Dropout", "aten.dropout.default", "elementwise",
       "the identity in inference (train=False) or with p = 0; training is unsupported "
       "(random)", shape=SAME_SHAPE),
    _e("NativeDropout", "aten.native_dropout.default", "elementwise",
       "(x, an all-true mask) with train=False or p = 0; training is unsupported (random)",
       shape="none: a tuple result (the same-shape fallback is right for its input)"),
    _e("Embedding", "aten.embedding.default", "elementwise",
       "weight[indices[…], j]; an index out of range (torch raises) reads an unconstrained "
       "value", shape="none: integer indices of another shape (the same-shape fallback gives "
                      "both operands the output's shape)"),
    # the XLA simplifier port
    _e("Abs", "aten.abs.default", "elementwise", "If(x ≥ 0, x, −x)", op_class=UNARY),
    _e("Log", "aten.log.default", "transcendental",
       "log: uninterpreted, with the laws exp(log(t)) = t for t > 0, log(exp(a)) = a, "
       "increasing on the positive reals", kind="primitive", op_class=UNARY),
    _e("Reciprocal", "aten.reciprocal.default", "elementwise", "1 / x", op_class=UNARY),
    _e("Maximum", "aten.maximum.default", "elementwise", "If(a ≥ b, a, b)", op_class=BINARY),
    _e("Minimum", "aten.minimum.default", "elementwise", "If(a ≤ b, a, b)", op_class=BINARY),
    _e("Clamp", "aten.clamp.default", "elementwise", "min(max(x, min), max); ±inf bounds "
       "dropped"),
    _e("ClampMin", "aten.clamp_min.default", "elementwise", "max(x, min)"),
    _e("ClampMax", "aten.clamp_max.default", "elementwise", "min(x, max)"),
    _e("Eq", "aten.eq.Tensor", "elementwise", "[a = b]", op_class=BINARY),
    _e("Ne", "aten.ne.Tensor", "elementwise", "[a ≠ b]", op_class=BINARY),
    _e("Lt", "aten.lt.Tensor", "elementwise", "[a < b]", op_class=BINARY),
    _e("Le", "aten.le.Tensor", "elementwise", "[a ≤ b]", op_class=BINARY),
    _e("Gt", "aten.gt.Tensor", "elementwise", "[a > b]", op_class=BINARY),
    _e("Ge", "aten.ge.Tensor", "elementwise", "[a ≥ b]", op_class=BINARY),
    _e("LtScalar", "aten.lt.Scalar", "elementwise", "[a < b]"),
    _e("LogicalAnd", "aten.logical_and.default", "elementwise", "[a ≠ 0 ∧ b ≠ 0]",
       op_class=BINARY),
    _e("LogicalOr", "aten.logical_or.default", "elementwise", "[a ≠ 0 ∨ b ≠ 0]",
       op_class=BINARY),
    _e("BitwiseNot", "aten.bitwise_not.default", "elementwise",
       "1 − x on booleans, −x − 1 on integers (floats: unsupported)", op_class=UNARY),
    _e("BitwiseAndScalar", "aten.bitwise_and.Scalar", "elementwise",
       "x & 0 and x & (all ones) exactly, another constant an uninterpreted function "
       "(integers, booleans)"),
    _e("BitwiseOrScalar", "aten.bitwise_or.Scalar", "elementwise",
       "x | 0 and x | (all ones) exactly, another constant an uninterpreted function "
       "(integers, booleans)"),
    _e("SumDim", "aten.sum.dim_IntList", "elementwise",
       "Σ over `dim` (all when empty), `keepdim`; a reduced axis of size 1 on the instance "
       "is one of the structure"),
    _e("Squeeze", "aten.squeeze.dim", "free",
       "index map: the axis removed where it has size 1 on the instance, else the identity"),
    _e("Slice", "aten.slice.Tensor", "free", "index map: start + i·step on `dim`"),
    _e("Flip", "aten.flip.default", "elementwise", "index map: n − 1 − i on the flipped axes",
       shape=SAME_SHAPE),
    _e("ZerosLike", "aten.zeros_like.default", "elementwise", "0", shape=SAME_SHAPE),
    _e("OnesLike", "aten.ones_like.default", "elementwise", "1", shape=SAME_SHAPE),
    _e("FullLike", "aten.full_like.default", "elementwise", "fill_value (finite)",
       shape=SAME_SHAPE),
    _e("ConstantPadNd", "aten.constant_pad_nd.default", "elementwise",
       "If(inside, x, value) on the padded shape"),
    # attention as other code bases write it
    _e("MulScalar", "aten.mul.Scalar", "elementwise", "self·other"),
    _e("MaskedFillTensor", "aten.masked_fill.Tensor", "elementwise",
       "If(mask, value, self), value 0-d, the mask broadcast to self",
       shape="none: a 0-d value (the same-shape fallback gives it the output's shape)"),
    # SDPA's core-ATen decomposition
    _e("SoftmaxImpl", "aten._softmax.default", "transcendental",
       "as `Softmax` (half_to_float is a dtype, not a value)"),
    _e("EqScalar", "aten.eq.Scalar", "elementwise", "[a = b]"),
]}


_BY_TARGET: Dict[object, OpEntry] = {}


def by_target(target) -> Optional[OpEntry]:
    """The entry of the torch overload ``target``, or None."""
    if not _BY_TARGET:
        for e in ENTRIES.values():
            _BY_TARGET[e.target] = e
    try:
        return _BY_TARGET.get(target)
    except TypeError:
        return None


def _packet_costs() -> Dict[str, str]:
    out = dict(OTHER_COSTS)
    for e in ENTRIES.values():
        if out.get(e.packet, e.cost) != e.cost:
            raise ValueError(f"{e.name}: cost {e.cost!r}, but its packet {e.packet} has "
                             f"{out[e.packet]!r}")
        out[e.packet] = e.cost
    return out


#: packet name -> FLOP class, for the cost model (the DSL's ops and :data:`OTHER_COSTS`)
PACKET_COSTS: Dict[str, str] = _packet_costs()


def cost_class(packet: str) -> str:
    """The FLOP class of the op packet ``packet`` (``elementwise`` when
    neither the registry nor :data:`OTHER_COSTS` has it)."""
    return PACKET_COSTS.get(packet, "elementwise")


def packets(cost: str) -> FrozenSet[str]:
    """The op packets of FLOP class ``cost``."""
    return frozenset(p for p, c in PACKET_COSTS.items() if c == cost)


# ------------------------------------------------------------ the docs' table

BEGIN, END = "<!-- operators:begin -->", "<!-- operators:end -->"


def _cell(s: str) -> str:
    return s.replace("|", "\\|")


def markdown() -> str:
    """The operator table of ``docs/reference/operators.md`` (what goes
    between :data:`BEGIN` and :data:`END`)."""
    rows = ["| DSL operator | ATen overload | signature (full positional form) | cost | "
            "autograd | symbolic semantics |",
            "|---|---|---|---|---|---|"]
    for e in ENTRIES.values():
        sem = {"defined": "", "primitive": "primitive: ", "none": "none: "}[e.kind] \
            + e.semantics
        rows.append("| " + " | ".join(_cell(c) for c in (
            f"`{e.name}`", f"`{e.overload}`", f"`{e.signature_text()}`", e.cost,
            "yes" if e.differentiable else "no", sem)) + " |")
    classes = ["| cost class | FLOPs |", "|---|---|"] + [
        f"| {k} | {_cell(v)} |" for k, v in COST_CLASSES.items()]
    other = ", ".join(f"`{p}` ({c})" for p, c in OTHER_COSTS.items())
    return "\n".join(rows) + "\n\n" + "\n".join(classes) + (
        f"\n\nOps the cost model prices that the DSL does not declare: {other}; any other "
        "op is elementwise.\n")


def render_page(text: str) -> str:
    """``text`` (the page) with its table between the markers replaced by
    :func:`markdown`'s."""
    i, j = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[:i] + "\n" + markdown() + text[j:]


__all__ = ["OpEntry", "Param", "ENTRIES", "COST_CLASSES", "OTHER_COSTS", "PACKET_COSTS",
           "by_target", "cost_class", "packets", "differentiable", "has_autograd",
           "markdown", "resolve"]
