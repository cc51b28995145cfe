"""Operators bound to ATen targets: each ``@pm.op(torch=...)`` declaration is
its own operator (a user's rules file never changes the library's), the
targets users name (packets, torch functions) resolve or are refused where
declared, and the Python entry points accept exported programs."""
import ast
import importlib.util
import itertools
import os
import subprocess
import sys
import textwrap
import warnings

import pytest

torch = pytest.importorskip("torch")

import torch.nn as nn  # noqa: E402

import pypm_verified as pm  # noqa: E402
from pypm_verified.errors import RewriteWarning  # noqa: E402
from pypm_verified.library import attention, gelu  # noqa: E402
from pypm_verified.torch import ops, rewrite_graph_module  # noqa: E402
from pypm_verified.torch.importer import TermGraph  # noqa: E402

aten = torch.ops.aten
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_count = itertools.count()

HEADER = """\
import torch
import pypm_verified as pm
from pypm_verified.torch import ops
aten = torch.ops.aten
"""


def load_user_module(tmp_path, body: str):
    """Import ``body`` as a user's rules file; (module, its path)."""
    name = f"user_rules_{next(_count)}"
    path = tmp_path / f"{name}.py"
    path.write_text(HEADER + textwrap.dedent(body))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, str(path)


def line_of(path: str, needle: str) -> int:
    with open(path) as f:
        return next(i for i, line in enumerate(f, 1) if needle in line)


class SigmoidGate(nn.Module):
    """``y * sigmoid(y)``: ``aten.mul.Tensor(y, sigmoid(y))`` once exported."""

    def forward(self, x):
        y = x + 1.0
        return y * torch.sigmoid(y)


def exported(model=None):
    with torch.no_grad():
        return torch.export.export(model or SigmoidGate(), (torch.randn(4, 8),)) \
            .run_decompositions({})


def matched(pattern, ep) -> bool:
    tg = TermGraph(ep.graph_module.graph).build()
    return any(pm.match(pattern, t) is not None for t in tg.term.values())


COMMUTATIVE_MUL = """
@pm.op(torch=[aten.mul.Tensor], commutative=True)
def Mul(x, y):
    return 1


@pm.pattern
def SigmoidFirst(x):
    return Mul(ops.Sigmoid(x), x)


@pm.rule(SigmoidFirst)
def to_silu(x):
    return ops.Silu(x)
"""


@pm.pattern
def LibrarySigmoidFirst(x):
    return ops.Mul(ops.Sigmoid(x), x)


@pm.pattern
def LibrarySigmoidSecond(x):
    return ops.Mul(x, ops.Sigmoid(x))


# ------------------------------------------------- a declaration is its own


def test_user_commutative_mul_leaves_the_library_unchanged(tmp_path):
    before = (str(pm.termination(attention.Attention)), str(pm.termination(gelu.GeluTanh)))
    assert before[0].startswith("Attention: ") and before[1].startswith("GeluTanh: ")
    user, _ = load_user_module(tmp_path, COMMUTATIVE_MUL)
    after = (str(pm.termination(attention.Attention)), str(pm.termination(gelu.GeluTanh)))
    assert after == before
    assert user.Mul is not ops.Mul
    assert user.Mul.commutative == (0, 1) and ops.Mul.commutative is None
    # both label the graph's aten.mul.Tensor nodes alike
    assert user.Mul.symbol == ops.Mul.symbol and user.Mul.torch_targets == (aten.mul.Tensor,)


def test_two_declarations_of_one_overload_each_see_their_own(tmp_path):
    user, _ = load_user_module(tmp_path, COMMUTATIVE_MUL)
    ep = exported()
    # the graph multiplies y by sigmoid(y): only the commutative Mul matches it sigmoid-first
    assert matched(user.SigmoidFirst, ep)
    assert not matched(LibrarySigmoidFirst, ep)
    assert matched(LibrarySigmoidSecond, ep)
    x = torch.randn(4, 8)
    report = pm.rewrite(ep, [user.SigmoidFirst])
    assert report.total == 1
    calls = [n.target for n in ep.graph.nodes if n.op == "call_function"]
    assert aten.silu.default in calls and aten.mul.Tensor not in calls
    torch.testing.assert_close(ep.module()(x), torch.nn.functional.silu(x + 1.0))


def test_one_parameter_mul_is_refused_naming_the_schema(tmp_path):
    with pytest.raises(pm.PatternError) as e:
        _, path = load_user_module(tmp_path, """
            @pm.op(torch=[aten.mul.Tensor])
            def Mul(x):
                return 1
            """)
    path = str(next(tmp_path.glob("*.py")))
    msg = str(e.value)
    assert "aten::mul.Tensor(Tensor self, Tensor other)" in msg
    assert "operator has 1 parameter(s)" in msg
    assert f"{os.path.basename(path)}:{line_of(path, '@pm.op')}" in msg
    assert ops.Mul.arity == 2
    # without torch= it is an operator of its own, one argument
    mul1 = pm.op(lambda x: 1)
    assert mul1.arity == 1 and mul1 is not ops.Mul


def test_has_attr_names_the_declarations_own_parameters(tmp_path):
    user, _ = load_user_module(tmp_path, """
        @pm.op(torch=[aten.softmax.int])
        def Soft(t, axis, dt):
            return 1


        @pm.pattern
        def LastAxis(x):
            return Soft(x, pm.wildcard(), None).has_attr(axis=-1)
        """)

    class M(nn.Module):
        def forward(self, x):
            return torch.softmax(x, -1)
    assert matched(user.LastAxis, exported(M()))
    assert user.Soft is not ops.Softmax


