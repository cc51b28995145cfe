"""Rules (``@pm.rule``) and rewriting to a fixpoint (``pm.rewrite``)."""
import os
import subprocess
import sys
import textwrap

import pytest

import pypm_verified as pm


@pm.op(op_class="unary_pointwise")
def Relu(x):
    return 1


@pm.op
def Neg(x):
    return 1


@pm.op
def Add(x, y):
    return 1


@pm.op
def Sub(x, y):
    return 1


@pm.op
def Zero():
    return 1


@pm.pattern
def UnaryChain(x, f):
    return f(UnaryChain(x, f))


@pm.pattern
def UnaryChain(x, f):  # noqa: F811
    return f(x)


@pm.rule(UnaryChain)
def collapse_idempotent(x, f):
    """An idempotent operator applied repeatedly is applied once."""
    assert f is Relu
    return f(x)


@pm.pattern
def AddSelf(x):
    return Add(x, x)


@pm.rule(AddSelf)
def never(x):
    assert x.rank == 99
    return Neg(x)


@pm.rule(AddSelf)
def first(x):
    assert x.rank == 1
    return Relu(x)


@pm.rule(AddSelf)
def second(x):
    return Neg(x)


def test_chain_collapse_converges(engine):
    g = pm.Graph()
    a = g.input("a", shape=(3,))
    n = a
    for _ in range(5):
        n = Relu(n)
    out = g.output(Add(n, Neg(Neg(a))))
    report = pm.rewrite(g, [UnaryChain], engine=engine)
    assert g.outputs == (Add(Relu(a), Neg(Neg(a))),) and out not in g.live()
    # Matches are visited bottom-up (node ids): Relu(a) matches with the
    # replacement Relu(a) itself, which changes nothing and does not count;
    # Relu^2(a) -> Relu(a) rebuilds the chain above it one shorter (hash-
    # consing: the rebuilt Relu^k is the old Relu^(k-1)), so the matches at
    # Relu^3(a) and, in the next pass, at Relu^2(a) fire too. Neg chains
    # match but the rule's assertion fails.
    assert report.firings == {"collapse_idempotent": 3}
    assert all(new is Relu(a) for _, _, new in report.rewrites)
    assert report.iterations == 3 and not report.cap_hit


def test_rules_tried_in_definition_order(engine):
    g = pm.Graph()
    v = g.input("v", shape=(3,))
    m = g.input("m", shape=(2, 2))
    g.output(Sub(Add(v, v), Add(m, m)))
    report = pm.rewrite(g, [AddSelf], engine=engine)
    assert report.firings == {"first": 1, "second": 1}
    assert g.outputs == (Sub(Relu(v), Neg(m)),)


def test_sinks_are_the_default_outputs(engine):
    g = pm.Graph()
    v = g.input("v", shape=(3,))
    s = Add(v, v)
    report = pm.rewrite(g, [AddSelf], engine=engine)
    assert report.total == 1 and g.outputs == (Relu(v),)
    assert s not in g.live()


def test_cap(engine):
    @pm.pattern
    def Grow(x):
        return Neg(x)

    @pm.rule(Grow)
    def grow(x):
        return Neg(Neg(x))
    g = pm.Graph()
    g.output(Neg(g.input("a")))
    report = pm.rewrite(g, [Grow], engine=engine, max_iterations=3)
    assert report.cap_hit and report.iterations == 3
    assert report.firings["grow"] >= 3
    with pytest.raises(ValueError, match="max_iterations"):
        pm.rewrite(g, [Grow], engine=engine, max_iterations=0)


def test_patterns_without_rules_and_empty_graphs(engine):
    @pm.pattern
    def NoRules(x):
        return Neg(x)
    g = pm.Graph()
    g.output(Neg(g.input("a")))
    assert pm.rewrite(g, [NoRules], engine=engine).total == 0
    assert pm.rewrite(pm.Graph(), [AddSelf], engine=engine).total == 0
    with pytest.raises(TypeError):
        pm.rewrite(g, [NoRules.core], engine=engine)
    with pytest.raises(TypeError):
        pm.rewrite("g", [NoRules], engine=engine)


