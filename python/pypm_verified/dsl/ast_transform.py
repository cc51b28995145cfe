"""AST transformation of pattern and rule bodies (paper §2.4).

A ``@pm.pattern`` function is re-parsed from its source and rewritten so its
guards and constraints can be traced symbolically:

* ``assert e``            -> ``__pm_assert__(e, lineno)``
* ``a and b``             -> ``__pm_and__(a, lambda: b)``  (likewise ``or``)
* ``not a``               -> ``__pm_not__(a)``
* ``a < b <= c``          -> ``__pm_chain__(a, ('<', '<='), (lambda: b, lambda: c))``
* ``return e``            -> ``return __pm_ret__(e)``
* ``x <= p`` (a statement) -> ``__pm_constrain__(x, p, lineno)`` (a match
  constraint; ``<=`` anywhere else stays a comparison)
* ``name = e``            -> ``name = __pm_name__('name', e)`` (names locals)

Python constructs that cannot be traced (branches, loops, comprehensions, …)
are rejected with a located :class:`PatternError`. A pattern whose source
cannot be read (the REPL, standard input) is traced as Python runs it
(:class:`Sourceless`), with the subset its bytecode shows unambiguously. A ``@pm.rule`` function
is plain Python; only its ``assert`` statements are rewritten (into
``if not e: raise AssertionError``) so that ``python -O`` cannot remove the
conditions that decide whether the rule fires. Rewritten functions are
compiled with the original file name and line numbers, run against the
original module globals, and share the original closure cells.
"""
from __future__ import annotations

import ast
import dis
import inspect
import textwrap
import types
from typing import Callable, Dict, FrozenSet, Tuple

from ..errors import PatternError

HELPERS = ("__pm_assert__", "__pm_and__", "__pm_or__", "__pm_not__", "__pm_chain__",
           "__pm_ret__", "__pm_constrain__", "__pm_name__")

_FORBIDDEN = {
    ast.If: "if statement",
    ast.IfExp: "conditional expression (a if c else b)",
    ast.For: "for loop",
    ast.AsyncFor: "async for loop",
    ast.While: "while loop",
    ast.Try: "try statement",
    ast.With: "with statement",
    ast.AsyncWith: "async with statement",
    ast.Lambda: "lambda",
    ast.ListComp: "list comprehension",
    ast.SetComp: "set comprehension",
    ast.DictComp: "dict comprehension",
    ast.GeneratorExp: "generator expression",
    ast.Yield: "yield",
    ast.YieldFrom: "yield from",
    ast.Await: "await",
    ast.FunctionDef: "nested function definition",
    ast.AsyncFunctionDef: "nested function definition",
    ast.ClassDef: "class definition",
    ast.Global: "global statement",
    ast.Nonlocal: "nonlocal statement",
    ast.NamedExpr: "assignment expression (:=)",
    ast.Match: "match statement",
}
if hasattr(ast, "TryStar"):  # Python 3.11+
    _FORBIDDEN[ast.TryStar] = "try statement"

_CMP_OPS = {
    ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
    ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in",
}


def _name(helper: str, node: ast.AST) -> ast.Name:
    return ast.copy_location(ast.Name(id=helper, ctx=ast.Load()), node)


def _thunk(body: ast.expr) -> ast.Lambda:
    args = ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[],
                         kw_defaults=[], kwarg=None, defaults=[])
    return ast.copy_location(ast.Lambda(args=args, body=body), body)


def _call(helper: str, node: ast.AST, args) -> ast.Call:
    return ast.copy_location(ast.Call(func=_name(helper, node), args=list(args), keywords=[]),
                             node)


class _Rewriter(ast.NodeTransformer):
    def visit_Assert(self, node: ast.Assert):
        test = self.visit(node.test)
        call = _call("__pm_assert__", node, [test, ast.Constant(node.lineno)])
        return ast.copy_location(ast.Expr(value=call), node)

    def visit_BoolOp(self, node: ast.BoolOp):
        helper = "__pm_and__" if isinstance(node.op, ast.And) else "__pm_or__"
        values = [self.visit(v) for v in node.values]
        acc = values[-1]
        for v in reversed(values[:-1]):
            acc = _call(helper, v, [v, _thunk(acc)])
        return acc

    def visit_UnaryOp(self, node: ast.UnaryOp):
        if isinstance(node.op, ast.Not):
            return _call("__pm_not__", node, [self.visit(node.operand)])
        return self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare):
        if len(node.ops) == 1:
            return self.generic_visit(node)
        left = self.visit(node.left)
        ops = ast.copy_location(
            ast.Tuple(elts=[ast.Constant(_CMP_OPS[type(o)]) for o in node.ops], ctx=ast.Load()),
            node)
        thunks = ast.copy_location(
            ast.Tuple(elts=[_thunk(self.visit(c)) for c in node.comparators], ctx=ast.Load()),
            node)
        return _call("__pm_chain__", node, [left, ops, thunks])

    def visit_Return(self, node: ast.Return):
        value = self.visit(node.value) if node.value is not None else ast.copy_location(
            ast.Constant(None), node)
        return ast.copy_location(ast.Return(value=_call("__pm_ret__", node, [value])), node)

    def visit_Expr(self, node: ast.Expr):
        v = node.value
        if isinstance(v, ast.Compare) and len(v.ops) == 1 and isinstance(v.ops[0], ast.LtE):
            call = _call("__pm_constrain__", node, [self.visit(v.left),
                                                    self.visit(v.comparators[0]),
                                                    ast.Constant(node.lineno)])
            return ast.copy_location(ast.Expr(value=call), node)
        return self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign):
        node = self.generic_visit(node)
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            node.value = _call("__pm_name__", node, [ast.Constant(node.targets[0].id), node.value])
        return node


