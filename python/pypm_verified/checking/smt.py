"""Symbolic proofs of rewrites: an index-level semantics of the ATen ops the
rule library uses, and SMT obligations (z3) over every size.

A *structure* is a matched subgraph and its replacement with everything but
the sizes fixed: the operators, their axis and scalar arguments, the rank
of every input (TensorRight's "instantiated rank"). :func:`prove` reads
both as functions of an output index, with

* every input a z3 uninterpreted function from index tuples to reals and
  every size a z3 integer ``>= 1`` (so size-1 broadcasting is one of the
  cases, not a separate instance);
* pointwise ops with PyTorch's broadcasting; ``transpose``/``t``/
  ``permute`` as index maps; ``view``/``reshape``/``_unsafe_view`` as the
  row-major index map between the two shapes (:meth:`Semantics.reshape`:
  an axis kept keeps its size, whatever it is; the axes a view splits or
  merges have the instance's sizes); ``matmul``/``mm``/``bmm``/``linear``/
  ``addmm`` as sums over the contracted axis; ``mean``, ``var`` (with its
  correction), ``softmax`` and ``log_softmax`` as sums over the reduced
  axes; the pointwise functions by their
  definitions (below); a sum ``Σ_{k<n} f(k)`` an uninterpreted function of the array
  ``k ↦ f(k)`` (zero outside ``0 <= k < n``) and ``n``, so two sums are
  equal when their summands are (TensorRight's one-to-one correspondence
  of reductions);
* fused ops by their documented definition: ``gelu`` with PyTorch's
  constants (``M_SQRT1_2``; ``M_SQRT2 * M_2_SQRTPI * 0.5``),
  ``rms_norm`` as ``x * rsqrt(mean(x², normalized axes) + eps) * w``,
  ``layer_norm`` as ``(x - μ) * rsqrt(σ² + eps) * w + b`` (``μ`` the mean
  over the normalized axes, ``σ²`` the mean of ``(x - μ)²``),
  ``scaled_dot_product_attention`` as ``softmax(q kᵀ · scale + mask) v``
  (float masks; a boolean mask needs ``-inf``, which is no real), and
  ``pypm.linear_act`` as the activation of ``linear``;
* ``baddbmm`` as ``beta * bias + alpha * bmm``; ``_safe_softmax`` as
  ``softmax`` (they differ on rows of -inf only);
* casts (``_to_copy``, ``type_as``, ``clone``, inference ``dropout`` and
  ``native_dropout``) as the identity;
* ``cat`` as a piecewise index map, ``split_with_sizes`` (its integer sizes
  read as the sizes of the pieces its input concatenates, checked on the
  instance; else unsupported) and ``split`` (as many pieces as on the
  instance) as offset pieces, ``getitem`` picking one
  (multi-root fusions, ``library/fusion.py``); ``embedding`` as the
  weight's row at each index.

Each op's semantics is a function filed under its overload's name
(:data:`SEMANTICS`, and :data:`EXACT_FIRST` / :data:`EXTENDED` for the
integer and boolean reading); the op registry (``torch/registry.py``)
reads them, and lists every op the DSL declares with its semantics or why
it has none.

Pointwise functions. Four primitives are uninterpreted functions of a real,
the same on both sides: ``exp``, ``log``, ``erf`` and ``sqrt``
(:data:`PRIMITIVES`). Every other pointwise function is *defined* from them
and real arithmetic, exactly as the mathematical function torch computes
(checked against torch in ``tests/test_check_rules_pointwise.py``):

==============================  ============================================
``sigmoid(x)``                  ``1 / (1 + exp(-x))``
``silu(x)``                     ``x * sigmoid(x)``
``tanh(x)``                     ``2 / (1 + exp(-2x)) - 1`` (``2 sigmoid(2x) - 1``)
``gelu(x)``                     ``x * 0.5 * (1 + erf(x * M_SQRT1_2))``
``gelu(x, approximate="tanh")`` ``0.5 x (1 + tanh(β (x + κ x³)))``, PyTorch's β, κ
``softplus(x, beta)``           ``log(1 + exp(beta x)) / beta`` (torch's
                                ``threshold`` linearization, off by under
                                ``exp(-threshold)`` relative, is rounding)
``mish(x)``                     ``x * tanh(softplus(x))``
``relu``, ``relu6``,            ``If(x > 0, x, 0)``; ``clamp(x, 0, 6)``;
``hardtanh``, ``clamp``         ``min(max(x, lo), hi)``
``leaky_relu(x, s)``            ``If(x > 0, x, s x)``
``hardsigmoid(x)``              ``clamp(x + 3, 0, 6) / 6``
``hardswish(x)``                ``x * hardsigmoid(x)``
``elu(x, α, scale, in_scale)``  ``If(x > 0, scale x, scale α (exp(in_scale x) - 1))``;
                                ``selu``: PyTorch's α and scale; ``celu``:
                                ``max(0, x) + min(0, α (exp(x / α) - 1))``
``rsqrt(x)``, ``reciprocal``    ``1 / sqrt(x)``, ``1 / x``
``log1p``, ``expm1``            ``log(1 + x)``, ``exp(x) - 1``
``neg``, ``abs``, ``square``    ``-x``, ``If(x >= 0, x, -x)``, ``x * x``
``pow(x, e)``                   ``x`` multiplied out for an integer ``|e| <= 4``
                                (``1 / ...`` below 0), ``sqrt``/``rsqrt`` for
                                ``e = ±0.5``; other exponents uninterpreted
==============================  ============================================

and ``log(exp(a))`` is ``a``. Where the first search finds a difference, it
is repeated with ground instances of laws true of the real primitives on
the primitives' terms of the obligation (:func:`primitive_laws`: ``exp``
positive, ``exp(a) exp(-a) = 1``, ``exp(0) = 1``, ``exp(a) exp(b) =
exp(a + b)`` between its terms, ``log`` and ``exp`` inverse, ``erf`` odd and in (-1, 1), ``sqrt(t)² = t`` for ``t >= 0``,
``exp``/``erf``/``log`` increasing), and, where torch confirms no
difference, of the sums built (a sum of squares, a variance's, is ``>= 0``),
so a proof never rests on anything but
the definitions and true facts: "proved" holds of the real functions for
every real input. An identity beyond these (``exp(3x) = exp(x)³``, which
needs ``exp(2x)``, a term neither side has, say) is not proved.

The obligation: whenever the original subgraph is well-defined (its shape
constraints: contracted sizes agree, broadcast sizes are equal or 1), the
replacement is well-defined too (its constraints are *proved*, not
assumed), has the same shape, and the same value at every index. ``unsat``
of the negation is a proof **over the reals** for every size of that
structure; floating-point results may still differ by rounding (no rule is
claimed bit-for-bit: a fused kernel sums in its own order). ``sat`` gives
a model -- sizes, input values, and values of the uninterpreted functions
-- under which the two differ; since those functions (the primitives,
sums, ``x / 0``) may take values there that the real ones never do, the
verdict is "differs" only when torch confirms it on a concrete input
(:func:`.evaluate.confirm_difference`: z3's sizes and values first, then
random values at z3's sizes and at the instance's, in float64): the
:class:`Proof` carries that counterexample. Otherwise it is "unknown",
naming the uninterpreted functions the difference may hinge on
("uninterpreted: exp; ...") and why no input confirmed it (a float
constant of the pattern that is not exactly the kernel's differs over the
reals by less than any tolerance, say). An op outside the semantics gives
"unsupported". The trust base: this file's semantics of each op (checked
against torch's shape rules in ``tests/test_smt.py``, the pointwise
definitions against torch's values in ``tests/test_check_rules_pointwise.py``,
the terms of the ops the DSL declares, evaluated on concrete inputs, against
torch's values in ``tests/test_registry.py``) and z3.
"""
from __future__ import annotations

import itertools
import math
import operator
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.fx as fx
import z3

aten = torch.ops.aten

#: PyTorch's GELU constants, as the CPU/CUDA kernels compute them (doubles)
M_SQRT1_2 = 0.70710678118654752440
GELU_TANH_BETA = math.sqrt(2.0) * (2.0 / math.sqrt(math.pi)) * 0.5  # M_SQRT2 * M_2_SQRTPI * 0.5
GELU_TANH_KAPPA = 0.044715


class Unsupported(Exception):
    """An op, argument or dtype outside the semantics."""


Idx = List[z3.ArithRef]


@dataclass
class Sym:
    """A tensor: its sizes (z3 integers) and its value at an index."""
    shape: List[z3.ArithRef]
    at: Callable[[Idx], z3.ArithRef]

    @property
    def rank(self) -> int:
        return len(self.shape)


