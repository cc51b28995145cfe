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
predicts slower can be left out. Beam search keeps the ``beam_width``
cheapest states per depth; A* expands states cheapest first; both within
``max_expansions`` driver runs (or ``time_limit`` seconds) and ``max_depth``
skipped firings, and both return greedy's graph unless they found a
cheaper one (so they are never costlier under the same cost model).

Each state's graph comes from the driver itself (``pipeline.rewrite_program``
with ``skip``): the search chooses, the driver rewrites, so every rule
application is found by the verified engine and fired by ``Rule.fire``
exactly as in a greedy run, and the result is checked like one.
"""
from __future__ import annotations

import heapq
import time
from dataclasses import dataclass, field
from typing import FrozenSet, List, Optional, Sequence, Tuple

from .cost import CostModel
from .pipeline import rewrite_program

STRATEGIES = ("greedy", "beam", "astar")
Firing = Tuple[str, str]  # (rule name, root node name)


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


def check_options(strategy: str, max_expansions: int, beam_width: int, max_depth: int,
                  time_limit: Optional[float]) -> None:
    """Raise ValueError with a clear message for a bad option."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown search strategy {strategy!r}; expected one of "
                         f"{', '.join(STRATEGIES)}")
    for name, v, lo in (("max_expansions", max_expansions, 1), ("beam_width", beam_width, 1),
                        ("max_depth", max_depth, 0)):
        if not isinstance(v, int) or isinstance(v, bool) or v < lo:
            raise ValueError(f"{name} must be an int >= {lo}, not {v!r}")
    if time_limit is not None and (not isinstance(time_limit, (int, float))
                                   or isinstance(time_limit, bool) or time_limit <= 0):
        raise ValueError(f"time_limit must be a positive number of seconds, not {time_limit!r}")


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
    model = cost if cost is not None else CostModel(target)
    t0 = time.perf_counter()
    deadline = None if time_limit is None else t0 + time_limit
    cache = {}

    def run(skipped: FrozenSet[Firing]):
        got = cache.get(skipped)
        if got is None:
            res = rewrite_program(prog, patterns, engine=engine, target=target,
                                  max_iterations=max_iterations, check=False,
                                  check_profitability=check_profitability,
                                  skip=(lambda r, n: (r, n) in skipped) if skipped else None)
            c = model.graph_cost(res.ep.graph_module.graph)
            fired = [(r, o if isinstance(o, str) else getattr(o, "name", str(o)))
                     for r, o, _ in res.report.rewrites]
            got = cache[skipped] = (c, res, fired)
        return got

    start = frozenset()
    c0, res0, fired0 = run(start)
    best = (c0, start)
    runs = 1
    hit = False
    if strategy != "greedy":
        seen = {start}
        if strategy == "beam":
            level = [start]
            for _ in range(max_depth):
                nxt = []
                for s in level:
                    for f in run(s)[2]:
                        t = s | {f}
                        if t in seen:
                            continue
                        if runs >= max_expansions or (deadline and time.perf_counter() > deadline):
                            hit = True
                            break
                        seen.add(t)
                        runs += 1
                        c = run(t)[0]
                        nxt.append((c, sorted(t), t))
                        if c < best[0]:
                            best = (c, t)
                    if hit:
                        break
                level = [t for _, _, t in sorted(nxt)[:beam_width]]
                if hit or not level:
                    break
        else:  # astar: cheapest first
            opened = [(c0, 0, [], start)]
            tie = 0
            while opened and not hit:
                c, d, _, s = heapq.heappop(opened)
                if d >= max_depth:
                    continue
                for f in run(s)[2]:
                    t = s | {f}
                    if t in seen:
                        continue
                    if runs >= max_expansions or (deadline and time.perf_counter() > deadline):
                        hit = True
                        break
                    seen.add(t)
                    runs += 1
                    ct = run(t)[0]
                    if ct < best[0]:
                        best = (ct, t)
                    tie += 1
                    heapq.heappush(opened, (ct, d + 1, tie, t))
    c, skipped = best
    res = run(skipped)[1]
    if check:
        from .pipeline import check_numerics
        res.numerics, res.other_sizes = check_numerics(prog, res.ep, n_random)
    return ProgramSearch(strategy, res, skipped, c, c0, runs, time.perf_counter() - t0, hit,
                         [(v[0], sorted(k)) for k, v in cache.items()])


__all__ = ["search_program", "ProgramSearch", "STRATEGIES", "check_options"]
