"""Guard necessity: drop one guard, look for a counterexample.

Two kinds of guards decide whether a rewrite happens:

* a **rule guard**: an ``assert`` of the rule body, or one conjunct of an
  ``assert a and b`` (:func:`rule_guards`). The variant without it is the
  rule's own source with that test replaced by ``True``, compiled as
  ``@pm.rule`` compiles rules (:func:`rule_without`;
  :mod:`pypm_verified.dsl.ast_transform`);
* a **pattern guard**: one conjunct of the guard of one alternate of a
  pattern the rule's pattern reaches (:func:`pattern_guards`). The variant
  is the pattern's lowered table with that conjunct replaced by ``true``
  (:func:`program_without`), matched by the same engine.

:func:`check_guards` runs the variant on instances that *violate* the guard
-- for a rule guard, instances the rule declined at that ``assert`` (kept
from the main run, topped up by drawing more); for a pattern guard,
instances drawn so that this conjunct fails and the other guards of the
alternates they unfold hold -- and reports the guard **necessary** with the
first counterexample (shrunk), or **redundant** when the variant, firing on
them, always agrees (or never fires: other guards reject the same
instances). A variant that fired only on instances degenerate on an axis the
pattern reads (size 1, or inputs constant along it:
:func:`.evaluate.flat_axes`) shows nothing: the guard is **inconclusive**,
not redundant. Guards that call ``ctx.profitable`` are **skipped**: they decide
speed, not results, and the checker runs with profitability off. The
instances that violate a guard are drawn with that guard's size equations
left untied (:meth:`.instances.InstanceGenerator.generate`'s ``untie``).
"""
from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

from .. import core
from ..dsl import ast_transform
from ..errors import PatternError
from .evaluate import RuleRunner, flat_axes, shrink
from .instances import GenerationFailed, Instance, InstanceGenerator, eval_guard, guard_atoms
from .report import GuardResult

__all__ = ["RuleGuard", "PatternGuard", "rule_guards", "rule_without", "pattern_guards",
           "program_without", "check_guards"]


# ------------------------------------------------------------ rule guards

@dataclass
class RuleGuard:
    """The ``conjunct``-th conjunct (None: all of it) of the ``index``-th
    ``assert`` of a rule body (in source order): ``line`` (the assert's),
    ``text``,
    ``where`` (file:line), ``profitability`` (it calls ``ctx.profitable``)."""

    index: int
    conjunct: Optional[int]
    line: int
    text: str
    where: str
    profitability: bool


class _Asserts(ast.NodeVisitor):
    def __init__(self):
        self.found: List[ast.Assert] = []

    def visit_Assert(self, node):
        self.found.append(node)


def _parse_rule(rule):
    return ast_transform.parse_function(rule.fn, "rule", rule.name)


def rule_guards(rule) -> List[RuleGuard]:
    """The guards of ``rule``'s body; empty when its source cannot be read."""
    try:
        fndef, filename, _ = _parse_rule(rule)
    except PatternError:
        return []
    v = _Asserts()
    v.visit(fndef)
    out = []
    base = os.path.basename(filename)
    for i, a in enumerate(v.found):
        parts = a.test.values if isinstance(a.test, ast.BoolOp) and isinstance(
            a.test.op, ast.And) else [a.test]
        for j, part in enumerate(parts):
            prof = any(isinstance(n, ast.Attribute) and n.attr == "profitable"
                       for n in ast.walk(part))
            # declines are reported at the assert's line (its raise), whatever
            # line the conjunct is on
            out.append(RuleGuard(i, j if len(parts) > 1 else None, a.lineno,
                                 ast.unparse(part), f"{base}:{part.lineno}", prof))
    return out


def rule_without(rule, guard: RuleGuard) -> Callable:
    """``rule``'s compiled body with ``guard`` replaced by ``True`` (what
    :class:`~.evaluate.RuleRunner` takes as ``body``)."""
    class Drop(ast.NodeTransformer):
        i = -1

        def visit_Assert(self, node):
            self.i += 1
            if self.i == guard.index:
                true = ast.copy_location(ast.Constant(True), node.test)
                if guard.conjunct is None:
                    node.test = true
                else:
                    vals = list(node.test.values)
                    vals[guard.conjunct] = true
                    node.test.values = vals
            return node

    return ast_transform.compile_rule(rule.fn, rule.name, transform=Drop().visit).make({})


