"""Loading a ``.pt2`` someone else wrote without running code from it.

``torch.export.load`` (torch 2.13) runs code a file names in several ways;
each is closed here, so that a ``.pt2`` is data, whatever it holds:

* **pickles**: the sample inputs (``data/sample_inputs/*.pt``) are
  unpickled with ``weights_only=True`` and, when that fails, *again with
  the full unpickler* (``weights_only=False``); pickled weights and
  constants get the full unpickler at once; "opaque" constants get
  ``pickle.loads``, TorchScript objects their unpickler. Under
  :func:`guarded` every ``torch.load`` of the load is forced to
  ``weights_only=True`` (tensors and plain containers only), and
  ``pickle.loads`` / ``torch._C._pickle_load_obj`` are refused; a part that
  needs more is a :attr:`Guard.refused` (the loader's ``NeedsPickle``),
  unless the caller opted in (``allow_pickle``).
* **size expressions**: each ``expr_str`` is parsed with ``sympy.sympify``,
  which *evaluates* its text as Python (``__import__('os').system(...)``
  runs). :func:`check_program` accepts only the expressions torch writes
  (sympy's ``srepr`` of integer size arithmetic, or its ``str``), checked on
  their syntax tree; ``sympy.sympify`` is guarded during the load too.
* **guards**: ``guards_code`` is ``exec``\\ uted by ``ep.module()``; only
  comparisons and arithmetic of input sizes are accepted.
* **names**: node, argument and input names are pasted into the Python
  source FX generates for ``ep.module()`` (``def forward(self, <name>)``),
  and parameter/buffer names into ``getattr(self, "<name>")``; names must be
  identifiers, and qualified names free of quotes, backslashes and control
  characters.
* **imports**: a pytree type (``"type": "somemod.Out"``), an enum
  (``{"__enum__": ..., "fqn": "somemod:E"}``) or a ``defaultdict`` factory
  named in a tree spec makes torch (or the loader) import that module, and
  ``python -m`` puts the working directory on ``sys.path``. The loader
  imports only the known libraries (``loader.TYPE_PACKAGES``,
  ``loader.OP_LIBRARIES``) and the modules the user names (``--import``);
  :func:`check_program` lists the others, and under :func:`guarded`
  ``importlib.import_module`` refuses a module that is neither imported yet
  nor part of torch.

The checks accept every program torch writes (``tests/test_untrusted.py``
runs them on static, dynamic-shape and rewritten programs); they refuse a
file crafted to run code, with one line saying what was found.
"""
from __future__ import annotations

import ast
import builtins
import contextlib
import functools
import importlib
import importlib.util
import json
import math
import os
import pickle
import re
import sys
import threading
from dataclasses import dataclass, field
from typing import Iterator, List, Optional, Set, Tuple

import torch

# ------------------------------------------------------------------ names

_BAD_IN_NAME = re.compile(r"[\"'\\\x00-\x1f\x7f]")

#: keys whose value is a name FX pastes into generated source as it is
_IDENT_KEYS = frozenset({"name", "as_name", "user_input_name"})
#: keys whose value is a qualified name (``"layers.0.weight"``) or an operator
_QUALIFIED_KEYS = frozenset({"parameter_name", "buffer_name", "tensor_constant_name",
                             "custom_obj_name", "fqn", "class_fqn", "target", "as_operator"})
#: keys of maps whose keys are node names
_NAME_MAPS = frozenset({"tensor_values", "sym_int_values", "sym_bool_values",
                        "sym_float_values", "custom_obj_values"})


def _short(s: str, n: int = 60) -> str:
    return repr(s if len(s) <= n else s[:n] + "...")


def _ident_problem(s, what: str) -> Optional[str]:
    if s is None:
        return None
    if not isinstance(s, str) or not s.isidentifier():
        return f"{what} {_short(str(s))} is not a Python identifier"
    return None


def _qualified_problem(s, what: str) -> Optional[str]:
    if s is None:
        return None
    if not isinstance(s, str) or _BAD_IN_NAME.search(s):
        return f"{what} {_short(str(s))} holds a quote, a backslash or a control character"
    return None


def _arg_name_problem(s) -> Optional[str]:
    if isinstance(s, str) and s.lstrip("*").isidentifier() and len(s) - len(s.lstrip("*")) <= 2:
        return None
    return f"forward argument name {_short(str(s))} is not a Python identifier"


