"""The search algorithms, once, over a small search-space protocol.

Two search spaces implement the protocol: term graphs
(:mod:`pypm_verified.rewriting.search`: a state is a hash-consed graph's
outputs, a move a rule firing) and PyTorch programs
(:mod:`pypm_verified.torch.search`: a state is the set of firings the driver
skips, a move one more skipped firing). This module knows neither; it
imports nothing of the package.

**The protocol** (:class:`StateSpace`):

* ``start`` -- the start state. States are hashable; equal states are one
  state (the closed set is keyed by them).
* ``successors(state)`` -- ``(move, next state)`` pairs, in a fixed order
  (greedy takes the first new one). A generator may compute a next state
  only when asked for it.
* ``cost(state)`` -- a number >= 0. The objective is the cheapest *state*
  reachable within ``max_depth`` moves; moves cost nothing (no path cost is
  summed).
* ``key(state)`` -- a sortable key, distinct per state: ties between equal
  costs are broken by it (beam), so a search is deterministic.
* optionally a heuristic, given to :func:`astar`: ``heuristic(state)``, a
  lower bound on the cost of every state reachable from ``state`` within the
  remaining depth (admissible).

**Algorithms** (each returns a :class:`SearchOutcome`; all but :func:`greedy`
start from an *incumbent*, the start state unless given one, and answer the
cheapest state seen, the incumbent if none is cheaper):

* :func:`greedy` -- follow the first successor not visited before, to a
  fixpoint or ``max_depth`` moves. Its answer is its last state.
* :func:`beam` -- breadth by depth, keeping the ``width`` cheapest new states
  of each depth (ties by ``key``).
* :func:`breadth_first` -- every state within ``max_depth`` moves, depth by
  depth (exhaustive: the reference optimum where it is tractable).
* :func:`best_first` -- the cheapest open state first (ordered by the
  state's own cost, no heuristic; nothing is pruned). It is Knossos' "A*
  with a zero value function"; it is not A*: the cost is no lower bound on
  what a state leads to.
* :func:`astar` -- ordered by an admissible ``heuristic``; a state whose
  bound is not below the incumbent's cost is not expanded.

A state reached again by fewer moves is reopened (its successors get the
depth left to them). When :func:`best_first`, :func:`astar` or
:func:`breadth_first` empties its open list within the budget
(``SearchOutcome.exhausted``), every state within ``max_depth`` moves was expanded
or pruned by an admissible bound, so the answer is the optimum over them.

**Budget** (:class:`SearchBudget`): ``max_expansions`` and ``time_limit``; it
counts either expanded states (``counts="expansions"``: successors are
cheap, costs are what the space computes) or evaluated states
(``counts="states"``: each state's cost is an expensive run, e.g. of the
PyTorch driver, so every new state is spent before its cost is asked).
"""
from __future__ import annotations

import heapq
import time
from dataclasses import dataclass, field
from typing import (Callable, Dict, Hashable, Iterable, List, Optional, Protocol, Tuple,
                    TypeVar)

S = TypeVar("S", bound=Hashable)
M = TypeVar("M")


class StateSpace(Protocol[S, M]):
    """What the algorithms need of a search space (see the module
    docstring)."""

    start: S

    def successors(self, state: S) -> Iterable[Tuple[M, S]]: ...

    def cost(self, state: S) -> float: ...

    def key(self, state: S): ...


class SearchBudget:
    """At most ``max_expansions`` units (expanded states, or evaluated states
    with ``counts="states"``; ``spent`` already spent, e.g. the start's
    evaluation) and ``time_limit`` seconds from now. ``hit`` once a spend was
    refused."""

    COUNTS = ("expansions", "states")

    def __init__(self, max_expansions: int, time_limit: Optional[float] = None,
                 counts: str = "expansions", spent: int = 0):
        if not isinstance(max_expansions, int) or isinstance(max_expansions, bool) \
                or max_expansions < 1:
            raise ValueError(f"max_expansions must be a positive int, not {max_expansions!r}")
        if time_limit is not None and (not isinstance(time_limit, (int, float))
                                       or isinstance(time_limit, bool) or time_limit <= 0):
            raise ValueError(f"time_limit must be a positive number of seconds or None, "
                             f"not {time_limit!r}")
        if counts not in self.COUNTS:
            raise ValueError(f"counts must be one of {', '.join(self.COUNTS)}, not {counts!r}")
        self.max_expansions = max_expansions
        self.deadline = None if time_limit is None else time.perf_counter() + time_limit
        self.counts = counts
        self.expanded = spent  # units spent (the name: what it counts by default)
        self.hit = False

    def spend(self) -> bool:
        """Count one unit; False (and ``hit``) when the budget is spent."""
        if self.expanded >= self.max_expansions or (
                self.deadline is not None and time.perf_counter() > self.deadline):
            self.hit = True
            return False
        self.expanded += 1
        return True

    def expand(self) -> bool:
        """Before expanding a state."""
        return self.spend() if self.counts == "expansions" else True

    def evaluate(self) -> bool:
        """Before the first cost of a new state."""
        return self.spend() if self.counts == "states" else True


@dataclass
class SearchOutcome:
    """What an algorithm found: ``state`` and its ``cost``, ``steps`` (the
    moves from the start to it), ``expanded`` (budget units spent),
    ``generated`` (distinct states seen), ``budget_hit``, ``exhausted``
    (every state within the depth expanded or soundly pruned: the answer is
    the optimum), ``best_at`` (units spent when the answer was first
    reached)."""

    state: object
    cost: float
    steps: List = field(default_factory=list)
    expanded: int = 0
    generated: int = 0
    budget_hit: bool = False
    exhausted: bool = False
    best_at: int = 0


