"""Why a pattern does not match a node: ``pm.explain`` and ``pm.explain_all``.

The verdict always comes from an engine: :func:`explain` calls
:func:`pypm_verified.match` first (``engine="verified"`` by default), so a
match is reported as a match, a fuel exhaustion as one, and an explanation
is only ever attached to a "no" the engine gave. The explanation itself is
a *trace* of the reference matcher (:mod:`.reference`, the declarative rules
read left to right), as egg's explanations are traces of its one matcher:
:class:`Trace` observes that search over the lowered core table (the same
program, not a copy of its rules) as it tries every alternate, every way
of threading the substitution through the children, and records each
failure as ``(depth, path, reason)``, where
*depth* is the number of pattern steps that succeeded on the way there
(pattern nodes matched, guards and constraints passed). The deepest failure
(the first one found at that depth, in the engine's order) is the
explanation: which definition (sub-pattern) and which of its alternates
(index, file:line) was being tried, the child positions that led to the
failing graph node, and why it failed:

* ``operator``  — the node's operator is not the one the pattern expects
  (expected vs found names); ``arity`` — the same operator with another
  number of arguments;
* ``literal``   — a constant the pattern writes (an axis ``[-1]``, a flag)
  is another constant in the graph, both shown as literals (``expected
  [-1], found [2]``), with the hint to bind it to a parameter and guard its
  value in the rule;
* ``guard``     — an ``assert`` was false, with the values it read
  (``x.rank == 4: x.rank = 3``); ``unknown`` — it could not be decided
  because an attribute it reads is unknown (a symbolic or missing size):
  a guard is only passed when it is *true*;
* ``nonlinear`` — a variable already bound to node A met node B;
* ``opvar``     — an operator variable already bound to operator A met B
  (an ``op_class`` mismatch is a ``guard`` on ``F.op_class``);
* ``root``      — the proved root-operator index says no before any matching
  (``core.root_symbols``): "the pattern's root can only be …";
* ``fuel``      — the engine ran out of fuel (the deepest partial match of a
  bounded search is still shown).

If the traced search finds a match where the engine said "no" (or
the other way round, finds none where it said "yes"), that is an internal
inconsistency and :class:`ExplainInconsistency` is raised: the explanation
never contradicts the engine.
"""
from __future__ import annotations

from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from .. import core
from ..core import symbols
from ..core.graph import Graph, Node
from ..dsl.lowering import option_locals
from ..dsl.patterns import Pattern
from ..dsl.rules import short_path
from ..dsl.trace import FUN, TERM
from ..errors import MemoryBudget, OutOfFuel
from . import matching, reference

#: steps (pattern nodes tried) the traced search may take before it
#: stops and reports the deepest failure found so far
DEFAULT_STEP_LIMIT = 1 << 20
#: the longest path (alternates entered, children taken, match constraints)
#: the traced search follows before it stops: an endless recursion at one
#: node only nests, so the step limit alone would take long to end it
NESTING_LIMIT = 500

__all__ = ["Explanation", "ExplainInconsistency", "explain", "explain_all", "DEFAULT_STEP_LIMIT"]


class ExplainInconsistency(AssertionError):
    """The traced search disagrees with the engine's verdict (a bug)."""


class StepLimit(Exception):
    """The traced search took its ``step_limit`` steps, or nested
    :data:`NESTING_LIMIT` deep (:class:`Trace`)."""


# ------------------------------------------------------------------ naming

