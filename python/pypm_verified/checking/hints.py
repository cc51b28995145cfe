"""What a rule's source says about the values it expects.

The instance generator (:mod:`.instances`) draws constants and chooses
between a tensor and a Python number for a pattern variable; a rule's
asserts are Python, opaque to the generator, but their *literals* are
plain to read. :func:`rule_hints` reads the rule body (and, one level deep,
the module-level helpers it calls):

* ``consts[v]``: constants (not None) that appear next to parameter ``v`` in a call or
  a comparison, likeliest first (innermost expression first): ``_is(h, 0.5)``
  gives ``h: [0.5]``, ``eps.value >= 0`` gives ``eps: [0]``,
  ``{"none": ..., "tanh": ...}.get(approx.value)`` gives ``approx: ["none",
  "tanh", ...]``; an expression of literals and ``math`` calls
  (``math.sqrt(2.0 / math.pi)``) is evaluated;
* ``const_leaning`` / ``tensor_leaning``: parameters the rule reads
  ``.value``/``.is_const`` of (directly or through a helper that does), or
  ``.shape``/``.rank``/``.dtype``/... of;
* ``ranks`` and ``sizes``: the rank and size equations of the rule's
  asserts (``assert w.rank == 1 and w.shape[0] == x.shape[-1]``), which
  the generator makes true in most draws (sizes tied before they are
  drawn);
* a bound (``eps.value > 0``) hints values on its right side first
  (``1e-05``, ``0.5``, then the bound itself), and ``isinstance(v.value,
  float)`` makes ``v``'s whole-number hints floats.

These only bias the random choices; the rule's asserts still decide (the
generator also draws values the hints do not name, so that guards are
exercised both ways).
"""
from __future__ import annotations

import ast
import builtins
import inspect
import math
import textwrap
import types
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple

__all__ = ["RuleHints", "rule_hints"]

_CONST_ATTRS = {"value", "is_const"}
_TENSOR_ATTRS = {"shape", "rank", "dtype", "torch_dtype", "device", "fx", "elType", "meta"}
_SAFE_CALLS = {"float", "int", "abs", "min", "max", "pow", "round"}


@dataclass
class RuleHints:
    """Hints read from a rule's source (see the module docstring)."""

    consts: Dict[str, List[object]] = field(default_factory=dict)
    const_leaning: Set[str] = field(default_factory=set)
    tensor_leaning: Set[str] = field(default_factory=set)
    #: (assert line, parameter, rank) of ``assert v.rank == r``
    ranks: List[Tuple[int, str, int]] = field(default_factory=list)
    #: (assert line, lhs, rhs) of ``assert v.shape[i] == u.shape[j]`` (or
    #: ``== c``): each side ``("shape", name, i)`` or ``("const", c)``
    sizes: List[Tuple[int, tuple, tuple]] = field(default_factory=list)
    #: (assert line, ("shape", name, i), values) of ``assert v.shape[i] in (64,
    #: 128)`` or of a bound ``v.shape[i] >= c`` / ``> c`` (values: the four
    #: sizes from the bound up): a size the rule admits only there
    size_choices: List[Tuple[int, tuple, Tuple[int, ...]]] = field(default_factory=list)

    def p_const(self, name: str) -> float:
        """Probability of drawing a Python number (not a tensor) for ``name``
        where both are possible."""
        c, t = name in self.const_leaning, name in self.tensor_leaning
        if c and not t:
            return 0.85
        if c and t:
            return 0.4
        if t:
            return 0.1
        return 0.3


def _source_tree(fn):
    try:
        src = textwrap.dedent(inspect.getsource(fn))
        return ast.parse(src)
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None


def _names(node) -> Set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _evaluable(node, g, params) -> bool:
    """Literals, arithmetic, containers and calls of ``math`` functions or a
    few builtins over module-level names that are not rule parameters."""
    for n in ast.walk(node):
        if isinstance(n, (ast.Constant, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop,
                          ast.Load, ast.Tuple, ast.List, ast.Set, ast.Dict)):
            continue
        if isinstance(n, ast.Name):
            if n.id in params or (n.id not in g and not hasattr(builtins, n.id)):
                return False
            continue
        if isinstance(n, ast.Attribute):
            base = n.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if not isinstance(base, ast.Name) or not isinstance(g.get(base.id), types.ModuleType):
                return False
            continue
        if isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Name) and f.id in _SAFE_CALLS and f.id not in g:
                continue
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                    and g.get(f.value.id) is math:
                continue
            return False
        return False
    return not isinstance(node, ast.Name) or not isinstance(g.get(node.id), types.ModuleType)


def _flatten(v, out: list) -> None:
    if isinstance(v, dict):
        for k, x in v.items():
            _flatten(k, out)
            _flatten(x, out)
    elif isinstance(v, (list, tuple, set, frozenset)):
        for x in v:
            _flatten(x, out)
    else:
        out.append(v)


