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

*Why a rule did not fire.* ``Rule.fire(..., on_decline=f)`` calls ``f``
with a :class:`Decline` when an assertion fails: the first failing assert's
line and source text (``x.dtype == w.dtype``), found from the traceback (the
frames running the rule's compiled code, which keeps the source's line
numbers) and the rule's source parsed once. The rewriters collect them in
the report (:attr:`pypm_verified.RewriteReport.declines`); the PyTorch
driver adds the profitability threshold and the size seen to a failing
``ctx.profitable(...)`` guard (:attr:`Decline.detail`).
"""
from __future__ import annotations

import ast
import copy
import inspect
import os
import textwrap
from dataclasses import dataclass, replace
from typing import Callable, Dict, FrozenSet, List, Mapping, Optional, Tuple

from ..errors import PatternError
from . import ast_transform
from .building import building_in
from .patterns import Pattern

CONTEXT_PARAM = "ctx"


@dataclass(frozen=True)
class Decline:
    """Why a rule did not fire on a match: its first assertion that failed.

    ``rule`` (the :class:`Rule`), ``filename``, ``line`` / ``end_line`` (the
    assert statement's lines in the file; None when the traceback does not
    reach the rule's body), ``text`` (the assert's expression as written,
    e.g. ``x.dtype in (pm.f32, pm.bf16)``; a description when the source is
    unknown or the AssertionError came from elsewhere), ``message`` (the
    assert's message or the AssertionError's text, if any) and ``detail``
    (what the context knows about the failure, e.g. ``not profitable on cpu:
    attention (mask, float32) needs sequence length >= 512, saw 128``);
    ``is_assert`` is False when ``text`` describes rather than quotes;
    ``seen`` holds ``(expression, value)`` for what the failing assert read
    that says why it failed without varying with every match: bare names
    bound to ``None``/booleans/numbers/strings and ``name.attr`` reads of
    :data:`SHOWN_ATTRS` (``x.dtype``, ``q.device.type``, ...).
    :attr:`reason` is the one-line text reports show."""

    rule: "Rule"
    filename: str
    line: Optional[int]
    end_line: Optional[int]
    text: str
    message: Optional[str] = None
    detail: Optional[str] = None
    is_assert: bool = True
    seen: Tuple[Tuple[str, str], ...] = ()

    @property
    def where(self) -> str:
        """``file:line`` of the failing assert (the file shortened to the
        current directory or the package when under one)."""
        return f"{short_path(self.filename)}:{self.line if self.line is not None else '?'}"

    @property
    def reason(self) -> str:
        """One line: the detail if known, else the failing guard; then where."""
        if self.detail:
            what = self.detail
        else:
            what = (f"assert {self.text} failed" if self.is_assert else self.text)
            extras = ([self.message] if self.message else []) + (
                [", ".join(f"{e} = {v}" for e, v in self.seen)] if self.seen else [])
            if extras:
                what += f" ({'; '.join(extras)})"
        return f"{what} [{self.where}]"

    def with_detail(self, detail: Optional[str]) -> "Decline":
        return replace(self, detail=detail)

    def covers(self, filename: str, line: int) -> bool:
        """Whether ``filename:line`` lies within the failing assert."""
        return (self.line is not None and filename == self.filename
                and self.line <= line <= (self.end_line or self.line))


def short_path(path: str) -> str:
    """``path`` relative to the current directory if under it, else to the
    directory holding the ``pypm_verified`` package if under that, else as is."""
    pkg_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for base in (os.getcwd(), pkg_parent):
        try:
            rel = os.path.relpath(path, base)
        except ValueError:  # another drive
            continue
        if not rel.startswith(os.pardir):
            return rel
    return path


#: Attributes whose values a decline shows (they say why a guard failed and
#: take few values: a reason's count stays meaningful).
SHOWN_ATTRS = frozenset({"dtype", "torch_dtype", "elType", "rank", "device", "type",
                         "is_const", "op_class"})

_Read = Tuple[str, Tuple[str, ...]]  # (expression text, (name, attr, ...))


def _reads(test: ast.expr) -> Tuple[_Read, ...]:
    """What a decline shows of an assert's ``test``: its bare names and its
    ``name.attr[.attr]`` reads whose last attribute is in SHOWN_ATTRS, in
    source order, without repeats (names that are read through an attribute
    are shown through it)."""
    out: List[Tuple[Tuple[int, int], str, Tuple[str, ...]]] = []  # (position, text, path)
    inner = set()
    for node in ast.walk(test):
        if isinstance(node, ast.Attribute):
            chain, cur = [], node
            while isinstance(cur, ast.Attribute):
                chain.append(cur.attr)
                cur = cur.value
            if isinstance(cur, ast.Name) and len(chain) <= 2 and node.attr in SHOWN_ATTRS:
                path = (cur.id, *reversed(chain))
                out.append(((node.lineno, node.col_offset), ".".join(path), path))
            for sub in ast.walk(node.value):
                inner.add(id(sub))
        elif isinstance(node, ast.Call):
            inner.add(id(node.func))
    for node in ast.walk(test):
        if isinstance(node, ast.Name) and id(node) not in inner:
            out.append(((node.lineno, node.col_offset), node.id, (node.id,)))
    seen, uniq = set(), []
    for _, text, path in sorted(out):
        if text not in seen:
            seen.add(text)
            uniq.append((text, path))
    return tuple(uniq)


def _show(path: Tuple[str, ...], f_locals: Mapping[str, object]) -> Optional[str]:
    """The value ``path`` reads in ``f_locals``, shortly, or None when it is
    not shown (unbound, a global, a value too varied to count)."""
    if path[0] not in f_locals:
        return None
    v = f_locals[path[0]]
    try:
        for a in path[1:]:
            v = getattr(v, a)
    except Exception:  # noqa: BLE001 -- a property may raise anything
        return None
    if len(path) == 1 and not (v is None or isinstance(v, (bool, int, float, str))):
        return None
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _assert_texts(fn: Callable) -> Dict[int, Tuple[int, int, str, Tuple[_Read, ...]]]:
    """The asserts of ``fn``'s source: ``{line: (first line, last line, test
    text, reads)}`` for every line an assert statement spans ({} without
    source); ``reads`` as :func:`_reads`."""
    try:
        lines, first = inspect.getsourcelines(fn)
        source = textwrap.dedent("".join(lines))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError):
        return {}
    out: Dict[int, Tuple[int, int, str, Tuple[_Read, ...]]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            text = ast.get_source_segment(source, node.test) or ast.unparse(node.test)
            text = " ".join(text.split())  # one line: continuation lines joined
            lo = node.lineno + first - 1
            hi = (node.end_lineno or node.lineno) + first - 1
            for ln in range(lo, hi + 1):
                out.setdefault(ln, (lo, hi, text, _reads(node.test)))
    return out


class Rule:
    """A rule of ``pattern``: ``name``, ``fn`` (the user function),
    ``params`` (the pattern parameters it takes), ``takes_context`` (it has a
    ``ctx`` parameter) and ``where`` (file:line). Calling it calls the
    function."""

    def __init__(self, pattern: Pattern, fn: Callable):
        self.pattern = pattern
        self.fn = fn
        self.interior = "duplicate"  # set by @pm.rule(..., interior=...)
        #: whether the replacement may stand in a training graph (autograd
        #: derives its backward): ``@pm.rule(..., differentiable=True)``;
        #: None when the rule does not say (the Inductor pass then asks its
        #: own table, :data:`pypm_verified.torch.inductor.DIFFERENTIABLE`)
        self.differentiable: Optional[bool] = None
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
        self._codes = frozenset({fn.__code__, self._run.__code__})
        self._asserts: Optional[Dict[int, tuple]] = None  # parsed on the first decline

    @property
    def codes(self) -> FrozenSet:
        """The code objects that run the rule's body: the original function,
        its compiled body and, when a tool swapped the body for a callable
        wrapper, the wrapper's ``__code__`` / ``codes``."""
        run = self._run
        extra = set(getattr(run, "codes", ()))
        code = getattr(run, "__code__", None)
        if code is not None:
            extra.add(code)
        return self._codes | extra

    def decline(self, error: AssertionError) -> Decline:
        """The :class:`Decline` for ``error``, an AssertionError raised while
        the rule ran: the innermost line of the rule's body on its traceback
        (the failing assert, or the call that raised it) and that assert's
        source text."""
        codes = self.codes
        line, frame, tb = None, None, error.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code in codes:
                line, frame = tb.tb_lineno, tb.tb_frame
            tb = tb.tb_next
        filename = self.fn.__code__.co_filename
        message = str(error).strip().splitlines()[0] if str(error).strip() else None
        if line is None:
            return Decline(self, filename, None, None,
                           "an AssertionError outside the rule's body", message, is_assert=False)
        if self._asserts is None:
            self._asserts = _assert_texts(self.fn)
        hit = self._asserts.get(line)
        if hit is None:  # raised by a function the body called, not by an assert of its own
            return Decline(self, filename, line, line,
                           f"an AssertionError raised below line {line}", message,
                           is_assert=False)
        lo, hi, text, reads = hit
        f_locals = frame.f_locals
        seen = tuple((e, v) for e, v in ((e, _show(path, f_locals)) for e, path in reads)
                     if v is not None)
        return Decline(self, filename, lo, hi, text, message, seen=seen)

    def with_body(self, run: Callable) -> "Rule":
        """A copy of this rule whose body is ``run`` (same name, parameters
        and pattern; not registered with the pattern): a variant for tools,
        e.g. the rule checker's body with one assert dropped, or a wrapper
        that observes the body."""
        r = copy.copy(self)
        r._run = run
        return r

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

    def fire(self, values: Mapping[str, object], builder, context=None, *,
             on_decline: Optional[Callable[[Decline], None]] = None):
        """Run the rule on the bound ``values`` with operator calls built by
        ``builder``: its result (the replacement), or None when one of its
        assertions fails -- then ``on_decline``, if given, is called with the
        :class:`Decline` saying which. Other exceptions propagate."""
        kwargs = self.arguments(values, context)
        try:
            with building_in(builder):
                return self._run(**kwargs)
        except AssertionError as e:
            if on_decline is not None:
                try:
                    d = self.decline(e)
                except Exception as bug:  # noqa: BLE001 -- explaining must not stop a rewrite
                    d = Decline(self, self.fn.__code__.co_filename, None, None,
                                f"an assertion failed (not located: {type(bug).__name__})",
                                is_assert=False)
                on_decline(d)
            return None


