"""Evaluation: one rule on one instance, the way a rewrite would run it.

:func:`build` turns an :class:`~.instances.Instance` into an FX graph (one
placeholder per tensor input, ``meta["val"]`` from fake tensors, as
``torch.export`` leaves them) and random inputs from the instance's seed
(:func:`input_tensor`: normal values, or now and then rows nearly constant
along an axis the pattern reduces, exact zeros, negative values, large or
small magnitudes: the instance's ``values_mix``). :class:`RuleRunner` then

1. runs the original subgraph on the inputs;
2. imports the graph into the term graph and matches the pattern at the
   instance's root with the real matcher (:mod:`pypm_verified.engines`, the
   pattern's own table or a variant of it, :mod:`.guards`);
3. fires the rule through the PyTorch driver's own path (``Rule.fire``, the
   driver's builder and its replacement checks,
   :class:`pypm_verified.torch.driver.Driver` with profitability off), so the
   rule's asserts decide exactly as in ``python -m pypm_verified rewrite``;
4. runs the rewritten graph on the same inputs and compares the outputs at
   the dtype-aware tolerances of :mod:`pypm_verified.torch.check`, the
   absolute one scaled by the output's magnitude: ``|got - ref| <= atol *
   max|ref| + rtol * |ref|`` (:func:`compare_outputs`); where
   they differ by more, the rewrite still agrees if it is, element by
   element, at least as close as the original to the same subgraph
   evaluated in float64 (:func:`closer_to_exact`: the rewrite computes more
   precisely, e.g. SDPA in float64 where the original rounded its softmax
   to float32).

:func:`confirm_difference` is the numeric side of the symbolic check: a
structure that z3 says differs over the reals is reported "differs" only
with a concrete input on which the two sides, evaluated with torch, differ
beyond the tolerance (:mod:`.smt`).

The :class:`Outcome` says which: ``invalid`` (torch rejects the generated
subgraph), ``no_match``, ``declined`` (an assert of the rule failed: its
line), ``agree``, or a counterexample -- ``disagree`` (outputs differ beyond
the tolerance) or ``error`` (the rule raised, built an invalid
replacement, or the replacement fails at run time).
"""
from __future__ import annotations

import contextlib
import logging
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

import torch
import torch.fx as fx

from ..dsl import ast_transform
from ..engines.matching import PatternSet
from ..errors import OutOfFuel, PatternError, first_line
from ..torch.check import TOLERANCE
from ..torch.driver import Driver, RewriteError, schema_call
from .instances import App, Instance, Leaf, Lit, dump_instance, render

if TYPE_CHECKING:  # z3 is imported where a proof is asked for
    from . import smt

__all__ = ["Built", "InvalidInstance", "Outcome", "RuleRunner", "StructureProof", "build",
           "compare_outputs", "closer_to_exact", "shrink", "COUNTEREXAMPLES",
           "confirm_difference", "evaluate_fx", "counterexample_text", "MAX_ELEMENTS",
           "input_tensor", "input_tensors", "flat_axes", "tolerance_of", "TOLERANCE_RULE"]

#: how two outputs are compared (``atol``, ``rtol``: the output dtype's;
#: ``max|ref|`` at least the largest magnitude of the inputs and of the
#: values either graph computes, up to 1: an output that cancels to about 0
#: is held to the rounding of what it was computed from, not to 0 error)
TOLERANCE_RULE = "|got - ref| <= atol * max|ref| + rtol * |ref|"


def _magnitude(gm: fx.GraphModule, args) -> float:
    """The largest finite magnitude of any floating value ``gm`` computes
    on ``args`` (its inputs included)."""
    class Track(fx.Interpreter):
        top = 0.0

        def run_node(self, n):
            v = super().run_node(n)
            for t in (v if isinstance(v, (tuple, list)) else (v,)):
                if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel():
                    self.top = max(self.top, _scale(t.detach().double()))
            return v
    it = Track(gm)
    with torch.no_grad():
        it.run(*args)
    return it.top


def _computed_scale(inst: Instance, rewritten: fx.GraphModule, args) -> float:
    """The floor of ``max|ref|`` once outputs differ by more than the
    inputs' floor allows: the largest magnitude the original (built again)
    or the rewritten graph computes, up to 1 (0 when they fail)."""
    try:
        b = build(inst)
        return min(1.0, max(_magnitude(b.gm, b.inputs), _magnitude(rewritten, args)))
    except Exception:  # noqa: BLE001 -- no wider floor then
        return 0.0


def input_scale(inputs) -> float:
    """The floor of ``max|ref|`` (:data:`TOLERANCE_RULE`): the largest
    finite magnitude of the floating inputs, at most 1."""
    m = 0.0
    for t in inputs:
        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel():
            m = max(m, _scale(t.double()))
            if m >= 1.0:
                return 1.0
    return m


def tolerance_of(dtype) -> Tuple[float, float]:
    """(atol, rtol) of an output dtype (:data:`TOLERANCE_RULE`)."""
    return TOLERANCE.get(dtype, (1e-4, 1e-3))

COUNTEREXAMPLES = ("disagree", "error")


class InvalidInstance(Exception):
    """torch rejects the generated subgraph (not a counterexample: no program
    contains it)."""


@dataclass
class Built:
    """An instance as a graph module: ``gm``, its ``root`` FX node, the
    ``inputs`` (real tensors, in placeholder order) and ``nodes`` (App -> FX
    node)."""

    gm: fx.GraphModule
    root: fx.Node
    inputs: List[torch.Tensor]
    nodes: Dict[int, fx.Node]
    #: a multi-root instance's roots (the graph outputs them all, in order)
    roots: Tuple[fx.Node, ...] = ()

    def dtype_of(self, app) -> Optional[torch.dtype]:
        n = self.nodes.get(id(app))
        v = n.meta.get("val") if n is not None else None
        return v.dtype if isinstance(v, torch.Tensor) else None


