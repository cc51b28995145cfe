"""Matching entry points: ``match`` and ``match_all`` on either engine.

A pattern is a ``@pm.pattern`` (lowered with every pattern it calls), a core
pattern without calls (its free variables are its parameters), or a
:class:`core.Program` (a definition table and a root). The patterns of one
call are combined into one table with one root each.
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

from . import binding, reference
from .. import core
from ..core import symbols
from ..errors import MemoryBudget, OutOfFuel, PatternError
from ..core.graph import Graph, Node, sym_attr as _sym_attr
from ..dsl.patterns import Pattern, link

ENGINES = ("verified", "reference")

PatternLike = Union[Pattern, core.CorePattern, core.Program]


class Match:
    """A successful match of ``pattern`` at ``root``.

    ``substitution`` maps the root definition's term variable ids to nodes,
    ``fsubstitution`` its operator variable ids to symbols (only the
    parameters the match bound, never locals). ``bindings`` maps term
    parameter names (variable ids for core patterns) to nodes and
    ``functions`` operator parameter names (ids) to the bound operators
    (the :class:`~pypm_verified.dsl.Op` objects).

    Two words on purpose: "substitution" (``substitution``,
    ``fsubstitution``) is Coq's name (θ and φ, ``Subst.subst`` and
    ``Declarative.fsubst``, keyed by variable id), kept where Python mirrors
    those definitions (this class, the reference engine, the validator's
    certificates); "bindings" (``bindings``, ``functions``) is the same
    match keyed by name, as users see it.
    """

    __slots__ = ("pattern", "root", "substitution", "fsubstitution", "bindings", "functions")

    def __init__(self, pattern: PatternLike, root: Node, substitution: Dict[int, Node],
                 fsubstitution: Optional[Dict[int, int]] = None,
                 names: Optional[Sequence[str]] = None,
                 fnames: Optional[Sequence[str]] = None):
        self.pattern = pattern
        self.root = root
        self.substitution = dict(sorted(substitution.items()))
        self.fsubstitution = dict(sorted((fsubstitution or {}).items()))
        self.bindings = {(names[v] if names is not None else v): n
                         for v, n in self.substitution.items()}
        self.functions = {(fnames[F] if fnames is not None else F): symbols.lookup(f)
                          for F, f in self.fsubstitution.items()}

    @property
    def values(self) -> dict:
        """``bindings`` and ``functions`` in one map: what a rule is fired
        with (:meth:`pypm_verified.Rule.fire`)."""
        return {**self.bindings, **self.functions}

    def __getitem__(self, name):
        if name in self.bindings:
            return self.bindings[name]
        return self.functions[name]

    def __eq__(self, other):
        return (isinstance(other, Match) and self.pattern is other.pattern
                and self.root == other.root and self.substitution == other.substitution
                and self.fsubstitution == other.fsubstitution)

    __hash__ = None

    def __repr__(self):
        name = self.pattern.name if isinstance(self.pattern, Pattern) else "<core>"
        binds = [f"{k}=%{n.id}" for k, n in self.bindings.items()]
        binds += [f"{k}={getattr(f, 'name', f)}" for k, f in self.functions.items()]
        return f"<Match {name} at %{self.root.id}: {', '.join(binds)}>"


class PreparedPatterns:
    """Patterns prepared for matching: one table and one root per pattern,
    with the names to report bindings by."""

    def __init__(self, items):
        self.items = list(items)
        for it in self.items:
            if not isinstance(it, (Pattern, core.Program) + core.PATTERN_TYPES):
                raise TypeError(f"expected a @pm.pattern, a core pattern or a core.Program, "
                                f"not {it!r}")
        dsl = list(dict.fromkeys(it for it in self.items if isinstance(it, Pattern)))
        linked = link(dsl) if dsl else None
        defs: List[core.PDef] = list(linked.defs) if linked else []
        offsets: Dict[tuple, int] = {}  # a table appended once, however often it is used
        roots, self.names = [], []
        for it in self.items:
            if isinstance(it, Pattern):
                roots.append(linked.index[it])
                self.names.append((linked.term_params[it], linked.op_params[it]))
                continue
            prog = _program(it)
            off = offsets.get(prog.defs)
            if off is None:
                off = offsets[prog.defs] = len(defs)
                defs.extend(core.PDef(d.nparams, d.nfparams, core.shift_calls(d.body, off),
                                      d.pbinds, d.pfbinds) for d in prog.defs)
            roots.append(prog.root + off)
            self.names.append((None, None))
        self.roots = tuple(roots)
        # one @pm.pattern: its linked table as is, and the pattern caches the handle
        self.owner = self.items[0] if len(dsl) == len(self.items) == 1 else None
        # only @pm.patterns: the linked table itself (the same object while no
        # pattern is defined: engine handles keyed by it are reused)
        self.defs = linked.defs if linked is not None and len(defs) == len(linked.defs) \
            else tuple(defs)

    def match(self, i: int, node: Node, solution) -> Match:
        theta, phi = solution
        tn, fn = self.names[i]
        return Match(self.items[i], node, theta, phi, tn, fn)


def _program(p) -> core.Program:
    try:
        prog = core.as_program(p)
        if not 0 <= prog.root < len(prog.defs):
            raise core.IllFormed(f"root {prog.root} is not a definition index")
        core.check_scoped(prog.defs)
        core.check_defs(prog.defs)
    except core.IllFormed as e:
        raise PatternError(f"ill-formed core pattern: {e}") from None
    return prog


def check_engine(engine: str) -> str:
    """``engine`` if it names an engine (``ENGINES``), else ValueError."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; expected one of {ENGINES}")
    return engine


