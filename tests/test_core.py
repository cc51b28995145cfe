"""The core calculus: well-formedness, renaming, helpers."""
import pytest

from pypm_verified import core
from pypm_verified.core import (
    EAdd, EAttr, EConst, EFAttr, GAnd, GEq, GLt, GNot, GOr, GTrue, PAlt, PApp, PCall, PConstr,
    PDef, PExists, PExistsF, PFunVar, PGuard, PVar, Program)


def test_binds():
    assert core.binds(PVar(3)) == {3}
    assert core.binds(PApp(0, (PVar(1), PApp(1, (PVar(2),))))) == {1, 2}
    assert core.binds(PAlt(PApp(0, (PVar(1), PVar(2))), PVar(1))) == {1}
    assert core.binds(PGuard(PVar(4), GTrue())) == {4}
    assert core.binds(PApp(5, ())) == frozenset()


def test_guard_and_expr_vars():
    g = GOr(GEq(EAttr(1, core.RANK), EConst(2)),
            GNot(GLt(EAdd(EAttr(2, 100), EConst(1)), EAttr(3, 200))))
    assert core.guard_vars(g) == {1, 2, 3}
    assert core.guard_vars(GTrue()) == frozenset()


def test_wf():
    ok = PGuard(PApp(0, (PVar(0), PVar(1))), GEq(EAttr(1, core.RANK), EConst(2)))
    assert core.wf(ok)
    # y bound on only one alternate
    bad = PGuard(PAlt(PApp(0, (PVar(0), PVar(1))), PApp(1, (PVar(0),))),
                 GEq(EAttr(1, core.RANK), EConst(2)))
    assert not core.wf(bad)
    with pytest.raises(core.IllFormed) as ei:
        core.check_wf(bad)
    assert ei.value.missing == {1} and ei.value.guard == bad.g
    # nested: the inner guard is checked against its own sub-pattern
    nested = PApp(0, (PGuard(PVar(0), GEq(EAttr(1, 0), EConst(1))), PVar(1)))
    assert not core.wf(nested)
    assert core.wf(PAlt(ok, PVar(0)))
    assert not core.wf(PAlt(PVar(0), bad))


def test_shape_attr_and_names():
    assert core.shape_attr(0) == 100
    assert core.shape_attr(63) == 163
    assert core.shape_attr(-1) == 200
    assert core.shape_attr(-64) == 263
    for bad in (64, -65):
        with pytest.raises(IndexError):
            core.shape_attr(bad)
    with pytest.raises(TypeError):
        core.shape_attr(True)
    assert [core.attr_name(a) for a in (0, 1, 2, 101, 201)] == [
        "rank", "dtype", "op_class", "shape[1]", "shape[-2]"]


def test_dtypes():
    codes = [d.code for d in core.DTYPES]
    assert len(set(codes)) == len(codes) == 10
    assert core.as_dtype("f32") is core.f32
    assert core.as_dtype(core.bool_) is core.bool_
    assert core.as_dtype("bool") is core.bool_
    with pytest.raises(ValueError):
        core.as_dtype("f8")


def test_rename_conj_alts():
    p = PGuard(PApp(0, (PVar(0), PVar(1))), GEq(EAttr(1, 0), EConst(2)))
    assert core.rename(p, {0: 5, 1: 5}) == PGuard(PApp(0, (PVar(5), PVar(5))),
                                                  GEq(EAttr(5, 0), EConst(2)))
    g1, g2, g3 = GEq(EConst(1), EConst(1)), GTrue(), GLt(EConst(0), EConst(1))
    assert core.conj([]) == GTrue()
    assert core.conj([g1]) == g1
    assert core.conj([g1, g2, g3]) == GAnd(g1, GAnd(g2, g3))
    assert core.alts([PVar(0), PVar(1), PVar(2)]) == PAlt(PVar(0), PAlt(PVar(1), PVar(2)))
    with pytest.raises(ValueError):
        core.alts([])