def _constants(node, g, params) -> list:
    """Values of the maximal evaluable sub-expressions of ``node``, in source order."""
    out: list = []

    def visit(n):
        if _evaluable(n, g, params) and not isinstance(n, (ast.Load, ast.operator,
                                                           ast.unaryop)):
            try:
                v = eval(compile(ast.Expression(body=n), "<hint>", "eval"),  # noqa: S307
                         dict(g))
            except Exception:  # noqa: BLE001 -- a hint only
                return
            _flatten(v, out)
            return
        for c in ast.iter_child_nodes(n):
            visit(c)
    for c in ast.iter_child_nodes(node):
        visit(c)
    return out


def _reads_const(fn) -> bool:
    """Whether a helper function reads ``.value`` or ``.is_const`` of anything."""
    tree = _source_tree(fn)
    return tree is not None and any(
        isinstance(n, ast.Attribute) and n.attr in _CONST_ATTRS for n in ast.walk(tree))


def _size(node) -> int:
    return sum(1 for _ in ast.walk(node))


def _int(node) -> Optional[int]:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) \
            and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _int(node.operand)
        return -v if v is not None else None
    return None


_ARITH = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul"}


def _size_side(node, params) -> Optional[tuple]:
    """``("shape", v, i)`` for ``v.shape[i]``, ``("rank", v)`` for
    ``v.rank``, ``("const", c)`` for an int literal, ``("add"|"sub"|"mul",
    l, r)`` for their sums, differences and products, ``("shapes", v)`` for
    ``v``'s whole shape (``tuple(v.shape)``); else None."""
    c = _int(node)
    if c is not None:
        return ("const", c)
    whole = _whole_shape(node, params)
    if whole is not None:
        return ("shapes", whole)
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
        l, r = _size_side(node.left, params), _size_side(node.right, params)
        if l is None or r is None or {"rank", "shapes"} & {l[0], r[0]}:
            return None
        return (_ARITH[type(node.op)], l, r)
    if isinstance(node, ast.Attribute) and node.attr == "rank" \
            and isinstance(node.value, ast.Name) and node.value.id in params:
        return ("rank", node.value.id)
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) \
            and node.value.attr == "shape" and isinstance(node.value.value, ast.Name) \
            and node.value.value.id in params:
        i = _int(node.slice)
        if i is not None:
            return ("shape", node.value.value.id, i)
    return None


