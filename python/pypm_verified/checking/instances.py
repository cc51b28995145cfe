"""Instances from patterns: concrete PyTorch subgraphs a pattern can match.

An :class:`Instance` is generated from a pattern's lowered core table
(``pattern.program``, :mod:`pypm_verified.core.syntax`) in three steps, by
:class:`InstanceGenerator`:

1. **Structure.** The root definition's body is unfolded into a term of
   operators: an alternate is chosen at every definition (uniformly, so every
   alternate of every pattern it reaches is drawn), pattern calls are
   unfolded with their parameters aliasing the caller's variables, a match
   constraint ``x <= P(...)`` makes ``x`` *be* the unfolding of ``P`` where
   ``x`` occurs, ``∃x`` makes a fresh variable, an operator variable ``F(...)``
   becomes an operator declared with a torch target whose arity fits and,
   when a guard says ``F.op_class == c``, whose class is ``c`` (the operators
   of :mod:`pypm_verified.torch.ops`). Recursion unfolds up to ``max_depth``
   calls, then takes the alternates closest to a non-recursive one. A pattern
   variable that stays a leaf is an input: a tensor, or -- where the op schema
   allows (a later operand of a pointwise op, an optional tensor, a scalar
   argument) -- a Python constant or None.
2. **Shapes.** Sizes are symbols (:class:`Dim`, unified as in type
   inference), assigned top-down from a root shape of a random rank (biased
   to the ranks the pattern's guards name) by a shape rule per ATen op:
   matmul/mm/bmm/linear/addmm/SDPA contract a fresh axis and broadcast batch
   axes, transpose/t/permute move axes, reductions insert reduced axes,
   pointwise ops broadcast (an operand may get size-1 axes or fewer leading
   axes -- *either* operand, so a mask may also be the larger one), views
   merge or split the leading axes (those around one ``bmm`` agree, as in a
   decomposed matmul, whose expands then keep their operands' shapes; a
   keepdim reduction broadcasts along its reduced axis, which the other
   operand carries, so ``x - mean(x, -1, keepdim)`` does not force that axis
   to 1), other ops keep the shape. The axes reductions, norms, softmaxes
   and contractions read are recorded (:attr:`Instance.axes`). The size
   equations of the guards met and of the rule's asserts (``w.shape[0] ==
   x.shape[-1]``, ``x.shape[-1] == 64``; :mod:`.hints`) are then made true
   by unifying their symbols (in most draws), and every free size is drawn,
   different sizes for different symbols where possible (so an axis swap
   changes shapes), with size 1 as an edge case.
3. **Types and constants.** A dtype for the instance (float32, float64,
   float16, bfloat16, and now and then int64), a different float one for
   an input now and then (mixed dtypes), bool for ``mask``/``condition`` operands; constants from the
   rule's literals (:mod:`.hints`) most of the time, else from edge values
   (0, 1, -1, 0.5, 2, inf, nan, random; an axis ``dim`` is -1 half the time);
   how the input values are drawn (:data:`VALUE_MIXES`: normal, rows nearly
   constant along a reduced axis, zeros, negative, large, small).

Unless told otherwise, a generated instance is kept only if the guards of
the alternates it was unfolded from hold on its shapes (rank, sizes; dtypes
are decided by torch later), so most instances are ones the pattern
matches; the real matcher decides in the end (:mod:`.evaluate`).
"""
from __future__ import annotations

import io
import math
import os
import pickle
import random
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import torch

from .. import core
from ..core import symbols
from ..dsl.operators import Op
from ..engines import truth
from ..torch.importer import PM_TO_TORCH, TORCH_TO_PM
from ..torch.overloads import TORCH_OPS
from . import shapes as _shapes
from .hints import RuleHints
from .terms import SIZES as _SIZES, DimList as _DimList, op_name as _op_name
from .terms import (App, Dim, GenerationFailed, Leaf, Lit, Unbuildable,  # noqa: F401 (API)
                    unify as _unify, unify_shapes as _unify_shapes)

__all__ = ["Dim", "Leaf", "Lit", "App", "Instance", "InstanceGenerator", "GenerationFailed",
           "Unbuildable", "GuardSite", "guard_atoms", "eval_guard", "render", "FLOAT_DTYPES",
           "DTYPES", "dump_instance", "load_instance"]

FLOAT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
#: the instance dtypes drawn, and how often (int64: to exercise dtype guards)
DTYPES = FLOAT_DTYPES + (torch.int64,)
_DTYPE_WEIGHTS = {torch.float32: 0.37, torch.float64: 0.15, torch.float16: 0.2,
                  torch.bfloat16: 0.2, torch.int64: 0.08}
_P_SIZE_ONE = 0.1
_P_MIXED_DTYPE = 0.07
_P_NONE = 0.3
#: the share of draws whose sizes the guards tie together (see
#: :meth:`InstanceGenerator._tie_sizes`); the others draw them apart
_P_TIE = 0.9
#: the input values of an instance (:func:`.evaluate.input_tensor`), and how
#: often: normal(0, 1), rows nearly constant along an axis the pattern reads
#: (where an epsilon shows), exact zeros among normal values, all negative,
#: large and small magnitudes
VALUE_MIXES = {"normal": 0.5, "near_constant": 0.2, "zeros": 0.1, "negative": 0.07,
               "large": 0.07, "small": 0.06}
#: the kinds of axes a pattern reads (:attr:`Instance.axes`) on which a rule
#: fired only at size 1 (or on inputs constant along them) is untested
READ_KINDS = ("reduced", "normalized", "softmax", "contracted")


@dataclass
class GuardSite:
    """A guard of an alternate the instance was unfolded from: definition
    ``d``, alternate ``k``, the core guard ``g`` and the instance terms of its
    variables (``env``: term variable -> term, ``fenv``: operator variable ->
    Op)."""

    d: int
    k: int
    g: core.Guard
    env: Dict[int, object]
    fenv: Dict[int, Optional[Op]]


def guard_atoms(g: core.Guard) -> List[core.Guard]:
    """The conjuncts of ``g`` (top-level ``∧`` flattened, left to right)."""
    if isinstance(g, core.GAnd):
        return guard_atoms(g.g1) + guard_atoms(g.g2)
    return [g]