def input_tensor(shape, dtype, g, special=False, mix="normal", axis=-1):
    """The values of one input (torch only: ``check-rules --repro`` copies
    this function into the files it writes). ``g``: the torch.Generator of
    the instance (its inputs are drawn one after the other); ``special``:
    NaN, +-inf, +-0.0, +-100 (integers: their extremes) among them; ``mix``
    (floating inputs): "normal" (normal(0, 1)), "near_constant" (per row
    along ``axis`` a normal value plus noise of 1e-3, or a few steps of a
    half-precision dtype: a small variance, where an epsilon shows),
    "zeros" (a third of them exactly 0), "negative" (-|normal|), "large"
    (x 100 in float32/64; normal in half precision, where large values
    probe its range more than a rule), "small" (x 1e-3; x 1e-2 in half
    precision)."""
    import math
    import torch
    shape = tuple(shape)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) < 0.5
    if not dtype.is_floating_point:
        t = torch.randint(-4, 5, shape, generator=g, dtype=dtype)
        if special:  # the integer type's extremes
            info = torch.iinfo(dtype)
            pool = torch.tensor([info.min, info.max, 0, -1], dtype=dtype)
            pick = torch.randint(0, len(pool), shape, generator=g)
            t = torch.where(torch.rand(shape, generator=g) < 0.3, pool[pick], t)
        return t
    t = torch.randn(shape, generator=g, dtype=torch.float64)
    half = dtype in (torch.float16, torch.bfloat16)
    if mix == "near_constant" and len(shape):
        row = list(shape)
        row[axis] = 1
        noise = {torch.float16: 1e-2, torch.bfloat16: 4e-2}.get(dtype, 1e-3)
        t = torch.randn(row, generator=g, dtype=torch.float64) + noise * t
    elif mix == "zeros":
        t = torch.where(torch.rand(shape, generator=g) < 1 / 3, torch.zeros_like(t), t)
    elif mix == "negative":
        t = -t.abs()
    elif mix == "large" and not half:
        t = t * 100.0
    elif mix == "small":
        t = t * (1e-2 if half else 1e-3)
    if special:  # NaN, infinities, signed zeros, values whose exp overflows
        pool = torch.tensor((math.nan, math.inf, -math.inf, 0.0, -0.0, 100.0, -100.0),
                            dtype=torch.float64)
        pick = torch.randint(0, len(pool), shape, generator=g)
        t = torch.where(torch.rand(shape, generator=g) < 0.3, pool[pick], t)
    return t.to(dtype)


def _input(shape, dtype, g: torch.Generator, special: bool = False) -> torch.Tensor:
    return input_tensor(shape, dtype, g, special)


#: the special floating values of an instance with ``special`` inputs
SPECIAL_VALUES = (math.nan, math.inf, -math.inf, 0.0, -0.0, 100.0, -100.0)


def _mix_axis(inst: Instance, lf: Leaf) -> int:
    """The axis of input ``lf`` a near-constant row runs along: the last one
    the pattern reduces, normalizes or softmaxes there, else the last."""
    from .instances import READ_KINDS
    read = {d.find() for d, kind, _ in inst.axes if kind in READ_KINDS}
    shape = lf.shape or []
    for j in range(len(shape) - 1, -1, -1):
        if shape[j].find() in read:
            return j - len(shape)
    return -1


def input_tensors(inst: Instance) -> List[Tuple[Leaf, torch.Tensor, int]]:
    """(leaf, values, near-constant axis) of every tensor input of ``inst``,
    as :func:`build` draws them."""
    gen = torch.Generator().manual_seed(inst.seed)
    out = []
    for lf in inst.leaves:
        if lf.kind != "tensor":
            continue
        axis = _mix_axis(inst, lf)
        out.append((lf, input_tensor(inst.shape(lf), inst.dtypes[lf], gen, inst.special,
                                     inst.values_mix, axis), axis))
    return out


def flat_axes(inst: Instance, inputs: Optional[List[torch.Tensor]] = None) -> Dict[str, str]:
    """The axes the pattern reduces, normalizes, softmaxes or contracts
    (:data:`.instances.READ_KINDS`) on which ``inst`` says nothing: label ->
    why ("size 1", or "inputs constant along it": every tensor input that
    has the axis holds the same values along it). ``inputs``: the instance's
    input tensors in leaf order (default: drawn again)."""
    from .instances import READ_KINDS
    if inputs is None:
        inputs = [t for _, t, _ in input_tensors(inst)]
    leaves = [lf for lf in inst.leaves if lf.kind == "tensor"]
    out: Dict[str, str] = {}
    for label, (kinds, d) in inst.read_axes().items():
        if not any(k.split(" ")[0] in READ_KINDS for k in kinds):
            continue
        if inst.size(d) == 1:
            out[label] = "size 1"
            continue
        holders = []
        for lf, t in zip(leaves, inputs):
            for j, e in enumerate(lf.shape or ()):
                if e.find() is d and isinstance(t, torch.Tensor) and t.dim() == len(lf.shape):
                    holders.append((t, j))
        if holders and all(bool((t == t.narrow(j, 0, 1)).all()) for t, j in holders):
            out[label] = "inputs constant along it"
    return out


@contextlib.contextmanager
def _quiet_fake_tensors():
    """Fake tensors log every op they reject at ERROR level; a rejected draw
    is routine here."""
    log = logging.getLogger("torch._subclasses.fake_tensor")
    old = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        log.setLevel(old)


def _promoted(v):
    if isinstance(v, torch.dtype) and v.is_floating_point:
        return torch.float64
    if isinstance(v, (list, tuple)):
        return type(v)(_promoted(x) for x in v)
    return v


