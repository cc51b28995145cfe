"""Hypothesis strategies for DSL-level programs (tests/dsl_interpreter.py)
and graphs shaped like them.

:func:`programs` draws 1-3 ``@pm.pattern`` names with 1-3 parameters
(term parameters, and operator parameters of 0-2 inputs) and 1-3
alternates each (interleaved in the source), whose bodies use every form of
the language: operator applications over the operators of
tests/strategies.py, integer constants, parameters used several times
(nonlinear), ``pm.var()`` and ``pm.Op(n_in, n_out)`` locals, aliases of
terms and of variables, operator variables applied (``f(...)``), pattern
calls (to any pattern, the pattern itself included, with repeated and local
arguments: recursion, mutual recursion, left recursion, recursion through
alternates), match constraints (``x <= p``), asserts (``assert g``,
``assert not g``) anywhere among the statements, over ``.rank``,
``.shape.rank``, ``.shape[i]``, ``.shape == (...)``, ``.dtype``,
``.elType``, ``F.op_class``, ``+ - *`` and unary minus, the six
comparisons, chains, ``and``/``or``/``not``, dtype and operator-class
constants, constants at the arithmetic bounds, and comparisons Python
decides itself.

Programs are made well formed by the language's own rules (checked here on
the surface syntax, not by the lowering): a constraint's variable is bound
before it (by the returned term or an earlier constraint), every local is
bound by every match, asserts read only bound variables, an operator
parameter is used as an operator. "Bound" is the greatest fixpoint over the
calls (a call binds the arguments whose parameters the callee binds on
every alternate). A program the repair cannot fix is rejected (rare).

:func:`shaped_graphs` adds to a random graph instances of the program's
alternates (calls unfolded a few levels), so that matches are common.
"""
from __future__ import annotations

import functools
from typing import Dict, List, Set, Tuple

from hypothesis import reject
from hypothesis import strategies as st

from dsl_interpreter import (
    OP, TERM, AliasRef, And, App, Assert, AltView, Call, Chain, ClassConst, ClassOf, Cmp,
    CMP_OPS, Const, Constrain, DTypeConst, DTypeOf, DeclOp, DeclVar, Dim, FunApp, Let, Neg,
    Not, Num, Or, Param, PatternDef, Program, Rank, Return, ShapeIs, Bin, Var, node_operator)
import pypm_verified as pm
from strategies import B2, BIG, K0, T3, U1, V1, graphs

OPS_BY_ARITY = {0: [K0], 1: [U1, V1], 2: [B2], 3: [T3]}
APP_OPS = [U1, V1, B2, T3, K0]
TERM_NAMES = ["x", "y", "z", "w"]
OP_NAMES = ["f", "g", "h"]
CLASSES = ["unary_pointwise", "other", "no_such_class"]
DTYPE_NAMES = ["f32", "i8", "f16"]



@functools.lru_cache(maxsize=None)
def _ints(lo: int, hi: int):
    return st.integers(lo, hi)


def _int(draw, lo: int, hi: int) -> int:
    return draw(_ints(lo, hi))


def _pick(draw, xs):
    xs = list(xs)
    return xs[draw(_ints(0, len(xs) - 1))]


def _bool(draw) -> bool:
    return draw(_ints(0, 1)) == 1


# node types for the instances: mostly known, so that guards are often decided
SHAPES = [None, (), (2,), (3,), (2, 3), (3, 2), (2, 2), (None, 3), (3, None), (1, 2, 3)]
DTYPES = [None, pm.f32, pm.f32, pm.i8, pm.f16]
_DIMS = st.lists(st.one_of(st.none(), st.integers(0, 3)), max_size=2)


# --------------------------------------------------------- static analysis


