"""Why a match did not fire: the declines of rules whose guards failed.

A rule whose assertion fails declines; ``Rule.fire(..., on_decline=f)``
says which assert (its source text and file:line), the PyTorch driver adds
the measured threshold and the size seen for a ``ctx.profitable(...)``
guard, both rewriters collect the reasons in ``RewriteReport.declines`` and
``python -m pypm_verified rewrite`` shows them in its summary ("why not
fired") and its ``--report``.
"""
import json
import os

import pytest

import pypm_verified as pm
from pypm_verified.dsl.rules import Decline, short_path
from pypm_verified.rewriting.report import RewriteReport

from conftest import line_of

torch = pytest.importorskip("torch")
nn = torch.nn

from pypm_verified import cli  # noqa: E402
from pypm_verified.torch import profitability  # noqa: E402

LIBRARY = os.path.join(os.path.dirname(pm.__file__), "library")
HERE = os.path.abspath(__file__)


def _mark(name: str) -> int:
    """The line of this file marked ``# MARK name``."""
    return line_of(HERE, "# MARK " + name)


# ------------------------------------------------------------ pm.Graph

@pm.op(op_class="unary_pointwise")
def DRelu(x):
    return 1


@pm.op
def DNeg(x):
    return 1


@pm.op
def DHelperOp(x):
    return 1


@pm.pattern
def DR(x):
    return DRelu(x)


@pm.rule(DR)
def only_f32(x):
    assert x.dtype == pm.f32, "float32 only"  # MARK only_f32
    return DNeg(DNeg(x))


@pm.rule(DR)
def only_rank_3(x):
    assert (x.shape is not None
            and x.shape.rank == 3)  # MARK only_rank_3
    return DNeg(DNeg(x))


@pm.pattern
def DN(x):
    return DNeg(x)


def _helper_check(x):
    assert x.dtype == pm.f64


@pm.rule(DN)
def via_helper(x):
    _helper_check(x)  # MARK via_helper
    return x


@pm.rule(DN)
def keeps_root(x):
    return DNeg(x)  # the matched root itself: no change


@pm.pattern
def DH(x):
    return DHelperOp(x)


@pm.rule(DH)
def shows_names(x):
    scale, big = None, list(range(100))
    assert len(big) == 1 or scale is not None or x.rank == 7 or x.shape[0] == 1
    return x


def _graph(dtype):
    g = pm.Graph()
    a = g.input("a", shape=(4, 8), dtype=dtype)
    g.output(g.apply(DRelu, a))
    return g


def test_fire_on_decline_names_the_failing_assert():
    g = _graph(pm.i8)
    m = pm.match(DR, g.outputs[0], engine="reference")
    seen = []
    assert only_f32.fire(m.values, g) is None  # the old contract, unchanged
    assert only_f32.fire(m.values, g, on_decline=seen.append) is None
    [d] = seen
    assert isinstance(d, Decline) and d.rule is only_f32
    assert d.text == "x.dtype == pm.f32" and d.message == "float32 only"
    assert d.line == _mark("only_f32") and d.filename == HERE
    assert d.seen == (("x.dtype", "pm.i8"),)  # what the assert read, not pm.f32
    assert d.reason == (f"assert x.dtype == pm.f32 failed (float32 only; x.dtype = pm.i8) "
                        f"[{d.where}]") and d.where.endswith(f"test_declines.py:{d.line}")
    # a multi-line assert: its text on one line, its first line
    seen.clear()
    assert only_rank_3.fire(m.values, g, on_decline=seen.append) is None
    [d] = seen
    assert d.text == "x.shape is not None and x.shape.rank == 3"
    assert d.line == _mark("only_rank_3") - 1
    assert d.end_line == d.line + 1 and d.covers(HERE, d.end_line)
    assert d.seen == (("x.shape.rank", "2"),)
    # a rule that fires calls nothing
    g8 = _graph(pm.f32)
    m8 = pm.match(DR, g8.outputs[0], engine="reference")
    seen.clear()
    assert only_f32.fire(m8.values, g8, on_decline=seen.append) is not None and seen == []


def test_assertion_from_a_called_function():
    g = pm.Graph()
    a = g.input("a", shape=(4,), dtype=pm.f32)
    g.output(g.apply(DNeg, a))
    m = pm.match(DN, g.outputs[0], engine="reference")
    seen = []
    assert via_helper.fire(m.values, g, on_decline=seen.append) is None
    [d] = seen
    line = _mark("via_helper")
    assert d.line == line and not d.is_assert
    assert d.reason.startswith(f"an AssertionError raised below line {line}")


def test_decline_shows_what_the_guard_read():
    """Bare names bound to None and small constants, and the shown
    attributes, in source order; not lists, not shapes, not functions."""
    g = pm.Graph()
    a = g.input("a", shape=(4, 8), dtype=pm.f32)
    g.output(g.apply(DHelperOp, a))
    m = pm.match(DH, g.outputs[0], engine="reference")
    seen = []
    assert shows_names.fire(m.values, g, on_decline=seen.append) is None
    assert seen[0].seen == (("scale", "None"), ("x.rank", "2"))