# ------------------------------------------------------------------ size expressions

def _sympy_call_names() -> frozenset:
    import torch.utils._sympy.functions as F
    core = {"Symbol", "Dummy", "Integer", "Rational", "Float", "Add", "Mul", "Pow", "Mod",
            "Max", "Min", "Abs", "floor", "ceiling", "sqrt", "sign", "exp", "log",
            "Eq", "Ne", "Lt", "Le", "Gt", "Ge", "Equality", "Unequality", "StrictLessThan",
            "StrictGreaterThan", "LessThan", "GreaterThan", "And", "Or", "Not", "Xor",
            "Piecewise", "ExprCondPair", "Tuple", "IntInfinity", "NegativeIntInfinity",
            "Infinity", "NegativeInfinity", "NaN", "ComplexInfinity", "BooleanTrue",
            "BooleanFalse", "Half", "One", "Zero", "NegativeOne"}
    return frozenset(core | set(getattr(F, "__all__", ())))


_SYM_CONSTANTS = frozenset({"oo", "zoo", "nan", "pi", "E", "I", "true", "false",
                            "int_oo"})
_SYM_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow,
               ast.BitAnd, ast.BitOr, ast.BitXor, ast.LShift, ast.RShift)
_SYM_UNARY = (ast.USub, ast.UAdd, ast.Not, ast.Invert)
_SYM_CMP = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_SYMBOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_NUMBER_TEXT = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?(/\d+)?\Z")
_BUILTIN_NAMES = frozenset(dir(builtins))


@functools.lru_cache(maxsize=None)
def _sympy_namespace() -> frozenset:
    import sympy
    return frozenset(n for n in dir(sympy) if not n.startswith("_"))


def _expression(text):
    """``text`` parsed as one Python expression (never run), or why it is not one."""
    if not isinstance(text, str):
        return "not a string"
    if len(text) > 100_000:
        return "longer than 100000 characters"
    try:
        return ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return "not an expression"


@functools.lru_cache(maxsize=4096)
def sym_expr_problem(text: str) -> Optional[str]:
    """None when ``text`` is a size expression as torch writes it (sympy's
    ``srepr`` or ``str`` of integer arithmetic on symbols: ``Mul(Integer(2),
    Symbol('s77', positive=True, integer=True))``, ``2*s0 + 1``,
    ``FloorDiv(s0, 2)``); otherwise why not. ``sympy.sympify`` evaluates its
    text as Python, so nothing else may reach it."""
    tree = _expression(text)
    if isinstance(tree, str):
        return tree
    calls = _sympy_call_names()
    sympy_names = _sympy_namespace()

    def name_ok(n: str) -> bool:
        if n.startswith("__") or n in _BUILTIN_NAMES:
            return False
        if n in _SYM_CONSTANTS or n in calls:
            return True
        return n not in sympy_names  # a free symbol (s0, u1, ...)

    def str_arg_ok(fn: str, i: int, v: str) -> bool:
        if fn in ("Symbol", "Dummy") and i == 0:
            return bool(_SYMBOL_NAME.match(v))
        if fn in ("Float", "Integer", "Rational"):
            return bool(_NUMBER_TEXT.match(v.strip()))
        return False

    def first(nodes, depth) -> Optional[str]:
        """The first reason one of ``nodes`` is refused, or None."""
        for x in nodes:
            why = walk(x, depth)
            if why:
                return why
        return None

    def walk(node, depth=0) -> Optional[str]:
        if depth > 200:
            return "nested too deeply"
        if isinstance(node, ast.Expression):
            return walk(node.body, depth + 1)
        if isinstance(node, ast.Constant):
            if isinstance(node.value, (bool, int, float)) or node.value is None:
                return None
            return f"a constant {_short(repr(node.value), 30)} outside Symbol/Float"
        if isinstance(node, ast.Name):
            return None if name_ok(node.id) else f"the name {node.id!r}"
        if isinstance(node, ast.BinOp):
            if not isinstance(node.op, _SYM_BINOPS):
                return f"the operator {type(node.op).__name__}"
            return walk(node.left, depth + 1) or walk(node.right, depth + 1)
        if isinstance(node, ast.UnaryOp):
            if not isinstance(node.op, _SYM_UNARY):
                return f"the operator {type(node.op).__name__}"
            return walk(node.operand, depth + 1)
        if isinstance(node, ast.Compare):
            if not all(isinstance(o, _SYM_CMP) for o in node.ops):
                return "a comparison other than ==, !=, <, <=, >, >="
            return first([node.left] + node.comparators, depth + 1)
        if isinstance(node, ast.BoolOp):
            return first(node.values, depth + 1)
        if isinstance(node, ast.Tuple):
            return first(node.elts, depth + 1)
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in calls:
                what = node.func.id if isinstance(node.func, ast.Name) else "an expression"
                return f"a call of {what}"
            fn = node.func.id
            for i, a in enumerate(node.args):
                if isinstance(a, ast.Constant) and isinstance(a.value, str):
                    if not str_arg_ok(fn, i, a.value):
                        return f"the text {_short(a.value, 30)} given to {fn}"
                    continue
                why = walk(a, depth + 1)
                if why:
                    return why
            for k in node.keywords:
                if k.arg is None or k.arg.startswith("_"):
                    return f"keyword arguments of {fn}"
                v = k.value
                if not (isinstance(v, ast.Constant) and (isinstance(v.value, (bool, int))
                                                         or v.value is None)):
                    return f"the keyword argument {k.arg} of {fn}"
            return None
        return f"a {type(node).__name__}"

    why = walk(tree) or magnitude_problem(tree)
    return None if why is None else f"it contains {why}"