def _term_binds(t, pb) -> Tuple[Set[str], Set[str]]:
    """(term variables, operator variables) every match of the expanded term
    ``t`` binds; ``pb[P]`` = the parameter names P binds on every match."""
    if isinstance(t, Var):
        return {t.name}, set()
    if isinstance(t, Const):
        return set(), set()
    if isinstance(t, (App, FunApp)):
        T, F = set(), set()
        if isinstance(t, FunApp):
            F.add(t.F)
        for a in t.args:
            a_t, a_f = _term_binds(a, pb)
            T |= a_t
            F |= a_f
        return T, F
    if isinstance(t, Call):
        params, bound = pb[t.pattern]
        T, F = set(), set()
        for p, a in zip(params, t.args):
            if p.name in bound:
                (T if p.kind == TERM else F).add(a)
        return T, F
    raise TypeError(t)


def alt_binds(view: AltView, pb, upto=None) -> Tuple[Set[str], Set[str]]:
    """What every match of the alternate binds (the returned term and the
    first ``upto`` constraints; all if None)."""
    T, F = _term_binds(view.expand(view.ret), pb)
    cs = view.constraints if upto is None else view.constraints[:upto]
    for _, q in cs:
        a, b = _term_binds(view.expand(q), pb)
        T |= a
        F |= b
    return T, F


def binds_fixpoint(prog: Program) -> Dict[str, Tuple[tuple, Set[str]]]:
    """``pb[P] = (params, names bound)``: the greatest fixpoint."""
    pb = {n: (d.params, {p.name for p in d.params}) for n, d in prog.patterns.items()}
    views = {n: [AltView(a) for a in d.alternates] for n, d in prog.patterns.items()}
    while True:
        new = {}
        for n, d in prog.patterns.items():
            bound = {p.name for p in d.params}
            for v in views[n]:
                T, F = alt_binds(v, pb)
                bound &= T | F
            new[n] = (d.params, bound & pb[n][1])
        if all(new[n][1] == pb[n][1] for n in pb):
            return pb
        pb = new


def _guard_reads(g) -> Tuple[Set[str], Set[str]]:
    T, F = set(), set()

    def expr(e):
        if isinstance(e, (Rank, Dim, DTypeOf)):
            T.add(e.x)
        elif isinstance(e, ClassOf):
            F.add(e.F)
        elif isinstance(e, Bin):
            expr(e.a)
            expr(e.b)
        elif isinstance(e, Neg):
            expr(e.a)

    def guard(h):
        if isinstance(h, Cmp):
            expr(h.a)
            expr(h.b)
        elif isinstance(h, Chain):
            expr(h.first)
            for _, e in h.rest:
                expr(e)
        elif isinstance(h, ShapeIs):
            T.add(h.x)
        elif isinstance(h, Not):
            guard(h.a)
        else:
            guard(h.a)
            guard(h.b)
    guard(g)
    return T, F


def _fun_uses(t, view) -> Set[str]:
    """Operator variables ``t`` applies (``view`` None: names as written)."""
    if isinstance(t, FunApp):
        out = {view.var(t.F) if view is not None else t.F}
        for a in t.args:
            out |= _fun_uses(a, view)
        return out
    if isinstance(t, App):
        return set().union(*(_fun_uses(a, view) for a in t.args)) if t.args else set()
    if isinstance(t, AliasRef) and view is not None:
        return _fun_uses(view.term_alias[t.name], view)
    return set()


def problems(prog: Program) -> List[str]:
    """Why ``prog`` is not well formed by the language's rules ([] if it is)."""
    pb = binds_fixpoint(prog)
    out = []
    for n, d in prog.patterns.items():
        used_as_op = set()
        for i, stmts in enumerate(d.alternates):
            v = AltView(stmts)
            for j, (x, _) in enumerate(v.constraints):
                if x not in alt_binds(v, pb, j)[0]:
                    out.append(f"{n}[{i}]: constraint on unbound {x}")
            T, F = alt_binds(v, pb)
            for name, kind, _ in v.locals:
                if name not in (T if kind == TERM else F):
                    out.append(f"{n}[{i}]: local {name} unbound")
            for g, _ in v.asserts:
                gt, gf = _guard_reads(g)
                if {v.var(x) for x in gt} - T or {v.var(f) for f in gf} - F:
                    out.append(f"{n}[{i}]: guard reads an unbound variable")
                used_as_op |= {v.var(f) for f in gf}
            used_as_op |= _fun_uses(v.ret, v)
            for _, q in v.constraints:
                used_as_op |= _fun_uses(q, v)
        for p in d.params:
            if p.kind == OP and p.name not in used_as_op:
                out.append(f"{n}: operator parameter {p.name} never used as an operator")
    return out


