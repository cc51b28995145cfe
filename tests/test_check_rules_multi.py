"""check-rules on multi-root rules (theories/Multi.v): library/fusion.py's
QKV and gate/up fusions, and a wrong QKV variant (tests/wrong_rules)."""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("z3")

from pypm_verified.checking import check_rule  # noqa: E402
from pypm_verified.library.fusion import QKV, GateUp  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
WRONG = os.path.join(HERE, "wrong_rules", "fusion_qk_swapped.py")


@pytest.mark.parametrize("pattern", [QKV, GateUp], ids=lambda p: p.name)
def test_shipped_multi_root_rules_pass(pattern):
    r = check_rule(pattern, pattern.rules[0], examples=12, guards=False)
    assert r.status == "tested", (r.status, r.reason, r.counterexample)
    assert r.counterexample is None and r.examples == 12
    sym = r.symbolic
    # one structure per root: every one proved, the ones without biases for
    # every size, those with biases for the size pattern of their instances
    # (the rule's guard b.shape[0] == w.shape[0] is Python, not translated)
    assert sym["structures"] > 0 and not sym["differs"] and not sym["unsupported"]
    assert sym["proved"] + sym["proved_like_instances"] == sym["structures"]
    assert sym["ranks"]["x"] and set(sym["ranks"]) >= set(pattern.term_params) - {"bq", "bk",
                                                                               "bv", "bg",
                                                                               "bu"}


def _cli(*args):
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "python"))
    return subprocess.run([sys.executable, "-m", "pypm_verified", "check-rules", *args],
                          env=env, capture_output=True, text=True, timeout=600)


def test_wrong_qkv_variant_is_refuted_naming_the_root(tmp_path):
    rep = tmp_path / "r.json"
    p = _cli("--rules", WRONG, "--fast", "--report", str(rep))
    assert p.returncode == 1, p.stderr[-2000:]
    assert "refuted" in p.stdout and "root 1 of 3: linear(x, wq, bq)" in p.stdout
    doc = json.loads(rep.read_text())
    (res,) = doc["rules"]
    assert res["status"] == "refuted"
    cex = res["counterexample"]
    assert cex["kind"] == "disagree" and cex["root"].startswith("root ")
    assert cex["expression"].startswith("(linear(x, wq")
    # shrunk: every size 1 or 2
    assert all(n <= 2 for i in cex["inputs"] for n in i.get("shape", ()))


def test_cli_on_the_shipped_multi_root_rules(tmp_path):
    rep = tmp_path / "r.json"
    p = _cli("--rules", "pypm_verified.library.fusion", "--fast", "--report", str(rep))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    doc = json.loads(rep.read_text())
    assert {r["rule"]: r["status"] for r in doc["rules"]} == {"qkv_gemm": "tested",
                                                              "gate_up_gemm": "tested"}
