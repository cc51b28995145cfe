"""``@pm.rule(Pattern)``: rewrite rules (paper §2, Figure 1).

A rule is a plain Python function whose parameters are (some of) the
pattern's parameters, plus optionally ``ctx``: the context of the rewrite
(for PyTorch programs :class:`pypm_verified.torch.driver.RuleContext`: the
target device and the profitability table). When the pattern matches, the
rule is *fired* (:meth:`Rule.fire`) with the bound values by name (term
parameters get graph values, operator parameters the bound
:class:`~pypm_verified.dsl.Op`, unbound parameters ``None`` or their
default) and a *builder* (:mod:`.building`): operators called in its body
add nodes through the builder, and it returns the replacement. Its
``assert`` statements decide whether it fires: a rule whose assertion fails
does not fire (its asserts are compiled so that ``python -O`` keeps them).
The rules of a pattern are tried in definition order; the first that fires
wins. Both rewriters -- :func:`pypm_verified.rewrite` on a ``pm.Graph`` and
the PyTorch driver -- fire rules this one way.
"""
from __future__ import annotations

import inspect
from typing import Callable, Mapping, Optional

from ..errors import PatternError
from . import ast_transform
from .building import building_in
from .patterns import Pattern

CONTEXT_PARAM = "ctx"


class Rule:
    """A rule of ``pattern``: ``name``, ``fn`` (the user function),
    ``params`` (the pattern parameters it takes), ``takes_context`` (it has a
    ``ctx`` parameter) and ``where`` (file:line). Calling it calls the
    function."""

    def __init__(self, pattern: Pattern, fn: Callable):
        self.pattern = pattern
        self.fn = fn
        self.name = fn.__name__
        code = fn.__code__
        self.where = f"{code.co_filename}:{code.co_firstlineno}"
        sig = inspect.signature(fn)
        self.params = []
        self.takes_all = False  # **kwargs: every binding
        self.takes_context = False
        for p in sig.parameters.values():
            if p.kind == inspect.Parameter.VAR_KEYWORD:
                self.takes_all = True
            elif p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.POSITIONAL_ONLY):
                raise PatternError(f"rule {self.name!r} ({self.where}): parameter {p.name!r} "
                                   "must be nameable (rules receive bindings by name)")
            elif p.name == CONTEXT_PARAM and p.name not in pattern.params:
                self.takes_context = True
            elif p.name not in pattern.params:
                raise PatternError(f"rule {self.name!r} ({self.where}): parameter {p.name!r} is "
                                   f"not a parameter of pattern {pattern.name!r} "
                                   f"({', '.join(pattern.params)})")
            else:
                self.params.append(p.name)
        self.optional = frozenset(p.name for p in sig.parameters.values()
                                  if p.default is not inspect.Parameter.empty)
        try:
            self._run = ast_transform.compile_rule(fn, self.name).make({})
        except PatternError:  # no source (e.g. defined interactively): asserts as Python runs them
            self._run = fn

    def __repr__(self):
        return f"<rule {self.name} of {self.pattern.name}>"

    def __call__(self, *args, **kwargs):
        return self._run(*args, **kwargs)

    def arguments(self, values: Mapping[str, object], context=None) -> dict:
        """The keyword arguments the rule is called with for the bound
        ``values`` (parameter name -> value): its parameters by name, unbound
        ones ``None`` unless they have a default, ``ctx`` the context."""
        if self.takes_all:
            kwargs = dict(values)
        else:
            kwargs = {n: values[n] for n in self.params if n in values}
            kwargs.update({n: None for n in self.params
                           if n not in values and n not in self.optional})
        if self.takes_context:
            kwargs[CONTEXT_PARAM] = context
        return kwargs

    def fire(self, values: Mapping[str, object], builder, context=None):
        """Run the rule on the bound ``values`` with operator calls built by
        ``builder``: its result (the replacement), or None when one of its
        assertions fails. Other exceptions propagate."""
        kwargs = self.arguments(values, context)
        try:
            with building_in(builder):
                return self._run(**kwargs)
        except AssertionError:
            return None


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