def test_rule_arguments():
    @pm.pattern
    def Either(x, y):
        return Add(x, Zero())

    @pm.rule(Either)
    def builds_a_constant(x):
        assert x.rank == 5
        return Add(x, Zero())

    @pm.pattern
    def Either(x, y):  # noqa: F811
        return Add(x, y)

    seen = []

    @pm.rule(Either)
    def with_default(x, y="unbound"):
        seen.append((x, y))
        return Neg(x)

    @pm.rule(Either)
    def without_default(y, x):
        seen.append((x, y))
        return Neg(x)

    @pm.rule(Either)
    def kw(**bound):
        seen.append(dict(bound))
        return Neg(bound["x"])
    g = pm.Graph()
    a = g.input("a")
    v = g.input("v", shape=(1, 1, 1, 1, 1))
    m = pm.match(Either, g.apply(Add, a, g.apply(Zero)), engine="reference")
    assert m.bindings == {"x": a}
    assert Either.rules[0].fire(m.values, g) is None
    for r in Either.rules[1:]:
        assert r.fire(m.values, g) is Neg(a)
    assert seen == [(a, "unbound"), (a, None), {"x": a}]
    m5 = pm.match(Either, g.apply(Add, v, g.apply(Zero)), engine="reference")
    assert builds_a_constant.fire(m5.values, g) is g.apply(Add, v, g.apply(Zero))
    assert with_default(a) is Neg(a)  # a rule is callable like its function
    assert repr(kw) == "<rule kw of Either>"


def test_rule_asserts_survive_python_O(tmp_path):
    script = tmp_path / "rule_o.py"
    script.write_text(textwrap.dedent("""
        import pypm_verified as pm

        @pm.op
        def F(x):
            return 1

        @pm.pattern
        def P(x):
            return F(x)

        @pm.rule(P)
        def r(x):
            assert x.rank == 2, "needs a matrix"
            return F(F(x))

        g = pm.Graph()
        n = F(g.input("v", shape=(3,)))
        m = pm.match(P, n, engine="reference")
        print(r.fire(m.values, g))
    """))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-O", str(script)], capture_output=True, text=True,
                         env=env, check=True)
    assert out.stdout.strip() == "None"


# ------------------------------------------- interior policy on a pm.Graph

@pm.op
def Mm(x, y):
    return 1


@pm.op
def Gelu(x):
    return 1


@pm.op
def MmGelu(x, y):
    return 1


def _policy_rules(policy):
    @pm.pattern
    def MmThenGelu(x, y):
        return Gelu(Mm(x, y))

    @pm.rule(MmThenGelu, interior=policy)
    def fuse(x, y):
        return MmGelu(x, y)
    return MmThenGelu


def _mm_graph(outside):
    """Gelu(Mm(x, y)), the Mm also used by Neg (``outside``: Neg an output of
    its own, or flowing into the root's consumer only)."""
    g = pm.Graph()
    x, y = g.input("x"), g.input("y")
    mm = g.apply(Mm, x, y)
    root = g.apply(Gelu, mm)
    if outside == "output":
        g.output(g.apply(Add, root, g.apply(Neg, root)))
        g.output(g.apply(Neg, mm))
    elif outside == "none":
        g.output(root)
    return g, root


@pytest.mark.parametrize("engine", ["reference", "verified"])
def test_rewrite_interior_policy(engine):
    for policy in ("duplicate", "relay", "refuse"):
        g, root = _mm_graph("output")
        r = pm.rewrite(g, [_policy_rules(policy)], engine=engine)
        if policy == "duplicate":  # fires: the outside Neg keeps its own Mm
            assert r.total == 1
            assert sum(n.op is MmGelu for n in g.live()) == 1
            assert sum(n.op is Mm for n in g.live()) == 1
        else:  # Neg(Mm) reaches an output without passing through Gelu
            assert r.total == 0
            ((why, _),) = r.why_not_fired("MmThenGelu", "fuse")
            assert f"interior='{policy}'" in why and "is also used by" in why, why
        g, root = _mm_graph("none")  # no outside use: every policy fires
        assert pm.rewrite(g, [_policy_rules(policy)], engine=engine).total == 1


@pytest.mark.parametrize("engine", ["reference", "verified"])
def test_rewrite_interior_relay_dominated(engine):
    """The outside user flows into the root only: Relay's check lets the
    match proceed (the Mm is computed twice), 'refuse' does not."""
    for policy, fires in (("relay", 1), ("refuse", 0), ("duplicate", 1)):
        @pm.pattern
        def AddGelu(x, y, z):
            return Add(Gelu(Mm(x, y)), z)

        @pm.rule(AddGelu, interior=policy)
        def fuse(x, y, z):
            return Add(MmGelu(x, y), z)

        g = pm.Graph()
        mm = g.apply(Mm, g.input("x"), g.input("y"))
        g.output(g.apply(Add, g.apply(Gelu, mm), g.apply(Neg, mm)))
        r = pm.rewrite(g, [AddGelu], engine=engine)
        assert r.total == fires, (policy, r.declines)
        if not fires:
            ((why, _),) = r.why_not_fired("AddGelu", "fuse")
            assert "interior='refuse'" in why