# --------------------------------------------------------------- programs


class _AltGen:
    """Draws one alternate of pattern ``me``."""

    def __init__(self, draw, sigs: Dict[str, Tuple[Param, ...]], me: str, calls: bool = True):
        self.draw, self.sigs, self.me = draw, sigs, me
        self.calls = calls  # False: a base case (no pattern calls)
        params = sigs[me]
        self.tvars = [p.name for p in params if p.kind == TERM]
        self.fvars = {p.name: p.arity for p in params if p.kind == OP}
        self.decls: list = []
        self.lets: list = []
        self.n_local = 0
        self.n_alias = 0

    def int(self, lo, hi):
        return _int(self.draw, lo, hi)

    def pick(self, xs):
        return _pick(self.draw, xs)

    def new_term_local(self) -> str:
        name = f"v{self.n_local}"
        self.n_local += 1
        self.decls.append(DeclVar(name))
        self.tvars.append(name)
        return name

    def new_op_local(self, arity: int) -> str:
        name = f"Op{self.n_local}"
        self.n_local += 1
        self.decls.append(DeclOp(name, arity, self.pick([1, 1, 2])))
        self.fvars[name] = arity
        return name

    def term_var(self) -> str:
        c = self.int(0, 9)
        if not self.tvars or c == 0:
            return self.new_term_local()
        x = self.pick(self.tvars)
        if c == 1:  # an alias of the variable
            a = f"a{self.n_alias}"
            self.n_alias += 1
            self.lets.append(Let(a, Var(x)))
            self.tvars.append(a)
            return a
        return x

    def op_var(self, arity: int) -> str:
        ok = [F for F, n in self.fvars.items() if n == arity]
        c = self.int(0, 5)
        if not ok or c == 0:
            return self.new_op_local(arity)
        F = self.pick(ok)
        if c == 1:
            a = f"a{self.n_alias}"
            self.n_alias += 1
            self.lets.append(Let(a, Var(F)))
            self.fvars[a] = arity
            return a
        return F

    def call(self) -> Call:
        Q = self.pick(sorted(self.sigs))
        args = tuple(self.term_var() if p.kind == TERM else self.op_var(p.arity)
                     for p in self.sigs[Q])
        kw = self.int(0, len(args)) if args and self.int(0, 4) == 0 else -1
        return Call(Q, args, kw)

    ROOT = ["app"] * 8 + ["fun"] * 4 + ["call"] * 3 + ["var", "alias"]
    CHILD = ["var"] * 6 + ["const"] + ["app"] * 4 + ["fun"] * 2 + ["call"] * 5 + ["alias"]
    LEAF = ["var"] * 11 + ["const"] * 2 + ["alias"] + ["call"] * 5

    def term(self, depth: int, root: bool = False):
        """A term; at the root of a returned term or a constraint mostly an
        application (calls there recurse at the same node), below it
        variables, applications and calls (recursion into a child)."""
        c = self.pick(self.LEAF if depth <= 0 else self.ROOT if root else self.CHILD)
        if c == "call" and not self.calls:
            c = "var" if depth <= 0 else "app"
        if c == "var":
            return Var(self.term_var())
        if c == "const":
            return Const(self.pick([0, 1]))
        if c == "alias":
            aliases = [s.name for s in self.lets if not isinstance(s.term, Var)]
            return AliasRef(self.pick(aliases)) if aliases else App(K0, ())
        if c == "call":
            t = self.call()
        elif c == "app":
            op = self.pick([U1, V1, B2, T3, U1, B2])
            t = App(op, tuple(self.term(depth - 1) for _ in range(op.arity)))
        else:
            arity = self.pick([1, 1, 2, 0])
            F = self.op_var(arity)
            t = FunApp(F, tuple(self.term(depth - 1) for _ in range(arity)))
        if self.int(0, 5) == 0:  # name it: t = ...; used here (and maybe again)
            a = f"t{self.n_alias}"
            self.n_alias += 1
            self.lets.append(Let(a, t))
            return AliasRef(a)
        return t

    def constrained_var(self, t, ret=None, body=()) -> str:
        """A variable to constrain with ``t``: one ``t`` does not mention (a
        node cannot be a proper subterm of itself), preferably one the
        returned term binds and no other constraint constrains."""
        v = AltView(self.decls + self.lets + [Return(t)])
        inside = _vars_of(v.expand(t))
        ok = [x for x in self.tvars if v.var(x) not in inside]
        if ret is not None:
            taken = {v.var(c.x) for c in body}
            best = [x for x in ok if v.var(x) in _vars_of(v.expand(ret)) - taken]
            if best and self.int(0, 3):
                return self.pick(best)
        if ok and self.int(0, 5):
            return self.pick(ok)
        return self.new_term_local()  # (not bound before it: the repair picks another)

    def alternate(self) -> list:
        body = []
        if self.int(0, 9) < 3:  # the paper's style: x <= F(P(y)); return x
            q = self.term(self.int(1, 2), root=True)
            x = self.constrained_var(q)
            ret = Var(x)
            body.append(Constrain(x, q))
        else:
            ret = self.term(self.int(1, 3), root=True)
            if isinstance(ret, Const):  # a pattern returns a term, not a constant
                ret = App(U1, (ret,))
        for _ in range(self.pick([0, 0, 1, 1, 2])):
            q = self.term(self.int(0, 2), root=True)
            body.append(Constrain(self.constrained_var(q, ret, body), q))
        # operator parameters are mostly applied (f(UnaryChain(x, f)))
        used = set().union(*(_fun_uses(t, None) for t in [ret] + [c.term for c in body]))
        for p in self.sigs[self.me]:
            if p.kind == OP and p.arity and p.name not in used and self.int(0, 1):
                ret = FunApp(p.name, (ret,) + tuple(Var(self.term_var())
                                                     for _ in range(p.arity - 1)))
        return self.decls + self.lets + body + [Return(ret)]


