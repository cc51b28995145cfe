"""Relay's dataflow-pattern features (TVM, "Pattern Matching in Relay") as
sugar over the existing calculus.

Everything here builds terms of the calculus of ``theories/Syntax.v`` --
alternates, guards, ∃ binders, operator variables, match constraints -- so
what the matchers prove about those holds for these patterns unchanged; no
new pattern form is added. The one feature that is *not* expressible in the
calculus, :func:`dominates`, is a checker of its own, proved in
``theories/Dominates.v`` (:mod:`pypm_verified.engines.dominates`).

=====================  =============================================  ==============
Relay                  here                                           lowered to
=====================  =============================================  ==============
``wildcard()``         ``pm.wildcard()``                              a local ``∃w. w``
``is_constant()``      ``pm.is_constant()``                           ``∃F. F() ; guard(F.op_class = constant)``
``is_expr(const(v))``  ``pm.is_constant(v)`` or the literal ``v``     the constant leaf ``v``
``is_var()``           ``pm.is_input()``                              ``∃F. F() ; guard(F.op_class = input)``
``p.optional(f)``      ``pm.optional(p, f)`` / ``p.optional(f)``      ``f(p) ‖ p``
commutative add/mul    ``@pm.op(commutative=True)``, ``pm.commute``   ``f(a, b) ‖ f(b, a)``
``p.has_attr({k: v})`` ``pm.has_attr(p, k=v)`` / ``p.has_attr(k=v)``  ``p ; (v ≈ x)`` or the literal
``is_tuple``           ``pm.is_tuple(a, b, ...)``                     ``Tuple<n>(a, b, ...)``
``is_tuple_get_item``  ``pm.getitem(t, i)``                           ``GetItem(t, i)``
``dominates(P, I, C)`` ``pm.dominates(P, I, C)``                      ``Dominates.dom_result``
=====================  =============================================  ==============
"""
from __future__ import annotations

import inspect
import operator as _operator
from typing import Callable, Dict, Optional

from .. import core
from ..core import symbols
from ..core.symbols import opclass
from ..errors import PatternError
from .symbolic import SymTerm, Var, as_pattern, var
from .trace import FUN, OptionIR, Unlocated, current

__all__ = ["wildcard", "is_constant", "is_input", "optional", "commute", "has_attr",
           "getitem", "is_tuple", "tuple_op", "GetItem", "MAX_COMMUTATIVE",
           "CONSTANT_CLASS", "INPUT_CLASS"]

#: At most this many commutative applications in one alternate: each doubles
#: the orders the search may try (2^8 = 256 at worst, bench/bench_relay.py).
MAX_COMMUTATIVE = 8

#: The operator classes of leaves (``Graph.sym_attr``): constant leaves and inputs.
CONSTANT_CLASS = "constant"
INPUT_CLASS = "input"


def _trace():
    return current()


# ------------------------------------------------------------------ leaves


def wildcard() -> Var:
    """Any node (Relay's ``wildcard()``): a local term variable, not reported
    in the bindings. Used twice, it is the same node both times (as a Relay
    wildcard object used twice)."""
    v = var()
    v.sym.name = f"_wildcard{len(_trace().locals) - 1}"  # renamed by an assignment
    return v


def _leaf_of_class(name: str, text: str) -> SymTerm:
    trace = _trace()
    F = trace.scoped(FUN, 0, name="_leaf")
    test = core.GEq(core.EFAttr(F, core.OPCLASS), core.EConst(opclass(name).code))
    return SymTerm(core.PExistsF(F, core.PGuard(core.PFunVar(F, ()), test)), text)


def is_constant(*value) -> SymTerm:
    """``pm.is_constant()``: any constant leaf (a literal of the graph: in a
    ``pm.Graph`` a ``graph.const``, in a PyTorch program a non-tensor
    argument such as a dim or a scalar); ``pm.is_constant(v)``: the constant
    ``v`` (the same as writing the literal ``v`` as an argument)."""
    if len(value) > 1:
        raise Unlocated("pm.is_constant() takes at most one value")
    if value:
        v = value[0]
        if not symbols.is_constant(v):
            raise Unlocated(f"pm.is_constant({v!r}): not a constant (int, float, bool, str, "
                            "None, a dtype, or a list/tuple of these)")
        return SymTerm(core.PApp(symbols.const_symbol(v), ()), repr(v))
    return _leaf_of_class(CONSTANT_CLASS, "is_constant()")


def is_input() -> SymTerm:
    """Any input leaf (Relay's ``is_var()``): a graph input, or in a PyTorch
    program a placeholder (user input, parameter or buffer)."""
    return _leaf_of_class(INPUT_CLASS, "is_input()")


# ---------------------------------------------------------------- optional


