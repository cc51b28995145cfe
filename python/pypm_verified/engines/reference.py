"""The reference matcher: the declarative rules of the paper (Fig. 16) read as
a generator of solutions, in the order the rules are read left to right.

``solutions(program, node)`` yields every solution (a term substitution and
an operator substitution of the root definition's parameters) under which
the root matches ``node``:

* P-VAR binds an unbound variable or accepts the node it is bound to;
  P-FUN / P-FUN-VAR thread the substitution through the children from left
  to right (an unbound operator variable is bound to the node's operator);
* P-ALT yields all solutions of the left alternate, then of the right one;
* P-GUARD keeps the solutions whose guard is *true* (three-valued, strict,
  bounded arithmetic);
* P-EXISTS matches the body with ``x`` a new, unbound variable (shadowing an
  outer ``x``) and keeps the solutions that bind it (so the first solution is
  the algorithm's, which checks the name afterwards);
* P-MATCHCONSTR yields, for each solution of ``p``, the solutions of ``p'``
  against the node bound to ``x``;
* P-MU matches the callee's body in a new scope whose parameter ``i`` *is*
  the caller's ``i``-th argument variable: bound if it is bound, and binding
  it when the body binds the parameter.

Variables are kept in *cells*: a scope maps a pattern's variables to cells,
the substitution maps cells to nodes; ∃ allocates a new cell, a call maps
the callee's parameters to the argument variables' cells. The first
solution is the answer. This order is the priority order that
``theories/Priority.v`` specifies (``psols`` / ``solutions_k``), and
``Priority.first_solution_k`` proves that the verified engine's answer is
its first element; ``tests/test_priority.py`` checks both engines, and this
enumeration, against an independent transcription of ``solutions_k``. Every rule application, guard check, name check and
constraint lookup costs one unit of fuel, and reaching the answer one more
(the machine's steps, ``Interpreter.run``); :class:`OutOfFuel` is raised when
the fuel is spent. The generators are driven by an explicit stack (a
trampoline), so deep recursion never reaches Python's recursion limit. The
substitution is one store per search, changed in place, with a trail of
bindings undone on backtracking (so a match at depth d takes O(d) memory,
not a copy of the substitution per binding); the live choice points are
counted, and a search whose choice points pass the memory budget
(``PYPM_MEMORY_MB``, default 192, as for the verified engine) stops with
:class:`MemoryBudget` (an :class:`OutOfFuel`: undecided). This
is deliberately a different program from the verified engine (a state
machine with a continuation and a backtracking stack); the tests compare
the two.
"""
from __future__ import annotations

import os
from typing import Dict, Iterator, Mapping, Optional, Tuple, Union

from .. import core
from ..errors import MemoryBudget, OutOfFuel

DEFAULT_FUEL = 1 << 26

Subst = Dict[int, object]  # variable id -> graph Node
FSubst = Dict[int, int]  # operator variable id -> symbol
Solution = Tuple[Subst, FSubst]


class Fuel:
    """A step budget; ``tick()`` raises :class:`OutOfFuel` when it is spent."""

    __slots__ = ("left",)

    def __init__(self, steps: int = DEFAULT_FUEL):
        self.left = steps

    def tick(self):
        self.left -= 1
        if self.left < 0:
            raise OutOfFuel("the reference matcher ran out of fuel")


# -------------------------------------------------------------------- guards


def _bounded(a: int, b: int, bound: int) -> bool:
    return abs(a) < bound and abs(b) < bound


def _value(e, st, env, graph) -> Optional[int]:
    """Value of an expression, or None (unknown: an unbound variable, a
    missing attribute, or arithmetic outside the bounds)."""
    if isinstance(e, core.EConst):
        return e.z
    if isinstance(e, core.EAttr):
        cell = env[0].get(e.x)
        node = None if cell is None else st[0].get(cell)
        return None if node is None else node.graph.attr_map(node.id).get(e.attr)
    if isinstance(e, core.EFAttr):
        cell = env[1].get(e.F)
        sym = None if cell is None else st[1].get(cell)
        return None if sym is None or graph is None else graph.sym_attr(sym, e.attr)
    a = _value(e.e1, st, env, graph)
    if a is None:
        return None
    b = _value(e.e2, st, env, graph)
    if b is None:
        return None
    if isinstance(e, core.EMul):
        return a * b if _bounded(a, b, core.MUL_BOUND) else None
    if not _bounded(a, b, core.ADD_BOUND):
        return None
    return a + b if isinstance(e, core.EAdd) else a - b