_FUEL: contextvars.ContextVar = contextvars.ContextVar("pypm_fuel", default=None)


@contextlib.contextmanager
def fuel_limit(fuel: Optional[int]) -> Iterator[None]:
    """Within the block (this thread or task), a match given no ``fuel``
    (:func:`match`, :func:`match_all`, a :class:`PatternSet` made in it: the
    rewrite driver's) gets ``fuel`` machine steps instead of the engines'
    default (``1 << 26``); ``None`` keeps the default. The CLI's ``--fuel``."""
    if fuel is not None and (not isinstance(fuel, int) or isinstance(fuel, bool) or fuel < 1):
        raise ValueError(f"fuel must be a positive int, not {fuel!r}")
    token = _FUEL.set(fuel)
    try:
        yield
    finally:
        _FUEL.reset(token)


def _fuel(fuel: Optional[int]) -> Optional[int]:
    return fuel if fuel is not None else _FUEL.get()


def _label(pattern: PatternLike) -> str:
    return pattern.name if isinstance(pattern, Pattern) else repr(pattern)


def _out_of_fuel(pattern: PatternLike, node_id: int) -> OutOfFuel:
    """The error, with what ``Fuel.match_root_fuel`` says of the pattern."""
    why = ""
    if isinstance(pattern, Pattern):
        why = f" ({pattern.termination()})"
    return OutOfFuel(f"pattern {_label(pattern)} at node %{node_id} ran out of fuel{why}")


def match(pattern: PatternLike, node: Node, engine: str = "verified",
          fuel: Optional[int] = None) -> Optional[Match]:
    """Match ``pattern`` at ``node``: a :class:`Match`, or None if it does not
    match. Raises :class:`OutOfFuel` when ``fuel`` machine steps (default
    ``1 << 26``) do not decide it (a recursive pattern may never terminate).
    ``engine`` is "verified" (the Coq-extracted matcher) or "reference" (the
    pure-Python matcher)."""
    check_engine(engine)
    fuel = _fuel(fuel)
    if not isinstance(node, Node):
        raise TypeError(f"match() needs a graph node, not {node!r}")
    if isinstance(pattern, Pattern) and pattern.is_multi:
        from . import multi
        return multi.match_multi(pattern, node, engine, fuel)
    if getattr(pattern, "_is_dominates", False):  # pm.dominates: a side condition (dominates.py)
        return pattern.match(node, engine, fuel)
    return _match_at(PreparedPatterns([pattern]), 0, node, engine, fuel)