class Names:
    """Readable names for the definitions, alternates, variables and guards
    of a table: from the ``@pm.pattern`` sources when there are some."""

    def __init__(self, defs, root: int, pattern=None):
        self.defs = defs
        n = len(defs)
        self.def_name = [f"P{i}" for i in range(n)]
        self.alts: List[Tuple[core.CorePattern, ...]] = []
        self.alt_line: List[List[Optional[str]]] = []
        self.var: List[Dict[Tuple[str, int], str]] = [{} for _ in range(n)]
        self.guard_lines: Dict[int, List[Tuple[core.Guard, Optional[str]]]] = {}
        self.constr_line: Dict[int, Optional[str]] = {}
        linked = pattern.linked if isinstance(pattern, Pattern) else None
        by_index = {i: P for P, i in linked.index.items()} if linked is not None else {}
        for i, d in enumerate(defs):
            P = by_index.get(i)
            alts = None
            if P is not None:
                alts = tuple(linked.alternates[P])
                if not alts or core.alts(alts) != d.body:
                    alts = None
            if alts is None:
                self.alts.append(_spine(d.body))
                self.alt_line.append([None] * len(self.alts[-1]))
                self.var[i].update({(TERM, v): f"x{v}" for v in range(d.nparams)})
                self.var[i].update({(FUN, v): f"F{v}" for v in range(d.nfparams)})
                continue
            self.alts.append(alts)
            self.def_name[i] = P.name
            names = self.var[i]
            names.update({(TERM, v): s for v, s in enumerate(linked.term_params[P])})
            names.update({(FUN, v): s for v, s in enumerate(linked.op_params[P])})
            counters = {TERM: d.nparams, FUN: d.nfparams}
            lines = []
            traced = P.traced_alternates()
            for body, a in zip(alts, traced):
                lines.append(f"{short_path(a.filename)}:{a.lineno}")
                for sym in option_locals(a)[0]:  # the alternate's locals, numbered first
                    names[(sym.kind, counters[sym.kind])] = sym.name
                    counters[sym.kind] += 1
                self._index_alt(body, a)
            self.alt_line.append(lines)

    def _index_alt(self, body, a) -> None:
        """Source lines of the alternate's guards (one conjunct each) and
        constraints, keyed by the identity of the core nodes."""
        q = body
        while isinstance(q, (core.PExists, core.PExistsF)):
            q = q.p
        guards = [line for _, line in a.trace.guards]
        if isinstance(q, core.PGuard) and guards:
            g, parts = q.g, []
            for line in guards[:-1]:
                if not isinstance(g, core.GAnd):
                    parts = []
                    break
                parts.append((g.g1, f"{short_path(a.filename)}:{line}"))
                g = g.g2
            else:
                parts.append((g, f"{short_path(a.filename)}:{guards[-1]}"))
            if parts:
                self.guard_lines[id(q)] = parts
            q = q.p
        for _, _, line in reversed(a.trace.constraints):
            if not isinstance(q, core.PConstr):
                break
            self.constr_line[id(q)] = f"{short_path(a.filename)}:{line}"
            q = q.p

    def conjuncts(self, p: core.PGuard) -> List[Tuple[core.Guard, Optional[str]]]:
        return self.guard_lines.get(id(p)) or [(p.g, None)]

    def name(self, di: int, kind: str, v: int) -> str:
        return self.var[di].get((kind, v), ("x" if kind == TERM else "F") + str(v))


def _spine(p) -> Tuple[core.CorePattern, ...]:
    out = []
    while isinstance(p, core.PAlt):
        out.append(p.p1)
        p = p.p2
    out.append(p)
    return tuple(out)


def op_name(label: int) -> str:
    """The readable name of an operator symbol (or leaf): a constant as the
    literal it is (``[-1]``, ``True``, ``None``, ``f32``)."""
    lit = _literal(label)
    return symbols.describe(label) if lit is None else lit


def _root_name(s) -> str:
    """An element of a root set (:func:`core.root_symbols`): an operator, or
    an ``(attr, value)`` condition (the operator's class)."""
    if isinstance(s, tuple):
        attr, v = s
        if attr == core.OPCLASS:
            return f"an operator of class {symbols.opclass_name(v)}"
        return f"an operator whose attribute {attr} is {v}"
    return op_name(s)