# ------------------------------------------------------------------ magnitudes

#: the largest integer (in bits) a size expression or a guard may compute,
#: taking each input size as a 64-bit integer; what torch writes stays far
#: below (sizes, strides and their products), and ``10**10**10`` (or
#: ``1 << 10**10``, ``math.factorial(10**6)``) is refused instead of computed
MAX_INT_BITS = 4096
_SIZE_BITS = 64
#: functions whose result can outgrow their arguments without bound
_HUGE_FUNCTIONS = frozenset({"factorial", "factorial2", "comb", "perm", "prod", "lcm",
                             "binomial", "RisingFactorial", "FallingFactorial", "fibonacci",
                             "lucas", "subfactorial", "primorial", "bell", "catalan"})
_POWER_FUNCTIONS = frozenset({"Pow", "pow", "PowByNatural", "FloatPow"})
_SHIFT_FUNCTIONS = frozenset({"LShift"})
_SUM_FUNCTIONS = frozenset({"Mul"})


def _callee_name(f) -> str:
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        return f.attr
    return ""


def _number_text_bits(text: str) -> int:
    """Bits of the integer part of a number's text (``'1e999'``: ~3320)."""
    import decimal
    try:
        d = decimal.Decimal(text.strip().split("/")[0])
    except (decimal.InvalidOperation, ValueError):
        return MAX_INT_BITS + 1
    if not d.is_finite() or d == 0:
        return 1
    return max(1, int((d.adjusted() + 1) * 3.33) + 1)


