"""Property tests: the reference matcher against the declarative relation and
against a direct transcription of the algorithmic semantics (paper Fig. 7)."""
import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pypm_verified as pm
from pypm_verified import core, declarative, reference
from pypm_verified.core import PAlt, PApp, PGuard, PVar
from strategies import graphs, patterns, patterns_for

SETTINGS = settings(max_examples=500, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def problems(draw):
    g = draw(graphs())
    root = g.nodes[draw(st.integers(0, len(g) - 1))]
    p = draw(st.one_of(patterns, patterns_for(root)))
    return g, root, p


def machine(p, t):
    """The state machine of Fig. 7 (+ guards, Fig. 17): a test oracle only."""
    theta, stack, k = {}, [], [("match", p, t)]
    while True:
        if not k:
            return theta
        a, rest = k[0], k[1:]
        ok = True
        if a[0] == "guard":
            ok = declarative.guard_holds(a[1], theta)
            k = rest
        else:
            _, q, n = a
            if isinstance(q, PVar):
                if q.x not in theta:
                    theta = {**theta, q.x: n}
                else:
                    ok = theta[q.x] == n
                k = rest
            elif isinstance(q, PApp):
                ok = q.f == n.label and len(q.args) == len(n.args)
                k = [("match", pi, ti) for pi, ti in zip(q.args, n.args)] + rest
            elif isinstance(q, PAlt):
                stack.append((theta, [("match", q.p2, n)] + rest))
                k = [("match", q.p1, n)] + rest
            elif isinstance(q, PGuard):
                k = [("match", q.p, n), ("guard", q.g)] + rest
        if not ok:
            if not stack:
                return None
            theta, k = stack.pop()


@SETTINGS
@given(problems())
def test_reference_matcher(prob):
    g, root, p = prob
    assert core.wf(p)
    theta = reference.first_solution(p, root)
    # the first solution is the algorithmic semantics' result
    assert theta == machine(p, root)
    if theta is not None:
        # sound: the declarative relation holds, and binds(p) is bound
        assert declarative.check(p, theta, root)
        assert core.binds(p) <= set(theta)
    else:
        # complete: no substitution at all (by weakening, total ones suffice)
        vs = sorted(core.pattern_vars(p))
        for nodes in itertools.product(g.nodes, repeat=len(vs)):
            assert not declarative.check(p, dict(zip(vs, nodes)), root)
    # every solution, not only the first, is valid
    for th in itertools.islice(reference.solutions(p, root, {}), 50):
        assert declarative.check(p, th, root)
    # the public API returns the same substitution
    m = pm.match(p, root, engine="reference")
    assert (m is None) == (theta is None)
    assert m is None or (m.substitution == theta and m.root is root and m.pattern is p)