#: What a rule does with a match whose interior nodes are used outside it
#: (``@pm.rule(P, interior=...)``; :mod:`pypm_verified.rewriting.legality`).
INTERIOR_POLICIES = ("duplicate", "relay", "refuse")


def rule(pattern: Pattern, *, interior: str = "duplicate",
         differentiable: Optional[bool] = None):
    """Declare a rule of ``pattern``: ``@pm.rule(MMxyT)``. Rules are tried in
    definition order; re-executing a ``def`` replaces its earlier rule.

    ``interior`` says what ``pm.rewrite`` (on a ``pm.Graph``) and the
    PyTorch driver do when a node the match covers, other than its root, is
    also used outside the match (:mod:`pypm_verified.rewriting.legality`,
    :mod:`pypm_verified.torch.legality`): ``"duplicate"`` (the default)
    fires anyway -- the outside user keeps that node, the replacement
    computes it again; ``"relay"`` fires only if every such outside user
    flows into the root (Relay's check), ``"refuse"`` never fires then.

    ``differentiable``: whether the replacement is differentiable (torch
    has an autograd formula for every op it emits), so that the rule may
    fire in a training graph under the Inductor pass
    (:func:`pypm_verified.inductor_pass`); ``check-rules`` then also
    compares the gradients of the original and the replacement. None (the
    default): not declared (the pass fires a rule it does not know only in
    inference)."""
    if not isinstance(pattern, Pattern):
        raise PatternError(f"@pm.rule takes a @pm.pattern, not {pattern!r}")
    if interior not in INTERIOR_POLICIES:
        raise PatternError(f"@pm.rule(interior={interior!r}): expected one of "
                           f"{INTERIOR_POLICIES}")
    if differentiable is not None and not isinstance(differentiable, bool):
        raise PatternError(f"@pm.rule(differentiable={differentiable!r}): expected True, "
                           "False or None")

    def decorate(fn: Callable) -> Rule:
        if not inspect.isfunction(fn):
            raise PatternError(f"@pm.rule decorates a function, not {fn!r}")
        r = Rule(pattern, fn)
        r.interior = interior
        r.differentiable = differentiable
        for i, old in enumerate(pattern.rules):
            if old.fn.__code__ is fn.__code__:
                pattern.rules[i] = r
                break
        else:
            pattern.rules.append(r)
        return r

    return decorate