@dataclass
class Instance:
    """A generated instance: the term ``root`` over ``leaves``; per-instance
    values: ``sizes`` (root Dim -> size), ``dtypes`` (tensor leaf ->
    dtype), ``values`` (const leaf -> value), the instance ``dtype``, the
    ``seed`` of its input values; how it was made: ``choices`` ((definition,
    alternate) per unfolding), ``sites`` (the guards met), ``opvars``
    (operator variable name -> Op)."""

    root: App
    leaves: List[Leaf]
    apps: List[App]
    sizes: Dict[Dim, int]
    dtypes: Dict[Leaf, torch.dtype]
    values: Dict[Leaf, object]
    dtype: torch.dtype
    seed: int
    choices: Tuple[Tuple[int, int], ...] = ()
    sites: List[GuardSite] = field(default_factory=list)
    opvars: Dict[str, Op] = field(default_factory=dict)
    #: inputs with special values (NaN, +-inf, +-0.0, +-100; integers'
    #: extremes) among the normal ones
    special: bool = False
    #: outputs compared with -0.0 and 0.0 told apart
    signed_zeros: bool = False
    #: a multi-root pattern's instance: one term per root (``root`` is the
    #: first); empty for a single-root pattern
    roots: Tuple[App, ...] = ()
    #: the axes the pattern reads: (Dim, kind, operator) with kind one of
    #: :data:`READ_KINDS` or "guard" (a guard or an assert compares its size)
    axes: Tuple[Tuple[Dim, str, str], ...] = ()
    #: how the input values are drawn (a key of :data:`VALUE_MIXES`)
    values_mix: str = "normal"

    @property
    def outputs(self) -> Tuple[App, ...]:
        """The terms the instance's graph outputs: its roots (one for a
        single-root pattern)."""
        return self.roots or (self.root,)

    def size(self, d: Dim) -> int:
        r = d.find()
        return r.value if r.value is not None else self.sizes[r]

    def shape(self, t) -> Optional[Tuple[int, ...]]:
        """Concrete shape of a tensor leaf or an application (None otherwise)."""
        dims = t.shape if isinstance(t, Leaf) else t.spec if isinstance(t, App) else None
        if dims is None or (isinstance(t, Leaf) and t.kind != "tensor"):
            return None
        return tuple(self.size(d) for d in dims)

    def value(self, t):
        """The Python value of a literal or a constant leaf."""
        if isinstance(t, Lit):
            return t.value
        v = self.values[t]
        return [self.size(d) for d in v] if isinstance(v, _DimList) else v

    def free_dims(self) -> List[Dim]:
        """The size symbols that were drawn (not fixed), largest first."""
        return sorted(self.sizes, key=lambda d: -self.sizes[d])

    def with_sizes(self, sizes: Dict[Dim, int]) -> "Instance":
        return _replace(self, sizes=dict(sizes))

    def with_dtype(self, dtype: torch.dtype) -> "Instance":
        """Every input of the instance's dtype (and dtype constants equal to
        it) in ``dtype`` instead."""
        old = self.dtype
        dts = {k: (dtype if v == old else v) for k, v in self.dtypes.items()}
        vals = {k: (dtype if isinstance(v, torch.dtype) and v == old else v)
                for k, v in self.values.items()}
        return _replace(self, dtypes=dts, values=vals, dtype=dtype)

    def read_axes(self) -> Dict[str, Tuple[Tuple[str, ...], Dim]]:
        """The axes the pattern reads, by label: ``"x.shape[-1]"`` (the
        first tensor input that has the axis; else ``"mean axis"``) ->
        (the kinds of reading, e.g. ``("reduced by mean", "guard")``, the Dim)."""
        out: Dict[str, Tuple[Tuple[str, ...], Dim]] = {}
        tensors = [lf for lf in self.leaves if lf.kind == "tensor" and lf.shape is not None]
        for d, kind, op in self.axes:
            r = d.find()
            label = None
            for lf in tensors:
                for j, e in enumerate(lf.shape):
                    if e.find() is r:
                        label = f"{lf.name}.shape[{j - len(lf.shape)}]"
                        break
                if label:
                    break
            label = label or f"{op} axis"
            what = kind if kind == "guard" else f"{kind} by {op}"
            kinds, _ = out.get(label, ((), r))
            if what not in kinds:
                kinds = kinds + (what,)
            out[label] = (kinds, r)
        return out

    def inputs(self) -> List[Tuple[str, Optional[Tuple[int, ...]], object]]:
        """(name, shape, dtype) of each tensor leaf, (name, None, value) of
        each constant (a list of sizes as this instance's numbers)."""
        out = []
        for lf in self.leaves:
            if lf.kind == "tensor":
                out.append((lf.name, self.shape(lf), self.dtypes[lf]))
            else:
                out.append((lf.name, None, self.value(lf) if lf in self.values else None))
        return out


def _replace(inst: Instance, **kw) -> Instance:
    d = dict(inst.__dict__)
    d.update(kw)
    return Instance(**d)






def _show_value(v) -> str:
    if isinstance(v, torch.dtype):
        return str(v).replace("torch.", "torch.")
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else f"float('{v}')"
    return repr(v)


def render(inst: Instance, t=None) -> str:
    """The instance as an expression: ``matmul(x, transpose(y, 0, 1))``;
    tensor inputs by name, constants by value."""
    if t is None and inst.roots:
        return "(" + ", ".join(render(inst, r) for r in inst.roots) + ")"
    t = inst.root if t is None else t
    if isinstance(t, App):
        return f"{_op_name(t.target)}({', '.join(render(inst, a) for a in t.args)})"
    if isinstance(t, Leaf):
        if t.kind == "tensor":
            return t.name
        return _show_value(inst.value(t)) if t.kind == "const" else "None"
    return _show_value(t.value)


# ------------------------------------------------------- schema argument kinds

def _arg_kind(target, i: int) -> Tuple[str, str, object]:
    """(kind, name, default) of argument ``i`` of ``target``'s schema."""
    schema = getattr(target, "_schema", None)
    if schema is None:
        return ("tensor", f"arg{i}", None)
    a = schema.arguments[i]
    default = a.default_value if a.has_default_value() else None
    t = a.type
    name = a.name
    pointwise = torch.Tag.pointwise in getattr(target, "tags", ())
    if isinstance(t, torch.TensorType):
        # a Python number is a valid operand of a pointwise op with another
        # tensor operand (``x * 0.5``; ``aten.mul.Tensor(0.5, x)`` runs too)
        n_tensors = sum(isinstance(b.type, torch.TensorType) for b in schema.arguments)
        if pointwise and n_tensors > 1 and name not in ("mask", "condition"):
            return ("tensor_or_scalar", name, default)
        return ("tensor", name, default)
    if isinstance(t, torch.OptionalType):
        e = t.getElementType()
        if isinstance(e, torch.TensorType):
            return ("tensor_or_none", name, default)
        if name == "dtype":
            return ("dtype", name, default)
        if name in ("layout", "device", "memory_format", "pin_memory"):
            return ("default", name, default)
        if isinstance(e, torch.ListType):
            return ("int_list_or_none", name, default)
        if isinstance(e, torch.FloatType):
            return ("float_or_none", name, default)
        if isinstance(e, torch.IntType):
            return ("int_or_none", name, default)
        if isinstance(e, torch.BoolType):
            return ("bool_or_none", name, default)
        if isinstance(e, torch.NumberType):
            return ("number_or_none", name, default)
        return ("default", name, default)
    if isinstance(t, torch.IntType):
        return ("int", name, default)
    if isinstance(t, torch.FloatType):
        return ("float", name, default)
    if isinstance(t, torch.NumberType):
        return ("number", name, default)
    if isinstance(t, torch.BoolType):
        return ("bool", name, default)
    if isinstance(t, torch.StringType):
        return ("str", name, default)
    if isinstance(t, torch.ListType):
        if isinstance(t.getElementType(), torch.TensorType):
            return ("tensor_list", name, default)
        return ("int_list", name, default)
    return ("default", name, default)


