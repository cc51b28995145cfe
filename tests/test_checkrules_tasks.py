"""The check of a rule as units of work (:mod:`pypm_verified.checking.checker`):
the instance search (:func:`check_rule_instances`), one proof per structure
(:func:`prove_structure`, on instances carried as bytes), the merge
(:func:`finish_rule`). The units in any order make :func:`check_rule`'s
result; what cannot be merged is an error naming the problem. (The split run
on worker processes and Ray: tests/test_parallel.py.)"""
import pytest

pytest.importorskip("torch")
pytest.importorskip("z3")

import pypm_verified as pm  # noqa: E402
from pypm_verified.checking import (check_rule, check_rule_instances, finish_rule,  # noqa: E402
                                    prove_structure, Structure)
from pypm_verified.checking.evaluate import build  # noqa: E402
from pypm_verified.checking.hints import rule_hints  # noqa: E402
from pypm_verified.checking.instances import (InstanceGenerator, dump_instance,  # noqa: E402
                                              load_instance, render)
from pypm_verified.library import transpose  # noqa: E402
from pypm_verified.torch.ops import Neg, Relu  # noqa: E402

KW = dict(examples=6, seed=3, guards=False)  # guard necessity: the slow part, unchanged


@pm.pattern
def NegNeg(x):
    return Neg(Neg(x))


@pm.rule(NegNeg)
def negneg_to_relu(x):  # wrong: refuted
    return Relu(x)


def _linear_nt():
    return transpose.MMxyT, transpose.linear_nt


def _as_dict(result):
    d = result.as_dict()
    d.pop("seconds")
    return d


def test_the_units_in_any_order_make_check_rules_result():
    p, r = _linear_nt()
    whole = check_rule(p, r, **KW)
    phase = check_rule_instances(p, r, **KW)
    assert phase.symbolic and len(phase.structures) == whole.symbolic["structures"] >= 2
    # proved last structure first, merged in the rule's order
    proofs = [prove_structure(p, r, phase.result.engine, s)
              for s in reversed(phase.structures)][::-1]
    assert all(sp.seconds > 0 for sp in proofs)
    merged = finish_rule(phase, proofs)
    assert merged.status == whole.status == "proved"
    assert _as_dict(merged) == _as_dict(whole)
    # the instance phase alone is the result before the proofs
    assert phase.result.status == "tested" and phase.result.symbolic == {}


def test_an_instance_carried_as_bytes_is_the_same_instance():
    p, r = _linear_nt()
    gen = InstanceGenerator(p, rule_hints(r), seed="carried")
    for _ in range(5):
        inst = gen.generate()
        copy = load_instance(p, dump_instance(inst))
        assert copy is not inst and copy.root is not inst.root
        assert render(copy) == render(inst)
        assert [(n, s, str(v)) for n, s, v in copy.inputs()] == \
            [(n, s, str(v)) for n, s, v in inst.inputs()]
        assert build(copy).gm.code == build(inst).gm.code


def test_a_refuted_rule_has_nothing_to_prove():
    phase = check_rule_instances(NegNeg, negneg_to_relu, **KW)
    assert phase.result.status == "refuted" and phase.structures == [] and not phase.symbolic
    assert finish_rule(phase, []) is phase.result


def test_a_structure_its_instances_do_not_reach_is_an_error():
    p, r = _linear_nt()
    phase = check_rule_instances(p, r, **KW)
    wrong = Structure(("mm(x, y)", "y", (("x", 2),)), phase.structures[0].instances)
    with pytest.raises(RuntimeError, match=r"linear_nt: an instance of the structure "
                                           r"mm\(x, y\) -> y ran again to agree"):
        prove_structure(p, r, phase.result.engine, wrong)


def test_proofs_that_do_not_match_the_structures_are_an_error():
    p, r = _linear_nt()
    phase = check_rule_instances(p, r, **KW)
    with pytest.raises(ValueError, match=r"linear_nt: 0 proofs for \d+ structures"):
        finish_rule(phase, [])


def test_an_operator_unknown_to_the_loading_process_is_named():
    @pm.op
    def NotATorchOp(x):  # no torch target: no instance of a pattern holds it
        return 1

    with pytest.raises(RuntimeError, match=r"operator NotATorchOp \(.*test_checkrules_tasks"
                                           r"\.py:\d+\) of an instance of pattern NegNeg is "
                                           r"not defined in this process"):
        load_instance(NegNeg, dump_instance(NotATorchOp))
