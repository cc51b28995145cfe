"""The reference matcher: the declarative rules of the paper (Fig. 16) read as
a generator of solutions, in the order the rules are read left to right.
It is the one matcher written in Python: the reference engine, the
explanations (:mod:`.explain`: a *trace* of this search, as egg's
explanations are traces of its one matcher), the cover of a match
(:mod:`.cover`) and the reference engine of multi-root patterns
(:mod:`.multi`) all run it; only the declarative oracle
(:mod:`.declarative`) is another program, on purpose.

``solutions(program, node)`` yields every solution (a term substitution and
an operator substitution of the root definition's parameters) under which
the root matches ``node``:

* P-VAR binds an unbound variable or accepts the node it is bound to;
  P-FUN / P-FUN-VAR thread the substitution through the children from left
  to right (an unbound operator variable is bound to the node's operator);
* P-ALT yields all solutions of the left alternate, then of the right one;
* P-GUARD keeps the solutions whose guard is *true* (three-valued, strict,
  bounded arithmetic: :mod:`.truth`);
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

Tracing. A search given a :class:`Tracer` reports to it every step (a
sub-pattern tried at a node), every step that succeeded and every rule
that failed, with the *position* of the sub-pattern (which the tracer
makes: the alternate of a definition, the argument of an operator, the
target of a match constraint); the tracer may keep its own state in the
search's store (:meth:`Search.bind`: undone on backtracking like a
binding) and stop the search by raising. A traced search enters a
definition alternate by alternate (:meth:`Tracer.alternates`: a split of
its body whose ``‖`` is the body, so the same solutions in the same order;
the spine's ``‖`` are then not steps, of the trace or of the fuel);
otherwise it is this search, rule for rule. Without a tracer the cost is
a test of ``None`` where a hook would be called (measured: within the
noise). Public interface: :func:`solutions`,
:func:`first_solution`, :func:`joint_solutions` (several patterns at
several nodes under one substitution: multi-root patterns),
:func:`guard_value`, :func:`scoped_value` / :func:`scoped_truth` (guards
under a search's scope and store), :class:`Fuel`, :class:`Search`,
:class:`Tracer`.
"""
from __future__ import annotations

import os
from typing import Dict, Iterator, Mapping, Optional, Sequence, Tuple, Union

from .. import core
from ..errors import MemoryBudget, OutOfFuel
from . import truth

DEFAULT_FUEL = 1 << 26

Subst = Dict[int, object]  # variable id -> graph Node
FSubst = Dict[int, int]  # operator variable id -> symbol
Solution = Tuple[Subst, FSubst]


class Fuel:
    """Fuel: the bound on the interpreter's steps; ``tick()`` raises
    :class:`OutOfFuel` when it is spent."""

    __slots__ = ("left",)

    def __init__(self, steps: int = DEFAULT_FUEL):
        self.left = steps

    def tick(self):
        self.left -= 1
        if self.left < 0:
            raise OutOfFuel("the reference matcher ran out of fuel")


# -------------------------------------------------------------------- guards


class _Scoped(truth.Evaluator):
    """Guards read through a scope ``env`` (variables -> cells) and a store
    ``st`` (cells -> nodes, cells -> symbols): ``ctx = (st, env, graph)``;
    ``graph`` gives operator attributes."""

    __slots__ = ()

    def attr(self, x, attr, ctx):
        cell = ctx[1][0].get(x)
        node = None if cell is None else ctx[0][0].get(cell)
        return None if node is None else node.graph.attr_map(node.id).get(attr)

    def fattr(self, F, attr, ctx):
        cell = ctx[1][1].get(F)
        sym = None if cell is None else ctx[0][1].get(cell)
        graph = ctx[2]
        return None if sym is None or graph is None else graph.sym_attr(sym, attr)


class _Direct(truth.Evaluator):
    """Guards read from ``theta`` / ``phi`` directly: ``ctx = (theta, phi,
    graph)``."""

    __slots__ = ()

    def attr(self, x, attr, ctx):
        node = ctx[0].get(x)
        return None if node is None else node.graph.attr_map(node.id).get(attr)

    def fattr(self, F, attr, ctx):
        sym = ctx[1].get(F)
        graph = ctx[2]
        return None if sym is None or graph is None else graph.sym_attr(sym, attr)


_SCOPED = _Scoped()
_DIRECT = _Direct()


def scoped_value(e, st, env, graph) -> Optional[int]:
    """The value of expression ``e`` in scope ``env`` under store ``st`` (a
    search's state), or None (unknown: an unbound variable, a missing
    attribute, or arithmetic outside the bounds)."""
    return _SCOPED.value(e, (st, env, graph))