def _literal(node) -> Optional[float]:
    """The value of a number written as a literal (``3``, ``-2``,
    ``Integer(3)``, ``Rational(1, 2)``, ``Float('0.5')``), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (bool, int, float)):
        return float(node.value) if abs(node.value) < 1e300 else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _literal(node.operand)
        return None if v is None else (-v if isinstance(node.op, ast.USub) else v)
    if isinstance(node, ast.Name):
        return {"Half": 0.5, "One": 1.0, "Zero": 0.0, "NegativeOne": -1.0}.get(node.id)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords \
            and node.func.id in ("Integer", "Float", "Rational", "int", "float"):
        vals = []
        for a in node.args:
            if isinstance(a, ast.Constant) and isinstance(a.value, str):
                if _number_text_bits(a.value) > 64:
                    return None
                try:
                    num, _, den = a.value.strip().partition("/")
                    vals.append(float(num) / (float(den) if den else 1.0))
                except (ValueError, ZeroDivisionError):
                    return None
            else:
                v = _literal(a)
                if v is None:
                    return None
                vals.append(v)
        if len(vals) == 1:
            return vals[0]
        if len(vals) == 2 and vals[1] != 0:
            return vals[0] / vals[1]
    return None


def magnitude_problem(tree) -> Optional[str]:
    """None when every integer the expression ``tree`` (a parsed size
    expression or guard) can compute fits in :data:`MAX_INT_BITS` bits,
    each input size taken as a 64-bit integer; otherwise what would
    outgrow it. An exponent or a shift must be a literal then (``s0**2``,
    ``Pow(s0, Integer(2))``, ``x << 3``): ``10**10**10`` would make sympy or
    Python compute for ever."""
    problem: List[str] = []

    def too_big(what: str) -> int:
        if not problem:
            problem.append(what)
        return MAX_INT_BITS + 1

    def check(b: int, node) -> int:
        if b > MAX_INT_BITS:
            text = ast.unparse(node) if hasattr(ast, "unparse") else type(node).__name__
            return too_big(f"{_short(text, 40)} may be an integer of more than "
                           f"{MAX_INT_BITS} bits")
        return b

    def power(base, exp, node) -> int:
        e = _literal(exp)
        if e is None:
            return too_big("an exponent that is not a literal number "
                           f"({_short(ast.unparse(exp), 30)})")
        return check(bits(base) * max(1, math.ceil(abs(e))), node)

    def shift(base, amount, node) -> int:
        e = _literal(amount)
        if e is None:
            return too_big("a shift by an amount that is not a literal number")
        return check(bits(base) + max(0, math.ceil(e)), node)

    def widest(nodes) -> int:
        nodes = list(nodes)
        if not nodes:
            return 1
        return max(bits(n) for n in nodes) + max(0, len(nodes) - 1).bit_length()

    def bits(node) -> int:
        if problem:
            return MAX_INT_BITS + 1
        if isinstance(node, ast.Expression):
            return bits(node.body)
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, bool) or v is None:
                return 1
            if isinstance(v, int):
                return check(max(1, v.bit_length()), node)
            if isinstance(v, float):
                return check(max(1, int(math.log2(abs(v))) + 1) if math.isfinite(v) and v
                             else 1, node)
            if isinstance(v, str):
                return check(_number_text_bits(v) if _NUMBER_TEXT.match(v.strip()) else 1,
                             node)
            return 1
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.Pow):
                return power(node.left, node.right, node)
            if isinstance(node.op, ast.LShift):
                return shift(node.left, node.right, node)
            if isinstance(node.op, ast.Mult):
                return check(bits(node.left) + bits(node.right), node)
            if isinstance(node.op, (ast.RShift, ast.Div, ast.FloorDiv, ast.Mod, ast.BitAnd)):
                bits(node.right)
                return bits(node.left)
            return check(max(bits(node.left), bits(node.right)) + 1, node)
        if isinstance(node, ast.UnaryOp):
            return bits(node.operand) + 1
        if isinstance(node, (ast.Compare, ast.BoolOp)):
            kids = [node.left] + node.comparators if isinstance(node, ast.Compare) \
                else node.values
            for k in kids:
                bits(k)
            return 1
        if isinstance(node, ast.IfExp):
            bits(node.test)
            return max(bits(node.body), bits(node.orelse))
        if isinstance(node, ast.Tuple):
            return max([bits(e) for e in node.elts] or [1])
        if isinstance(node, ast.Call):
            fn = _callee_name(node.func)
            args = list(node.args)
            if fn in _HUGE_FUNCTIONS:
                return too_big(f"a call of {fn}")
            for k in node.keywords:  # Float(..., precision=53): a precision in bits
                v = _literal(k.value)
                if v is None or abs(v) > MAX_INT_BITS:
                    return too_big(f"the keyword argument {k.arg} of {fn}")
            if fn in ("Symbol", "Dummy"):
                return _SIZE_BITS
            if fn == "Float" and len(args) > 1:  # Float(text, digits)
                v = _literal(args[1])
                if v is None or abs(v) > MAX_INT_BITS:
                    return too_big("a Float's precision")
            if fn in ("Integer", "Float", "Rational") and args:
                return check(max(bits(a) for a in args), node)
            if fn in _POWER_FUNCTIONS:
                if len(args) == 3 and fn == "pow":  # modular: bounded by the modulus
                    bits(args[0]), bits(args[1])
                    return bits(args[2])
                if len(args) != 2:
                    return too_big(f"a call of {fn} with {len(args)} arguments")
                return power(args[0], args[1], node)
            if fn in _SHIFT_FUNCTIONS and len(args) == 2:
                return shift(args[0], args[1], node)
            if fn in _SUM_FUNCTIONS:
                return check(sum(bits(a) for a in args), node)
            if isinstance(node.func, ast.Attribute) and fn in _GUARD_ATTRS:
                return _SIZE_BITS  # x.size(), x.numel(), ...
            return check(widest(args), node)
        if isinstance(node, (ast.Name, ast.Subscript, ast.Attribute)):
            return _SIZE_BITS  # a size, a stride, a symbol, a constant such as oo
        return 1

    bits(tree)
    return problem[0] if problem else None


# ------------------------------------------------------------------ guards

_GUARD_ATTRS = frozenset({"size", "stride", "storage_offset", "dim", "numel", "shape"})
#: Python builtins torch's guard printer uses (``max(1, L['x'].size()[1] // 20)``)
_GUARD_BUILTINS = frozenset({"max", "min", "abs", "int", "float", "round", "bool", "pow"})


@functools.lru_cache(maxsize=1)
def _guard_names() -> frozenset:
    from torch.fx.experimental.symbolic_shapes import SYMPY_INTERP
    return frozenset(set(SYMPY_INTERP) - {"torch", "math"} | _sympy_call_names()
                     | _GUARD_BUILTINS | {"L", "inf"})


@functools.lru_cache(maxsize=4096)
def guard_problem(text: str) -> Optional[str]:
    """None when ``text`` is a guard as torch writes it in ``guards_code``
    (``L['y'].size()[0] == (2*L['x'].size()[0])``: comparisons and
    arithmetic of input sizes, strides and the functions of torch's sympy
    interpreter); otherwise why not. ``ep.module()`` ``exec``\\ s it."""
    tree = _expression(text)
    if isinstance(tree, str):
        return tree
    names = _guard_names()

    def callee_ok(f) -> bool:
        if isinstance(f, ast.Name):
            return f.id in names
        if isinstance(f, ast.Attribute):
            if isinstance(f.value, ast.Name) and f.value.id == "math":
                return not f.attr.startswith("_") and hasattr(math, f.attr)
            if isinstance(f.value, ast.Name) and f.value.id == "torch":
                return f.attr.startswith("sym_")
            return f.attr in _GUARD_ATTRS and walk(f.value, 1) is None
        return False

    def walk(node, depth=0) -> Optional[str]:
        if depth > 200:
            return "nested too deeply"
        if isinstance(node, ast.Expression):
            return walk(node.body, depth + 1)
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, (bool, int, float)) or v is None:
                return None
            # a string only as an input's key, L['x'] (below): a sympy
            # function given a string would parse it as Python
            return f"the constant {_short(repr(v), 30)}"
        if isinstance(node, ast.Name):
            return None if node.id in names else f"the name {node.id!r}"
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "math" \
                    and not node.attr.startswith("_") and hasattr(math, node.attr):
                return None
            if node.attr in _GUARD_ATTRS:
                return walk(node.value, depth + 1)
            return f"the attribute {node.attr!r}"
        if isinstance(node, ast.Subscript):
            key = node.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                if _BAD_IN_NAME.search(key.value):
                    return f"the key {_short(repr(key.value), 30)}"
                return walk(node.value, depth + 1)
            return walk(node.value, depth + 1) or walk(key, depth + 1)
        if isinstance(node, ast.BinOp):
            if not isinstance(node.op, _SYM_BINOPS):
                return f"the operator {type(node.op).__name__}"
            return walk(node.left, depth + 1) or walk(node.right, depth + 1)
        if isinstance(node, ast.UnaryOp):
            if not isinstance(node.op, _SYM_UNARY):
                return f"the operator {type(node.op).__name__}"
            return walk(node.operand, depth + 1)
        if isinstance(node, (ast.Compare, ast.BoolOp, ast.Tuple, ast.IfExp)):
            kids = ([node.left] + node.comparators if isinstance(node, ast.Compare) else
                    node.values if isinstance(node, ast.BoolOp) else
                    node.elts if isinstance(node, ast.Tuple) else
                    [node.test, node.body, node.orelse])
            if isinstance(node, ast.Compare) and not all(isinstance(o, _SYM_CMP)
                                                         for o in node.ops):
                return "a comparison other than ==, !=, <, <=, >, >="
            for x in kids:
                why = walk(x, depth + 1)
                if why:
                    return why
            return None
        if isinstance(node, ast.Call):
            if not callee_ok(node.func) or node.keywords:
                return "a call of " + (ast.unparse(node.func)[:40] if hasattr(ast, "unparse")
                                       else "a function")
            for a in node.args:
                why = walk(a, depth + 1)
                if why:
                    return why
            return None
        return f"a {type(node).__name__}"

    why = walk(tree) or magnitude_problem(tree)
    return None if why is None else f"it contains {why}"


# ------------------------------------------------------------------ tree specs

@dataclass
class Scan:
    """What :func:`check_program` found in a program's JSON: ``types``
    (pytree type names its tree specs use), ``ops`` (operator names),
    ``modules`` (modules its tree specs name for torch to import: an enum's,
    a ``defaultdict``'s factory) and ``problems`` (what no file torch
    writes holds, one line each; the first is reported)."""

    types: Set[str] = field(default_factory=set)
    ops: Set[str] = field(default_factory=set)
    modules: Set[str] = field(default_factory=set)
    problems: List[str] = field(default_factory=list)


#: how deep a tree spec may nest (torch writes one level per container of
#: the inputs or outputs; it reads them recursively, one frame or more a level)
MAX_TREESPEC_DEPTH = 200


def _treespec(text: str, scan: Scan) -> None:
    """Read a serialized tree spec (JSON in a JSON string)."""
    try:
        doc = json.loads(text)
    except ValueError:
        return  # torch refuses it too, with its own message
    except RecursionError:
        scan.problems.append("a tree spec is nested deeper than Python's JSON parser goes")
        return
    stack = [(doc, 0)]
    while stack:
        x, depth = stack.pop()
        if depth > MAX_TREESPEC_DEPTH:
            scan.problems.append(f"a tree spec is nested deeper than {MAX_TREESPEC_DEPTH} "
                                 "levels (torch reads it recursively)")
            return
        if isinstance(x, dict):
            ty = x.get("type")
            if isinstance(ty, str) and "children_spec" in x:
                scan.types.add(ty)
            ctx = x.get("context")
            if isinstance(ctx, str):
                try:
                    c = json.loads(ctx)
                except ValueError:
                    c = None
                except RecursionError:
                    scan.problems.append("a tree spec's context is nested deeper than "
                                         "Python's JSON parser goes")
                    return
                _context(c, scan)
            elif ctx is not None:
                _context(ctx, scan)
            stack.extend((v, depth + 1) for k, v in x.items() if k != "context")
        elif isinstance(x, list):
            stack.extend((v, depth) for v in x)


def _context(c, scan: Scan) -> None:
    """A tree spec node's context: the modules it names (an enum's
    ``fqn``, a defaultdict's factory module) and its keys (pasted into
    the guards' error message)."""
    stack = [c]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            if "__enum__" in x:
                fqn = x.get("fqn")
                if isinstance(fqn, str):
                    scan.modules.add(fqn.partition(":")[0])
            mod = x.get("default_factory_module")
            if isinstance(mod, str):
                scan.modules.add(mod)
            for k in x:
                why = _qualified_problem(k, "a key in a tree spec")
                if why:
                    scan.problems.append(why)
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
        elif isinstance(x, str):
            why = _qualified_problem(x, "a key in a tree spec")
            if why:
                scan.problems.append(why)