class _RuleAsserts(ast.NodeTransformer):
    """``assert e, m`` -> ``if not e: raise AssertionError(m)``."""

    def visit_Assert(self, node: ast.Assert):
        args = [node.msg] if node.msg is not None else []
        exc = ast.Call(func=ast.Name(id="AssertionError", ctx=ast.Load()), args=args, keywords=[])
        raise_ = ast.copy_location(ast.Raise(exc=exc, cause=None), node)
        test = ast.UnaryOp(op=ast.Not(), operand=node.test)
        return ast.copy_location(ast.If(test=test, body=[raise_], orelse=[]), node)


def code_objects(code: types.CodeType) -> FrozenSet[types.CodeType]:
    """``code`` and every code object nested in it (lambdas, inner functions):
    what a traceback frame of the function can be running."""
    out, stack = set(), [code]
    while stack:
        c = stack.pop()
        out.add(c)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return frozenset(out)


class Compiled:
    """A rewritten pattern function.

    ``make(helpers)`` builds the function with the given helper
    implementations; ``codes`` holds its code objects (for locating errors);
    ``filename`` / ``lineno`` locate the ``def``.
    """

    def __init__(self, code: types.CodeType, fn: Callable, filename: str, lineno: int):
        self.code = code
        self.fn = fn
        self.filename = filename
        self.lineno = lineno
        self.codes = code_objects(code)

    def make(self, helpers: Dict[str, Callable]) -> Callable:
        orig = self.fn.__code__.co_freevars
        cells = []
        for name in self.code.co_freevars:
            if name in helpers:
                cells.append(types.CellType(helpers[name]))
            else:
                cells.append(self.fn.__closure__[orig.index(name)])
        made = types.FunctionType(self.code, self.fn.__globals__, self.fn.__name__,
                                  self.fn.__defaults__, tuple(cells))
        made.__kwdefaults__ = self.fn.__kwdefaults__
        return made


class NoSource(PatternError):
    """The function's source cannot be read (defined in the REPL, from
    standard input or with ``exec``)."""


class Sourceless:
    """A pattern function whose source cannot be read, traced as Python runs
    it (the same interface as :class:`Compiled`). Without the AST rewrite
    only what the bytecode shows unambiguously is supported: ``assert g`` and
    ``assert not g`` for a guard ``g`` (combine guards with ``&``, ``|``,
    ``~``), ``x <= p`` as a statement, ``return p``; ``and``/``or``/``not``
    or ``if`` on guards and chained comparisons are refused, naming the
    construct (see :func:`guard_use` and :func:`constraint_use`)."""

    sourceless = True

    def __init__(self, fn: Callable):
        self.fn = fn
        self.code = fn.__code__
        self.filename = fn.__code__.co_filename
        self.lineno = fn.__code__.co_firstlineno
        self.codes = code_objects(fn.__code__)

    def make(self, helpers: Dict[str, Callable]) -> Callable:
        return self.fn


def _instructions_at(frame):
    ins = list(dis.get_instructions(frame.f_code))
    for i, x in enumerate(ins):
        if x.offset == frame.f_lasti:
            return x, ins[i + 1:i + 3]
    return None, []


def guard_use(frame) -> str:
    """How the bytecode of ``frame`` uses the truth value it is asking for:
    "assert" (``assert g``), "assert not" (``assert not g``) or a description
    of another use (``and``/``or``/``not``/``if``, a chained comparison)."""
    cur, nxt = _instructions_at(frame)
    if cur is not None and nxt and nxt[0].opname == "LOAD_ASSERTION_ERROR":
        if "IF_TRUE" in cur.opname:
            return "assert"
        if "IF_FALSE" in cur.opname:
            return "assert not"
    if cur is not None and "OR_POP" in cur.opname:
        return "`and`/`or` or a chained comparison"
    return "`and`/`or`/`not`, `if` or a truth test"


def constraint_use(frame) -> bool:
    """Whether the comparison ``frame`` is executing is a statement of its
    own (its result discarded): ``x <= p`` as a match constraint."""
    cur, nxt = _instructions_at(frame)
    return cur is not None and cur.opname == "COMPARE_OP" and bool(nxt) \
        and nxt[0].opname == "POP_TOP"


