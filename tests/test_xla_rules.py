"""The port of XLA's algebraic simplifier (library/xla_simplifier.py):
a sample of its rules checked as bench/xla_rules.py checks them
(special input values, dtype hints), and XLA's forms that are wrong in
floating point (tests/wrong_rules/xla_wrong.py) refuted, each by the
counterexample its docstring names."""
import importlib.util
import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("z3")

from pypm_verified.checking import check_rule  # noqa: E402
from pypm_verified.checking import smt as S  # noqa: E402
from pypm_verified.checking.evaluate import compare_outputs  # noqa: E402
from pypm_verified.library import xla_simplifier as X  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLASSES = {"element-wise, simple", "element-wise, advanced", "non-element-wise, reductions",
           "non-element-wise, layout-sensitive", "non-element-wise, others",
           "with preconditions"}


def _wrong():
    spec = importlib.util.spec_from_file_location(
        "xla_wrong", os.path.join(ROOT, "tests", "wrong_rules", "xla_wrong.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _rules(mod):
    return {r.name: (p, r) for p in mod.PATTERNS for r in p.rules}


def _check(mod, name, examples=4):
    p, r = _rules(mod)[name]
    return check_rule(p, r, examples=examples, per_guard=0, **X.CHECK_OPTIONS)


def test_every_rule_has_a_class():
    rules = _rules(X)
    assert len(rules) >= 60
    assert set(rules) == set(X.CATEGORY)
    assert set(X.CATEGORY.values()) <= CLASSES


#: one of each kind of semantics the port added, each proved: integers,
#: compare, booleans, sums (Fubini; constant summands and size-1 axes),
#: expand, squeeze, pad, log(exp)
PROVED_SAMPLE = ["sub_self", "gt_max", "where_not", "sum_sum", "sum_expand", "expand_expand",
                 "unsqueeze_squeeze", "pad_pad", "log_exp"]


@pytest.mark.parametrize("name", PROVED_SAMPLE)
def test_sample_is_proved(name):
    r = _check(X, name)
    assert r.status == "proved", (r.status, r.reason, r.counterexample, r.symbolic)
    assert r.examples == 4 and r.symbolic["proved"] == r.symbolic["structures"] >= 1


def test_real_only_rule_is_tested_not_proved():
    """(A / B) / C => A / (B * C) holds over the reals only where B != 0: z3
    finds sizes where it differs (x/0 is a free value), the instances agree,
    and so does torch on z3's input (inf either way): unknown, naming the
    division by zero, not "differs"."""
    r = _check(X, "div_div")
    sym = r.symbolic
    assert r.status == "tested" and sym["unknown"] and not sym["differs"], sym
    assert all("uninterpreted: division by zero;" in u for u in sym["unknown"])
    assert r.counterexample is None


@pytest.mark.parametrize("name", sorted(_wrong().WRONG))
def test_xla_wrong_forms_are_refuted(name):
    W = _wrong()
    r = _check(W, name, examples=40)
    assert r.status == "refuted", (name, r.status, r.reason)
    c = r.counterexample
    assert c.kind == "disagree"
    # the counterexample is of the kind the variant's documentation names
    why = W.WRONG[name]
    if "-0.0" in why and "NaN" not in why:
        assert c.message.startswith("signed zeros differ")
    elif "== NaN" in why or "!= NaN" in why or ">= NaN" in why:
        assert c.message == "integer outputs differ"
    else:
        assert "non-finite" in c.message or "signed zeros" in c.message


def test_signed_zeros_are_told_apart_only_when_asked():
    a = torch.tensor([0.0, 1.0])
    b = torch.tensor([-0.0, 1.0])
    assert compare_outputs(a, b)[0]
    ok, _, _, msg = compare_outputs(a, b, zero_sign=True)
    assert not ok and "signed zeros" in msg


def test_semantics_of_integers_are_not_reals():
    """Integer inputs take integer values: A - A => 0 is proved for int64,
    abs(A) => A is not (negative integers)."""
    g = torch.fx.Graph()
    x = g.placeholder("x")
    x.meta["val"] = torch.zeros(3, dtype=torch.int64)
    y = g.call_function(torch.ops.aten.sub.Tensor, (x, x))
    y.meta["val"] = torch.zeros(3, dtype=torch.int64)
    z = g.call_function(torch.ops.aten.zeros_like.default, (x,))
    z.meta["val"] = torch.zeros(3, dtype=torch.int64)
    assert S.prove(y, z, {"x": (3,)}).status == "proved"
    w = g.call_function(torch.ops.aten.abs.default, (x,))
    w.meta["val"] = torch.zeros(3, dtype=torch.int64)
    assert S.prove(w, x, {"x": (3,)}).status == "differs"