def scoped_truth(g, st, env, graph) -> Optional[bool]:
    """⟦g⟧ in scope ``env`` under store ``st``: True, False or None (unknown)."""
    return _SCOPED.truth(g, (st, env, graph))


def guard_value(g, theta: Subst, phi: Optional[FSubst] = None, graph=None) -> Optional[bool]:
    """⟦g⟧ under ``theta`` (variable -> Node) and ``phi`` (operator variable ->
    symbol, read through ``graph``'s symbol attributes): True, False or None."""
    return _DIRECT.truth(g, (theta, phi or {}, graph))


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
#
# A solver also takes ``at``, the tracer's position of its sub-pattern (None
# without a tracer), and reports to ``ctx.tracer`` when there is one.

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


class Tracer:
    """An observer of a search (see the module docstring). The search calls:

    * ``start(search)`` once, before the first step (the :class:`Search`:
      its store ``st``, :meth:`Search.bind` for the tracer's own state);
    * ``alternates(d, body)``: the alternates of definition ``d``, whose
      ``‖`` is its ``body`` (default: the body's ``‖`` spine);
    * ``alternate(at, d, j)``, ``argument(at, p, i)`` (child ``i`` of the
      operator pattern ``p``: ``PApp`` or ``PFunVar``), ``constraint(at,
      p)`` (the target of match constraint ``p``): the positions of
      sub-patterns, made from the position ``at`` of the enclosing one (the
      root definition's is None) and passed back in the calls below;
    * ``step(p, t, at)`` when sub-pattern ``p`` is tried at node ``t``;
    * ``advance()`` when a step succeeded: a variable or an operator
      matched, a guard or a match constraint's lookup passed (each
      solution is threaded through the rest, as bindings are);
    * ``fail(why, p, t, env, at, other)`` when a rule fails: ``why`` is
      ``scope`` (a variable not in scope), ``nonlinear`` (``other``: the
      node the variable is bound to), ``operator`` (another label),
      ``arity``, ``opvar`` (``other``: the symbol the operator variable is
      bound to), ``guard`` (not true under the store), ``local`` (an ∃
      variable left unbound), ``constraint`` (its variable unbound) or
      ``call`` (an ill-formed call); ``env`` is the scope.

    Tracer state kept with :meth:`Search.bind` in stores ``2 ..`` (their
    number: ``stores``) is undone on backtracking, as bindings are.
    """

    stores = 0

    def start(self, search: "Search") -> None:
        pass

    def alternates(self, d: int, body) -> Sequence[core.CorePattern]:
        out, p = [], body
        while isinstance(p, core.PAlt):
            out.append(p.p1)
            p = p.p2
        out.append(p)
        return out

    def alternate(self, at, d: int, j: int):
        return None

    def argument(self, at, p, i: int):
        return None

    def constraint(self, at, p):
        return None

    def step(self, p, t, at) -> None:
        pass

    def advance(self) -> None:
        pass

    def fail(self, why: str, p, t, env, at, other=None) -> None:
        pass


class Search:
    """One search: the table, the graph, the fuel, the store (``st``: cells
    -> node, cells -> symbol, then the tracer's stores), the trail, the
    count of live choice points, bounded by the memory budget, and the
    tracer (None: untraced)."""

    __slots__ = ("defs", "graph", "fuel", "next_cell", "st", "trail", "live", "max_live",
                 "tracer")

    def __init__(self, defs, graph, fuel: Fuel, next_cell: int,
                 theta: Optional[Subst] = None, phi: Optional[FSubst] = None,
                 tracer: Optional[Tracer] = None):
        self.defs = defs
        self.graph = graph
        self.fuel = fuel
        self.next_cell = next_cell
        self.st = (dict(theta or {}), dict(phi or {}))
        if tracer is not None:
            self.st += tuple({} for _ in range(tracer.stores))
        self.trail = []
        self.live = 0
        self.max_live = (memory_mb() << 20) // CHOICE_POINT_BYTES
        self.tracer = tracer

    def fresh(self) -> int:
        c = self.next_cell
        self.next_cell += 1
        return c

    def bind(self, which: int, cell, value) -> None:
        """Bind ``cell`` (unbound) in the term (0), operator (1) or a
        tracer's (2 ..) store; undone on backtracking."""
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