def _vars_of(t) -> Set[str]:
    """Variables an expanded term mentions (call arguments included)."""
    if isinstance(t, Var):
        return {t.name}
    if isinstance(t, Call):
        return set(t.args)
    if isinstance(t, (App, FunApp)):
        return set().union(*map(_vars_of, t.args)) if t.args else set()
    return set()


def _exprs(draw, T: List[str], F: List[str], depth: int):
    """(expr, reads attributes?)"""
    c = _int(draw, 0, 9 if depth > 0 else 5)
    if c <= 1 or (not T and not F and c <= 5):
        return Num(_int(draw, -2, 4)), False
    if c <= 5:
        leaves = []
        if T:
            x = _pick(draw, T)
            leaves += [Rank(x, _bool(draw)), Dim(x, _int(draw, -3, 2)),
                       DTypeOf(x, _bool(draw))]
        if F:
            leaves.append(ClassOf(_pick(draw, F)))
        if not leaves:
            return Num(_int(draw, -2, 4)), False
        return _pick(draw, leaves), True
    if c == 9:
        e, sym = _exprs(draw, T, F, depth - 1)
        return Neg(e), sym
    a, sa = _exprs(draw, T, F, depth - 1)
    b, sb = _exprs(draw, T, F, depth - 1)
    if sa and not sb and _int(draw, 0, 3) == 0:
        b = Num(_pick(draw, BIG))  # at the arithmetic bounds
    return Bin(_pick(draw, ["+", "-", "*"]), a, b), sa or sb