def test_papp_args_tuple():
    assert PApp(1, [PVar(0)]).args == (PVar(0),)
    assert hash(PApp(1, [PVar(0)])) == hash(PApp(1, (PVar(0),)))


# ------------------------------------------------------------ full calculus

UC = PDef(1, 1, PAlt(PFunVar(0, (PCall(0, (0,), (0,)),)), PFunVar(0, (PVar(0),))))


def test_binds_of_every_form():
    assert core.binds(PFunVar(0, (PVar(1), PVar(2)))) == {1, 2}
    assert core.fbinds(PFunVar(3, (PFunVar(4, ()),))) == {3, 4}
    assert core.binds(PExists(1, PApp(0, (PVar(1), PVar(2))))) == {2}
    assert core.fbinds(PExistsF(1, PFunVar(1, (PFunVar(2, ()),)))) == {2}
    assert core.fbinds(PExists(1, PFunVar(1, ()))) == {1}  # ∃x does not touch F
    assert core.binds(PConstr(PVar(0), PApp(0, (PVar(1),)), 0)) == {0, 1}
    assert core.fbinds(PAlt(PFunVar(0, ()), PFunVar(1, ()))) == frozenset()
    # a call binds the arguments of the callee's pbinds (Syntax.args_of)
    defs = (PDef(3, 2, PVar(0), (0, 2), (1,)),)
    call = PCall(0, (7, 8, 9), (4, 5))
    assert core.binds(call, defs) == {7, 9} and core.fbinds(call, defs) == {5}
    assert core.binds(PCall(0, (7, 7, 7), (4, 4)), defs) == {7}
    assert core.binds(PCall(1, (7,), ()), defs) == frozenset()  # no such definition
    assert core.binds(call) == frozenset()


def test_wfb_of_every_form():
    assert core.wfb(PExists(1, PVar(1)))
    assert not core.wfb(PExists(1, PVar(0)))  # ∃ must bind its variable
    assert not core.wfb(PExists(1, PAlt(PVar(1), PVar(0))))
    assert core.wfb(PExistsF(1, PFunVar(1, ())))
    assert not core.wfb(PExistsF(1, PVar(0)))
    assert core.wfb(PConstr(PVar(0), PApp(1, ()), 0))
    assert not core.wfb(PConstr(PApp(1, ()), PVar(0), 0))  # x bound by p, not p'
    assert core.wfb(PGuard(PFunVar(2, (PVar(0),)), GEq(EFAttr(2, core.OPCLASS), EAttr(0, 0))))
    with pytest.raises(core.IllFormed, match="operator variables") as ei:
        core.check_wfb(PGuard(PVar(0), GEq(EFAttr(2, core.OPCLASS), EConst(1))))
    assert ei.value.missing == {2}
    # an inner ∃ shadows: the outer ∃0 binds nothing (Syntax.binds removes 0)
    assert not core.wfb(PExists(0, PExists(0, PVar(0))))
    assert core.wfb(PExists(0, PApp(1, (PVar(0), PExists(0, PVar(0))))))
    # calls are well-formed; a guard after a call sees the callee's pbinds
    defs = core.infer_binds([UC])
    g = GEq(EAttr(0, 0), EConst(1))
    assert core.wfb(PGuard(PCall(0, (0,), (0,)), g), defs)
    assert not core.wfb(PGuard(PCall(0, (0,), (0,)), g), ())