def check_program(doc, scan: Optional[Scan] = None, where: str = "") -> Scan:
    """Walk a program's JSON (``models/<name>.json``): collect the pytree
    types, operators and modules it needs, and every problem (a name or an
    expression no file torch writes holds; see the module docs)."""
    scan = scan if scan is not None else Scan()
    if isinstance(doc, dict):
        gc = doc.get("guards_code")
        for g in gc if isinstance(gc, list) else ():
            why = guard_problem(g)
            if why:
                scan.problems.append(f"a guard{where} is not one torch writes ({why}): "
                                     f"{_short(str(g))}")
    stack = [doc]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            for k, v in x.items():
                if k == "metadata" or k == "guards_code":
                    continue  # free text (stack traces), or checked above
                why = None
                if k in _IDENT_KEYS:
                    why = _ident_problem(v, "the name")
                elif k in _QUALIFIED_KEYS:
                    why = _qualified_problem(v, "the name")
                    if k == "target" and isinstance(v, str) and v.startswith("torch.ops."):
                        scan.ops.add(v)
                elif k in _NAME_MAPS and isinstance(v, dict):
                    why = next(filter(None, (_ident_problem(n, "the name") for n in v)), None)
                elif k == "forward_arg_names" and isinstance(v, list):
                    why = next(filter(None, (_arg_name_problem(n) for n in v)), None)
                elif k == "expr_str":
                    p = sym_expr_problem(v)
                    if p:
                        why = (f"a size expression is not one torch writes ({p}): "
                               f"{_short(str(v))}")
                elif k in ("in_spec", "out_spec") and isinstance(v, str):
                    _treespec(v, scan)
                if why:
                    scan.problems.append(why + where)
                if isinstance(v, str) and v[:1] == "[" and '"children_spec"' in v \
                        and k not in ("in_spec", "out_spec"):
                    _treespec(v, scan)
                elif isinstance(v, (dict, list)):
                    stack.append(v)
        elif isinstance(x, list):
            stack.extend(x)
    return scan