def _plausible(draw, T: List[str], F: List[str]):
    """An attribute compared with a value it often has (so that guards do
    not reject most matches)."""
    c = _int(draw, 0, 4)
    op = _pick(draw, CMP_OPS)
    if F and (c == 0 or not T):
        cls = ClassConst(_pick(draw, CLASSES[:2]))
        return Cmp(_pick(draw, ["==", "!="]), ClassOf(_pick(draw, F)), cls)
    if not T:
        return Cmp(op, Num(_int(draw, 0, 3)), Num(_int(draw, 0, 3)))
    x = _pick(draw, T)
    if c == 1:
        return Cmp(op, Rank(x, _bool(draw)), Num(_int(draw, 0, 3)))
    if c == 2:
        return Cmp(op, Dim(x, _pick(draw, [0, -1, 1])), Num(_int(draw, 1, 3)))
    if c == 3:
        return Cmp(_pick(draw, ["==", "!="]), DTypeOf(x, _bool(draw)),
                   DTypeConst(_pick(draw, DTYPE_NAMES)))
    y = _pick(draw, T)
    return Cmp(op, Bin(_pick(draw, ["+", "-", "*"]), Rank(x), Num(_int(draw, 0, 2))), Rank(y))


def _guards(draw, T: List[str], F: List[str], depth: int):
    c = _int(draw, 0, 9 if depth > 0 else 5)
    if _int(draw, 0, 9) < 6:
        return _plausible(draw, T, F)
    if c <= 2:
        a, sa = _exprs(draw, T, F, 2)
        if sa and _int(draw, 0, 2) == 0:  # a constant only an attribute is compared with
            opts = [Num(_pick(draw, BIG))]
            if any(isinstance(x, (DTypeOf,)) for x in [a]) or _bool(draw):
                opts.append(DTypeConst(_pick(draw, DTYPE_NAMES)))
            if isinstance(a, ClassOf) or _bool(draw):
                opts.append(ClassConst(_pick(draw, CLASSES)))
            b = _pick(draw, opts)
        else:
            b, _ = _exprs(draw, T, F, 2)
        if _bool(draw):
            a, b = b, a
        return Cmp(_pick(draw, CMP_OPS), a, b)
    if c == 3:
        first, _ = _exprs(draw, T, F, 1)
        rest = tuple((_pick(draw, CMP_OPS), _exprs(draw, T, F, 1)[0])
                     for _ in range(_int(draw, 2, 3)))
        return Chain(first, rest)
    if c == 4 and T:
        dims = tuple(draw(_DIMS))
        return ShapeIs(_pick(draw, T), dims, _bool(draw))
    if c <= 5:
        return _guards(draw, T, F, 0) if depth > 0 else Cmp("==", *[
            _exprs(draw, T, F, 1)[0] for _ in range(2)])
    if c <= 7:
        return And(_guards(draw, T, F, depth - 1), _guards(draw, T, F, depth - 1))
    if c == 8:
        return Or(_guards(draw, T, F, depth - 1), _guards(draw, T, F, depth - 1))
    return Not(_guards(draw, T, F, depth - 1))


def _new_name(stmts) -> str:
    used = {s.name for s in stmts if isinstance(s, (DeclVar, DeclOp, Let))}
    return next(f"r{k}" for k in range(len(used) + 1) if f"r{k}" not in used)


def _fresh_locals(stmts, n):
    """``n`` new ``pm.var()`` locals declared first: (stmts, their Vars)."""
    args = []
    for _ in range(n):
        r = _new_name(stmts)
        stmts = [DeclVar(r)] + stmts
        args.append(Var(r))
    return stmts, tuple(args)


