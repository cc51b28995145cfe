"""Search over the driver's choices on a PyTorch program.

The driver is greedy: at each node the first rule whose guards pass fires.
Here a *state* is the set of firings the driver is told to skip
(``(rule name, root node name)``, the driver's ``skip`` hook); its graph is
what the driver produces with those firings skipped (every other choice
stays the driver's), and its cost is the predicted latency of that graph
(:class:`.cost.CostModel`). The start state skips nothing: greedy. A
state's successors skip, in addition, one of the firings its own run made,
so the next rule or pattern at that node -- or a rule at a later node that
wanted the same nodes -- gets its turn, and a fusion the cost model
predicts slower can be left out.

:class:`ProgramSpace` is this search space; the algorithms are
:mod:`pypm_verified.rewriting.search_algorithms`' (shared with the
term-graph search). ``beam`` keeps the ``beam_width`` cheapest states per
depth; ``best_first`` expands the cheapest state first (ordered by the
predicted cost; there is no heuristic, so it is not A*: ``"astar"`` is
its former, deprecated name); both within ``max_expansions`` driver runs
(each new state is one; or ``time_limit`` seconds) and ``max_depth``
skipped firings, and both return greedy's graph unless they found a
cheaper one (so they are never costlier under the same cost model).

Each state's graph comes from the driver itself (``pipeline.rewrite_program``
with ``skip``): the search chooses, the driver rewrites, so every rule
application is found by the verified engine and fired by ``Rule.fire``
exactly as in a greedy run, and the result is checked like one.
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, Iterator, List, Optional, Sequence, Tuple

from ..rewriting import search_algorithms as algo
from .cost import CostModel
from .pipeline import rewrite_program

STRATEGIES = ("greedy", "beam", "best_first")
#: former names, still accepted (with a DeprecationWarning): what they run
DEPRECATED = {"astar": "best_first"}
Firing = Tuple[str, str]  # (rule name, root node name)
Skipped = FrozenSet[Firing]


@dataclass
class ProgramSearch:
    """The answer: ``result`` (the driver's :class:`~.pipeline.Result` for
    the chosen state), ``skipped`` (the firings skipped), ``cost`` and
    ``greedy_cost`` (predicted seconds), ``runs`` (driver runs),
    ``seconds``, ``budget_hit``."""

    strategy: str
    result: object
    skipped: FrozenSet[Firing]
    cost: float
    greedy_cost: float
    runs: int = 0
    seconds: float = 0.0
    budget_hit: bool = False
    states: List[Tuple[float, List[Firing]]] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"strategy": self.strategy, "cost": self.cost, "greedy_cost": self.greedy_cost,
                "skipped": sorted(map(list, self.skipped)), "runs": self.runs,
                "seconds": self.seconds, "budget_hit": self.budget_hit,
                "firings": self.result.report.firings}


def strategy_of(strategy: str) -> str:
    """``strategy``, or what a deprecated name runs (with a
    DeprecationWarning)."""
    if strategy in DEPRECATED:
        warnings.warn(f"search strategy {strategy!r} is deprecated: it runs best-first search "
                      f"on the predicted cost (there is no heuristic); say "
                      f"{DEPRECATED[strategy]!r}", DeprecationWarning, stacklevel=3)
        return DEPRECATED[strategy]
    return strategy


def check_options(strategy: str, max_expansions: int, beam_width: int, max_depth: int,
                  time_limit: Optional[float]) -> None:
    """Raise ValueError with a clear message for a bad option."""
    if strategy not in STRATEGIES and strategy not in DEPRECATED:
        raise ValueError(f"unknown search strategy {strategy!r}; expected one of "
                         f"{', '.join(STRATEGIES)}")
    for name, v, lo in (("max_expansions", max_expansions, 1), ("beam_width", beam_width, 1),
                        ("max_depth", max_depth, 0)):
        if not isinstance(v, int) or isinstance(v, bool) or v < lo:
            raise ValueError(f"{name} must be an int >= {lo}, not {v!r}")
    if time_limit is not None and (not isinstance(time_limit, (int, float))
                                   or isinstance(time_limit, bool) or time_limit <= 0):
        raise ValueError(f"time_limit must be a positive number of seconds, not {time_limit!r}")


class ProgramSpace:
    """The search space of the driver's choices on ``prog`` (the protocol
    of :mod:`~pypm_verified.rewriting.search_algorithms`): states are sets
    of skipped firings, one driver run each (cached: :meth:`run`)."""

    def __init__(self, prog, patterns, model: CostModel, *, engine: str, target: str,
                 max_iterations: int, check_profitability: bool):
        self.prog, self.patterns, self.model = prog, patterns, model
        self.options = dict(engine=engine, target=target, max_iterations=max_iterations,
                            check=False, check_profitability=check_profitability)
        self.start: Skipped = frozenset()
        self.cache: Dict[Skipped, Tuple[float, object, List[Firing]]] = {}

    def run(self, skipped: Skipped) -> Tuple[float, object, List[Firing]]:
        """(predicted cost, the driver's result, the firings it made) with
        ``skipped`` skipped."""
        got = self.cache.get(skipped)
        if got is None:
            res = rewrite_program(self.prog, self.patterns, **self.options,
                                  skip=(lambda r, n: (r, n) in skipped) if skipped else None)
            c = self.model.graph_cost(res.ep.graph_module.graph)
            fired = [(r, o if isinstance(o, str) else getattr(o, "name", str(o)))
                     for r, o, _ in res.report.rewrites]
            got = self.cache[skipped] = (c, res, fired)
        return got

    def successors(self, state: Skipped) -> Iterator[Tuple[Firing, Skipped]]:
        for f in self.run(state)[2]:
            yield f, state | {f}

    def cost(self, state: Skipped) -> float:
        return self.run(state)[0]

    def key(self, state: Skipped) -> List[Firing]:
        return sorted(state)


def search_program(prog, patterns: Optional[Sequence] = None, strategy: str = "beam", *,
                   target: str = "cpu", engine: str = "verified", cost: CostModel = None,
                   max_expansions: int = 16, beam_width: int = 4, max_depth: int = 4,
                   time_limit: Optional[float] = None, check_profitability: bool = True,
                   max_iterations: int = 20, check: bool = False,
                   n_random: int = 2) -> ProgramSearch:
    """Search the driver's choices on ``prog`` (a
    :class:`~.loader.LoadedModel`); see the module docstring. ``check``
    compares the chosen program's outputs with the original's (as
    ``rewrite`` does)."""
    check_options(strategy, max_expansions, beam_width, max_depth, time_limit)
    strategy = strategy_of(strategy)
    t0 = time.perf_counter()
    space = ProgramSpace(prog, patterns, cost if cost is not None else CostModel(target),
                         engine=engine, target=target, max_iterations=max_iterations,
                         check_profitability=check_profitability)
    budget = algo.SearchBudget(max_expansions, time_limit, counts="states", spent=1)
    c0 = space.cost(space.start)  # the driver's greedy run: the first of the budget
    if strategy == "beam":
        out = algo.beam(space, budget, max_depth, beam_width)
    elif strategy == "best_first":
        out = algo.best_first(space, budget, max_depth)
    else:  # greedy: the driver's own run
        out = algo.SearchOutcome(space.start, c0, expanded=1)
    res = space.run(out.state)[1]
    if check:
        from .pipeline import check_numerics
        res.numerics, res.other_sizes = check_numerics(prog, res.ep, n_random)
    return ProgramSearch(strategy, res, out.state, out.cost, c0, out.expanded,
                         time.perf_counter() - t0, out.budget_hit,
                         [(v[0], sorted(k)) for k, v in space.cache.items()])


__all__ = ["search_program", "ProgramSearch", "ProgramSpace", "STRATEGIES", "DEPRECATED",
           "check_options"]