_TENSORISH = {"tensor", "tensor_or_scalar", "tensor_or_none"}


# ------------------------------------------------------------ generation

class _IVar:
    """A term variable while unfolding: its term once known, the match
    constraints still to unfold on it."""

    __slots__ = ("name", "term", "deferred", "busy", "index")

    def __init__(self, name: str, index: int):
        self.name = name
        self.index = index
        self.term = None
        self.deferred: list = []
        self.busy = False


class _FVar:
    __slots__ = ("name", "op", "classes")

    def __init__(self, name: str):
        self.name = name
        self.op: Optional[Op] = None
        self.classes: set = set()


def _alternatives(body) -> List[core.CorePattern]:
    out = []
    while isinstance(body, core.PAlt):
        out.append(body.p1)
        body = body.p2
    out.append(body)
    return out


def _calls(p) -> List[int]:
    return [q.P for q in core.walk(p) if isinstance(q, core.PCall)]


def _heights(defs, alts) -> List[float]:
    """Per definition, the fewest nested calls an unfolding needs (inf when
    none terminates)."""
    h = [math.inf] * len(defs)
    for _ in range(len(defs) + 1):
        changed = False
        for d in range(len(defs)):
            best = min(max([1 + h[c] for c in _calls(a)], default=0) for a in alts[d])
            if best < h[d]:
                h[d], changed = best, True
        if not changed:
            break
    return h


def _class_name(code: int) -> Optional[str]:
    for name, c in symbols.opclasses().items():
        if c.code == code:
            return name
    return None


def _torch_ops() -> List[Op]:
    seen, out = set(), []
    for o in TORCH_OPS.values():
        if id(o) not in seen and not getattr(o, "torch_auto", False):
            seen.add(id(o))
            out.append(o)
    return out


def _decode_const(key):
    if not isinstance(key, tuple):
        raise Unbuildable(f"constant {key!r} has no PyTorch form")
    tag = key[0]
    if tag == "none":
        return None
    if tag in ("bool", "str"):
        return key[1]
    if tag == "num":
        return math.nan if key[1] == "nan" else -0.0 if key[1] == "-0.0" else key[1]
    if tag == "seq":
        return [_decode_const(k) for k in key[1]]
    if tag == "dtype":
        dt = core.DTYPE_BY_CODE.get(key[1])
        return PM_TO_TORCH[dt]
    raise Unbuildable(f"constant {key!r} has no PyTorch form")