def _repair(draw, prog: Program) -> bool:
    """One round of repairs toward :func:`problems` == []; True if changed."""
    pb = binds_fixpoint(prog)
    changed = False
    for n, d in prog.patterns.items():
        for i, stmts in enumerate(d.alternates):
            stmts = list(stmts)
            v = AltView(stmts)
            # a constraint's variable must be bound before it
            T, _ = _term_binds(v.expand(v.ret), pb)
            out = []
            for s in stmts:
                if isinstance(s, Constrain):
                    if v.var(s.x) not in T:
                        changed = True
                        ok = sorted(T - _vars_of(v.expand(s.term)))
                        if not ok:
                            continue  # dropped
                        s = Constrain(_pick(draw, ok), s.term)
                    T |= _term_binds(v.expand(s.term), pb)[0]
                out.append(s)
            stmts = out
            v = AltView(stmts)
            T, F = alt_binds(v, pb)

            def need_term_var():
                nonlocal stmts, v, T, F
                if T:
                    return
                name = _new_name(stmts)
                stmts = [DeclVar(name)] + stmts[:-1] + [Return(Var(name))]
                v = AltView(stmts)
                T, F = alt_binds(v, pb)
            for name, kind, arity in v.locals:
                if name in (T if kind == TERM else F):
                    continue
                changed = True
                if kind == TERM and not T:
                    stmts = stmts[:-1] + [Return(Var(name))]
                else:
                    need_term_var()
                    z = _pick(draw, sorted(T))
                    if kind == TERM:
                        q = Var(name)
                    else:  # z <= F(r0, ...) with new locals: satisfiable
                        stmts, args = _fresh_locals(stmts, arity)
                        q = FunApp(name, args)
                    stmts = stmts[:-1] + [Constrain(z, q), stmts[-1]]
                v = AltView(stmts)
                T, F = alt_binds(v, pb)
            d.alternates[i] = tuple(stmts)
        # an operator parameter is used as an operator somewhere
        used = set()
        for stmts in d.alternates:
            v = AltView(stmts)
            used |= _fun_uses(v.ret, v)
            for _, q in v.constraints:
                used |= _fun_uses(q, v)
        for p in d.params:
            if p.kind == OP and p.name not in used:
                changed = True
                i = _int(draw, 0, len(d.alternates) - 1)
                stmts = list(d.alternates[i])
                v = AltView(stmts)
                T, _ = alt_binds(v, pb)
                if not T:
                    r = _new_name(stmts)
                    stmts = [DeclVar(r)] + stmts[:-1] + [Return(Var(r))]
                    T = {r}
                z = _pick(draw, sorted(T))
                stmts, args = _fresh_locals(stmts, p.arity)
                d.alternates[i] = tuple(stmts[:-1] + [Constrain(z, FunApp(p.name, args)),
                                                      stmts[-1]])
    return changed


def _add_asserts(draw, prog: Program) -> None:
    pb = binds_fixpoint(prog)
    for d in prog.patterns.values():
        for i, stmts in enumerate(d.alternates):
            v = AltView(stmts)
            T, F = alt_binds(v, pb)
            names_t = sorted(x for x in [p.name for p in d.params if p.kind == TERM]
                             + [s.name for s in stmts if isinstance(s, (DeclVar, Let))]
                             if v.var(x) in T)
            names_f = sorted(f for f in [p.name for p in d.params if p.kind == OP]
                             + [s.name for s in stmts if isinstance(s, (DeclOp, Let))]
                             if v.var(f) in F)
            stmts = list(stmts)
            for _ in range(_pick(draw, [0, 0, 0, 1, 1, 2])):
                g = _guards(draw, names_t, names_f, 2)
                a = Assert(g, _int(draw, 0, 4) == 0)
                # anywhere after the declarations and aliases, before the return
                first = max((j + 1 for j, s in enumerate(stmts)
                             if isinstance(s, (DeclVar, DeclOp, Let))), default=0)
                at = _int(draw, first, len(stmts) - 1)
                stmts.insert(at, a)
            d.alternates[i] = tuple(stmts)


