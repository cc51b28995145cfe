"""``check-rules`` refutes the wrong rules users write: sizes the
guards tie together are drawn together (>= 2 in most instances, not only
where both happen to be 1), input values where rules are fragile
(near-constant rows, where an epsilon shows), a ``degenerate`` verdict for a
rule that fired only where an axis its pattern reads says nothing, and
counterexamples that run on their own (``--repro``).

The rules: tests/wrong_rules/layernorm_eps.py (a LayerNorm written out,
rewritten to ``layer_norm`` with ``eps * 100``),
tests/wrong_rules/layernorm_eps_outside.py (``/ (sqrt(var) + eps)``) and
their control tests/right_rules/layernorm_right.py.

Skipped when torch is missing."""
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

from pypm_verified.checking import FAST, check_rule  # noqa: E402
from pypm_verified.checking.evaluate import RuleRunner  # noqa: E402
from pypm_verified.checking.hints import rule_hints  # noqa: E402
from pypm_verified.checking.instances import InstanceGenerator  # noqa: E402
from pypm_verified.cli import main  # noqa: E402
from pypm_verified.library import load_rules  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WRONG = os.path.join(ROOT, "tests", "wrong_rules")
RIGHT = os.path.join(ROOT, "tests", "right_rules")
EPS = os.path.join(WRONG, "layernorm_eps.py")
EPS_OUTSIDE = os.path.join(WRONG, "layernorm_eps_outside.py")
LN_RIGHT = os.path.join(RIGHT, "layernorm_right.py")