class InstanceGenerator:
    """Draws :class:`Instance`\\ s of ``pattern`` (see the module docstring).

    ``hints`` (:class:`.hints.RuleHints`) bias the constants; ``seed`` makes
    the draws reproducible; ``max_depth`` bounds recursive unfolding;
    ``dtypes`` are the instance dtypes drawn.
    """

    def __init__(self, pattern, hints: Optional[RuleHints] = None, seed=0,
                 max_depth: int = 3, dtypes: Sequence[torch.dtype] = DTYPES,
                 max_terms: int = 200, special_values: float = 0.0,
                 dtype_hints: bool = False):
        #: the share of instances with special input values (:class:`Instance`)
        self.special_values = special_values
        #: dtypes the rule names (``x.dtype in INTS``): half the instances
        #: take one of them (an integer- or bool-only rule fires)
        self.hinted_dtypes: List[torch.dtype] = []
        if dtype_hints and hints is not None:
            for vs in hints.consts.values():
                for v in vs:
                    dt = v if isinstance(v, torch.dtype) else PM_TO_TORCH.get(v) \
                        if type(v).__name__ == "DType" else None
                    if dt is not None and dt not in self.hinted_dtypes:
                        self.hinted_dtypes.append(dt)
        self.pattern = pattern
        self.hints = hints or RuleHints()
        self.rng = random.Random(f"{seed}:{pattern.name}")
        #: the draws of the size ties and the value mixes: apart from
        #: ``rng``, so that the instances of a pattern without size guards or
        #: keepdim reductions are those the same seed always drew
        self.rng2 = random.Random(f"{seed}:{pattern.name}:ties-and-values")
        #: the sign of a drawn float zero (_const), apart from the others too
        self.rng_zero = random.Random(f"{seed}:{pattern.name}:signed-zeros")
        self.max_depth = max_depth
        self.max_terms = max_terms
        self.dtypes = tuple(dtypes)
        linked = pattern.linked
        self.program = pattern.program
        #: a multi-root pattern's roots and cross-root guard (else None)
        self.multi = pattern.multi if getattr(pattern, "is_multi", False) else None
        self.defs = self.program.defs
        self.by_index = {i: P for P, i in linked.index.items()}
        self.alts = [list(linked.alternates[self.by_index[d]]) if d in self.by_index
                     else _alternatives(self.defs[d].body) for d in range(len(self.defs))]
        self.heights = _heights(self.defs, self.alts)
        # the definitions on a cycle of calls: only their unfoldings count
        # towards max_depth (a deep but non-recursive nesting of helper
        # patterns is unfolded whole, every alternate drawable)
        callees = [{c for a in self.alts[d] for c in _calls(a)} for d in range(len(self.defs))]
        self.recursive = set()
        for d in range(len(self.defs)):
            seen, todo = set(), list(callees[d])
            while todo:
                c = todo.pop()
                if c not in seen:
                    seen.add(c)
                    todo.extend(callees[c])
            if d in seen:
                self.recursive.add(d)
        self.rank_hints = sorted({e.e2.z for d in self.defs for q in core.walk(d.body)
                                  if isinstance(q, core.PGuard)
                                  for e in guard_atoms(q.g)
                                  if isinstance(e, core.GEq) and isinstance(e.e1, core.EAttr)
                                  and e.e1.attr == core.RANK and isinstance(e.e2, core.EConst)
                                  and 0 <= e.e2.z <= 6})
        self.ops = _torch_ops()
        self._use_classes = True
        #: (definition, alternate) -> draw weight (default 1): see :meth:`feedback`
        self.weights: Dict[Tuple[int, int], float] = {}
        self._outcomes: Dict[Tuple[int, int], Tuple[int, int]] = {}  # (fired, declined)

    def feedback(self, inst: "Instance", fired: bool) -> None:
        """Learn from a run of the rule: the alternates of an instance the
        rule declined are drawn less often until the rule fires on one of
        them (weight 4 / (4 + declines) while it never fired, at least 1/10;
        1 once it fired), so that alternates a rule
        leaves alone by design (e.g. a form it declines with a reason) do not
        crowd out the ones it rewrites. Every alternate stays drawable."""
        for c in set(inst.choices):
            f, d = self._outcomes.get(c, (0, 0))
            f, d = (f + 1, d) if fired else (f, d + 1)
            self._outcomes[c] = (f, d)
            self.weights[c] = 1.0 if f else max(0.1, 4 / (4 + d))

    # ---------------------------------------------------------------- API

    def alternates(self) -> List[Tuple[int, int, str]]:
        """Every (definition, alternate, "Pattern#k (file:line)") of the table."""
        out = []
        for d in range(len(self.defs)):
            P = self.by_index.get(d)
            for k in range(len(self.alts[d])):
                where = ""
                if P is not None and k < len(P.definitions):
                    c = P.definitions[k].compiled
                    where = f" ({c.filename.rsplit('/', 1)[-1]}:{c.lineno})"
                out.append((d, k, f"{P.name if P else d}#{k + 1}{where}"))
        return out

    def generate(self, filtered: bool = True, tries: int = 300, accept=None,
                 op_classes: bool = True, untie=frozenset()) -> Instance:
        """One instance. ``filtered``: keep only instances on which the guards
        of the alternates chosen do not fail (on shapes); ``accept(inst)``: an
        extra test; ``op_classes``: choose operator variables from the class a
        guard names (else from every operator of the arity); ``untie``: size
        equations not to tie (:meth:`_tie_sizes`): ``("pattern", d, k, i)``,
        conjunct ``i`` of the guard of alternate ``k`` of definition ``d``,
        or ``("rule", line)``, the asserts of the rule at that line (guard
        necessity draws instances that violate them). Raises
        :class:`GenerationFailed` after ``tries`` draws, or
        :class:`Unbuildable`."""
        last = None
        self._use_classes = op_classes
        self._untie = frozenset(untie)
        for _ in range(tries):
            try:
                inst = self._draw()
            except GenerationFailed as e:
                last = e
                continue
            if filtered and any(eval_guard(s.g, s, inst) is False for s in inst.sites):
                last = GenerationFailed("a guard of the pattern fails")
                continue
            if accept is not None and not accept(inst):
                last = GenerationFailed("not accepted")
                continue
            return inst
        raise GenerationFailed(f"no instance in {tries} draws (last: {last})")

    # ----------------------------------------------------------- drawing

    def _draw(self) -> Instance:
        rng = self.rng
        self._terms = 0
        self._choices: List[Tuple[int, int]] = []
        self._sites: List[GuardSite] = []
        self._leaves: List[Leaf] = []
        self._nvars = 0
        self._axes: List[Tuple[Dim, str, str]] = []  # the axes the shape rules read
        self._view_bh = None  # the batch and head sizes of this draw's views
        self._perms: List[List[int]] = []  # the permutations drawn (shapes._permute)
        #: id(App) -> how a shape rule above asks it to shape its operand
        #: (see _view, _bmm, _expand)
        self._plan: Dict[int, str] = {}
        pat = self.pattern
        # a multi-root pattern (theories/Multi.v): every root definition is
        # unfolded over the same variables (the shared ones), so the roots
        # share their inputs; the cross-root guard is a site of the first root
        root_defs = self.multi.roots if self.multi is not None else (self.program.root,)
        root = self.defs[root_defs[0]]
        nparams = max(self.defs[r].nparams for r in root_defs)
        nfparams = max(self.defs[r].nfparams for r in root_defs)
        env = {i: _IVar(n, i) for i, n in enumerate(pat.term_params)}
        for i in range(nparams):
            env.setdefault(i, _IVar(f"v{i}", i))
        fenv = {j: _FVar(n) for j, n in enumerate(pat.op_params)}
        for j in range(nfparams):
            fenv.setdefault(j, _FVar(f"F{j}"))
        self._nvars = nparams
        self._env = env
        terms = []
        for r in root_defs:
            t = self._def(r, env, fenv, 0)
            if not isinstance(t, App):
                raise GenerationFailed("a root of the pattern is not an operator application")
            if any(t is u for u in terms):
                raise GenerationFailed("two roots unfolded to the same term")
            terms.append(t)
        if self.multi is not None and self.multi.guard is not None:
            self._sites.append(GuardSite(root_defs[0], 0, self.multi.guard, env, fenv))
        term = terms[0]
        dtype = rng.choices(self.dtypes, weights=[_DTYPE_WEIGHTS.get(d, 0.2)
                                                  for d in self.dtypes])[0]
        if self.hinted_dtypes and rng.random() < 0.5:
            dtype = rng.choice(self.hinted_dtypes)
        apps = _post_order(*terms)
        # half the instances take the rule's hints at their word (so that rules
        # with many guarded constants fire), the others draw more freely
        self._focus = rng.random() < 0.5
        self._kinds(apps)
        values = self._consts(dtype)
        self._values = values
        self._rank_hints()
        # shapes, top-down from the root
        r = rng.choice(self.rank_hints) if self.rank_hints and rng.random() < 0.6 \
            else rng.choice((1, 2, 3, 4) if rng.random() > 0.03 else (0,))
        self._assign(term, [Dim() for _ in range(r)])
        for t in terms[1:]:  # the other roots: the same rank (shared inputs unify)
            if t.spec is None:
                self._assign(t, [Dim() for _ in range(r)])
        if len(terms) > 1 and r > 0 and rng.random() < 0.3:
            # now and then the roots' last sizes equal (sibling projections of
            # one size), else every size is drawn apart
            for t in terms[1:]:
                if len(t.spec) == r:
                    _unify(t.spec[-1], term.spec[-1])
        for lf in self._leaves:
            if lf.kind == "tensor" and lf.shape is None:
                raise GenerationFailed(f"no shape for {lf.name}")
        # sizes the guards (and the rule's asserts) compare are tied before
        # the free ones are drawn, so that most instances satisfy them with
        # sizes >= 2 rather than only where both happen to be 1
        self._tie_sizes()
        sizes = self._sizes(apps)
        self._solve_sizes(sizes)
        dtypes = {}
        floats = []
        for lf in self._leaves:
            if lf.kind != "tensor":
                continue
            names = {n for _, n in lf.arg_kinds}
            if names & {"mask", "condition"}:
                dtypes[lf] = torch.bool
            else:
                dtypes[lf] = dtype
                floats.append(lf)
        # mixed dtypes: one input of another float dtype, in about as many
        # instances as a per-input draw gives for two or three inputs (with many
        # inputs a per-input draw would mix nearly every instance)
        if floats and rng.random() < _P_MIXED_DTYPE * min(len(floats), 3):
            lf = rng.choice(floats)
            dtypes[lf] = rng.choice([d for d in FLOAT_DTYPES if d != dtype])
        opvars = {fv.name: fv.op for fv in fenv.values() if fv.op is not None}
        special = bool(self.special_values) and rng.random() < self.special_values
        mix = self.rng2.choices(list(VALUE_MIXES), weights=list(VALUE_MIXES.values()))[0]
        return Instance(term, list(self._leaves), apps, sizes, dtypes, values, dtype,
                        rng.randrange(1 << 30), tuple(self._choices), list(self._sites),
                        opvars, special, bool(self.special_values),
                        tuple(terms) if self.multi is not None else (),
                        tuple(self._axes) + tuple(self._guard_axes), mix)

    def _fresh(self, name: str) -> _IVar:
        self._nvars += 1
        return _IVar(name, self._nvars)

    def _def(self, d: int, env, fenv, depth: int):
        alts = self.alts[d]
        ks = list(range(len(alts)))
        if depth >= self.max_depth and d in self.recursive:
            hs = [max([1 + self.heights[c] for c in _calls(a)], default=0) for a in alts]
            best = min(hs)
            if best == math.inf:
                raise GenerationFailed("recursion bound reached")
            ks = [k for k in ks if hs[k] == best]
        k = self.rng.choices(ks, weights=[self.weights.get((d, j), 1.0) for j in ks])[0] \
            if self.weights else self.rng.choice(ks)
        self._choices.append((d, k))
        return self._pat(alts[k], env, fenv, depth, d, k)

    def _pat(self, p, env, fenv, depth, d, k):
        self._terms += 1
        if self._terms > self.max_terms:
            raise GenerationFailed("instance too large")
        if isinstance(p, core.PVar):
            return self._var(env[p.x], depth)
        if isinstance(p, core.PApp):
            obj = symbols.lookup(p.f)
            if isinstance(obj, Op):
                return self._app(obj, [self._pat(a, env, fenv, depth, d, k) for a in p.args])
            return Lit(_decode_const(obj))
        if isinstance(p, core.PFunVar):
            fv = fenv[p.F]
            if fv.op is None:
                fv.op = self._choose_op(fv, len(p.args))
            return self._app(fv.op, [self._pat(a, env, fenv, depth, d, k) for a in p.args])
        if isinstance(p, core.PAlt):  # an alternation inside an alternate
            return self._pat(self.rng.choice(_alternatives(p)), env, fenv, depth, d, k)
        if isinstance(p, core.PGuard):
            for a in guard_atoms(p.g) if self._use_classes else ():
                # operator classes first: they choose the operators
                if isinstance(a, core.GEq) and isinstance(a.e1, core.EFAttr) \
                        and a.e1.attr == core.OPCLASS and isinstance(a.e2, core.EConst):
                    fenv[a.e1.F].classes.add(a.e2.z)
            self._sites.append(GuardSite(d, k, p.g, env, fenv))
            return self._pat(p.p, env, fenv, depth, d, k)
        if isinstance(p, core.PExists):
            env2 = dict(env)
            env2[p.x] = self._fresh(f"{self._def_name(d)}.v{p.x}")
            return self._pat(p.p, env2, fenv, depth, d, k)
        if isinstance(p, core.PExistsF):
            fenv2 = dict(fenv)
            fenv2[p.F] = _FVar(f"{self._def_name(d)}.F{p.F}")
            return self._pat(p.p, env, fenv2, depth, d, k)
        if isinstance(p, core.PConstr):
            env[p.x].deferred.append((p.p2, env, fenv, d, k, depth))
            return self._pat(p.p, env, fenv, depth, d, k)
        if isinstance(p, core.PCall):
            callee = self.defs[p.P]
            env2 = {i: env[x] for i, x in enumerate(p.xs)}
            fenv2 = {j: fenv[F] for j, F in enumerate(p.Fs)}
            assert len(env2) == callee.nparams and len(fenv2) == callee.nfparams
            return self._def(p.P, env2, fenv2, depth + (p.P in self.recursive))
        raise TypeError(f"not a core pattern: {p!r}")

    def _def_name(self, d: int) -> str:
        P = self.by_index.get(d)
        return P.name if P is not None else f"def{d}"

    def _var(self, iv: _IVar, depth: int):
        if iv.term is not None:
            return iv.term
        if iv.busy:
            raise GenerationFailed(f"{iv.name} would contain itself")
        if iv.deferred:
            p2, env, fenv, d, k, dep = iv.deferred.pop(0)
            iv.busy = True
            try:
                iv.term = self._pat(p2, env, fenv, dep, d, k)
            finally:
                iv.busy = False
            return iv.term
        lf = Leaf(iv.name, iv.index)
        self._leaves.append(lf)
        iv.term = lf
        return lf

    def _app(self, op: Op, args) -> App:
        targets = getattr(op, "torch_targets", ())
        if not targets:
            raise Unbuildable(f"operator {op.name} has no torch target (declare it with "
                              "@pm.op(torch=[...]) to check rules over it)")
        return App(op, self.rng.choice(targets), args)

    def _choose_op(self, fv: _FVar, n: int) -> Op:
        cands = [o for o in self.ops if o.arity == n and o.torch_targets]
        if fv.classes:
            cands = [o for o in cands if o.op_class is not None and o.op_class.code in fv.classes]
        if not cands:
            names = ", ".join(str(_class_name(c)) for c in fv.classes)
            raise Unbuildable(f"no operator with a torch target for operator variable "
                              f"{fv.name} (arity {n}{', class ' + names if names else ''})")
        return self.rng.choice(cands)

    # ------------------------------------------------------------ kinds

    def _kinds(self, apps: List[App]) -> None:
        for lf in self._leaves:
            lf.arg_kinds = []
        for a in apps:
            for i, t in enumerate(a.args):
                if isinstance(t, Leaf):
                    kind, name, _ = _arg_kind(a.target, i)
                    t.arg_kinds.append((kind, name))
                elif isinstance(t, Lit):
                    # symbols keep numbers by value (2 == 2.0): give each literal
                    # the Python type its argument takes
                    t.value = _coerce(_arg_kind(a.target, i)[0], t.value)
        rng = self.rng
        # a multi-root instance: half the time one draw decides every optional
        # tensor (all biases present, or all absent), as sibling layers have
        shared_none = (rng.random() < 0.5) if self.multi is not None and rng.random() < 0.5 \
            else None
        for lf in self._leaves:
            kinds = {k for k, _ in lf.arg_kinds}
            if not kinds:
                raise GenerationFailed(f"{lf.name} is not an operator argument")
            if "tensor_list" in kinds:
                raise GenerationFailed("lists of tensors are not generated")
            if kinds <= _TENSORISH:
                if "tensor" in kinds:
                    lf.kind = "tensor"
                elif kinds == {"tensor_or_none"}:
                    none = rng.random() < _P_NONE if shared_none is None else shared_none
                    lf.kind = "none" if none else "tensor"
                elif "tensor_or_none" in kinds:
                    lf.kind = "tensor"
                else:
                    p = self.hints.p_const(lf.name)
                    if self._focus and p > 0.5:
                        p = 0.97
                    lf.kind = "const" if rng.random() < p else "tensor"
            elif kinds & _TENSORISH:
                raise GenerationFailed(f"{lf.name} is both a tensor and a constant argument")
            else:
                lf.kind = "const"

    def _consts(self, dtype) -> Dict[Leaf, object]:
        values = {}
        for lf in self._leaves:
            if lf.kind == "const":
                kinds = [k for k, _ in lf.arg_kinds]
                kind = "number" if "tensor_or_scalar" in kinds else kinds[0]
                values[lf] = self._const(kind, lf, dtype)
        return values

    def _signed_zero(self, v):
        """``v``, or another zero when ``v`` is a number 0: equal to it in a
        guard, but another constant. An int 0 is a float ``0.0`` in one draw
        in ten (``x_int * 0.0`` is a float tensor); with special values
        (where outputs' signed zeros are told apart) a zero is ``-0.0`` in
        one draw in four (``x - (-0.0)`` is ``x + 0.0``). Drawn apart from
        the other draws, which stay the same."""
        if type(v) not in (int, float) or v != 0:
            return v
        if self.special_values and self.rng_zero.random() < 0.25:
            return -0.0
        if type(v) is int and self.rng_zero.random() < 0.1:
            return 0.0
        return v

    def _const(self, kind: str, lf: Leaf, dtype):
        rng = self.rng
        hinted = [v for v in self.hints.consts.get(lf.name, ()) if _fits(kind, v)]
        if kind.endswith("_or_none") and rng.random() < 0.15:
            return None
        if hinted and rng.random() < (0.97 if self._focus else 0.7):
            i = min(int(rng.expovariate(2.0 if self._focus else 1.0)), len(hinted) - 1)
            v = hinted[i]
            if kind == "dtype" and not isinstance(v, torch.dtype):
                v = PM_TO_TORCH.get(v, dtype)
            return self._signed_zero(v)
        base = kind.replace("_or_none", "")
        if base in ("number", "float"):
            pool = [0.5, 2.0, 1.0, 0.0, -1.0, 0.125, 8.0, 1e-5, 3.0, math.sqrt(2.0),
                    math.sqrt(0.5), math.inf, math.nan, round(rng.gauss(0.0, 2.0), 3)]
            if base == "number":
                pool += [2, 3, 1, 0, -1]
            return self._signed_zero(rng.choice(pool))
        if base == "int":
            if any(n == "dim" for _, n in lf.arg_kinds) and rng.random() < 0.5:
                return -1  # an axis: softmax and reductions mostly take the last
            return rng.choice((-1, -2, 0, 1, 2, 3))
        if base == "bool":
            return rng.random() < 0.5
        if base == "str":
            strs = [v for v in self.hints.consts.get(lf.name, ()) if isinstance(v, str)]
            return rng.choice(strs) if strs else "none"
        if base == "int_list":
            return rng.choice(([-1], [0], [1], [-1, -2], [2], [3]))
        if base == "dtype":  # mostly the instance's own (a cast that agrees)
            return rng.choice((dtype,) * 6 + (torch.float32, torch.float16, torch.bfloat16,
                                              torch.float64))
        return None  # "default": the schema's default (None for the ones kept so)

    # ------------------------------------------------------------ shapes

    def _assign(self, t, spec: List[Dim]) -> None:
        if isinstance(t, Leaf):
            if t.kind != "tensor":
                raise GenerationFailed(f"{t.name} must be a tensor here")
            if t.shape is None:
                t.shape = list(spec)
            else:
                _unify_shapes(t.shape, spec)
            return
        if isinstance(t, Lit):
            raise GenerationFailed("a literal where a tensor is expected")
        if t.spec is not None:
            _unify_shapes(t.spec, spec)
            return
        t.spec = list(spec)
        _shapes.rule_for(t.target)(self, t, t.spec)

    def _rank_hints(self) -> None:
        """Leaves a guard of a chosen alternate gives a rank (``x.rank == c``)
        get that rank where a shape rule has the choice; so do those an
        assert of the rule does (``assert w.rank == 1``, :mod:`.hints`)."""
        for s in self._sites:
            for a in guard_atoms(s.g):
                if isinstance(a, core.GEq) and isinstance(a.e1, core.EAttr) \
                        and a.e1.attr == core.RANK and isinstance(a.e2, core.EConst):
                    iv = s.env.get(a.e1.x)
                    t = iv.term if isinstance(iv, _IVar) else None
                    if isinstance(t, Leaf):
                        t.rank_hint = a.e2.z
        named = self._named()
        for _, name, r in self.hints.ranks:
            t = named.get(name)
            if isinstance(t, Leaf) and t.rank_hint is None and 0 <= r <= 6:
                t.rank_hint = r

    def _named(self) -> Dict[str, object]:
        """The terms of the pattern's parameters in this draw, by name."""
        out = {}
        for iv in getattr(self, "_env", {}).values():
            if isinstance(iv, _IVar) and iv.term is not None:
                out.setdefault(iv.name, iv.term)
        return out

    @staticmethod
    def _dims(t) -> Optional[List[Dim]]:
        if isinstance(t, _IVar):
            t = t.term
        if isinstance(t, Leaf):
            return t.shape if t.kind == "tensor" else None
        return t.spec if isinstance(t, App) else None

    @staticmethod
    def _dim_at(dims: Optional[List[Dim]], attr: int) -> Optional[Dim]:
        if dims is None:
            return None
        if core.SHAPE_BASE <= attr < core.SHAPE_BASE + core.MAX_RANK:
            i = attr - core.SHAPE_BASE
            return dims[i] if i < len(dims) else None
        if core.SHAPE_NEG_BASE <= attr < core.SHAPE_NEG_BASE + core.MAX_RANK:
            j = attr - core.SHAPE_NEG_BASE
            return dims[len(dims) - 1 - j] if j < len(dims) else None
        return None

    def _tie(self, a: Optional[Dim], b: Optional[Dim]) -> None:
        """Make the sizes ``a`` and ``b`` one (a guard says they are equal),
        unless one is a broadcast size 1 the other would become (that draw
        then fails the guard and is drawn again, most of the time)."""
        if a is None or b is None:
            return
        ra, rb = a.find(), b.find()
        if ra is rb:
            return
        if (ra.value == 1 or rb.value == 1) and (ra.value is None or rb.value is None) \
                and self.rng2.random() < 0.9:
            return
        try:
            _unify(ra, rb)
        except GenerationFailed:
            pass  # sizes fixed apart: the guard fails, the draw is filtered

    def _tie_sizes(self) -> None:
        """The size equations of the guards met (``v.shape[i] == u.shape[j]``,
        ``v.shape[i] == c``, ``v.shape[-1] == h.shape[0] * d.shape[0]``) and of
        the rule's asserts (:mod:`.hints`) made true in :data:`_P_TIE` of the
        draws (the others keep every size apart, so the guards are exercised
        both ways); the equations in ``untie`` are left alone. One between
        two sizes (or a size and a constant) unifies their Dims; an
        arithmetic one is kept for :meth:`_solve_sizes`, which draws the
        sizes so that it holds. The sizes compared are recorded as axes the
        pattern reads ("guard")."""
        self._guard_axes: List[Tuple[Dim, str, str]] = []
        self._size_eqs: List[Tuple[tuple, tuple]] = []
        tie = self.rng2.random() < _P_TIE
        untie = getattr(self, "_untie", frozenset())

        def equation(a, b, how):
            if a is None or b is None:
                return
            dims = _expr_dims(a) + _expr_dims(b)
            self._guard_axes += [(d, "guard", how) for d in dims]
            if not tie:
                return
            if a[0] in ("dim", "const") and b[0] in ("dim", "const"):
                self._tie(_as_dim(a), _as_dim(b))
            elif dims:
                self._size_eqs.append((a, b))

        for s in self._sites:
            for i, a in enumerate(guard_atoms(s.g)):
                if not isinstance(a, core.GEq) or ("pattern", s.d, s.k, i) in untie:
                    if isinstance(a, core.GEq):  # still an axis the guards read
                        for e in (a.e1, a.e2):
                            x = self._guard_expr(e, s)
                            if x is not None:
                                self._guard_axes += [(d, "guard", "guard")
                                                     for d in _expr_dims(x)]
                    continue
                equation(self._guard_expr(a.e1, s), self._guard_expr(a.e2, s), "guard")
        named = self._named()
        for line, (_, name, i), vals in self.hints.size_choices:
            d = self._dim_at(self._dims(named.get(name)),
                             (core.SHAPE_BASE + i) if i >= 0 else (core.SHAPE_NEG_BASE - i - 1))
            if d is None:
                continue
            self._guard_axes.append((d, "guard", "assert"))
            if tie and ("rule", line) not in untie:
                self._tie(d, Dim(self.rng2.choice(vals)))
        if not self.hints.sizes:
            return

        def side(x):
            if x[0] == "const":
                return ("const", x[1])
            if x[0] == "shape":
                d = self._dim_at(self._dims(named.get(x[1])),
                                 (core.SHAPE_BASE + x[2]) if x[2] >= 0
                                 else (core.SHAPE_NEG_BASE - x[2] - 1))
                return ("dim", d) if d is not None else None
            if x[0] in ("add", "sub", "mul"):
                l, r = side(x[1]), side(x[2])
                return (x[0], l, r) if l is not None and r is not None else None
            return None
        for line, lhs, rhs in self.hints.sizes:
            if lhs[0] == "shapes":  # two whole shapes: axis by axis, same rank
                da, db = self._dims(named.get(lhs[1])), self._dims(named.get(rhs[1]))
                if da is None or db is None or len(da) != len(db):
                    continue
                for x, y in zip(da, db):
                    self._guard_axes += [(x, "guard", "assert"), (y, "guard", "assert")]
                    if tie and ("rule", line) not in untie:
                        self._tie(x, y)
                continue
            if ("rule", line) in untie:
                a, b = side(lhs), side(rhs)
                self._guard_axes += [(d, "guard", "assert") for x in (a, b) if x is not None
                                     for d in _expr_dims(x)]
                continue
            equation(side(lhs), side(rhs), "assert")

    def _guard_expr(self, e, s: GuardSite) -> Optional[tuple]:
        """A guard's integer expression as a size expression (``("dim", d)``,
        ``("const", c)``, ``("add"|"sub"|"mul", l, r)``) where it is one: sizes
        of the instance's terms, integer constants and their arithmetic."""
        if isinstance(e, core.EAttr):
            d = self._dim_at(self._dims(s.env.get(e.x)), e.attr)
            return ("dim", d) if d is not None else None
        if isinstance(e, core.EConst):
            return ("const", e.z) if isinstance(e.z, int) and not isinstance(e.z, bool) \
                else None
        ops = {core.EAdd: "add", core.ESub: "sub", core.EMul: "mul"}
        op = ops.get(type(e))
        if op is None:
            return None
        l, r = self._guard_expr(e.e1, s), self._guard_expr(e.e2, s)
        return (op, l, r) if l is not None and r is not None else None

    def _solve_sizes(self, sizes: Dict[Dim, int]) -> None:
        """Make the arithmetic size equations (:meth:`_tie_sizes`) hold by
        redrawing the sizes they involve with z3: every size in 1..64, >= 2
        where that is satisfiable, and as many of the sizes drawn as can be
        kept (so the draws still vary). Unsatisfiable equations are left
        false (the guard filter then drops the draw)."""
        eqs = getattr(self, "_size_eqs", None)
        if not eqs:
            return
        import z3
        roots: Dict[int, Dim] = {}
        for a, b in eqs:
            for d in _expr_dims(a) + _expr_dims(b):
                r = d.find()
                if r.value is None:
                    roots[id(r)] = r
        if not roots:
            return
        var = {k: z3.Int(f"s{k}") for k in roots}

        def term(x):
            if x[0] == "const":
                return z3.IntVal(x[1])
            if x[0] == "dim":
                r = x[1].find()
                return z3.IntVal(r.value) if r.value is not None else var[id(r)]
            l, r = term(x[1]), term(x[2])
            return l + r if x[0] == "add" else l - r if x[0] == "sub" else l * r
        solver = z3.Solver()
        solver.set("timeout", 200)
        for a, b in eqs:
            solver.add(term(a) == term(b))
        for v in var.values():
            solver.add(v >= 1, v <= 64)
        solver.push()
        for v in var.values():
            solver.add(v >= 2)
        if solver.check() != z3.sat:
            solver.pop()
            if solver.check() != z3.sat:
                return
        keys = list(var)
        self.rng2.shuffle(keys)
        for k in keys:  # keep the drawn size where the equations allow it
            solver.push()
            solver.add(var[k] == sizes.get(roots[k], 1))
            if solver.check() != z3.sat:
                solver.pop()
        if solver.check() != z3.sat:
            return
        m = solver.model()
        for k, r in roots.items():
            sizes[r] = m.eval(var[k], model_completion=True).as_long()

    def _hint(self, t) -> Optional[int]:
        """The rank a guard wants for ``t`` (most of the time), else None."""
        if isinstance(t, Leaf) and t.rank_hint is not None and self.rng.random() < 0.85:
            return t.rank_hint
        return None

    def _val(self, t):
        if isinstance(t, Lit):
            return t.value
        if isinstance(t, Leaf) and t.kind == "const":
            return self._values[t]
        if isinstance(t, Leaf) and t.kind == "none":
            return None
        raise GenerationFailed("a tensor where a constant is expected")

    def _is_tensor(self, t) -> bool:
        return isinstance(t, App) or (isinstance(t, Leaf) and t.kind == "tensor")

    def _tensor_args(self, a: App) -> List[int]:
        out = []
        for i, t in enumerate(a.args):
            kind = _arg_kind(a.target, i)[0]
            if kind in _TENSORISH and self._is_tensor(t):
                out.append(i)
        return out

    def _reduced(self, spec: List[Dim], drop: bool = True) -> List[Dim]:
        """A shape that broadcasts to ``spec``: some axes 1, maybe fewer leading."""
        rng = self.rng
        dims = [d if rng.random() < 0.7 else Dim(1) for d in spec]
        if drop and dims and rng.random() < 0.3:
            dims = dims[rng.randint(1, len(dims)):]
        return dims

    def _sizes(self, apps: List[App]) -> Dict[Dim, int]:
        roots = []
        seen = set()
        for dims in [lf.shape for lf in self._leaves if lf.shape] + [a.spec for a in apps
                                                                      if a.spec]:
            for dim in dims:
                r = dim.find()
                if r.value is None and id(r) not in seen:
                    seen.add(id(r))
                    roots.append(r)
        rng = self.rng
        pool = list(_SIZES)
        rng.shuffle(pool)
        sizes = {}
        for r in roots:
            if rng.random() < _P_SIZE_ONE:
                sizes[r] = 1
            elif pool:
                sizes[r] = pool.pop()
            else:
                sizes[r] = rng.choice(_SIZES)
        return sizes


