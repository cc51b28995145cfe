"""Firing certificates (``binding.validate_firings``, C
``pypm_validate_firings``, the extracted ``Certify.validate_firings``): a
rule's firing is checked against the rule, not taken on trust.

On the term-graph driver's checker (:class:`validate.TermChecker`), with
the certificate recorded from the rule body (:func:`validate.record_template`):
the rule's own firing is accepted; four driver faults (a firing at a node
the pattern does not match, two bindings swapped in the replacement,
another rule's replacement, an unmatched node added) are each refused with
the reason and the firing named, though the pass alone (``validate_rewrite``,
which never sees the rules) accepts every one of them. ``pm.rewrite``
checks its firings with their certificates.

The PyTorch (FX) driver hands each firing over with its certificate too: the
same four faults injected in it are refused with exit 3 through the command
line, naming the firing, though the pass alone accepts each; firings that
depend on an earlier firing of the same pass are certified (re-derived, or
in a segment of their own); firings without a certificate (a multi-root
rule, a replacement reading a node the match does not bind) are listed in
the report.
"""
import os
import sys

import pytest

import pypm_verified as pm
from pypm_verified.engines import binding
from pypm_verified.engines.matching import PreparedPatterns, match
from pypm_verified.errors import EngineError
from pypm_verified.rewriting import validate


@pm.op
def MatMul(x, y):
    return 1


@pm.op
def Trans(x):
    return 1


@pm.op
def MMT(x, y):
    return 1


@pm.op
def Other(x, y):
    return 1


@pm.op
def Neg(x):
    return 1


@pm.pattern
def MatMulTrans(x, y):
    return MatMul(x, Trans(y))


@pm.rule(MatMulTrans)
def fuse(x, y, ctx):
    return MMT(x, y)


@pm.rule(MatMulTrans)
def other(x, y, ctx):
    return Other(x, y)


@pytest.fixture
def on(lib, monkeypatch):
    monkeypatch.delenv(validate.ENV_VAR, raising=False)


def _graph():
    g = pm.Graph()
    x, y = g.input("x"), g.input("y")
    m = g.apply(MatMul, x, g.apply(Trans, y))
    m2 = g.apply(MatMul, x, y)
    g.output(m)
    g.output(m2)
    return g, x, y, m, m2


def _fire(build, root_of=lambda m, m2: m, rule=fuse):
    """Fire ``rule`` with its certificate (recorded from its body at the
    match of ``MatMulTrans`` at ``m``) and the replacement ``build(g, x, y)``
    at ``root_of(m, m2)``: the TermChecker's rejection (or None), the
    verdict of the pass alone, the checker."""
    g, x, y, m, m2 = _graph()
    checker = validate.term_checker(g)
    assert checker is not None
    checker.begin()
    mt = match(MatMulTrans, m)
    assert mt is not None
    rec = validate.record_template(rule, MatMulTrans, mt, g)
    assert rec is not None
    cert = validate.RuleCertificate(*rec)
    root = root_of(m, m2)
    new = build(g, x, y)
    before = checker.before
    g.replace(root, new)
    # the pass alone, as validate_rewrite sees it
    after = checker.encode()
    p = validate.Pass("test", 1, before, after,
                      [validate.Firing(rule.name, before.index[root.id], new.id, "r", "n")], {},
                      lambda nid, p: p.after.index.get(nid), claim_rebuilt=True,
                      dedup_outputs=True)
    p.correspond()
    alone = binding.validate_rewrite(p.words())
    try:
        checker.fired(1, rule.name, root, new, cert)
    except validate.RewriteRejected as e:
        return e, alone, checker
    return None, alone, checker


