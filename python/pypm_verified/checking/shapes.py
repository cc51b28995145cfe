"""Shape rules of ``check-rules``' instance generator, one per kind of
ATen operator: ``rule(gen, app, spec)`` assigns the shapes of ``app``'s
tensor operands so that it outputs ``spec`` (size symbols, :class:`.Dim`),
or raises :class:`.GenerationFailed`. Which rule an operator takes is the op
registry's (:func:`pypm_verified.torch.registry.shape_rule_of`); :data:`RULES`
implements each rule it names."""
from __future__ import annotations

from typing import Callable, Dict, List, Optional

import torch

from .terms import SIZES as _SIZES, App, Dim, DimList as _DimList, GenerationFailed, Leaf
from .terms import op_name as _op_name, unify as _unify

# rule(gen, app, spec): assign the shapes of app's tensor arguments so that
# it outputs ``spec`` (raise GenerationFailed where it cannot).

def _axis(d, r: int) -> int:
    if not isinstance(d, int) or isinstance(d, bool) or not -r <= d < max(r, 1):
        raise GenerationFailed(f"axis {d!r} out of range for rank {r}")
    return d % r if r else 0


def _same_shape(gen, a: App, spec) -> None:
    for i in gen._tensor_args(a):
        gen._assign(a.args[i], spec)


def _packet(target) -> Optional[str]:
    return getattr(getattr(target, "overloadpacket", None), "__name__", None)


def _read(gen, d: Dim, kind: str, a: App) -> None:
    """Record ``d`` as an axis the pattern reads (:attr:`Instance.axes`)."""
    gen._axes.append((d, kind, _packet(a.target) or _op_name(a.target)))


_KEEPDIM_REDUCTIONS = ("mean", "sum", "amax", "amin")


def _ones_under(gen, t, r: int, depth: int = 0) -> frozenset:
    """The axes (0..r-1) of a rank-``r`` output of ``t`` that a keepdim
    reduction under it (through pointwise ops whose every tensor operand is
    one) makes 1: a pointwise operand shaped like the output there would
    force the reduced axis to 1. A tensor input may carry any axis."""
    if not isinstance(t, App) or t.spec is not None or depth > 16 or r == 0:
        return frozenset()
    name = _packet(t.target)
    if name in _KEEPDIM_REDUCTIONS and len(t.args) > 2:
        try:
            dims, keep = gen._val(t.args[1]), gen._val(t.args[2])
        except GenerationFailed:
            return frozenset()
        if not keep or dims is None:
            return frozenset()
        dims = [dims] if isinstance(dims, int) else dims
        return frozenset(d % r for d in dims if isinstance(d, int)
                         and not isinstance(d, bool) and -r <= d < r)
    if torch.Tag.pointwise in getattr(t.target, "tags", ()):
        out = None
        for i in gen._tensor_args(t):
            sub = _ones_under(gen, t.args[i], r, depth + 1)
            out = sub if out is None else out & sub
            if not out:
                break
        return out or frozenset()
    return frozenset()


def _pointwise(gen, a: App, spec) -> None:
    idx = gen._tensor_args(a)
    r = len(spec)
    if not idx:
        if r:
            raise GenerationFailed("a pointwise op without tensor operands")
        return
    rng = gen.rng
    # an operand that is a keepdim reduction (``x - mean(x, -1, keepdim)``)
    # broadcasts along the reduced axis, which the other operand carries:
    # shaped like the output, it would make that axis 1
    ones = {i: _ones_under(gen, a.args[i], r) for i in idx} if len(idx) > 1 else {}
    forced = {i for i in idx if ones.get(i)}
    free = [i for i in idx if not (isinstance(a.args[i], Leaf) and a.args[i].rank_hint
                                   is not None and a.args[i].rank_hint < r)
            and i not in forced]
    carrier = rng.choice(free or [i for i in idx if i not in forced] or idx)
    plans = {}
    for i in idx:
        if i in forced and i != carrier and rng.random() < 0.9:
            plans[i] = [Dim(1) if j in ones[i] else spec[j] for j in range(r)]
            continue
        want = gen._hint(a.args[i]) if len(idx) > 1 else None
        if want is not None and want <= r and i != carrier:
            tail = list(spec[r - want:])
            plans[i] = tail if rng.random() < 0.75 else gen._reduced(tail, drop=False)
        elif len(idx) == 1 or rng.random() < 0.75:
            plans[i] = list(spec)
        else:
            plans[i] = gen._reduced(spec, drop=i != carrier)
    for j in range(r):  # an axis no operand carries is 1 in the output too
        carried = False
        for dims in plans.values():
            m = len(dims)
            if j >= r - m and dims[j - (r - m)] is spec[j]:
                carried = True
        if not carried:
            _unify(spec[j], Dim(1))
    for i, dims in plans.items():
        gen._assign(a.args[i], dims)