def _expr_dims(x) -> List[Dim]:
    """The Dims of a size expression (:meth:`InstanceGenerator._guard_expr`)."""
    if x[0] == "dim":
        return [x[1]]
    if x[0] == "const":
        return []
    return _expr_dims(x[1]) + _expr_dims(x[2])


def _as_dim(x) -> Optional[Dim]:
    """A ``dim`` or a positive ``const`` size expression as a Dim."""
    if x[0] == "dim":
        return x[1]
    return Dim(x[1]) if isinstance(x[1], int) and x[1] >= 1 else None


def _coerce(kind: str, v):
    base = kind.replace("_or_none", "")
    if base == "int" and isinstance(v, float) and v.is_integer():
        return int(v)
    if base == "int_list" and isinstance(v, (list, tuple)):
        return [int(x) if isinstance(x, float) and x.is_integer() else x for x in v]
    if base == "float" and isinstance(v, int) and not isinstance(v, bool):
        return float(v)
    return v


def _fits(kind: str, v) -> bool:
    base = kind.replace("_or_none", "")
    if base == "number" and isinstance(v, bool):  # a Scalar may be a bool (x | True)
        return True
    if base in ("number", "float", "tensor_or_scalar"):
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if base == "int":
        return isinstance(v, int) and not isinstance(v, bool)
    if base == "bool":
        return isinstance(v, bool)
    if base == "str":
        return isinstance(v, str)
    if base == "dtype":
        return isinstance(v, torch.dtype) or type(v).__name__ == "DType"
    return False