def _whole_shape(node, params) -> Optional[str]:
    """``v`` for ``v.shape``, ``tuple(v.shape)`` or ``list(v.shape)``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id in ("tuple", "list") and len(node.args) == 1 and not node.keywords:
        node = node.args[0]
    if isinstance(node, ast.Attribute) and node.attr == "shape" \
            and isinstance(node.value, ast.Name) and node.value.id in params:
        return node.value.id
    return None


def _size_equations(tree, params, hints: RuleHints) -> None:
    """The rank and size equations of the asserts (their conjuncts)."""
    for a in ast.walk(tree):
        if not isinstance(a, ast.Assert):
            continue
        parts = a.test.values if isinstance(a.test, ast.BoolOp) and isinstance(
            a.test.op, ast.And) else [a.test]
        pairs = []
        for part in parts:  # a chain a == b == c is a == b and b == c
            if isinstance(part, ast.Compare) and all(isinstance(o, ast.Eq) for o in part.ops):
                sides = [part.left, *part.comparators]
                pairs += list(zip(sides, sides[1:]))
            elif isinstance(part, ast.Compare) and len(part.ops) == 1:
                _size_choice(a.lineno, part, params, hints)
        for left, right in pairs:
            lhs = _size_side(left, params)
            rhs = _size_side(right, params)
            if lhs is None or rhs is None:
                continue
            for x, y in ((lhs, rhs), (rhs, lhs)):
                if x[0] == "rank" and y[0] == "const":
                    hints.ranks.append((a.lineno, x[1], y[1]))
            if lhs[0] == "shapes" or rhs[0] == "shapes":  # whole shapes: equal axis by axis
                if lhs[0] == rhs[0]:
                    hints.sizes.append((a.lineno, lhs, rhs))
                continue
            if "rank" not in (lhs[0], rhs[0]) and (_has_shape(lhs) or _has_shape(rhs)):
                hints.sizes.append((a.lineno, lhs, rhs))


def _size_choice(line: int, part: ast.Compare, params, hints: RuleHints) -> None:
    """``v.shape[i] in (c1, c2, ...)``, ``v.shape[i] >= c`` or ``> c`` (and
    ``c <= v.shape[i]``, ``c < v.shape[i]``): the sizes the rule admits there."""
    op, left, right = part.ops[0], part.left, part.comparators[0]
    if isinstance(op, (ast.LtE, ast.Lt)):  # c <= v.shape[i]: v.shape[i] >= c
        op, left, right = (ast.GtE() if isinstance(op, ast.LtE) else ast.Gt()), right, left
    side = _size_side(left, params)
    if side is None or side[0] != "shape":
        return
    if isinstance(op, ast.In) and isinstance(right, (ast.Tuple, ast.List, ast.Set)):
        vals = tuple(v for v in (_int(e) for e in right.elts) if v is not None and 1 <= v <= 4096)
        if vals and len(vals) == len(right.elts):
            hints.size_choices.append((line, side, vals))
        return
    c = _int(right)
    if c is None or not isinstance(op, (ast.GtE, ast.Gt)):
        return
    low = max(1, c + (1 if isinstance(op, ast.Gt) else 0))
    if low <= 4096:
        hints.size_choices.append((line, side, tuple(range(low, low + 4))))


def _has_shape(x: tuple) -> bool:
    """Whether a size side reads a size (``v.shape[i]``)."""
    if x[0] == "shape":
        return True
    return x[0] in _ARITH.values() and (_has_shape(x[1]) or _has_shape(x[2]))


def _floats(tree, params) -> Set[str]:
    """Parameters the rule asks to be floats: ``isinstance(v.value, float)``."""
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) \
                and n.func.id == "isinstance" and len(n.args) == 2:
            v, t = n.args
            names = {x.id for x in ast.walk(t) if isinstance(x, ast.Name)}
            if isinstance(v, ast.Attribute) and v.attr == "value" \
                    and isinstance(v.value, ast.Name) and v.value.id in params \
                    and "float" in names and "int" not in names:
                out.add(v.value.id)
    return out


_ORDER = (ast.Gt, ast.GtE, ast.Lt, ast.LtE)


def _bound_values(n, consts: list) -> list:
    """A comparison ``v.value <op> c`` (or ``c <op> v.value``) with one
    numeric ``c``: values on the side the comparison accepts first, then
    ``c`` (for ``<=``/``>=``: ``c`` first, it is accepted); for ``!=``:
    ``c`` (the edge the rule excludes) then values near it."""
    if not (isinstance(n, ast.Compare) and len(n.ops) == 1
            and isinstance(n.ops[0], _ORDER + (ast.NotEq,))):
        return consts
    nums = [c for c in consts if isinstance(c, (int, float)) and not isinstance(c, bool)]
    if len(nums) != 1 or not math.isfinite(nums[0]) or not any(
            isinstance(x, ast.Attribute) and x.attr == "value" for x in ast.walk(n)):
        return consts  # a bound on a value (not on a rank or a size)
    c = nums[0]
    if isinstance(n.ops[0], ast.NotEq):
        return [c] + [float(c + 1e-05), float(c + 0.5)] + [x for x in consts if x is not c]
    const_left = not (_names(n.left))  # ``0 < v``: the constant on the left
    op = n.ops[0]
    above = isinstance(op, (ast.Gt, ast.GtE)) != const_left
    strict = isinstance(op, (ast.Gt, ast.Lt))
    near = [c + 1e-05, c + 0.5] if above else [c - 0.5, c - 1e-05]
    near = [float(x) for x in near]
    return (near + [c] if strict else [c] + near) + [x for x in consts if x is not c]


def _neg_zero(c) -> bool:
    return type(c) is float and c == 0 and math.copysign(1.0, c) < 0


def _same(c, h) -> bool:
    """The same hint: of one type and equal, -0.0 apart from 0.0."""
    return type(c) is type(h) and c == h and _neg_zero(c) == _neg_zero(h)


def rule_hints(rule) -> RuleHints:
    """The :class:`RuleHints` of ``rule`` (a :class:`pypm_verified.dsl.rules.Rule`);
    empty when its source cannot be read."""
    fn = getattr(rule, "fn", None)
    hints = RuleHints()
    tree = _source_tree(fn) if fn is not None else None
    if tree is None:
        return hints
    params = set(getattr(rule, "params", ()))
    g = fn.__globals__
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) \
                and n.value.id in params:
            if n.attr in _CONST_ATTRS:
                hints.const_leaning.add(n.value.id)
            elif n.attr in _TENSOR_ATTRS:
                hints.tensor_leaning.add(n.value.id)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            helper = g.get(n.func.id)
            if isinstance(helper, types.FunctionType) and _reads_const(helper):
                for a in n.args:
                    if isinstance(a, ast.Name) and a.id in params:
                        hints.const_leaning.add(a.id)
    # constants next to a parameter, innermost expression first
    sites = [n for n in ast.walk(tree) if isinstance(n, (ast.Call, ast.Compare))]
    sites.sort(key=_size)
    for n in sites:
        vs = _names(n) & params
        if not vs:
            continue
        consts = [c for c in _constants(n, g, params)
                  if isinstance(c, (bool, int, float, str))
                  or type(c).__name__ in ("DType", "dtype")]
        consts = _bound_values(n, consts)
        for v in sorted(vs):
            have = hints.consts.setdefault(v, [])
            for c in consts:
                if not any(_same(c, h) for h in have):
                    have.append(c)
    for v in _floats(tree, params):
        if v in hints.consts:
            fl: list = []
            for c in hints.consts[v]:
                c = float(c) if isinstance(c, int) and not isinstance(c, bool) else c
                if not any(_same(c, h) for h in fl):
                    fl.append(c)
            hints.consts[v] = fl
    _size_equations(tree, params, hints)
    return hints
