"""``@pm.pattern``: named patterns with alternates.

Every ``@pm.pattern`` name is one definition (the paper's ``μP``); defining
the name again adds an alternate. A body is rewritten (:mod:`.ast_transform`)
and traced lazily, at first use, with symbolic parameters (:mod:`.trace`,
:mod:`.symbolic`);
:func:`link` lowers patterns and everything they call into a core table
(:mod:`.lowering`). Calls are not inlined, so patterns may be recursive.
"""
from __future__ import annotations

import inspect
import os
import threading
from collections import OrderedDict
from typing import Callable, Dict, List, Sequence, Tuple

from ..core import CorePattern, PDef, Program
from ..errors import PatternError
from . import ast_transform, lowering, trace as tracing
from .symbolic import HELPERS, SymTerm, Var, show
from .trace import Unlocated

assert set(HELPERS) == set(ast_transform.HELPERS)

_registry: Dict[Tuple[str, str], "Pattern"] = {}
_lock = threading.RLock()
_generation = 0  # bumped by every definition; invalidates traces and links
_LINK_CACHE_SIZE = 64
_links: "OrderedDict[tuple, tuple]" = OrderedDict()


def _after_fork_in_child() -> None:
    # a thread of the parent holding the lock does not exist in the child: a
    # trace or link it was making is not cached (made again), a definition it
    # was adding is absent or complete (the generation is bumped first)
    global _lock
    _lock = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class _Definition:
    """One alternate: the user function and its rewritten, compiled body."""

    def __init__(self, fn, compiled: ast_transform.Compiled):
        self.fn = fn
        self.compiled = compiled
        self.made = compiled.make(HELPERS)


class Alternate:
    """A traced alternate: the returned term (IR), the parameter symbols and
    the :class:`~.trace.Trace` (guards, constraints, locals, uses, calls)."""

    def __init__(self, result, params, trace, filename: str, lineno: int):
        self.result = result
        self.params = params
        self.trace = trace
        self.filename = filename
        self.lineno = lineno