def _post_order(*roots: App) -> List[App]:
    out, seen = [], set()

    def visit(t):
        if not isinstance(t, App) or id(t) in seen:
            return
        seen.add(id(t))
        for a in t.args:
            visit(a)
        out.append(t)
    for root in roots:
        visit(root)
    return out




# ------------------------------------------------------------ guards

def _attr(inst: Instance, t, attr: int, dtype_of=None) -> Optional[int]:
    if isinstance(t, Leaf) and t.kind != "tensor":
        return None
    if not isinstance(t, (Leaf, App)):
        return None
    shape = inst.shape(t)
    if attr == core.RANK:
        return None if shape is None else len(shape)
    if attr == core.DTYPE:
        dt = inst.dtypes.get(t) if isinstance(t, Leaf) else (
            dtype_of(t) if dtype_of is not None else None)
        pm = TORCH_TO_PM.get(dt) if dt is not None else None
        return pm.code if pm is not None else None
    if shape is None:
        return None
    if core.SHAPE_BASE <= attr < core.SHAPE_BASE + core.MAX_RANK:
        i = attr - core.SHAPE_BASE
        return shape[i] if i < len(shape) else None
    if core.SHAPE_NEG_BASE <= attr < core.SHAPE_NEG_BASE + core.MAX_RANK:
        j = attr - core.SHAPE_NEG_BASE
        return shape[len(shape) - 1 - j] if j < len(shape) else None
    return None