def _write(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


def _one(path):
    (p,) = load_rules(path)
    (r,) = p.rules
    return p, r


# ------------------------------------------------------------ sizes

def test_guard_tied_sizes_are_drawn_together_at_two_or_more(tmp_path):
    """A guard that ties sizes of two inputs no operator relates (``x @ y``
    square: ``x.shape[0] == y.shape[1]``) used to hold only where both were
    drawn 1; now the two sizes are one symbol, >= 2 in most instances."""
    path = _write(tmp_path, "square.py", """
        import pypm_verified as pm
        from pypm_verified.torch.ops import Mm, T

        @pm.pattern
        def Square(x, y):
            assert x.shape[0] == y.shape[1]
            return Mm(x, y)

        @pm.rule(Square)
        def square(x, y):
            return T(Mm(T(y), T(x)))

        PATTERNS = [Square]
        """)
    p, r = _one(path)
    gen = InstanceGenerator(p, rule_hints(r), seed="tie")
    sizes = []
    for _ in range(40):
        inst = gen.generate()
        (_, xs, _), (_, ys, _) = inst.inputs()
        assert xs[0] == ys[1]  # the guard holds (filtered)
        sizes.append(xs[0])
    assert sum(n >= 2 for n in sizes) >= 30, sizes


def test_arithmetic_size_equations_are_solved(tmp_path):
    """A guard (or an assert of the rule) relating sizes by arithmetic
    (``x.shape[-1] == y.shape[-1] * 2``, as a head split reads) is made true
    by drawing the sizes with z3, >= 2 where it can: before, such a guard
    held only where two drawn sizes happened to fit."""
    path = _write(tmp_path, "split.py", """
        import pypm_verified as pm
        from pypm_verified.torch.ops import Add, SumDim

        @pm.pattern
        def Sums(x, y):
            assert x.shape[-1] == y.shape[-1] * 2 + 1
            return Add(SumDim(x, [-1], True, None), SumDim(y, [-1], True, None), 1)

        @pm.rule(Sums)
        def sums(x, y):
            return Add(SumDim(y, [-1], True, None), SumDim(x, [-1], True, None), 1)

        PATTERNS = [Sums]
        """)
    p, r = _one(path)
    gen = InstanceGenerator(p, rule_hints(r), seed="arith")
    kept = 0
    for _ in range(60):
        try:
            inst = gen.generate(tries=1)
        except Exception:
            continue
        shapes = {name: s for name, s, _ in inst.inputs()}
        assert shapes["x"][-1] == shapes["y"][-1] * 2 + 1  # the guard holds (filtered)
        kept += shapes["y"][-1] >= 2
    # about 90 % of draws tie the sizes; random sizes in 1..9 fit in ~5 %
    assert kept >= 35, kept


def test_layernorm_axis_is_drawn_at_two_or_more(monkeypatch):
    """The LayerNorm written out reduces its last axis with keepdim means;
    the rule's asserts tie ``w.shape[0]``/``b.shape[0]`` to ``x.shape[-1]``:
    most instances the rule fires on normalize over >= 2 elements (they all
    had size 1 before: the means' shapes forced it)."""
    p, r = _one(LN_RIGHT)
    fired = []
    run = RuleRunner.run

    def spy(self, inst, *a, **k):
        o = run(self, inst, *a, **k)
        if o.kind == "agree":
            fired.append(dict((n, s) for n, s, _ in inst.inputs())["x"][-1])
        return o
    monkeypatch.setattr(RuleRunner, "run", spy)
    res = check_rule(p, r, examples=24, per_guard=0, symbolic=False)
    assert res.status == "tested", (res.status, res.reason)
    assert len(fired) == 24 and sum(n >= 2 for n in fired) >= 0.6 * len(fired), fired


# ------------------------------------------------------------ values

def test_near_constant_rows_refute_the_eps_typo():
    """An instance of the eps typo (1e-05 made 1e-03) over >= 6 normal values
    per row is off by about 1e-3 relative at most (float32's rtol: at the
    edge); the same instance with rows nearly constant along the normalized
    axis (variance ~1e-6, below eps) is off by far more -- and the fast
    check finds such a counterexample."""
    p, r = _one(EPS)
    gen = InstanceGenerator(p, rule_hints(r), seed="rows", dtypes=(torch.float32,))
    runner = RuleRunner(p, r, "reference")

    def eps_1e5(inst):
        shapes = {n: s for n, s, _ in inst.inputs()}
        vals = {n: v for n, s, v in inst.inputs() if s is None}
        return vals.get("eps") == 1e-05 and shapes["x"] is not None \
            and len(shapes["x"]) == 2 and shapes["x"][-1] >= 6
    for _ in range(50):
        inst = gen.generate(accept=eps_1e5)
        normal = runner.run(inst.__class__(**{**inst.__dict__, "values_mix": "normal"}))
        if normal.fired:
            break
    assert normal.fired and normal.max_rel < 1e-2, normal.detail
    near = runner.run(inst.__class__(**{**inst.__dict__, "values_mix": "near_constant"}))
    assert near.kind == "disagree" and near.max_rel > 0.1, near.detail
    from pypm_verified.checking.evaluate import input_tensor
    x = input_tensor((4, 8), torch.float32, torch.Generator().manual_seed(0), False,
                     "near_constant", -1).double()
    assert float(x.var(-1).max()) < 1e-5 < float(x.abs().mean())

    res = check_rule(p, r, examples=FAST["examples"], per_guard=0, symbolic=False)
    assert res.status == "refuted", (res.status, res.reason)
    c = res.counterexample
    assert c.kind == "disagree" and "layer_norm" in c.replacement
    assert c.values is not None and len(c.values["x"]) >= 2  # printed in full
    assert dict((i["name"], i["shape"]) for i in c.inputs if "shape" in i)["x"][-1] >= 2


def test_the_eps_outside_the_root_is_refuted():
    p, r = _one(EPS_OUTSIDE)
    res = check_rule(p, r, examples=FAST["examples"], per_guard=0, symbolic=False)
    assert res.status == "refuted", (res.status, res.reason)


def test_the_right_layernorm_rule_is_tested():
    """The control: eps unchanged, every value mix and dtype (half precision
    compared with its tolerance, relative to the output's magnitude)."""
    p, r = _one(LN_RIGHT)
    res = check_rule(p, r, examples=24, per_guard=0, symbolic=False)
    assert res.status == "tested", (res.status, res.reason, res.counterexample)
    axis = res.space["axes"]["x.shape[-1]"]
    assert max(axis["sizes"]) >= 2 and axis["degenerate"] < axis["instances"]
    assert res.space["values"].get("near_constant")
    assert res.space["tolerance"]["rule"] == "|got - ref| <= atol * max|ref| + rtol * |ref|"


# ------------------------------------------------------------ degenerate

def _degenerate_source() -> str:
    """The right LayerNorm rule (tests/right_rules/layernorm_right.py) with the
    eps typo, behind a guard typo: ``w.shape[0] == x.shape[-1] == b.rank``
    (a chained comparison, meant ``b.shape[0]``)."""
    src = open(LN_RIGHT).read()
    edits = [("    assert b.rank == 1 and b.shape[0] == x.shape[-1]\n",
              "    assert b.rank == 1 and b.shape[0] == w.shape[0]\n"
              "    assert w.shape[0] == x.shape[-1] == b.rank  # chained: meant b.shape[0]\n"),
             ("eps.value, False)", "eps.value * 100, False)")]
    for old, new in edits:
        assert src.count(old) == 1, old
        src = src.replace(old, new)
    return src


def test_a_rule_that_fires_only_on_a_size_one_axis_is_degenerate(tmp_path, capsys):
    """The eps typo again, behind a guard typo (``w.shape[0] ==
    x.shape[-1] == b.rank``, a chained comparison, for ``b.shape[0]``): it
    fires only where the normalized axis has size 1, where LayerNorm returns
    its bias whatever eps is. No instance can refute it, and none tested it:
    "degenerate", exit 1, the axis named (it was "tested", exit 0)."""
    path = _write(tmp_path, "ln_guard_typo.py", _degenerate_source())
    code = main(["check-rules", "--rules", path, "--fast", "--no-symbolic", "-q"])
    out = capsys.readouterr()
    text = out.out + out.err
    assert code == 1, text
    assert "degenerate" in text and "x.shape[-1]" in text and "size 1" in text
    p, r = _one(path)
    res = check_rule(p, r, examples=6, per_guard=0, symbolic=False)
    assert res.status == "degenerate" and not res.ok, (res.status, res.reason)
    assert res.space["axes"]["x.shape[-1]"]["sizes"] == [1]


# ------------------------------------------------------------ --repro

def test_repro_file_runs_alone_and_shows_the_difference(tmp_path, capsys):
    folder = tmp_path / "repro"
    code = main(["check-rules", "--rules", EPS, "--fast", "--no-symbolic", "-q",
                 "--repro", str(folder)])
    out = capsys.readouterr()
    assert code == 1, out.out + out.err
    (f,) = list(folder.iterdir())
    src = f.read_text()
    assert "import pypm_verified" not in src and "torch.ops.aten.layer_norm" in src
    assert "x = [[" in out.out + out.err  # the input values, printed
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run([sys.executable, str(f)], capture_output=True, text=True,
                         cwd=str(tmp_path), env=env, timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "max abs difference" in run.stdout and "DIFFERENT" in run.stdout