def _match_at(s: PreparedPatterns, i: int, node: Node, engine: str, fuel: Optional[int],
              owner=None) -> Optional[Match]:
    """Root ``i`` of the prepared set ``s`` at ``node``, with ``engine``;
    ``owner`` caches the engine's handle of the set (default ``s.owner``)."""
    if engine == "reference":
        try:
            sol = reference.first_solution(core.Program(s.defs, s.roots[i]), node, fuel)
        except MemoryBudget:
            raise
        except OutOfFuel:
            raise _out_of_fuel(s.items[i], node.id) from None
        return None if sol is None else s.match(i, node, sol)
    status, binds, fbinds = binding.match(node.graph, node.id, s.defs, s.roots, i, fuel,
                                          owner or s.owner)
    return _answer(s, i, node, status, binds, fbinds)


def _answer(s: PreparedPatterns, i: int, node: Node, status: int, binds,
            fbinds) -> Optional[Match]:
    """The verified engine's answer for root ``i`` of ``s`` at ``node``: a
    :class:`Match`, None, or :class:`OutOfFuel` raised."""
    if status == binding.serialize.STATUS_OUT_OF_FUEL:
        raise _out_of_fuel(s.items[i], node.id)
    if status != binding.serialize.STATUS_MATCH:
        return None
    nodes = node.graph.nodes
    return s.match(i, node, ({v: nodes[n] for v, n in binds}, dict(fbinds)))


def match_all(patterns: Sequence[PatternLike], graph: Graph, engine: str = "verified",
              fuel: Optional[int] = None) -> List[Tuple[PatternLike, Node, Match]]:
    """Every ``(pattern, root, match)`` for every node (in id order) and every
    pattern that matches there (in the given order). A ``pm.dominates``
    pattern gives its :class:`~.dominates.DominatorMatch` es. Raises
    :class:`OutOfFuel` if any attempt runs out of fuel."""
    check_engine(engine)
    fuel = _fuel(fuel)
    if isinstance(patterns, (Pattern, core.Program) + core.PATTERN_TYPES) or \
            getattr(patterns, "_is_dominates", False):
        raise TypeError("match_all() takes a sequence of patterns")
    patterns = list(patterns)
    out = []
    if not patterns:
        return out
    if any(getattr(p, "_is_dominates", False) for p in patterns):
        # dominator patterns (one pypm_dominates call each, dominates.py)
        # merged with the others by node, then pattern order
        rest = [p for p in patterns if not getattr(p, "_is_dominates", False)]
        entries = [(node.id, patterns.index(p), (p, node, m))
                   for p, node, m in match_all(rest, graph, engine, fuel)]
        for i, p in enumerate(patterns):
            if getattr(p, "_is_dominates", False):
                entries += [(m.root.id, i, (p, m.root, m))
                            for m in p.match_all(graph, engine, fuel)]
        entries.sort(key=lambda e: e[:2])
        return [e[2] for e in entries]
    if any(isinstance(p, Pattern) and p.is_multi for p in patterns):
        # multi-root patterns (each set of nodes once, Multi.match_all_multi)
        # merged with the others by node, then pattern order
        from . import multi
        single = [p for p in patterns if not (isinstance(p, Pattern) and p.is_multi)]
        entries = [(node.id, patterns.index(p), (p, node, m))
                   for p, node, m in match_all(single, graph, engine, fuel)]
        for i, p in enumerate(patterns):
            if isinstance(p, Pattern) and p.is_multi:
                entries += [(m.root.id, i, (p, m.root, m))
                            for m in multi.match_all_multi(p, graph, engine, fuel)]
        entries.sort(key=lambda e: e[:2])
        return [e[2] for e in entries]
    s = PreparedPatterns(patterns)
    if engine == "reference":
        progs = [core.Program(s.defs, r) for r in s.roots]
        for node in graph.nodes:
            for i, prog in enumerate(progs):
                try:
                    sol = reference.first_solution(prog, node, fuel)
                except MemoryBudget:
                    raise
                except OutOfFuel:
                    raise _out_of_fuel(patterns[i], node.id) from None
                if sol is not None:
                    out.append((patterns[i], node, s.match(i, node, sol)))
        return out
    nodes = graph.nodes
    for i, root, status, binds, fbinds in binding.match_all(graph, s.defs, s.roots, fuel,
                                                            _owner_of(s)):
        if status == binding.serialize.STATUS_OUT_OF_FUEL:
            raise _out_of_fuel(patterns[i], root)
        m = s.match(i, nodes[root], ({v: nodes[n] for v, n in binds}, dict(fbinds)))
        out.append((patterns[i], nodes[root], m))
    return out