def test_pm_rewrite_records_declines(engine):
    g = _graph(pm.i8)
    report = pm.rewrite(g, [DR], engine=engine)
    assert report.firings == {} and report.matches == {"DR": 1}
    assert report.rules == {"DR": ["only_f32", "only_rank_3"]} and report.unfired("DR") == 1
    where = f"test_declines.py:{_mark('only_f32')}"
    [(r1, n1)] = report.why_not_fired("DR", "only_f32")
    assert r1.startswith("assert x.dtype == pm.f32 failed (float32 only; x.dtype = pm.i8) [")
    assert n1 == 1
    assert r1.endswith(where + "]")
    [(r2, _)] = report.why_not_fired("DR", "only_rank_3")
    assert "assert x.shape is not None and x.shape.rank == 3 failed" in r2
    d = report.as_dict()
    assert d["declines"] == {"DR": {"only_f32": {r1: 1}, "only_rank_3": {r2: 1}}}
    json.dumps(d["declines"])
    # a match that fires records no decline (only_f32 fires, only_rank_3 is not tried)
    g = _graph(pm.f32)
    report = pm.rewrite(g, [DR], engine=engine)
    assert report.firings == {"only_f32": 1} and report.declines == {}
    assert report.unfired("DR") == 0


def test_pm_rewrite_rule_returning_the_root(engine):
    g = pm.Graph()
    a = g.input("a", shape=(4,), dtype=pm.f32)
    g.output(g.apply(DNeg, a))
    report = pm.rewrite(g, [DN], engine=engine)
    assert report.firings == {} and report.unfired("DN") == 1
    [(why, _)] = report.why_not_fired("DN", "via_helper")
    assert why.startswith("an AssertionError raised below line")
    [(why, _)] = report.why_not_fired("DN", "keeps_root")
    assert why.startswith("returned the matched root (no change)")


# ------------------------------------------------------- profitability

def test_refusal_agrees_with_profitable():
    tab = profitability.table()["table"]
    for rule, per_target in tab.items():
        for target, entry in per_target.items():
            for dt, per_variant in entry["thresholds"].items():
                for variant, thr in per_variant.items():
                    for size in (None, 1, (thr or 2) - 1, thr, (thr or 0) + 1, 10 ** 9):
                        kw = {entry["size"]: size}
                        ok = profitability.profitable(rule, target, dtype=dt, variant=variant,
                                                      **kw)
                        why = profitability.refusal(rule, target, dtype=dt, variant=variant,
                                                    **kw)
                        assert ok == (why is None), (rule, target, dt, variant, size, why)
                        if why is not None and thr is not None and size is not None:
                            assert f">= {thr}, saw {size}" in why
                        if thr is None:
                            assert why is not None and "never profitable" in why
    why = profitability.refusal("attention", "cpu", dtype=torch.float64, variant="mask", seq=4)
    assert "float64" in why and "not in the table" in why


# ------------------------------------------------------------ the CLI

class Attn(nn.Module):
    def forward(self, q, k, v, mask):
        s = q @ k.transpose(-2, -1) / 8.0
        return torch.softmax(s + mask, dim=-1) @ v


class LinRelu(nn.Module):
    def __init__(self, dtype):
        super().__init__()
        self.lin = nn.Linear(8, 8).to(dtype)

    def forward(self, x):
        return torch.relu(self.lin(x))


class Relu3(nn.Module):
    def forward(self, x):
        return torch.relu(x) + torch.relu(x * 2)


CUSTOM_RULES = """import pypm_verified as pm
from pypm_verified.torch.ops import Neg, Relu

@pm.pattern
def R(x):
    return Relu(x)

@pm.rule(R)
def only_rank_3(x):
    assert x.rank == 3, "rank 3 only"  # MARK rank
    return Neg(Neg(x))

@pm.rule(R)
def only_f64(x):
    assert (x.dtype ==
            pm.f64)  # MARK f64
    return Neg(Neg(x))
"""


def _export(module, args, path):
    torch.export.save(torch.export.export(module.eval(), args), str(path))
    return str(path)


def _rewrite(argv, capsys, monkeypatch, tmp_path):
    """Run ``rewrite`` (dry run, wide terminal): exit code, stdout, report."""
    monkeypatch.setenv("COLUMNS", "250")
    rep = tmp_path / "r.json"
    code = cli.main(["rewrite", *map(str, argv), "--dry-run", "--report", str(rep)])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out, json.loads(rep.read_text())