def _solve(ctx: Search, p, t, env, at):
    """Solutions of ``p`` against node ``t`` in scope ``env`` from the
    current state (``at``: the tracer's position of ``p``)."""
    ctx.fuel.tick()
    tr = ctx.tracer
    if tr is not None:
        tr.step(p, t, at)
    k = type(p)
    if k is core.PVar:
        cell = env[0].get(p.x)
        if cell is None:
            if tr is not None:
                tr.fail("scope", p, t, env, at)
            return
        bound = ctx.st[0].get(cell)
        if bound is None:
            ctx.bind(0, cell, t)
        elif not bound == t:
            if tr is not None:
                tr.fail("nonlinear", p, t, env, at, bound)
            return
        if tr is not None:
            tr.advance()
        yield _SOL, None
    elif k is core.PApp:
        if t.label == p.f and len(t.args) == len(p.args):
            if tr is not None:
                tr.advance()
            yield _TAIL, _each(ctx, p.args, t.args, 0, env, at, p)
        elif tr is not None:
            tr.fail("operator" if t.label != p.f else "arity", p, t, env, at)
    elif k is core.PAlt:
        first = ctx.stream(_solve(ctx, p.p1, t, env, at))
        while True:
            s = yield _PULL, first
            if s is None:
                break
            yield _SOL, None
        yield _TAIL, _solve(ctx, p.p2, t, env, at)
    elif k is core.PGuard:
        inner = ctx.stream(_solve(ctx, p.p, t, env, at))
        graph = ctx.graph
        while True:
            s = yield _PULL, inner
            if s is None:
                return
            ctx.fuel.tick()
            if _SCOPED.truth(p.g, (s, env, graph)) is True:
                if tr is not None:
                    tr.advance()
                yield _SOL, None
            elif tr is not None:
                tr.fail("guard", p, t, env, at)
    elif k is core.PExists or k is core.PExistsF:
        cell = ctx.fresh()
        if k is core.PExists:
            scope, which = ({**env[0], p.x: cell}, env[1]), 0
        else:
            scope, which = (env[0], {**env[1], p.F: cell}), 1
        inner = ctx.stream(_solve(ctx, p.p, t, scope, at))
        while True:
            s = yield _PULL, inner
            if s is None:
                return
            ctx.fuel.tick()
            if cell in s[which]:
                yield _SOL, None
            elif tr is not None:
                tr.fail("local", p, t, env, at)
    elif k is core.PConstr:
        inner = ctx.stream(_solve(ctx, p.p, t, env, at))
        while True:
            s = yield _PULL, inner
            if s is None:
                return
            ctx.fuel.tick()
            cell = env[0].get(p.x)
            target = None if cell is None else s[0].get(cell)
            if target is None:
                if tr is not None:
                    tr.fail("constraint", p, t, env, at)
                continue
            if tr is not None:
                tr.advance()
                sub = ctx.stream(_solve(ctx, p.p2, target, env, tr.constraint(at, p)))
            else:
                sub = ctx.stream(_solve(ctx, p.p2, target, env, None))
            while True:
                r = yield _PULL, sub
                if r is None:
                    break
                yield _SOL, None
    elif k is core.PFunVar:
        if len(t.args) != len(p.args):
            if tr is not None:
                tr.fail("arity", p, t, env, at)
            return
        cell = env[1].get(p.F)
        if cell is None:
            if tr is not None:
                tr.fail("scope", p, t, env, at)
            return
        bound = ctx.st[1].get(cell)
        if bound is None:
            ctx.bind(1, cell, t.label)
        elif bound != t.label:
            if tr is not None:
                tr.fail("opvar", p, t, env, at, bound)
            return
        if tr is not None:
            tr.advance()
        yield _TAIL, _each(ctx, p.args, t.args, 0, env, at, p)
    elif k is core.PCall:
        d = ctx.defs[p.P] if 0 <= p.P < len(ctx.defs) else None
        if d is None or len(p.xs) != d.nparams or len(p.Fs) != d.nfparams:
            if tr is not None:
                tr.fail("call", p, t, env, at)
            return
        tenv, fenv = env
        scope = ({i: tenv[x] for i, x in enumerate(p.xs) if x in tenv},
                 {i: fenv[F] for i, F in enumerate(p.Fs) if F in fenv})
        yield _TAIL, _definition(ctx, p.P, t, scope, at)
    else:
        raise TypeError(f"not a pattern: {p!r}")


def _definition(ctx: Search, di: int, t, env, at):
    """The solutions of definition ``di``'s body: the body itself, or (traced)
    its alternates one by one, each at its position."""
    tr = ctx.tracer
    if tr is None:
        return _solve(ctx, ctx.defs[di].body, t, env, None)
    return _alternates(ctx, tr, di, tr.alternates(di, ctx.defs[di].body), t, env, at)


