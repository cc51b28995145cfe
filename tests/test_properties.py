"""Property tests of the reference matcher on random well-formed tables of the
full calculus (tests/strategies.py):

* against a direct transcription of the algorithmic semantics behind the
  entry point (tests/machine.py, ``Entry.match_root``: the root-operator
  index, then ``Interpreter.run``): the same result (match with the same
  substitutions, no match, or out of fuel) for every fuel;
* against the declarative relation (``declarative.check``): every solution
  it yields is derivable (soundness), the first binds the root's pbinds,
  and "no match" means no substitution of the parameters works
  (completeness, checked exhaustively when the space is small).
"""
import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pypm_verified as pm
from pypm_verified import core
from pypm_verified.engines import declarative, reference
from machine import OUT_OF_FUEL, match_pattern, match_root
from strategies import chain_graphs, graphs, patterns, patterns_for, programs

SETTINGS = settings(max_examples=600, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FUEL = 20_000


@st.composite
def problems(draw):
    """(graph, root node, program)"""
    g = draw(st.one_of(graphs(), chain_graphs()))
    root = g.nodes[draw(st.integers(0, len(g) - 1))]
    return g, root, draw(programs(root))


@st.composite
def basic_problems(draw):
    g = draw(graphs())
    root = g.nodes[draw(st.integers(0, len(g) - 1))]
    return g, root, core.as_program(draw(st.one_of(patterns, patterns_for(root))))


def ref_outcome(prog, node, fuel):
    try:
        return reference.first_solution(prog, node, fuel)
    except pm.OutOfFuel:
        return OUT_OF_FUEL


@pytest.mark.slow
@SETTINGS
@given(st.one_of(problems(), basic_problems()), st.integers(1, 400))
def test_reference_is_the_algorithm(prob, fuel):
    """The first solution is the machine's result, and both need the same
    number of steps (so they run out of fuel alike); the root-operator index
    answers first in both. Where the index lets the root match, the entry
    point is the bare machine."""
    g, root, prog = prob
    assert ref_outcome(prog, root, fuel) == match_root(prog, root, fuel)
    assert ref_outcome(prog, root, FUEL) == match_root(prog, root, FUEL)
    if core.root_admits(prog.defs, prog.root, root):
        assert match_root(prog, root, fuel) == match_pattern(prog, root, fuel)
    else:  # the index changes only answers the machine does not decide
        assert match_pattern(prog, root, FUEL) in (None, OUT_OF_FUEL)


def _assignments(prog, g):
    d = prog.root_def
    labels = sorted({n.label for n in g.nodes})
    size = len(g.nodes) ** d.nparams * len(labels) ** d.nfparams
    if size > 200:
        return None
    return ((dict(enumerate(ts)), dict(enumerate(fs)))
            for ts in itertools.product(g.nodes, repeat=d.nparams)
            for fs in itertools.product(labels, repeat=d.nfparams))


@pytest.mark.slow
@SETTINGS
@given(st.one_of(problems(), basic_problems()))
def test_reference_against_the_declarative_relation(prob):
    g, root, prog = prob
    sol = ref_outcome(prog, root, FUEL)
    if sol == OUT_OF_FUEL:
        return
    if sol is not None:
        theta, phi = sol
        assert declarative.check(prog, theta, root, phi)
        assert set(prog.root_def.pbinds) <= set(theta)
        assert set(prog.root_def.pfbinds) <= set(phi)
        # the public API reports the same
        m = pm.match(prog, root, engine="reference", fuel=FUEL)
        assert (m.substitution, m.fsubstitution) == sol and m.root is root
    else:
        assert pm.match(prog, root, engine="reference", fuel=FUEL) is None
        space = _assignments(prog, g)
        if space is not None:  # complete: no substitution at all
            for theta, phi in space:
                assert not declarative.check(prog, theta, root, phi)


@pytest.mark.slow
@SETTINGS
@given(problems())
def test_every_solution_is_derivable(prob):
    g, root, prog = prob
    fuel = reference.Fuel(FUEL)
    seen = []
    try:
        for theta, phi in itertools.islice(reference.solutions(prog, root, fuel=fuel), 20):
            assert declarative.check(prog, theta, root, phi)
            seen.append((theta, phi))
    except pm.OutOfFuel:
        pass
    if seen:
        assert ref_outcome(prog, root, FUEL) == seen[0]