def check_payload_config(doc, where: str = "") -> List[str]:
    """Problems of a weights or constants config (``*_config.json``): its
    keys are qualified names."""
    cfg = doc.get("config") if isinstance(doc, dict) else None
    if not isinstance(cfg, dict):
        return []
    return [why + where for why in (_qualified_problem(k, "the name") for k in cfg) if why]


# ------------------------------------------------------------------ unpickled data

#: objects the safe unpickler may build for one pickled part
MAX_UNPICKLED_OBJECTS = 1_000_000


def unpickled_problem(obj) -> Optional[str]:
    """None when ``obj`` (what the safe unpickler built: sample inputs,
    ``--example-inputs``) is a tree torch can walk: no non-empty container
    reached twice (memo references make a DAG of 100 pickled tuples expand
    to 2^100 leaves when flattened), at most :data:`MAX_TREESPEC_DEPTH`
    deep, at most :data:`MAX_UNPICKLED_OBJECTS` objects; otherwise what it
    is instead."""
    seen: Set[int] = set()
    stack = [(obj, 0)]
    count = 0
    while stack:
        x, depth = stack.pop()
        count += 1
        if count > MAX_UNPICKLED_OBJECTS:
            return f"more than {MAX_UNPICKLED_OBJECTS} objects"
        if not isinstance(x, (list, tuple, dict, set, frozenset)) or not x:
            continue
        if depth >= MAX_TREESPEC_DEPTH:
            return f"containers nested more than {MAX_TREESPEC_DEPTH} deep"
        if id(x) in seen:
            return ("a container reached twice (a shared structure that expands when "
                    "traversed)")
        seen.add(id(x))
        items = [v for kv in x.items() for v in kv] if isinstance(x, dict) else list(x)
        stack.extend((v, depth + 1) for v in items)
    return None