def optional(p, option: Callable, *args) -> SymTerm:
    """``option(p, *args) ‖ p`` (Relay's ``p.optional(option)``): ``option``
    is an operator (``pm.optional(conv, BiasAdd, b)`` is ``BiasAdd(conv, b)
    ‖ conv``; ``pm.optional(x, Add, bias)`` is "``x`` plus an optional
    bias") or a function from terms to a term defined outside the pattern
    body (bodies cannot hold lambdas). The longer form is tried first
    (Relay tries ``p`` first; with a variable ``p`` that would never reach
    the option). Variables bound only in the option are unbound when it is
    absent: a rule receives ``None`` for them. A wildcard or ``pm.var()``
    used only inside the option is local to it (bound by an ∃ around the
    option); one also used outside it is a local of the whole alternate,
    the same node in the option and in its other uses
    (:mod:`.lowering` decides which, knowing every use)."""
    base = as_pattern(p, "pm.optional", 0)
    opt = option(p, *args)
    if not isinstance(opt, SymTerm):
        raise Unlocated(f"pm.optional: the option returned {opt!r}, not a pattern term")
    text = getattr(p, "text", repr(p))
    return SymTerm(OptionIR(opt.core, base), f"optional({text}, {opt.text})")


# ------------------------------------------------------------- commutative


def commute(term, i: int = 0, j: int = 1) -> SymTerm:
    """``f(.., a_i, .., a_j, ..) ‖ f(.., a_j, .., a_i, ..)``: the application
    ``term`` with arguments ``i`` and ``j`` in either order (what
    ``@pm.op(commutative=...)`` does at every application of the operator).
    Identical arguments are not swapped. At most :data:`MAX_COMMUTATIVE`
    per alternate: ``k`` of them make at most ``2^k`` orders to try."""
    if not isinstance(term, SymTerm) or not isinstance(term.core, core.PApp):
        raise Unlocated(f"pm.commute takes an operator application, not {term!r}")
    p = term.core
    n = len(p.args)
    if not (0 <= i < n and 0 <= j < n and i != j):
        raise Unlocated(f"pm.commute: positions ({i}, {j}) are not two distinct arguments "
                        f"of {term!r}")
    if p.args[i] == p.args[j]:
        return term
    trace = _trace()
    trace.commuted += 1
    if trace.commuted > MAX_COMMUTATIVE:
        raise Unlocated(
            f"more than {MAX_COMMUTATIVE} commutative applications in one alternate "
            f"(each doubles the argument orders the matcher may try: 2^{trace.commuted}); "
            "split the pattern into patterns that call each other, or fix an order")
    args = list(p.args)
    args[i], args[j] = args[j], args[i]
    return SymTerm(core.PAlt(p, core.PApp(p.f, tuple(args))), term.text)


# -------------------------------------------------------------- attributes


def _param_index(o, name: str) -> int:
    try:
        params = list(inspect.signature(o.fn).parameters)
    except (TypeError, ValueError):
        params = []
    if name not in params:
        raise Unlocated(f"has_attr: operator {o.name} has no argument {name!r} "
                        f"(its arguments: {', '.join(params)})")
    return params.index(name)


def _with_attr(p, name: str, value, text: str, op=None):
    """The application ``p`` (possibly commuted, or constrained by earlier
    attributes) with its argument ``name`` the constant ``value``: a
    variable or wildcard there gets a match constraint, after the earlier
    ones; ``pm.is_constant()`` there is replaced by the constant."""
    if isinstance(p, core.PAlt):  # a commuted application: both orders
        return core.PAlt(_with_attr(p.p1, name, value, text, op),
                         _with_attr(p.p2, name, value, text, op))
    constraints = []
    while isinstance(p, core.PConstr):  # earlier attributes': (app ; (v1 ≈ x1)) ; ...
        constraints.insert(0, (p.p2, p.x))
        p = p.p
    if not isinstance(p, core.PApp) or not hasattr(symbols.lookup(p.f), "fn"):
        raise Unlocated(f"has_attr applies to an operator application, not {text}")
    k = _param_index(op if op is not None else symbols.lookup(p.f), name)
    lit = core.PApp(symbols.const_symbol(value), ())
    arg = p.args[k]
    if isinstance(arg, core.PVar):
        # the variable stays bound (to the constant leaf); the constraint checks it
        constraints.append((lit, arg.x))
    elif isinstance(arg, core.PApp) and not arg.args:
        if arg != lit:
            raise Unlocated(f"has_attr({name}={value!r}): argument {name!r} of {text} is "
                            f"already the constant {symbols.describe(arg.f)}")
    elif isinstance(arg, core.PExistsF):  # pm.is_constant(): the constant is more specific
        p = core.PApp(p.f, p.args[:k] + (lit,) + p.args[k + 1:])
    else:
        raise Unlocated(f"has_attr({name}={value!r}): argument {name!r} of {text} is a "
                        "pattern, not a variable or wildcard")
    for q, x in constraints:
        p = core.PConstr(p, q, x)
    return p