def _batch(gen, batch, p_full: float, p_empty: float, rank=None) -> List[Dim]:
    if rank is not None and 2 <= rank <= len(batch) + 2:
        return list(batch[len(batch) - (rank - 2):])
    x = gen.rng.random()
    if x < p_full:
        return list(batch)
    if x < p_full + p_empty:
        return []
    return gen._reduced(batch)


def _cover(batch, *plans) -> None:
    r = len(batch)
    for j in range(r):
        if not any(j >= r - len(p) and p[j - (r - len(p))] is batch[j] for p in plans):
            _unify(batch[j], Dim(1))


def _matmul(gen, a: App, spec) -> None:
    x, y = a.args[0], a.args[1]
    r = len(spec)
    K = Dim()
    _read(gen, K, "contracted", a)
    if r == 0:
        gen._assign(x, [K])
        gen._assign(y, [K])
    elif r == 1:
        if gen.rng.random() < 0.5:
            gen._assign(x, [spec[0], K])
            gen._assign(y, [K])
        else:
            gen._assign(x, [K])
            gen._assign(y, [K, spec[0]])
    else:
        batch, M, N = spec[:-2], spec[-2], spec[-1]
        bx = _batch(gen, batch, 0.85, 0.0, gen._hint(x))
        by = _batch(gen, batch, 0.6, 0.25, gen._hint(y))
        _cover(batch, bx, by)
        gen._assign(x, bx + [M, K])
        gen._assign(y, by + [K, N])


def _mm(gen, a: App, spec) -> None:
    if len(spec) != 2:
        raise GenerationFailed("mm is 2-D")
    K = Dim()
    _read(gen, K, "contracted", a)
    gen._assign(a.args[0], [spec[0], K])
    gen._assign(a.args[1], [K, spec[1]])


def _bmm(gen, a: App, spec) -> None:
    if len(spec) != 3:
        raise GenerationFailed("bmm is 3-D")
    plan = gen._plan.get(id(a))
    if plan is not None:  # its operands' views mirror the view of its product
        for t in a.args[:2]:
            if isinstance(t, App):
                gen._plan[id(t)] = plan
    K = Dim()
    _read(gen, K, "contracted", a)
    gen._assign(a.args[0], [spec[0], spec[1], K])
    gen._assign(a.args[1], [spec[0], K, spec[2]])


def _linear(gen, a: App, spec) -> None:
    if len(spec) < 1:
        raise GenerationFailed("linear outputs rank >= 1")
    N, K = spec[-1], Dim()
    _read(gen, K, "contracted", a)
    gen._assign(a.args[0], list(spec[:-1]) + [K])
    gen._assign(a.args[1], [N, K])
    if gen._is_tensor(a.args[2]):
        gen._assign(a.args[2], [N] if gen.rng.random() < 0.8 else gen._reduced([N]))


def _addmm(gen, a: App, spec) -> None:
    if len(spec) != 2:
        raise GenerationFailed("addmm is 2-D")
    K = Dim()
    _read(gen, K, "contracted", a)
    if gen._is_tensor(a.args[0]):
        gen._assign(a.args[0], gen._reduced(spec))
    gen._assign(a.args[1], [spec[0], K])
    gen._assign(a.args[2], [K, spec[1]])


def _free_const(gen, t) -> bool:
    """Whether ``t`` is a constant leaf (a pattern variable, not a literal)
    whose value the generator may still choose."""
    return isinstance(t, Leaf) and t.kind == "const" and t in gen._values


_BMMS = (torch.ops.aten.bmm.default, torch.ops.aten.baddbmm.default)