def _alternates(ctx: Search, tr: Tracer, di: int, alts, t, env, at):
    last = len(alts) - 1
    for j in range(last):
        s = ctx.stream(_solve(ctx, alts[j], t, env, tr.alternate(at, di, j)))
        while True:
            r = yield _PULL, s
            if r is None:
                break
            yield _SOL, None
    yield _TAIL, _solve(ctx, alts[last], t, env, tr.alternate(at, di, last))


def _each(ctx: Search, ps, ts, i, env, at, owner):
    """Solutions of matching ``ps[j]`` against ``ts[j]`` for ``j >= i``, left
    to right, threading the state (``owner``: the operator pattern whose
    arguments they are, for the tracer's positions; None at the roots of
    :func:`joint_solutions`)."""
    if i == len(ps):
        yield _SOL, None
        return
    tr = ctx.tracer
    sub = None if tr is None else tr.argument(at, owner, i)
    if i == len(ps) - 1:
        yield _TAIL, _solve(ctx, ps[i], ts[i], env, sub)
        return
    head = ctx.stream(_solve(ctx, ps[i], ts[i], env, sub))
    while True:
        s = yield _PULL, head
        if s is None:
            return
        rest = ctx.stream(_each(ctx, ps, ts, i + 1, env, at, owner))
        while True:
            r = yield _PULL, rest
            if r is None:
                break
            yield _SOL, None


def _drive(ctx: Search, gen) -> Iterator[Tuple[Subst, FSubst]]:
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


def _project(s, n: int, m: int) -> Solution:
    return ({i: s[0][i] for i in range(n) if i in s[0]},
            {i: s[1][i] for i in range(m) if i in s[1]})


def _run(program: ProgramLike, node, theta: Optional[Mapping[int, object]],
         phi: Optional[Mapping[int, int]], fuel: Fuel, tracer: Optional[Tracer] = None):
    prog = core.as_program(program)
    d = prog.defs[prog.root]
    n, m = d.nparams, d.nfparams
    env = ({i: i for i in range(n)}, {i: i for i in range(m)})
    ctx = Search(prog.defs, node.graph, fuel, max(n, m),
                 {x: v for x, v in (theta or {}).items() if x < n},
                 {F: f for F, f in (phi or {}).items() if F < m}, tracer)
    if tracer is not None:
        tracer.start(ctx)
    for s in _drive(ctx, _definition(ctx, prog.root, node, env, None)):
        yield _project(s, n, m)


def solutions(program: ProgramLike, node, theta: Optional[Mapping[int, object]] = None,
              phi: Optional[Mapping[int, int]] = None,
              fuel: Optional[Fuel] = None, tracer: Optional[Tracer] = None
              ) -> Iterator[Solution]:
    """Every ``(theta, phi)`` extending the given substitutions of the root's
    parameters under which the root of ``program`` (a :class:`core.Program`,
    or a core pattern without calls) matches ``node``, in left-to-right rule
    order. Raises :class:`OutOfFuel` when ``fuel`` (unlimited if None) is
    spent, :class:`MemoryBudget` when the search passes the memory budget.
    ``tracer``: a :class:`Tracer` that observes the search (the full store
    is its ``search.st`` while a solution is being read)."""
    return _run(program, node, theta, phi, fuel if fuel is not None else Fuel(float("inf")),
                tracer)


def joint_solutions(defs: Sequence[core.PDef], patterns: Sequence[core.CorePattern],
                    nodes: Sequence, n: int, m: int, fuel: Fuel) -> Iterator[Solution]:
    """Every ``(theta, phi)`` over the shared variables ``0 .. n-1`` and
    operator variables ``0 .. m-1`` under which ``patterns[i]`` (bodies over
    the table ``defs``) matches ``nodes[i]`` for every ``i``, matched left to
    right, one substitution threaded through (``Multi.run_prefix``); raises
    :class:`OutOfFuel` when ``fuel`` is spent."""
    ctx = Search(defs, nodes[0].graph, fuel, max(n, m))
    env = ({i: i for i in range(n)}, {i: i for i in range(m)})
    for s in _drive(ctx, _each(ctx, list(patterns), list(nodes), 0, env, None, None)):
        yield _project(s, n, m)


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
    if not core.root_admits(prog.defs, prog.root, node):
        return None
    fuel_left = Fuel(fuel if fuel is not None and fuel > 0 else DEFAULT_FUEL)
    for sol in _run(prog, node, None, None, fuel_left):
        fuel_left.tick()  # ST-SUCCESS
        return sol
    return None