# --------------------------------------------------------- pattern guards

@dataclass
class PatternGuard:
    """Conjunct ``atom`` of the guard of alternate ``k`` of definition ``d``
    of a pattern's table (pattern ``name``): ``text``, ``where``
    (file:line), ``op_class`` (it constrains an operator variable's class)."""

    d: int
    k: int
    atom: int
    name: str
    text: str
    where: str
    op_class: bool


def _peel(body):
    """(binders, PGuard or None) of an alternate's body."""
    wrappers = []
    while isinstance(body, (core.PExists, core.PExistsF)):
        wrappers.append(body)
        body = body.p
    return wrappers, body if isinstance(body, core.PGuard) else None


def _rewrap(wrappers, p):
    for w in reversed(wrappers):
        p = core.PExists(w.x, p) if isinstance(w, core.PExists) else core.PExistsF(w.F, p)
    return p


def _expr_text(e, names, fnames) -> str:
    if isinstance(e, core.EConst):
        return str(e.z)
    if isinstance(e, core.EAttr):
        return f"{names.get(e.x, f'v{e.x}')}.{core.attr_name(e.attr)}"
    if isinstance(e, core.EFAttr):
        return f"{fnames.get(e.F, f'F{e.F}')}.{core.attr_name(e.attr)}"
    op = "+" if isinstance(e, core.EAdd) else "-" if isinstance(e, core.ESub) else "*"
    return f"({_expr_text(e.e1, names, fnames)} {op} {_expr_text(e.e2, names, fnames)})"


def _const_text(attr_side, c) -> str:
    if isinstance(attr_side, (core.EAttr, core.EFAttr)) and isinstance(c, core.EConst):
        if attr_side.attr == core.DTYPE and c.z in core.DTYPE_BY_CODE:
            return repr(core.DTYPE_BY_CODE[c.z])
        if attr_side.attr == core.OPCLASS:
            from ..core import symbols
            for n, oc in symbols.opclasses().items():
                if oc.code == c.z:
                    return repr(oc)
    return None


def guard_text(g, names: Dict[int, str], fnames: Dict[int, str]) -> str:
    """A core guard in the DSL's spelling, with variable names."""
    def side(a, b):
        t = _const_text(b, a)
        return t if t is not None else _expr_text(a, names, fnames)
    if isinstance(g, core.GTrue):
        return "True"
    if isinstance(g, (core.GEq, core.GLt)):
        op = "==" if isinstance(g, core.GEq) else "<"
        return f"{side(g.e1, g.e2)} {op} {side(g.e2, g.e1)}"
    if isinstance(g, core.GNot):
        inner = g.g
        if isinstance(inner, core.GLt):
            return f"{side(inner.e1, inner.e2)} >= {side(inner.e2, inner.e1)}"
        if isinstance(inner, core.GEq):
            return f"{side(inner.e1, inner.e2)} != {side(inner.e2, inner.e1)}"
        return f"not ({guard_text(inner, names, fnames)})"
    op = " and " if isinstance(g, core.GAnd) else " or "
    return f"({guard_text(g.g1, names, fnames)}{op}{guard_text(g.g2, names, fnames)})"