def test_a_conflicting_op_class_is_refused_naming_both_places(tmp_path):
    with pytest.raises(pm.PatternError) as e:
        load_user_module(tmp_path, """
            @pm.op(torch=[aten.mul.Tensor], op_class="unary_pointwise")
            def Mul(x, y):
                return 1
            """)
    path = str(next(tmp_path.glob("*.py")))
    msg = str(e.value)
    assert f"{os.path.basename(path)}:{line_of(path, '@pm.op')}" in msg
    ops_py = os.path.join("torch", "ops.py")
    line = line_of(ops.__file__, 'Mul = declare("Mul"')
    assert f"{ops_py}:{line}" in msg
    assert "binary_pointwise" in msg and ops.Mul.op_class == "binary_pointwise"


# --------------------------------------------------- targets as users name them


def test_packets_and_torch_functions_resolve_and_match(tmp_path):
    user, _ = load_user_module(tmp_path, """
        @pm.op(torch=[aten.mul])
        def PMul(x, y):
            return 1


        @pm.op(torch=[torch.sigmoid])
        def Sig(x):
            return 1


        @pm.op(torch=[torch.mul])
        def TMul(x, y):
            return 1


        @pm.op(torch=[torch.nn.functional.silu])
        def FSilu(x):
            return 1


        @pm.pattern
        def Gate(y):
            return PMul(y, Sig(y))


        @pm.pattern
        def TGate(y):
            return TMul(y, Sig(y))


        @pm.rule(Gate)
        def gate_to_silu(y):
            return FSilu(y)
        """)
    assert user.PMul.torch_targets == (aten.mul.Tensor, aten.mul.Scalar)
    assert user.TMul.torch_targets == (aten.mul.Tensor, aten.mul.Scalar)
    assert user.Sig.torch_targets == (aten.sigmoid.default,)
    assert user.FSilu.torch_targets == (aten.silu.default,)
    ep = exported()
    assert matched(user.Gate, ep) and matched(user.TGate, ep)
    x = torch.randn(4, 8)
    assert pm.rewrite(ep, [user.Gate]).total == 1
    calls = [n.target for n in ep.graph.nodes if n.op == "call_function"]
    assert aten.silu.default in calls and aten.sigmoid.default not in calls
    torch.testing.assert_close(ep.module()(x), torch.nn.functional.silu(x + 1.0))


def test_a_packet_without_an_overload_of_the_arity_is_refused(tmp_path):
    with pytest.raises(pm.PatternError, match=r"aten\.mul \(an op packet\) has no functional "
                                              r"overload taking 3 argument"):
        load_user_module(tmp_path, """
            @pm.op(torch=[aten.mul])
            def Mul3(x, y, z):
                return 1
            """)


@pytest.mark.parametrize("target", ["len", "'aten.mul.Tensor'",
                                    "torch.nn.functional.normalize"])
def test_a_bogus_target_is_refused_at_its_declaration(tmp_path, target):
    with pytest.raises(pm.PatternError) as e:
        load_user_module(tmp_path, f"""
            @pm.op(torch=[{target}])
            def Bogus(x):
                return 1
            """)
    path = str(next(tmp_path.glob("*.py")))
    msg = str(e.value)
    assert f"{os.path.basename(path)}:{line_of(path, '@pm.op')}" in msg
    assert "is not an ATen op overload" in msg


# ------------------------------------------------------------- entry points


def test_rewrite_accepts_an_aten_graph_module(tmp_path):
    user, _ = load_user_module(tmp_path, COMMUTATIVE_MUL)
    ep = exported()
    report = pm.rewrite(ep.graph_module, [user.SigmoidFirst])
    assert report.total == 1
    assert aten.silu.default in [n.target for n in ep.graph_module.graph.nodes]


def test_rewrite_still_refuses_other_objects():
    with pytest.raises(TypeError, match="ExportedProgram"):
        pm.rewrite(object(), [LibrarySigmoidSecond])


def test_a_torch_level_graph_warns(tmp_path):
    user, _ = load_user_module(tmp_path, COMMUTATIVE_MUL)
    gm = torch.fx.symbolic_trace(SigmoidGate())
    with pytest.warns(RewriteWarning, match=r"no ATen operator.*torch\.export\.export"):
        report = rewrite_graph_module(gm, [user.SigmoidFirst])
    assert report.total == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", RewriteWarning)
        assert rewrite_graph_module(exported().graph_module, [user.SigmoidFirst]).total == 1


# ------------------------------------------------------------------ layering


def test_the_dsl_does_not_import_the_torch_layer():
    dsl = os.path.join(ROOT, "python", "pypm_verified", "dsl")
    for name in sorted(os.listdir(dsl)):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(dsl, name)) as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level >= 2:
                assert not (node.module or "").startswith("torch"), \
                    f"dsl/{name}:{node.lineno} imports the torch layer"
    # and using the DSL without torch= leaves it unloaded
    code = ("import sys, pypm_verified as pm\n"
            "@pm.op\ndef F(x): return 1\n"
            "print('pypm_verified.torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": os.path.join(ROOT, "python")})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