def _truth(g, st, env, graph) -> Optional[bool]:
    """Three-valued guard semantics: True, False or None (unknown)."""
    if isinstance(g, core.GTrue):
        return True
    if isinstance(g, (core.GEq, core.GLt)):
        a, b = _value(g.e1, st, env, graph), _value(g.e2, st, env, graph)
        if a is None or b is None:
            return None
        return a == b if isinstance(g, core.GEq) else a < b
    if isinstance(g, core.GNot):
        v = _truth(g.g, st, env, graph)
        return None if v is None else not v
    a, b = _truth(g.g1, st, env, graph), _truth(g.g2, st, env, graph)
    if a is None or b is None:
        return None
    return (a and b) if isinstance(g, core.GAnd) else (a or b)


def guard_value(g, theta: Subst, phi: Optional[FSubst] = None, graph=None) -> Optional[bool]:
    """⟦g⟧ under ``theta`` (variable -> Node) and ``phi`` (operator variable ->
    symbol, read through ``graph``'s symbol attributes): True, False or None."""
    phi = phi or {}
    env = ({x: x for x in theta}, {F: F for F in phi})
    return _truth(g, (theta, phi), env, graph)


# ------------------------------------------------------------------- solving
#
# The state (cells -> node, cells -> symbol) is one pair of dicts per search,
# changed in place: a binding is recorded on a trail, and backtracking undoes
# the trail to the length it had at the choice point (chronological
# backtracking, as in a Prolog machine). A state is thus the trail's length,
# not a copy of the substitution, and a search at depth d keeps O(d) memory.
#
# A solver is a generator yielding requests to the driver:
#   (_SOL, None)      a solution: the current state
#   (_PULL, stream)   "give me the next solution of stream"; the driver sends
#                     back the state (a solution) or None (exhausted)
#   (_TAIL, gen)      "my remaining solutions are gen's" (a tail call)
#
# The driver keeps the store in step: it undoes the trail to a stream's mark
# (its length at the stream's creation or at its last solution) before
# resuming the stream, and to the stream's start when it is exhausted. A
# solver therefore sees, whenever it runs, the state it was started in or
# the last solution it was sent; it reads the state only through ``ctx``.

_SOL, _PULL, _TAIL = 0, 1, 2

# Bytes a live choice point (a suspended solver: a _Stream, its generator's
# frame and its share of the trail) takes, as measured on the paper's
# recursive patterns, rounded up; the memory budget is counted in them.
CHOICE_POINT_BYTES = 1024
DEFAULT_MEMORY_MB = 192  # as the verified engine (PYPM_MEMORY_MB)
_memory_mb: Optional[int] = None


def memory_mb() -> int:
    """The memory budget of one search in MB: ``PYPM_MEMORY_MB`` (read once,
    as the verified engine does: an integer of at least 16, otherwise the
    default 192)."""
    global _memory_mb
    if _memory_mb is None:
        try:
            v = int(os.environ.get("PYPM_MEMORY_MB", "").strip())
        except ValueError:
            v = 0
        _memory_mb = v if v >= 16 else DEFAULT_MEMORY_MB
    return _memory_mb


class _Stream:
    """A solver whose generator may be replaced by a tail call; ``start``
    and ``mark`` are trail lengths (at creation; at the last solution)."""

    __slots__ = ("gen", "start", "mark")

    def __init__(self, gen, start: int):
        self.gen = gen
        self.start = start
        self.mark = start