class _InstanceGuards(truth.Evaluator):
    """The matcher's guard semantics (the one evaluator,
    :class:`..engines.truth.Evaluator`: strict in the unknown, bounded
    arithmetic) on an instance's terms: ``ctx = (site, inst, dtype_of)``. An
    attribute the term lacks (the rank of a constant) is unknown, so the
    guard fails as in the matcher; the dtype of an operator's result that
    torch has not computed yet (no ``dtype_of``) is
    :data:`~..engines.truth.PENDING`."""

    __slots__ = ()

    def attr(self, x, attr, ctx):
        site, inst, dtype_of = ctx
        iv = site.env.get(x)
        t = iv.term if isinstance(iv, _IVar) else iv
        if attr == core.DTYPE and isinstance(t, App) and dtype_of is None:
            return truth.PENDING
        return _attr(inst, t, attr, dtype_of)

    def fattr(self, F, attr, ctx):
        fv = ctx[0].fenv.get(F)
        op = fv.op if isinstance(fv, _FVar) else fv
        if attr == core.OPCLASS and op is not None and op.op_class is not None:
            return op.op_class.code
        return truth.UNKNOWN


_GUARDS = _InstanceGuards()


def eval_guard(g, site: GuardSite, inst: Instance, dtype_of=None) -> Optional[bool]:
    """``g`` on the instance's terms as the matcher would judge it: True
    (holds), False (fails: false, or reads an attribute the term lacks, such
    as the rank of a constant), or None when it depends on the dtype of an
    operator's result that torch has not computed yet (``dtype_of(app)``
    gives them once the instance is built)."""
    v = _GUARDS.truth(g, (site, inst, dtype_of))
    if v is truth.PENDING:
        return None
    return v is True


