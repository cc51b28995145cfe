"""``check-rules``, the testing part: every shipped rule is tested
in the fast mode CI runs; deliberately wrong rules (tests/wrong_rules/) are
refuted with a counterexample that shows the shapes and constants; vacuous
rules are reported, never passed; guard necessity; the command's exit codes.

Skipped when torch is missing (`make test` installs it)."""
import json
import os
import textwrap

import pytest

torch = pytest.importorskip("torch")

from pypm_verified.checking import FAST, STATUSES, check_rule, check_rules  # noqa: E402
from pypm_verified.checking.guards import (pattern_guards, program_without,  # noqa: E402
                                           rule_guards)
from pypm_verified.checking.instances import App, InstanceGenerator  # noqa: E402
from pypm_verified.checking.report import counterexample_lines, markdown  # noqa: E402
from pypm_verified.cli import main  # noqa: E402
from pypm_verified.library import default_patterns, load_rules  # noqa: E402
from pypm_verified.torch.ops import BY_NAME  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WRONG = os.path.join(ROOT, "tests", "wrong_rules")


def _inputs(c):
    return {i["name"]: i for i in c.inputs}


def _write(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


# ------------------------------------------------------------ the library

@pytest.fixture(scope="module")
def shipped_fast():
    return check_rules(default_patterns(), examples=FAST["examples"],
                       per_guard=FAST["per_guard"])


SHIPPED = [(p.name, r.name) for p in default_patterns() for r in p.rules]
#: shipped rules check-rules refutes (a bug in the library, not in the checker):
#: strict xfails, so fixing the rule makes the test fail until the entry goes
KNOWN_REFUTED: dict = {}  # sdpa's mask-broadcast guard was one (fixed: it now checks q kT)


@pytest.mark.slow
@pytest.mark.parametrize("rule", [
    pytest.param(r, marks=pytest.mark.xfail(strict=True, reason=KNOWN_REFUTED[r]))
    if r in KNOWN_REFUTED else r for _, r in SHIPPED])
def test_every_shipped_rule_is_tested_in_fast_mode(shipped_fast, rule):
    assert [r.rule for r in shipped_fast] == [r for _, r in SHIPPED]
    (r,) = [r for r in shipped_fast if r.rule == rule]
    assert r.status in STATUSES
    assert r.status in ("tested", "proved"), (r.rule, r.reason, r.counterexample and
                                              counterexample_lines(r.counterexample))
    assert r.examples == FAST["examples"] and r.counts["fired"] == r.examples
    assert r.space["alternates"]["fired"] >= 1 and r.space["dtypes"]


def test_symbolic_verdicts_on_the_shipped_rules(shipped_fast):
    """What the symbolic check can and cannot prove of the library (fast
    mode's structures): linear_nt, linear_act, gelu_tanh and rms_norm for
    every size; gelu_erf not where the pattern divides by the double
    sqrt(2) (x / fl(sqrt 2) is not x * fl(1/sqrt 2) over the reals, so the
    rule is exact only up to rounding there): unknown, naming erf, since no
    input shows a difference beyond float64's tolerance; sdpa for every size or only
    for the size patterns of the fired instances (its mask guard is Python,
    not translated), or unknown where the replacement's scale is the rounded
    reciprocal of the pattern's divisor; its boolean-mask forms unsupported
    (-inf is no real); its forms with a view proved (views are row-major
    index maps); sdpa_core's structures (SDPA's math decomposed, reshaping)
    proved but those with a -inf constant."""
    by = {r.rule: r for r in shipped_fast}
    for name in ("linear_nt", "linear_act", "gelu_tanh", "rms_norm"):
        assert by[name].status == "proved", (name, by[name].symbolic)
    erf = by["gelu_erf"].symbolic
    assert erf["proved"] >= 1 and erf["unknown"] and not erf["differs"]
    assert all("div(x, 1.4142135623730951)" in u and "uninterpreted: erf;" in u
               and "not confirmed numerically" in u for u in erf["unknown"])
    sd = by["sdpa"].symbolic
    assert sd["proved"] + sd["proved_like_instances"] >= 1 and not sd["differs"]
    # the boolean-mask forms (masked_fill/where with -inf or the dtype's
    # minimum) are outside the real semantics: tested, not proved; views
    # have row-major index semantics (the registry), so reshapes are proved
    assert all("-inf" in u or "where" in u or "masked_fill" in u
               for u in sd["unsupported"]), sd
    assert all("div(" in u for u in sd["unknown"])
    # SDPA's decomposed math reshapes (view/_unsafe_view): proved now, but
    # for its -inf constant (no real number)
    core = by["sdpa_core"].symbolic
    assert core["proved"] + core["proved_like_instances"] >= 1 and not core["differs"], core
    assert all("-inf" in u for u in core["unsupported"]), core
    for r in shipped_fast:
        assert set(r.symbolic) >= {"structures", "proved", "ranks"}
        assert r.symbolic["structures"] >= 1


def test_xla_simplifier_port():
    """The XLA algebraic-simplifier port (the rest in
    tests/test_xla_rules.py): XLA's A / c => A * (1/c) is not proved (it
    differs over the reals where 1/c is not a double, by less than any
    tolerance: unknown, not "differs", without a counterexample torch
    confirms), and is proved with the precondition that makes it exact (c a
    power of two)."""
    from pypm_verified.library import xla_simplifier as X
    pats = [X.DivByConst, X.DivByPow2]
    res = {r.rule: r for r in check_rules(pats, examples=FAST["examples"], per_guard=0,
                                          **X.CHECK_OPTIONS)}
    dc = res["div_by_const"].symbolic
    assert res["div_by_const"].status == "tested" and dc["unknown"] and not dc["differs"], dc
    assert all("z3 finds a difference over the reals" in u
               and "not confirmed numerically" in u for u in dc["unknown"])
    assert res["div_by_pow2"].status == "proved"


def test_the_instance_space_is_described(shipped_fast):
    by = {r.rule: r for r in shipped_fast}
    # the operator variable of LinearEpilog is drawn from its guard's class
    unary = {n for n, o in BY_NAME.items() if o.op_class == "unary_pointwise"}
    ops = by["linear_act"].space["operators"]["f"]
    assert ops and set(ops) <= unary
    assert by["linear_nt"].space["ranks"]["y"] == [2]
    text = markdown(shipped_fast)
    for r in shipped_fast:
        assert f"## `{r.rule}`" in text


# ------------------------------------------------ deliberately wrong rules

def _broadcasts(shape, to):
    return len(shape) <= len(to) and all(a in (1, b) for a, b in zip(reversed(shape),
                                                                       reversed(to)))


def _softmax_axis(r):
    c = r.counterexample
    ins = _inputs(c)
    dim = ins["dim"]["value"]
    assert dim % 4 != 3  # not the last axis of the rank-4 scores
    assert len(ins["q"]["shape"]) == 4 and "softmax(" in c.expression


def _mask(r):
    ins = _inputs(r.counterexample)
    q, k, mask = ins["q"]["shape"], ins["k"]["shape"], ins["mask"]["shape"]
    scores = q[:-1] + [k[-2]]
    assert not _broadcasts(mask, scores), (mask, scores)


def _gelu(r):
    c = r.counterexample
    ins = _inputs(c)
    assert ins["a"]["value"] == pytest.approx(0.04715)
    assert c.kind == "disagree" and c.max_abs > c.tolerance[0]
    assert "x" in ins and ins["x"]["shape"] is not None


def _transpose(r):
    c = r.counterexample
    ins = _inputs(c)
    assert len(ins["x"]["shape"]) == 3 and len(ins["y"]["shape"]) == 3
    assert "transpose(y, -1, -2)" in c.expression


@pytest.mark.parametrize("name,check", [
    ("attention_softmax_axis.py", _softmax_axis),
    ("attention_mask_broadcast.py", _mask),
    ("gelu_constant.py", _gelu),
    ("transpose_axes.py", _transpose),
])
def test_wrong_variants_are_refuted_with_a_counterexample(name, check):
    (r,) = check_rules(load_rules(os.path.join(WRONG, name)), examples=60, guards=False)
    assert r.status == "refuted", (r.status, r.reason)
    c = r.counterexample
    assert c is not None and c.kind in ("disagree", "error") and c.message
    assert any("shape" in i for i in c.inputs)  # shapes and dtypes are shown
    for i in c.inputs:
        assert ("shape" in i and "dtype" in i) or "value" in i
    check(r)
    lines = counterexample_lines(c)
    assert lines[0].startswith("instance: ") and lines[-1].startswith("result: ")


# ----------------------------------------- SDPA's math decomposed (sdpa_core)

@pytest.mark.slow
def test_sdpa_core_is_tested_on_every_form():
    """The generator builds CoreAttention instances the rule accepts: the
    expand/view/bmm/view chains consistent (ranks 3 and 4), with and without
    the additive mask, both safe softmaxes, permute and transpose keys."""
    from pypm_verified.library import attention as A
    r = check_rule(A.CoreAttention, A.sdpa_core, examples=24, guards=False, symbolic=False)
    assert r.status == "tested", (r.status, r.reason, r.counterexample and
                                  counterexample_lines(r.counterexample))
    assert r.examples == 24 and r.counts["fired"] == 24 and r.counterexample is None
    assert r.space["alternates"]["never_fired"] == [], r.space["alternates"]
    assert r.space["ranks"]["q"] == [3, 4] and r.space["ranks"]["k"] == [3, 4]


def test_sdpa_core_without_the_key_factor_is_refuted():
    """A wrong sdpa_core that drops the factor on the transposed key (takes
    it as 1): refuted with a counterexample whose factor is not 1."""
    import types

    from pypm_verified.dsl.rules import Rule
    from pypm_verified.library import attention as A

    def sdpa_core_unscaled_key(ctx, **b):
        if A._number(b.get("kmul")) is not None:
            b["kmul"] = types.SimpleNamespace(is_const=True, value=1.0)
        return A.sdpa_core.fn(ctx=ctx, **{p: b.get(p) for p in A.sdpa_core.params})

    wrong = Rule(A.CoreAttention, sdpa_core_unscaled_key)
    r = check_rule(A.CoreAttention, wrong, examples=24, guards=False, symbolic=False)
    assert r.status == "refuted", (r.status, r.reason)
    c = r.counterexample
    assert c.kind == "disagree" and "bmm(" in c.expression and "mul.Scalar(" in c.expression
    ins = _inputs(c)
    assert ins["kmul"]["value"] != 1 and ins["q"]["shape"] and ins["k"]["shape"]


# ------------------------------------------------------------ vacuity

@pytest.mark.slow
def test_a_rule_whose_asserts_decline_everything_is_vacuous(tmp_path):
    path = _write(tmp_path, "vacuous_rules.py", """\
        import pypm_verified as pm
        from pypm_verified.torch.ops import MatMul, Relu

        @pm.pattern
        def ReluMM(x, y):
            return Relu(MatMul(x, y))

        @pm.rule(ReluMM)
        def never_fires(x, y):
            assert x.rank == 7
            return Relu(MatMul(x, y))
        """)
    (r,) = check_rules(load_rules(path), examples=5, guards=False)
    assert r.status == "vacuous" and not r.ok
    assert "declined all" in r.reason and "vacuous_rules.py:10" in r.reason


def test_a_pattern_nothing_matches_is_vacuous(tmp_path):
    path = _write(tmp_path, "unmatched_rules.py", """\
        import pypm_verified as pm
        from pypm_verified.torch.ops import Neg

        @pm.pattern
        def Impossible(x):
            assert x.rank == 2 and x.rank == 3
            return Neg(x)

        @pm.rule(Impossible)
        def neg(x):
            return Neg(x)
        """)
    (r,) = check_rules(load_rules(path), examples=5, guards=False)
    assert r.status == "vacuous" and "no " in r.reason and r.counts["fired"] == 0


def test_an_operator_without_torch_target_is_vacuous_with_the_reason(tmp_path):
    path = _write(tmp_path, "abstract_rules.py", """\
        import pypm_verified as pm

        @pm.op
        def Foo(x): return 1

        @pm.pattern
        def P(x):
            return Foo(x)

        @pm.rule(P)
        def r(x):
            return Foo(x)
        """)
    (r,) = check_rules(load_rules(path), examples=5, guards=False)
    assert r.status == "vacuous" and "Foo has no torch target" in r.reason


# ------------------------------------------------ generation from patterns

REC = """\
    import pypm_verified as pm
    from pypm_verified.torch.ops import Relu

    @pm.pattern
    def ReluChain(x):
        return Relu(ReluChain(x))

    @pm.pattern
    def ReluChain(x):  # noqa: F811
        return Relu(x)

    @pm.rule(ReluChain)
    def one_relu(x):
        return Relu(x)
    """


def test_recursion_unfolds_up_to_the_depth_bound(tmp_path):
    (p,) = load_rules(_write(tmp_path, "rec_rules.py", REC))
    for bound in (1, 3):
        gen = InstanceGenerator(p, seed=1, max_depth=bound)
        lengths = set()
        for _ in range(200):
            inst = gen.generate()
            lengths.add(sum(isinstance(a, App) for a in inst.apps))
        assert lengths == set(range(1, bound + 2))
    r = check_rule(p, p.rules[0], examples=20, guards=False)
    # relu is defined in the symbolic semantics: relu(relu(x)) = relu(x) is proved
    assert r.status == "proved" and r.space["alternates"]["fired"] == 2


def test_every_alternate_of_attention_is_generated():
    p = next(p for p in default_patterns() if p.name == "Attention")
    gen = InstanceGenerator(p, seed=0)
    seen = set()
    for _ in range(400):
        seen.update(gen.generate().choices)
    assert {(d, k) for d, k, _ in gen.alternates()} <= seen


# ------------------------------------------------------------ guards

GUARDS = """\
    import pypm_verified as pm
    from pypm_verified.torch.ops import Linear, MatMul, Transpose

    @pm.pattern
    def MMT(x, y):
        assert y.rank == 2
        return MatMul(x, Transpose(y, -1, -2))

    @pm.rule(MMT)
    def to_linear(x, y, ctx):
        assert x.rank >= 1
        assert ctx.profitable("matmul_t", dtype=x.torch_dtype)
        return Linear(x, y, None)
    """


def test_guard_necessity(tmp_path):
    (p,) = load_rules(_write(tmp_path, "guard_rules.py", GUARDS))
    rule = p.rules[0]
    gs = rule_guards(rule)
    assert [g.text for g in gs] == ["x.rank >= 1",
                                    "ctx.profitable('matmul_t', dtype=x.torch_dtype)"]
    assert [g.profitability for g in gs] == [False, True]
    (pg,) = pattern_guards(p)
    assert pg.text == "y.rank == 2" and pg.where == "guard_rules.py:6"
    assert program_without(p, pg) != p.program
    r = check_rule(p, rule, examples=20, per_guard=6)
    assert r.status == "proved", r.symbolic  # x @ y^T is linear(x, y) for every size
    by = {g.text.split(": ")[-1]: g for g in r.guards}
    assert by["x.rank >= 1"].status == "redundant"
    assert by["ctx.profitable('matmul_t', dtype=x.torch_dtype)"].status == "skipped"
    nec = by["y.rank == 2"]
    assert nec.kind == "pattern" and nec.status == "necessary"
    y = _inputs(nec.counterexample)["y"]["shape"]
    assert len(y) != 2  # the counterexample is one the guard excludes


# ------------------------------------------------------------ the command

def run(argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_refuted_is_exit_1_with_reports(tmp_path, capsys):
    rep, md = tmp_path / "r.json", tmp_path / "r.md"
    # a copy: loading one file twice in a process would define its patterns twice
    src = tmp_path / "gelu_constant_cli.py"
    src.write_text(open(os.path.join(WRONG, "gelu_constant.py")).read())
    code, out, _ = run(["check-rules", "--rules", src,
                        "--examples", 30, "--no-guards", "--report", rep, "--markdown", md],
                       capsys)
    assert code == 1
    assert "refuted" in out and "counterexample to gelu_tanh_typo" in out
    doc = json.loads(rep.read_text())
    assert doc["summary"]["refuted"] == 1 and doc["rules"][0]["status"] == "refuted"
    assert doc["rules"][0]["counterexample"]["inputs"]
    assert "**refuted**" in md.read_text()


def test_cli_tested_is_exit_0(tmp_path, capsys):
    code, out, err = run(["check-rules", "--rules", "transpose", "--fast", "-q"], capsys)
    assert code == 0, out + err
    assert "1 rule(s): 1 proved" in out and "fast mode" in out


def test_cli_vacuous_is_exit_1(tmp_path, capsys):
    path = _write(tmp_path, "vac_cli_rules.py", """\
        import pypm_verified as pm
        from pypm_verified.torch.ops import Neg

        @pm.pattern
        def N(x):
            return Neg(x)

        @pm.rule(N)
        def never(x):
            assert x.rank == 9
            return Neg(x)
        """)
    code, out, _ = run(["check-rules", "--rules", path, "--examples", 3, "-q"], capsys)
    assert code == 1 and "vacuous" in out


@pytest.mark.parametrize("argv,fragment", [
    (["--rules", "no_such_rules_module"], "--rules no_such_rules_module"),
    (["--report", "no_dir/r.json"], "directory no_dir does not exist"),
    (["--examples", "0"], "0 is too few"),
])
def test_cli_bad_input_is_exit_2(argv, fragment, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(["check-rules"] + argv, capsys)
    assert code == 2 and fragment in err


def test_cli_undefined_name_is_exit_3(tmp_path, capsys):
    path = _write(tmp_path, "undef_rules.py", """\
        import pypm_verified as pm
        from pypm_verified.torch.ops import Neg

        @pm.pattern
        def N2(x):
            return Neg(x)

        @pm.rule(N2)
        def uses_undefined(x):
            return undefined_helper(x)
        """)
    code, _, err = run(["check-rules", "--rules", path], capsys)
    assert code == 3 and "undefined_helper" in err


@pytest.mark.slow
def test_cli_sigterm_ends_it_at_once(tmp_path):
    """SIGTERM while check-rules works (its proofs included): exit 143 in
    seconds, one line, no report written."""
    import signal
    import subprocess
    import sys
    import time
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), PYTHONUNBUFFERED="1")
    rep = tmp_path / "r.json"
    p = subprocess.Popen([sys.executable, "-m", "pypm_verified", "check-rules", "--rules",
                          "pypm_verified.library.attention", "--report", str(rep)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = p.stderr.readline()  # "checking sdpa ..." once the rules are loaded
        assert line.startswith("checking"), line + p.communicate(timeout=60)[1]
        time.sleep(40)  # into the proofs (a long one there: minutes before the fix)
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
        took = time.monotonic() - t0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 143, err
    assert err.strip().splitlines()[-1] == "terminated; nothing written"
    assert took < 30 and not rep.exists()