class _Owner:
    """What the pattern sets of one prepared table share: the engine's handle
    of the table, the candidates per label and the verified matcher (kept
    across :class:`PatternSet` objects, e.g. one per driver run, by
    :func:`_owner_of`)."""
    __slots__ = ("engine_handle", "by_label", "matcher")

    def __init__(self):
        self.engine_handle = None
        self.by_label: Dict[tuple, Dict[int, Tuple[int, ...]]] = {}
        self.matcher = None


_owners: Dict[tuple, Tuple[tuple, _Owner]] = {}  # (id(defs), roots) -> (defs, owner)
_OWNERS_SIZE = 32


def _owner_of(s: PreparedPatterns) -> _Owner:
    """The :class:`_Owner` of the table ``s.defs`` with roots ``s.roots``
    (``link`` returns the same table object until the next definition, so
    a new driver on the same patterns reuses the loaded table)."""
    key = (id(s.defs), s.roots)
    hit = _owners.get(key)
    if hit is not None and hit[0] is s.defs:
        return hit[1]
    owner = _Owner()
    _owners[key] = (s.defs, owner)
    while len(_owners) > _OWNERS_SIZE:
        del _owners[next(iter(_owners))]
    return owner


_NO_MATCH = binding.serialize.STATUS_NO_MATCH