# ------------------------------------------------------------------ the guard

@dataclass
class Guard:
    """What :func:`guarded` refused during a load: ``refused`` (a pickled
    part that needs the full unpickler: what it names, e.g. ``posix.system``,
    or what kind of object it is), ``structure`` (what the safe unpickler
    built is not a tree torch can walk: :func:`unpickled_problem`),
    ``expression`` (a size expression refused), ``module`` (a module torch
    was about to import)."""

    allow_pickle: bool = False
    refused: Optional[str] = None
    structure: Optional[str] = None
    expression: Optional[str] = None
    module: Optional[str] = None


class Refused(Exception):
    """Raised inside torch's loader by the guards; the load is then reported
    from :class:`Guard` (torch may catch it, the guard remembers)."""


_local = threading.local()
_install_lock = threading.RLock()
_installed = [0]
_saved: dict = {}



def _after_fork_in_child() -> None:
    """A child forked while another thread was inside :func:`guarded` would
    inherit a held lock (its holder does not exist there): make a new one,
    and take the wrappers out when no guard of the child's own is active."""
    global _install_lock
    _install_lock = threading.RLock()
    if _current() is None and _installed[0]:
        for obj, attr, real in _saved.values():
            setattr(obj, attr, real)
        _saved.clear()
        _installed[0] = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

_GLOBAL = re.compile(r"GLOBAL ([\w.]+)")


