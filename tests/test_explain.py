"""``pm.explain`` / ``pm.explain_all`` and ``python -m pypm_verified explain``:
why a pattern did not match.

Hand-written cases for every kind of failure (wrong operator, failing guard
with the values it read, unknown size, nonlinear conflict, operator
variable conflict, op_class, root index, fuel) in every engine (the
``engine`` fixture: reference, verified, simulated); then the consistency
requirement on random core programs and random ``@pm.pattern`` programs:
every explained "no" is the engine's "no" (the instrumented search finds no
match where the engine says none, and finds one where it matched); and the
CLI on a tiny attention model whose softmax is on the wrong axis.
"""
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pypm_verified as pm
from pypm_verified.engines import explain as ex
from pypm_verified.engines.binding import open_engine_library
from pypm_verified.errors import EngineUnavailable

from strategies import chain_graphs, graphs, programs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pm.op
def XMatMul(x, y):
    return 1


@pm.op
def XTrans(x):
    return 1


@pm.op
def XAdd(x, y):
    return 1


@pm.op(op_class="unary_pointwise")
def XRelu(x):
    return 1


@pm.op(op_class="other_class")
def XNeg(x):
    return 1


@pm.pattern
def MMxyT(x, y):
    assert x.shape.rank == 2 and y.shape.rank == 2
    yt = XTrans(y)
    return XMatMul(x, yt)


@pm.pattern
def Dbl(x):
    return XAdd(x, x)


@pm.pattern
def FirstDim4(x):
    assert x.shape[0] == 4
    return XTrans(x)


@pm.pattern
def SameUnary(x, F):
    assert F.op_class == pm.opclass("unary_pointwise")
    return XAdd(F(x), F(x))


@pm.pattern
def Loop(x):
    return Loop(x)


@pm.pattern
def Loop(x):  # noqa: F811
    return XRelu(x)


@pm.pattern
def Two(x):
    return XTrans(XRelu(x))


@pm.pattern
def Two(x):  # noqa: F811
    return XTrans(XNeg(x))


@pytest.fixture
def g():
    g = pm.Graph()
    g.a = g.input("a", shape=(4, 8), dtype=pm.f32)
    g.b = g.input("b", shape=(16, 8, 1), dtype=pm.f32)
    g.c = g.input("c", shape=(None, 8), dtype=pm.f32)
    return g


def no(pattern, node, engine, kind):
    e = pm.explain(pattern, node, engine=engine)
    assert e.verdict == "no match" and not e.matched, str(e)
    assert pm.match(pattern, node, engine=engine) is None
    assert e.kind == kind, str(e)
    return e


def test_match_is_reported(g, engine):
    t = g.apply(XMatMul, g.a, g.apply(XTrans, g.c))
    e = pm.explain(MMxyT, t, engine=engine)
    assert e.matched and e.verdict == "match"
    assert e.match.bindings == {"x": g.a, "y": g.c}
    assert "MATCHES" in str(e)


def test_wrong_operator(g, engine):
    add = g.apply(XAdd, g.b, g.b)
    e = no(MMxyT, g.apply(XMatMul, g.a, add), engine, "operator")
    assert e.at == add and e.details["expected"] == ["XTrans"]
    assert e.details["found"] == "XAdd"
    assert e.definition == "MMxyT" and e.alternate == 0
    assert e.path == ("MMxyT", "XMatMul arg 1")
    assert "expected operator XTrans, found %" in e.message


def test_failing_guard_with_values(g, engine):
    t = g.apply(XMatMul, g.a, g.apply(XTrans, g.b))
    e = no(MMxyT, t, engine, "guard")
    assert e.details["guard"] == "y.rank == 2"
    assert e.details["values"] == {"y.rank": "3"}
    assert "y.rank = 3" in e.message and "x.rank == 2 and y.rank == 2" in e.message
    assert e.line and e.line.endswith(f"test_explain.py:{MMxyT.traced_alternates()[0].lineno}")
    assert e.details["line"].endswith(str(MMxyT.traced_alternates()[0].lineno + 1))