def _view(gen, a: App, spec) -> None:
    """``view``/``reshape`` to ``spec``: the first two axes merged from one
    (the input is ``(B*H, ...)``), the first axis split in two (the input is
    ``(B, H, ...)``: the views around batched attention), or the same shape;
    a size list that is a pattern variable is set to ``spec``'s sizes. The
    views of one instance share their batch and head sizes (the views around
    one batched matmul agree), and a view of a ``bmm`` reads a 3-D tensor.

    ``matmul`` decomposed (``view(bmm(view(expand(a)), view(expand(b))))``):
    most of the time the views of the ``bmm``'s operands flatten the batch
    axes the view of its product unflattens (or all keep their shapes), and
    the expands under them keep their operands' shapes."""
    rng, r = gen.rng, len(spec)
    x = rng.random()
    plan = gen._plan.get(id(a))
    if getattr(a.args[0], "target", None) in _BMMS:
        x = 0.0 if r == 4 else 0.9
        gen._plan[id(a.args[0])] = "split" if x < 0.4 else "same"
    elif plan in ("split", "same") and rng.random() < 0.9:
        x = 0.6 if plan == "split" else 0.9
        if isinstance(a.args[0], App):
            gen._plan[id(a.args[0])] = "keep"
    if getattr(gen, "_view_bh", None) is None:
        gen._view_bh = (rng.choice((1, 2, 3)), rng.choice((2, 3)))
    b, h = gen._view_bh
    if r >= 2 and x < 0.4:
        _unify(spec[0], Dim(b))
        _unify(spec[1], Dim(h))
        src = [Dim(b * h)] + list(spec[2:])
    elif r >= 1 and x < 0.7:
        _unify(spec[0], Dim(b * h))
        src = [Dim(b), Dim(h)] + list(spec[1:])
    elif r >= 2 and x < 0.8 and plan is None:
        # the same rank, another shape: (b*h, c) -> (b, h*c)
        c = rng.choice((2, 3))
        _unify(spec[0], Dim(b))
        _unify(spec[1], Dim(h * c))
        src = [Dim(b * h), Dim(c)] + list(spec[2:])
    else:
        src = list(spec)
    if _free_const(gen, a.args[1]):
        gen._values[a.args[1]] = _DimList(spec)
    gen._assign(a.args[0], src)


def _baddbmm(gen, a: App, spec) -> None:
    """``beta * bias + alpha * bmm(x, y)``: 3-D, the bias broadcasts."""
    if len(spec) != 3:
        raise GenerationFailed("baddbmm is 3-D")
    K = Dim()
    _read(gen, K, "contracted", a)
    if gen._is_tensor(a.args[0]):
        gen._assign(a.args[0], gen._reduced(spec))
    gen._assign(a.args[1], [spec[0], spec[1], K])
    gen._assign(a.args[2], [spec[0], K, spec[2]])


def _transpose(gen, a: App, spec) -> None:
    r = len(spec)
    if r >= 2 and _free_const(gen, a.args[1]) and _free_const(gen, a.args[2]) \
            and gen.rng.random() < 0.8:
        # axes that are pattern variables (a rule checks them): valid ones for
        # this rank, mostly the last two, each spelled either way
        pair = [r - 2, r - 1] if gen.rng.random() < 0.7 else gen.rng.sample(range(r), 2)
        pair = [d - r if gen.rng.random() < 0.5 else d for d in pair]
        gen.rng.shuffle(pair)
        gen._values[a.args[1]], gen._values[a.args[2]] = pair
    d0, d1 = _axis(gen._val(a.args[1]), r), _axis(gen._val(a.args[2]), r)
    x = list(spec)
    if r:  # a 0-d tensor transposes to itself (axes 0 and -1 allowed)
        x[d0], x[d1] = spec[d1], spec[d0]
    gen._assign(a.args[0], x)


def _t(gen, a: App, spec) -> None:
    if len(spec) > 2:
        raise GenerationFailed("t() takes rank <= 2")
    gen._assign(a.args[0], list(reversed(spec)))


