"""Cost-guided rewriting: greedy, beam, best-first and A* search over
hash-consed graphs (after Knossos, "Knossos: Compiling AI with AI", §3-4).

``pm.rewrite`` is greedy: the first rule whose guards pass fires, to a
fixpoint. That is right when rules only ever help and never compete; when
they compete (two rules want the same nodes) or when an improvement needs a
step that costs before it pays (reassociate, then fuse), the order of
firings decides the result. This module searches over rewrite sequences
instead, guided by a cost model. It is the term-graph search space; the
algorithms are :mod:`.search_algorithms`' (shared with
:mod:`pypm_verified.torch.search`).

**States.** All states of one search live in one append-only, hash-consed
:class:`~pypm_verified.Graph` (the *store*); a state is the tuple of its
output node ids. Hash-consing makes this canonical: two states denote the
same terms iff their output tuples are equal, so equal graphs reached by
different rewrite orders are one state (the search's closed set is a set of
tuples), and an alternative costs only the nodes it does not share with the
states before it.

**Transitions.** A transition is ``(rule, root, replacement)``: a match of
a pattern at a node the state's outputs reach, found by the verified engine
(:class:`~pypm_verified.engines.matching.PatternSet`, the same proved
root-operator index and matcher as ``pm.rewrite`` and the PyTorch driver),
and a rule of that pattern whose assertions pass (every firing rule of the
pattern is a transition, not only the first). Nodes are immutable, so the
matches and replacements at a node are computed once per node and shared by
every state containing it. Applying a transition rebuilds the ancestors of
the root in that state (as :meth:`Graph.replace` does), never touching the
other states.

**Cost.** ``cost(node) -> float`` per node; a state's cost is the sum over
the distinct nodes its outputs reach (a shared subterm is computed once, as
a ``let`` would). :func:`node_count_cost` is the default.

**Strategies** (:func:`search`, ``strategy=``; the budget counts expanded
states):

* ``greedy`` -- the driver's policy, the baseline: at each step the first
  transition (nodes in id order, patterns in the given order, rules in
  definition order) fires, except that a transition back to a state already
  visited is skipped (so rules such as commutativity cannot loop); to a
  fixpoint or the budget. Its answer is its last state.
* ``beam`` -- breadth by depth: at each depth the ``beam_width`` cheapest
  new states are kept and expanded. Its answer is the cheapest state seen.
* ``best_first`` (the default) -- the cheapest open state first, ordered by
  the state's own cost (Knossos' A* with a zero value function); nothing is
  pruned. When the open list empties within the budget, the answer is the
  optimum of all states reachable within ``max_depth`` steps
  (``SearchResult.exhausted``); the ordering only decides how soon it is
  found, which the result records (``SearchResult.best_at``).
* ``astar`` -- A*: ordered by ``heuristic``, an admissible bound
  (``"zero"``, or a function of ``(space, state)`` returning a lower bound
  on the cost of every state reachable from ``state`` within the remaining
  depth); a state whose bound is not below the best cost found is never
  expanded, and an exhausted search's answer is again the optimum.
  ``"astar"`` without an admissible heuristic (``None``, ``"cost"``) is the
  former spelling of ``best_first``: it runs best-first, with a
  DeprecationWarning.
* ``exhaustive`` -- breadth-first over every state within ``max_depth``
  (the reference optimum, where it is tractable).

Every strategy other than ``greedy`` starts from greedy's answer as its
incumbent (``seed_greedy=True``, the default), so it never returns a state
costlier than greedy's under the same cost model and budget.

**Budget.** ``max_expansions`` (states expanded), ``time_limit`` (seconds),
``max_depth`` (rewrite steps from the start; Knossos' search depth).
``SearchResult.budget_hit`` says whether one cut the search short.

The search only *chooses*; :attr:`SearchResult.steps` is the sequence of
``(rule name, root id, replacement id)`` from the start state to the answer,
replayable by :func:`replay`. For PyTorch programs,
:mod:`pypm_verified.torch.search` searches the driver's choices instead
(which firings it skips), so that the driver itself rewrites the FX graph.
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from ..core.graph import Graph, Node
from ..dsl.patterns import Pattern
from ..engines.matching import PatternSet, check_engine
from ..errors import PatternError
from . import search_algorithms as algo
from .report import TERM_SEARCH, Validation

STRATEGIES = ("greedy", "beam", "best_first", "astar", "exhaustive")
#: ``heuristic=`` by name: "zero" (admissible: A*); "cost" (the state's own
#: cost, no bound: best-first; with "astar", the deprecated spelling of it)
HEURISTICS = ("cost", "zero")

State = Tuple[int, ...]  # output node ids in the store
Move = Tuple[str, int, int]  # (rule name, root id, replacement id)


def node_count_cost(node: Node) -> float:
    """One per operator application (inputs and constants are free)."""
    return 0.0 if node.kind != "op" else 1.0


@dataclass
class SearchResult:
    """What a search found.

    ``strategy``; ``graph`` (the store) and ``state`` (the answer's output
    ids in it; :meth:`outputs` as nodes); ``cost`` and ``start_cost``;
    ``steps`` (the moves from the start to the answer); ``expanded`` (states
    expanded), ``generated`` (distinct states seen), ``seconds``;
    ``budget_hit`` (a budget cut the search short), ``exhausted`` (every
    state within ``max_depth`` was expanded or pruned by an admissible
    bound: the answer is then the optimum); ``best_at`` (expansions done
    when the answer was first reached); ``validation``: "not validated:
    term-graph search is not validated" (the rewrite validator does not
    check the search's steps; :mod:`pypm_verified.torch.search` searches
    through the validated driver instead)."""

    strategy: str
    graph: Graph
    state: State
    cost: float
    start_cost: float
    steps: List[Move] = field(default_factory=list)
    expanded: int = 0
    generated: int = 0
    seconds: float = 0.0
    budget_hit: bool = False
    exhausted: bool = False
    best_at: int = 0
    validation: Validation = TERM_SEARCH

    def outputs(self) -> List[Node]:
        return [self.graph.nodes[i] for i in self.state]

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in (
            "strategy", "cost", "start_cost", "expanded", "generated", "seconds",
            "budget_hit", "exhausted", "best_at")} | {"steps": [list(s) for s in self.steps],
                                                      "validation": self.validation.as_dict()}


class SearchSpace:
    """The states reachable from ``graph``'s outputs by the rules of
    ``patterns`` (see the module docstring). ``graph`` becomes the store:
    states add nodes to it. ``cost`` is per node. ``context`` is passed to
    rules taking ``ctx``."""

    def __init__(self, graph: Graph, patterns: Sequence[Pattern],
                 cost: Callable[[Node], float] = node_count_cost,
                 engine: str = "verified", fuel: Optional[int] = None, context=None):
        check_engine(engine)
        if not isinstance(graph, Graph):
            raise TypeError(f"search needs a pm.Graph, not {graph!r}")
        patterns = list(patterns)
        for p in patterns:
            if not isinstance(p, Pattern):
                raise TypeError(f"search takes @pm.pattern patterns, not {p!r}")
        if not callable(cost):
            raise TypeError(f"cost must be a function of a node, not {cost!r}")
        if not graph.outputs:
            for n in graph.sinks():
                graph.output(n)
        self.graph = graph
        self.patterns = [p for p in patterns if p.rules]
        self.pset = PatternSet(self.patterns, engine, fuel) if self.patterns else None
        self.node_cost = cost
        self.context = context
        self.start: State = tuple(n.id for n in graph.outputs)
        self._moves: Dict[int, List[Tuple[str, int]]] = {}
        self._ncost: Dict[int, float] = {}
        self._cost: Dict[State, float] = {}
        self.matches = 0  # engine calls that matched

    # ------------------------------------------------------------- states

    def live(self, state: State) -> List[int]:
        """Ids of the nodes ``state``'s outputs reach, in id order
        (topological: children first)."""
        nodes = self.graph.nodes
        seen = set()
        stack = list(state)
        while stack:
            i = stack.pop()
            if i not in seen:
                seen.add(i)
                stack.extend(a.id for a in nodes[i].args)
        return sorted(seen)

    def cost(self, state: State) -> float:
        c = self._cost.get(state)
        if c is None:
            c = 0.0
            for i in self.live(state):
                nc = self._ncost.get(i)
                if nc is None:
                    nc = self._ncost[i] = float(self.node_cost(self.graph.nodes[i]))
                c += nc
            self._cost[state] = c
        return c

    def moves_at(self, nid: int) -> List[Tuple[str, int]]:
        """``(rule name, replacement id)`` for every firing rule of every
        pattern matching at node ``nid`` (computed once per node)."""
        out = self._moves.get(nid)
        if out is not None:
            return out
        out = []
        node = self.graph.nodes[nid]
        if self.pset is not None and node.kind == "op":
            for i in self.pset.candidates_at(node):  # the root and shapes indexes
                m = self.pset.match(i, node)
                if m is None:
                    continue
                self.matches += 1
                values = {**m.bindings, **m.functions}
                for rule in self.pset.patterns[i].rules:
                    new = rule.fire(values, self.graph, self.context)
                    if new is None:
                        continue
                    if not isinstance(new, Node) or new.graph is not self.graph:
                        raise PatternError(
                            f"rule {rule.name!r} ({rule.where}) returned {new!r}; a rule "
                            "returns a node of the matched graph")
                    if new.id != nid:
                        out.append((rule.name, new.id))
        self._moves[nid] = out
        return out

    def moves(self, state: State, live: Optional[List[int]] = None) -> List[Move]:
        """Every transition from ``state``, in the driver's order (nodes in
        id order, patterns in the given order, rules in definition order).
        ``live`` is ``self.live(state)`` if the caller has it."""
        live = self.live(state) if live is None else live
        return [(r, nid, new) for nid in live for r, new in self.moves_at(nid)]

    def successors(self, state: State) -> Iterator[Tuple[Move, State]]:
        """The protocol's successors (:mod:`.search_algorithms`): each
        transition of :meth:`moves` with the state it leads to, applied
        only when asked for."""
        live = self.live(state)
        for mv in self.moves(state, live):
            yield mv, self.apply(state, mv[1], mv[2], live)

    def key(self, state: State) -> State:
        """The protocol's key: the output ids (ties by id)."""
        return state

    def apply(self, state: State, root: int, new: int,
              live: Optional[List[int]] = None) -> State:
        """``state`` with ``new`` substituted for ``root`` (its ancestors
        rebuilt in the store; ``state`` itself is unchanged). ``live`` is
        ``self.live(state)`` if the caller has it."""
        nodes = self.graph.nodes
        memo = {root: nodes[new]}
        for i in (self.live(state) if live is None else live):
            if i <= root or i in memo:  # ids are topological: only later nodes use root
                continue
            node = nodes[i]
            if not node.args:
                continue
            args = tuple(memo.get(a.id, a) for a in node.args)
            if any(a is not b for a, b in zip(args, node.args)):
                memo[i] = self.graph.apply(node.op, *args, shape=node.shape, dtype=node.dtype)
        return tuple(dict.fromkeys(memo[i].id if i in memo else i for i in state))