def _real(v) -> z3.ArithRef:
    if isinstance(v, bool):
        return z3.RealVal(int(v))
    if isinstance(v, int):
        return z3.RealVal(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise Unsupported(f"the constant {v!r} is not a real number")
        f = Fraction(v)  # the double's exact value
        return z3.Q(f.numerator, f.denominator)
    raise Unsupported(f"constant {v!r}")


def _never(c) -> bool:
    """Whether ``c`` is ``n == 1`` of an integer ``n`` other than 1 (as built,
    no new term)."""
    return z3.is_eq(c) and all(z3.is_int_value(a) for a in c.children()) \
        and c.arg(0).as_long() != c.arg(1).as_long()


def _is_square(e) -> bool:
    """Whether ``e`` is ``u * u`` or ``(1 * u) * u`` (``pow(u, 2)``'s term),
    read off the term as built (no new term: the order terms are created in
    steers z3's search)."""
    if not z3.is_mul(e) or e.num_args() != 2:
        return False
    a, b = e.arg(0), e.arg(1)
    if z3.is_mul(a) and a.num_args() == 2 and z3.is_rational_value(a.arg(0)) \
            and a.arg(0).as_fraction() == 1:
        a = a.arg(1)
    return a.eq(b)


class Semantics:
    """One proof obligation's symbols, functions and constraints. Ops of the
    original add *assumptions* (its well-definedness); ops of the replacement
    add *obligations*."""

    def __init__(self):
        self.assume: List[z3.BoolRef] = []
        self.oblige: List[z3.BoolRef] = []
        self.replacement = False
        self._fns: Dict[str, z3.FuncDeclRef] = {}
        #: the inputs' functions (rank 0: constants) by name, and their decls
        self.input_fns: Dict[str, object] = {}
        self.input_decls: List[z3.FuncDeclRef] = []
        self._depth = 0
        self.sum = z3.Function("Sum", z3.ArraySort(z3.IntSort(), z3.RealSort()), z3.IntSort(),
                               z3.RealSort())
        # ground laws of the sums built (true of every finite sum, so assumed
        # on both sides): a sum of one term is that term
        self.axioms: List[z3.BoolRef] = []
        # more, assumed only where a difference z3 finds is not confirmed
        # (they make its search for one slower): a sum of squares is >= 0
        self.laws: List[z3.BoolRef] = []
        #: merged view indices: term id -> (the term, its digits) (Semantics.reshape)
        self._merged: Dict[int, Tuple[z3.ArithRef, List[Tuple[z3.ArithRef, int]]]] = {}

    # ------------------------------------------------------------- helpers
    def require(self, c: z3.BoolRef):
        (self.oblige if self.replacement else self.assume).append(c)

    def fn(self, name: str, arity: int = 1) -> z3.FuncDeclRef:
        if name not in self._fns:
            self._fns[name] = z3.Function(name, *([z3.RealSort()] * (arity + 1)))
        return self._fns[name]

    def input(self, name: str, rank: int) -> Sym:
        sizes = [z3.Int(f"{name}_n{i}") for i in range(rank)]
        for s in sizes:
            self.assume.append(s >= 1)
        if rank == 0:
            c = z3.Real(name)
            self.input_fns[name] = c
            return Sym([], lambda idx: c)
        f = z3.Function(name, *([z3.IntSort()] * rank), z3.RealSort())
        self.input_fns[name] = f
        self.input_decls.append(f)
        return Sym(sizes, lambda idx: f(*idx))

    def const(self, v) -> Sym:
        r = _real(v)
        return Sym([], lambda idx: r)

    def reduce(self, n: z3.ArithRef, body: Callable[[z3.ArithRef], z3.ArithRef]) -> z3.ArithRef:
        """``Σ_{k<n} body(k)``. The bound variable is named by its nesting
        depth, so the same sum built on both sides is the same term."""
        k = z3.Int(f"k{self._depth}")
        self._depth += 1
        try:
            b = body(k)
        finally:
            self._depth -= 1
        total = self.sum(z3.Lambda([k], z3.If(z3.And(k >= 0, k < n), b, 0)), n)
        if self._depth == 0:  # no enclosing bound variable in b: a ground law
            self.axioms.append(z3.Implies(n == 1, total == z3.substitute(b, (k, z3.IntVal(0)))))
            if _is_square(b):  # a sum of squares (a variance's, a norm's) is >= 0
                self.laws.append(total >= 0)
        return total

    # ---------------------------------------------------------- broadcasting
    def broadcast(self, *xs: Sym) -> List[z3.ArithRef]:
        r = max(x.rank for x in xs)
        out = []
        for i in range(r):
            dims = [x.shape[x.rank - r + i] for x in xs if x.rank - r + i >= 0]
            size = dims[0]
            for d in dims[1:]:
                self.require(z3.Or(d == size, d == 1, size == 1))
                size = z3.If(size == 1, d, size)
            out.append(size)
        return out

    @staticmethod
    def index_into(x: Sym, idx: Idx, out: Optional[List[z3.ArithRef]] = None) -> Idx:
        """The index of ``x`` that a broadcast output index reads (on an
        axis whose size is the output's own term, the index itself)."""
        off = len(idx) - x.rank
        return [idx[off + j] if out is not None and x.shape[j].eq(out[off + j])
                else z3.If(x.shape[j] == 1, 0, idx[off + j]) for j in range(x.rank)]

    def pointwise(self, f: Callable[..., z3.ArithRef], *xs: Sym) -> Sym:
        shape = self.broadcast(*xs)
        return Sym(shape, lambda idx: f(*[x.at(self.index_into(x, idx, shape)) for x in xs]))

    # ------------------------------------------------------------- layout
    @staticmethod
    def axis(d: int, rank: int) -> int:
        if not -max(rank, 1) <= d < max(rank, 1):
            raise Unsupported(f"axis {d} of a rank-{rank} tensor")
        return d % rank if rank else 0

    def permute(self, x: Sym, perm: Sequence[int]) -> Sym:
        perm = [self.axis(p, x.rank) for p in perm]
        if sorted(perm) != list(range(x.rank)):
            raise Unsupported(f"permute({list(perm)}) of a rank-{x.rank} tensor")

        def at(idx):
            src = [None] * x.rank
            for i, p in enumerate(perm):
                src[p] = idx[i]
            return x.at(src)
        return Sym([x.shape[p] for p in perm], at)

    def transpose(self, x: Sym, a: int, b: int) -> Sym:
        if x.rank == 0:
            return x
        perm = list(range(x.rank))
        a, b = self.axis(a, x.rank), self.axis(b, x.rank)
        perm[a], perm[b] = perm[b], perm[a]
        return self.permute(x, perm)

    # ---------------------------------------------------------- contraction
    def matmul(self, a: Sym, b: Sym, batched: bool = True) -> Sym:
        """``torch.matmul``: 1-D operands get a unit axis (removed after),
        batch axes broadcast, the contracted sizes agree."""
        if a.rank == 0 or b.rank == 0:
            raise Unsupported("matmul of a 0-d tensor")
        one = z3.IntVal(1)
        sa = ([one] if a.rank == 1 else []) + a.shape
        sb = b.shape + ([one] if b.rank == 1 else [])
        A = Sym(sa, (lambda idx: a.at(idx[1:])) if a.rank == 1 else a.at)
        B = Sym(sb, (lambda idx: b.at(idx[:-1])) if b.rank == 1 else b.at)
        self.require(sa[-1] == sb[-2])
        if not batched and (len(sa) > 3 or len(sb) > 3 or len(sa) != len(sb)):
            raise Unsupported("mm/bmm of mismatched ranks")
        ba, bb = Sym(sa[:-2], None), Sym(sb[:-2], None)
        batch = self.broadcast(ba, bb) if (ba.rank or bb.rank) else []
        nb = len(batch)

        def at(idx):
            bidx, i, j = idx[:nb], idx[nb], idx[nb + 1]
            ia = self.index_into(ba, bidx) if ba.rank else []
            ib = self.index_into(bb, bidx) if bb.rank else []
            return self.reduce(sa[-1], lambda k: A.at(ia + [i, k]) * B.at(ib + [k, j]))
        full = Sym(batch + [sa[-2], sb[-1]], at)
        if a.rank == 1 and b.rank == 1:
            return Sym([], lambda idx: full.at([z3.IntVal(0), z3.IntVal(0)]))
        if a.rank == 1:
            return Sym(full.shape[:-2] + [full.shape[-1]],
                       lambda idx: full.at(idx[:-1] + [z3.IntVal(0), idx[-1]]))
        if b.rank == 1:
            return Sym(full.shape[:-1], lambda idx: full.at(idx + [z3.IntVal(0)]))
        return full

    def linear(self, x: Sym, w: Sym, b: Optional[Sym]) -> Sym:
        """``x wᵀ + b`` (``w`` 2-D)."""
        if w.rank != 2 or x.rank == 0:
            raise Unsupported(f"linear with a rank-{w.rank} weight")
        out = self.matmul(x, self.transpose(w, 0, 1))
        return out if b is None else self.pointwise(lambda u, v: u + v, out, b)

    def mean(self, x: Sym, dims: Sequence[int], keepdim: bool) -> Sym:
        dims = sorted({self.axis(d, x.rank) for d in dims}) if dims else list(range(x.rank))
        keep = [i for i in range(x.rank) if i not in dims]
        count = z3.IntVal(1)
        for d in dims:
            count = count * x.shape[d]

        def at(idx):
            def inner(full, rest):
                if not rest:
                    return x.at(full)
                d = rest[0]
                return self.reduce(x.shape[d], lambda k: inner(full[:d] + [k] + full[d + 1:],
                                                                rest[1:]))
            if keepdim:
                full = list(idx)
            else:
                full, it = [], iter(idx)
                for i in range(x.rank):
                    full.append(z3.IntVal(0) if i in dims else next(it))
            return inner(full, dims) / z3.ToReal(count)
        shape = [z3.IntVal(1) if i in dims else x.shape[i] for i in range(x.rank)] if keepdim \
            else [x.shape[i] for i in keep]
        return Sym(shape, at)

    def softmax(self, x: Sym, dim: int) -> Sym:
        if x.rank == 0:
            raise Unsupported("softmax of a 0-d tensor")
        d = self.axis(dim, x.rank)
        exp = self.exp

        def at(idx):
            den = self.reduce(x.shape[d], lambda k: exp(x.at(idx[:d] + [k] + idx[d + 1:])))
            return exp(x.at(idx)) / den
        return Sym(list(x.shape), at)

    # ---------------------------------------------------- concatenation
    def cat(self, xs: Sequence[Sym], dim: int) -> Sym:
        """``torch.cat``: equal ranks, equal sizes but on ``dim``, where
        they add up; index ``i`` on ``dim`` reads the piece it falls in."""
        if not xs or any(x.rank != xs[0].rank for x in xs) or xs[0].rank == 0:
            raise Unsupported("cat of tensors of different ranks or of 0-d tensors")
        d = self.axis(dim, xs[0].rank)
        for x in xs[1:]:
            for j in range(x.rank):
                if j != d:
                    self.require(x.shape[j] == xs[0].shape[j])
        offs, o = [], z3.IntVal(0)
        for x in xs:
            offs.append(o)
            o = o + x.shape[d]
        total = xs[0].shape[d] if len(xs) == 1 else z3.Sum(*[x.shape[d] for x in xs])

        def at(idx):
            def piece(i):
                return xs[i].at(list(idx[:d]) + [idx[d] - offs[i]] + list(idx[d + 1:]))
            v = piece(len(xs) - 1)
            for i in reversed(range(len(xs) - 1)):
                v = z3.If(idx[d] < offs[i + 1], piece(i), v)
            return v
        return Sym(xs[0].shape[:d] + [total] + xs[0].shape[d + 1:], at)

    def split(self, x: Sym, sizes: Sequence[z3.ArithRef], d: int) -> List[Sym]:
        """``torch.split_with_sizes``: the sizes add up to the size on ``d``;
        piece ``i`` reads ``x`` from the sum of the sizes before it."""
        self.require((sizes[0] if len(sizes) == 1 else z3.Sum(*sizes)) == x.shape[d])
        out, o = [], z3.IntVal(0)
        for s in sizes:
            out.append(Sym(x.shape[:d] + [s] + x.shape[d + 1:],
                           lambda idx, o=o: x.at(list(idx[:d]) + [idx[d] + o]
                                                 + list(idx[d + 1:]))))
            o = o + s
        return out

    # ------------------------------------------- pointwise functions (terms)
    # The primitives (PRIMITIVES) are uninterpreted functions shared by both
    # sides; everything else is defined from them (see the module docstring).
    def exp(self, u):
        return self.fn("exp")(u)

    def erf(self, u):
        return self.fn("erf")(u)

    def sqrt(self, u):
        return self.fn("sqrt")(u)

    def log(self, u):
        if z3.is_app(u) and u.decl().eq(self.fn("exp")):
            return u.arg(0)  # log(exp(a)) = a for every real a
        return self.fn("log")(u)

    def rsqrt(self, u):
        return 1 / self.sqrt(u)

    def sigmoid(self, u):
        return 1 / (1 + self.exp(-u))

    def tanh(self, u):
        return 2 / (1 + self.exp(-2 * u)) - 1  # 2 sigmoid(2u) - 1

    def silu(self, u):
        return u * self.sigmoid(u)

    def softplus(self, u, beta=1):
        b = _real(beta)
        return self.log(1 + self.exp(b * u)) / b

    def mish(self, u):
        return u * self.tanh(self.softplus(u))

    @staticmethod
    def clamp(u, lo=None, hi=None):
        if lo is not None:
            u = z3.If(u >= lo, u, lo)
        if hi is not None:
            u = z3.If(u <= hi, u, hi)
        return u

    def hardsigmoid(self, u):
        return self.clamp(u + 3, z3.RealVal(0), z3.RealVal(6)) / 6

    def elu(self, u, alpha=1, scale=1, input_scale=1):
        a, s, i = _real(alpha), _real(scale), _real(input_scale)
        return z3.If(u > 0, s * u, s * a * (self.exp(i * u) - 1))

    def gelu_term(self, u, approximate: str):
        if approximate == "none":
            return u * _real(0.5) * (1 + self.erf(u * _real(M_SQRT1_2)))
        if approximate == "tanh":
            beta, kappa = _real(GELU_TANH_BETA), _real(GELU_TANH_KAPPA)
            return _real(0.5) * u * (1 + self.tanh(beta * (u + kappa * u * u * u)))
        raise Unsupported(f"gelu(approximate={approximate!r})")

    # --------------------------------------------------------- definitions
    def gelu(self, x: Sym, approximate: str) -> Sym:
        if approximate not in ("none", "tanh"):
            raise Unsupported(f"gelu(approximate={approximate!r})")
        return self.pointwise(lambda u: self.gelu_term(u, approximate), x)

    def rms_norm(self, x: Sym, normalized: Sequence[int], w: Optional[Sym], eps) -> Sym:
        if eps is None:
            raise Unsupported("rms_norm without eps (the dtype's epsilon)")
        k = len(normalized)
        if not 1 <= k <= x.rank:
            raise Unsupported(f"rms_norm over {k} axes of a rank-{x.rank} tensor")
        rsqrt = self.rsqrt
        sq = self.pointwise(lambda u: u * u, x)
        ms = self.mean(sq, list(range(x.rank - k, x.rank)), keepdim=True)
        y = self.pointwise(lambda u, m: u * rsqrt(m + _real(eps)), x, ms)
        if w is not None:
            if w.rank != k:
                raise Unsupported("rms_norm weight of another rank")
            y = self.pointwise(lambda u, v: u * v, y, w)
        return y

    def layer_norm(self, x: Sym, k: int, w: Optional[Sym], b: Optional[Sym], eps) -> Sym:
        """``(x - μ) * rsqrt(σ² + eps) * w + b`` over the last ``k`` axes, with
        ``μ`` their mean and ``σ²`` the mean of ``(x - μ)²`` (the biased
        variance, as torch's kernel); ``w`` and ``b`` have exactly the
        normalized sizes (torch raises otherwise: required, not broadcast)."""
        if not 1 <= k <= x.rank:
            raise Unsupported(f"layer_norm over {k} axes of a rank-{x.rank} tensor")
        axes = list(range(x.rank - k, x.rank))
        rsqrt, e = self.rsqrt, _real(eps)
        c = self.pointwise(lambda u, m: u - m, x, self.mean(x, axes, keepdim=True))
        var = self.mean(self.pointwise(lambda u: u * u, c), axes, keepdim=True)
        y = self.pointwise(lambda u, v: u * rsqrt(v + e), c, var)
        for p, what in ((w, "weight"), (b, "bias")):
            if p is None:
                continue
            if p.rank != k:
                raise Unsupported(f"layer_norm {what} of rank {p.rank}, not {k}")
            for j in range(k):
                self.require(p.shape[j] == x.shape[x.rank - k + j])
            y = self.pointwise((lambda u, v: u * v) if what == "weight" else (lambda u, v: u + v),
                               y, p)
        return y

    def log_softmax(self, x: Sym, dim: int) -> Sym:
        """``x - log Σ_k exp(x_k)`` over ``dim``."""
        if x.rank == 0:
            raise Unsupported("log_softmax of a 0-d tensor")
        d = self.axis(dim, x.rank)
        exp, log = self.exp, self.log

        def at(idx):
            return x.at(idx) - log(self.reduce(
                x.shape[d], lambda k: exp(x.at(idx[:d] + [k] + idx[d + 1:]))))
        return Sym(list(x.shape), at)

    def var(self, x: Sym, dims: Sequence[int], correction, keepdim: bool) -> Sym:
        """``Σ (x - μ)² / (N - correction)`` over ``dims`` (all when empty),
        ``N`` the count of the reduced elements, required above
        ``correction`` (torch gives inf or nan there). With correction 0 it
        is the mean of the squared deviations, the term :meth:`layer_norm` builds."""
        dims = sorted({self.axis(d, x.rank) for d in dims}) if dims else list(range(x.rank))
        c = self.pointwise(lambda u, m: u - m, x, self.mean(x, dims, keepdim=True))
        m = self.mean(self.pointwise(lambda u: u * u, c), dims, keepdim)
        if not correction:
            return m
        cv = _real(correction)
        count = z3.IntVal(1)
        for d in dims:
            count = count * x.shape[d]
        n = z3.ToReal(count)
        self.require(n > cv)
        return Sym(m.shape, lambda idx: m.at(idx) * n / (n - cv))

    def reshape(self, x: Sym, ins: Sequence[int], outs: Sequence[int]) -> Sym:
        """``view``/``reshape`` of ``x`` from the instance's sizes ``ins`` to
        ``outs``, in row-major order. The axes are grouped where the running
        products of the two size lists meet: a group of one axis on each side
        keeps the input's size, whatever it is (``view(x, x.shape)``-like
        calls read their sizes off the input, as a rule does); an axis of size
        1 added or dropped is one of the structure (size 1 assumed / obliged);
        the axes of a group that splits or merges axes have the instance's
        sizes (assumed / obliged), and an index maps through its row-major
        offset in the group."""
        if x.rank != len(ins) or any(s < 1 for s in list(ins) + list(outs)) \
                or math.prod(ins) != math.prod(outs):
            raise Unsupported(f"a view of sizes {list(ins)} as {list(outs)}")
        groups = _view_groups(list(ins), list(outs))
        shape: List[z3.ArithRef] = [z3.IntVal(1)] * len(outs)
        for gi, gj in groups:
            if len(gi) == 1 and len(gj) == 1:
                shape[gj[0]] = x.shape[gi[0]]
                continue
            for a in gi:
                self.require(x.shape[a] == ins[a])
            for b in gj:
                shape[b] = z3.IntVal(outs[b])

        def at(idx):
            src: List[z3.ArithRef] = [z3.IntVal(0)] * x.rank
            for gi, gj in groups:
                if len(gi) == 1 and len(gj) == 1:
                    src[gi[0]] = idx[gj[0]]
                    continue
                if not gi or not gj:
                    continue  # axes of size 1: index 0
                digits = [d for b in gj for d in self._digits(idx[b], outs[b])]
                for a, v in zip(gi, self._regroup(digits, [ins[a] for a in gi])):
                    src[a] = v
            return x.at(src)
        return Sym(shape, at)

    # An index of a view's output axis that merges axes is a mixed-radix
    # number of the merged axes' indices (its digits). The term built for one
    # is recorded with its digits, so that a view that splits it again reads
    # the digits back: view(view(x, merged), split) indexes x by the very
    # terms it was indexed by (no division, which z3 reasons about slowly).
    # Sound because a view reads its operand only at indices in range, where
    # every digit is below its radix.

    def _digits(self, t, radix: int) -> List[Tuple[z3.ArithRef, int]]:
        """``t``, an index below ``radix``, as digits ``(term, radix)``, most
        significant first: those it was merged from, else itself."""
        while z3.is_app_of(t, z3.Z3_OP_ITE) and _never(t.arg(0)):
            t = t.arg(2)  # a broadcast's If(size == 1, 0, i) with a size other than 1
        rec = self._merged.get(t.get_id())
        if rec is not None and math.prod(r for _, r in rec[1]) == radix:
            return list(rec[1])
        return [(t, radix)]

    def _merge(self, digits: List[Tuple[z3.ArithRef, int]]) -> z3.ArithRef:
        """The number whose digits are ``digits`` (recorded as such)."""
        digits = [(t, r) for t, r in digits if r > 1]  # a digit below 1 is 0
        if not digits:
            return z3.IntVal(0)
        if len(digits) == 1:
            return digits[0][0]
        t, w = None, 1
        for d, r in reversed(digits):
            t = d * w if t is None else d * w + t
            w *= r
        t = z3.simplify(t)
        self._merged[t.get_id()] = (t, digits)
        return t

    def _regroup(self, digits: List[Tuple[z3.ArithRef, int]], radices: List[int]) -> Idx:
        """The digits, of the same number, with ``radices`` (most significant
        first): whole digits merged where the radices line up, else by
        division and remainder."""
        ds = [(t, r) for t, r in digits if r > 1]
        out: List[z3.ArithRef] = []  # least significant first
        for i in reversed(range(len(radices))):
            R = radices[i]
            if R == 1:
                out.append(z3.IntVal(0))
                continue
            if all(r == 1 for r in radices[:i]):  # the most significant: all that is left
                out.append(self._merge(ds))
                ds = []
                continue
            acc: List[Tuple[z3.ArithRef, int]] = []
            ar = 1
            while ar < R and ds:
                acc.insert(0, ds.pop())
                ar *= acc[0][1]
            t = self._merge(acc)
            if ar == R:
                out.append(t)
            elif ar % R == 0:
                out.append(t % R)
                ds.append((t / R, ar // R))
            else:  # the radices do not line up
                return self._divide(ds + acc, radices[:i + 1]) + list(reversed(out))
        return list(reversed(out))

    def _divide(self, digits, radices: List[int]) -> Idx:
        """The number of ``digits`` in ``radices`` by division and remainder
        (the most significant: the quotient left)."""
        t = self._merge(digits)
        out = []
        for R in reversed(radices[1:]):
            out.append(t % R if R > 1 else z3.IntVal(0))
            t = t / R if R > 1 else t
        out.append(t if radices[0] > 1 else z3.IntVal(0))
        return list(reversed(out))

    def sdpa(self, q: Sym, k: Sym, v: Sym, mask, dropout_p, is_causal, scale,
             mask_is_bool: bool) -> Sym:
        if dropout_p not in (0, 0.0) or is_causal:
            raise Unsupported("scaled_dot_product_attention with dropout or is_causal")
        if scale is None:
            raise Unsupported("scaled_dot_product_attention's default scale 1/sqrt(E) "
                              "(irrational for most E)")
        if q.rank < 2 or k.rank < 2 or v.rank < 2:
            raise Unsupported("attention operands of rank < 2")
        s = self.matmul(q, self.transpose(k, -2, -1))
        s = self.pointwise(lambda u: u * _real(scale), s)
        if mask is not None:
            if mask_is_bool:
                raise Unsupported("a boolean attention mask (-inf is not a real)")
            # the mask must broadcast to the scores without growing them
            for i in range(1, mask.rank + 1):
                if i > s.rank:
                    self.require(z3.BoolVal(False))
                else:
                    self.require(z3.Or(mask.shape[-i] == s.shape[-i], mask.shape[-i] == 1))
            if mask.rank > s.rank:
                raise Unsupported("a mask of higher rank than the scores")
            s = self.pointwise(lambda u, m: u + m, s, mask)
        return self.matmul(self.softmax(s, -1), v)


# ----------------------------------------------------------- FX to symbols
# The semantics of each op is a function filed in a table under its
# overload's name (SEMANTICS; the integer/boolean reading's EXACT_FIRST and
# EXTENDED below). The op registry (torch/registry.py) reads them: every
# ATen op the DSL declares has a function here, or the registry says why not.

#: SELU's constants (torch's, as doubles)
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946

#: the semantics of an op on floating values: ``(evaluator, node) -> Sym``
#: (a list of them for an op that returns several tensors)
Handler = Callable[["Evaluator", fx.Node], object]

#: overload name (``"aten.add.Tensor"``; ``"getitem"`` for
#: ``operator.getitem``) -> its semantics on floating values. The
#: integer/boolean reading (:data:`EXACT_FIRST`, :data:`EXTENDED`) answers
#: first where it applies.
SEMANTICS: Dict[str, Handler] = {}

_KEYS: Dict[object, str] = {}


def op_key(target) -> str:
    """The name ``target``'s semantics are filed under: its overload's name
    (``aten.add.Tensor``, ``pypm.linear_act.default``), ``getitem`` for
    ``operator.getitem``."""
    try:
        return _KEYS[target]
    except (KeyError, TypeError):
        pass
    k = "getitem" if target is operator.getitem else str(target)
    try:
        _KEYS[target] = k
    except TypeError:
        pass
    return k


def _key(t) -> str:
    return t if isinstance(t, str) else op_key(t)


def semantics(*targets, table: Optional[dict] = None):
    """Decorator: ``fn`` is the semantics of ``targets`` (overloads, or their
    names), in :data:`SEMANTICS` (or ``table``). One function per op and table."""
    tab = SEMANTICS if table is None else table

    def deco(fn):
        for t in targets:
            k = _key(t)
            if k in tab:
                raise ValueError(f"two semantics for {k}: {tab[k].__name__}, {fn.__name__}")
            tab[k] = fn
        return fn
    return deco


def handlers(target) -> List[Callable]:
    """The functions of this file that give ``target`` (an overload or its
    name) a meaning: its integer/boolean reading's first, then the floating
    one's. Empty: outside the semantics ("unsupported")."""
    k = _key(target)
    return [tab[k] for tab in (EXACT_FIRST, EXTENDED, SEMANTICS) if k in tab]


def _args(node: fx.Node, names: Sequence[str]) -> List:
    """Positional and keyword arguments by schema name (defaults filled)."""
    schema = node.target._schema
    out = []
    for i, a in enumerate(schema.arguments):
        if a.name not in names:
            continue
        if i < len(node.args):
            v = node.args[i]
        elif a.name in node.kwargs:
            v = node.kwargs[a.name]
        elif a.has_default_value():
            v = a.default_value
        else:
            raise Unsupported(f"{node.target}: argument {a.name!r} missing")
        out.append(v)
    return out


def _is_bool(node) -> bool:
    v = node.meta.get("val") if isinstance(node, fx.Node) else None
    return isinstance(v, torch.Tensor) and v.dtype == torch.bool


# ---- pointwise

@semantics(aten.add.Tensor, aten.sub.Tensor)
def _add_sub(ev, n):
    a, b, alpha = _args(n, ("self", "other", "alpha"))
    al = _real(alpha)
    sign = 1 if n.target == aten.add.Tensor else -1
    return ev.sem.pointwise(lambda u, w: u + sign * al * w, ev.value(a), ev.value(b))


@semantics(aten.mul.Tensor, aten.mul.Scalar)  # Scalar: a number, as SDPA's decomposition
def _mul(ev, n):
    return ev.sem.pointwise(lambda u, w: u * w,
                            *[ev.value(x) for x in _args(n, ("self", "other"))])


@semantics(aten.div.Tensor)
def _div(ev, n):
    return ev.sem.pointwise(lambda u, w: u / w,
                            *[ev.value(x) for x in _args(n, ("self", "other"))])


@semantics(aten.neg.default)
def _neg(ev, n):
    return ev.sem.pointwise(lambda u: -u, ev.value(n.args[0]))


@semantics(aten.pow.Tensor_Scalar)
def _pow(ev, n):
    """``x`` multiplied out for an integer ``|e| <= 4``; ``sqrt``/``rsqrt``
    for ``e = ±0.5``; another exponent an uninterpreted function ``pow_e``."""
    sem = ev.sem
    x, e = n.args[:2]
    if isinstance(e, (int, float)) and float(e).is_integer() and -4 <= e <= 4:
        def p(u, e=int(e)):
            r = z3.RealVal(1)
            for _ in range(abs(e)):
                r = r * u
            return r if e >= 0 else 1 / r
        return sem.pointwise(p, ev.value(x))
    if e == 0.5:
        return sem.pointwise(sem.sqrt, ev.value(x))
    if e == -0.5:
        return sem.pointwise(sem.rsqrt, ev.value(x))
    f = sem.fn(f"pow_{e!r}")
    return sem.pointwise(lambda u: f(u), ev.value(x))


def _unary(name: str) -> Handler:
    def h(ev, n):
        return ev.sem.pointwise(getattr(ev.sem, name), ev.value(n.args[0]))
    h.__name__ = h.__qualname__ = f"_{name}"
    h.__doc__ = f"``{name}`` of each element: :meth:`Semantics.{name}`."
    return h


#: unary ops whose value is a term of their one tensor argument (the
#: Semantics method of that name)
for _t, _name in {
        aten.erf.default: "erf", aten.tanh.default: "tanh", aten.exp.default: "exp",
        aten.rsqrt.default: "rsqrt", aten.sqrt.default: "sqrt",
        aten.sigmoid.default: "sigmoid", aten.silu.default: "silu",
        aten.mish.default: "mish", aten.hardsigmoid.default: "hardsigmoid"}.items():
    semantics(_t)(_unary(_name))


@semantics(aten.hardswish.default)
def _hardswish(ev, n):
    sem = ev.sem
    return sem.pointwise(lambda u: u * sem.hardsigmoid(u), ev.value(n.args[0]))


@semantics(aten.relu6.default)
def _relu6(ev, n):
    return ev.sem.pointwise(lambda u: Semantics.clamp(u, z3.RealVal(0), z3.RealVal(6)),
                            ev.value(n.args[0]))


@semantics(aten.hardtanh.default)
def _hardtanh(ev, n):
    x, lo, hi = _args(n, ("self", "min_val", "max_val"))
    return ev.sem.pointwise(lambda u: Semantics.clamp(u, _real(lo), _real(hi)), ev.value(x))


@semantics(aten.leaky_relu.default)
def _leaky_relu(ev, n):
    x, s = _args(n, ("self", "negative_slope"))
    sv = _real(s)
    return ev.sem.pointwise(lambda u: z3.If(u > 0, u, sv * u), ev.value(x))


@semantics(aten.softplus.default)
def _softplus(ev, n):
    # torch returns x itself where beta * x > threshold: a linearization
    # of log(1 + exp(beta x)) / beta off by less than exp(-threshold) / beta
    # (relative), an implementation's rounding, not another function
    x, beta, _threshold = _args(n, ("self", "beta", "threshold"))
    if not beta:
        raise Unsupported("softplus with beta 0")
    return ev.sem.pointwise(lambda u: ev.sem.softplus(u, beta), ev.value(x))


@semantics(aten.elu.default)
def _elu(ev, n):
    x, a, s, i = _args(n, ("self", "alpha", "scale", "input_scale"))
    return ev.sem.pointwise(lambda u: ev.sem.elu(u, a, s, i), ev.value(x))


@semantics(aten.selu.default)
def _selu(ev, n):
    return ev.sem.pointwise(lambda u: ev.sem.elu(u, SELU_ALPHA, SELU_SCALE),
                            ev.value(n.args[0]))


@semantics(aten.celu.default)
def _celu(ev, n):
    sem = ev.sem
    x, a = _args(n, ("self", "alpha"))
    if not a:
        raise Unsupported("celu with alpha 0")
    av = _real(a)
    return sem.pointwise(
        lambda u: sem.clamp(u, lo=z3.RealVal(0))
        + sem.clamp(av * (sem.exp(u / av) - 1), hi=z3.RealVal(0)), ev.value(x))


@semantics(aten.log1p.default)
def _log1p(ev, n):
    return ev.sem.pointwise(lambda u: ev.sem.log(1 + u), ev.value(n.args[0]))


@semantics(aten.expm1.default)
def _expm1(ev, n):
    return ev.sem.pointwise(lambda u: ev.sem.exp(u) - 1, ev.value(n.args[0]))


@semantics(aten.square.default)
def _square(ev, n):
    return ev.sem.pointwise(lambda u: u * u, ev.value(n.args[0]))


@semantics(aten.relu.default)
def _relu(ev, n):
    return ev.sem.pointwise(lambda u: z3.If(u > 0, u, 0), ev.value(n.args[0]))


@semantics(aten.gelu.default)
def _gelu(ev, n):
    x, approx = _args(n, ("self", "approximate"))
    return ev.sem.gelu(ev.value(x), approx)


# ---- casts, copies, inference dropout: the identity on values

@semantics(aten._to_copy.default, aten.clone.default, aten.alias.default, aten.type_as.default)
def _identity(ev, n):
    return ev.value(n.args[0])


@semantics(aten.dropout.default)
def _dropout(ev, n):
    x, p, train = _args(n, ("input", "p", "train"))
    if train and p:
        raise Unsupported("dropout in training")
    return ev.value(x)


@semantics(aten.native_dropout.default)
def _native_dropout(ev, n):
    """Inference (``train=False``) or ``p = 0``: the input and an all-true mask."""
    x, p, train = _args(n, ("input", "p", "train"))
    if train is not False and p:
        raise Unsupported("native_dropout in training")
    xs = ev.value(x)
    return [xs, Sym(list(xs.shape), lambda idx: z3.RealVal(1))]


# ---- layout

@semantics(aten.transpose.int)
def _transpose(ev, n):
    return ev.sem.transpose(ev.value(n.args[0]), n.args[1], n.args[2])


@semantics(aten.t.default)
def _t(ev, n):
    x = ev.value(n.args[0])
    return x if x.rank < 2 else ev.sem.transpose(x, 0, 1)


@semantics(aten.permute.default)
def _permute(ev, n):
    return ev.sem.permute(ev.value(n.args[0]), n.args[1])


@semantics(aten.view.default, aten.reshape.default, aten._unsafe_view.default)
def _view(ev, n):
    """:meth:`Semantics.reshape` from the instance's sizes of the input to
    the result's (so ``-1`` is resolved as torch did)."""
    x = n.args[0]
    xv = x.meta.get("val") if isinstance(x, fx.Node) else None
    ov = n.meta.get("val")
    if not isinstance(xv, torch.Tensor) or not isinstance(ov, torch.Tensor):
        raise Unsupported(f"{n.target} of an operand without a shape")
    try:
        ins, outs = [int(s) for s in xv.shape], [int(s) for s in ov.shape]
    except (TypeError, ValueError):
        raise Unsupported(f"{n.target} with symbolic sizes") from None
    return ev.sem.reshape(ev.value(x), ins, outs)


@semantics(aten.cat.default)
def _cat(ev, n):
    xs, dim = _args(n, ("tensors", "dim"))
    return ev.sem.cat([ev.value(x) for x in xs], dim)


@semantics(aten.split_with_sizes.default)
def _split_with_sizes(ev, n):
    x, sizes, dim = _args(n, ("self", "split_sizes", "dim"))
    xs = ev.value(x)
    d = ev.sem.axis(dim, xs.rank)
    return ev.sem.split(xs, _split_sizes(ev, x, list(sizes), d, xs), d)


@semantics(aten.split.Tensor)
def _split(ev, n):
    """Pieces of ``split_size`` on ``dim``, the last one the rest. The number
    of pieces is the instance's (one of the structure): the size on ``dim``
    is assumed (obliged) to give that many."""
    sem = ev.sem
    x, size, dim = _args(n, ("self", "split_size", "dim"))
    xs = ev.value(x)
    v = n.meta.get("val")
    if not isinstance(size, int) or isinstance(size, bool) or size < 1 \
            or not isinstance(v, (list, tuple)) or not v:
        raise Unsupported(f"split of size {size!r}")
    d = sem.axis(dim, xs.rank)
    count, nd = len(v), xs.shape[d]
    sem.require(z3.And(nd > (count - 1) * size, nd <= count * size))
    return sem.split(xs, [z3.IntVal(size)] * (count - 1) + [nd - (count - 1) * size], d)


@semantics("getitem")
def _getitem(ev, n):
    parts, i = n.args
    ps = ev.value(parts)
    if not isinstance(ps, list) or not isinstance(i, int):
        raise Unsupported("getitem of a tensor")
    return ps[i]


@semantics(aten.embedding.default)
def _embedding(ev, n):
    """Row ``indices[i]`` of the 2-D ``weight``. An index out of range (torch
    raises) reads a value the semantics leaves unconstrained."""
    w, ind = _args(n, ("weight", "indices"))
    ws, ids = ev.value(w), ev.value(ind)
    dt = _val_dtype(ind)
    if ws.rank != 2 or dt is None or _kind(dt) != "int":
        raise Unsupported("embedding of a weight that is not 2-D, or by non-integer indices")
    return Sym(list(ids.shape) + [ws.shape[1]],
               lambda idx: ws.at([z3.ToInt(ids.at(list(idx[:-1]))), idx[-1]]))


# ---- contractions

@semantics(aten.matmul.default)
def _matmul(ev, n):
    return ev.sem.matmul(ev.value(n.args[0]), ev.value(n.args[1]))


@semantics(aten.mm.default, aten.bmm.default)
def _mm(ev, n):
    sem = ev.sem
    a, b = ev.value(n.args[0]), ev.value(n.args[1])
    want = 2 if n.target == aten.mm.default else 3
    if a.rank != want or b.rank != want:
        raise Unsupported(f"{n.target} of ranks {a.rank}, {b.rank}")
    sem.require(z3.And(*[a.shape[i] == b.shape[i] for i in range(want - 2)])
                if want == 3 else z3.BoolVal(True))
    return sem.matmul(a, b, batched=False)


@semantics(aten.linear.default)
def _linear(ev, n):
    x, w, b = _args(n, ("input", "weight", "bias"))
    return ev.sem.linear(ev.value(x), ev.value(w), None if b is None else ev.value(b))


@semantics(aten.addmm.default)
def _addmm(ev, n):
    sem = ev.sem
    b, x, w, beta, alpha = _args(n, ("self", "mat1", "mat2", "beta", "alpha"))
    mm = sem.matmul(ev.value(x), ev.value(w), batched=False)
    be, al = _real(beta), _real(alpha)
    return sem.pointwise(lambda u, m: be * u + al * m, ev.value(b), mm)


@semantics(aten.baddbmm.default)
def _baddbmm(ev, n):
    sem = ev.sem
    b, x, y, beta, alpha = _args(n, ("self", "batch1", "batch2", "beta", "alpha"))
    a, c = ev.value(x), ev.value(y)
    if a.rank != 3 or c.rank != 3:
        raise Unsupported(f"baddbmm of ranks {a.rank}, {c.rank}")
    sem.require(a.shape[0] == c.shape[0])
    mm = sem.matmul(a, c, batched=False)
    be, al = _real(beta), _real(alpha)
    return sem.pointwise(lambda u, m: be * u + al * m, ev.value(b), mm)


# ---- reductions and normalizations

@semantics(aten.mean.dim)
def _mean(ev, n):
    x, dims, keep, dtype = _args(n, ("self", "dim", "keepdim", "dtype"))
    return ev.sem.mean(ev.value(x), list(dims) if dims is not None else [], keep)


@semantics(aten.var.correction, aten.var.dim, aten.var.default)
def _var(ev, n):
    if n.target == aten.var.correction:
        x, dims, correction, keep = _args(n, ("self", "dim", "correction", "keepdim"))
        correction = 1 if correction is None else correction
    elif n.target == aten.var.dim:
        x, dims, unbiased, keep = _args(n, ("self", "dim", "unbiased", "keepdim"))
        correction = 1 if unbiased else 0
    else:
        (x, unbiased), dims, keep = _args(n, ("self", "unbiased")), None, False
        correction = 1 if unbiased else 0
    return ev.sem.var(ev.value(x), list(dims) if dims is not None else [], correction, keep)


@semantics(aten.softmax.int, aten._safe_softmax.default, aten._softmax.default)
def _softmax(ev, n):
    # _safe_softmax differs only on rows of -inf, which the reals lack;
    # _softmax's half_to_float is a dtype, not a value
    x, dim = _args(n, ("self", "dim"))
    return ev.sem.softmax(ev.value(x), dim)


@semantics(aten.log_softmax.int, aten._log_softmax.default)
def _log_softmax(ev, n):
    x, dim = _args(n, ("self", "dim"))
    return ev.sem.log_softmax(ev.value(x), dim)


def _normalized(n: fx.Node, x, shape) -> int:
    """How many trailing axes a norm's ``normalized_shape`` covers. It holds
    sizes: the structure reads it as "the last k sizes of x", which it is on
    the instance (a rule reads x.shape)."""
    xv = x.meta.get("val") if isinstance(x, fx.Node) else None
    k = len(shape)
    if xv is None or not 1 <= k <= xv.dim() or list(xv.shape[-k:]) != list(shape):
        raise Unsupported(f"{n.target.overloadpacket.__name__}'s normalized_shape "
                          f"{list(shape)} is not the last sizes of its input")
    return k


@semantics(aten.rms_norm.default)
def _rms_norm(ev, n):
    x, shape, w, eps = _args(n, ("input", "normalized_shape", "weight", "eps"))
    _normalized(n, x, shape)
    return ev.sem.rms_norm(ev.value(x), list(shape), None if w is None else ev.value(w), eps)


@semantics(aten.layer_norm.default)
def _layer_norm(ev, n):
    x, shape, w, b, eps = _args(n, ("input", "normalized_shape", "weight", "bias", "eps"))
    k = _normalized(n, x, shape)
    V = ev.value
    return ev.sem.layer_norm(V(x), k, None if w is None else V(w), None if b is None else V(b),
                             eps)


@semantics(aten.scaled_dot_product_attention.default)
def _sdpa(ev, n):
    q, k, v, m, p, causal, scale, gqa = _args(
        n, ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale",
            "enable_gqa"))
    if gqa:
        raise Unsupported("enable_gqa")
    V = ev.value
    return ev.sem.sdpa(V(q), V(k), V(v), None if m is None else V(m), p, causal, scale,
                       _is_bool(m))


@semantics("pypm.linear_act.default")
def _linear_act(ev, n):
    sem = ev.sem
    x, w, b, act = n.args[:4]
    y = sem.linear(ev.value(x), ev.value(w), None if b is None else ev.value(b))
    if act == "relu":
        return sem.pointwise(lambda u: z3.If(u > 0, u, 0), y)
    if act in ("gelu", "gelu_tanh"):
        return sem.gelu(y, "none" if act == "gelu" else "tanh")
    if act == "silu":
        return sem.pointwise(sem.silu, y)
    if act == "none":
        return y
    raise Unsupported(f"pypm.linear_act activation {act!r}")


class Evaluator:
    """FX nodes to :class:`Sym` under one :class:`Semantics` (memoized, so a
    node shared by both sides is one term)."""

    def __init__(self, sem: Semantics, inputs: Dict[str, Sym]):
        self.sem, self.inputs = sem, inputs
        self.memo: Dict[fx.Node, Sym] = {}

    def value(self, a) -> Sym:
        if isinstance(a, fx.Node):
            if a not in self.memo:
                self.memo[a] = self._node(a)
            return self.memo[a]
        if a is None:
            raise Unsupported("None where a tensor is expected")
        return self.sem.const(a)

    def _node(self, n: fx.Node) -> Sym:
        ext = _extended(self, n)  # integer/boolean values and the XLA port's ops
        if ext is not None:
            return ext
        t = n.target
        if n.op == "placeholder":
            return self.inputs[n.name]
        if n.op != "call_function":
            raise Unsupported(f"FX node {n.op}")
        v = n.meta.get("val")
        if isinstance(v, torch.Tensor) and not (v.dtype.is_floating_point):
            raise Unsupported(f"{t} computes {v.dtype}: only floating results are real-valued")
        fn = SEMANTICS.get(op_key(t))
        if fn is None:
            raise Unsupported(f"no semantics for {t}")
        return fn(self, n)


# ----------------------------------------------------------------- proving

@dataclass
class Proof:
    """The verdict on one structure: ``status`` "proved", "differs" (z3
    found sizes where the two differ over the reals, and torch confirmed it
    on a concrete input: ``counterexample``, see
    :func:`.evaluate.confirm_difference`; ``detail`` says which),
    "unsupported", or "unknown" (z3 gave up, or its difference was not
    confirmed: ``detail`` names the uninterpreted functions it may hinge on,
    "uninterpreted: exp", and why no input confirmed it)."""
    status: str
    detail: str = ""
    counterexample: Optional[dict] = None
    #: the uninterpreted functions of the obligation (an unconfirmed
    #: difference may hinge on them): "exp", "erf", "sum", "division by zero", ...
    uninterpreted: Tuple[str, ...] = ()


class SemanticsMismatch(AssertionError):
    """The semantics' shape of a node disagrees with torch's on the instance:
    a bug of this file, never a verdict on a rule."""


#: z3's resource limit per proof: a count of its basic steps, so a verdict
#: is the same on every machine and under any load (a wall-clock timeout
#: made "unknown" depend on both). 4-20 s of z3 on this machine: about the
#: old 5 s time limit (5M steps made a full check-rules of sdpa several times
#: slower, most of it on structures z3 gives up on anyway).
RLIMIT = 2_000_000

#: a wall-clock cap per z3 call on top of :data:`RLIMIT`, a safety net only:
#: z3 does not count all its work in the resource limit (one sdpa structure
#: ran over 5 minutes at 2M steps) and overruns its own timeout (a LayerNorm
#: structure's call took 161 s under a 60 s timeout), so :func:`_check`
#: interrupts it at the cap. Every proof the tests and the shipped rules'
#: verdicts rest on takes milliseconds; one past the cap is "unknown".
TIMEOUT_S = 20


@contextmanager
def _fresh_z3():
    """Build and solve one proof in a context of its own: z3 orders terms by
    their creation ids, so terms left in the global context by earlier
    proofs would steer this one's simplification and search (a proof took
    0.2 s alone and timed out after other proofs)."""
    saved = z3.z3._main_ctx
    z3.z3._main_ctx = z3.Context()
    try:
        yield
    finally:
        z3.z3._main_ctx = saved


def _check(s: z3.Solver):
    """``s.check()`` in a worker thread while the main thread waits in short
    joins, so that a signal's Python handler (Ctrl-C's KeyboardInterrupt, the
    CLI's SIGTERM handler) runs during a long search: a handler runs only
    between bytecodes of the main thread, and one z3 call can outlast the
    resource limit by minutes (its preprocessing is not all counted). On such
    an exception z3 is interrupted, the worker joined, and the exception
    raised."""
    out: Dict[str, object] = {}

    def work():
        try:
            out["r"] = s.check()
        except BaseException as e:  # noqa: BLE001 - handed to the main thread
            out["e"] = e

    t = threading.Thread(target=work, name="z3-check", daemon=True)
    t.start()
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while t.is_alive():
            t.join(0.05)
            if time.monotonic() > deadline:  # z3's own timeout is not always kept
                s.ctx.interrupt()
                t.join()
                raise _Capped()
    except BaseException:
        s.ctx.interrupt()
        t.join()
        raise
    if "e" in out:
        raise out["e"]
    return out["r"]


def prove(original: fx.Node, replacement: fx.Node, shapes: Dict[str, Sequence[int]],
          like_instance: bool = False, rlimit: int = RLIMIT,
          siblings: Sequence[fx.Node] = ()) -> Proof:
    """Is ``replacement`` equal to ``original`` over the reals, at every
    index, for every size of the inputs, wherever ``original`` is
    well-defined? ``shapes``: placeholder name -> the instance's shape (its
    rank fixes the structure; its sizes check the semantics against torch's
    shapes, :class:`SemanticsMismatch`). ``like_instance``: only sizes with
    the instance's pattern (the same axes of size 1, the same axes equal).
    ``rlimit``: z3's resource limit (deterministic), past which the verdict
    is "unknown". ``siblings``: the other roots of a multi-root original,
    whose well-definedness is assumed too (the original computes them all)."""
    with _fresh_z3():
        try:
            return _prove(original, replacement, shapes, like_instance, rlimit, siblings)
        except _Capped:
            return Proof("unknown", f"z3 ran past the wall-clock cap ({TIMEOUT_S} s)")


class _Capped(Exception):
    """A z3 call ran past :data:`TIMEOUT_S` and was interrupted: the proof's
    context is spent (z3 refuses further work in it), so the proof ends
    "unknown"."""


def _prove(original, replacement, shapes, like_instance, rlimit, siblings) -> Proof:
    sem = Semantics()
    inputs = {name: sem.input(name, len(shp)) for name, shp in shapes.items()}
    ev = Evaluator(sem, inputs)
    try:
        a = ev.value(original)
        for o in siblings:
            ev.value(o)
        sem.replacement = True
        b = ev.value(replacement)
    except Unsupported as e:
        return Proof("unsupported", str(e))
    concrete = {z3.Int(f"{name}_n{i}"): n for name, shp in shapes.items()
                for i, n in enumerate(shp)}
    for node, sym in ev.memo.items():  # every node of both sides
        _check_shape(node, sym, concrete)
    if a.rank != b.rank:
        return _refute(sem, None, original, replacement, shapes, siblings,
                       f"rank {a.rank} vs {b.rank}")
    assume = list(sem.assume)
    if like_instance:
        items = list(concrete.items())
        for i, (x, n) in enumerate(items):
            if n == 1:
                assume.append(x == 1)
            for y, m in items[i + 1:]:
                assume.append(x == y if n == m else x != y)
    idx = [z3.Int(f"i{j}") for j in range(a.rank)]
    in_range = [z3.And(i >= 0, i < n) for i, n in zip(idx, a.shape)]
    same = [x == y for x, y in zip(a.shape, b.shape)]
    va, vb = z3.simplify(a.at(idx)), z3.simplify(b.at(idx))
    # the same term after normalization needs no search (most proofs)
    value = z3.BoolVal(True) if va.eq(vb) else va == vb
    assume += sem.axioms  # laws of the sums the values above built
    goal = z3.Implies(z3.And(*(assume + in_range)), z3.And(*(sem.oblige + same + [value])))
    s = _solver(rlimit)
    s.add(z3.Not(goal))
    r = _check(s)
    if r == z3.unsat:
        return Proof("proved")
    if r == z3.sat:
        # again with the primitives' laws (ground instances on the terms of
        # the obligation): only now, so a proof that needs none costs no more
        laws = primitive_laws(sem, goal)
        if laws:
            s2 = _solver(rlimit)
            s2.add(z3.Not(goal), *laws)
            r2 = _check(s2)
            if r2 == z3.unsat:
                return Proof("proved", "with the laws of "
                             + ", ".join(sorted(_primitive_apps(sem, goal))))
            if r2 == z3.sat:
                s = s2
        m = s.model()
        sizes = {str(d): m[d] for d in m.decls() if "_n" in str(d) and d.arity() == 0}
        where = "over the reals" + (", e.g. with sizes " + ", ".join(
            f"{k}={v}" for k, v in sorted(sizes.items())) if sizes else "")
        proof = _refute(sem, m, original, replacement, shapes, siblings, where, goal)
        if proof.status == "unknown" and sem.laws:
            # a difference torch does not confirm: once more with the sums'
            # laws too (only here: they make z3's search for a model slower)
            s3 = _solver(rlimit)
            s3.add(z3.Not(goal), *laws, *sem.laws)
            if _check(s3) == z3.unsat:
                return Proof("proved", "with the laws of " + ", ".join(
                    sorted(_primitive_apps(sem, goal)) + ["sums of squares"]))
        return proof
    return Proof("unknown", f"z3: {s.reason_unknown()}")


def _solver(rlimit: int) -> z3.Solver:
    s = z3.Solver()
    s.set("rlimit", rlimit)
    s.set("timeout", TIMEOUT_S * 1000)
    s.set("ctrl_c", False)  # Ctrl-C is Python's KeyboardInterrupt (see _check)
    return s


# ------------------------------------------ primitives: laws, uninterpreted

#: the uninterpreted primitives every other pointwise function is defined
#: from (module docstring), and nothing else
PRIMITIVES = ("exp", "log", "erf", "sqrt")

#: the most terms of one primitive whose pairwise monotonicity is assumed
_MAX_MONOTONE = 12
#: the most arguments of exp (negations included) related by exp(a + b) = exp(a) exp(b)
_MAX_ADDITIVE = 8


def _walk(e, visit, into_binders: bool, seen=None):
    """``visit`` every application in ``e`` (each subterm once); with
    ``into_binders``, inside lambdas and quantifiers too."""
    seen = set() if seen is None else seen
    todo = [e]
    while todo:
        x = todo.pop()
        k = x.get_id()
        if k in seen:
            continue
        seen.add(k)
        if z3.is_quantifier(x):
            if into_binders:
                todo.append(x.body())
            continue
        if z3.is_app(x):
            visit(x)
            todo.extend(x.children())


def _primitive_apps(sem: Semantics, goal) -> Dict[str, List[z3.ExprRef]]:
    """name -> the arguments of that primitive's ground applications in ``goal``
    (outside sums: a summand's terms hold its bound variable)."""
    decls = {name: sem._fns[name] for name in PRIMITIVES if name in sem._fns}
    out: Dict[str, List[z3.ExprRef]] = {}
    if not decls:
        return out

    def visit(x):
        for name, d in decls.items():
            if x.decl().eq(d):
                args = out.setdefault(name, [])
                if not any(a.eq(x.arg(0)) for a in args):
                    args.append(x.arg(0))
    _walk(goal, visit, into_binders=False)
    return out


def primitive_laws(sem: Semantics, goal) -> List[z3.BoolRef]:
    """Ground instances, on the primitives' applications in ``goal``, of
    laws true of the real functions (so a proof with them is still a proof
    about exp, log, erf and sqrt themselves): ``exp(a) > 0``, ``exp(a)
    exp(-a) = 1``, ``exp(0) = 1``, ``exp(a) exp(b) = exp(c)`` where ``a + b
    = c`` (arguments of exp, :data:`_MAX_ADDITIVE`), ``log(exp(a)) = a``, ``exp(log(t)) = t``
    for ``t > 0``; ``-1 < erf(a) < 1``, ``erf(-a) = -erf(a)``; ``sqrt(t) >=
    0`` and ``sqrt(t)² = t`` for ``t >= 0``; exp, erf (and log on the
    positive reals) strictly increasing, pairwise on up to
    :data:`_MAX_MONOTONE` arguments each."""
    apps = _primitive_apps(sem, goal)
    laws: List[z3.BoolRef] = []

    def monotone(f, args, domain=None):
        args = args[:_MAX_MONOTONE]
        for i, a in enumerate(args):
            for b in args[i + 1:]:
                for x, y in ((a, b), (b, a)):
                    pre = x < y if domain is None else z3.And(domain(x), x < y)
                    laws.append(z3.Implies(pre, f(x) < f(y)))
    if "exp" in apps:
        exp = sem._fns["exp"]
        args = list(apps["exp"])
        zero = z3.RealVal(0)
        laws.append(exp(zero) == 1)
        for a in apps["exp"]:
            na = z3.simplify(-a)
            laws += [exp(a) > 0, exp(na) > 0, exp(a) * exp(na) == 1]
            if "log" in sem._fns:
                laws.append(sem._fns["log"](exp(a)) == a)
            if not any(na.eq(x) for x in args):
                args.append(na)
        monotone(exp, [zero] + args)
        # exp(a) exp(b) = exp(c) where a + b = c, on the arguments present
        # (the same index may be spelled two ways: a broadcast's If)
        few = args[:_MAX_ADDITIVE]
        for i, a in enumerate(few):
            for b in few[i:]:
                for c in few:
                    laws.append(z3.Implies(a + b == c, exp(a) * exp(b) == exp(c)))
    if "log" in apps:
        log, exp = sem._fns["log"], sem.fn("exp")
        for t in apps["log"]:
            laws.append(z3.Implies(t > 0, exp(log(t)) == t))
        monotone(log, apps["log"], domain=lambda x: x > 0)
    if "erf" in apps:
        erf = sem._fns["erf"]
        args = list(apps["erf"])
        for a in apps["erf"]:
            na = z3.simplify(-a)
            laws += [erf(a) > -1, erf(a) < 1, erf(na) == -erf(a)]
        monotone(erf, args)
    if "sqrt" in apps:
        sq = sem._fns["sqrt"]
        for t in apps["sqrt"]:
            laws.append(z3.Implies(t >= 0, z3.And(sq(t) >= 0, sq(t) * sq(t) == t)))
    return laws


def _known_nonzero(e) -> bool:
    """A denominator that is never 0 by its form: a nonzero number, exp of
    anything, or a sum of such positive terms (sigmoid's 1 + exp(-x))."""
    return _sign(e) in ("+", "-")


def _sign(e) -> str:
    if z3.is_rational_value(e):
        v = e.numerator_as_long()
        return "+" if v > 0 else "-" if v < 0 else "0"
    if z3.is_app(e) and e.decl().name() == "exp" and e.num_args() == 1:
        return "+"
    if z3.is_add(e):
        signs = {_sign(c) for c in e.children()}
        return "+" if signs == {"+"} else "-" if signs == {"-"} else "?"
    if z3.is_mul(e):
        signs = [_sign(c) for c in e.children()]
        if "?" in signs or "0" in signs:
            return "?"
        return "-" if signs.count("-") % 2 else "+"
    return "?"


def uninterpreted(sem: Semantics, goal) -> Tuple[str, ...]:
    """The functions of ``goal`` that the semantics leaves uninterpreted:
    the primitives, ``sum`` (a finite sum, of which only the law for one
    term is known), others (a power of a fractional exponent, ...), and
    "division by zero" where a denominator may be 0 (z3's ``x / 0`` is any
    value)."""
    found = set()
    inputs = sem.input_decls

    def visit(x):
        d = x.decl()
        if d.kind() == z3.Z3_OP_UNINTERPRETED and d.arity() >= 1 \
                and not any(d.eq(i) for i in inputs):
            found.add("sum" if d.eq(sem.sum) else d.name())
        elif d.kind() == z3.Z3_OP_DIV and not _known_nonzero(x.arg(1)):
            found.add("division by zero")
    _walk(goal, visit, into_binders=True)
    return tuple(sorted(found))


def _model_inputs(sem: Semantics, m, shapes) -> Tuple[Dict[str, List[int]], Optional[dict]]:
    """The sizes z3's model gives the inputs, and their values there (None
    where the model does not give every value as a number, or the inputs
    are too large to try)."""
    from .evaluate import MAX_ELEMENTS
    sizes: Dict[str, List[int]] = {}
    for name, shp in shapes.items():
        ns = []
        for i in range(len(shp)):
            v = m.eval(z3.Int(f"{name}_n{i}"), model_completion=True)
            ns.append(v.as_long() if z3.is_int_value(v) else int(shp[i]))
        sizes[name] = ns
    if sum(math.prod(ns) for ns in sizes.values()) > MAX_ELEMENTS \
            or any(n < 1 for ns in sizes.values() for n in ns):
        return sizes, None
    values: Dict[str, list] = {}
    for name, ns in sizes.items():
        f = sem.input_fns.get(name)
        if f is None:
            return sizes, None
        vs = []
        for idx in itertools.product(*[range(n) for n in ns]):
            v = m.eval(f(*[z3.IntVal(i) for i in idx]) if ns else f, model_completion=True)
            x = _number(v)
            if x is None:
                return sizes, None
            vs.append(x)
        values[name] = vs
    return sizes, values


def _number(v) -> Optional[float]:
    if z3.is_algebraic_value(v):
        v = v.approx(20)
    if z3.is_rational_value(v):
        try:
            return float(Fraction(v.numerator_as_long(), v.denominator_as_long()))
        except OverflowError:
            return None
    return None


def _refute(sem: Semantics, m, original, replacement, shapes, siblings, where: str,
            goal=None) -> Proof:
    """z3 says the two differ (``where``, with model ``m``; None: they
    differ in rank): "differs" with a counterexample torch confirms (z3's
    sizes and values first, then random values at z3's sizes and at the
    instance's), else "unknown" with the reason."""
    from .evaluate import confirm_difference, counterexample_text
    candidates = []
    inst = {k: [int(n) for n in v] for k, v in shapes.items()}
    if m is not None:
        sizes, values = _model_inputs(sem, m, shapes)
        same = sizes == inst
        if values is not None:
            candidates.append(("z3's sizes and values", sizes, values, same))
        candidates.append(("z3's sizes", sizes, None, same))
        if not same:
            candidates.append(("the instance's sizes", inst, None, True))
    else:
        candidates.append(("the instance's sizes", inst, None, True))
    un = uninterpreted(sem, goal) if goal is not None else ()
    cex, notes = confirm_difference(original, replacement, candidates, siblings)
    if cex is not None:
        return Proof("differs", f"{where}; confirmed by torch on {counterexample_text(cex)}",
                     counterexample=cex, uninterpreted=un)
    head = (f"uninterpreted: {', '.join(un)}; z3 finds a difference {where}, under some "
            "interpretation of those functions" if un else f"z3 finds a difference {where}")
    return Proof("unknown", f"{head}; not confirmed numerically: {_why_not(notes)}",
                 uninterpreted=un)


def _why_not(notes: List[str]) -> str:
    """The notes of the inputs that confirmed nothing, in short."""
    if not notes:
        return "no input to try"
    agree = [n for n in notes if ": agree within the tolerance" in n]
    rest = list(dict.fromkeys(n for n in notes if n not in agree))
    parts = []
    if agree:
        errs = [float(x.rsplit("max abs error ", 1)[1].rstrip(")")) for x in agree
                if "max abs error " in x]
        sources = dict.fromkeys(n.split(" (")[0].split(":")[0] for n in agree)
        parts.append(f"the two sides agree within the tolerance on {len(agree)} input(s)"
                     + (f" (max abs error {max(errs):.3g})" if errs else "")
                     + f", from {', '.join(sources)}")
    parts += rest[:3]
    if len(rest) > 3:
        parts.append(f"{len(rest) - 3} more")
    return "; ".join(parts)


def _check_shape(node: fx.Node, sym: Sym, concrete) -> None:
    v = node.meta.get("val")
    if isinstance(sym, list) and isinstance(v, (list, tuple)) and len(v) == len(sym):
        for p, pv in zip(sym, v):  # the pieces of a split
            _check_shape_of(node, p, pv, concrete)
        return
    _check_shape_of(node, sym, v, concrete)


def _check_shape_of(node: fx.Node, sym, v, concrete) -> None:
    if not isinstance(v, torch.Tensor) or not isinstance(sym, Sym):
        return
    subst = [(k, z3.IntVal(v)) for k, v in concrete.items()]
    got = []
    for d in sym.shape:
        e = z3.simplify(z3.substitute(d, *subst)) if subst else z3.simplify(d)
        got.append(e.as_long() if z3.is_int_value(e) else str(e))
    if got != list(v.shape):
        raise SemanticsMismatch(f"{node.target}: the semantics gives shape {got}, torch "
                                f"{list(v.shape)}")


def _split_sizes(ev: "Evaluator", x, sizes: List, d: int, xs: Sym) -> List[z3.ArithRef]:
    """The sizes of a ``split_with_sizes`` of ``x`` on axis ``d``, as
    symbols. A rule writes them as integers (read off its weights' shapes),
    which would tie the structure to the instance's sizes; they are read as
    the sizes of the pieces ``x`` concatenates on that axis (a ``cat`` on
    ``d``, or a ``linear`` whose weight is one on axis 0, for the output's
    last axis), which they are on the instance (checked: the integers must
    equal those pieces' sizes there), else unsupported."""
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in sizes):
        raise Unsupported(f"split sizes {sizes!r}")
    pieces = _pieces(ev, x, d)
    if pieces is not None and [c for _, c in pieces] == sizes:
        return [p for p, _ in pieces]
    if len(sizes) == 1:
        return [xs.shape[d]]
    raise Unsupported("split_with_sizes whose sizes are not those of the pieces its input "
                      "concatenates (the structure would depend on the instance's sizes)")


def _pieces(ev: "Evaluator", x, d: int):
    """(symbolic size, instance size) of each piece ``x`` concatenates on axis
    ``d``, or None."""
    if not isinstance(x, fx.Node) or x.op != "call_function":
        return None
    xv = x.meta.get("val")
    if not isinstance(xv, torch.Tensor):
        return None
    if x.target == aten.cat.default:
        ts, dim = _args(x, ("tensors", "dim"))
        if dim % max(xv.dim(), 1) != d:
            return None
        out = []
        for t in ts:
            tv = t.meta.get("val") if isinstance(t, fx.Node) else None
            if not isinstance(tv, torch.Tensor):
                return None
            out.append((ev.value(t).shape[d], int(tv.shape[d])))
        return out
    if x.target == aten.linear.default and d == xv.dim() - 1:
        return _pieces(ev, _args(x, ("weight",))[0], 0)
    return None


# ------------------------------------------------- integers, booleans, more ops
# (the XLA simplifier port, library/xla_simplifier.py). Values stay reals: an
# integer tensor's are integers (an input is ``floor`` of an uninterpreted
# real, so every integer is reached), a boolean's are 0 and 1; integers are
# unbounded (no wrap-around). Ops are read as for floats where the result is
# exact on those values; anything else stays unsupported.

def _kind(dtype) -> str:
    if dtype == torch.bool:
        return "bool"
    if dtype.is_floating_point:
        return "real"
    if dtype.is_complex:
        return "complex"
    return "int"


def _val_dtype(node):
    v = node.meta.get("val") if isinstance(node, fx.Node) else None
    return v.dtype if isinstance(v, torch.Tensor) else None


def _is_neg_inf(v) -> bool:
    return isinstance(v, float) and v == -math.inf


def _is_pos_inf(v) -> bool:
    return isinstance(v, float) and v == math.inf


def _b(c) -> z3.ArithRef:
    return z3.If(c, z3.RealVal(1), z3.RealVal(0))


def _int_value(u):
    return z3.ToReal(z3.ToInt(u))


def _trunc(u):
    return z3.If(u >= 0, _int_value(u), -_int_value(-u))


_COMPARE = {
    aten.eq.Tensor: lambda u, w: u == w, aten.eq.Scalar: lambda u, w: u == w,
    aten.ne.Tensor: lambda u, w: u != w, aten.ne.Scalar: lambda u, w: u != w,
    aten.lt.Tensor: lambda u, w: u < w, aten.lt.Scalar: lambda u, w: u < w,
    aten.le.Tensor: lambda u, w: u <= w, aten.le.Scalar: lambda u, w: u <= w,
    aten.gt.Tensor: lambda u, w: u > w, aten.gt.Scalar: lambda u, w: u > w,
    aten.ge.Tensor: lambda u, w: u >= w, aten.ge.Scalar: lambda u, w: u >= w,
}


def _sum(sem: Semantics, x: Sym, dims: Sequence[int], keepdim: bool,
         concrete: Optional[Sequence[int]] = None) -> Sym:
    """``sum`` over ``dims`` (all when empty). Two laws of finite sums are
    built in: a sum of sums over other axes of the same tensor is one sum over
    both (Fubini: the axes are summed in increasing order either way), and a
    summand that does not depend on the summation index is ``n`` times it
    (a constant factor comes out). A reduced axis of size 1 on the instance
    (``concrete``) is one of the structure: its size 1 is assumed (obliged in
    the replacement) and the sum over it is its one element."""
    dims = sorted({sem.axis(d, x.rank) for d in dims}) if dims else list(range(x.rank))
    src = getattr(x, "_summed", None)
    if src is not None and not keepdim and not src[2]:
        base, bdims, _, bconcrete = src
        rest = [i for i in range(base.rank) if i not in bdims]
        return _sum(sem, base, sorted(set(bdims) | {rest[d] for d in dims}), False, bconcrete)
    unit = set()
    if concrete is not None:
        for d in dims:
            if concrete[d] == 1:
                sem.require(x.shape[d] == 1)
                unit.add(d)

    def at(idx):
        def inner(full, todo):
            if not todo:
                return x.at(full)
            d = todo[0]
            if d in unit:
                return inner(full[:d] + [z3.IntVal(0)] + full[d + 1:], todo[1:])
            return _reduce_sum(sem, x.shape[d],
                               lambda k: inner(full[:d] + [k] + full[d + 1:], todo[1:]))
        if keepdim:
            full = list(idx)
        else:
            full, it = [], iter(idx)
            for i in range(x.rank):
                full.append(z3.IntVal(0) if i in dims else next(it))
        return inner(full, dims)
    shape = [z3.IntVal(1) if i in dims else x.shape[i] for i in range(x.rank)] if keepdim \
        else [x.shape[i] for i in range(x.rank) if i not in dims]
    out = Sym(shape, at)
    out._summed = (x, dims, keepdim, concrete)
    return out


def _occurs(k, e) -> bool:
    if e.eq(k):
        return True
    return any(_occurs(k, c) for c in e.children())


def _reduce_sum(sem: Semantics, n, body):
    k = z3.Int(f"k{sem._depth}")
    sem._depth += 1
    try:
        b = z3.simplify(body(k))
    finally:
        sem._depth -= 1
    if not _occurs(k, b):
        return z3.ToReal(n) * b
    if z3.is_mul(b):  # a factor that does not depend on k comes out of the sum
        out = [c for c in b.children() if not _occurs(k, c)]
        dep = [c for c in b.children() if _occurs(k, c)]
        if out:
            inner = dep[0] if len(dep) == 1 else z3.Product(*dep)
            rest = out[0] if len(out) == 1 else z3.Product(*out)
            return rest * sem.sum(z3.Lambda([k], z3.If(z3.And(k >= 0, k < n), inner, 0)), n)
    return sem.sum(z3.Lambda([k], z3.If(z3.And(k >= 0, k < n), b, 0)), n)


def _slice_bounds(n, start, end, step):
    def norm(v, default):
        if v is None:
            return default
        if not isinstance(v, int) or isinstance(v, bool):
            raise Unsupported(f"slice bound {v!r}")
        if v >= 2 ** 62:  # INT64_MAX, "to the end": past any tensor's size
            return n
        if v >= 0:
            return z3.If(v > n, n, z3.IntVal(v))
        return z3.If(n + v < 0, z3.IntVal(0), n + v)
    s, e = norm(start, z3.IntVal(0)), norm(end, n)
    size = z3.If(e > s, (e - s + (step - 1)) / step, z3.IntVal(0))
    return s, size


def _view_groups(ins: List[int], outs: List[int]) -> List[Tuple[List[int], List[int]]]:
    """The axes of a view from sizes ``ins`` to ``outs`` (equal products),
    grouped where their running products meet: ``(input axes, output axes)``
    each; an axis of size 1 on one side only is a group of its own."""
    groups: List[Tuple[List[int], List[int]]] = []
    i = j = 0
    while i < len(ins) or j < len(outs):
        one_in = i < len(ins) and ins[i] == 1
        one_out = j < len(outs) and outs[j] == 1
        if one_in and not one_out:
            groups.append(([i], []))
            i += 1
            continue
        if one_out and not one_in:
            groups.append(([], [j]))
            j += 1
            continue
        if i >= len(ins) or j >= len(outs):
            raise Unsupported(f"a view of sizes {ins} as {outs}")
        gi, gj, pi, pj = [i], [j], ins[i], outs[j]
        i, j = i + 1, j + 1
        while pi != pj:
            if pi < pj and i < len(ins):
                gi.append(i)
                pi *= ins[i]
                i += 1
            elif pj < pi and j < len(outs):
                gj.append(j)
                pj *= outs[j]
                j += 1
            else:
                raise Unsupported(f"a view of sizes {ins} as {outs}")
        groups.append((gi, gj))
    return groups


#: the integer/boolean reading of the ops that have one only on exact values
#: (integers, booleans), tried first: overload name -> ``(evaluator, node,
#: dtype, exact) -> Sym``, or None where it does not apply (the next tables,
#: then :data:`SEMANTICS`, do)
EXACT_FIRST: Dict[str, Callable] = {}
#: the ops of the XLA port (and the integer/boolean reading of some), after
#: :data:`EXACT_FIRST` and the unsigned check: overload name -> ``(evaluator,
#: node, dtype, exact) -> Sym``, or None: the floating reading of
#: :data:`SEMANTICS` applies
EXTENDED: Dict[str, Callable] = {}
#: the layout ops of :data:`SEMANTICS` that are exact on any values
_EXACT_ANY = ("aten.transpose.int", "aten.permute.default", "aten.clone.default",
              "aten.alias.default", "aten.view.default", "aten.reshape.default",
              "aten._unsafe_view.default")


def _extended(ev: "Evaluator", n: fx.Node) -> Optional[Sym]:
    sem, t = ev.sem, n.target
    dt = _val_dtype(n)
    if n.op == "placeholder":
        x = ev.inputs[n.name]
        k = _kind(dt) if dt is not None else "real"
        if k == "int":
            return Sym(x.shape, lambda idx, f=x.at: _int_value(f(idx)))
        if k == "bool":
            return Sym(x.shape, lambda idx, f=x.at: _b(f(idx) > 0))
        return None
    if n.op != "call_function":
        return None
    exact = dt is not None and _kind(dt) in ("int", "bool")  # the checks below are exact there
    key = op_key(t)
    f = EXACT_FIRST.get(key)
    if f is not None:
        r = f(ev, n, dt, exact)
        if r is not None:
            return r
    if exact and any(d == torch.uint8 for d in (dt, _val_dtype(n.args[0]) if n.args else None)):
        raise Unsupported("unsigned integers")
    f = EXTENDED.get(key)
    if f is not None:
        return f(ev, n, dt, exact)
    if exact:  # layout ops of the first table, exact on any values
        if key in _EXACT_ANY:
            return SEMANTICS[key](ev, n)
        raise Unsupported(f"{t} computes {dt}")
    return None


def _exact_first(*targets):
    return semantics(*targets, table=EXACT_FIRST)


def _ext(*targets):
    return semantics(*targets, table=EXTENDED)


@_exact_first(aten.add.Tensor, aten.sub.Tensor)
def _add_sub_exact(ev, n, dt, exact):
    if not exact:
        return None
    a, b, alpha = _args(n, ("self", "other", "alpha"))
    al = _real(alpha)
    sign = 1 if n.target == aten.add.Tensor else -1
    if dt == torch.bool:
        raise Unsupported(f"{n.target} of booleans")
    return ev.sem.pointwise(lambda u, w: u + sign * al * w, ev.value(a), ev.value(b))


@_exact_first(aten.mul.Tensor)
def _mul_exact(ev, n, dt, exact):
    if not exact:
        return None
    xs = [ev.value(x) for x in _args(n, ("self", "other"))]
    if dt == torch.bool:
        return ev.sem.pointwise(lambda u, w: _b(z3.And(u != 0, w != 0)), *xs)
    return ev.sem.pointwise(lambda u, w: u * w, *xs)


@_exact_first(aten.neg.default)
def _neg_exact(ev, n, dt, exact):
    if not exact or dt == torch.bool:
        return None
    return ev.sem.pointwise(lambda u: -u, ev.value(n.args[0]))


@_exact_first(aten.relu.default)
def _relu_exact(ev, n, dt, exact):
    if not exact or dt == torch.bool:
        return None
    return ev.sem.pointwise(lambda u: z3.If(u > 0, u, 0), ev.value(n.args[0]))


@_exact_first(aten.pow.Tensor_Scalar)
def _pow_exact(ev, n, dt, exact):
    """Integers: ``x`` multiplied out for ``0 <= e <= 4``; floats: ``1 / x``
    for ``e = -1`` (else :func:`_pow`)."""
    x, e = n.args[:2]
    if exact and dt != torch.bool:
        if isinstance(e, int) and not isinstance(e, bool) and 0 <= e <= 4:
            def p(u, e=e):
                r = z3.RealVal(1)
                for _ in range(e):
                    r = r * u
                return r
            return ev.sem.pointwise(p, ev.value(x))
        raise Unsupported(f"integer pow with exponent {e!r}")
    if not exact and e == -1 and not isinstance(e, bool):
        return ev.sem.pointwise(lambda u: 1 / u, ev.value(x))
    return None


@_ext(aten.abs.default)
def _abs(ev, n, dt, exact):
    return ev.sem.pointwise(lambda u: z3.If(u >= 0, u, -u), ev.value(n.args[0]))


@_ext(aten.maximum.default)
def _maximum(ev, n, dt, exact):
    return ev.sem.pointwise(lambda u, w: z3.If(u >= w, u, w), ev.value(n.args[0]),
                            ev.value(n.args[1]))


@_ext(aten.minimum.default)
def _minimum(ev, n, dt, exact):
    return ev.sem.pointwise(lambda u, w: z3.If(u <= w, u, w), ev.value(n.args[0]),
                            ev.value(n.args[1]))


@_ext(aten.clamp.default, aten.clamp_min.default, aten.clamp_max.default)
def _clamp(ev, n, dt, exact):
    sem, t = ev.sem, n.target
    if t == aten.clamp.default:
        x, lo, hi = _args(n, ("self", "min", "max"))
    elif t == aten.clamp_min.default:
        (x, lo), hi = n.args[:2], None
    else:
        (x, hi), lo = n.args[:2], None
    # -inf / inf bounds are the identities of max / min
    lo = None if _is_neg_inf(lo) else lo
    hi = None if _is_pos_inf(hi) else hi
    y = ev.value(x)
    if lo is not None:
        lv = _real(lo)
        y = sem.pointwise(lambda u: z3.If(u >= lv, u, lv), y)
    if hi is not None:
        hv = _real(hi)
        y = sem.pointwise(lambda u: z3.If(u <= hv, u, hv), y)
    return y


def _compare(ev, n, dt, exact):
    f = _COMPARE[n.target]
    return ev.sem.pointwise(lambda u, w: _b(f(u, w)), ev.value(n.args[0]), ev.value(n.args[1]))


_ext(*_COMPARE)(_compare)


@_ext(aten.logical_not.default)
def _logical_not(ev, n, dt, exact):
    return ev.sem.pointwise(lambda u: _b(u == 0), ev.value(n.args[0]))


@_ext(aten.logical_and.default)
def _logical_and(ev, n, dt, exact):
    return ev.sem.pointwise(lambda u, w: _b(z3.And(u != 0, w != 0)), ev.value(n.args[0]),
                            ev.value(n.args[1]))


@_ext(aten.logical_or.default)
def _logical_or(ev, n, dt, exact):
    return ev.sem.pointwise(lambda u, w: _b(z3.Or(u != 0, w != 0)), ev.value(n.args[0]),
                            ev.value(n.args[1]))


@_ext(aten.bitwise_not.default)
def _bitwise_not(ev, n, dt, exact):
    if dt == torch.bool:
        return ev.sem.pointwise(lambda u: 1 - u, ev.value(n.args[0]))
    if exact:
        return ev.sem.pointwise(lambda u: -u - 1, ev.value(n.args[0]))  # two's complement
    raise Unsupported(f"bitwise_not of {dt}")


@_ext(aten.bitwise_and.Scalar, aten.bitwise_or.Scalar)
def _bitwise_scalar(ev, n, dt, exact):
    """``x & 0``, ``x | 0`` and the all-ones constant exactly; another
    constant an uninterpreted function ``bitwise_and_c`` / ``bitwise_or_c``."""
    sem, t, V = ev.sem, n.target, ev.value
    x, c = n.args[:2]
    if not exact or isinstance(c, float):
        raise Unsupported(f"{t} of {dt} with {c!r}")
    is_and = t == aten.bitwise_and.Scalar
    c = int(c)
    ones = -1 if dt != torch.bool else 1  # the all-ones value
    if c == 0:
        return sem.pointwise((lambda u: z3.RealVal(0)) if is_and else (lambda u: u), V(x))
    if c == ones:
        return sem.pointwise((lambda u: u) if is_and else (lambda u: z3.RealVal(ones)), V(x))
    f = sem.fn(f"bitwise_{'and' if is_and else 'or'}_{c}")
    return sem.pointwise(lambda u: f(u), V(x))


@_ext(aten.where.self, aten.where.ScalarOther, aten.where.ScalarSelf)
def _where(ev, n, dt, exact):
    c, a, b = n.args[:3]
    return ev.sem.pointwise(lambda p, u, w: z3.If(p != 0, u, w), ev.value(c), ev.value(a),
                            ev.value(b))


@_ext(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def _masked_fill(ev, n, dt, exact):
    """``value`` where ``mask``, else ``self``; the mask broadcasts to
    ``self`` without growing it (required)."""
    sem = ev.sem
    x, mask, value = _args(n, ("self", "mask", "value"))
    if isinstance(value, fx.Node):
        vs = ev.value(value)
        if vs.rank != 0:
            raise Unsupported("masked_fill with a value that is not 0-d")
    else:
        if dt is not None and _kind(dt) == "int" and isinstance(value, float):
            if not value.is_integer():
                raise Unsupported("a fractional fill value of an integer tensor")
            value = int(value)
        vs = sem.const(bool(value) if dt == torch.bool else value)
    xs, ms = ev.value(x), ev.value(mask)
    for i in range(1, ms.rank + 1):
        sem.require(z3.BoolVal(False) if i > xs.rank
                    else z3.Or(ms.shape[-i] == xs.shape[-i], ms.shape[-i] == 1))
    return sem.pointwise(lambda u, m, c: z3.If(m != 0, c, u), xs, ms, vs)


@_ext(aten.log.default)
def _log(ev, n, dt, exact):
    a = n.args[0]
    if isinstance(a, fx.Node) and a.target == aten.exp.default:
        return ev.value(a.args[0])  # log(exp(u)) = u over the reals
    return ev.sem.pointwise(ev.sem.log, ev.value(n.args[0]))


@_ext(aten.reciprocal.default)
def _reciprocal(ev, n, dt, exact):
    return ev.sem.pointwise(lambda u: 1 / u, ev.value(n.args[0]))


@_ext(aten.sum.dim_IntList)
def _sum_dim(ev, n, dt, exact):
    x, dims, keep, dtype = _args(n, ("self", "dim", "keepdim", "dtype"))
    if dtype is not None and dtype != dt:
        raise Unsupported("sum with a dtype")
    if dt == torch.bool:
        raise Unsupported("sum to bool")
    xv = x.meta.get("val") if isinstance(x, fx.Node) else None
    return _sum(ev.sem, ev.value(x), list(dims) if dims is not None else [], keep,
                None if xv is None else list(xv.shape))


@_ext(aten.any.dim)
def _any_dim(ev, n, dt, exact):
    """Whether some element on ``dim`` is nonzero: ``Σ [x != 0] > 0``."""
    sem = ev.sem
    x, d, keep = _args(n, ("self", "dim", "keepdim"))
    xv = x.meta.get("val") if isinstance(x, fx.Node) else None
    ind = sem.pointwise(lambda u: _b(u != 0), ev.value(x))
    total = _sum(sem, ind, [d], keep, None if xv is None else list(xv.shape))
    return sem.pointwise(lambda u: _b(u > 0), total)


@_ext(aten.mean.dim)
def _mean_unit(ev, n, dt, exact):
    """A mean with a reduced axis of size 1 on the instance (the sum's
    reading, :func:`_sum`); else None: :func:`_mean`."""
    sem = ev.sem
    x, dims, keep, dtype = _args(n, ("self", "dim", "keepdim", "dtype"))
    xv = x.meta.get("val") if isinstance(x, fx.Node) else None
    xs = ev.value(x)
    ds = sorted({sem.axis(d, xs.rank) for d in dims}) if dims else list(range(xs.rank))
    if dtype is None and xv is not None and any(xv.shape[d] == 1 for d in ds):
        total = _sum(sem, xs, ds, keep, list(xv.shape))
        count = z3.IntVal(1)
        for d in ds:
            count = count * (z3.IntVal(1) if xv.shape[d] == 1 else xs.shape[d])
        return Sym(total.shape, lambda idx: total.at(idx) / z3.ToReal(count))
    return None


@_ext(aten.squeeze.dim)
def _squeeze(ev, n, dt, exact):
    sem = ev.sem
    x, d = n.args[:2]
    xs = ev.value(x)
    if xs.rank == 0:
        return xs
    d = sem.axis(d, xs.rank)
    xv = x.meta.get("val")
    if xv is None:
        raise Unsupported("squeeze of an operand without a shape")
    if xv.shape[d] == 1:  # the structure: this axis has size 1
        sem.require(xs.shape[d] == 1)
        return Sym(xs.shape[:d] + xs.shape[d + 1:],
                   lambda idx: xs.at(list(idx[:d]) + [z3.IntVal(0)] + list(idx[d:])))
    sem.require(xs.shape[d] != 1)
    return xs


@_ext(aten.unsqueeze.default)
def _unsqueeze(ev, n, dt, exact):
    x, d = n.args[:2]
    xs = ev.value(x)
    d = d % (xs.rank + 1) if -(xs.rank + 1) <= d <= xs.rank else None
    if d is None:
        raise Unsupported("unsqueeze axis out of range")
    return Sym(xs.shape[:d] + [z3.IntVal(1)] + xs.shape[d:],
               lambda idx: xs.at(list(idx[:d]) + list(idx[d + 1:])))


@_ext(aten.expand.default)
def _expand(ev, n, dt, exact):
    # the structure: an axis the instance expands from size 1 is a
    # broadcast axis (its size 1 assumed / obliged); one whose size the
    # instance keeps (-1, or its own size) is the input's size, whatever it is
    sem = ev.sem
    x, sizes = n.args[:2]
    xs = ev.value(x)
    xv = x.meta.get("val") if isinstance(x, fx.Node) else None
    r, k = len(sizes), xs.rank
    if r < k or xv is None:
        raise Unsupported("expand to a lower rank, or of an operand without a shape")
    shape, src = [], []
    for i, m in enumerate(sizes):
        j = i - (r - k)
        if not isinstance(m, int):
            raise Unsupported("symbolic expand size")
        if j < 0:
            if m < 1:
                raise Unsupported(f"expand to size {m}")
            shape.append(z3.IntVal(m))
        elif m == -1 or m == xv.shape[j]:
            shape.append(xs.shape[j])
            src.append((i, j, False))
        else:
            sem.require(xs.shape[j] == 1)
            shape.append(z3.IntVal(m))
            src.append((i, j, True))

    def at(idx):
        return xs.at([z3.IntVal(0) if bc else idx[i] for i, j, bc in src])
    return Sym(shape, at)


@_ext(aten.slice.Tensor)
def _slice(ev, n, dt, exact):
    sem = ev.sem
    x, d, start, end, step = _args(n, ("self", "dim", "start", "end", "step"))
    xs = ev.value(x)
    if not isinstance(step, int) or step < 1:
        raise Unsupported(f"slice step {step!r}")
    d = sem.axis(d, xs.rank)
    s, size = _slice_bounds(xs.shape[d], start, end, step)
    return Sym(xs.shape[:d] + [size] + xs.shape[d + 1:],
               lambda idx: xs.at(list(idx[:d]) + [s + idx[d] * step] + list(idx[d + 1:])))


@_ext(aten.constant_pad_nd.default)
def _pad(ev, n, dt, exact):
    sem = ev.sem
    x, pads, value = _args(n, ("self", "pad", "value"))
    xs = ev.value(x)
    if len(pads) % 2 or len(pads) > 2 * xs.rank:
        raise Unsupported(f"pad {list(pads)} of a rank-{xs.rank} tensor")
    if not any(pads):
        return xs  # no padding: the value is never read
    if dt is not None and _kind(dt) == "int" and isinstance(value, float):
        if not value.is_integer():
            raise Unsupported("a fractional pad value of an integer tensor")
        value = int(value)
    cv = _real(bool(value) if dt == torch.bool else value)
    lo = {xs.rank - 1 - i: pads[2 * i] for i in range(len(pads) // 2)}
    hi = {xs.rank - 1 - i: pads[2 * i + 1] for i in range(len(pads) // 2)}
    shape = [xs.shape[i] + lo.get(i, 0) + hi.get(i, 0) for i in range(xs.rank)]
    for d in shape:
        sem.require(d >= 1)

    def at(idx):
        src = [idx[i] - lo.get(i, 0) for i in range(xs.rank)]
        inside = z3.And(*[z3.And(s_ >= 0, s_ < xs.shape[i]) for i, s_ in enumerate(src)
                          if i in lo])
        return z3.If(inside, xs.at(src), cv)
    return Sym(shape, at)


@_ext(aten.flip.default)
def _flip(ev, n, dt, exact):
    x, dims = n.args[:2]
    xs = ev.value(x)
    ds = {ev.sem.axis(d, xs.rank) for d in dims}
    return Sym(list(xs.shape), lambda idx: xs.at(
        [xs.shape[i] - 1 - idx[i] if i in ds else idx[i] for i in range(xs.rank)]))


@_ext(aten.zeros_like.default, aten.ones_like.default, aten.full_like.default)
def _full_like(ev, n, dt, exact):
    t = n.target
    x = ev.value(n.args[0])
    v = 0 if t == aten.zeros_like.default else 1 if t == aten.ones_like.default \
        else n.args[1]
    if dt is not None and _kind(dt) == "int" and isinstance(v, float):
        if not math.isfinite(v):
            raise Unsupported(f"full_like with {v!r}")
        v = int(v)  # truncated to the integer dtype
    if dt == torch.bool:
        v = bool(v)
    c = _real(v)
    return Sym(list(x.shape), lambda idx: c)


@_ext(aten._to_copy.default)
def _to_copy_exact(ev, n, dt, exact):
    """A cast to an integer or boolean dtype; a floating one: None (the identity)."""
    if not exact:
        return None
    x = n.args[0]
    src = _val_dtype(x)
    if src is None:
        raise Unsupported("a cast of an operand without a dtype")
    if dt == torch.bool:
        return ev.sem.pointwise(lambda u: _b(u != 0), ev.value(x))
    if _kind(src) in ("int", "bool"):
        if src != torch.bool and torch.iinfo(src).bits > torch.iinfo(dt).bits:
            raise Unsupported(f"a narrowing integer cast {src} -> {dt}")
        return ev.value(x)
    return ev.sem.pointwise(_trunc, ev.value(x))  # float -> int truncates (in range)