def global_named(e: BaseException) -> Optional[str]:
    """The global a refused ``weights_only`` unpickling names
    (``posix.system``, ``torch.nn.modules.linear.Linear``), if torch says."""
    m = _GLOBAL.search(str(e))
    return m.group(1) if m else None


def _current() -> Optional[Guard]:
    return getattr(_local, "guard", None)


def _torch_load(real):
    @functools.wraps(real)
    def load(f, *args, **kwargs):
        g = _current()
        if g is None or g.allow_pickle:
            return real(f, *args, **kwargs)
        args = args[:1]  # map_location; never a pickle_module of the caller's
        kwargs.pop("pickle_module", None)
        kwargs["weights_only"] = True
        try:
            obj = real(f, *args, **kwargs)
        except pickle.UnpicklingError as e:
            g.refused = g.refused or global_named(e) or "an object the safe unpickler refuses"
            raise Refused(f"refused: needs the full unpickler ({g.refused})") from None
        why = unpickled_problem(obj)
        if why:
            g.structure = g.structure or why
            raise Refused(f"refused: a pickled part holds {why}")
        return obj
    return load


def _refuse_unpickler(real, what: str):
    @functools.wraps(real)
    def load(*args, **kwargs):
        g = _current()
        if g is None or g.allow_pickle:
            return real(*args, **kwargs)
        g.refused = g.refused or what
        raise Refused(f"refused: {what} needs the full unpickler")
    return load


def _sympify(real):
    @functools.wraps(real)
    def sympify(a, *args, **kwargs):
        g = _current()
        if g is not None and isinstance(a, str):
            why = sym_expr_problem(a)
            if why:
                g.expression = g.expression or f"{_short(a)} ({why})"
                raise Refused(f"refused: the size expression {_short(a)}")
        return real(a, *args, **kwargs)
    return sympify


#: top-level packages torch's loader may import on its own during a guarded load
_IMPORTABLE = frozenset({"torch", "sympy", "mpmath"})


def _import_module(real):
    @functools.wraps(real)
    def import_module(name, package=None):
        g = _current()
        if g is not None:
            try:
                full = importlib.util.resolve_name(name, package) if name.startswith(".") \
                    else name
            except (ImportError, ValueError, AttributeError):
                full = name
            if full not in sys.modules and full.split(".")[0] not in _IMPORTABLE:
                g.module = g.module or full
                raise Refused(f"refused: importing {full}")
        return real(name, package)
    return import_module


def _targets() -> List[Tuple[object, str, object]]:
    import sympy
    import torch.export.pt2_archive._package as package
    out = [(torch, "load", _torch_load), (sympy, "sympify", _sympify),
           (importlib, "import_module", _import_module)]
    if hasattr(package, "pickle"):
        out.append((package.pickle, "loads",
                    lambda real: _refuse_unpickler(real, "a pickled Python object constant")))
    if hasattr(torch._C, "_pickle_load_obj"):
        out.append((torch._C, "_pickle_load_obj",
                    lambda real: _refuse_unpickler(real, "a TorchScript object constant")))
    return out


@contextlib.contextmanager
def guarded(allow_pickle: bool = False) -> Iterator[Guard]:
    """For the duration, on this thread only: every ``torch.load`` is
    ``weights_only=True`` and ``pickle.loads`` (of torch's archive reader)
    and ``torch._C._pickle_load_obj`` are refused (unless ``allow_pickle``);
    ``sympy.sympify`` takes only size expressions (:func:`sym_expr_problem`);
    ``importlib.import_module`` only modules already imported or torch's.
    Yields the :class:`Guard` recording what was refused. Other threads
    are not affected (the wrappers pass their calls through)."""
    g = Guard(allow_pickle=allow_pickle)
    with _install_lock:
        if _installed[0] == 0:
            for obj, attr, wrap in _targets():
                real = getattr(obj, attr)
                _saved[(id(obj), attr)] = (obj, attr, real)
                setattr(obj, attr, wrap(real))
        _installed[0] += 1
        outer = _current()
        _local.guard = g
        try:
            yield g
        finally:
            _local.guard = outer
            _installed[0] -= 1
            if _installed[0] == 0:
                for obj, attr, real in _saved.values():
                    setattr(obj, attr, real)
                _saved.clear()