def pattern_guards(pattern) -> List[PatternGuard]:
    """Every conjunct of every alternate's guard in the table of ``pattern``
    (the patterns it calls included), in table order."""
    from ..dsl.lowering import option_locals
    from ..dsl.trace import TERM
    linked = pattern.linked
    out = []
    for P, d in sorted(linked.index.items(), key=lambda kv: kv[1]):
        traced = P.traced_alternates()  # the traced guards' lines
        names = dict(enumerate(linked.term_params[P]))
        fnames = dict(enumerate(linked.op_params[P]))
        counters = {"t": len(linked.term_params[P]), "f": len(linked.op_params[P])}
        for k, body in enumerate(linked.alternates[P]):
            tr = traced[k] if k < len(traced) else None
            if tr is not None:
                for sym in option_locals(tr)[0]:  # the alternate's locals, numbered first
                    key = "t" if sym.kind == TERM else "f"
                    (names if key == "t" else fnames)[counters[key]] = sym.name
                    counters[key] += 1
            _, pg = _peel(body)
            if pg is None:
                continue
            atoms = guard_atoms(pg.g)
            lines = []
            if tr is not None:
                for g, line in tr.trace.guards:
                    lines += [line] * len(guard_atoms(g))
            if len(lines) != len(atoms):
                lines = [tr.lineno if tr is not None else 0] * len(atoms)
            filename = os.path.basename(tr.filename) if tr is not None else "?"
            for i, a in enumerate(atoms):
                is_class = any(isinstance(e, core.EFAttr) and e.attr == core.OPCLASS
                               for e in _exprs(a))
                out.append(PatternGuard(d, k, i, P.name, guard_text(a, names, fnames),
                                        f"{filename}:{lines[i]}", is_class))
    return out


def _exprs(g):
    if isinstance(g, (core.GEq, core.GLt)):
        return [g.e1, g.e2]
    if isinstance(g, core.GNot):
        return _exprs(g.g)
    if isinstance(g, (core.GAnd, core.GOr)):
        return _exprs(g.g1) + _exprs(g.g2)
    return []


def program_without(pattern, guard: PatternGuard) -> core.Program:
    """``pattern``'s table with ``guard`` replaced by ``true``."""
    linked = pattern.linked
    prog = pattern.program
    P = next(Q for Q, i in linked.index.items() if i == guard.d)
    alts = list(linked.alternates[P])
    wrappers, pg = _peel(alts[guard.k])
    atoms = guard_atoms(pg.g)
    atoms[guard.atom] = core.GTrue()
    alts[guard.k] = _rewrap(wrappers, core.PGuard(pg.p, core.conj(atoms)))
    defs = list(prog.defs)
    old = defs[guard.d]
    defs[guard.d] = core.PDef(old.nparams, old.nfparams, core.alts(alts), old.pbinds,
                              old.pfbinds)
    return core.Program(tuple(defs), prog.root)


# ------------------------------------------------------------ the search

def _violates(pg: PatternGuard):
    """Accept an instance when ``pg`` fails on it and no other guard of the
    alternates it unfolds does (on shapes)."""
    def accept(inst: Instance) -> bool:
        found = False
        for s in inst.sites:
            for i, a in enumerate(guard_atoms(s.g)):
                v = eval_guard(a, s, inst)
                if (s.d, s.k, i) == (pg.d, pg.k, pg.atom):
                    found = found or v is not True
                elif v is False:
                    return False
        return found
    return accept