def parse_function(fn: Callable, what: str, name: str):
    """``(fndef, filename, fail)``: the ``def`` of ``fn`` parsed from its source
    with its file's line numbers (``what``/``name`` for messages; ``fail(line,
    problem)`` raises a located PatternError). Raises :class:`NoSource`."""
    filename = fn.__code__.co_filename
    first = fn.__code__.co_firstlineno

    def fail(line, problem):
        raise PatternError(f"{what} {name!r} ({filename}:{line}): {problem}")

    try:
        source = textwrap.dedent(inspect.getsource(fn))
        tree = ast.parse(source, filename=filename)
    except (OSError, TypeError, SyntaxError) as e:
        raise NoSource(f"{what} {name!r} ({filename}:{first}): cannot read its source "
                       f"({e})") from None
    ast.increment_lineno(tree, first - 1)
    fndefs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if len(fndefs) != 1 or fndefs[0].name != fn.__name__:
        fail(first, f"the source of a {what} must be a single def statement")
    fndef = fndefs[0]
    if isinstance(fndef, ast.AsyncFunctionDef):
        fail(fndef.lineno, f"unsupported Python construct in a {what} body: async def")
    return fndef, filename, fail


def _compile(fn: Callable, fndef: ast.FunctionDef, filename: str, helpers) -> "Compiled":
    """Compile the rewritten ``fndef`` inside a factory whose parameters are the
    helpers and the original free variables (so both become closure cells)."""
    fndef.decorator_list = []
    # Renamed, so that the body's own name (a recursive pattern) still refers
    # to the module-level object and not to this function.
    fndef.name = f"__pm_{fn.__name__}__"
    free = fn.__code__.co_freevars
    params = [ast.arg(arg=n) for n in tuple(helpers) + tuple(free)]
    factory = ast.FunctionDef(
        name="__pm_factory__",
        args=ast.arguments(posonlyargs=[], args=params, vararg=None, kwonlyargs=[],
                           kw_defaults=[], kwarg=None, defaults=[]),
        body=[fndef, ast.Return(value=ast.Name(id=fndef.name, ctx=ast.Load()))],
        decorator_list=[], returns=None, type_comment=None)
    ast.copy_location(factory, fndef)
    module = ast.Module(body=[factory], type_ignores=[])
    ast.fix_missing_locations(module)
    code = compile(module, filename, "exec", dont_inherit=True)
    fcode = _find_code(code, "__pm_factory__")
    return Compiled(_find_code(fcode, fndef.name), fn, filename, fndef.lineno)


def compile_pattern(fn: Callable, pattern_name: str):
    """Rewrite and compile a pattern function (a :class:`Compiled`); raise
    PatternError for unsupported code. A function whose source cannot be read
    is traced as it is (a :class:`Sourceless`)."""
    try:
        fndef, filename, fail = parse_function(fn, "pattern", pattern_name)
    except NoSource:
        return Sourceless(fn)
    for node in ast.walk(fndef):
        if node is fndef:
            continue
        desc = _FORBIDDEN.get(type(node))
        if desc is not None:
            fail(node.lineno, f"unsupported Python construct in a pattern body: {desc}")

    # The pattern is called with symbolic variables only: drop annotations and
    # defaults (which would be evaluated in the wrong scope).
    fndef.returns = None
    a = fndef.args
    for arg in a.posonlyargs + a.args + a.kwonlyargs:
        arg.annotation = None
    a.defaults, a.kw_defaults = [], [None] * len(a.kwonlyargs)
    fndef.body = [_Rewriter().visit(stmt) for stmt in fndef.body]
    return _compile(fn, fndef, filename, HELPERS)


def compile_rule(fn: Callable, rule_name: str, transform=None) -> Compiled:
    """Compile a rule function with its ``assert`` statements made explicit
    (see the module docstring); its defaults are kept by :meth:`Compiled.make`.
    ``transform``, if given, edits the parsed ``def`` first (e.g. a variant
    with one assert dropped, for guard-necessity checks)."""
    fndef, filename, _ = parse_function(fn, "rule", rule_name)  # NoSource: the caller runs fn as is
    if transform is not None:
        fndef = transform(fndef)
        ast.fix_missing_locations(fndef)
    fndef.returns = None
    a = fndef.args
    for arg in a.posonlyargs + a.args + a.kwonlyargs:
        arg.annotation = None
    a.defaults, a.kw_defaults = [], [None] * len(a.kwonlyargs)
    fndef.body = [_RuleAsserts().visit(stmt) for stmt in fndef.body]
    return _compile(fn, fndef, filename, ())


def _find_code(code: types.CodeType, name: str) -> types.CodeType:
    for c in code.co_consts:
        if isinstance(c, types.CodeType) and c.co_name == name:
            return c
    raise AssertionError(f"compiled code object {name!r} not found")


def error_line(tb, codes) -> Tuple[bool, int]:
    """The innermost traceback line executing one of ``codes``."""
    found, line = False, 0
    while tb is not None:
        if tb.tb_frame.f_code in codes:
            found, line = True, tb.tb_lineno
        tb = tb.tb_next
    return found, line