def _key_literal(key) -> str:
    """A constant key (:func:`~pypm_verified.core.symbols.const_key`) as
    Python source: ``("seq", (("num", -1),))`` is ``[-1]``."""
    kind = key[0]
    if kind == "none":
        return "None"
    if kind == "seq":
        return "[" + ", ".join(_key_literal(k) for k in key[1]) + "]"
    if kind == "dtype":
        dt = core.DTYPE_BY_CODE.get(key[1])
        return dt.name if dt is not None else f"dtype {key[1]}"
    if kind == "num" and key[1] in ("nan", "-0.0"):
        return key[1]
    return repr(key[1])


def _literal(label: int) -> Optional[str]:
    """The constant ``label`` stands for, as a literal; None for an
    operator or an input."""
    try:
        key = symbols.lookup(label)
    except (IndexError, TypeError):
        return None
    if isinstance(key, tuple) and key and key[0] in ("none", "bool", "num", "str", "seq",
                                                      "dtype"):
        return _key_literal(key)
    return None


def _what(label: int) -> str:
    """``operator X`` or ``constant 3`` for an expected symbol."""
    lit = _literal(label)
    if lit is not None:
        return f"constant {lit}"
    return f"operator {op_name(label)}"


#: what a literal mismatch suggests
LITERAL_HINT = ("a literal in a pattern matches that constant only: to match others, take "
                "it as a pattern parameter (say d) and guard its value in the rule "
                "(assert d.is_const and d.value in (...))")


def node_desc(n: Node) -> str:
    """``%id Op`` (or ``%id input 'a'``) with the node's type when known."""
    if n.kind == "op":
        what = n.op.name
    elif n.kind == "input":
        what = f"input {n.name!r}"
    else:
        what = f"const {n.value!r}"
    return f"%{n.id} {what}{n.type_str()}"


# ------------------------------------------------------------------ guards

def _fmt_value(attr: Optional[int], v) -> str:
    if v is None:
        return "unknown"
    if attr == core.DTYPE and v in core.DTYPE_BY_CODE:
        return core.DTYPE_BY_CODE[v].name
    if attr == core.OPCLASS:
        for name, c in symbols.opclasses().items():
            if c.code == v:
                return f"{name!r}"
    return str(v)


class _GuardView:
    """A guard under a state: its text, the attribute values it read and
    its three-valued truth (the reference matcher's: :func:`.reference.scoped_truth`)."""

    def __init__(self, g, st, env, graph, names: Names, di: int):
        self.st, self.env, self.graph, self.names, self.di = st, env, graph, names, di
        self.reads: Dict[str, str] = {}
        self.unknown: List[str] = []
        self.text = self._guard(g, None)
        self.truth = reference.scoped_truth(g, st, env, graph)

    def _expr(self, e, hint: Optional[int]) -> str:
        if isinstance(e, core.EConst):
            return _fmt_value(hint, e.z) if hint in (core.DTYPE, core.OPCLASS) else str(e.z)
        if isinstance(e, (core.EAttr, core.EFAttr)):
            is_t = isinstance(e, core.EAttr)
            var = e.x if is_t else e.F
            label = f"{self.names.name(self.di, TERM if is_t else FUN, var)}." \
                    f"{core.attr_name(e.attr)}"
            v = reference.scoped_value(e, self.st, self.env, self.graph)
            shown = _fmt_value(e.attr, v)
            if v is None and label not in self.unknown:
                self.unknown.append(label)
            self.reads[label] = shown
            return label
        op = {core.EAdd: "+", core.ESub: "-", core.EMul: "*"}[type(e)]
        return f"({self._expr(e.e1, None)} {op} {self._expr(e.e2, None)})"

    def _cmp(self, g, neg: bool) -> str:
        hint = None
        for e in (g.e1, g.e2):
            if isinstance(e, (core.EAttr, core.EFAttr)):
                hint = e.attr
        a, b = self._expr(g.e1, hint), self._expr(g.e2, hint)
        if isinstance(g, core.GEq):
            return f"{a} {'!=' if neg else '=='} {b}"
        return f"{a} {'>=' if neg else '<'} {b}"

    def _guard(self, g, _ctx) -> str:
        if isinstance(g, core.GTrue):
            return "True"
        if isinstance(g, (core.GEq, core.GLt)):
            return self._cmp(g, False)
        if isinstance(g, core.GNot):
            if isinstance(g.g, (core.GEq, core.GLt)):
                return self._cmp(g.g, True)
            return f"not ({self._guard(g.g, None)})"
        op = "and" if isinstance(g, core.GAnd) else "or"
        parts = []
        for sub in (g.g1, g.g2):
            s = self._guard(sub, None)
            parts.append(f"({s})" if isinstance(sub, (core.GAnd, core.GOr)) and
                         type(sub) is not type(g) else s)
        return f" {op} ".join(parts)

    def values(self) -> str:
        return ", ".join(f"{k} = {v}" for k, v in self.reads.items())