def _templates(draw) -> List[PatternDef]:
    """The paper's recursive shapes, varied: C0 = Fig. 3's UnaryChain, C1 =
    the README's PwChain (local operator variable, op_class guard, match
    constraint through a recursive call), C2 = Fig. 4 (two operator
    parameters, locals, a base case ``return x``)."""
    out = []
    if _bool(draw):
        rec = (Return(FunApp("f", (Call("C0", ("x", "f")),))),)
        base = (Return(FunApp("f", (Var("x"),))),)
        out.append(PatternDef("C0", (Param("x"), Param("f", OP, 1)),
                              [rec, base] if _int(draw, 0, 3) else [base, rec]))
    if _bool(draw):
        cls = _pick(draw, CLASSES[:2])
        rec = (DeclOp("U", 1), DeclVar("y"),
               Assert(Cmp(_pick(draw, ["==", "==", "!="]), ClassOf("U"), ClassConst(cls))),
               Constrain("x", FunApp("U", (Call("C1", ("y", "a", "b")),))), Return(Var("x")))
        base = (Constrain("x", App(B2, (Var("a"), Var("b")))), Return(Var("x")))
        out.append(PatternDef("C1", (Param("x"), Param("a"), Param("b")),
                              [rec, base] if _int(draw, 0, 3) else [base, rec]))
    if _bool(draw) or not out:
        one = (DeclVar("y"), Constrain("x", FunApp("f", (Call("C2", ("y", "f", "g")),))),
               Return(Var("x")))
        two = (DeclVar("y"), DeclVar("z"),
               Constrain("x", FunApp("g", (Call("C2", ("y", "f", "g")),
                                           Call("C2", ("z", "f", "g"))))),
               Return(Var("x")))
        base = (Return(Var("x")),)
        alts = [one, two, base] if _int(draw, 0, 3) else list(draw(st.permutations(
            [one, two, base])))
        out.append(PatternDef("C2", (Param("x"), Param("f", OP, 1), Param("g", OP, 2)), alts))
    return out


@st.composite
def programs(draw, max_patterns=3, max_alternates=3, templates=True):
    """A well-formed program: 1..max_patterns random patterns (P0, P1, ...)
    and, a third of the time, some of the paper's recursive patterns
    (:func:`_templates`), which the random ones may call."""
    n = _int(draw, 1, max_patterns)
    sigs = {}
    extra = _templates(draw) if templates and _int(draw, 0, 2) == 0 else []
    for d in extra:
        sigs[d.name] = d.params
    for k in range(n):
        nparams = _pick(draw, [0, 1, 1, 2, 2, 2, 3, 3, 3, 3])
        params = []
        for j in range(nparams):
            if _int(draw, 0, 9) < 3:
                params.append(Param(OP_NAMES[sum(p.kind == OP for p in params)], OP,
                                    _pick(draw, [1, 1, 1, 2, 0])))
            else:
                params.append(Param(TERM_NAMES[sum(p.kind == TERM for p in params)], TERM))
        sigs[f"P{k}"] = tuple(params)
    pats = {d.name: d for d in extra}
    order = [(d.name, i) for d in extra for i in range(len(d.alternates))]
    for name in [k for k in sigs if k.startswith("P")]:
        d = PatternDef(name, sigs[name])
        n_alts = _int(draw, 1, max_alternates)
        base = _int(draw, 0, 4) > 0  # mostly, the last alternate is a base case
        for i in range(n_alts):
            gen = _AltGen(draw, sigs, name, calls=not (base and i == n_alts - 1))
            d.alternates.append(tuple(gen.alternate()))
            order.append((name, i))
        pats[name] = d
    # interleave the names' definitions, each name's alternates in order
    perm = draw(st.permutations(order))
    seen: Dict[str, int] = {}
    src_order = []
    for name, _ in perm:
        src_order.append((name, seen.get(name, 0)))
        seen[name] = seen.get(name, 0) + 1
    prog = Program(pats, src_order)
    for _ in range(8):
        if not _repair(draw, prog):
            break
    if problems(prog):
        reject()
    _add_asserts(draw, prog)
    assert not problems(prog), problems(prog)
    return prog