def build(inst: Instance, promote: bool = False) -> Built:
    """The FX graph of ``inst`` with fake-tensor metadata, and its inputs;
    :class:`InvalidInstance` when torch rejects it. ``promote``: every
    floating dtype (inputs, dtype arguments) float64 instead, with the same
    input values: the exact computation the original approximates."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    mode = FakeTensorMode()
    gen = torch.Generator().manual_seed(inst.seed)
    graph = fx.Graph()
    inputs, env = [], {}
    for lf in inst.leaves:
        if lf.kind != "tensor":
            continue
        real = input_tensor(inst.shape(lf), inst.dtypes[lf], gen, inst.special,
                            inst.values_mix, _mix_axis(inst, lf))
        if promote and real.is_floating_point():
            real = real.double()
        ph = graph.placeholder(lf.name.replace(".", "_"))
        ph.meta["val"] = mode.from_tensor(real)
        inputs.append(real)
        env[id(lf)] = ph
    nodes: Dict[int, fx.Node] = {}

    def arg(t):
        if isinstance(t, App):
            return nodes[id(t)]
        if isinstance(t, Leaf):
            if t.kind == "tensor":
                return env[id(t)]
            v = inst.value(t) if t.kind == "const" else None
        else:
            v = inst.value(t)
        return _promoted(v) if promote else v

    for a in inst.apps:
        pos, kw = schema_call(a.target, [arg(t) for t in a.args])
        fake = fx.node.map_arg((tuple(pos), kw), lambda n: n.meta["val"])
        try:
            with mode:
                val = a.target(*fake[0], **fake[1])
        except Exception as e:  # noqa: BLE001 -- torch rejects it, whatever the type
            raise InvalidInstance(f"{a.target}: {type(e).__name__}: "
                                  f"{first_line(e, NOTE_CHARS)}") from None
        if not isinstance(val, torch.Tensor):
            raise InvalidInstance(f"{a.target} does not return one tensor")
        node = graph.call_function(a.target, tuple(pos), kw)
        node.meta["val"] = val
        narrow = _narrowing_cast(inst, a) if promote else None
        if narrow is not None:  # a rounding the program asks for stays one
            with mode:
                low = val.to(narrow)
                back = low.to(val.dtype)
            node = graph.call_function(torch.ops.aten._to_copy.default, (node,),
                                       {"dtype": narrow})
            node.meta["val"] = low
            node = graph.call_function(torch.ops.aten._to_copy.default, (node,),
                                       {"dtype": val.dtype})
            node.meta["val"] = back
        nodes[id(a)] = node
    root = nodes[id(inst.root)]
    roots = tuple(nodes[id(r)] for r in inst.roots)
    graph.output(roots if roots else root)
    return Built(fx.GraphModule(torch.nn.Module(), graph), root, inputs, nodes, roots)


#: the explicit casts :func:`_narrowing_cast` reads
_CASTS = (torch.ops.aten._to_copy.default,)


def _narrowing_cast(inst: Instance, a: App) -> Optional[torch.dtype]:
    """The dtype of an explicit cast of ``a`` (``_to_copy(x, dtype=d)``) to a
    floating dtype narrower than float32 (float16, bfloat16): in the float64
    evaluation (``build(promote=True)``) the value is still rounded to it,
    since the program asks for that rounding (a fake quantization, a round
    trip), unlike the roundings of computing in a narrow dtype."""
    if a.target not in _CASTS:
        return None
    for t in a.args[1:]:
        v = inst.value(t) if isinstance(t, (Leaf, Lit)) and not (
            isinstance(t, Leaf) and t.kind != "const") else None
        if isinstance(v, torch.dtype) and v in (torch.float16, torch.bfloat16):
            return v
    return None


#: The most characters of an exception's message a report note quotes.
NOTE_CHARS = 300


@dataclass
class Outcome:
    """What happened to one instance (see the module docstring). ``line``:
    the rule's failing assert (declined); ``max_abs``/``max_rel``/``tolerance``
    for compared outputs; ``replacement``: the rewritten expression;
    ``expected``/``got``: (shape, dtype) of the outputs."""

    kind: str
    detail: str = ""
    line: Optional[int] = None
    max_abs: Optional[float] = None
    max_rel: Optional[float] = None
    tolerance: Optional[Tuple[float, float]] = None
    replacement: Optional[str] = None
    expected: Optional[Tuple[tuple, str]] = None
    got: Optional[Tuple[tuple, str]] = None
    #: a multi-root rule: the root whose output differs ("root 2 of 3:
    #: linear(x, wk, bk)"); None for a single-root rule
    root: Optional[str] = None
    #: max|ref| of the compared output (the absolute tolerance is ``atol``
    #: times it: :data:`TOLERANCE_RULE`)
    scale: Optional[float] = None

    @property
    def is_counterexample(self) -> bool:
        return self.kind in COUNTEREXAMPLES

    @property
    def fired(self) -> bool:
        return self.kind in ("agree",) + COUNTEREXAMPLES


def _scale(r: torch.Tensor) -> float:
    """max|r| over its finite values (0 when none)."""
    fin = r[torch.isfinite(r)]
    return float(fin.abs().max()) if fin.numel() else 0.0


def compare_outputs(ref: torch.Tensor, got: torch.Tensor, zero_sign: bool = False,
                    floor: float = 0.0) -> Tuple[bool, float, float, str]:
    """``(ok, max_abs, max_rel, message)``: one output judged as
    :func:`pypm_verified.torch.check.compare` does, the absolute tolerance
    relative to the output's magnitude: same shape and dtype, non-finite
    values in the same places, ``|got - ref| <= atol * max|ref| + rtol *
    |ref|`` elsewhere (:data:`TOLERANCE_RULE`; ``TOLERANCE`` by dtype), so
    that outputs of small magnitude are not all "equal" and large ones do not
    fail for their rounding; ``max|ref|`` is taken at least ``floor``
    (:func:`input_scale`); ``max_rel`` is relative to the reference's
    largest magnitude."""
    if ref.shape != got.shape or ref.dtype != got.dtype:
        return (False, float("nan"), float("nan"),
                f"output {tuple(ref.shape)} {ref.dtype} became {tuple(got.shape)} {got.dtype}")
    if not ref.is_floating_point():
        ok = torch.equal(ref, got)
        return ok, 0.0 if ok else float("nan"), 0.0, "" if ok else "integer outputs differ"
    atol, rtol = tolerance_of(ref.dtype)
    r, o = ref.double(), got.double()
    finite, nan = torch.isfinite(r), torch.isnan(r)
    inf = ~finite & ~nan
    if not torch.equal(finite, torch.isfinite(o)) or not torch.equal(nan, torch.isnan(o)) \
            or not torch.equal(r[inf], o[inf]):
        n = int((finite != torch.isfinite(o)).sum() + (nan != torch.isnan(o)).sum())
        return False, float("inf"), float("inf"), \
            f"non-finite values differ ({n} element(s): NaN or inf in one output only)"
    if zero_sign:  # -0.0 and 0.0 are told apart (1/x, copysign, atan2 do)
        both = (r == 0) & (o == 0)
        if not torch.equal(torch.signbit(r[both]), torch.signbit(o[both])):
            n = int((torch.signbit(r[both]) != torch.signbit(o[both])).sum())
            return False, None, None, f"signed zeros differ ({n} element(s): -0.0 vs 0.0)"
    diff = (r - o).abs()[finite]
    if diff.numel() == 0:
        return True, 0.0, 0.0, ""
    mabs = float(diff.max())
    scale = float(r[finite].abs().max())
    mrel = mabs / scale if scale > 0 else 0.0
    scale = max(scale, floor)
    bad = diff > atol * scale + rtol * r[finite].abs()
    if bool(bad.any()):
        return False, mabs, mrel, (f"max abs error {mabs:.3g} (rel {mrel:.3g}) exceeds atol "
                                   f"{atol:g}*max|ref| ({scale:.3g}) + rtol {rtol:g}*|ref| at "
                                   f"{int(bad.sum())} of {diff.numel()} element(s)")
    return True, mabs, mrel, ""


def closer_to_exact(exact: torch.Tensor, ref: torch.Tensor, got: torch.Tensor,
                    floor: float = 0.0) -> bool:
    """Whether ``got`` is, element by element, at least as close to the
    ``exact`` (float64) result as the original ``ref`` is, up to ``ref``'s
    dtype tolerance; non-finite values must be those of ``exact`` or of
    ``ref``. (A rewrite may compute *more* precisely than the subgraph it
    replaces, e.g. SDPA in float64 where the original rounded a softmax to
    float32.)"""
    if got.shape != ref.shape or got.dtype != ref.dtype or exact.shape != ref.shape:
        return False
    atol, rtol = TOLERANCE.get(ref.dtype, (1e-4, 1e-3))
    e, a, b = exact.double(), ref.double(), got.double()
    fin = torch.isfinite(e)
    if bool((~fin).any()):
        same = (b[~fin] == e[~fin]) | (b[~fin] == a[~fin]) | (
            torch.isnan(b[~fin]) & (torch.isnan(e[~fin]) | torch.isnan(a[~fin])))
        if not bool(same.all()):
            return False
    ea = (a - e).abs()[fin]
    eb = (b - e).abs()[fin]
    ea = torch.where(torch.isfinite(ea), ea, torch.full_like(ea, float("inf")))
    # the rewrite may miss a finite exact value only where the original
    # misses it too (both overflow, say): no worse there
    off = ~torch.isfinite(eb)
    if bool((off & torch.isfinite(ea)).any()):
        return False
    eb = torch.where(off, torch.full_like(eb, float("inf")), eb)
    return bool((eb <= ea + atol * max(_scale(e), floor) + rtol * e[fin].abs()).all())


# ----------------------------------------- numeric confirmation of "differs"

#: the most input elements (all inputs together) a numeric counterexample of
#: the symbolic check is tried with (its values are reported in full)
MAX_ELEMENTS = 4096

#: the random inputs tried at each candidate's sizes: (seed, scale of normal values)
RANDOM_TRIES = ((0, 1.0), (1, 1.0), (2, 4.0))


def _placeholders(nodes) -> Dict[str, fx.Node]:
    out, seen, todo = {}, set(), list(nodes)
    while todo:
        n = todo.pop()
        if not isinstance(n, fx.Node) or n in seen:
            continue
        seen.add(n)
        if n.op == "placeholder":
            out[n.name] = n
        todo.extend(n.all_input_nodes)
    return out


def evaluate_fx(node: fx.Node, env: Dict[str, torch.Tensor], promote: bool = False,
                memo: Optional[dict] = None):
    """The value of the FX expression ``node`` with torch, placeholders read
    from ``env`` by name; ``promote``: floating dtype arguments float64."""
    memo = {} if memo is None else memo

    def val(a):
        if isinstance(a, fx.Node):
            if a not in memo:
                if a.op == "placeholder":
                    memo[a] = env[a.name]
                elif a.op == "call_function":
                    args, kwargs = fx.node.map_aggregate((a.args, a.kwargs), val)
                    memo[a] = a.target(*args, **kwargs)
                else:
                    raise ValueError(f"FX node {a.op} has no value")
            return memo[a]
        return _promoted(a) if promote else a
    return val(node)


def _tensor_for(ph: fx.Node, shape, values, promote: bool, seed: int,
                scale: float) -> torch.Tensor:
    v = ph.meta.get("val")
    dtype = v.dtype if isinstance(v, torch.Tensor) else torch.float32
    if dtype.is_floating_point and promote:
        dtype = torch.float64
    shape = tuple(int(n) for n in shape)
    if values is not None:
        t = torch.tensor(values, dtype=torch.float64).reshape(shape)
        if dtype == torch.bool:
            return t > 0  # the semantics' boolean: a real > 0
        if not dtype.is_floating_point:
            return t.floor().to(dtype)  # the semantics' integer: the floor of a real
        return t.to(dtype)
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g, dtype=torch.float64) * scale).to(dtype)
    return _input(shape, dtype, g)


def _tolerance(*dtypes) -> Tuple[float, float]:
    tols = [TOLERANCE.get(d, (1e-4, 1e-3)) if d.is_floating_point else (0.0, 0.0)
            for d in dtypes]
    return max(t[0] for t in tols), max(t[1] for t in tols)


def _numeric_difference(ref, got):
    """``(differs, message, max_abs, max_rel, tolerance)``: whether ``got``
    differs from ``ref`` as a difference over the reals would show: another
    shape, or finite values apart by more than the tolerance of the less
    precise dtype. Non-finite values in one output only are not taken for
    one (an overflow or a domain error, not a real difference)."""
    if not isinstance(ref, torch.Tensor) or not isinstance(got, torch.Tensor):
        if isinstance(ref, (tuple, list)) and isinstance(got, (tuple, list)) \
                and len(ref) == len(got):
            for i, (r, g) in enumerate(zip(ref, got)):
                res = _numeric_difference(r, g)
                if res[0]:
                    return (True, f"output {i}: {res[1]}") + res[2:]
            return False, "the outputs agree within the tolerance", None, None, None
        return True, f"output {type(ref).__name__} became {type(got).__name__}", None, None, None
    if ref.shape != got.shape:
        return (True, f"output shape {tuple(ref.shape)} became {tuple(got.shape)}", None,
                None, None)
    tol = _tolerance(ref.dtype, got.dtype)
    r, o = ref.double(), got.double()
    fr, fo = torch.isfinite(r), torch.isfinite(o)
    both = fr & fo
    if not torch.equal(fr, fo):
        note = (f"non-finite values in one output only ({int((fr != fo).sum())} element(s)): "
                "an overflow or a domain error, not a difference over the reals")
    else:
        note = ""
    if not bool(both.any()):
        return False, note or "no finite values to compare", None, None, tol
    diff = (r - o).abs()[both]
    mabs = float(diff.max())
    scale = float(r[both].abs().max())
    mrel = mabs / scale if scale > 0 else 0.0
    bad = diff > tol[0] + tol[1] * r[both].abs()
    if bool(bad.any()):
        return (True, f"max abs error {mabs:.3g} (rel {mrel:.3g}) exceeds atol {tol[0]:g} + "
                f"rtol {tol[1]:g}*|ref| at {int(bad.sum())} of {diff.numel()} element(s)",
                mabs, mrel, tol)
    return (False, note or f"agree within the tolerance (max abs error {mabs:.3g})", mabs,
            mrel, tol)


def _summary(t) -> list:
    if isinstance(t, torch.Tensor):
        return [list(t.shape), str(t.dtype).replace("torch.", "")]
    return [type(t).__name__]


def confirm_difference(original: fx.Node, replacement: fx.Node, candidates,
                       siblings=()) -> Tuple[Optional[dict], List[str]]:
    """A concrete input on which ``original`` and ``replacement`` (FX
    expressions over the same placeholders) differ when evaluated with
    torch: ``(counterexample, notes)``, the counterexample None when no
    candidate confirms a difference (``notes`` say why, one per candidate).

    ``candidates``: ``(source, sizes, values, at_instance)`` with ``sizes``
    placeholder name -> shape, ``values`` name -> the elements in row-major
    order (None: random normal values, :data:`RANDOM_TRIES`) and
    ``at_instance`` whether the sizes are the instance's (a failure of the
    replacement elsewhere counts only where neither side takes size
    arguments, :data:`_SIZE_ARGUMENT_OPS`). A difference of values is
    preferred to a failure. Each is evaluated
    with floating inputs and dtype arguments in float64 (the closest to the
    reals torch has); where torch rejects that, in the inputs' own dtypes.
    The original must evaluate (``siblings`` too: the other roots of a
    multi-root original); the replacement then differs when it fails, has
    another shape, or has finite values apart by more than the tolerance
    (:data:`pypm_verified.torch.check.TOLERANCE`, of the less precise of the
    two dtypes). The counterexample: ``source``, ``inputs`` (name, shape,
    dtype, ``values`` in row-major order), ``kind`` ("disagree" or
    "error"), ``message``, ``max_abs``, ``max_rel``, ``tolerance``,
    ``expected``/``got`` (shape, dtype)."""
    phs = _placeholders([original, replacement, *siblings])
    literal = _has_size_literals([original, replacement, *siblings])
    notes: List[str] = []
    failure = None
    for cand in candidates:
        source, sizes, values = cand[:3]
        at_instance = len(cand) > 3 and cand[3]
        if any(name not in sizes for name in phs):
            notes.append(f"{source}: no sizes for {sorted(set(phs) - set(sizes))}")
            continue
        total = sum(math.prod(int(n) for n in sizes[name]) for name in phs)
        if any(int(n) < 0 for name in phs for n in sizes[name]) or total > MAX_ELEMENTS:
            notes.append(f"{source}: sizes out of range ({total} elements)")
            continue
        tries = [(None, 0, 1.0)] if values is not None else \
            [(None, seed, sc) for seed, sc in RANDOM_TRIES]
        for _, seed, scale in tries:
            cex, note = _confirm_one(original, replacement, siblings, phs, sizes, values, seed,
                                     scale, source if values is not None else
                                     f"{source} (normal values x{scale:g}, seed {seed})")
            if cex is not None and cex["kind"] == "error" and literal and not at_instance:
                # the graph's size arguments are the instance's: at other sizes
                # the replacement may fail for them alone, not for the structure
                notes.append(f"{cex['source']}: {cex['message']} (at sizes other than the "
                             "instance's, with the instance's size arguments: not counted)")
                continue
            if cex is not None and cex["kind"] == "disagree":
                return cex, notes
            if cex is not None:
                failure = failure or cex
                continue
            notes.append(note)
    return failure, notes


#: ops with arguments that are sizes of the instance (a shape, a normalized
#: shape, split sizes): at other sizes they may fail where the structure
#: (:mod:`.smt`, which reads them as the inputs' sizes) is well-defined
_SIZE_ARGUMENT_OPS = frozenset(
    getattr(getattr(torch.ops.aten, op), ov) for op, ov in (
        ("rms_norm", "default"), ("layer_norm", "default"), ("expand", "default"),
        ("view", "default"), ("reshape", "default"), ("_unsafe_view", "default"),
        ("split_with_sizes", "default"), ("split", "Tensor"), ("squeeze", "dim"),
        ("native_layer_norm", "default"), ("new_zeros", "default"), ("new_ones", "default"),
        ("new_full", "default")))


def _has_size_literals(nodes) -> bool:
    seen, todo = set(), list(nodes)
    while todo:
        n = todo.pop()
        if not isinstance(n, fx.Node) or n in seen:
            continue
        seen.add(n)
        if n.op == "call_function" and n.target in _SIZE_ARGUMENT_OPS:
            return True
        todo.extend(n.all_input_nodes)
    return False


def _confirm_one(original, replacement, siblings, phs, sizes, values, seed, scale, source):
    note = ""
    for promote in (True, False):
        try:
            env = {name: _tensor_for(ph, sizes[name], None if values is None else values[name],
                                     promote, seed, scale) for name, ph in phs.items()}
        except Exception as e:  # noqa: BLE001 -- values that fit no tensor
            return None, f"{source}: no input tensors: {first_line(e, NOTE_CHARS)}"
        memo: dict = {}
        with torch.no_grad(), _quiet_fake_tensors():
            try:
                ref = evaluate_fx(original, env, promote, memo)
                for s in siblings:
                    evaluate_fx(s, env, promote, memo)
            except Exception as e:  # noqa: BLE001 -- torch rejects the original there
                note = (f"{source}: the original fails: {type(e).__name__}: "
                        f"{first_line(e, NOTE_CHARS)}")
                continue
            try:
                got = evaluate_fx(replacement, env, promote, {})
            except Exception as e:  # noqa: BLE001
                if promote:
                    note = (f"{source}: the replacement fails in float64: "
                            f"{type(e).__name__}: {first_line(e, NOTE_CHARS)}")
                    continue
                return _cex(source, env, "error", f"the replacement fails: {type(e).__name__}: "
                            f"{first_line(e, NOTE_CHARS)}", None, None, None, ref, None), ""
        differs, msg, mabs, mrel, tol = _numeric_difference(ref, got)
        if differs:
            return _cex(source, env, "disagree", msg, mabs, mrel, tol, ref, got), ""
        return None, f"{source}: {msg}"
    return None, note


def _cex(source, env, kind, message, mabs, mrel, tol, ref, got) -> dict:
    inputs = []
    for name, t in env.items():
        flat = t.reshape(-1).tolist()
        inputs.append({"name": name, "shape": list(t.shape),
                       "dtype": str(t.dtype).replace("torch.", ""), "values": flat})
    return {"source": source, "inputs": inputs, "kind": kind, "message": message,
            "max_abs": mabs, "max_rel": mrel, "tolerance": list(tol) if tol else None,
            "expected": _summary(ref), "got": None if got is None else _summary(got)}


def counterexample_text(c: dict, max_values: int = 4) -> str:
    """A numeric counterexample of the symbolic check in one line."""
    parts = []
    for i in c["inputs"]:
        vs = i["values"]
        shown = ", ".join(f"{v:.6g}" if isinstance(v, float) else repr(v)
                          for v in vs[:max_values])
        more = ", ..." if len(vs) > max_values else ""
        parts.append(f"{i['name']}: {tuple(i['shape'])} {i['dtype']} = [{shown}{more}]")
    return f"{'; '.join(parts)} ({c['source']}): {c['message']}"


@dataclass
class StructureProof:
    """The symbolic check of one structure (the matched subgraph and its
    replacement, input ranks fixed): ``free`` for every size; where that
    differs, ``like``: per size pattern of a fired instance (which axes are
    1, which are equal), the proof for the sizes with that pattern."""
    original: str
    replacement: str
    ranks: Dict[str, int]
    free: "smt.Proof"
    like: Dict[tuple, "smt.Proof"] = field(default_factory=dict)
    #: the time its proofs took (and the rerun of its instances, when proved
    #: apart from the instance search: :func:`.checker.prove_structure`)
    seconds: float = 0.0
    #: a counterexample of the symbolic check replayed on the rule: the
    #: structure's instance at the counterexample's sizes and values, matched
    #: and rewritten by the rule as any instance is, disagreeing
    #: (:func:`.checker.replay_counterexample`; a report Counterexample)
    replayed: object = None


def _size_pattern(shapes: Dict[str, tuple]) -> tuple:
    sizes = [n for k in sorted(shapes) for n in shapes[k]]
    return tuple((n == 1, sizes.index(n)) for n in sizes)


def _render_fx(node, depth: int = 0, split_sizes: bool = True) -> str:
    """The expression of ``node``; without ``split_sizes``, a
    ``split_with_sizes``'s integer sizes are shown as ``sizes`` (the
    structure of a proof: :func:`.smt._split_sizes` reads them as sizes
    of the inputs)."""
    if not isinstance(node, fx.Node):
        if isinstance(node, (list, tuple)):
            return "[" + ", ".join(_render_fx(a, depth, split_sizes) for a in node) + "]"
        return repr(node)
    if node.op == "placeholder" or depth > 12:
        return node.name
    t = node.target
    name = getattr(getattr(t, "overloadpacket", None), "__name__", None) \
        or getattr(t, "__name__", None) or str(t)
    args = [_render_fx(a, depth + 1, split_sizes) for a in node.args]
    if not split_sizes and t == torch.ops.aten.split_with_sizes.default and len(args) > 1:
        args[1] = "sizes"
    args += [f"{k}={_render_fx(v, depth + 1, split_sizes)}" for k, v in node.kwargs.items()]
    return f"{name}({', '.join(args)})"


class _Probe:
    """The rule's compiled body, remembering the line of a failing assert."""

    def __init__(self, run):
        self.run = run  # a compiled body, or the Rule itself (calling it runs its body)
        codes = set(getattr(run, "codes", ()))
        for c in ([run.__code__] if hasattr(run, "__code__") else list(codes)):
            codes |= ast_transform.code_objects(c)
        self.codes = frozenset(codes)
        self.line: Optional[int] = None

    def __call__(self, *args, **kwargs):
        try:
            return self.run(*args, **kwargs)
        except AssertionError as e:
            found, line = ast_transform.error_line(e.__traceback__, self.codes)
            self.line = line if found else None
            raise


