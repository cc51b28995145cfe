"""Both rewrite drivers validate their graph surgery (rewriting/validate.py).

Real rewrites with the library's rules are accepted; a corrupted surgery
step (a user redirected to the wrong node, a dropped output, the
replacement wired to the wrong argument, a dead node left behind) is
refused with its reason, the error names the firing, and the command line
exits 3 with nothing written. The validator is the verified C entry point
when the library has it; the encoders are also tested against the
independent oracle (tests/rewrite_oracle.py), which is checked against the
C entry point on random passes.
"""
import math
import os
import sys

import pytest
import torch
import torch.fx as fx
import torch.nn as nn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pypm_verified as pm
import rewrite_oracle as oracle
from pypm_verified.core.graph import Graph
from pypm_verified.engines import binding
from pypm_verified.errors import EngineError
from pypm_verified.library import default_patterns
from pypm_verified.rewriting import validate
from pypm_verified.torch.driver import Driver
from pypm_verified.torch.firing import Firing
from test_cli import NEGNEG_RULES, _one_line_error, files, run  # noqa: F401 -- fixture
from test_rewrite import Add, AddSelf, Neg, Relu, Sub, UnaryChain
from test_torch import AddSame, Attn, NegNeg, Twins, _attn_inputs, _ep

HAS_C = hasattr(binding, "validate_rewrite")  # the verified validator in the binding


@pytest.fixture
def checked(lib, monkeypatch):
    """The validator used by the drivers: the oracle (whose verdicts are
    compared with the C entry point's when the library has it); the list of
    ``(verdict, where)`` answers."""
    seen = []
    c_entry = getattr(binding, "validate_rewrite", None)

    def check(words):
        got = oracle.validate(words)
        if c_entry is not None:
            c = c_entry(words)
            assert (c[0] == 0) == (got[0] == 0) and (c[0] == 0 or c in
                                                    oracle.violations(words)), (c, got)
        seen.append(got)
        return got

    monkeypatch.setattr(binding, "validate_rewrite", check, raising=False)
    # a certified pass is checked once, by the certificate checker, which
    # checks the pass as validate_rewrite does: the oracle sees that pass too
    # (and an oracle rejection stands, as validate_rewrite's would)
    certified = validate.Pass.check_certified

    def check_certified(p, *a, **k):
        verdict, where = check(p.words())
        if verdict:
            raise p.rejection(int(verdict), int(where))
        return certified(p, *a, **k)

    monkeypatch.setattr(validate.Pass, "check_certified", check_certified)
    monkeypatch.delenv(validate.ENV_VAR, raising=False)
    return seen


# ------------------------------------------------------------ FX models

def _gelu_tanh(h):
    return 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) *
                                       (h + 0.044715 * torch.pow(h, 3.0))))