class _Ctx:
    """One search: the table, the graph, the fuel, the store (``st``: cells
    -> node, cells -> symbol), the trail and the count of live choice
    points, bounded by the memory budget."""

    __slots__ = ("defs", "graph", "fuel", "next_cell", "st", "trail", "live", "max_live")

    def __init__(self, defs, graph, fuel: Fuel, next_cell: int,
                 theta: Optional[Subst] = None, phi: Optional[FSubst] = None):
        self.defs = defs
        self.graph = graph
        self.fuel = fuel
        self.next_cell = next_cell
        self.st = (dict(theta or {}), dict(phi or {}))
        self.trail = []
        self.live = 0
        self.max_live = (memory_mb() << 20) // CHOICE_POINT_BYTES

    def fresh(self) -> int:
        c = self.next_cell
        self.next_cell += 1
        return c

    def bind(self, which: int, cell: int, value) -> None:
        """Bind ``cell`` (unbound) in the term (0) or operator (1) map."""
        self.st[which][cell] = value
        self.trail.append((which, cell))

    def undo(self, mark: int) -> None:
        """Undo the bindings made since the trail had length ``mark``."""
        trail, st = self.trail, self.st
        while len(trail) > mark:
            which, cell = trail.pop()
            del st[which][cell]

    def stream(self, gen) -> _Stream:
        """A choice point running ``gen`` from the current state; raises
        :class:`MemoryBudget` when the live ones pass the budget."""
        self.live += 1
        if self.live > self.max_live:
            raise MemoryBudget(
                f"the reference matcher's search exceeded the memory budget "
                f"({memory_mb()} MB, about {self.max_live} choice points; PYPM_MEMORY_MB "
                f"raises it): a pattern whose backtracking grows with every step, such as "
                f"left recursion P(x) = P(x) || ..., or give a smaller fuel")
        return _Stream(gen, len(self.trail))


def _solve(ctx: _Ctx, p, t, env):
    """Solutions of ``p`` against node ``t`` in scope ``env`` from the
    current state."""
    ctx.fuel.tick()
    k = type(p)
    if k is core.PVar:
        cell = env[0].get(p.x)
        if cell is None:
            return
        bound = ctx.st[0].get(cell)
        if bound is None:
            ctx.bind(0, cell, t)
            yield _SOL, None
        elif bound == t:
            yield _SOL, None
    elif k is core.PApp:
        if t.label == p.f and len(t.args) == len(p.args):
            yield _TAIL, _each(ctx, p.args, t.args, 0, env)
    elif k is core.PAlt:
        first = ctx.stream(_solve(ctx, p.p1, t, env))
        while True:
            s = yield _PULL, first
            if s is None:
                break
            yield _SOL, None
        yield _TAIL, _solve(ctx, p.p2, t, env)
    elif k is core.PGuard:
        inner = ctx.stream(_solve(ctx, p.p, t, env))
        while True:
            s = yield _PULL, inner
            if s is None:
                return
            ctx.fuel.tick()
            if _truth(p.g, s, env, ctx.graph) is True:
                yield _SOL, None
    elif k is core.PExists or k is core.PExistsF:
        cell = ctx.fresh()
        if k is core.PExists:
            scope, which = ({**env[0], p.x: cell}, env[1]), 0
        else:
            scope, which = (env[0], {**env[1], p.F: cell}), 1
        inner = ctx.stream(_solve(ctx, p.p, t, scope))
        while True:
            s = yield _PULL, inner
            if s is None:
                return
            ctx.fuel.tick()
            if cell in s[which]:
                yield _SOL, None
    elif k is core.PConstr:
        inner = ctx.stream(_solve(ctx, p.p, t, env))
        while True:
            s = yield _PULL, inner
            if s is None:
                return
            ctx.fuel.tick()
            cell = env[0].get(p.x)
            target = None if cell is None else s[0].get(cell)
            if target is None:
                continue
            sub = ctx.stream(_solve(ctx, p.p2, target, env))
            while True:
                r = yield _PULL, sub
                if r is None:
                    break
                yield _SOL, None
    elif k is core.PFunVar:
        if len(t.args) != len(p.args):
            return
        cell = env[1].get(p.F)
        if cell is None:
            return
        bound = ctx.st[1].get(cell)
        if bound is None:
            ctx.bind(1, cell, t.label)
        elif bound != t.label:
            return
        yield _TAIL, _each(ctx, p.args, t.args, 0, env)
    elif k is core.PCall:
        d = ctx.defs[p.P] if 0 <= p.P < len(ctx.defs) else None
        if d is None or len(p.xs) != d.nparams or len(p.Fs) != d.nfparams:
            return
        tenv, fenv = env
        scope = ({i: tenv[x] for i, x in enumerate(p.xs) if x in tenv},
                 {i: fenv[F] for i, F in enumerate(p.Fs) if F in fenv})
        yield _TAIL, _solve(ctx, d.body, t, scope)
    else:
        raise TypeError(f"not a pattern: {p!r}")