# ------------------------------------------------------------- the trace

class _Failure:
    __slots__ = ("depth", "path", "node", "kind", "message", "details")

    def __init__(self, depth, path, node, kind, message, details):
        self.depth, self.path, self.node = depth, path, node
        self.kind, self.message, self.details = kind, message, details


def _path_list(path) -> List[tuple]:
    out = []
    while path is not None:
        path, item = path
        out.append(item)
    out.reverse()
    return out


class Trace(reference.Tracer):
    """The explanation's search: the reference matcher's
    (:func:`.reference.solutions`) traced, each failure recorded with its
    depth and path, the deepest kept (``best``). A position is ``(path,
    d, n)``: the steps from the root (a linked list ``(parent, step)`` of
    alternates entered, children taken and match constraints), the
    definition being matched and the path's length; the depth (the pattern
    steps that succeeded on the way: variables and operators matched,
    guards and match constraints passed) is the trace's store in the
    search, undone on backtracking with the bindings. The search stops
    (:class:`StepLimit`) after ``step_limit`` steps, or when a path passes
    :data:`NESTING_LIMIT` steps: a definition that calls itself at the same
    node without end (``P(x) = P(x) ‖ …``) never fails, it only nests."""

    stores = 1  # store 2: one entry per step that succeeded on the way

    def __init__(self, defs, root: int, names: Names, graph: Graph, step_limit: int,
                 describe: Callable[[Node], str]):
        self.defs, self.root, self.names, self.graph = defs, root, names, graph
        self.step_limit = step_limit
        self.steps = 0
        self.best: Optional[_Failure] = None
        self.describe = describe
        self.search: Optional[reference.Search] = None

    def run(self, node: Node):
        """The search's solutions at ``node`` (the search stops with
        :class:`StepLimit`, or :class:`MemoryBudget`)."""
        return reference.solutions(core.Program(self.defs, self.root), node, tracer=self)

    @property
    def depth(self) -> int:
        return len(self.search.st[2])

    # ---- positions

    def start(self, search) -> None:
        self.search = search

    def alternates(self, d, body):
        return self.names.alts[d]

    def alternate(self, at, d, j):
        if at is None:
            return (None, ("alt", d, j)), d, 1
        if at[2] >= NESTING_LIMIT:
            raise StepLimit()
        return (at[0], ("alt", d, j)), d, at[2] + 1

    def argument(self, at, p, i):
        path, di, n = at
        f = op_name(p.f) if type(p) is core.PApp else self.names.name(di, FUN, p.F)
        return (path, ("arg", f, i)), di, n + 1

    def constraint(self, at, p):
        path, di, n = at
        names = self.names
        return ((path, ("constr", names.name(di, TERM, p.x), names.constr_line.get(id(p)))),
                di, n + 1)

    # ---- events

    def step(self, p, t, at) -> None:
        self.steps += 1
        if self.steps > self.step_limit:
            raise StepLimit()

    def advance(self) -> None:
        marks = self.search.st[2]
        self.search.bind(2, len(marks), True)

    def record(self, path, node, kind, message, **details) -> None:
        """A failure at the current depth: kept if it is the deepest."""
        depth = self.depth
        b = self.best
        if b is None or depth > b.depth:
            self.best = _Failure(depth, path, node, kind, message, details)
        elif (depth == b.depth and kind == b.kind and kind in ("operator", "literal")
              and node == b.node and details["whats"][0] not in b.details["whats"]):
            # another alternate wanted another operator (or constant) at the
            # same node and depth: "expected [-1] or [3], found [2]"
            b.details["whats"].append(details["whats"][0])
            b.details["expected"].append(details["expected"][0])
            if kind == "literal":
                b.message = _literal_message(b.details)
            else:
                b.message = f"expected {' or '.join(b.details['whats'])}, found " \
                            f"{self.describe(node)}"

    def fail(self, why, p, t, env, at, other=None) -> None:
        path, di, _ = at
        names, describe = self.names, self.describe
        k = type(p)
        if k is core.PVar:
            name = names.name(di, TERM, p.x)
            if why == "scope":
                self.record(path, t, "scope", f"variable {name} is not in scope")
            else:
                self.record(path, t, "nonlinear",
                            f"variable {name} is already bound to {describe(other)}, "
                            f"found {describe(t)}", variable=name, bound=other, found=t)
        elif k is core.PApp:
            lit = _literal(p.f) if why == "operator" and t.kind == "const" else None
            found = _literal(t.label) if lit is not None else None
            if found is not None:  # a constant where another constant was written
                where = path[1] if path is not None else None
                arg = (f"argument {where[2]} of {where[1]}"
                       if where is not None and where[0] == "arg" else None)
                details = dict(expected=[lit], whats=[lit], found=found, argument=arg,
                               hint=LITERAL_HINT)
                self.record(path, t, "literal", _literal_message(details), **details)
            elif why == "operator":
                self.record(path, t, "operator", f"expected {_what(p.f)}, found {describe(t)}",
                            expected=[op_name(p.f)], whats=[_what(p.f)],
                            found=op_name(t.label))
            else:
                self.record(path, t, "arity",
                            f"{op_name(p.f)} with {len(p.args)} argument(s) expected, "
                            f"{describe(t)} has {len(t.args)}",
                            expected=len(p.args), found=len(t.args))
        elif k is core.PGuard:
            self._guard(p, t, env, path, di)
        elif k is core.PExists or k is core.PExistsF:
            name = names.name(di, TERM, p.x) if k is core.PExists else names.name(di, FUN, p.F)
            self.record(path, t, "local", f"local variable {name} was not bound")
        elif k is core.PConstr:
            name = names.name(di, TERM, p.x)
            self.record(path, t, "constraint",
                        f"match constraint on {name}: {name} is not bound")
        elif k is core.PFunVar:
            name = names.name(di, FUN, p.F)
            if why == "arity":
                self.record(path, t, "arity",
                            f"operator variable {name} with {len(p.args)} argument(s) "
                            f"expected, {describe(t)} has {len(t.args)}",
                            expected=len(p.args), found=len(t.args))
            elif why == "scope":
                self.record(path, t, "scope", f"operator variable {name} is not in scope")
            else:
                self.record(path, t, "opvar",
                            f"operator variable {name} is already bound to {op_name(other)}, "
                            f"found {describe(t)}",
                            variable=name, expected=[op_name(other)], found=op_name(t.label))
        else:
            self.record(path, t, "call", f"ill-formed call of definition {p.P}")

    def _guard(self, p, t, env, path, di) -> None:
        """The guard of ``p`` is not true under the store: the first conjunct
        (by source line) that is not, and in it the first that is not."""
        st, graph, names = self.search.st, self.graph, self.names
        for g, line in names.conjuncts(p):
            view = _GuardView(g, st, env, graph, names, di)
            if view.truth is True:
                continue
            where = f" ({line})" if line else ""
            whole = view.text
            while isinstance(g, core.GAnd):  # the first conjunct that is not true
                first = _GuardView(g.g1, st, env, graph, names, di)
                g = g.g1 if first.truth is not True else g.g2
                view = first if first.truth is not True else \
                    _GuardView(g, st, env, graph, names, di)
            if view.text != whole:
                where = f" (in `{whole}`" + (f", {line}" if line else "") + ")"
            if view.truth is None:
                self.record(path, t, "unknown",
                            f"guard `{view.text}`{where} is unknown: "
                            f"{', '.join(view.unknown)} unknown (a symbolic or missing "
                            f"size/attribute); a guard must be true to pass",
                            guard=view.text, assertion=whole, values=dict(view.reads),
                            line=line)
            else:
                self.record(path, t, "guard",
                            f"guard `{view.text}`{where} is false: {view.values()}",
                            guard=view.text, assertion=whole, values=dict(view.reads),
                            line=line)
            return