def greedy(space: StateSpace, budget: SearchBudget, max_depth: int) -> SearchOutcome:
    """The first successor not visited before, one move at a time (a budget
    unit each), to a fixpoint or ``max_depth`` moves (then ``budget_hit``:
    not a fixpoint)."""
    s = space.start
    seen = {s}
    steps: List = []
    while len(steps) < max_depth:
        nxt = next(((mv, t) for mv, t in space.successors(s) if t not in seen), None)
        if nxt is None or not budget.spend():
            break
        mv, s = nxt
        seen.add(s)
        steps.append(mv)
    else:
        budget.hit = True  # the depth cut it short: not a fixpoint
    return SearchOutcome(s, space.cost(s), steps, budget.expanded, len(seen), budget.hit,
                         False, budget.expanded)


class _Search:
    """The bookkeeping the searches share: depth and parent of each state
    seen, the incumbent, the budget."""

    def __init__(self, space: StateSpace, budget: SearchBudget, max_depth: int,
                 incumbent: Optional[Tuple[object, List]]):
        self.space, self.budget, self.max_depth = space, budget, max_depth
        start = space.start
        self.depth: Dict = {start: 0}
        self.parent: Dict = {start: None}
        self.best, self.best_steps = incumbent if incumbent is not None else (start, [])
        self.best_at = 0

    def children(self, s):
        """The successors of ``s`` new or reached in fewer moves than before
        (each a budget unit with ``counts="states"``; none once it is spent),
        each recorded, and the incumbent replaced by any cheaper one."""
        d = self.depth[s] + 1
        cost = self.space.cost
        for mv, t in self.space.successors(s):
            if t in self.depth and self.depth[t] <= d:
                continue
            if not self.budget.evaluate():
                return
            self.depth[t] = d
            self.parent[t] = (s, mv)
            if cost(t) < cost(self.best):
                self.best, self.best_steps, self.best_at = t, self.path(t), self.budget.expanded
            yield t

    def path(self, s) -> List:
        steps = []
        while self.parent.get(s) is not None:
            s, mv = self.parent[s]
            steps.append(mv)
        return steps[::-1]

    def outcome(self, exhausted: bool) -> SearchOutcome:
        return SearchOutcome(self.best, self.space.cost(self.best), self.best_steps,
                             self.budget.expanded, len(self.depth), self.budget.hit, exhausted,
                             self.best_at)


def _by_depth(space, budget, max_depth, width, incumbent) -> SearchOutcome:
    """Depth by depth; ``width``: the cheapest states of each depth kept
    (beam), None: all of them, in the order found (breadth-first)."""
    run = _Search(space, budget, max_depth, incumbent)
    level = [space.start]
    while level and not budget.hit:
        nxt = []
        for s in level:
            if run.depth[s] >= max_depth:
                continue
            if not budget.expand():
                break
            nxt.extend(run.children(s))
            if budget.hit:
                break
        if width is not None:
            nxt.sort(key=lambda t: (space.cost(t), space.key(t)))
            nxt = nxt[:width]
        level = nxt
    return run.outcome(width is None and not budget.hit)


def beam(space: StateSpace, budget: SearchBudget, max_depth: int, width: int,
         incumbent=None) -> SearchOutcome:
    """Beam search: the ``width`` cheapest new states of each depth are
    expanded. ``incumbent``: ``(state, steps)`` to beat (default: the
    start)."""
    return _by_depth(space, budget, max_depth, width, incumbent)


def breadth_first(space: StateSpace, budget: SearchBudget, max_depth: int,
                  incumbent=None) -> SearchOutcome:
    """Every state within ``max_depth`` moves, depth by depth."""
    return _by_depth(space, budget, max_depth, None, incumbent)


def _ordered(space, budget, max_depth, incumbent, f: Callable,
             admissible: bool) -> SearchOutcome:
    run = _Search(space, budget, max_depth, incumbent)
    start = space.start
    tie = 0
    opened = [(f(start), 0, tie, start)]
    expanded: Dict = {}  # state -> depth it was expanded at
    while opened:
        bound, d, _, s = heapq.heappop(opened)
        if expanded.get(s, max_depth + 1) <= d or run.depth.get(s, d) < d:
            continue  # stale entry
        if admissible and bound >= space.cost(run.best):
            continue  # cannot lead below the incumbent
        if d >= max_depth:
            continue
        if not budget.expand():
            break
        expanded[s] = d
        for t in run.children(s):
            tie += 1
            heapq.heappush(opened, (f(t), run.depth[t], tie, t))
        if budget.hit:
            break
    return run.outcome(not budget.hit)


def best_first(space: StateSpace, budget: SearchBudget, max_depth: int,
               incumbent=None) -> SearchOutcome:
    """Best-first search on the state's cost: the cheapest open state is
    expanded next (fewer moves first among equal costs), nothing is pruned."""
    return _ordered(space, budget, max_depth, incumbent, space.cost, False)


def astar(space: StateSpace, budget: SearchBudget, max_depth: int,
          heuristic: Callable[[object], float], incumbent=None) -> SearchOutcome:
    """A*: open states in the order of ``heuristic``, an admissible lower
    bound on the cost of every state reachable from the state; one whose
    bound is not below the incumbent's cost is not expanded."""
    return _ordered(space, budget, max_depth, incumbent, heuristic, True)


__all__ = ["StateSpace", "SearchBudget", "SearchOutcome", "greedy", "beam", "breadth_first",
           "best_first", "astar"]