def test_infer_binds_greatest_fixpoint():
    # UnaryChain binds x and f on both alternates: the greatest fixpoint
    (uc,) = core.infer_binds([UC])
    assert uc.pbinds == (0,) and uc.pfbinds == (0,)
    # P(x) = P(x): vacuously binds x (a least fixpoint would say nothing)
    (loop,) = core.infer_binds([PDef(1, 0, PCall(0, (0,), ()))])
    assert loop.pbinds == (0,)
    # Q(x, y) = B(x, y) ‖ Q'(x), Q'(x) = x: only x on every alternate
    defs = core.infer_binds([
        PDef(2, 0, PAlt(PApp(9, (PVar(0), PVar(1))), PCall(1, (0,), ()))),
        PDef(1, 0, PVar(0))])
    assert [d.pbinds for d in defs] == [(0,), (0,)]
    assert core.wf_defs(defs)
    # the paper's Figure 4: x always, f and g not on the last alternate
    fig4 = PDef(1, 2, core.alts([
        PExists(1, PConstr(PVar(0), PFunVar(0, (PCall(0, (1,), (0, 1)),)), 0)),
        PExists(1, PExists(2, PConstr(PVar(0), PFunVar(1, (PCall(0, (1,), (0, 1)),
                                                           PCall(0, (2,), (0, 1)))), 0))),
        PVar(0)]))
    (d,) = core.infer_binds([fig4])
    assert d.pbinds == (0,) and d.pfbinds == ()
    assert core.wf_defs([d])  # ∃y is bound through the call's pbinds


def test_wf_defs_checks_claims():
    d = PDef(2, 0, PVar(0), (0, 1))
    assert not core.wf_defs([d])
    with pytest.raises(core.IllFormed, match="definition 0: claims") as ei:
        core.check_defs([d])
    assert ei.value.missing == {1} and ei.value.index == 0
    assert core.wf_defs([PDef(2, 0, PVar(0), (0,))])
    assert core.wf_defs([PDef(2, 0, PVar(0), ())])  # claiming less is fine


def test_check_scoped():
    core.check_scoped([PDef(1, 1, PExists(3, PExistsF(2, PFunVar(2, (PVar(3), PVar(0))))))])
    core.check_scoped([UC])
    for bad, msg in [
        (PDef(1, 0, PVar(1)), "variable 1 is not in scope"),
        (PDef(1, 0, PConstr(PVar(0), PVar(0), 2)), "variable 2"),
        (PDef(0, 1, PFunVar(1, ())), "operator variable 1"),
        (PDef(1, 0, PGuard(PVar(0), GEq(EAttr(5, 0), EConst(0)))), "not in scope"),
        (PDef(1, 0, PCall(3, (0,), ())), "does not exist"),
        (PDef(1, 0, PCall(0, (0, 0), ())), "takes 1;0"),
        (PDef(1, 0, PAlt(PExists(2, PVar(2)), PVar(2))), "variable 2"),  # ∃ scope ends
        (PDef(1, 0, PVar(0), (1,)), "pbinds"),
    ]:
        with pytest.raises(core.IllFormed, match=msg):
            core.check_scoped([bad])


def test_as_program():
    prog = core.as_program(PGuard(PApp(1, (PVar(4), PFunVar(2, ()))), GTrue()))
    assert prog == Program((PDef(5, 3, prog.root_def.body, (4,), (2,)),), 0)
    assert core.as_program(prog) is prog
    assert core.as_program(PExists(0, PVar(0))).root_def.nparams == 0  # bound, not free
    with pytest.raises(core.IllFormed, match="definition table"):
        core.as_program(PCall(0, (), ()))
    with pytest.raises(TypeError):
        core.as_program("x")


def test_rename_and_shift_every_form():
    p = PExists(1, PExistsF(0, PConstr(PFunVar(0, (PVar(1),)), PCall(2, (1, 0), (0,)), 1)))
    assert core.rename(p, {0: 5, 1: 6}, {0: 7}) == \
        PExists(6, PExistsF(7, PConstr(PFunVar(7, (PVar(6),)), PCall(2, (6, 5), (7,)), 6)))
    assert core.shift_calls(PAlt(p, PGuard(PCall(0, (), ()), GTrue())), 3) == \
        PAlt(PExists(1, PExistsF(0, PConstr(PFunVar(0, (PVar(1),)), PCall(5, (1, 0), (0,)), 1))),
             PGuard(PCall(3, (), ()), GTrue()))
    assert core.pattern_vars(p) == {0, 1}
    assert core.free_vars(p) == ({0}, frozenset())