def _literal_message(details: dict) -> str:
    """``expected [-1], found [2] (argument 1 of Mean); HINT``."""
    arg = f" ({details['argument']})" if details.get("argument") else ""
    return (f"expected {' or '.join(details['whats'])}, found {details['found']}{arg}; "
            f"{details['hint']}")


# ------------------------------------------------------------ explanations

class Explanation:
    """Why ``pattern`` does or does not match at ``node``.

    ``verdict``: "match", "no match" or "out of fuel" (the engine's answer,
    from :func:`pypm_verified.match`); ``match`` (the :class:`Match` when
    it matched); for a "no": ``kind`` (operator, arity, guard, unknown,
    nonlinear, opvar, root, fuel, …), ``message`` (one line), ``at`` (the
    graph node where the deepest attempt failed), ``depth`` (pattern steps
    matched before it), ``definition`` (the sub-pattern being matched),
    ``alternate`` (its index, 0-based) and ``line`` (its source, file:line,
    when known), ``path`` (the steps from the root: alternates entered,
    children taken, match constraints), ``details`` (expected/found names,
    the values a guard read, the two nodes of a conflict) and
    ``truncated`` (the search stopped at its step limit).
    ``str(explanation)`` is the readable report.
    """

    def __init__(self, pattern, node: Node, verdict: str, engine: str, match=None,
                 kind: Optional[str] = None, message: str = "", at: Optional[Node] = None,
                 depth: int = 0, definition: Optional[str] = None,
                 alternate: Optional[int] = None, line: Optional[str] = None,
                 path: Sequence[str] = (), details: Optional[dict] = None,
                 truncated: bool = False, describe: Callable[[Node], str] = node_desc):
        self.pattern, self.node, self.verdict, self.engine = pattern, node, verdict, engine
        self.match = match
        self.kind, self.message, self.at, self.depth = kind, message, at, depth
        self.definition, self.alternate, self.line = definition, alternate, line
        self.path = tuple(path)
        self.details = details or {}
        self.truncated = truncated
        self._describe = describe

    @property
    def matched(self) -> bool:
        return self.verdict == "match"

    @property
    def pattern_name(self) -> str:
        return self.pattern.name if isinstance(self.pattern, Pattern) else "<core>"

    def __repr__(self):
        if self.matched:
            return f"<Explanation {self.pattern_name} at %{self.node.id}: match>"
        return (f"<Explanation {self.pattern_name} at %{self.node.id}: {self.verdict}, "
                f"{self.kind} at depth {self.depth}>")

    def __str__(self):
        head = f"pattern {self.pattern_name} at {self._describe(self.node)}"
        if self.matched:
            binds = ", ".join(f"{k} = {self._describe(v)}" for k, v in
                              self.match.bindings.items())
            fns = ", ".join(f"{k} = {getattr(f, 'name', f)}" for k, f in
                            self.match.functions.items())
            return f"{head}: MATCHES ({self.engine} engine)" + \
                (f"\n  bindings: {binds}" if binds else "") + \
                (f"\n  operators: {fns}" if fns else "")
        lines = [f"{head}: {'does not match' if self.verdict == 'no match' else self.verdict}"
                 f" ({self.engine} engine)"]
        if self.kind == "root":
            lines.append(f"  {self.message}")
            return "\n".join(lines)
        if self.definition is not None:
            alt = f", alternate {self.alternate}" if self.alternate is not None else ""
            src = f" ({self.line})" if self.line else ""
            lines.append(f"  deepest partial match: {self.depth} step(s), failed in "
                         f"{self.definition}{alt}{src}")
        if self.path:
            lines.append("  path: " + " > ".join(self.path))
        if self.at is not None:
            lines.append(f"  at node: {self._describe(self.at)}")
        lines.append(f"  why: [{self.kind}] {self.message}")
        if self.truncated:
            lines.append("  (the explanation's search stopped at its step limit: deepest "
                         "failure found so far)")
        return "\n".join(lines)

    def as_dict(self) -> dict:
        """A JSON-able summary."""
        def conv(v):
            if isinstance(v, Node):
                return self._describe(v)
            if isinstance(v, dict):
                return {k: conv(x) for k, x in v.items()}
            if isinstance(v, (list, tuple)):
                return [conv(x) for x in v]
            return v
        return {"pattern": self.pattern_name, "node": self._describe(self.node),
                "verdict": self.verdict, "engine": self.engine, "kind": self.kind,
                "message": self.message, "depth": self.depth,
                "at": None if self.at is None else self._describe(self.at),
                "definition": self.definition, "alternate": self.alternate,
                "line": self.line, "path": list(self.path), "details": conv(self.details),
                "truncated": self.truncated}