def _astar_or_best_first(strategy: str, heuristic) -> str:
    """The strategy that runs: ``astar`` without an admissible heuristic is
    best-first (its former spelling, deprecated); ``best_first`` takes no
    heuristic."""
    admissible = heuristic is not None and heuristic != "cost"
    if strategy == "astar" and not admissible:
        warnings.warn("search strategy 'astar' without an admissible heuristic runs best-first "
                      "search on the state's cost; say strategy='best_first' (or give "
                      "heuristic='zero' or a lower-bound function for A*)",
                      DeprecationWarning, stacklevel=3)
        return "best_first"
    if strategy == "best_first" and admissible:
        raise ValueError("best_first orders by the state's cost and takes no heuristic; "
                         "strategy='astar' takes an admissible one")
    return strategy


def search(graph: Graph, patterns: Sequence[Pattern], strategy: str = "best_first", *,
           cost: Callable[[Node], float] = node_count_cost, engine: str = "verified",
           max_expansions: int = 5000, time_limit: Optional[float] = None,
           max_depth: int = 10, beam_width: int = 16, heuristic=None,
           seed_greedy: bool = True, fuel: Optional[int] = None, context=None,
           space: Optional[SearchSpace] = None) -> SearchResult:
    """Search for the cheapest graph reachable from ``graph`` by the rules of
    ``patterns`` (see the module docstring for the strategies, the budget
    and what is guaranteed). ``graph`` is not rewritten in place: it becomes
    the store the states live in; the answer is ``result.outputs()``
    (:func:`apply_result` sets ``graph``'s outputs to it). ``heuristic``
    (astar): ``"zero"`` or a function of ``(space, state)`` returning a
    lower bound. ``space`` reuses a :class:`SearchSpace` (its caches)
    across strategies."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown search strategy {strategy!r}; expected one of "
                         f"{', '.join(STRATEGIES)}")
    if not isinstance(max_depth, int) or isinstance(max_depth, bool) or max_depth < 0:
        raise ValueError(f"max_depth must be a non-negative int, not {max_depth!r}")
    if not isinstance(beam_width, int) or isinstance(beam_width, bool) or beam_width < 1:
        raise ValueError(f"beam_width must be a positive int, not {beam_width!r}")
    if isinstance(heuristic, str):
        if heuristic not in HEURISTICS:
            raise ValueError(f"unknown heuristic {heuristic!r}; expected one of "
                             f"{', '.join(HEURISTICS)} or a function (space, state) -> bound")
    elif heuristic is not None and not callable(heuristic):
        raise TypeError(f"heuristic must be a name or a function, not {heuristic!r}")
    strategy = _astar_or_best_first(strategy, heuristic)
    budget = algo.SearchBudget(max_expansions, time_limit)
    if space is None:
        space = SearchSpace(graph, patterns, cost, engine, fuel, context)
    elif space.graph is not graph:
        raise ValueError("space was built over another graph")
    t0 = time.perf_counter()
    c0 = space.cost(space.start)
    if strategy == "greedy":
        out = algo.greedy(space, budget, max_depth)
    else:
        incumbent = None  # the start, or greedy's answer (on a budget of its own)
        if seed_greedy:
            g = algo.greedy(space, algo.SearchBudget(max_expansions, time_limit), max_depth)
            if g.cost < c0:
                incumbent = (g.state, g.steps)
        if strategy == "beam":
            out = algo.beam(space, budget, max_depth, beam_width, incumbent)
        elif strategy == "exhaustive":
            out = algo.breadth_first(space, budget, max_depth, incumbent)
        elif strategy == "best_first":
            out = algo.best_first(space, budget, max_depth, incumbent)
        else:
            bound = (lambda s: 0.0) if heuristic == "zero" else (  # costs are >= 0
                lambda s: heuristic(space, s))
            out = algo.astar(space, budget, max_depth, bound, incumbent)
    return SearchResult(strategy, space.graph, out.state, out.cost, c0, out.steps,
                        out.expanded, out.generated, time.perf_counter() - t0,
                        out.budget_hit, out.exhausted, out.best_at)


def apply_result(graph: Graph, result: SearchResult) -> None:
    """Make ``graph``'s designated outputs the answer's (``graph`` is the
    store of ``result``), as if rewritten in place."""
    if result.graph is not graph:
        raise ValueError("the result was found in another graph")
    graph._outputs = list(result.outputs())


def replay(space: SearchSpace, steps: Sequence[Move], state: Optional[State] = None) -> State:
    """The state reached from ``state`` (default: the start) by ``steps``;
    raises ValueError when a step is not a transition of the state it
    applies to (e.g. a rule that does not fire there)."""
    s = space.start if state is None else state
    for mv in steps:
        if mv not in space.moves(s):
            raise ValueError(f"step {mv!r} is not a transition of the state reached so far")
        s = space.apply(s, mv[1], mv[2])
    return s


__all__ = ["search", "SearchSpace", "SearchResult", "STRATEGIES", "HEURISTICS",
           "node_count_cost", "replay", "apply_result"]