def _permute(gen, a: App, spec) -> None:
    r = len(spec)
    if _free_const(gen, a.args[1]) and gen.rng.random() < 0.8:
        # a permutation that is a pattern variable: a valid one for this rank
        # (the last two axes swapped, a random one, or half the time one this
        # draw already has for the rank: rules compare permutations, and a
        # cycle is not its own inverse)
        rng = gen.rng
        same = [p for p in gen._perms if len(p) == r]
        perm = list(range(r))
        if same and rng.random() < 0.5:
            perm = list(rng.choice(same))
        elif r >= 2 and rng.random() < 0.4:
            perm[-2], perm[-1] = perm[-1], perm[-2]
        else:
            rng.shuffle(perm)
        gen._perms.append(perm)
        gen._values[a.args[1]] = perm
    dims = gen._val(a.args[1])
    if not isinstance(dims, (list, tuple)) or len(dims) != r:
        raise GenerationFailed("permute needs a permutation of the axes")
    norm = [_axis(d, r) for d in dims]
    if sorted(norm) != list(range(r)):
        raise GenerationFailed("not a permutation")
    x = [None] * r
    for i, d in enumerate(norm):
        x[d] = spec[i]
    gen._assign(a.args[0], x)


def _softmax(gen, a: App, spec) -> None:
    ax = _axis(gen._val(a.args[1]), len(spec))
    if spec:
        _read(gen, spec[ax], "softmax", a)
    gen._assign(a.args[0], spec)


def _reduction(gen, a: App, spec) -> None:
    dims = gen._val(a.args[1])
    keep = gen._val(a.args[2]) if len(a.args) > 2 else False
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        raise GenerationFailed("full reductions are not generated")
    if isinstance(dims, int):
        dims = [dims]
    r = len(spec)
    if keep:
        if r == 0:
            raise GenerationFailed("a keepdim reduction to a 0-d tensor")
        norm = {_axis(d, r) for d in dims}
        x = list(spec)
        for d in norm:
            _unify(spec[d], Dim(1))
            x[d] = Dim()
            _read(gen, x[d], "reduced", a)
        gen._assign(a.args[0], x)
        return
    r_in = r + len(dims)
    norm = {_axis(d, r_in) for d in dims}
    if len(norm) != len(dims):
        raise GenerationFailed("repeated reduction axes")
    it = iter(spec)
    x = [Dim() if j in norm else next(it) for j in range(r_in)]
    for j in sorted(norm):
        _read(gen, x[j], "reduced", a)
    gen._assign(a.args[0], x)


def _norm(gen, a: App, spec) -> None:
    gen._assign(a.args[0], spec)
    ns = a.args[1]
    if isinstance(ns, Leaf) and ns.kind == "const":
        k = 1 if len(spec) else 0
        gen._values[ns] = _DimList(spec[len(spec) - k:])
    else:
        vals = gen._val(ns)
        if not isinstance(vals, (list, tuple)) or len(vals) > len(spec):
            raise GenerationFailed("normalized_shape does not fit")
        k = len(vals)
        for d, v in zip(spec[len(spec) - k:], vals):
            _unify(d, Dim(int(v)))
    last = spec[len(spec) - k:]
    for d in last:
        _read(gen, d, "normalized", a)
    for t in a.args[2:]:
        if gen._is_tensor(t):
            gen._assign(t, list(last))


def _sdpa(gen, a: App, spec) -> None:
    if len(spec) < 2:
        raise GenerationFailed("SDPA outputs rank >= 2")
    batch, L, Ev = spec[:-2], spec[-2], spec[-1]
    S, E = Dim(), Dim()
    _read(gen, S, "softmax", a)
    _read(gen, E, "contracted", a)
    gen._assign(a.args[0], list(batch) + [L, E])
    gen._assign(a.args[1], list(batch) + [S, E])
    gen._assign(a.args[2], list(batch) + [S, Ev])
    if gen._is_tensor(a.args[3]):
        gen._assign(a.args[3], gen._reduced(list(batch) + [L, S]))


def _unsqueeze(gen, a: App, spec) -> None:
    r = len(spec)
    if r == 0:
        raise GenerationFailed("unsqueeze to a 0-d tensor")
    d = _axis(gen._val(a.args[1]), r)
    _unify(spec[d], Dim(1))
    gen._assign(a.args[0], list(spec[:d]) + list(spec[d + 1:]))


def _squeeze(gen, a: App, spec) -> None:
    r = len(spec)
    dv = gen._val(a.args[1])
    if gen.rng.random() < 0.85:  # the axis is there, of size 1
        d = _axis(dv, r + 1)
        gen._assign(a.args[0], list(spec[:d]) + [Dim(1)] + list(spec[d:]))
    else:  # a squeeze that keeps its axis (size > 1)
        _axis(dv, r)
        gen._assign(a.args[0], list(spec))