def table(pattern) -> Tuple[tuple, int]:
    """The definition table and the root definition of ``pattern``."""
    if isinstance(pattern, Pattern):
        linked = pattern.linked
        return linked.defs, linked.index[pattern]
    prog = matching._program(pattern)
    return prog.defs, prog.root


def _render_path(items, names: Names, describe) -> Tuple[List[str], Optional[tuple]]:
    out, last_alt = [], None
    for it in items:
        if it[0] == "alt":
            _, di, j = it
            last_alt = (di, j)
            n_alts = len(names.alts[di])
            out.append(f"{names.def_name[di]}" + (f"[alt {j}]" if n_alts > 1 else ""))
        elif it[0] == "arg":
            out.append(f"{it[1]} arg {it[2]}")
        else:
            out.append(f"constraint on {it[1]}" + (f" ({it[2]})" if it[2] else ""))
    return out, last_alt


def _search(pattern, node: Node, engine: str, step_limit: int, describe, verdict: str,
            match=None) -> Explanation:
    defs, root = table(pattern)
    names = Names(defs, root, pattern)
    if not core.root_admits(defs, root, node):
        syms = core.root_symbols(defs)[root] or frozenset()
        expected = sorted(_root_name(s) for s in syms)
        can = ", ".join(expected) or "nothing (no finite derivation)"
        return Explanation(pattern, node, verdict, engine, kind="root",
                           message=f"the pattern's root can only be {can}, found "
                                   f"{op_name(node.label)} (the proved root-operator index)",
                           details={"expected": expected,
                                    "found": op_name(node.label)},
                           describe=describe)
    s = Trace(defs, root, names, node.graph, step_limit, describe)
    truncated = False
    found = None
    try:
        for sol in s.run(node):
            found = sol
            break
    except (StepLimit, MemoryBudget, RecursionError):  # an endless (or huge) search
        truncated = True
    if found is not None and verdict == "no match":
        raise ExplainInconsistency(
            f"the {engine} engine says pattern {names.def_name[root]} does not match at "
            f"%{node.id}, but the explanation's search found a match")
    if found is None and verdict == "match" and not truncated:
        raise ExplainInconsistency(
            f"the {engine} engine matched pattern {names.def_name[root]} at %{node.id}, but "
            "the explanation's search found no match")
    b = s.best
    if verdict == "out of fuel":
        kind, msg = "fuel", ("the engine ran out of fuel: the search did not end within its "
                             "fuel")
        if isinstance(pattern, Pattern):
            msg += f" ({pattern.termination()})"
        if b is not None:
            msg += f"; deepest failure seen: {b.message}"
    elif b is None:
        return Explanation(pattern, node, verdict, engine, kind="empty",
                           message="no alternate could be tried", truncated=truncated,
                           describe=describe)
    else:
        kind, msg = b.kind, b.message
    if b is None:
        return Explanation(pattern, node, verdict, engine, kind=kind, message=msg,
                           truncated=truncated, describe=describe)
    path, last = _render_path(_path_list(b.path), names, describe)
    di, j = last if last is not None else (root, None)
    return Explanation(pattern, node, verdict, engine, match=match, kind=kind, message=msg,
                       at=b.node, depth=b.depth, definition=names.def_name[di],
                       alternate=j, line=names.alt_line[di][j] if j is not None else None,
                       path=path, details=b.details, truncated=truncated, describe=describe)