def _each(ctx: _Ctx, ps, ts, i, env):
    """Solutions of matching ``ps[j]`` against ``ts[j]`` for ``j >= i``, left
    to right, threading the state."""
    if i == len(ps):
        yield _SOL, None
        return
    if i == len(ps) - 1:
        yield _TAIL, _solve(ctx, ps[i], ts[i], env)
        return
    head = ctx.stream(_solve(ctx, ps[i], ts[i], env))
    while True:
        s = yield _PULL, head
        if s is None:
            return
        rest = ctx.stream(_each(ctx, ps, ts, i + 1, env))
        while True:
            r = yield _PULL, rest
            if r is None:
                break
            yield _SOL, None


def _drive(ctx: _Ctx, gen) -> Iterator[Tuple[Subst, FSubst]]:
    """Run a solver on an explicit stack; yield its solutions. Each is the
    live state ``ctx.st``: read it before resuming the iterator."""
    stack = [ctx.stream(gen)]
    st = ctx.st
    send = None
    while stack:
        top = stack[-1]
        try:
            op, arg = top.gen.send(send)
        except StopIteration:
            stack.pop()
            ctx.live -= 1
            ctx.undo(top.start)
            send = None
            continue
        send = None
        if op is _SOL:
            if len(stack) == 1:
                yield st
            else:
                top.mark = len(ctx.trail)
                stack.pop()
                send = st
        elif op is _PULL:
            ctx.undo(arg.mark)
            stack.append(arg)
        else:  # _TAIL
            top.gen = arg


# ----------------------------------------------------------------- interface

ProgramLike = Union[core.Program, core.CorePattern]


def _run(program: ProgramLike, node, theta: Optional[Mapping[int, object]],
         phi: Optional[Mapping[int, int]], fuel: Fuel):
    prog = core.as_program(program)
    d = prog.defs[prog.root]
    n, m = d.nparams, d.nfparams
    env = ({i: i for i in range(n)}, {i: i for i in range(m)})
    ctx = _Ctx(prog.defs, node.graph, fuel, max(n, m),
               {x: v for x, v in (theta or {}).items() if x < n},
               {F: f for F, f in (phi or {}).items() if F < m})
    for s in _drive(ctx, _solve(ctx, d.body, node, env)):
        yield ({i: s[0][i] for i in range(n) if i in s[0]},
               {i: s[1][i] for i in range(m) if i in s[1]})


def solutions(program: ProgramLike, node, theta: Optional[Mapping[int, object]] = None,
              phi: Optional[Mapping[int, int]] = None,
              fuel: Optional[Fuel] = None) -> Iterator[Solution]:
    """Every ``(theta, phi)`` extending the given substitutions of the root's
    parameters under which the root of ``program`` (a :class:`core.Program`,
    or a core pattern without calls) matches ``node``, in left-to-right rule
    order. Raises :class:`OutOfFuel` when ``fuel`` (unlimited if None) is
    spent, :class:`MemoryBudget` when the search passes the memory budget."""
    return _run(program, node, theta, phi, fuel if fuel is not None else Fuel(float("inf")))


def first_solution(program: ProgramLike, node, fuel: Optional[int] = None) -> Optional[Solution]:
    """The first solution (the match) in the order of :func:`solutions` (the
    priority order of ``Priority.solutions_k``), or None; raises OutOfFuel
    when more than ``fuel`` steps are needed (default ``1 << 26``;
    ``fuel <= 0`` means the default), :class:`MemoryBudget` (a subclass)
    when the search passes the memory budget (:func:`memory_mb`).

    As the verified engine's entry point (``Entry.match_root``), the
    root-operator index answers first: a root that cannot have ``node``'s
    label (:func:`core.root_admits`, proved sound by
    ``RootIndex.root_index_sound``) gives None without spending fuel, even
    where the search would never end (``P(x) = P(x) ‖ Relu(x)`` at a
    MatMul). :func:`solutions` does not consult the index."""
    prog = core.as_program(program)
    if not core.root_admits(prog.defs, prog.root, node.label):
        return None
    budget = Fuel(fuel if fuel is not None and fuel > 0 else DEFAULT_FUEL)
    for sol in _run(prog, node, None, None, budget):
        budget.tick()  # ST-SUCCESS
        return sol
    return None
