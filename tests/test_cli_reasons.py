"""The "why not fired" cell of the rewrite's table shows the reason that
matters first: a profitability decline (the match and every other guard
held), else the guard that failed deepest in the rule's body, before the
early failures of alternates the rule does not handle; then how many other
reasons there were (all of them are in --report)."""
import json

import pytest

from pypm_verified.cli import why_not_fired
from pypm_verified.cli.output import reason_rank
from pypm_verified.rewriting.report import RewriteReport

PROFIT = ("not profitable on cpu: linear_act (silu, float32) needs tokens >= 512, saw 8 "
          "[pypm_verified/library/epilogue.py:60]")
STRUCT = "assert act is not None failed (act = None) [pypm_verified/library/epilogue.py:45]"
DTYPE = ("assert x.dtype == w.dtype failed (x.dtype = pm.f64) "
         "[pypm_verified/library/epilogue.py:47]")


def _report(reasons):
    rep = RewriteReport()
    for reason, n in reasons:
        for _ in range(n):
            rep.record_match("LinearEpilog", ["linear_act"])
            rep.record_unfired("LinearEpilog", [("linear_act", reason)])
    return rep


def test_profitability_first_even_when_rarer():
    rep = _report([(STRUCT, 5), (PROFIT, 1)])
    assert why_not_fired(rep, "LinearEpilog", "linear_act") == (
        PROFIT + " (+1 other reason, see --report)")


def test_deepest_guard_before_earlier_ones():
    rep = _report([(STRUCT, 5), (DTYPE, 1)])
    assert why_not_fired(rep, "LinearEpilog", "linear_act").startswith(DTYPE)
    rep = _report([(STRUCT, 3), (DTYPE, 1), (PROFIT, 1)])
    assert why_not_fired(rep, "LinearEpilog", "linear_act") == (
        PROFIT + " (+2 other reasons, see --report)")


def test_one_reason_alone_and_none():
    rep = _report([(STRUCT, 2)])
    assert why_not_fired(rep, "LinearEpilog", "linear_act") == STRUCT
    assert why_not_fired(rep, "LinearEpilog", "other") == ""


def test_rank_ties_go_to_the_most_frequent():
    assert sorted([("b [f.py:3]", 1), ("a [f.py:3]", 4)], key=lambda rc: reason_rank(*rc)) \
        == [("a [f.py:3]", 4), ("b [f.py:3]", 1)]
    # a reason without a line ranks after those with one
    assert reason_rank("skipped by the search", 9) > reason_rank("x [f.py:1]", 1)


torch = pytest.importorskip("torch")


class TwoTanhOneSilu(torch.nn.Module):
    """Two linear+tanh (the epilogue rule has no tanh: `act is not None`
    fails) and one linear+silu (fusable, but not profitable on cpu)."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = (torch.nn.Linear(16, 16) for _ in range(3))

    def forward(self, x):
        return torch.tanh(self.a(x)) + torch.tanh(self.b(x)) + torch.nn.functional.silu(self.c(x))


def test_table_shows_the_profitability_decline(tmp_path, capsys, monkeypatch):
    pytest.importorskip("rich")
    from pypm_verified.cli import main
    monkeypatch.setenv("COLUMNS", "300")
    model = tmp_path / "m.pt2"
    torch.export.save(torch.export.export(TwoTanhOneSilu().eval(), (torch.randn(8, 16),)),
                      str(model))
    rep = tmp_path / "r.json"
    code = main(["rewrite", str(model), "--rules", "epilogue", "--target", "cpu", "--dry-run",
                 "--no-check", "--report", str(rep)])
    out, err = capsys.readouterr()
    assert code == 0, err
    declines = json.loads(rep.read_text())["declines"]["LinearEpilog"]["linear_act"]
    (structural, n), = [(r, n) for r, n in declines.items() if "act is not None" in r]
    (profit, m), = [(r, n) for r, n in declines.items() if r.startswith("not profitable")]
    assert n == 2 and m == 1
    row = next(ln for ln in out.splitlines() if "linear_act" in ln)
    assert profit.split(" [")[0] in row, out
    assert "(+1 other reason, see --report)" in row and "act is not None" not in row