def test_template_recorded_from_the_rule_body(on):
    g, x, y, m, _ = _graph()
    rec = validate.record_template(fuse, MatMulTrans, match(MatMulTrans, m), g)
    prepared, index, subst, t = rec
    assert index == 0 and subst == [(0, x.id), (1, y.id)]
    assert isinstance(t, validate.TNode) and t.key[0] == MMT.symbol
    assert [type(a) for a in t.args] == [validate.TVar, validate.TVar]
    assert [a.var for a in t.args] == [0, 1]


def test_the_rules_firing_is_accepted(on):
    err, alone, checker = _fire(lambda g, x, y: g.apply(MMT, x, y))
    assert err is None and alone == (0, -1)
    assert checker.certified == 1 and checker.passes == 1


@pytest.mark.parametrize("name,build,root_of,verdict", [
    ("a firing where the pattern does not match",
     lambda g, x, y: g.apply(MMT, x, y), lambda m, m2: m2, binding.REJECT_MATCH),
    ("two bindings swapped in the replacement",
     lambda g, x, y: g.apply(MMT, y, x), lambda m, m2: m, binding.REJECT_TEMPLATE),
    ("another rule's replacement",
     lambda g, x, y: g.apply(Other, x, y), lambda m, m2: m, binding.REJECT_TEMPLATE),
    ("an unmatched node added",
     lambda g, x, y: g.apply(MMT, x, g.apply(Neg, y)), lambda m, m2: m,
     binding.REJECT_TEMPLATE),
])
def test_injected_fault_refused_naming_the_firing(on, name, build, root_of, verdict):
    err, alone, _ = _fire(build, root_of)
    assert alone == (0, -1), f"{name}: the pass alone is accepted (the rules are not seen)"
    assert err is not None, name
    assert err.verdict == verdict, (name, err.verdict, str(err))
    assert err.firing is not None and err.firing[0] == "fuse", str(err)
    assert "rule 'fuse'" in str(err) and validate.REASONS[verdict][0] in str(err)


def test_another_rules_certificate_refused(on):
    # the driver built fuse's replacement but claims rule `other`
    err, alone, _ = _fire(lambda g, x, y: g.apply(MMT, x, y), rule=other)
    assert alone == (0, -1)
    assert err is not None and err.verdict == binding.REJECT_TEMPLATE


def test_validate_firings_refuses_a_malformed_buffer(lib):
    g, *_ = _graph()
    s = PreparedPatterns([MatMulTrans])
    # empty graphs, no firing, no label: then a trailing word
    with pytest.raises(EngineError, match="firing-certificate buffer: 1 trailing words"):
        binding.validate_firings(g, s.defs, s.roots, [0, 0, 0, 0, 0, 0, 7])
    assert binding.validate_firings(g, s.defs, s.roots, [0, 0, 0, 0, 0, 0]) == (0, -1)


def test_rewrite_checks_firings_with_certificates(on, monkeypatch):
    seen = []
    real = validate.TermChecker.fired

    def fired(self, number, rule, root, new, certificate=None):
        seen.append(certificate)
        real(self, number, rule, root, new, certificate)
        assert self.certified == len(seen)

    monkeypatch.setattr(validate.TermChecker, "fired", fired)
    g, x, y, m, m2 = _graph()
    pm.rewrite(g, [MatMulTrans])
    assert sorted(n.op.name for n in g.live() if n.kind == "op") == ["MMT", "MatMul"]
    assert len(seen) == 1 and isinstance(seen[0], validate.RuleCertificate)


def test_rewrite_refuses_a_driver_that_wires_the_replacement_wrong(on, monkeypatch):
    # a driver bug: the replacement's arguments swapped after the rule built it
    real_replace = pm.Graph.replace

    def replace(self, old, new):
        if new.kind == "op" and new.op is MMT:
            new = self.apply(MMT, new.args[1], new.args[0])
        real_replace(self, old, new)
        replace.new = new

    monkeypatch.setattr(pm.Graph, "replace", replace)
    real_fired = validate.TermChecker.fired
    monkeypatch.setattr(validate.TermChecker, "fired",
                        lambda self, n, rule, root, new, c=None:
                        real_fired(self, n, rule, root, replace.new, c))
    g, *_ = _graph()
    with pytest.raises(validate.RewriteRejected, match="TEMPLATE") as e:
        pm.rewrite(g, [MatMulTrans])
    assert e.value.firing[0] == "fuse"