PatternLike = Union[Pattern, core.CorePattern, core.Program]


def explain(pattern: PatternLike, node: Node, engine: str = "verified",
            fuel: Optional[int] = None, step_limit: int = DEFAULT_STEP_LIMIT,
            describe: Callable[[Node], str] = node_desc) -> Explanation:
    """Why ``pattern`` does (not) match at ``node``.

    The verdict is ``pm.match(pattern, node, engine=engine, fuel=fuel)``'s:
    a match is returned as an :class:`Explanation` with ``verdict ==
    "match"`` and the :class:`Match`; a "no" gets the deepest partial match
    of the traced search (see the module docstring); an
    :class:`OutOfFuel` gets ``verdict == "out of fuel"``, ``kind ==
    "fuel"``. ``step_limit`` bounds the traced search (``truncated`` is
    set when it is spent); ``describe`` names graph nodes in messages (the
    CLI passes FX node names). Raises :class:`ExplainInconsistency` if the
    search contradicts the engine."""
    matching.check_engine(engine)
    if not isinstance(node, Node):
        raise TypeError(f"explain() needs a graph node, not {node!r}")
    try:
        m = matching.match(pattern, node, engine=engine, fuel=fuel)
    except OutOfFuel:
        return _search(pattern, node, engine, min(step_limit, 1 << 16), describe, "out of fuel")
    if m is not None:
        return Explanation(pattern, node, "match", engine, match=m, describe=describe)
    return _search(pattern, node, engine, step_limit, describe, "no match")


def explain_all(pattern: PatternLike, graph_or_nodes: Union[Graph, Iterable[Node]],
                top: int = 10, engine: str = "verified", fuel: Optional[int] = None,
                step_limit: int = DEFAULT_STEP_LIMIT,
                describe: Callable[[Node], str] = node_desc) -> List[Explanation]:
    """The near misses of ``pattern``: an :class:`Explanation` for each node
    where it does not match (or runs out of fuel) and its root operator is
    admitted (nodes the root-operator index rules out are not near misses),
    deepest first (ties by node id), at most ``top`` (all if None)."""
    nodes = graph_or_nodes.nodes if isinstance(graph_or_nodes, Graph) else list(graph_or_nodes)
    if not nodes:
        return []
    defs, root = table(pattern)
    out = []
    for n in nodes:
        if not core.root_admits(defs, root, n):
            continue
        e = explain(pattern, n, engine=engine, fuel=fuel, step_limit=step_limit, describe=describe)
        if not e.matched:
            out.append(e)
    out.sort(key=lambda e: (-e.depth, e.node.id))
    return out if top is None else out[:top]