def _expand(gen, a: App, spec) -> None:
    """An operand that broadcasts to ``spec``; its own shape where a view
    of a decomposed matmul asks for it (see :func:`_view`), most of the time."""
    sizes = a.args[1]
    rng = gen.rng
    keep = gen._plan.get(id(a)) == "keep" and rng.random() < 0.9
    x = list(spec) if keep else gen._reduced(spec)
    off = len(spec) - len(x)
    if isinstance(sizes, Leaf) and sizes.kind == "const":
        vals = _DimList(spec)
        for j, d in enumerate(x):  # -1: keep the input's size
            if d is spec[off + j] and rng.random() < 0.25:
                vals[off + j] = Dim(-1)
        gen._values[sizes] = vals
    else:
        vals = gen._val(sizes)
        if not isinstance(vals, (list, tuple)) or len(vals) != len(spec):
            raise GenerationFailed("expand's sizes do not fit")
        for d, v in zip(spec, vals):
            if v != -1:
                _unify(d, Dim(int(v)))
    gen._assign(a.args[0], x)


def _slice(gen, a: App, spec) -> None:
    r = len(spec)
    if r == 0:
        raise GenerationFailed("slice of a 0-d tensor")
    d = _axis(gen._val(a.args[1]), r)
    start, end, step = (gen._val(t) for t in a.args[2:5])
    if not isinstance(step, int) or step < 1:
        raise GenerationFailed("slice step < 1")
    for v in (start, end):
        if v is not None and (not isinstance(v, int) or isinstance(v, bool)):
            raise GenerationFailed("slice bound not an int")
    n = gen.rng.choice(_SIZES)
    out = len(range(*slice(start, end, step).indices(n)))
    if out == 0:
        raise GenerationFailed("empty slice")
    _unify(spec[d], Dim(out))
    x = list(spec)
    x[d] = Dim(n)
    gen._assign(a.args[0], x)


def _pad(gen, a: App, spec) -> None:
    """``constant_pad_nd``: pads (lo, hi) of the last axes, last axis first;
    a constant pad leaf is drawn here (all zero half the time)."""
    r = len(spec)
    rng = gen.rng
    pads = a.args[1]
    if isinstance(pads, Leaf) and pads.kind == "const":
        k = rng.randint(1, min(r, 2)) if r else 0
        if k == 0:
            raise GenerationFailed("pad of a 0-d tensor")
        zero = rng.random() < 0.5
        vals = [0 if zero else rng.choice((-1, 0, 0, 1, 2)) for _ in range(2 * k)]
        gen._values[pads] = vals
    else:
        vals = gen._val(pads)
    if not isinstance(vals, (list, tuple)) or len(vals) % 2 or len(vals) > 2 * r:
        raise GenerationFailed("pad list does not fit")
    x = list(spec)
    for i in range(len(vals) // 2):
        lo, hi = vals[2 * i], vals[2 * i + 1]
        ax = r - 1 - i
        if lo == 0 and hi == 0:
            continue
        n = rng.choice(_SIZES)
        out = n + lo + hi
        if out < 1:
            raise GenerationFailed("empty pad")
        _unify(spec[ax], Dim(out))
        x[ax] = Dim(n)
    gen._assign(a.args[0], x)


#: every shape rule the registry names (``registry.SHAPE_RULES``), by name
RULES: Dict[str, Callable] = {
    "pointwise": _pointwise, "same_shape": _same_shape,
    "pad": _pad, "unsqueeze": _unsqueeze, "squeeze": _squeeze, "expand": _expand,
    "slice": _slice, "matmul": _matmul, "mm": _mm, "bmm": _bmm, "linear": _linear,
    "addmm": _addmm, "baddbmm": _baddbmm, "view": _view, "transpose": _transpose, "t": _t,
    "permute": _permute, "softmax": _softmax, "reduction": _reduction, "norm": _norm,
    "sdpa": _sdpa,
}


def rule_for(target) -> Callable:
    """The shape rule of the ATen op ``target``: the registry's choice."""
    from ..torch.registry import shape_rule_of
    return RULES[shape_rule_of(target)]