def test_cli_attention_not_profitable_on_cpu(tmp_path, capsys, monkeypatch):
    """The attention pattern matches at sequence 128 on cpu, and the summary
    says the measured threshold and the size seen."""
    thr = profitability.table()["table"]["attention"]["cpu"]["thresholds"]["float32"]["mask"]
    # the shipped CPU table: fused attention pays from sequence 512 (with a mask)
    assert thr is not None and thr > 16, thr
    seq = min(128, thr - 1)
    x = [torch.randn(1, 2, seq, 16) for _ in range(3)] + [torch.randn(1, 1, seq, seq)]
    model = _export(Attn(), tuple(x), tmp_path / "attn.pt2")
    out, r = _rewrite([model, "--target", "cpu"], capsys, monkeypatch, tmp_path)
    assert r["matches"] == {"Attention": 1} and r["firings"] == {}
    line = line_of(os.path.join(LIBRARY, "attention.py"), 'assert ctx.profitable("attention"')
    why = (f"not profitable on cpu: attention (mask, float32) needs sequence length >= {thr}, "
           f"saw {seq} [")
    [(reason, n)] = r["declines"]["Attention"]["sdpa"].items()
    assert reason.startswith(why) and reason.endswith(f"attention.py:{line}]") and n == 1
    assert why in out and f"attention.py:{line}]" in out and "why not fired" in out
    # the same with profitability off would fire: the reason is the only obstacle
    assert r["rules"] == {"Attention": ["sdpa"]}


def test_cli_dtype_guard(tmp_path, capsys, monkeypatch):
    """A float64 linear+relu matches the epilogue pattern; its rule declines
    on its dtype guard, shown as written with its line."""
    model = _export(LinRelu(torch.float64), (torch.randn(4, 8, dtype=torch.float64),),
                    tmp_path / "lin64.pt2")
    out, r = _rewrite([model], capsys, monkeypatch, tmp_path)
    line = line_of(os.path.join(LIBRARY, "epilogue.py"), "assert x.dtype == w.dtype and")
    text = ("assert x.dtype == w.dtype and x.dtype in (pm.f32, pm.bf16) failed "
            "(x.dtype = pm.f64, w.dtype = pm.f64)")
    [(reason, n)] = r["declines"]["LinearEpilog"]["linear_act"].items()
    assert reason.startswith(f"{text} [") and n == 1
    assert reason.endswith(f"pypm_verified/library/epilogue.py:{line}]")
    assert text in out and f"epilogue.py:{line}]" in out


def test_cli_custom_rules_every_rule_says_why(tmp_path, capsys, monkeypatch):
    """A pattern that matched twice and none of its two rules fired: each
    rule's reason, the asserts' text (a multi-line one joined), in the table
    and the report."""
    rules = tmp_path / "my_rules.py"
    rules.write_text(CUSTOM_RULES)
    model = _export(Relu3(), (torch.randn(4, 8),), tmp_path / "relu.pt2")
    out, r = _rewrite([model, "--rules", rules], capsys, monkeypatch, tmp_path)
    assert r["matches"] == {"R": 2} and r["firings"] == {} and r["rules"] == {"R": [
        "only_rank_3", "only_f64"]}
    rank = line_of(str(rules), "MARK rank")
    f64 = line_of(str(rules), "MARK f64") - 1
    rules = short_path(str(rules))  # how reasons name a file
    assert r["declines"]["R"] == {
        "only_rank_3": {f"assert x.rank == 3 failed (rank 3 only; x.rank = 2) "
                        f"[{rules}:{rank}]": 2},
        "only_f64": {f"assert x.dtype == pm.f64 failed (x.dtype = pm.f32) [{rules}:{f64}]": 2}}
    assert "assert x.rank == 3 failed (rank 3 only; x.rank = 2)" in out
    assert "assert x.dtype == pm.f64 failed (x.dtype = pm.f32)" in out


def test_cli_fired_matches_have_no_reason(tmp_path, capsys, monkeypatch):
    """Without profitability in the way (cuda thresholds), a float32
    linear+relu fires and nothing is listed as declined."""
    model = _export(LinRelu(torch.float32), (torch.randn(4, 8),), tmp_path / "lin.pt2")
    out, r = _rewrite([model, "--target", "cuda"], capsys, monkeypatch, tmp_path)
    assert r["firings"] == {"linear_act": 1}, r["declines"]
    assert r["declines"] == {} and "failed" not in out


def test_why_not_fired_cell():
    rep = RewriteReport()
    rep.record_match("P", ["a"])
    rep.record_match("P", ["a"])
    rep.record_match("P", ["a"])
    rep.record_unfired("P", [("a", "x failed [f.py:1]")])
    rep.record_unfired("P", [("a", "x failed [f.py:1]")])
    rep.record_unfired("P", [("a", "y failed [f.py:2]")])
    assert rep.unfired("P") == 3
    # the guard that failed deepest (line 2) first, however rare
    assert cli.why_not_fired(rep, "P", "a") == ("y failed [f.py:2] (+1 other reason, see "
                                                "--report)")
    rep.record_firing("a", "n", "m")
    assert cli.why_not_fired(rep, "P", "b") == ""
    assert rep.as_dict()["declines"] == {"P": {"a": {"x failed [f.py:1]": 2,
                                                     "y failed [f.py:2]": 1}}}
