"""Held-out rules, written as users write them: ``check-rules --fast`` must
refute every wrong one (tests/heldout/wrong/*.py: verdict ``refuted``, exit
1, a counterexample) and pass every right one (tests/heldout/right/*.py:
``proved`` or ``tested``, exit 0).

The wrong ones: activation approximations (erf and tanh GELU swapped, quick
GELU, ``x * tanh(x)`` for SiLU, hardswish variants, relu6 bounds), misplaced
epsilons (outside the root, hard-coded, dropped, squared, on the mean, the
unbiased variance), permutations (wrong axes, a permutation taken as its own
inverse, a composition inverted, a softmax moved through a transpose),
identities that do not hold (``exp(log(x))``, ``sqrt(x * x)``, a softmax
shift along its axis, a mean of means over shifted axes), missing size
checks (a sum over an axis then broadcast, a reshape taken as the identity,
``sum / n``, ``a @ (b + c)``, the softmax axis, the normalized shape taken
from the weight, keepdim dropped) and two variables taken as one (``x * y``
as ``x ** 2``, ``a + b`` as ``2 a``, a layer's bias reused, q and k swapped,
a factor, sub's operands, where's branches), plus a float32 -> bfloat16 ->
float32 round trip dropped. The right ones include rules whose size guard
is not an equation (``x.shape[-1] in (64, 128)``, ``>= 16``): check-rules
must draw sizes that satisfy it. Each file holds one rule and a docstring
saying what is wrong (or why it is right).

Each set is one ``check-rules --fast --jobs 2`` run over all its files
(symbolic proofs included, as the CLI's fast mode runs them; both cores),
and each file's verdict is asserted from the JSON report, so the module
takes minutes. Skipped when torch or z3 is missing."""
import glob
import json
import os

import pytest

pytest.importorskip("torch")
pytest.importorskip("z3")

from pypm_verified.cli import main  # noqa: E402
from pypm_verified.library import load_rules  # noqa: E402

HELDOUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "heldout")
WRONG = sorted(glob.glob(os.path.join(HELDOUT, "wrong", "*.py")))
RIGHT = sorted(glob.glob(os.path.join(HELDOUT, "right", "*.py")))


def _name(path):
    return os.path.splitext(os.path.basename(path))[0]


def _run(paths, tmp_path):
    """``check-rules --fast --jobs 2`` over ``paths``: each file's exit-code
    share (1: this run refuted something) and its one rule's JSON result,
    by file name."""
    report = tmp_path / "report.json"
    argv = ["check-rules", "--fast", "-q", "--jobs", "2", "--report", str(report)]
    for path in paths:
        argv += ["--rules", path]
    code = main(argv)
    with open(report) as f:
        results = json.load(f)["rules"]
    by_file = {}
    for r in results:
        name = os.path.basename(r["where"].split(":")[0])
        assert name not in by_file, name  # one rule per file
        by_file[os.path.splitext(name)[0]] = r
    assert sorted(by_file) == sorted(_name(p) for p in paths)
    return code, by_file


@pytest.fixture(scope="module")
def wrong_run(tmp_path_factory):
    return _run(WRONG, tmp_path_factory.mktemp("wrong"))


@pytest.fixture(scope="module")
def right_run(tmp_path_factory):
    return _run(RIGHT, tmp_path_factory.mktemp("right"))


def test_the_held_out_set_is_large_and_one_rule_per_file():
    assert len(WRONG) >= 30 and len(RIGHT) >= 15, (len(WRONG), len(RIGHT))
    for path in WRONG + RIGHT:
        (pattern,) = load_rules(path)
        assert len(pattern.rules) == 1, path
        with open(path) as f:
            head = f.read(200)
        want = '"""WRONG' if path in WRONG else '"""RIGHT'
        assert head.startswith(want), path


@pytest.mark.parametrize("path", WRONG, ids=_name)
def test_wrong_rule_is_refuted(path, wrong_run):
    code, results = wrong_run
    r = results[_name(path)]
    assert r["status"] == "refuted", (r["rule"], r["status"], r["reason"])
    assert r["counterexample"], r["rule"]
    assert code == 1


@pytest.mark.slow
@pytest.mark.parametrize("path", RIGHT, ids=_name)
def test_right_rule_passes(path, right_run):
    code, results = right_run
    r = results[_name(path)]
    assert r["status"] in ("proved", "tested"), \
        (r["rule"], r["status"], r["reason"], r["counterexample"])


@pytest.mark.slow
def test_the_right_set_exits_0(right_run):
    code, results = right_run
    assert code == 0, {k: r["status"] for k, r in results.items()}
