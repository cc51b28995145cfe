"""One matcher in Python, with a tracing hook; one guard evaluator.

* A traced search (``reference.solutions(..., tracer=...)``: what
  ``pm.explain`` and the cover of a match run) has the solutions of the
  untraced one, in the same order, on random tables and graphs; its events
  are consistent (a failure's position is one the tracer made, the
  tracer's store is undone on backtracking).
* The shared guard evaluator (``engines/truth.py``): the matcher's strict
  three-valued logic, Kleene's for UNDECIDED (the dynamic-shape re-check),
  and PENDING (the instance checker) as documented; the reference's
  ``guard_value`` agrees with the independent declarative oracle's guards.
"""
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pypm_verified as pm
from pypm_verified.core import EAttr, EConst, EMul, GAnd, GEq, GLt, GNot, GOr, GTrue
from pypm_verified.engines import declarative, reference, truth
from strategies import chain_graphs, graphs, guards, programs

SETTINGS = settings(max_examples=100, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])
FUEL = 3_000


class Recorder(reference.Tracer):
    """Positions are paths (tuples); store 2 holds the successes on the way."""

    stores = 1

    def __init__(self):
        self.steps = 0
        self.fails = []
        self.positions = set()

    def start(self, search):
        self.search = search

    def _pos(self, at, item):
        p = (at or ()) + (item,)
        self.positions.add(p)
        return p

    def alternate(self, at, d, j):
        return self._pos(at, ("alt", d, j))

    def argument(self, at, p, i):
        return self._pos(at, ("arg", i))

    def constraint(self, at, p):
        return self._pos(at, ("constr",))

    def step(self, p, t, at):
        assert at in self.positions
        self.steps += 1

    def advance(self):
        marks = self.search.st[2]
        self.search.bind(2, len(marks), True)

    def fail(self, why, p, t, env, at, other=None):
        assert at in self.positions
        self.fails.append((why, len(self.search.st[2])))


def _all(prog, node, tracer=None, limit=50):
    out = []
    try:
        for i, (th, ph) in enumerate(reference.solutions(prog, node, fuel=reference.Fuel(FUEL),
                                                         tracer=tracer)):
            out.append((sorted((k, v.id) for k, v in th.items()), sorted(ph.items())))
            if i + 1 >= limit:
                return out
    except pm.OutOfFuel:
        out.append("out of fuel")
        return out
    if tracer is not None:  # every solution enumerated: all undone
        assert tracer.search.st[2] == {} and tracer.search.trail == []
    return out


@SETTINGS
@given(st.data())
def test_a_traced_search_is_the_search(data):
    g = data.draw(st.one_of(graphs(), chain_graphs()))
    root = g.nodes[data.draw(st.integers(0, len(g) - 1))]
    prog = data.draw(programs(root))
    plain = _all(prog, root)
    rec = Recorder()
    traced = _all(prog, root, rec)
    if "out of fuel" in plain or "out of fuel" in traced:
        # the traced search takes no fuel for the ‖ of a definition's spine:
        # it may get further, never elsewhere
        n = max(0, min(len(plain), len(traced)) - 1)
        assert plain[:n] == traced[:n]
    else:
        assert plain == traced
    assert rec.steps > 0
    assert all(why in ("scope", "nonlinear", "operator", "arity", "opvar", "guard", "local",
                       "constraint", "call") for why, _ in rec.fails)


@SETTINGS
@given(st.data())
def test_guard_value_is_the_oracles(data):
    g = data.draw(graphs())
    theta = {x: g.nodes[data.draw(st.integers(0, len(g) - 1))]
             for x in range(3) if data.draw(st.booleans())}
    gd = data.draw(guards(list(range(3))))
    v = reference.guard_value(gd, theta, {}, g)
    assert v in (True, False, None)
    assert (v is True) == declarative.guard_holds(gd, theta, {}, g)


class Leaves(truth.Evaluator):
    """``x.α`` is ``ctx[x]`` (a value, UNKNOWN, or an Undecided)."""

    def attr(self, x, attr, ctx):
        return ctx[x]

    def fattr(self, F, attr, ctx):
        return truth.UNKNOWN


def _leaf(x):
    return GEq(EAttr(x, 0), EConst(1))  # true, false, or the leaf's undecided value


def test_logic_tables():
    ev = Leaves()
    T, F, U, D, P = True, False, None, truth.UNDECIDED, truth.PENDING
    val = {T: 1, F: 0, U: None, D: D, P: P}

    def run(g, *args):
        return ev.truth(g(*(_leaf(i) for i in range(len(args)))),
                        {i: val[a] for i, a in enumerate(args)})
    # strict in the unknown, even where the other side decides
    for x in (T, F, D, P):
        assert run(GAnd, F, U) is None and run(GOr, T, U) is None and run(GAnd, U, x) is None
    assert run(GNot, U) is None and run(GNot, D) is D and run(GNot, P) is P
    # Kleene for undecided
    assert run(GAnd, F, D) is False and run(GAnd, D, F) is False and run(GAnd, T, D) is D
    assert run(GOr, T, D) is True and run(GOr, D, T) is True and run(GOr, F, D) is D
    # pending may turn out unknown: true or pending is pending; false and pending is false
    assert run(GOr, T, P) is P and run(GOr, P, T) is P and run(GOr, F, P) is P
    assert run(GAnd, F, P) is False and run(GAnd, P, F) is False and run(GAnd, T, P) is P
    assert ev.truth(GTrue(), {}) is True
    assert ev.truth(GLt(EConst(1), EConst(2)), {}) is True
    # bounded arithmetic: an operand out of bounds is unknown
    assert ev.truth(GEq(EMul(EConst(1 << 31), EConst(1)), EConst(0)), {}) is None
    assert ev.truth(GOr(GEq(EMul(EConst(3), EAttr(0, 0)), EConst(3)), GTrue()), {0: P}) is P