# ----------------------------------------------------------------- graphs


def _has_call(stmts) -> bool:
    def has(t):
        return isinstance(t, Call) or (isinstance(t, (App, FunApp)) and any(map(has, t.args)))
    return any(has(getattr(s, "term", None)) for s in stmts)


class _Inst:
    """Builds instances of a program's alternates in a graph."""

    def __init__(self, draw, prog: Program, g):
        self.draw, self.prog, self.g = draw, prog, g
        self.cells: Dict[int, object] = {}
        self.ops: Dict[int, object] = {}
        self.pending: Dict[int, list] = {}  # cell -> constraints not built yet
        self.next = 0

    def fresh(self):
        self.next += 1
        return self.next

    def leaf(self):
        g = self.g
        if len(g) and _bool(self.draw):
            return g.nodes[_int(self.draw, 0, len(g) - 1)]
        return g.input(f"n{len(g)}", shape=_pick(self.draw, SHAPES),
                       dtype=_pick(self.draw, DTYPES))

    def apply(self, op, kids):
        return self.g.apply(op, *kids, shape=_pick(self.draw, SHAPES),
                            dtype=_pick(self.draw, DTYPES))

    def term(self, t, env, depth):
        g = self.g
        if isinstance(t, Var):
            c = env[t.name]
            if c not in self.cells:
                pending = self.pending.get(c)
                if pending:  # x <= q not yet built: build q as x
                    q, qenv, qdepth = pending.pop(0)
                    node = self.term(q, qenv, qdepth)
                    self.cells.setdefault(c, node)
                else:
                    self.cells[c] = self.leaf()
            return self.cells[c]
        if isinstance(t, Const):
            return g.const(t.value)
        if isinstance(t, App):
            kids = [self.term(a, env, depth) for a in t.args]
            return self.apply(t.op, kids)
        if isinstance(t, FunApp):
            c = env[t.F]
            op = self.ops.get(c)
            if op is None or isinstance(op, tuple) or op.arity != len(t.args):
                op = self.ops[c] = _pick(self.draw, OPS_BY_ARITY[len(t.args)])
            kids = [self.term(a, env, depth) for a in t.args]
            return self.apply(op, kids)
        if isinstance(t, Call):  # unfolded; past the budget, base alternates only
            if depth <= -2:
                return self.leaf()
            d = self.prog.patterns[t.pattern]
            return self.pattern(t.pattern, {p.name: env[a] for p, a in zip(d.params, t.args)},
                                depth - 1)
        raise TypeError(t)

    def pattern(self, name, scope, depth):
        d = self.prog.patterns[name]
        alts = d.alternates
        if depth <= 0:  # prefer an alternate without calls
            alts = [a for a in alts if not _has_call(a)] or alts
        v = AltView(alts[_int(self.draw, 0, len(alts) - 1)])
        env = dict(scope)
        for lname, _, _ in v.locals:
            env[lname] = self.fresh()
        for a, x in v.var_alias.items():
            env[a] = env[v.var(x)]
        ret = v.expand(v.ret)
        cs = [(env[x], v.expand(q)) for x, q in v.constraints]
        for c, q in cs:
            self.pending.setdefault(c, []).append((q, env, depth))
        node = self.term(ret, env, depth)
        for c, q in cs:
            if c not in self.cells:
                self.term(Var("_"), {"_": c}, depth)
        return node


@st.composite
def shaped_graphs(draw, prog: Program):
    """A random graph plus 1-3 instances of the program's patterns."""
    g = draw(graphs(max_nodes=4))
    for _ in range(_int(draw, 1, 3)):
        inst = _Inst(draw, prog, g)
        name = _pick(draw, sorted(prog.patterns))
        d = prog.patterns[name]
        inst.pattern(name, {p.name: inst.fresh() for p in d.params}, _int(draw, 0, 3))
    return g


__all__ = ["programs", "shaped_graphs", "problems", "binds_fixpoint", "node_operator"]