def test_unknown_size(g, engine):
    e = no(FirstDim4, g.apply(XTrans, g.c), engine, "unknown")
    assert e.details["values"] == {"x.shape[0]": "unknown"}
    assert "x.shape[0] unknown" in e.message
    assert pm.explain(FirstDim4, g.apply(XTrans, g.a), engine=engine).matched


def test_nonlinear_conflict(g, engine):
    e = no(Dbl, g.apply(XAdd, g.a, g.b), engine, "nonlinear")
    assert e.details["bound"] == g.a and e.details["found"] == g.b
    assert e.at == g.b and e.depth == 2
    assert "variable x is already bound to %0" in e.message


def test_operator_variable_conflict_and_op_class(g, engine):
    e = no(SameUnary, g.apply(XAdd, g.apply(XRelu, g.a), g.apply(XNeg, g.a)), engine, "opvar")
    assert e.details["expected"] == ["XRelu"] and e.details["found"] == "XNeg"
    e = no(SameUnary, g.apply(XAdd, g.apply(XNeg, g.a), g.apply(XNeg, g.a)), engine, "guard")
    assert e.details["values"] == {"F.op_class": "'other_class'"}
    assert "F.op_class == 'unary_pointwise'" in e.message
    assert pm.explain(SameUnary, g.apply(XAdd, g.apply(XRelu, g.a), g.apply(XRelu, g.a)),
                      engine=engine).matched


def test_alternates_merge_expected_operators(g, engine):
    e = no(Two, g.apply(XTrans, g.apply(XAdd, g.a, g.a)), engine, "operator")
    assert e.details["expected"] == ["XRelu", "XNeg"]
    assert "expected operator XRelu or operator XNeg" in e.message


def test_root_index(g, engine):
    e = no(MMxyT, g.apply(XAdd, g.a, g.b), engine, "root")
    assert "root can only be XMatMul, found XAdd" in e.message
    assert str(e).count("\n") == 1


def test_fuel(g, engine):
    # Loop(x) = Loop(x) | XRelu(x) at a Relu never ends (README): OutOfFuel
    e = pm.explain(Loop, g.apply(XRelu, g.a), engine=engine, fuel=500)
    assert e.verdict == "out of fuel" and e.kind == "fuel" and not e.matched
    assert "ran out of fuel" in e.message and e.truncated
    # at a MatMul the root index answers first: a proved no, whatever the fuel
    assert pm.explain(Loop, g.apply(XMatMul, g.a, g.a), engine=engine).kind == "root"


def test_explain_all_ranks_by_depth(g, engine):
    g.apply(XMatMul, g.a, g.apply(XAdd, g.b, g.b))      # depth 2
    g.apply(XMatMul, g.a, g.apply(XTrans, g.b))         # depth 4 (guard)
    ok = g.apply(XMatMul, g.a, g.apply(XTrans, g.c))    # a match: not a near miss
    misses = pm.explain_all(MMxyT, g, engine=engine)
    assert [m.kind for m in misses] == ["guard", "operator"]
    assert all(m.node != ok for m in misses)
    assert len(pm.explain_all(MMxyT, g.nodes, top=1, engine=engine)) == 1


def test_bad_arguments(g):
    with pytest.raises(ValueError):
        pm.explain(MMxyT, g.a, engine="nope")
    with pytest.raises(TypeError):
        pm.explain(MMxyT, "not a node")


# ------------------------------------------- consistency with the engines


def _engines():
    try:
        open_engine_library()
        return ("reference", "verified")
    except EngineUnavailable:
        if os.environ.get("PYPM_REQUIRE_LIB"):
            raise
        return ("reference",)


def _consistent(pattern, node, engine, fuel):
    try:
        want = pm.match(pattern, node, engine=engine, fuel=fuel)
    except pm.OutOfFuel:
        want = "oof"
    e = pm.explain(pattern, node, engine=engine, fuel=fuel, step_limit=1 << 16)
    if want == "oof":
        assert e.verdict == "out of fuel" and e.kind == "fuel"
    elif want is None:
        assert e.verdict == "no match" and e.kind is not None and e.message
    else:
        assert e.matched and e.match == want
        # and the instrumented search finds a match too (else it raises)
        ex._search(pattern, node, engine, 1 << 16, ex.node_desc, "match")