class RuleRunner:
    """Runs ``rule`` of ``pattern`` on instances (:meth:`run`). ``program``:
    a variant of the pattern's table to match with instead (a guard dropped);
    ``body``: a variant of the rule's compiled body; ``engine``: "verified"
    or "reference". ``defer``: with ``symbolic``, the structures are not
    proved but collected (:attr:`pending`), to be proved apart; ``only``:
    prove that structure (a key of :attr:`proofs`) and no other."""

    def __init__(self, pattern, rule, engine: str = "verified", program=None, body=None,
                 symbolic: bool = False, defer: bool = False, only: Optional[tuple] = None):
        self.pattern = pattern
        self.engine = engine
        #: with ``symbolic``, every structure the rule fired and agreed on is
        #: proved (:mod:`.smt`): structure key -> :class:`StructureProof`
        self.symbolic = symbolic
        self.proofs: Dict[tuple, "StructureProof"] = {}
        #: with ``defer``: structure key -> {size pattern -> the first instance
        #: met with it, pickled (:func:`.instances.dump_instance`)}, in the
        #: order met (the first: the structure's first instance)
        self.defer, self.only = defer, only
        self.pending: Dict[tuple, Dict[tuple, bytes]] = {}
        self._inst: Optional[Instance] = None
        #: the input tensors of the last run (in placeholder order), and the
        #: Python code (FX) of its subgraph and of the rewritten graph (None
        #: until the rule fired); a multi-root rule's weights folded by
        #: ``ctx.fold_cat`` are in :attr:`last_extra`
        self.last_inputs: List[torch.Tensor] = []
        self.last_code: Tuple[Optional[str], Optional[str]] = (None, None)
        self.last_extra: Dict[str, torch.Tensor] = {}
        self.last_names: List[str] = []
        #: a multi-root pattern (theories/Multi.v): matched with
        #: engines.multi and fired with the driver's fire_multi
        self.multi = bool(getattr(pattern, "is_multi", False))
        if self.multi and program is not None:
            raise ValueError("a variant table of a multi-root pattern is not supported")
        self.pset = None if self.multi else \
            PatternSet([program if program is not None else pattern], engine)
        self.names = (pattern.term_params, pattern.op_params) if program is not None else None
        self.probe = _Probe(body if body is not None else rule)
        self.rule = rule.with_body(self.probe)

    def _values(self, d: Driver, m) -> dict:
        if self.names is None:
            values = {k: d.bound_value(t) for k, t in m.bindings.items()}
            values.update(m.functions)
            return values
        tn, fn = self.names
        values = {tn[v]: d.bound_value(t) for v, t in m.bindings.items()}
        values.update({fn[F]: op for F, op in m.functions.items()})
        return values

    def _fire(self, fire):
        """``(fire(), None)``, or ``(None, the error Outcome)`` if it raised."""
        try:
            return fire(), None
        except RewriteError as e:
            return None, Outcome("error", f"invalid replacement: {first_line(e, NOTE_CHARS)}")
        except PatternError as e:
            return None, Outcome("error", first_line(e, NOTE_CHARS))
        except Exception as e:  # noqa: BLE001 -- a rule may raise anything
            return None, Outcome("error", f"the rule raised {type(e).__name__}: "
                                 f"{first_line(e, NOTE_CHARS)}",
                                 line=_raise_line(e, self.probe.codes))

    def run(self, inst: Instance, built: Optional[Built] = None, prove: bool = True) -> Outcome:
        """The :class:`Outcome` of the rule on ``inst``; ``prove``: prove the
        structure of an agreeing instance (off while shrinking a
        counterexample: its candidates are not instances of the run)."""
        self._inst = inst
        with _quiet_fake_tensors():
            return self._run(inst, built, prove)

    def _run(self, inst: Instance, built: Optional[Built], prove: bool = True) -> Outcome:
        self.last_inputs, self.last_code, self.last_extra = [], (None, None), {}
        try:
            b = built or build(inst)
        except InvalidInstance as e:
            return Outcome("invalid", str(e))
        self.last_inputs = list(b.inputs)
        self.last_names = [n.name for n in b.gm.graph.nodes if n.op == "placeholder"]
        original_code = b.gm.code
        with torch.no_grad():
            try:
                expected = b.gm(*b.inputs)
            except Exception as e:  # noqa: BLE001
                return Outcome("invalid", f"the subgraph fails at run time: "
                                          f"{type(e).__name__}: {first_line(e, NOTE_CHARS)}")
        d = Driver(b.gm, [self.pattern], engine=self.engine, target="cpu", recompile=False,
                   check_profitability=False)
        d.prepare()
        if self.multi:
            return self._run_multi(inst, b, d, expected, prove)
        term = d.tg.term.get(b.root)
        try:
            m = self.pset.match(0, term) if term is not None else None
        except OutOfFuel:
            return Outcome("no_match", "out of fuel")
        if m is None:
            return Outcome("no_match")
        values = self._values(d, m)
        self.probe.line = None
        original = None
        if self.symbolic and prove:  # the matched subgraph, before the rule edits it
            original = fx.Graph()
            original_root = original.graph_copy(b.gm.graph, {})
        changed, error = self._fire(lambda: d.fire_at(self.rule, values, b.root))
        if error is not None:  # the driver's own path raised
            return error
        if changed is None:
            why = "an assert failed" if self.probe.line is not None else \
                "the rule returned no replacement"
            return Outcome("declined", why, line=self.probe.line)
        out = next(n for n in b.gm.graph.nodes if n.op == "output")
        new_root = out.args[0]
        replacement = _render_fx(new_root)
        b.gm.recompile()
        self.last_code = (original_code, b.gm.code)
        with torch.no_grad():
            try:
                got = b.gm(*b.inputs)
            except Exception as e:  # noqa: BLE001
                return Outcome("error", f"the replacement fails at run time: "
                               f"{type(e).__name__}: {first_line(e, NOTE_CHARS)}",
                               replacement=replacement)
        floor = input_scale(b.inputs)
        ok, mabs, mrel, msg = compare_outputs(expected, got, zero_sign=inst.signed_zeros,
                                              floor=floor)
        tol = tolerance_of(expected.dtype)
        if not ok and expected.shape == got.shape and expected.dtype == got.dtype \
                and expected.is_floating_point() and not msg.startswith("signed zeros"):
            wide = _computed_scale(inst, b.gm, b.inputs)
            if wide > floor:
                floor = wide
                ok, mabs, mrel, msg = compare_outputs(expected, got,
                                                      zero_sign=inst.signed_zeros, floor=floor)
        if not ok and expected.shape == got.shape and expected.dtype == got.dtype \
                and expected.is_floating_point() and not msg.startswith("signed zeros"):
            exact = _exact(inst)
            if exact is not None and closer_to_exact(exact, expected, got, floor):
                ok, msg = True, (f"differs from the original by {mabs:.3g} but is at least as "
                                 "close to the float64 evaluation (more precise)")
        shapes = ((tuple(expected.shape), str(expected.dtype)), (tuple(got.shape), str(got.dtype)))
        if ok and original is not None:
            self._prove(original_root, new_root, b, replacement)
        scale = max(_scale(expected.double()), floor) if expected.is_floating_point() \
            else None
        return Outcome("agree" if ok else "disagree", msg, None, mabs, mrel, tol, replacement,
                       *shapes, scale=scale)

    def _run_multi(self, inst: Instance, b: Built, d: Driver, expected,
                   prove: bool = True) -> Outcome:
        """A multi-root rule: matched at the first root, fired through the
        driver's ``fire_multi`` (every tensor input counts as a parameter of
        the program, so ``ctx.fold_cat`` may concatenate inputs), and every
        root's output compared."""
        from ..engines import multi
        placeholders = [n for n in b.gm.graph.nodes if n.op == "placeholder"]
        d.weights = {n.name: t for n, t in zip(placeholders, b.inputs)}
        d.user_inputs = frozenset()
        term = d.tg.term.get(b.roots[0])
        try:
            m = multi.match_multi(self.pattern, term, self.engine) if term is not None else None
        except OutOfFuel:
            return Outcome("no_match", "out of fuel")
        if m is None:
            return Outcome("no_match")
        values = {k: d.bound_value(t) for k, t in m.bindings.items()}
        values.update(m.functions)
        self.probe.line = None
        original = originals = None
        if self.symbolic and prove:
            original = fx.Graph()
            originals = original.graph_copy(b.gm.graph, {})
        declined: List[Tuple[str, str]] = []
        changed, error = self._fire(lambda: d.fire_multi(self.rule, values, m, declined))
        if error is not None:
            return error
        if changed is None:
            why = "an assert failed" if self.probe.line is not None else \
                (declined[0][1] if declined else "the rule returned no replacement")
            return Outcome("declined", why, line=self.probe.line)
        out = next(n for n in b.gm.graph.nodes if n.op == "output")
        new_roots = tuple(out.args[0])
        parts = [_render_fx(r) for r in new_roots]
        replacement = "(" + ", ".join(parts) + ")"
        original_code = b.gm.code
        b.gm.recompile()
        self.last_code = (original_code, b.gm.code)
        env = {n.name: t for n, t in zip(placeholders, b.inputs)}
        env.update({n.name: t for n, t in d.new_constants})
        self.last_extra = {n.name: t for n, t in d.new_constants}
        args = [env[n.name] for n in b.gm.graph.nodes if n.op == "placeholder"]
        with torch.no_grad():
            try:
                got = b.gm(*args)
            except Exception as e:  # noqa: BLE001
                return Outcome("error", f"the replacement fails at run time: "
                               f"{type(e).__name__}: {first_line(e, NOTE_CHARS)}",
                               replacement=replacement)
        exact = None
        n_roots = len(expected)
        worst = None
        floor = input_scale(b.inputs)
        for i, (e, g) in enumerate(zip(expected, got)):
            ok, mabs, mrel, msg = compare_outputs(e, g, zero_sign=inst.signed_zeros,
                                                  floor=floor)
            if not ok and e.shape == g.shape and e.dtype == g.dtype \
                    and e.is_floating_point() and not msg.startswith("signed zeros"):
                wide = _computed_scale(inst, b.gm, args)
                if wide > floor:
                    floor = wide
                    ok, mabs, mrel, msg = compare_outputs(e, g, zero_sign=inst.signed_zeros,
                                                          floor=floor)
            if not ok and e.shape == g.shape and e.dtype == g.dtype \
                    and e.is_floating_point() and not msg.startswith("signed zeros"):
                exact = _exact(inst) if exact is None else exact
                if exact is not None and closer_to_exact(exact[i], e, g, floor):
                    ok = True
            if not ok:
                where = f"root {i + 1} of {n_roots}: {render(inst, inst.roots[i])}"
                tol = tolerance_of(e.dtype)
                return Outcome("disagree", f"{where}: {msg}", None, mabs, mrel, tol,
                               replacement, (tuple(e.shape), str(e.dtype)),
                               (tuple(g.shape), str(g.dtype)), root=where,
                               scale=max(_scale(e.double()), floor)
                               if e.is_floating_point() else None)
            if worst is None or (mabs is not None and mabs > (worst[0] or 0)):
                worst = (mabs, mrel, tolerance_of(e.dtype), e, g)
        if originals is not None:
            self._prove_multi(tuple(originals), new_roots, b, d, parts)
        mabs, mrel, tol, e, g = worst
        return Outcome("agree", "", None, mabs, mrel, tol, replacement,
                       (tuple(e.shape), str(e.dtype)), (tuple(g.shape), str(g.dtype)))

    def _prove_multi(self, originals, new_roots, b: Built, d: Driver, parts) -> None:
        """Each root's replacement proved against its original root; the
        weights ``ctx.fold_cat`` concatenated are read as the ``cat`` of those
        inputs (which they are: :meth:`Driver.fold_cat`)."""
        g = b.gm.graph
        folded = {n: key for key, n in d._folded.items()}
        by_name = {n.name: n for n in g.nodes if n.op == "placeholder"}
        fused = set()
        for n in list(g.nodes):
            if n.op == "placeholder" and n in folded:
                names, dim = folded[n]
                with g.inserting_after(n):
                    c = g.call_function(torch.ops.aten.cat.default,
                                        ([by_name[x] for x in names], dim))
                c.meta["val"] = n.meta["val"]
                n.replace_all_uses_with(c)
                fused.add(n.name)
        for o, r in zip(originals, new_roots):
            self._prove(o, r, b, _render_fx(r, split_sizes=False), skip=fused,
                        siblings=[x for x in originals if x is not o])

    def _prove(self, original_root: fx.Node, new_root: fx.Node, b: Built,
               replacement: str, skip=frozenset(), siblings=()) -> None:
        shapes = {n.name: tuple(n.meta["val"].shape) for n in b.gm.graph.nodes
                  if n.op == "placeholder" and n.name not in skip}
        key = (_render_fx(original_root), replacement,
               tuple(sorted((k, len(v)) for k, v in shapes.items())))
        if self.defer:
            seen = self.pending.setdefault(key, {})
            pat = _size_pattern(shapes)
            if pat not in seen:
                seen[pat] = dump_instance(self._inst)
            return
        if self.only is not None and key != self.only:
            return
        from . import smt  # z3: only where a proof is asked for (--no-symbolic needs none)
        sp = self.proofs.get(key)
        if sp is None:
            free = smt.prove(original_root, new_root, shapes,
                                  **({"siblings": siblings} if siblings else {}))
            sp = self.proofs[key] = StructureProof(key[0], replacement, dict(key[2]), free)
        # not proved for every size (differs, or z3 gave up): then for the
        # sizes of instances like this one
        if sp.free.status in ("differs", "unknown"):
            pat = _size_pattern(shapes)
            if pat not in sp.like:
                sp.like[pat] = smt.prove(original_root, new_root, shapes,
                                              like_instance=True,
                                              **({"siblings": siblings} if siblings else {}))


def shrink(inst: Instance, fails, outcome: Outcome, max_runs: int = 40):
    """A smaller counterexample: each drawn size tried at 1 and 2 (largest
    first), then the instance in float32, kept while ``fails(candidate)``
    returns an outcome (the new one) rather than None. Returns ``(instance,
    outcome)``."""
    best, out, runs = inst, outcome, 0
    for d in inst.free_dims():
        for s in (1, 2):
            if runs >= max_runs or s >= best.sizes[d]:
                continue
            cand = best.with_sizes({**best.sizes, d: s})
            runs += 1
            o = fails(cand)
            if o is not None:
                best, out = cand, o
                break
    if best.dtype != torch.float32 and runs < max_runs:
        cand = best.with_dtype(torch.float32)
        o = fails(cand)
        if o is not None:
            best, out = cand, o
    return best, out


def _exact(inst: Instance) -> Optional[torch.Tensor]:
    try:
        b = build(inst, promote=True)
        with torch.no_grad():
            return b.gm(*b.inputs)
    except Exception:  # noqa: BLE001 -- no exact evaluation: judged as is
        return None


def _raise_line(e: BaseException, codes) -> Optional[int]:
    tb, line = e.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code in codes:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line