def has_attr(term, **attrs) -> SymTerm:
    """``term`` whose operator's argument ``k`` is the constant ``v`` for each
    ``k=v`` (Relay's ``has_attr``): operator attributes -- a softmax's dim, a
    conv's layout -- are constant arguments in this project's graphs (the
    PyTorch importer passes every non-tensor argument as a constant leaf,
    named by the schema). An argument written as a variable or a wildcard
    stays bound (to the constant leaf: a match constraint checks it);
    ``pm.is_constant()`` is replaced by the constant. Any number of
    attributes, in one call or in chained calls, each constrain their own
    argument: ``t.has_attr(a=1, b=2)`` is ``t.has_attr(a=1).has_attr(b=2)``."""
    if not isinstance(term, SymTerm):
        raise Unlocated(f"has_attr applies to a pattern term, not {term!r}")
    p = term.core
    op = getattr(term, "op", None)  # an operator's application: its own parameter names
    for k, v in attrs.items():
        if not symbols.is_constant(v):
            raise Unlocated(f"has_attr({k}={v!r}): not a constant value")
        p = _with_attr(p, k, v, term.text, op)
    shown = ", ".join(f"{k}={v!r}" for k, v in attrs.items())
    text = f"{term.text}.has_attr({shown})"
    if op is not None:
        from .operators import OpTerm
        return OpTerm(p, text, op)
    return SymTerm(p, text)


# ------------------------------------------------------------------ tuples


def _generic_fn(name: str, params) -> Callable:
    ns: Dict[str, object] = {}
    exec(f"def {name}({', '.join(params)}):\n    return 1\n", ns)  # noqa: S102
    return ns[name]


_tuple_ops: Dict[int, object] = {}
_GETITEM = None


def tuple_op(n: int):
    """The operator of tuples of ``n`` elements (``Tuple3``); build one in a
    graph with ``graph.apply(pm.tuple_op(2), a, b)``."""
    from .operators import Op
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise PatternError(f"tuple_op: n must be an int >= 0, not {n!r}")
    o = _tuple_ops.get(n)
    if o is None:
        o = _tuple_ops[n] = Op(_generic_fn(f"Tuple{n}", [f"e{i}" for i in range(n)]))
    return o


def _getitem_op():
    global _GETITEM
    if _GETITEM is None:
        from .operators import Op
        _GETITEM = Op(_generic_fn("GetItem", ["tup", "index"]))
    return _GETITEM


def GetItem():  # noqa: N802 -- the operator, as a function so the module stays lazy
    """The DSL's ``GetItem(tuple, index)`` operator (graphs: ``graph.apply(
    pm.GetItem(), t, 0)``)."""
    return _getitem_op()


def is_tuple(*items) -> SymTerm:
    """A tuple of ``len(items)`` elements matching ``items`` (Relay's
    ``is_tuple``)."""
    return tuple_op(len(items))(*items)


def getitem(tup, index: Optional[int] = None) -> SymTerm:
    """Element ``index`` of the multi-output term ``tup`` (Relay's
    ``is_tuple_get_item``; ``index=None``: any element). In a PyTorch
    program (``tup`` applies an operator bound to torch targets, e.g.
    ``Split``) this is the importer's ``GetItem`` (``operator.getitem``),
    elsewhere the DSL's. An index beyond a declared output arity (``@pm.op``
    returning ``n > 1``) is an error."""
    if not isinstance(tup, SymTerm):
        raise Unlocated(f"getitem takes a pattern term, not {tup!r}")
    getter = _getitem_op()
    p = tup.core
    root = getattr(tup, "op", None) or (symbols.lookup(p.f) if isinstance(p, core.PApp) else None)
    if getattr(root, "torch_targets", ()):
        from .torch_labels import label_for  # imports torch: root is bound to torch targets
        getter = label_for(_operator.getitem)
    elif root is not None and index is not None and getattr(root, "n_outputs", 1) > 1 \
            and not 0 <= index < root.n_outputs:
        raise Unlocated(f"getitem: {root.name} has {root.n_outputs} outputs, no index {index}")
    if index is None:
        return getter(tup, wildcard())
    if not isinstance(index, int) or isinstance(index, bool):
        raise Unlocated(f"getitem: the index must be an int or None, not {index!r}")
    return getter(tup, index)


# --------------------------------------------------------- methods on terms


def _optional_method(self, option, *args):
    return optional(self, option, *args)


def _has_attr_method(self, **attrs):
    return has_attr(self, **attrs)


SymTerm.optional = _optional_method
SymTerm.has_attr = _has_attr_method