@settings(max_examples=300, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.filter_too_much])
@given(st.data())
def test_every_explained_no_is_an_engine_no_core(data):
    g = data.draw(st.one_of(graphs(), chain_graphs()))
    root = g.nodes[data.draw(st.integers(0, len(g) - 1))]
    prog = data.draw(programs(root))
    for engine in _engines():
        _consistent(prog, root, engine, 20_000)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.filter_too_much])
@given(st.data())
def test_every_explained_no_is_an_engine_no_dsl(tmp_path_factory, data):
    from dsl_interpreter import load, to_source
    from dsl_strategies import programs as dsl_programs, shaped_graphs
    prog = data.draw(dsl_programs(), label="program")
    g = data.draw(st.one_of(shaped_graphs(prog), graphs(max_nodes=6)), label="graph")
    d = tmp_path_factory.mktemp("explain_dsl")
    mod = load(to_source(prog), d, f"pypm_explain_case_{os.getpid()}_{d.name}")
    for name in sorted(prog.patterns):
        P = getattr(mod, name)
        for node in g.nodes:
            for engine in _engines():
                _consistent(P, node, engine, 20_000)


# ------------------------------------------------------------------ the CLI

MODEL = """
import sys, torch, torch.nn as nn
class M(nn.Module):
    def forward(self, q, k, v):
        s = torch.matmul(q, k.transpose(-2, -1))
        return torch.matmul(torch.softmax(s, dim=2) * 2.0, v)   # scaled after the softmax
x = torch.randn(1, 2, 4, 8)
torch.export.save(torch.export.export(M(), (x, x, x)), sys.argv[1])
"""

PATTERNS = """
import pypm_verified as pm
from pypm_verified.torch.ops import MatMul, Softmax

@pm.pattern
def SoftmaxAxis2(x):
    assert x.rank == 3
    return Softmax(x, 2, None)
"""


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    pytest.importorskip("torch")
    d = tmp_path_factory.mktemp("explain_cli")
    path = str(d / "att.pt2")
    subprocess.run([sys.executable, "-c", MODEL, path], check=True, env=_env())
    (d / "pats.py").write_text(PATTERNS)
    return path, str(d / "pats.py")


def _env():
    return dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))


def _cli(*args):
    p = subprocess.run([sys.executable, "-m", "pypm_verified", "explain", *args],
                       capture_output=True, text=True, env=_env(), timeout=300)
    return p.returncode, p.stdout, p.stderr


def test_cli_near_misses_library_attention(model):
    rc, out, err = _cli(model[0], "--pattern", "Attention", "--rules", "attention")
    assert rc == 0, err
    assert "pattern Attention: matches at 0 node(s)" in out
    misses = {m.split(":")[0]: m for m in out.split("\n\n")[1:]}
    second = misses["pattern Attention at matmul_1 = MatMul "]
    assert "failed in Soft, alternate 0" in second  # the softmax step of the attention family
    assert ("expected operator Softmax or operator SafeSoftmax, found mul = Mul"
            in second)  # the weights scaled after the softmax


def test_cli_node_and_custom_pattern(model):
    rc, out, err = _cli(model[0], "--pattern", "SoftmaxAxis2", "--rules", model[1],
                        "--node", "softmax")
    assert rc == 0, err
    assert "pattern SoftmaxAxis2 at softmax = Softmax" in out
    assert "[guard] guard `x.rank == 3`" in out and "x.rank = 4" in out
    rc, out, err = _cli(model[0], "--pattern", "SoftmaxAxis2", "--rules", model[1],
                        "--node", "matmul", "--engine", "reference")
    assert rc == 0, err
    assert "root can only be Softmax, found MatMul" in out


def test_cli_errors(model):
    rc, _, err = _cli(model[0], "--pattern", "Nope", "--rules", model[1])
    assert rc == 2 and "no such pattern" in err and "SoftmaxAxis2" in err
    rc, _, err = _cli(model[0], "--pattern", "SoftmaxAxis2", "--rules", model[1],
                      "--node", "softmx")
    assert rc == 2 and "no FX node" in err