def check_guards(pattern, rule, gen: InstanceGenerator, runner: RuleRunner,
                 declined: Dict[int, List[Instance]], engine: str, per_guard: int = 20,
                 max_attempts: int = 300, counterexample=None,
                 patterns: bool = True) -> List[GuardResult]:
    """Necessity of every guard of ``rule`` (and, with ``patterns``, of its
    pattern): see the module docstring. ``declined`` (assert line ->
    instances the rule declined there) is extended as more are drawn;
    ``per_guard`` violating instances are tried per guard, drawing at most
    ``max_attempts``; ``counterexample(inst, outcome)`` makes the report's
    counterexample."""
    results = []

    def not_fired(inst):
        return runner.run(inst, prove=False).kind in ("declined", "no_match")

    guards = rule_guards(rule)
    lines = sorted({g.line for g in guards if not g.profitability})
    # one top-up for all of them: draw until every assert has ``per_guard``
    # instances declined there, or ``max_attempts`` draws are made; each draw for the
    # next assert short of them, its size equations untied
    drawn = 0
    while drawn < max_attempts and any(len(declined.get(ln, ())) < per_guard for ln in lines):
        short = [ln for ln in lines if len(declined.get(ln, ())) < per_guard]
        drawn += 1
        try:
            inst = gen.generate(untie={("rule", short[drawn % len(short)])})
        except GenerationFailed:
            continue
        o = runner.run(inst, prove=False)
        if o.kind == "declined" and o.line is not None:
            declined.setdefault(o.line, []).append(inst)
    for g in guards:
        if g.profitability:
            results.append(GuardResult("rule", g.where, g.text, "skipped",
                                       "profitability: decides speed, not results "
                                       "(checked with profitability off)"))
            continue
        try:
            body = rule_without(rule, g)
        except Exception as e:  # noqa: BLE001
            results.append(GuardResult("rule", g.where, g.text, "skipped",
                                       f"cannot compile the rule without it: {e}"))
            continue
        vrun = RuleRunner(pattern, rule, engine, body=body)
        cands = list(declined.get(g.line, ()))[:per_guard]
        line = g.line
        results.append(_try_variant(
            "rule", g.where, g.text, cands, vrun, not_fired, counterexample, drawn,
            lambda o, line=line: not (o.kind == "declined" and o.line == line)))
    if not patterns:
        return results
    for pg in pattern_guards(pattern):
        vrun = RuleRunner(pattern, rule, engine, program=program_without(pattern, pg))
        accept = _violates(pg)
        cands, attempts = [], 0
        while len(cands) < per_guard and attempts < max_attempts // 10:
            attempts += 1
            try:
                inst = gen.generate(filtered=False, accept=accept, tries=100,
                                    op_classes=not pg.op_class,
                                    untie={("pattern", pg.d, pg.k, pg.atom)})
            except GenerationFailed:
                continue
            cands.append(inst)
        results.append(_try_variant(
            "pattern", pg.where, f"{pg.name}: {pg.text}", cands, vrun, not_fired,
            counterexample, attempts, lambda o: o.kind != "no_match"))
    return results


def _try_variant(kind, where, text, cands, vrun, not_fired, counterexample, drawn: int,
                 passed) -> GuardResult:
    """Run the variant on ``cands``; ``passed(outcome)``: the variant got past
    the dropped guard (the instance really violates it)."""
    violations = fired = degenerate = 0
    flat_seen: Dict[str, int] = {}
    for inst in cands:
        if not not_fired(inst):  # the original fires: the guard did not stop it
            continue
        o = vrun.run(inst)
        if not passed(o):
            continue
        violations += 1
        if o.is_counterexample:
            def fails(c):
                oc = vrun.run(c)
                return oc if oc.is_counterexample and not_fired(c) else None
            inst, o = shrink(inst, fails, o)
            return GuardResult(kind, where, text, "necessary", o.detail, violations,
                               fired + 1, counterexample(inst, o), degenerate)
        if o.fired:
            fired += 1
            flat = flat_axes(inst, vrun.last_inputs or None)
            if flat:  # says nothing on an axis the pattern reads
                degenerate += 1
                for k, why in flat.items():
                    flat_seen[f"{k} ({why})"] = flat_seen.get(f"{k} ({why})", 0) + 1
    if violations == 0 and kind == "rule" and cands:
        note = (f"never the only failing test: the {len(cands)} instance(s) declined at this "
                "assert fail another part of it too")
    elif violations == 0:
        note = ("no generated instance violates it" + (" alone" if kind == "pattern" else "")
                + f" ({drawn} extra draws): the operators' own typing or the other guards "
                "may imply it, or the instance space never reaches it")
    elif fired == 0:
        note = (f"without it the rule still does not fire on the {violations} instance(s) "
                "that violate it (other guards reject them)")
    elif degenerate == fired:
        axes = ", ".join(f"{k}: {n}" for k, n in flat_seen.items())
        return GuardResult(kind, where, text, "inconclusive",
                           f"without it the rule fired on {fired} of {violations} violating "
                           f"instance(s) and agreed, but each is degenerate on an axis the "
                           f"pattern reads ({axes}): no evidence that it is redundant",
                           violations, fired, None, degenerate)
    else:
        note = (f"without it the rule fired on {fired} of {violations} violating instance(s) "
                "and agreed with the original each time"
                + (f" ({fired - degenerate} of them not degenerate on an axis the pattern "
                   "reads)" if degenerate else ""))
    return GuardResult(kind, where, text, "redundant", note, violations, fired, None,
                       degenerate)