class PatternSet:
    """``patterns`` prepared once for many matches with one ``engine`` (what
    the rewrite driver uses): linked, serialized and loaded into the engine
    once, where :func:`match` does it per call.

    ``match(i, node)`` matches pattern ``i`` at ``node`` (as :func:`match`);
    ``candidates(label)`` are the patterns worth trying at a node with that
    label: the others answer no match there (the root-operator index, a
    proved no: ``Entry.candidates_sound``)."""

    def __init__(self, patterns: Sequence[PatternLike], engine: str = "verified",
                 fuel: Optional[int] = None):
        self.engine = check_engine(engine)
        self.patterns = list(patterns)
        self.fuel = _fuel(fuel)
        self._s = PreparedPatterns(self.patterns)
        self._owner = _owner_of(self._s)
        self._root_syms = None
        # candidates per label, per engine and implementation (the tests swap it)
        impl = binding.candidates if self.engine == "verified" else None
        self._by_label = self._owner.by_label.setdefault((self.engine, impl), {})
        kimpl = binding.candidates_at if self.engine == "verified" else None
        self._by_kids = self._owner.by_label.setdefault((self.engine, kimpl, "kids"), {})
        self._kid_syms = None
        self._matcher = None  # verified engine: the owner's binding.SetMatcher

    def candidates(self, label: int, graph=None) -> Tuple[int, ...]:
        """Indices (increasing) of the patterns whose root can have operator
        ``label`` (with its attributes in ``graph``, a term graph: its class;
        without it, the symbol table's); every other pattern answers no match
        at a node labelled ``label`` there, whatever the fuel, so the driver
        does not try it. The verified engine asks the engine library
        (``pypm_candidates``, the extracted ``Entry.set_candidates``: the same
        index its matches consult); the reference engine reads
        :func:`core.root_symbols` (the index its ``first_solution``
        consults). Cached per label (and attributes, for a graph whose
        classes are its own)."""
        own = graph is not None and type(graph) is not Graph
        key = (label, graph.sym_attr(label, core.OPCLASS)) if own else label
        c = self._by_label.get(key)
        if c is None:
            v = key[1] if own else _sym_attr(label, core.OPCLASS)
            attrs = () if v is None else ((core.OPCLASS, v),)
            if self.engine == "verified":
                c = binding.candidates(self._s.defs, self._s.roots, label, attrs, self._owner)
            else:
                if self._root_syms is None:
                    syms = core.root_symbols(self._s.defs)
                    self._root_syms = [syms[r] for r in self._s.roots]
                c = tuple(i for i, r in enumerate(self._root_syms) if core.admits(r, label, attrs))
            self._by_label[key] = c
        return c

    def candidates_at(self, node: Node) -> Tuple[int, ...]:
        """:meth:`candidates` of ``node``'s operator refined by its
        arguments' operators: the patterns whose children's index also
        admits them (``KidIndex.kid_index``); every other pattern has no
        match at ``node`` (a proved no: ``Entry.candidates_at_sound``), so
        the driver does not try it (a ``view`` whose argument is no ``bmm``
        is no candidate of a pattern rooted at ``view(bmm(..))``). The
        verified engine asks the library (``pypm_candidates_at``, the
        extracted ``Entry.set_candidates_at``); the reference engine reads
        :func:`core.kid_symbols`. Cached per operator and the arguments'
        operators (and attributes, for a graph whose classes are its
        own)."""
        graph = node.graph
        c = self.candidates(node.label, graph)
        if not c:
            return c
        own = type(graph) is not Graph
        kl = tuple([a.label for a in node.args])
        key = (node.label, kl, tuple([graph.sym_attr(l, core.OPCLASS)
                                      for l in (node.label,) + kl])) if own else (node.label, kl)
        hit = self._by_kids.get(key)
        if hit is not None:
            return hit

        def attrs(label):
            v = graph.sym_attr(label, core.OPCLASS) if own else _sym_attr(label, core.OPCLASS)
            return () if v is None else ((core.OPCLASS, v),)

        kids = tuple((l, attrs(l)) for l in kl)
        if self.engine == "verified":
            hit = binding.candidates_at(self._s.defs, self._s.roots, node.label,
                                        attrs(node.label), kids, self._owner)
        else:
            if self._kid_syms is None:
                syms = core.kid_symbols(self._s.defs)
                self._kid_syms = [syms[r] for r in self._s.roots]
            own_attrs = attrs(node.label)
            hit = tuple(i for i in c
                        if core.kids_admit(self._kid_syms[i], node.label, own_attrs, kids))
        self._by_kids[key] = hit
        return hit

    def _set_matcher(self) -> "binding.SetMatcher":
        # the engine library is looked up once per set (it may have changed since
        # the shared matcher was made: $PYPM_VERIFIED_LIB)
        m = self._owner.matcher
        if type(m) is not binding.SetMatcher or m.lib is not binding.current_engine_library():
            m = self._owner.matcher = binding.SetMatcher(self._s.defs, self._s.roots,
                                                         self._owner)
        self._matcher = m
        return m

    def match(self, i: int, node: Node) -> Optional[Match]:
        """Pattern ``i`` at ``node``: a :class:`Match` or None; raises
        :class:`OutOfFuel` as :func:`match` does."""
        m = self._matcher
        if m is None:
            if self.engine != "verified":
                return _match_at(self._s, i, node, self.engine, self.fuel, self._owner)
            m = self._set_matcher()
        status, binds, fbinds = m.match(node.graph, node.id, i, self.fuel)
        if status == _NO_MATCH:  # the common answer, without a call
            return None
        return _answer(self._s, i, node, status, binds, fbinds)

    def first_match(self, indices: Tuple[int, ...], node: Node,
                    start: int = 0) -> Optional[Tuple[int, Match]]:
        """The first of patterns ``indices[start:]`` that matches at ``node``:
        ``(position in indices, Match)``, or None; as :meth:`match` for each
        in turn (raises :class:`OutOfFuel` at the first that runs out of
        fuel). The verified engine is called once for the run
        (:meth:`binding.SetMatcher.first`)."""
        if self.engine != "verified":
            for k in range(start, len(indices)):
                m = self.match(indices[k], node)
                if m is not None:
                    return k, m
            return None
        sm = self._matcher or self._set_matcher()
        while True:
            got = sm.first(node.graph, node.id, indices, start, self.fuel)
            if got is None:
                return None
            k, (status, binds, fbinds) = got
            m = _answer(self._s, indices[k], node, status, binds, fbinds)
            if m is not None:
                return k, m
            start = k + 1