class GeluUse(nn.Module):
    """A tanh GELU that is an output and the first argument of a product."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        h = self.fc(x)
        g = _gelu_tanh(h)
        return g * h, g


def _gelu_gm():
    return _ep(GeluUse(), torch.randn(4, 16)).graph_module


def _run_fx(gm, patterns):
    return Driver(gm, patterns, check_profitability=False).run()


GELU = default_patterns(("gelu",))


def test_fx_driver_validates_real_rewrites(checked):
    gm = _gelu_gm()
    report = _run_fx(gm, GELU)
    assert report.firings == {"gelu_tanh": 1}
    assert checked == [(0, 0)]  # the one pass that fired, accepted
    # attention: SDPA replaces the block (the library's attention rules)
    gm = _ep(Attn(), *_attn_inputs()).graph_module
    checked.clear()
    report = _run_fx(gm, default_patterns(("attention",)))
    assert sum(report.firings.values()) == 1 and checked == [(0, 0)]


def test_fx_driver_validates_merges(checked):
    """relu(-(-x)) becomes relu(x) and merges with the first relu: the merge
    is given to the validator as a firing of its own, found structurally."""
    gm = _ep(Twins(), torch.randn(5)).graph_module
    report = Driver(gm, [NegNeg, AddSame]).run()
    assert report.merged == 1 and report.firings == {"drop_negs": 1}
    assert checked == [(0, 0)]


def test_validation_off_by_environment(checked, monkeypatch):
    monkeypatch.setenv(validate.ENV_VAR, "0")
    _run_fx(_gelu_gm(), GELU)
    assert checked == []


_REDIRECT = fx.Node.replace_all_uses_with


def _corrupt_redirect(monkeypatch, how):
    """Make the firings' redirection of uses (``replace_all_uses_with`` with a
    ``delete_user_cb``: the driver's, not the term graph's merges) wrong."""

    def redirect(self, new, delete_user_cb=lambda u: True, *, propagate_meta=False):
        users = [u for u in self.users if u.op != "output" and delete_user_cb(u)]
        out = _REDIRECT(self, new, delete_user_cb, propagate_meta=propagate_meta)
        if sys._getframe(1).f_code is not Firing.fire_single.__code__:
            return out  # not a firing (loading the program, merging duplicates)
        if how == "wrong node":  # a user gets the root's argument, not the replacement
            users[0].replace_input_with(new, self.args[0])
        elif how == "wrong argument":  # the replacement wired as the other argument
            u = users[0]
            u.args = (u.args[1], u.args[0]) + tuple(u.args[2:])
        elif how == "dropped output":
            out_node = next(u for u in new.users if u.op == "output")
            out_node.args = (tuple(a for a in out_node.args[0] if a is not new),)
        return out

    monkeypatch.setattr(fx.Node, "replace_all_uses_with", redirect)


@pytest.mark.parametrize("how, reason", [
    ("wrong node", validate.REJECT_ARG),
    ("wrong argument", validate.REJECT_ARG),
    ("dropped output", validate.REJECT_OUTPUT),
])
def test_fx_driver_refuses_a_corrupted_redirect(checked, monkeypatch, how, reason):
    gm = _gelu_gm()
    root = [n for n in gm.graph.nodes if n.op == "output"][0].args[0][1]
    _corrupt_redirect(monkeypatch, how)
    with pytest.raises(validate.RewriteRejected) as e:
        _run_fx(gm, GELU)
    assert e.value.verdict == reason and checked == [(reason, checked[0][1])]
    rule, at, _ = e.value.firing
    assert (rule, at) == ("gelu_tanh", root.name)
    assert f"rule 'gelu_tanh' at {root.name}" in str(e.value)
    if reason == validate.REJECT_ARG:
        assert e.value.where.startswith("mul") and "argument " in str(e.value)


def test_fx_driver_refuses_a_dead_node_left_behind(checked, monkeypatch):
    def dce_root_only(self, start):  # the match's interior stays, unused
        for n in start:
            if not n.users:
                self.tg.erase(n)

    monkeypatch.setattr(Driver, "remove_dead", dce_root_only)
    with pytest.raises(validate.RewriteRejected) as e:
        _run_fx(_gelu_gm(), GELU)
    assert e.value.verdict == validate.REJECT_DEAD
    assert e.value.firing[0] == "gelu_tanh" and "DEAD" in str(e.value)


def test_cli_exits_3_and_writes_nothing_on_a_rejection(files, checked, monkeypatch,  # noqa: F811
                                                       tmp_path, capsys):
    _corrupt_redirect(monkeypatch, "wrong node")
    code, _, err = run(["rewrite", files["negneg"], "-o", tmp_path / "o.pt2", "--rules",
                        files["negneg_rules"]], capsys)
    assert code == 3
    line = _one_line_error(err)
    assert "RewriteRejected" in line and "rule 'drop_negs'" in line and "ARG" in line
    assert os.listdir(tmp_path) == []


# ------------------------------------------------------ pm.rewrite graphs

def test_term_driver_validates_every_firing(checked):
    g = Graph()
    a = g.input("a", shape=(3,))
    n = a
    for _ in range(5):
        n = Relu(n)
    g.output(Add(n, Neg(Neg(a))))
    report = pm.rewrite(g, [UnaryChain])
    # hash-consing makes the rebuilt chain reuse the old nodes: each firing
    # is checked on its own graph (not the pass's simultaneous firings)
    assert report.firings == {"collapse_idempotent": 3}
    assert checked == [(0, 0)] * 3
    checked.clear()
    g = Graph()
    v, m = g.input("v", shape=(3,)), g.input("m", shape=(2, 2))
    g.output(Sub(Add(v, v), Add(m, m)))
    report = pm.rewrite(g, [AddSelf])
    assert report.firings == {"first": 1, "second": 1} and checked == [(0, 0)] * 2


_REPLACE = Graph.replace


def _corrupt_replace(monkeypatch, how):
    def replace(self, old, new):
        if how in ("wrong node", "wrong argument"):
            # the first user of old, rebuilt wrongly; the others right
            user = next(n for n in self.live() if old in n.args)
            if how == "wrong node":
                args = tuple(old.args[0] if a is old else a for a in user.args)
            else:
                args = tuple(reversed([new if a is old else a for a in user.args]))
            bad = self.apply(user.op, *args, shape=user.shape, dtype=user.dtype)
            _REPLACE(self, user, bad)
            _REPLACE(self, old, new)
        else:
            _REPLACE(self, old, new)
            if how == "dropped output":
                self._outputs.pop()
            else:  # "stale output": the old root stays an output
                self._outputs.append(old)

    monkeypatch.setattr(Graph, "replace", replace)


@pytest.mark.parametrize("how", ["wrong node", "wrong argument", "dropped output",
                                 "stale output"])
def test_term_driver_refuses_a_corrupted_replace(checked, monkeypatch, how):
    g = Graph()
    v, m = g.input("v", shape=(3,)), g.input("m", shape=(3,))
    s = Add(v, v)
    g.output(Sub(s, m))
    g.output(Neg(s))
    _corrupt_replace(monkeypatch, how)
    with pytest.raises(validate.RewriteRejected) as e:
        pm.rewrite(g, [AddSelf])
    # a wrongly rebuilt node corresponds to no node before (correspondence is
    # structural in a term graph): the output reaching it is the one refused
    assert e.value.verdict == validate.REJECT_OUTPUT
    assert e.value.where == ("the outputs" if "output" in how else "output 0 (%3 (Sub))")
    assert "rule 'first' at %2 (Add)" in str(e.value)


# ------------------------------------------------- the oracle, by hand

def _words(before, bouts, after, aouts, firings, amap):
    w = [len(before)]
    for lab, args in before:
        w += [lab, len(args), *args]
    w += [len(bouts), *bouts, len(after)]
    for lab, args in after:
        w += [lab, len(args), *args]
    w += [len(aouts), *aouts, len(firings)]
    for r, h in firings:
        w += [r, h]
    return w + list(amap)


# before: x, f(x), g(f(x)); firing f(x) -> h(x); after: x, h(x), g(h(x))
BEFORE = [(0, []), (1, [0]), (2, [1])]
AFTER = [(0, []), (3, [0]), (2, [1])]


@pytest.mark.parametrize("after, aouts, firings, amap, want", [
    (AFTER, [2], [(1, 1)], [0, -1, 2], (0, 0)),
    (AFTER, [2], [(1, 1)], [0, -1, 1], (oracle.MAP, 2)),       # maps to the fired root
    (AFTER, [2], [(1, 5)], [0, -1, 2], (oracle.FIRING, 0)),    # replacement out of range
    ([(0, []), (3, [0]), (4, [1])], [2], [(1, 1)], [0, -1, 2], (oracle.NODE, 2)),
    ([(0, []), (3, [0]), (2, [0])], [2], [(1, 1)], [0, -1, 2], (oracle.ARG, 2)),
    (AFTER, [], [(1, 1)], [0, -1, 2], (oracle.OUTPUT, -1)),
    (AFTER + [(5, [0])], [2], [(1, 1)], [0, -1, 2, -1], (oracle.DEAD, 3)),
    ([(0, []), (3, [2]), (2, [1])], [2], [(1, 1)], [0, -1, 2], (oracle.AFTER_ILL_FORMED, 1)),
])
def test_oracle_by_hand(after, aouts, firings, amap, want):
    assert oracle.validate(_words(BEFORE, [2], after, aouts, firings, amap)) == want


def test_oracle_malformed():
    good = _words(BEFORE, [2], AFTER, [2], [(1, 1)], [0, -1, 2])
    for bad in (good + [0], good[:-1], [-1] + good[1:], [2 ** 62] + good[1:]):
        with pytest.raises(oracle.Malformed):
            oracle.validate(bad)


# -------------------------------------- the oracle against the C entry point

@st.composite
def passes(draw):
    """A pass applied correctly (before graph, firings to new leaves, the
    after graph with dead nodes removed, the map), maybe with one word
    changed."""
    n = draw(st.integers(1, 7))
    before = []
    for i in range(n):
        k = draw(st.integers(0, min(i, 2)))
        before.append((draw(st.integers(0, 3)), [draw(st.integers(0, i - 1)) for _ in range(k)]))
    bouts = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=3))
    roots = draw(st.lists(st.integers(0, n - 1), unique=True, max_size=3))
    after, amap, image = [], [], {}
    for r in roots:  # each replacement a new leaf
        image[r] = len(after)
        after.append((4 + r, []))
        amap.append(-1)
    for g, (lab, args) in enumerate(before):
        if g not in roots and all(a in image for a in args):
            image[g] = len(after)
            after.append((lab, [image[a] for a in args]))
            amap.append(g)
    aouts = [image[o] for o in bouts]
    live, stack = set(), list(aouts)
    while stack:
        h = stack.pop()
        if h not in live:
            live.add(h)
            stack.extend(after[h][1])
    keep = sorted(live)
    renum = {h: i for i, h in enumerate(keep)}
    after2 = [(after[h][0], [renum[a] for a in after[h][1]]) for h in keep]
    firings = [(r, renum.get(image[r], 0)) for r in roots]
    words = _words(before, bouts, after2, [renum[o] for o in aouts], firings,
                   [amap[h] for h in keep])
    if draw(st.booleans()):
        i = draw(st.integers(0, len(words) - 1))
        words[i] = draw(st.integers(-1, 9))
    return words


def _c_entry():
    if not HAS_C:
        why = ("the engine library is not built, so there is no verified validator "
               "(validate_rewrite) to compare with: run make lib")
        if os.environ.get("PYPM_REQUIRE_LIB"):
            pytest.fail(f"PYPM_REQUIRE_LIB is set but {why}")
        pytest.skip(why)
    return binding.validate_rewrite


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(words=passes())
def test_oracle_agrees_with_the_verified_validator(lib, words):
    c_entry = _c_entry()
    try:
        want = oracle.violations(words)
    except oracle.Malformed:
        with pytest.raises(EngineError):
            c_entry(words)
        return
    verdict, where = c_entry(words)
    if not want:
        assert verdict == 0
    else:
        assert (verdict, where) in want, (words, want)