# ------------------------------------------------- instances between processes

class _Pickler(pickle.Pickler):
    """Pickles an instance with its operators and torch targets by name:
    the worker that loads it has its own (the same rule files loaded)."""

    def persistent_id(self, obj):
        if isinstance(obj, Op):
            return ("op",) + _op_key(obj)
        if isinstance(obj, torch._ops.OpOverload):
            return ("target", obj._schema.name, obj._overloadname)
        return None


class _Unpickler(pickle.Unpickler):
    def __init__(self, f, pattern):
        super().__init__(f)
        self.pattern, self.ops = pattern, None

    def persistent_load(self, pid):
        if pid[0] == "target":
            ns, name = pid[1].split("::", 1)
            return getattr(getattr(getattr(torch.ops, ns), name), pid[2])
        if self.ops is None:
            self.ops = _op_table(self.pattern)
        try:
            return self.ops[pid[1:]]
        except KeyError:
            raise RuntimeError(f"operator {pid[1]} ({':'.join(map(str, pid[2]))}) of an "
                               f"instance of pattern {self.pattern.name} is not defined in "
                               "this process") from None


def _op_key(op) -> tuple:
    """An operator by name, place of definition (an absolute path: the same
    in every process, whatever its directory) and torch targets."""
    code = getattr(op.fn, "__code__", None)
    place = (os.path.realpath(code.co_filename), code.co_firstlineno) if code is not None \
        else (op.where,)
    return (op.name, place, tuple(str(t) for t in getattr(op, "torch_targets", ())))


def _op_table(pattern) -> dict:
    """The operators an instance of ``pattern`` may hold, by :func:`_op_key`:
    those bound to torch targets and those the pattern applies."""
    ops = list(TORCH_OPS.values())
    for d in pattern.program.defs:
        ops += [symbols.lookup(q.f) for q in core.walk(d.body) if isinstance(q, core.PApp)]
    table: dict = {}
    for o in ops:
        if isinstance(o, Op):
            table.setdefault(_op_key(o), o)
    return table


def dump_instance(inst: Instance) -> bytes:
    """``inst`` pickled for :func:`load_instance` (in any process that
    loaded the same rules): a copy as it is now."""
    f = io.BytesIO()
    _Pickler(f, protocol=pickle.HIGHEST_PROTOCOL).dump(inst)
    return f.getvalue()


def load_instance(pattern, data: bytes) -> Instance:
    """The instance of ``pattern`` that :func:`dump_instance` pickled."""
    return _Unpickler(io.BytesIO(data), pattern).load()