# ------------------------------------------------------------ the FX driver
# The PyTorch driver hands each rule's firing over with its certificate: the
# pattern and the match it fired, and the replacement as the template the rule
# body's operator calls built (recorded by the builder, over the match's
# bindings and constants). Its checker's graphs encode constants and lists as
# nodes, as the importer's term graph does, so they agree with the matcher's.

FX_RULES = """
import pypm_verified as pm
from pypm_verified.torch.ops import Add, Neg, Sub

@pm.pattern
def SubNeg(x, y):
    return Sub(x, Neg(y), 1)

@pm.rule(SubNeg)
def sub_neg(x, y):
    return x + y * 1.0
"""


def _fx_files(tmp_path):
    import torch

    class SubNegModel(torch.nn.Module):
        def forward(self, a, b):
            return (a - (-b)) * 3

    model = str(tmp_path / "subneg.pt2")
    torch.export.save(torch.export.export(SubNegModel(), (torch.randn(4), torch.randn(4))),
                      model)
    rules = str(tmp_path / "subneg_rules.py")
    with open(rules, "w") as f:
        f.write(FX_RULES)
    return model, rules


def _fx_rewrite(tmp_path, capsys):
    from test_cli import run
    model, rules = _fx_files(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    code, _out, err = run(["rewrite", model, "-o", out / "o.pt2", "--rules", rules,
                           "--ignore-profitability"], capsys)
    return code, err, out


def _fx_checker_of(monkeypatch):
    """The FX checkers the drivers make, as they are made."""
    made = []
    from pypm_verified.torch import validate_fx
    real = validate_fx.fx_checker

    def fx_checker(driver):
        c = real(driver)
        made.append(c)
        return c

    monkeypatch.setattr(validate_fx, "fx_checker", fx_checker)
    return made


def test_fx_driver_certifies_its_firings(on, tmp_path, capsys, monkeypatch):
    made = _fx_checker_of(monkeypatch)
    seen = []
    real = binding.validate_firings

    def validate_firings(*a, **k):
        seen.append(real(*a, **k))
        return seen[-1]

    monkeypatch.setattr(binding, "validate_firings", validate_firings)
    code, err, out = _fx_rewrite(tmp_path, capsys)
    assert code == 0, err
    assert os.listdir(out) == ["o.pt2"]
    assert seen == [(0, -1)]  # the pass, checked with the certificate
    c = made[-1]
    assert c.certified == 1 and c.uncertified == [] and c.passes == 1


def _break_builder(monkeypatch, how):
    """Make the FX driver's builder build something else than the rule asked
    for: a fault inside the builder, after it recorded the rule's call (the
    record is what the template is made of)."""
    from pypm_verified.torch import firing, ops
    real = firing.Builder.apply

    def apply(self, op, *args, **kw):
        asked = (op, args)
        if self.rule.name == "sub_neg" and op is ops.Add:
            if how == "swap":  # two bindings swapped in the replacement
                args = (args[1], args[0]) + args[2:]
            elif how == "other rule":  # another rule's replacement: x - y*1
                op = ops.Sub
            elif how == "extra node":  # an unmatched node added: x + -(y*1)
                args = (args[0], real(self, ops.Neg, args[1])) + args[2:]
        v = real(self, op, *args, **kw)
        if self.trace and self.trace[-1][2] is v:
            self.trace[-1] = (asked[0], asked[1], v)
        return v

    monkeypatch.setattr(firing.Builder, "apply", apply)


def _break_match(monkeypatch):
    """Make the FX driver fire at a node where the pattern does not match: the
    match found at the subtraction is fired at the product that uses it."""
    from pypm_verified.engines.matching import PatternSet
    from pypm_verified.torch.driver import Driver
    real = PatternSet.match
    real_first = PatternSet.first_match
    found = {}

    def match(self, i, node):
        m = real(self, i, node)
        if m is not None and node.op is not None and node.op.name == "Sub":
            found["m"] = m
        return m

    def first_match(self, indices, node, start=0):  # the driver's way to match
        got = real_first(self, indices, node, start)
        if got is not None and node.op is not None and node.op.name == "Sub":
            found["m"] = got[1]
        return got

    real_try = Driver._try_single
    # the walk tries only nodes some pattern may root at (Driver._root_labels):
    # the broken driver tries every node
    monkeypatch.setattr(Driver, "_root_labels", lambda self: lambda label: True)

    def try_single(self, node, term):
        if node.target is not None and "mul" in str(node.target) and "m" in found:
            m = found.pop("m")
            values = {k: self.bound_value(t) for k, t in m.bindings.items()}
            self.matching = (0, m, node, values)
            return self.fire_at(self.patterns[0].rules[0], values, node, [])
        return real_try(self, node, term)

    monkeypatch.setattr(PatternSet, "match", match)
    monkeypatch.setattr(PatternSet, "first_match", first_match)
    monkeypatch.setattr(Driver, "_try_single", try_single)


@pytest.mark.parametrize("fault,verdict", [
    ("match", binding.REJECT_MATCH),
    ("swap", binding.REJECT_TEMPLATE),
    ("other rule", binding.REJECT_TEMPLATE),
    ("extra node", binding.REJECT_TEMPLATE),
])
def test_fx_driver_fault_refused_exit_3(on, tmp_path, capsys, monkeypatch, fault, verdict):
    from test_cli import _one_line_error
    # the pass checker's verdict on each certified pass (the certificate
    # checker checks the pass too, then the firings)
    passes = []
    real_certified = validate.Pass.check_certified

    def check_certified(p, *a, **k):
        passes.append(tuple(binding.validate_rewrite(p.words())))
        return real_certified(p, *a, **k)

    monkeypatch.setattr(validate.Pass, "check_certified", check_certified)
    if fault == "match":
        _break_match(monkeypatch)
    else:
        _break_builder(monkeypatch, fault)
    code, err, out = _fx_rewrite(tmp_path, capsys)
    assert code == 3, err
    line = _one_line_error(err)
    name = validate.REASONS[verdict][0]
    assert "RewriteRejected" in line and f"({name}:" in line, line
    assert "rule 'sub_neg' at " in line, line  # the firing, named
    assert os.listdir(out) == []  # nothing written
    # the pass alone (which never sees the rules) accepts the fault
    assert passes and all(v == (0, -1) for v in passes), passes


def test_fx_firing_without_a_template_is_reported(on, tmp_path, monkeypatch):
    """A replacement that reads a node the match does not bind has no
    template: its pass is checked as a pass, and the checker lists it."""
    import torch
    from pypm_verified.torch.driver import Driver

    class M(torch.nn.Module):
        def forward(self, a, b):
            return a - (-b)

    ep = torch.export.export(M(), (torch.randn(4), torch.randn(4)))
    ns = {}
    exec(FX_RULES.replace("return x + y * 1.0", "return x + other"), ns)
    made = _fx_checker_of(monkeypatch)
    gm = ep.graph_module
    other = [n for n in gm.graph.nodes if n.op == "placeholder"][0]
    d = Driver(gm, [ns["SubNeg"]], check_profitability=False)
    real_prepare = d.prepare

    def prepare():  # the rule reads the first input, which the match binds to no variable
        real_prepare()
        ns["other"] = d.value(other)

    d.prepare = prepare
    report = d.run()
    assert report.firings == {"sub_neg": 1}
    c = made[-1]
    assert c.certified == 0 and len(c.uncertified) == 1
    rule, root, why = c.uncertified[0]
    assert rule == "sub_neg" and "neither a binding of the match" in why, why
    # not silent: the report's line and JSON say so
    line = str(report.validation)
    assert line.startswith("validated (1 pass); 0 firing(s) certified, 1 checked as a pass "
                           "only, without a certificate: rule 'sub_neg' at "), line
    assert report.validation.as_dict()["uncertified"] == [line.split("certificate: ")[1]]


def _chain_patterns():
    from pypm_verified.torch import ops

    @pm.pattern
    def SigmoidP(x):
        return ops.Sigmoid(x)

    @pm.rule(SigmoidP)
    def to_tanh(x):  # (numerics not checked here: the driver alone)
        return ops.Tanh(x)

    @pm.pattern
    def ExpTanh(x):
        return ops.Exp(ops.Tanh(x))

    @pm.rule(ExpTanh)
    def exp_tanh(x):
        return ops.Relu(x)

    @pm.pattern
    def ExpNeg(y):
        return ops.Exp(ops.Neg(y))

    @pm.rule(ExpNeg)
    def exp_neg(y):
        return ops.Abs(y)

    return [SigmoidP, ExpTanh, ExpNeg]


@pytest.mark.parametrize("model,segments,fired", [
    # exp's match exists only after the sigmoid's firing of the same pass:
    # the pass is split there, both firings certified
    ("exp(sigmoid(a))", 2, {"to_tanh": 1, "exp_tanh": 1}),
    # exp's match is the one at its term before the pass, its binding the
    # sigmoid the pass replaced: certified in one segment
    ("exp(-sigmoid(a))", 1, {"to_tanh": 1, "exp_neg": 1}),
])
def test_fx_firings_depending_on_the_same_pass_certified(on, monkeypatch, model, segments,
                                                         fired):
    import torch
    from pypm_verified.torch.driver import Driver

    class M(torch.nn.Module):
        def forward(self, a):
            s = torch.sigmoid(a)
            return torch.exp(-s if "-" in model else s)

    made = _fx_checker_of(monkeypatch)
    gm = torch.export.export(M(), (torch.randn(4),)).graph_module
    report = Driver(gm, _chain_patterns(), check_profitability=False).run()
    assert report.firings == fired
    c = made[-1]
    assert c.certified == 2 and c.uncertified == [], c.uncertified
    assert c.segments == segments and c.passes == 1
    assert str(report.validation) == "validated (1 pass)"


def test_fx_multi_root_firing_is_checked_as_a_pass_and_reported(on, monkeypatch):
    import torch
    from pypm_verified.torch import ops
    from pypm_verified.torch.driver import Driver

    @pm.pattern
    def NegAbs(x):
        return ops.Neg(x), ops.Abs(x)

    @pm.rule(NegAbs)
    def neg_abs(x):
        return x * -1.0, ops.Abs(x)

    class M(torch.nn.Module):
        def forward(self, a):
            return -a, torch.abs(a)

    made = _fx_checker_of(monkeypatch)
    gm = torch.export.export(M(), (torch.randn(4),)).graph_module
    report = Driver(gm, [NegAbs], check_profitability=False).run()
    assert report.firings == {"neg_abs": 1}
    c = made[-1]
    # each root it replaced (the rebuilt abs takes the place of the old one)
    assert c.certified == 0 and c.uncertified and all(
        (r, why) == ("neg_abs", "a multi-root rule (no single-root certificate)")
        for r, _at, why in c.uncertified)
    line = str(report.validation)
    assert f"0 firing(s) certified, {len(c.uncertified)} checked as a pass only, without a " \
        "certificate: rule 'neg_abs' at " in line, line


class _Pairs(list):
    native = None  # the native reader's answers, when it is built


def _reads_against_the_rematch(monkeypatch):
    """Wrap the FX checker's reading of a match whose root's term changed in
    the pass (:meth:`FxChecker._read_unchanged`, no engine call) so that each
    reading it makes is compared with the proved matcher's match at the
    root's term at the start of the pass (what the checker read before it):
    ``(reading, re-match)`` pairs, as substitutions by before key. Each
    reading is also made by the Python code (``_native.paths(False)``),
    which must answer alike, None included: with the native reader built,
    it is the native one's reading that is compared with the re-match."""
    from pypm_verified import _native
    from pypm_verified.torch import validate_fx
    real = validate_fx.FxChecker._read_unchanged
    pairs = _Pairs()
    native = _native.reader()
    if native is not None:
        ran = pairs.native = []  # the native reading's answers (not NotImplemented)
        read_natively = native.read_unchanged

        def counted(*a):
            got = read_natively(*a)
            if got is not NotImplemented:
                ran.append(got)
            return got

        monkeypatch.setattr(native, "read_unchanged", counted)

    def read(self, i, m, root):
        got = real(self, i, m, root)
        with _native.paths(False):
            py = real(self, i, m, root)
        assert (got is None) == (py is None) and (got is None or got[1] == py[1]), (got, py)
        if got is not None:
            b = self.before
            t0 = self.images[b.index[root]]
            m0 = self.driver.pset.match(i, self.driver.tg.graph[t0])
            exact = None if m0 is None or m0.fsubstitution != m.fsubstitution else \
                [(x, b.keys[self.inverse[n.id]]) for x, n in m0.substitution.items()]
            pairs.append((got[1], exact))
        return got

    monkeypatch.setattr(validate_fx.FxChecker, "_read_unchanged", read)
    return pairs


def _rewrite_with_the_library(gm):
    from pypm_verified.library import default_patterns
    from pypm_verified.torch.driver import Driver
    return Driver(gm, default_patterns(), target="cpu", recompile=False,
                  check_profitability=False).run()


@pytest.mark.parametrize("name", ["bert", "gpt2", "llama"])
def test_fx_reading_without_rematch_is_the_rematch(on, monkeypatch, base_programs, name):
    """A firing whose root's term changed in the pass (a firing of the
    layer below re-imported it) is read in the graph before the pass
    without matching again when every FX node between the root and the
    bindings is unchanged but for a replacement the pass made, bound by the
    match (LLaMA's gated MLP binds the RMSNorm the pass fused): that
    reading is the proved matcher's match at the root's term then, firing
    by firing, and every firing is certified."""
    import copy
    pairs = _reads_against_the_rematch(monkeypatch)
    made = _fx_checker_of(monkeypatch)
    report = _rewrite_with_the_library(copy.deepcopy(base_programs[name]).graph_module)
    c = made[-1]
    assert sum(report.firings.values()) == c.certified and c.uncertified == []
    # the layers above the first one are read so (BERT-3: 2 of 3 per rule)
    assert len(pairs) >= 2, pairs
    assert all(got == exact for got, exact in pairs), [p for p in pairs if p[0] != p[1]]
    if pairs.native is not None:  # natively, each of them
        assert len([g for g in pairs.native if g is not None]) == len(pairs)


@pytest.mark.zoo
@pytest.mark.parametrize("name", ["t5", "vit", "mixtral"])  # (ResNet: no firing)
def test_fx_reading_without_rematch_is_the_rematch_zoo(on, monkeypatch, zoo_programs, name):
    """As above on the zoo's models with firings, exported with dynamic
    shapes (T5: 20 readings, ViT 4, Mixtral 6)."""
    import copy
    pairs = _reads_against_the_rematch(monkeypatch)
    made = _fx_checker_of(monkeypatch)
    _rewrite_with_the_library(copy.deepcopy(zoo_programs[name]).graph_module)
    assert made and pairs and all(got == exact for got, exact in pairs), \
        [p for p in pairs if p[0] != p[1]]


def _checks_on_windows(monkeypatch):
    """Wrap the certificate check of each FX pass so that the pass is
    checked again on its windows (``bench/bench_validator.py``'s
    ``window_pass``: the region the pass changed before and after it, each
    node a copy or a frontier leaf, against a window of the matcher's graph;
    ``theories/Window.v`` says that acceptance there suffices). Returns the
    list of windows checked (sizes), which must all be accepted (a
    rejection raises)."""
    bench = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    import bench_validator
    from pypm_verified.rewriting import validate
    real = validate.Pass.check_certified
    checked = []

    def check(self, graph, labels, operator_of, image, fuel=None):
        real(self, graph, labels, operator_of, image, fuel=fuel)
        got = bench_validator.check_windows(self, graph, labels, operator_of, image, fuel=fuel,
                                            check=real)
        if got is not None:
            pw = got[0]
            checked.append((len(pw.before), len(self.before), len(pw.after), len(self.after)))

    monkeypatch.setattr(validate.Pass, "check_certified", check)
    return checked


@pytest.mark.parametrize("name", ["bert", "gpt2", "llama"])
def test_fx_pass_accepted_on_its_windows(on, monkeypatch, base_programs, name):
    """Every certified pass of the library's rewrite is accepted by the
    certificate checker on its windows too, each smaller than its graph."""
    import copy
    checked = _checks_on_windows(monkeypatch)
    _rewrite_with_the_library(copy.deepcopy(base_programs[name]).graph_module)
    assert checked and all(wb < b and wa < a for wb, b, wa, a in checked), checked


@pytest.mark.zoo
@pytest.mark.parametrize("name", ["t5", "vit", "mixtral"])
def test_fx_pass_accepted_on_its_windows_zoo(on, monkeypatch, zoo_programs, name):
    """As above on the zoo's models with firings (dynamic shapes)."""
    import copy
    checked = _checks_on_windows(monkeypatch)
    _rewrite_with_the_library(copy.deepcopy(zoo_programs[name]).graph_module)
    assert checked and all(wb <= b and wa <= a for wb, b, wa, a in checked), checked


def _encodes(monkeypatch):
    """The FX checkers' readings of the graph (``FxChecker.encode``), as
    ``before is None`` (the graph at a pass's start) per call."""
    from pypm_verified.torch import validate_fx
    real = validate_fx.FxChecker.encode
    calls = []

    def encode(self, before=None):
        calls.append(before is None)
        return real(self, before)

    monkeypatch.setattr(validate_fx.FxChecker, "encode", encode)
    return calls


def test_fx_graph_read_at_the_first_firing_only(on, monkeypatch):
    """The graph at a pass's start is read at its first firing: a rewrite
    that fires nothing reads nothing (and says it checked no pass); one that
    fires reads the graph then and after the pass, and checks it."""
    import torch
    from pypm_verified.torch.driver import Driver

    class Fires(torch.nn.Module):
        def forward(self, a, b):
            return a - (-b)

    class Nothing(torch.nn.Module):
        def forward(self, a, b):
            return a * b

    # a module of its own: SubNeg defined again elsewhere would be an alternate
    ns = {"__name__": "first_firing_rules"}
    exec(FX_RULES, ns)
    made = _fx_checker_of(monkeypatch)
    calls = _encodes(monkeypatch)
    args = (torch.randn(4), torch.randn(4))
    report = Driver(torch.export.export(Nothing(), args).graph_module, [ns["SubNeg"]],
                    check_profitability=False).run()
    assert report.firings == {} and calls == [] and made[-1].passes == 0
    assert str(report.validation) == "validated (no pass changed the graph)"
    report = Driver(torch.export.export(Fires(), args).graph_module, [ns["SubNeg"]],
                    check_profitability=False).run()
    assert report.firings == {"sub_neg": 1}
    assert calls == [True, False]  # at the firing, then after the pass
    c = made[-1]
    assert c.passes == 1 and c.certified == 1 and c.uncertified == []


@pytest.mark.parametrize("model,reads", [
    # exp's match binds the sigmoid's replacement, which stands for the
    # sigmoid at exp's term before the pass: read without matching again
    ("exp(-sigmoid(a))", 1),
    # exp's pattern reads inside the replacement (its match exists only after
    # the firing): not read so, matched again (and the pass split)
    ("exp(sigmoid(a))", 0),
])
def test_fx_reading_through_a_replacement(on, monkeypatch, model, reads):
    import torch
    from pypm_verified.torch.driver import Driver

    class M(torch.nn.Module):
        def forward(self, a):
            s = torch.sigmoid(a)
            return torch.exp(-s if "-" in model else s)

    pairs = _reads_against_the_rematch(monkeypatch)
    made = _fx_checker_of(monkeypatch)
    gm = torch.export.export(M(), (torch.randn(4),)).graph_module
    Driver(gm, _chain_patterns(), check_profitability=False).run()
    assert made[-1].certified == 2
    assert len(pairs) == reads and all(got == exact for got, exact in pairs), pairs
    if reads:  # the binding's key is the sigmoid the pass replaced
        (_x, key), = pairs[0][0]
        assert key.name == "sigmoid", key


@pytest.mark.parametrize("name", ["bert", "gpt2", "llama"])
def test_fx_template_kept_per_rule_is_the_one_built(on, monkeypatch, base_programs, name):
    """A firing's template is kept under its calls' shape (the bindings'
    variables, the calls, the constants): each kept template is, word for
    word, the one built from that firing's own calls, and the layers'
    firings of a rule share one; so do the firings of a second graph the
    process rewrites (the templates are the process's, not an import's)."""
    import copy
    from pypm_verified.torch import validate_fx
    real = validate_fx.FxChecker._template
    seen = []

    def template(self, out, trace, values, m):
        t = real(self, out, trace, values, m)
        var_of = {id(values[b]): x for x, b in zip(m.substitution, m.bindings)
                  if b in values}
        built = self._build_template(out, trace, var_of)
        seen.append((validate._words_of_template(t, self.labels),
                     validate._words_of_template(built, self.labels), id(t)))
        alive.append(t)  # no id reused by another template
        return t

    alive = []
    monkeypatch.setattr(validate_fx.FxChecker, "_template", template)
    made = _fx_checker_of(monkeypatch)
    report = _rewrite_with_the_library(copy.deepcopy(base_programs[name]).graph_module)
    assert made[-1].certified == sum(report.firings.values()) == len(seen)
    assert all(kept == built for kept, built, _ in seen)
    assert len({i for _, _, i in seen}) < len(seen)  # shared across layers
    first = {i for _, _, i in seen}
    seen.clear()
    report = _rewrite_with_the_library(copy.deepcopy(base_programs[name]).graph_module)
    assert made[-1].certified == sum(report.firings.values()) == len(seen)
    assert all(kept == built for kept, built, _ in seen)  # a new import, the same words
    assert {i for _, _, i in seen} <= first  # the first graph's templates, kept


def test_template_key_tells_constants_apart():
    """The key a template is kept under holds each constant by type and
    value: 2 and 2.0, True and 1, 0.0 and -0.0, a dtype and another are
    different templates."""
    from pypm_verified.torch.validate_fx import _trace_key
    import torch

    x, out = object(), object()  # a binding's Value, the call's result

    def key(c):
        return _trace_key(out, [("op", (x, c), out)], {id(x): 0})

    consts = [2, 2.0, True, 1, 0.0, -0.0, float("nan"), torch.float32, torch.float16,
              [1, 2], (1, 2)]
    keys = [key(c) for c in consts]
    assert None not in keys and len(set(keys)) == len(keys), keys
    assert key(float("nan")) == key(float("nan"))
    assert _trace_key("out", [("op", (object(),), "out")], {}) is None  # no key: built
