"""The core calculus: well-formedness, renaming, helpers."""
import pytest

from pypm_verified import core
from pypm_verified.core import (EAdd, EAttr, EConst, GAnd, GEq, GLt, GNot, GOr, GTrue, PAlt,
                                PApp, PGuard, PVar)


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
    assert ei.value.missing == {1}
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
