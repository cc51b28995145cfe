"""``@pm.rule(Pattern)``: rewrite rules (paper §2, Figure 1).

A rule is a plain Python function whose parameters are (some of) the
pattern's parameters. When the pattern matches, the rule is called with the
bound values by name (term parameters get graph nodes, operator parameters
the bound :class:`~pypm_verified.dsl.Op`, unbound parameters ``None`` or
their default) and returns the replacement, built by calling operators on
nodes (operators called without node arguments, such as constants
``Zero()``, add nodes to the matched graph). Its ``assert`` statements decide whether it fires: a rule whose
assertion fails does not fire (its asserts are compiled so that
``python -O`` keeps them). The rules of a pattern are tried in definition
order; the first that fires wins (see :func:`pypm_verified.rewrite`).
"""
from __future__ import annotations

import inspect
from typing import Callable, Optional

from . import ast_transform, dsl
from .errors import PatternError
from .graph import Node
from .patterns import Pattern


class Rule:
    """A rule of ``pattern``: ``name``, ``fn`` (the user function) and
    ``params`` (its parameter names). Calling it calls the function."""

    def __init__(self, pattern: Pattern, fn: Callable):
        self.pattern = pattern
        self.fn = fn
        self.name = fn.__name__
        code = fn.__code__
        self.where = f"{code.co_filename}:{code.co_firstlineno}"
        sig = inspect.signature(fn)
        self.params = []
        self._var_kw = False
        for p in sig.parameters.values():
            if p.kind == inspect.Parameter.VAR_KEYWORD:
                self._var_kw = True
            elif p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.POSITIONAL_ONLY):
                raise PatternError(f"rule {self.name!r} ({self.where}): parameter {p.name!r} "
                                   "must be nameable (rules receive bindings by name)")
            elif p.name not in pattern.params:
                raise PatternError(f"rule {self.name!r} ({self.where}): parameter {p.name!r} is "
                                   f"not a parameter of pattern {pattern.name!r} "
                                   f"({', '.join(pattern.params)})")
            else:
                self.params.append(p.name)
        self._defaults = {p.name for p in sig.parameters.values()
                          if p.default is not inspect.Parameter.empty}
        try:
            self._run = ast_transform.compile_rule(fn, self.name).make({})
        except PatternError:  # no source (e.g. defined interactively): asserts as Python runs them
            self._run = fn

    def __repr__(self):
        return f"<rule {self.name} of {self.pattern.name}>"

    def __call__(self, *args, **kwargs):
        return self._run(*args, **kwargs)

    def apply(self, match) -> Optional[Node]:
        """The replacement this rule builds for ``match``, or None when one of
        its assertions fails."""
        values = {**match.bindings, **match.functions}
        if self._var_kw:
            kwargs = dict(values)
        else:
            kwargs = {n: values[n] for n in self.params if n in values}
            kwargs.update({n: None for n in self.params
                           if n not in values and n not in self._defaults})
        try:
            with dsl.building_in(match.root.graph):
                out = self._run(**kwargs)
        except AssertionError:
            return None
        if not isinstance(out, Node) or out.graph is not match.root.graph:
            raise PatternError(f"rule {self.name!r} ({self.where}) returned {out!r}; a rule "
                               "returns a node of the matched graph (build it by calling "
                               "operators on the bound nodes)")
        return out


def rule(pattern: Pattern):
    """Declare a rule of ``pattern``: ``@pm.rule(MMxyT)``. Rules are tried in
    definition order; re-executing a ``def`` replaces its earlier rule."""
    if not isinstance(pattern, Pattern):
        raise PatternError(f"@pm.rule takes a @pm.pattern, not {pattern!r}")

    def decorate(fn: Callable) -> Rule:
        if not inspect.isfunction(fn):
            raise PatternError(f"@pm.rule decorates a function, not {fn!r}")
        r = Rule(pattern, fn)
        for i, old in enumerate(pattern.rules):
            if old.fn.__code__ is fn.__code__:
                pattern.rules[i] = r
                break
        else:
            pattern.rules.append(r)
        return r

    return decorate