class Pattern:
    """A named pattern: one or more alternate definitions (``@pm.pattern``).

    ``name``, ``params`` (parameter names in signature order), ``rules``
    (the ``@pm.rule`` functions, in definition order) and, computed at first
    use: ``term_params`` / ``op_params`` (the parameters that are term /
    operator variables; variable ``i`` of a kind is the ``i``-th name),
    ``program`` (a :class:`~pypm_verified.core.Program` whose root, index 0,
    is this pattern), ``definition`` (its :class:`~pypm_verified.core.PDef`),
    ``core`` (its body)
    and ``alternates`` (the body of each definition). Calling a pattern
    inside another pattern's body is a pattern call (``PCall``).
    """

    _is_pattern = True

    def __init__(self, module: str, qualname: str, name: str, params: Tuple[str, ...]):
        self.module = module
        self.qualname = qualname
        self.name = name
        self.params = params
        self.definitions: List[_Definition] = []
        self.rules: list = []
        self._traced = None  # (generation, alternates)
        self.engine_handle = None  # verified-engine handle (binding.py)

    def __repr__(self):
        return f"<pattern {self.name}({', '.join(self.params)}), " \
               f"{len(self.definitions)} alternate(s)>"

    def _add(self, fn, compiled):
        d = _Definition(fn, compiled)
        global _generation
        with _lock:
            _generation += 1  # first: a child forked before the def is added only retraces
            for i, old in enumerate(self.definitions):
                if old.fn.__code__ is fn.__code__:  # the same def re-executed
                    self.definitions[i] = d
                    break
            else:
                self.definitions.append(d)

    # ------------------------------------------------------------- lowering

    @property
    def is_multi(self) -> bool:
        """Whether this is a multi-root pattern (its body returns a tuple of
        roots; ``theories/Multi.v``)."""
        alts = self.traced_alternates()
        return bool(alts) and isinstance(alts[0].result, tuple)

    @property
    def multi(self) -> "lowering.MultiInfo":
        """A multi-root pattern's lowered form: its roots (definitions of
        :attr:`linked`'s table), the shared variables and the cross-root
        guard."""
        return self.linked.multi[self]

    @property
    def linked(self) -> lowering.Linked:
        """The table of this pattern and everything it calls (cached)."""
        return link((self,))

    @property
    def term_params(self) -> Tuple[str, ...]:
        return self.linked.term_params[self]

    @property
    def op_params(self) -> Tuple[str, ...]:
        return self.linked.op_params[self]

    @property
    def var_names(self) -> Dict[int, str]:
        """Term variable id -> parameter name."""
        return dict(enumerate(self.term_params))

    @property
    def program(self) -> Program:
        """This pattern (index 0) and every pattern it calls, as a core table."""
        return self.linked.program(self)

    @property
    def definition(self) -> PDef:
        return self.program.root_def

    @property
    def core(self) -> CorePattern:
        """The body: alternates right-nested in definition order (calls refer to
        :attr:`program`'s table)."""
        return self.definition.body

    def termination(self):
        """Whether the proved fuel bound (``Fuel.match_root_fuel``; a
        multi-root pattern: ``Multi.match_multi_fuel``) covers this pattern, and up to which depth the default fuel suffices: a
        :class:`~pypm_verified.core.fuel.Termination` (``str()`` says it in
        a sentence)."""
        from ..core import fuel
        linked = self.linked
        names = [""] * len(linked.defs)
        for P, i in linked.index.items():
            names[i] = P.name
        if self.is_multi:  # Multi.multi_fuel_bound of the roots' bodies
            return fuel.termination_multi(linked.defs, linked.multi[self].roots, self.name,
                                          names)
        return fuel.termination(self.program, self.name, names)

    @property
    def alternates(self) -> Tuple[CorePattern, ...]:
        """The body of each definition, in definition order."""
        return self.linked.alternates[self]

    # -------------------------------------------------------------- tracing

    def traced_alternates(self) -> Tuple[Alternate, ...]:
        """Each definition traced (cached until the next definition): the
        returned IR term, parameter symbols and :class:`~.trace.Trace`."""
        with _lock:
            cached = self._traced
            if cached is not None and cached[0] == _generation:
                return cached[1]
            alternates = tuple(self._trace(d) for d in self.definitions)
            self._traced = (_generation, alternates)
            return alternates

    def _trace(self, d: _Definition) -> Alternate:
        comp = d.compiled

        def fail(line, problem):
            raise PatternError(f"pattern {self.name!r} ({comp.filename}:{line}): {problem}") \
                from None

        sourceless = getattr(comp, "sourceless", False)
        trace = tracing.Trace(self, comp.codes, sourceless)
        params = tuple(tracing.Sym(n, i) for i, n in enumerate(self.params))
        tracing.push(trace)
        try:
            result = d.made(*[Var(s, trace) for s in params])
            if sourceless:  # what the rewritten `return` would have checked
                result = HELPERS["__pm_ret__"](result)
        except Unlocated as e:
            found, line = ast_transform.error_line(e.__traceback__, comp.codes)
            fail(line if found else comp.lineno, str(e))
        except PatternError:
            raise
        except NameError as e:
            found, line = ast_transform.error_line(e.__traceback__, comp.codes)
            fail(line if found else comp.lineno, f"unknown name {e.name!r}")
        except RecursionError:
            fail(comp.lineno, "recursion limit reached while tracing")
        except Exception as e:
            found, line = ast_transform.error_line(e.__traceback__, comp.codes)
            fail(line if found else comp.lineno,
                 f"unsupported operation in a pattern body: {type(e).__name__}: {e}")
        finally:
            tracing.pop()
        if isinstance(result, tuple) and result and all(isinstance(r, SymTerm) for r in result):
            # a multi-root pattern (Multi.v): one term per root, shared variables
            return Alternate(tuple(r.core for r in result), params, trace, comp.filename,
                             comp.lineno)
        if not isinstance(result, SymTerm):  # fell off the end: no return statement
            fail(comp.lineno, "the pattern body has no return statement; it must return a "
                              "pattern term")
        return Alternate(result.core, params, trace, comp.filename, comp.lineno)

    def __call__(self, *args, **kwargs):
        trace = tracing.current(required=False)
        if trace is None:
            raise PatternError(f"pattern {self.name!r} can only be called inside another "
                               "pattern's body; use pm.match to match it")
        if len(args) > len(self.params):
            raise Unlocated(f"pattern {self.name} takes {len(self.params)} argument(s), "
                             f"got {len(args) + len(kwargs)}")
        bound = dict(zip(self.params, args))
        for k, v in kwargs.items():
            if k not in self.params or k in bound:
                raise Unlocated(f"pattern {self.name}: unexpected or repeated argument {k!r}")
            bound[k] = v
        if len(bound) != len(self.params):
            raise Unlocated(f"pattern {self.name} takes {len(self.params)} argument(s), "
                             f"got {len(bound)}")
        syms = []
        for name in self.params:
            v = bound[name]
            if not isinstance(v, Var):
                raise Unlocated(f"pattern calls take variables: argument {name!r} of "
                                 f"{self.name} is {show(v)}")
            if v.trace is not trace:
                raise Unlocated(f"variable {v.name} belongs to another pattern")
            syms.append(v.sym)
        call = tracing.CallIR(self, tuple(syms), trace.line())
        trace.calls.append(call)
        return SymTerm(call, f"{self.name}({', '.join(bound[n].name for n in self.params)})")


def link(roots: Sequence[Pattern]) -> lowering.Linked:
    """The linked table of ``roots`` and every pattern they call (cached
    until the next definition)."""
    key = tuple(roots)
    with _lock:
        hit = _links.get(key)
        if hit is not None and hit[0] == _generation:
            _links.move_to_end(key)
            return hit[1]
        linked = lowering.lower(key)
        _links[key] = (_generation, linked)
        _links.move_to_end(key)
        while len(_links) > _LINK_CACHE_SIZE:
            _links.popitem(last=False)
        return linked


def pattern(fn: Callable) -> Pattern:
    """Define a pattern (``@pm.pattern``). Defining a name again adds an
    alternate; every definition returns the same :class:`Pattern`. Bodies are
    traced lazily, at first use."""
    if isinstance(fn, Pattern) or not inspect.isfunction(fn):
        raise PatternError(f"@pm.pattern decorates a function, not {fn!r}")
    compiled = ast_transform.compile_pattern(fn, fn.__name__)
    where = f"{compiled.filename}:{compiled.lineno}"
    sig = inspect.signature(fn)
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    for p in sig.parameters.values():
        if p.kind not in kinds:
            raise PatternError(f"pattern {fn.__name__!r} ({where}): parameter {p.name!r} must be "
                               "a plain positional parameter (parameters are pattern variables)")
    params = tuple(sig.parameters)
    key = (fn.__module__, fn.__qualname__)
    with _lock:
        pat = _registry.get(key)
        if pat is None:
            pat = Pattern(fn.__module__, fn.__qualname__, fn.__name__, params)
        elif pat.params != params:
            raise PatternError(
                f"pattern {fn.__name__!r} ({where}): alternates must have the same parameters; "
                f"this definition has ({', '.join(params)}), earlier ones "
                f"({', '.join(pat.params)})")
        pat._add(fn, compiled)
        _registry[key] = pat
    return pat
