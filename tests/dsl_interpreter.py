"""A DSL-level interpreter of the PyPM pattern language, independent of the
lowering.

Both engines consume the core terms ``dsl/lowering.py`` produces, so a
lowering bug is invisible when the engines are only compared with each
other. This module gives the pattern language a second, direct meaning:

* :class:`Program` — the *surface* language as data: ``@pm.pattern``
  definitions (alternates by redefinition, in source order) whose bodies are
  statement lists — ``v = pm.var()``, ``F = pm.Op(n_in, n_out)``, aliases
  (``t = U1(x)``, ``y2 = y``), ``assert g`` / ``assert not g``, match
  constraints ``x <= p`` and ``return p`` — over terms (operator
  application, constants, parameters and locals, operator variables
  ``F(...)``, pattern calls ``P(x, F)``) and guards (``.rank``,
  ``.shape.rank``, ``.shape[i]``, ``.shape == (...)``, ``.dtype`` /
  ``.elType``, ``F.op_class``, ``+ - *`` and unary ``-``, the six
  comparisons, comparison chains, ``and`` / ``or`` / ``not``, dtype and
  operator-class constants).
* :func:`to_source` — the Python text of those definitions, which the tests
  write to a file and import, so the real frontend (AST rewrite, tracing,
  lowering, serialization) processes them.
* :class:`Interpreter` — the meaning of the same data, read directly against
  a :class:`pypm_verified.Graph`, following the paper's declarative rules
  (Fig. 16) searched depth first: a pattern matches a node if one of its
  alternates does, tried in definition order; an alternate matches if its
  returned term matches the node, then each match constraint ``x <= p``
  (in statement order) matches the node bound to ``x``, then every assert
  holds; every local must end up bound. Terms are matched left to right; a
  variable binds on its first occurrence and must be the same node on the
  later ones (likewise an operator variable and the node's operator); a
  call matches the callee with the callee's parameters *being* the
  caller's argument variables (binding them binds the caller's), its
  locals fresh at every unfolding. The first solution in this order is the
  answer. It never reads the lowering, ``Pattern.program``/``core``/
  ``alternates`` or any core term.

Guards are three-valued as the language documents (README, docs/internals/format.md):
an attribute a node does not know (no shape, no dtype, an index past the
rank, an operator without a class) makes a comparison *unknown*; ``and``,
``or`` and ``not`` are strict (unknown if an operand is unknown); ``+``/``-``
are known while both operands are below 2^61 in magnitude and ``*`` while
both are below 2^31; an assert holds only when *true*. Subexpressions
without attributes are ordinary Python values computed when the pattern is
traced (``1 < 2`` is ``True``, ``True or g`` is ``True``), as in any
embedded DSL.

The search is fuel-bounded: every step (a term against a node, a
constraint, a guard check) costs one unit and every pattern call nests one
level; running out of either raises :class:`InterpOutOfFuel`, a result of
its own (never a silent "no match"). As the library's entry points do,
:meth:`Interpreter.outcome` first asks a root-operator index,
computed here on the surface syntax: where a pattern's match cannot have
the node's operator at its root, the answer is "no match" even if the
search would never end (``P(x) = P(x) || U1(x)`` at a B2 node); elsewhere
it is the search's answer (``P(x) = P(x) || U1(x)`` at a U1 node: out of
fuel).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

import pypm_verified as pm

# ------------------------------------------------------------------ syntax
# Terms


@dataclass(frozen=True)
class Var:
    """A variable (parameter, local, or an alias of one) used as a term."""
    name: str


@dataclass(frozen=True)
class Const:
    """An integer constant leaf."""
    value: int


@dataclass(frozen=True)
class App:
    """``op(args...)`` for an ``@pm.op`` operator."""
    op: object
    args: Tuple["Term", ...]


@dataclass(frozen=True)
class FunApp:
    """``F(args...)`` for an operator variable ``F``."""
    F: str
    args: Tuple["Term", ...]


@dataclass(frozen=True)
class Call:
    """``P(v1, ..., vn)``: a pattern call with variable arguments (in the
    callee's parameter order). ``positional`` >= 0 writes the arguments from
    that one on as keywords, last first (``P(v1, z=v3, y=v2)``)."""
    pattern: str
    args: Tuple[str, ...]
    positional: int = -1


@dataclass(frozen=True)
class AliasRef:
    """A Python local holding a term (``t = U1(x)``; used as ``t``)."""
    name: str


Term = Union[Var, Const, App, FunApp, Call, AliasRef]

# Expressions


@dataclass(frozen=True)
class Num:
    value: int


@dataclass(frozen=True)
class DTypeConst:
    name: str  # "f32", "i8", ...


@dataclass(frozen=True)
class ClassConst:
    name: str  # pm.opclass(name)


@dataclass(frozen=True)
class Rank:
    x: str
    via_shape: bool = False  # x.shape.rank instead of x.rank


@dataclass(frozen=True)
class Dim:
    x: str
    i: int  # x.shape[i], negative from the end


@dataclass(frozen=True)
class DTypeOf:
    x: str
    el_type: bool = False  # x.elType instead of x.dtype


@dataclass(frozen=True)
class ClassOf:
    F: str  # F.op_class


@dataclass(frozen=True)
class Bin:
    op: str  # "+", "-", "*"
    a: "Expr"
    b: "Expr"


@dataclass(frozen=True)
class Neg:
    a: "Expr"


Expr = Union[Num, DTypeConst, ClassConst, Rank, Dim, DTypeOf, ClassOf, Bin, Neg]

# Guards

CMP_OPS = ("==", "!=", "<", "<=", ">", ">=")


@dataclass(frozen=True)
class Cmp:
    op: str
    a: Expr
    b: Expr


@dataclass(frozen=True)
class Chain:
    """``e0 op1 e1 op2 e2 ...`` (Python comparison chain)."""
    first: Expr
    rest: Tuple[Tuple[str, Expr], ...]


@dataclass(frozen=True)
class ShapeIs:
    """``x.shape == (d0, d1, ...)`` (``None``: any size) or ``!=``."""
    x: str
    dims: Tuple[Optional[int], ...]
    negated: bool = False


@dataclass(frozen=True)
class And:
    a: "Guard"
    b: "Guard"


@dataclass(frozen=True)
class Or:
    a: "Guard"
    b: "Guard"


@dataclass(frozen=True)
class Not:
    a: "Guard"


Guard = Union[Cmp, Chain, ShapeIs, And, Or, Not]

# Statements


@dataclass(frozen=True)
class DeclVar:
    """``name = pm.var()``"""
    name: str


@dataclass(frozen=True)
class DeclOp:
    """``name = pm.Op(n_in, n_out)``"""
    name: str
    n_in: int
    n_out: int = 1


@dataclass(frozen=True)
class Let:
    """``name = term``: an alias of a variable (term ``Var``) or of a term."""
    name: str
    term: Term


@dataclass(frozen=True)
class Assert:
    """``assert g`` (``assert not g`` when negated)."""
    guard: Guard
    negated: bool = False


@dataclass(frozen=True)
class Constrain:
    """``x <= term``"""
    x: str
    term: Term


@dataclass(frozen=True)
class Return:
    term: Term


Stmt = Union[DeclVar, DeclOp, Let, Assert, Constrain, Return]

TERM, OP = "term", "op"


@dataclass(frozen=True)
class Param:
    name: str
    kind: str = TERM  # TERM or OP
    arity: int = 1  # for OP parameters: the number of arguments it is applied to


@dataclass
class PatternDef:
    name: str
    params: Tuple[Param, ...]
    alternates: List[Tuple[Stmt, ...]] = field(default_factory=list)

    def param(self, name: str) -> Param:
        return next(p for p in self.params if p.name == name)


@dataclass
class Program:
    """Pattern definitions; ``order`` lists ``(pattern name, alternate
    index)`` in source order (alternates of different patterns may
    interleave; each name's alternates keep their order)."""
    patterns: Dict[str, PatternDef]
    order: List[Tuple[str, int]]


# ------------------------------------------------------------- alternates


class AltView:
    """One alternate read as the language defines it: the returned term,
    the constraints in statement order, the asserts, the locals, the
    aliases (names of variables, and term aliases)."""

    def __init__(self, stmts: Sequence[Stmt]):
        self.locals: List[Tuple[str, str, int]] = []  # (name, kind, arity)
        self.var_alias: Dict[str, str] = {}  # alias -> the variable it names
        self.term_alias: Dict[str, Term] = {}
        self.constraints: List[Tuple[str, Term]] = []
        self.asserts: List[Tuple[Guard, bool]] = []
        self.ret: Optional[Term] = None
        for s in stmts:
            if isinstance(s, DeclVar):
                self.locals.append((s.name, TERM, 0))
            elif isinstance(s, DeclOp):
                self.locals.append((s.name, OP, s.n_in))
            elif isinstance(s, Let):
                if isinstance(s.term, Var):
                    self.var_alias[s.name] = self.var(s.term.name)
                else:
                    self.term_alias[s.name] = s.term
            elif isinstance(s, Assert):
                self.asserts.append((s.guard, s.negated))
            elif isinstance(s, Constrain):
                self.constraints.append((self.var(s.x), s.term))
            elif isinstance(s, Return):
                self.ret = s.term
                break
        assert self.ret is not None, "an alternate must return"

    def var(self, name: str) -> str:
        """The variable a name denotes (following aliases)."""
        while name in self.var_alias:
            name = self.var_alias[name]
        return name

    def expand(self, t: Term) -> Term:
        """``t`` with aliases replaced by what they denote."""
        if isinstance(t, AliasRef):
            return self.expand(self.term_alias[t.name])
        if isinstance(t, Var):
            return Var(self.var(t.name))
        if isinstance(t, App):
            return App(t.op, tuple(self.expand(a) for a in t.args))
        if isinstance(t, FunApp):
            return FunApp(self.var(t.F), tuple(self.expand(a) for a in t.args))
        if isinstance(t, Call):
            return Call(t.pattern, tuple(self.var(a) for a in t.args))
        return t


# ---------------------------------------------------------------- source

_INDENT = "    "


def _expr_src(e: Expr) -> str:
    if isinstance(e, Num):
        return repr(e.value) if e.value >= 0 else f"({e.value})"
    if isinstance(e, DTypeConst):
        return f"pm.{e.name}"
    if isinstance(e, ClassConst):
        return f"pm.opclass({e.name!r})"
    if isinstance(e, Rank):
        return f"{e.x}.shape.rank" if e.via_shape else f"{e.x}.rank"
    if isinstance(e, Dim):
        return f"{e.x}.shape[{e.i}]"
    if isinstance(e, DTypeOf):
        return f"{e.x}.elType" if e.el_type else f"{e.x}.dtype"
    if isinstance(e, ClassOf):
        return f"{e.F}.op_class"
    if isinstance(e, Bin):
        return f"({_expr_src(e.a)} {e.op} {_expr_src(e.b)})"
    if isinstance(e, Neg):
        return f"(-{_expr_src(e.a)})"
    raise TypeError(e)


def _guard_src(g: Guard) -> str:
    if isinstance(g, Cmp):
        return f"({_expr_src(g.a)} {g.op} {_expr_src(g.b)})"
    if isinstance(g, Chain):
        parts = [_expr_src(g.first)] + [f"{op} {_expr_src(e)}" for op, e in g.rest]
        return f"({' '.join(parts)})"
    if isinstance(g, ShapeIs):
        dims = ", ".join("None" if d is None else str(d) for d in g.dims)
        dims = f"({dims},)" if len(g.dims) == 1 else f"({dims})"
        return f"({g.x}.shape {'!=' if g.negated else '=='} {dims})"
    if isinstance(g, And):
        return f"({_guard_src(g.a)} and {_guard_src(g.b)})"
    if isinstance(g, Or):
        return f"({_guard_src(g.a)} or {_guard_src(g.b)})"
    if isinstance(g, Not):
        return f"(not {_guard_src(g.a)})"
    raise TypeError(g)


def _term_src(t: Term, prog: Optional["Program"] = None) -> str:
    if isinstance(t, (Var, AliasRef)):
        return t.name
    if isinstance(t, Const):
        return repr(t.value)
    if isinstance(t, App):
        return f"{t.op.name}({', '.join(_term_src(a, prog) for a in t.args)})"
    if isinstance(t, FunApp):
        return f"{t.F}({', '.join(_term_src(a, prog) for a in t.args)})"
    if isinstance(t, Call):
        if t.positional < 0 or prog is None:
            return f"{t.pattern}({', '.join(t.args)})"
        params = [p.name for p in prog.patterns[t.pattern].params]
        k = t.positional
        kw = [f"{p}={a}" for p, a in zip(params[k:], t.args[k:])]
        return f"{t.pattern}({', '.join(list(t.args[:k]) + kw[::-1])})"
    raise TypeError(t)


def _stmt_src(s: Stmt, prog: Optional["Program"] = None) -> str:
    if isinstance(s, DeclVar):
        return f"{s.name} = pm.var()"
    if isinstance(s, DeclOp):
        return f"{s.name} = pm.Op({s.n_in}, {s.n_out})" if s.n_out != 1 \
            else f"{s.name} = pm.Op({s.n_in})"
    if isinstance(s, Let):
        return f"{s.name} = {_term_src(s.term, prog)}"
    if isinstance(s, Assert):
        return f"assert {'not ' if s.negated else ''}{_guard_src(s.guard)}"
    if isinstance(s, Constrain):
        return f"{s.x} <= {_term_src(s.term, prog)}"
    if isinstance(s, Return):
        return f"return {_term_src(s.term, prog)}"
    raise TypeError(s)


def to_source(prog: Program, ops_module: str = "strategies") -> str:
    """The Python text of ``prog``'s ``@pm.pattern`` definitions (operators
    imported by name from ``ops_module``)."""
    names = sorted({t.op.name for t in _all_apps(prog)})
    lines = ["import pypm_verified as pm"]
    if names:
        lines.append(f"from {ops_module} import {', '.join(names)}")
    for pname, i in prog.order:
        d = prog.patterns[pname]
        lines += ["", "", "@pm.pattern", f"def {pname}({', '.join(p.name for p in d.params)}):"]
        lines += [_INDENT + _stmt_src(s, prog) for s in d.alternates[i]]
    return "\n".join(lines) + "\n"


def _subterms(t: Term) -> Iterator[Term]:
    yield t
    if isinstance(t, (App, FunApp)):
        for a in t.args:
            yield from _subterms(a)


def _all_apps(prog: Program) -> Iterator[App]:
    for d in prog.patterns.values():
        for stmts in d.alternates:
            for s in stmts:
                t = getattr(s, "term", None)
                if t is not None:
                    for u in _subterms(t):
                        if isinstance(u, App):
                            yield u


# ------------------------------------------------------------ interpreter


# the search nests Python generators about 40 deep per call level
if sys.getrecursionlimit() < 10_000:
    sys.setrecursionlimit(10_000)


class InterpOutOfFuel(Exception):
    """The interpreter's search ran out of steps or of call depth."""


OUT_OF_FUEL = "out of fuel"

ADD_BOUND = 1 << 61  # + and - are known while |a|, |b| < 2^61 (docs/internals/format.md)
MUL_BOUND = 1 << 31  # * while |a|, |b| < 2^31

_PY_CMP = {
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
}


def node_operator(node):
    """What an operator variable binds to at ``node``: the ``@pm.op`` of an
    application, ``("input", name)`` of an input, ``("num", v)`` of a
    constant (the graph's leaves are nullary operators, as in the paper's
    terms; ``Match.functions`` reports them the same way)."""
    if node.kind == "op":
        return node.op
    if node.kind == "input":
        return ("input", node.name)
    return ("num", node.value)


def _operator_class(op) -> Optional[int]:
    if isinstance(op, tuple):  # a leaf: its class is "input" or "constant" (Graph.sym_attr)
        return pm.opclass("input" if op[0] == "input" else "constant").code
    cls = getattr(op, "op_class", None)
    return None if cls is None else cls.code


def _node_attr(node, which: str, i: int = 0) -> Optional[int]:
    if which == "rank":
        return None if node.shape is None else len(node.shape)
    if which == "dtype":
        return None if node.dtype is None else node.dtype.code
    if node.shape is None:  # dim
        return None
    n = len(node.shape)
    j = i if i >= 0 else n + i
    return node.shape[j] if 0 <= j < n else None


class _Sym:
    """A guard expression that reads attributes: ``f(env, state)`` is its
    value (an int) or None when unknown."""

    __slots__ = ("f",)

    def __init__(self, f):
        self.f = f


def _const_value(e: Expr):
    if isinstance(e, Num):
        return e.value
    if isinstance(e, DTypeConst):
        return getattr(pm, e.name).code
    if isinstance(e, ClassConst):
        return pm.opclass(e.name).code
    raise TypeError(e)


class Interpreter:
    """Runs a :class:`Program` against graphs.

    ``match(pattern, node)`` is the first solution's ``(bindings,
    functions)`` (parameter name -> node / operator, only the parameters the
    match bound), or None; :class:`InterpOutOfFuel` when ``fuel`` steps or
    ``max_depth`` nested calls do not decide it.
    """

    def __init__(self, prog: Program, fuel: int = 20_000, max_depth: int = 40):
        self.prog = prog
        self.fuel = fuel
        self.max_depth = max_depth
        self.views = {name: [AltView(a) for a in d.alternates]
                      for name, d in prog.patterns.items()}
        self._guards: Dict[Tuple[str, int], list] = {}
        self._expanded: Dict[Tuple[str, int], tuple] = {}
        for name, views in self.views.items():
            for i, v in enumerate(views):
                self._guards[(name, i)] = [self._assert_fn(g, neg) for g, neg in v.asserts]
                self._expanded[(name, i)] = (v.expand(v.ret),
                                             [(x, v.expand(q)) for x, q in v.constraints])
        self.steps = 0
        self._left = 0
        self._next_cell = 0
        self._roots: Optional[Dict[str, Optional[frozenset]]] = None

    # -------------------------------------------------------------- guards

    def _expr(self, e: Expr):
        """An int (no attribute read: Python computed it) or a _Sym."""
        if isinstance(e, (Num, DTypeConst, ClassConst)):
            return _const_value(e)
        if isinstance(e, (Rank, Dim, DTypeOf)):
            which = "rank" if isinstance(e, Rank) else "dtype" if isinstance(e, DTypeOf) else "dim"
            i = e.i if isinstance(e, Dim) else 0
            x = e.x

            def read(env, st, x=x, which=which, i=i):
                node = st[0].get(env[x])
                return None if node is None else _node_attr(node, which, i)
            return _Sym(read)
        if isinstance(e, ClassOf):
            F = e.F

            def read_class(env, st, F=F):
                op = st[1].get(env[F], None)
                return None if op is None else _operator_class(op)
            return _Sym(read_class)
        if isinstance(e, Neg):
            a = self._expr(e.a)
            if not isinstance(a, _Sym):
                return -a
            return self._arith("-", 0, a)
        if isinstance(e, Bin):
            a, b = self._expr(e.a), self._expr(e.b)
            if not isinstance(a, _Sym) and not isinstance(b, _Sym):
                return {"+": a + b, "-": a - b, "*": a * b}[e.op]
            return self._arith(e.op, a, b)
        raise TypeError(e)

    @staticmethod
    def _arith(op, a, b):
        fa = a.f if isinstance(a, _Sym) else (lambda env, st, v=a: v)
        fb = b.f if isinstance(b, _Sym) else (lambda env, st, v=b: v)
        bound = MUL_BOUND if op == "*" else ADD_BOUND

        def f(env, st):
            x = fa(env, st)
            if x is None:
                return None
            y = fb(env, st)
            if y is None or not (abs(x) < bound and abs(y) < bound):
                return None
            return x * y if op == "*" else x + y if op == "+" else x - y
        return _Sym(f)

    def _guard(self, g: Guard):
        """A Python bool (the guard did not read attributes: Python decided
        it when the pattern was traced) or a function ``(env, state) ->
        True / False / None``."""
        if isinstance(g, Cmp):
            a, b = self._expr(g.a), self._expr(g.b)
            if not isinstance(a, _Sym) and not isinstance(b, _Sym):
                return _PY_CMP[g.op](a, b)
            fa = a.f if isinstance(a, _Sym) else (lambda env, st, v=a: v)
            fb = b.f if isinstance(b, _Sym) else (lambda env, st, v=b: v)
            cmp = _PY_CMP[g.op]

            def f(env, st):
                x, y = fa(env, st), fb(env, st)
                return None if x is None or y is None else cmp(x, y)
            return f
        if isinstance(g, Chain):  # (e0 op1 e1) and (e1 op2 e2) and ...
            es = [g.first] + [e for _, e in g.rest]
            acc = None
            for (op, _), a, b in zip(g.rest, es, es[1:]):
                c = Cmp(op, a, b)
                acc = c if acc is None else And(acc, c)
            return self._guard(acc)
        if isinstance(g, ShapeIs):
            parts = [Cmp("==", Rank(g.x), Num(len(g.dims)))]
            parts += [Cmp("==", Dim(g.x, i), Num(d)) for i, d in enumerate(g.dims)
                      if d is not None]
            acc = parts[0]
            for p in parts[1:]:
                acc = And(acc, p)
            return self._guard(Not(acc) if g.negated else acc)
        if isinstance(g, Not):
            a = self._guard(g.a)
            if isinstance(a, bool):
                return not a
            return lambda env, st: None if (v := a(env, st)) is None else not v
        if isinstance(g, (And, Or)):
            a, b = self._guard(g.a), self._guard(g.b)
            is_and = isinstance(g, And)
            # Python's and/or on a concrete operand, strict three-valued logic otherwise
            if isinstance(a, bool):
                return (b if a else False) if is_and else (True if a else b)
            if isinstance(b, bool):
                return (a if b else False) if is_and else (True if b else a)

            def f(env, st):
                x = a(env, st)
                if x is None:
                    return None
                y = b(env, st)
                if y is None:
                    return None
                return (x and y) if is_and else (x or y)
            return f
        raise TypeError(g)

    def _assert_fn(self, g: Guard, negated: bool):
        v = self._guard(Not(g) if negated else g)
        if isinstance(v, bool):
            return lambda env, st, v=v: v
        return v

    # -------------------------------------------------------------- search

    def _tick(self):
        self.steps += 1
        self._left -= 1
        if self._left < 0:
            raise InterpOutOfFuel(f"more than {self.fuel} steps")

    def _fresh(self) -> int:
        self._next_cell += 1
        return self._next_cell

    def _term(self, t: Term, node, env, st, depth) -> Iterator[tuple]:
        """Solutions (states) of term ``t`` (aliases expanded) at ``node``."""
        self._tick()
        if isinstance(t, Var):
            cell = env[t.name]
            bound = st[0].get(cell)
            if bound is None:
                yield ({**st[0], cell: node}, st[1])
            elif bound == node:
                yield st
        elif isinstance(t, Const):
            if node.kind == "const" and type(node.value) is int and node.value == t.value:
                yield st
        elif isinstance(t, App):
            if node.kind == "op" and node.op is t.op and len(node.args) == len(t.args):
                yield from self._args(t.args, node.args, 0, env, st, depth)
        elif isinstance(t, FunApp):
            if len(node.args) != len(t.args):
                return
            cell = env[t.F]
            here = node_operator(node)
            bound = st[1].get(cell, _UNBOUND)
            if bound is _UNBOUND:
                st = (st[0], {**st[1], cell: here})
            elif bound != here:
                return
            yield from self._args(t.args, node.args, 0, env, st, depth)
        elif isinstance(t, Call):
            if depth >= self.max_depth:
                raise InterpOutOfFuel(f"more than {self.max_depth} nested calls")
            d = self.prog.patterns[t.pattern]
            scope = {p.name: env[a] for p, a in zip(d.params, t.args)}
            yield from self._pattern(t.pattern, node, scope, st, depth + 1)
        else:
            raise TypeError(t)

    def _args(self, ps, ns, i, env, st, depth):
        if i == len(ps):
            yield st
            return
        for s in self._term(ps[i], ns[i], env, st, depth):
            yield from self._args(ps, ns, i + 1, env, s, depth)

    def _pattern(self, name, node, scope, st, depth):
        for i, view in enumerate(self.views[name]):
            yield from self._alternate(name, i, view, node, scope, st, depth)

    def _alternate(self, name, i, view: AltView, node, scope, st, depth):
        env = dict(scope)
        local_cells = []
        for lname, kind, _ in view.locals:  # fresh at every unfolding
            env[lname] = self._fresh()
            local_cells.append((env[lname], kind))
        for alias, target in view.var_alias.items():
            env[alias] = env[view.var(target)]
        ret, cs = self._expanded[(name, i)]
        constraints = [(env[x], q) for x, q in cs]
        guards = self._guards[(name, i)]
        for s in self._term(ret, node, env, st, depth):
            for s2 in self._constraints(constraints, 0, env, s, depth):
                self._tick()
                if all(gf(env, s2) is True for gf in guards) and all(
                        c in (s2[0] if kind == TERM else s2[1]) for c, kind in local_cells):
                    yield s2

    def _constraints(self, cs, i, env, st, depth):
        if i == len(cs):
            yield st
            return
        cell, q = cs[i]
        self._tick()
        target = st[0].get(cell)
        if target is None:  # constraining a variable nothing bound: no match
            return
        for s in self._term(q, target, env, st, depth):
            yield from self._constraints(cs, i + 1, env, s, depth)

    # ----------------------------------------------------------- interface

    def solutions(self, pattern: str, node, bindings=None, functions=None
                  ) -> Iterator[Tuple[dict, dict]]:
        """Every solution ``(bindings, functions)`` of ``pattern`` at
        ``node``, in order, starting from the given parameter values. The
        fuel is reset at each call; raises :class:`InterpOutOfFuel`."""
        self._left = self.fuel
        self.steps = 0
        d = self.prog.patterns[pattern]
        scope = {p.name: self._fresh() for p in d.params}
        theta, phi = {}, {}
        for p in d.params:
            if p.kind == TERM and bindings and p.name in bindings:
                theta[scope[p.name]] = bindings[p.name]
            if p.kind == OP and functions and p.name in functions:
                phi[scope[p.name]] = functions[p.name]
        for s in self._pattern(pattern, node, scope, (theta, phi), 0):
            yield ({p.name: s[0][scope[p.name]] for p in d.params
                    if p.kind == TERM and scope[p.name] in s[0]},
                   {p.name: s[1][scope[p.name]] for p in d.params
                    if p.kind == OP and scope[p.name] in s[1]})

    def match(self, pattern: str, node):
        """``(bindings, functions)`` of the first solution, or None."""
        for sol in self.solutions(pattern, node):
            return sol
        return None

    def outcome(self, pattern: str, node):
        """The answer of the language's entry point: ``("match", bindings,
        functions)``, ``("no match",)`` or ``(OUT_OF_FUEL,)``. Where the
        root-operator index (:meth:`root_operators`) excludes ``node``'s
        operator the answer is "no match" without searching (no derivation
        exists there, even where the search would never end); the search is
        still run as a check of that claim, and a match it finds is returned
        as ``("index excluded a match", bindings, functions)``."""
        admitted = self.admits(pattern, node)
        try:
            sol = self.match(pattern, node)
        except InterpOutOfFuel:
            return (OUT_OF_FUEL,) if admitted else ("no match",)
        if sol is None:
            return ("no match",)
        return ("match",) + sol if admitted else ("index excluded a match",) + sol

    # ------------------------------------------------- root-operator index

    def root_operators(self) -> Dict[str, Optional[frozenset]]:
        """For each pattern, the operators (:func:`node_operator` values) a
        node it matches can have, or None for any: the returned term's head
        (an operator application or a constant; a variable or an operator
        variable: any), a call's set, the union over the alternates; the
        least fixpoint over the calls, since derivations are finite (a cycle
        of calls at the root adds nothing: ``P(x) = P(x) || U1(x)`` can only
        match U1 nodes, ``P(x) = P(x)`` none). Constraints and asserts do not
        change the root."""
        if self._roots is not None:
            return self._roots
        R: Dict[str, Optional[frozenset]] = {n: frozenset() for n in self.prog.patterns}

        def head(t):
            if isinstance(t, App):
                return frozenset((t.op,))
            if isinstance(t, Const):
                return frozenset((("num", t.value),))
            if isinstance(t, Call):
                return R[t.pattern]
            return None  # Var, FunApp
        while True:
            new = {}
            for n, views in self.views.items():
                acc: Optional[frozenset] = frozenset()
                for v in views:
                    h = head(v.expand(v.ret))
                    acc = None if acc is None or h is None else acc | h
                new[n] = acc
            if new == R:
                self._roots = R
                return R
            R = new

    def admits(self, pattern: str, node) -> bool:
        """Whether the index lets ``pattern`` match at ``node``."""
        s = self.root_operators()[pattern]
        return s is None or node_operator(node) in s

    def check_binding(self, pattern: str, node, bindings: dict, functions: dict) -> bool:
        """Whether ``bindings``/``functions`` (parameter name -> node /
        operator) is a match of ``pattern`` at ``node``: some solution
        starting from them binds exactly these parameters. Raises
        :class:`InterpOutOfFuel` if the search cannot decide within the fuel."""
        for b, f in self.solutions(pattern, node, bindings, functions):
            if b == bindings and f == functions:
                return True
        return False


_UNBOUND = object()


def term_params(prog: Program, pattern: str) -> Tuple[str, ...]:
    return tuple(p.name for p in prog.patterns[pattern].params if p.kind == TERM)


def op_params(prog: Program, pattern: str) -> Tuple[str, ...]:
    return tuple(p.name for p in prog.patterns[pattern].params if p.kind == OP)


def load(source: str, directory, module_name: str):
    """Write ``source`` to ``directory/module_name.py`` and import it (the
    real frontend: ``@pm.pattern`` reads the file's source)."""
    import importlib.util
    import pathlib
    path = pathlib.Path(directory) / f"{module_name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(module_name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = mod
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.modules.pop(module_name, None)
    return mod


