"""Knossos' simple rule set and arithmetic benchmark.

Knossos ("Knossos: Compiling AI with AI") rewrites arithmetic expressions
with A* search; its Appendix C, Table 3, lists the *simple rule set* (28
arithmetic rules and 5 binding rules) and its Appendix E the expressions
(Table 5: 36 training and 12 test expressions; Table 6: 8 expressions).
This module has them as PyPM operators, patterns and rules over
``pm.Graph`` (torch-free), and the cost model. It is **not** part of the
default library (the rules are for arithmetic terms, not ATen graphs).

**Operators.** ``Add Sub Mul Div Exp Log`` (binary and unary); variables
are graph inputs, numbers are constant leaves (``1`` and ``1.0`` are one
constant). :func:`parse` reads Knossos' s-expressions.

**Arithmetic rules.** One pattern per left-hand side and one rule per
right-hand side, named after the rewrite (:data:`RULE_TABLE` lists them in
Table 3's order with the paper's text). A constant in a left-hand side
(``0.0``, ``1.0``, ``-1.0``) is a pattern variable checked by the rule's
assert (the rule declines on any other node). A variable used twice
(``(sub a a)``, ``(add (mul a b) (mul a c))``) is a non-linear pattern: both
occurrences must be the same node, which hash-consing makes the same term.
Two rules share a left-hand side (``(div (div a b) c)``: rules 17 and 19),
so one match offers two transitions: greedy takes the first, search both.
Like Knossos' own rules they are identities over the reals only where
every division is defined (``(sub a a) => 0`` and ``(mul 0 a) => 0`` drop
``a``, ``(div a (div b c)) => (div (mul a c) b)`` assumes ``c != 0``).

**Binding rules** (``let`` introduction, lifting, merging, inlining and
dead-``let`` removal) are not rules here: a state of the search is a
hash-consed graph (:mod:`pypm_verified.rewriting.search`), in which a
subterm occurring twice *is* one node, shared, exactly what ``(let (x e)
...)`` with every occurrence of ``e`` replaced by ``x`` denotes. Every
binding rule maps a term to one with the same graph, so all of them are the
identity on states: their effect (common subexpression elimination, which
Knossos reaches by ``let`` rules) is reached with no step at all, and the
cost counts a shared subterm once.

**Cost model.** Knossos' reward is the decrease of ``c(s)``, "the
computational cost of running ``e_s``" (§3); the paper gives no per-operator
numbers for the arithmetic benchmark. This module's :data:`COSTS`:
``add``/``sub`` 1, ``mul`` 2, ``div`` 2, ``exp``/``log`` 4, variables and
constants 0, a shared node counted once (a ``let``-bound value is computed
once). :func:`cost` is that per node, the search's cost function.
"""
from __future__ import annotations

import re
from typing import Dict, List, Tuple

import pypm_verified as pm

from ..core.graph import Graph, Node


@pm.op
def Add(a, b): return 1  # noqa: E704


@pm.op
def Sub(a, b): return 1  # noqa: E704


@pm.op
def Mul(a, b): return 1  # noqa: E704


@pm.op
def Div(a, b): return 1  # noqa: E704


@pm.op
def Exp(a): return 1  # noqa: E704


@pm.op
def Log(a): return 1  # noqa: E704


OPS = {"add": Add, "sub": Sub, "mul": Mul, "div": Div, "exp": Exp, "log": Log}
COSTS = {"Add": 1.0, "Sub": 1.0, "Mul": 2.0, "Div": 2.0, "Exp": 4.0, "Log": 4.0}


def cost(node: Node) -> float:
    """The cost of one node (:data:`COSTS`; leaves are free)."""
    if node.kind != "op":
        return 0.0
    try:
        return COSTS[node.op.name]
    except KeyError:
        raise ValueError(f"no Knossos cost for operator {node.op.name}") from None


def _is(n, want) -> bool:
    return n is not None and n.kind == "const" and isinstance(n.value, (int, float)) \
        and not isinstance(n.value, bool) and n.value == want


def _zero(like: Node) -> Node:
    return like.graph.const(0.0)


# ----------------------------------------------------------- arithmetic rules
# Table 3 in order; the comment is the paper's text.

@pm.pattern
def AddZeroL(z, a):
    return Add(z, a)


@pm.rule(AddZeroL)
def add_zero(z, a):  # (add 0.0 a) => a
    assert _is(z, 0)
    return a


@pm.pattern
def MulOneL(o, a):
    return Mul(o, a)


@pm.rule(MulOneL)
def mul_one(o, a):  # (mul 1.0 a) => a
    assert _is(o, 1)
    return a


@pm.rule(MulOneL)
def mul_zero(o, a):  # (mul 0.0 a) => 0.0   (Table 3's last arithmetic rule)
    assert _is(o, 0)
    return _zero(o)


@pm.pattern
def SubZeroR(a, z):
    return Sub(a, z)


@pm.rule(SubZeroR)
def sub_zero(a, z):  # (sub a 0.0) => a
    assert _is(z, 0)
    return a


@pm.pattern
def DivOneR(a, o):
    return Div(a, o)


@pm.rule(DivOneR)
def div_one(a, o):  # (div a 1.0) => a
    assert _is(o, 1)
    return a


@pm.pattern
def AddMulR(a, b, m):
    return Add(a, Mul(b, m))


@pm.rule(AddMulR)
def add_neg_to_sub(a, b, m):  # (add a (mul b -1.0)) => (sub a b)
    assert _is(m, -1)
    return Sub(a, b)


@pm.pattern
def AddMulL(a, m, b):
    return Add(a, Mul(m, b))


@pm.rule(AddMulL)
def add_neg_to_sub_l(a, m, b):  # (add a (mul -1.0 b)) => (sub a b)
    assert _is(m, -1)
    return Sub(a, b)


@pm.pattern
def MulAny(a, b):
    return Mul(a, b)


@pm.rule(MulAny)
def mul_comm(a, b):  # (mul a b) => (mul b a)
    return Mul(b, a)


@pm.pattern
def AddAny(a, b):
    return Add(a, b)


@pm.rule(AddAny)
def add_comm(a, b):  # (add a b) => (add b a)
    return Add(b, a)


@pm.pattern
def SubSelf(a):
    return Sub(a, a)


@pm.rule(SubSelf)
def sub_self(a):  # (sub a a) => 0.0
    return _zero(a)


@pm.pattern
def AddAddL(a, b, c):
    return Add(Add(a, b), c)


@pm.rule(AddAddL)
def add_add_swap(a, b, c):  # (add (add a b) c) => (add (add a c) b)
    return Add(Add(a, c), b)


@pm.pattern
def SubAddL(a, b, c):
    return Sub(Add(a, b), c)


@pm.rule(SubAddL)
def sub_add_swap(a, b, c):  # (sub (add a b) c) => (add (sub a c) b)
    return Add(Sub(a, c), b)


@pm.pattern
def AddSubL(a, b, c):
    return Add(Sub(a, b), c)


@pm.rule(AddSubL)
def add_sub_swap(a, b, c):  # (add (sub a b) c) => (sub (add a c) b)
    return Sub(Add(a, c), b)


@pm.pattern
def SubSubL(a, b, c):
    return Sub(Sub(a, b), c)


@pm.rule(SubSubL)
def sub_sub_swap(a, b, c):  # (sub (sub a b) c) => (sub (sub a c) b)
    return Sub(Sub(a, c), b)


@pm.pattern
def SubSubR(a, b, c):
    return Sub(a, Sub(b, c))


@pm.rule(SubSubR)
def sub_sub_r(a, b, c):  # (sub a (sub b c)) => (sub (add a c) b)
    return Sub(Add(a, c), b)


@pm.pattern
def MulMulL(a, b, c):
    return Mul(Mul(a, b), c)


@pm.rule(MulMulL)
def mul_mul_swap(a, b, c):  # (mul (mul a b) c) => (mul (mul a c) b)
    return Mul(Mul(a, c), b)


@pm.pattern
def DivMulL(a, b, c):
    return Div(Mul(a, b), c)


@pm.rule(DivMulL)
def div_mul_swap(a, b, c):  # (div (mul a b) c) => (mul (div a c) b)
    return Mul(Div(a, c), b)


@pm.pattern
def MulDivL(a, b, c):
    return Mul(Div(a, b), c)


@pm.rule(MulDivL)
def mul_div_swap(a, b, c):  # (mul (div a b) c) => (div (mul a c) b)
    return Div(Mul(a, c), b)


@pm.pattern
def DivDivL(a, b, c):
    return Div(Div(a, b), c)


@pm.rule(DivDivL)
def div_div_swap(a, b, c):  # (div (div a b) c) => (div (div a c) b)
    return Div(Div(a, c), b)


@pm.rule(DivDivL)
def div_div_merge(a, b, c):  # (div (div a b) c) => (div a (mul b c))
    return Div(a, Mul(b, c))


@pm.pattern
def DivDivR(a, b, c):
    return Div(a, Div(b, c))


@pm.rule(DivDivR)
def div_div_r(a, b, c):  # (div a (div b c)) => (div (mul a c) b)
    return Div(Mul(a, c), b)


@pm.pattern
def MulAddR(a, b, c):
    return Mul(a, Add(b, c))


@pm.rule(MulAddR)
def distribute_add(a, b, c):  # (mul a (add b c)) => (add (mul a b) (mul a c))
    return Add(Mul(a, b), Mul(a, c))


@pm.pattern
def AddMulMul(a, b, c):
    return Add(Mul(a, b), Mul(a, c))


@pm.rule(AddMulMul)
def factor_add(a, b, c):  # (add (mul a b) (mul a c)) => (mul a (add b c))
    return Mul(a, Add(b, c))


@pm.pattern
def MulSubR(a, b, c):
    return Mul(a, Sub(b, c))


@pm.rule(MulSubR)
def distribute_sub(a, b, c):  # (mul a (sub b c)) => (sub (mul a b) (mul a c))
    return Sub(Mul(a, b), Mul(a, c))


@pm.pattern
def SubMulMul(a, b, c):
    return Sub(Mul(a, b), Mul(a, c))


@pm.rule(SubMulMul)
def factor_sub(a, b, c):  # (sub (mul a b) (mul a c)) => (mul a (sub b c))
    return Mul(a, Sub(b, c))


@pm.pattern
def AddDivDiv(y, z, x):
    return Add(Div(y, x), Div(z, x))


@pm.rule(AddDivDiv)
def add_same_denominator(y, z, x):  # (add (div y x) (div z x)) => (div (add y z) x)
    return Div(Add(y, z), x)


@pm.pattern
def SubDivDiv(y, z, x):
    return Sub(Div(y, x), Div(z, x))


@pm.rule(SubDivDiv)
def sub_same_denominator(y, z, x):  # (sub (div y x) (div z x)) => (div (sub y z) x)
    return Div(Sub(y, z), x)


@pm.pattern
def DivMulR(a, b, c):
    return Div(a, Mul(b, c))


@pm.rule(DivMulR)
def div_split(a, b, c):  # (div a (mul b c)) => (div (div a b) c)
    return Div(Div(a, b), c)


# Table 3's arithmetic rules in its order: (rule, the paper's LHS => RHS)
RULE_TABLE: List[Tuple[object, str]] = [
    (add_zero, "(add 0.0 a) => a"),
    (mul_one, "(mul 1.0 a) => a"),
    (sub_zero, "(sub a 0.0) => a"),
    (div_one, "(div a 1.0) => a"),
    (add_neg_to_sub, "(add a (mul b -1.0)) => (sub a b)"),
    (mul_comm, "(mul a b) => (mul b a)"),
    (add_comm, "(add a b) => (add b a)"),
    (sub_self, "(sub a a) => 0.0"),
    (add_add_swap, "(add (add a b) c) => (add (add a c) b)"),
    (sub_add_swap, "(sub (add a b) c) => (add (sub a c) b)"),
    (add_sub_swap, "(add (sub a b) c) => (sub (add a c) b)"),
    (sub_sub_swap, "(sub (sub a b) c) => (sub (sub a c) b)"),
    (sub_sub_r, "(sub a (sub b c)) => (sub (add a c) b)"),
    (mul_mul_swap, "(mul (mul a b) c) => (mul (mul a c) b)"),
    (div_mul_swap, "(div (mul a b) c) => (mul (div a c) b)"),
    (mul_div_swap, "(mul (div a b) c) => (div (mul a c) b)"),
    (div_div_swap, "(div (div a b) c) => (div (div a c) b)"),
    (div_div_r, "(div a (div b c)) => (div (mul a c) b)"),
    (div_div_merge, "(div (div a b) c) => (div a (mul b c))"),
    (distribute_add, "(mul a (add b c)) => (add (mul a b) (mul a c))"),
    (factor_add, "(add (mul a b) (mul a c)) => (mul a (add b c))"),
    (distribute_sub, "(mul a (sub b c)) => (sub (mul a b) (mul a c))"),
    (add_neg_to_sub_l, "(add a (mul -1.0 b)) => (sub a b)"),
    (factor_sub, "(sub (mul a b) (mul a c)) => (mul a (sub b c))"),
    (add_same_denominator, "(add (div y x) (div z x)) => (div (add y z) x)"),
    (sub_same_denominator, "(sub (div y x) (div z x)) => (div (sub y z) x)"),
    (div_split, "(div a (mul b c)) => (div (div a b) c)"),
    (mul_zero, "(mul 0.0 a) => 0.0"),
]

# the patterns, in the order greedy tries them (Table 3's order of first use)
PATTERNS = list(dict.fromkeys(r.pattern for r, _ in RULE_TABLE))


# ------------------------------------------------------------- expressions

_TOKEN = re.compile(r"\(|\)|[^\s()]+")


def parse(text: str, graph: Graph = None) -> Node:
    """The node of the s-expression ``text`` (``(add x (mul 2.0 y))``;
    operators ``add sub mul div exp log``, numbers, variable names) in
    ``graph`` (a new one when None); raises ValueError on a malformed
    expression."""
    g = Graph() if graph is None else graph
    toks = _TOKEN.findall(text)
    pos = 0

    def expr():
        nonlocal pos
        if pos >= len(toks):
            raise ValueError(f"unexpected end of expression in {text!r}")
        t = toks[pos]
        pos += 1
        if t == ")":
            raise ValueError(f"unexpected ')' in {text!r}")
        if t != "(":
            try:
                return g.const(float(t)) if re.fullmatch(r"-?[0-9.]+(e-?[0-9]+)?", t) \
                    else g.input(t)
            except ValueError:
                raise ValueError(f"bad number {t!r} in {text!r}") from None
        if pos >= len(toks):
            raise ValueError(f"unexpected end of expression in {text!r}")
        head = toks[pos]
        pos += 1
        op = OPS.get(head)
        if op is None:
            raise ValueError(f"unknown operator {head!r} in {text!r} (expected one of "
                             f"{', '.join(OPS)})")
        args = []
        while pos < len(toks) and toks[pos] != ")":
            args.append(expr())
        if pos >= len(toks):
            raise ValueError(f"missing ')' in {text!r}")
        pos += 1
        if len(args) != op.arity:
            raise ValueError(f"{head} takes {op.arity} argument(s), got {len(args)} in {text!r}")
        return g.apply(op, *args)

    node = expr()
    if pos != len(toks):
        raise ValueError(f"trailing text after the expression in {text!r}")
    return node


def show(node: Node) -> str:
    """``node`` as an s-expression (shared subterms written out)."""
    if node.kind == "input":
        return node.name
    if node.kind == "const":
        v = node.value
        return repr(float(v)) if isinstance(v, (int, float)) else repr(v)
    return "(" + node.op.name.lower() + " " + " ".join(show(a) for a in node.args) + ")"


def graph_of(text: str) -> Graph:
    """A new graph whose one output is ``text``."""
    g = Graph()
    g.output(parse(text, g))
    return g


# Appendix E. Table 6 is clean; Table 5's text in the paper is partly
# damaged by its extraction (expressions run together, parentheses lost):
# two training expressions are repaired by the structure their siblings
# share (marked), and the two test expressions starting
# "(sub (mul (mul 2.0 (add x y)) (add x y))" are omitted (their second
# operand is lost); one test expression is repaired (marked).
TABLE6 = [
    "(div (div 1.0 x) (add 1.0 (div 1.0 x)))",
    "(add (div (div 1.0 x) (add (div 1.0 x) 1.0)) (div 1.0 x))",
    "(add (div (div 1.0 x) (add (div 1.0 x) 2.0)) (div 1.0 x))",
    "(mul (div x y) (div x y))",
    "(div (mul (div x y) x) y)",
    "(add (div (mul x y) (add 1.0 (mul x y))) (mul x y))",
    "(add (div 1.0 (add 1.0 (mul x y))) (mul x y))",
    "(div (mul x y) (add 1.0 (mul x y)))",
]

TABLE5_TRAIN = [
    "(mul (div (mul 2.0 (add x v)) (sub (add x v) 1)) (mul x v))",
    "(add (add (mul x 2.0) 1) (div (add (div x (sub y 1)) (mul x 2.0)) 2))",
    "(div (add (mul 2.0 (mul x y)) (mul x y)) (div 1.0 (add x 1)))",
    "(div (add (add (div x (sub y 1)) (log x)) 1) (sub (mul (div x (sub y 1)) 3) 1))",
    "(add (div (div 1.0 (add x 1)) (add (add x y) (div 1.0 (add x 1)))) (div 1.0 (add x 1)))",
    "(mul (add (log x) (mul x 2.0)) (mul (log x) 3))",
    "(mul (add (add x y) (log x)) (mul (add x y) 3))",
    "(div (add (add (mul x 2.0) 1) 1) (sub (add (add x y) (mul x 2.0)) 1))",
    "(sub (mul (mul 2.0 (mul x y)) (mul x y)) (mul x 2.0))",
    "(mul (add (div x (sub y 1)) 1) (add (mul x y) (div x (sub y 1))))",
    "(mul (div (div 1.0 (add x 1)) (add (div x (sub y 1)) (div 1.0 (add x 1)))) (div 1.0 (add x 1)))",
    "(add (add (log x) (div 1.0 (add x 1))) (div (mul (log x) 3) 2))",
    "(add (add (add x y) (div x (sub y 1))) (div (mul (add x y) 3) 2))",  # repaired
    "(div (mul (mul x 2.0) (mul x 2.0)) (sub (mul x 2.0) (div 1.0 (add x 1))))",
    "(mul (div (mul 2.0 (mul x y)) (sub (mul x y) 1)) (log x))",
    "(add (add (div x (sub y 1)) 1) (div (add (add x y) (div x (sub y 1))) 2))",
    "(div (add (mul 2.0 (div 1.0 (add x 1))) (div 1.0 (add x 1))) (mul x 2.0))",
    "(div (add (add (log x) (mul x y)) 1) (sub (mul (log x) 3) 1))",
    "(div (add (add (add x y) (mul x 2.0)) 1) (sub (mul (add x y) 3) 1))",  # repaired
    "(add (div (mul x 2.0) (add (mul x y) (mul x 2.0))) (mul x 2.0))",
    "(mul (add (mul x y) (div x (sub y 1))) (mul (mul x y) 3))",
    "(div (add (add (div x (sub y 1)) 1) 1) (sub (add (div 1.0 (add x 1)) (div x (sub y 1))) 1))",
    "(sub (mul (mul 2.0 (div 1.0 (add x 1))) (div 1.0 (add x 1))) (log x))",
    "(mul (add (log x) 1) (add (add x y) (log x)))",
    "(mul (add (add x y) 1) (add (div 1.0 (add x 1)) (add x y)))",
    "(mul (div (mul x 2.0) (add (log x) (mul x 2.0))) (mul x 2.0))",
    "(add (add (mul x y) (add x y)) (div (mul (mul x y) 3) 2))",
    "(div (mul (div x (sub y 1)) (div x (sub y 1))) (sub (div x (sub y 1)) (mul x 2.0)))",
    "(mul (div (mul 2.0 (div 1.0 (add x 1))) (sub (div 1.0 (add x 1)) 1)) (mul x y))",
    "(add (add (log x) 1) (div (add (div x (sub y 1)) (log x)) 2))",
    "(add (add (add x y) 1) (div (add (mul x y) (add x y)) 2))",
    "(div (add (mul 2.0 (mul x 2.0)) (mul x 2.0)) (div x (sub y 1)))",
    "(div (add (add (mul x y) (div 1.0 (add x 1))) 1) (sub (mul (mul x y) 3) 1))",
    "(add (div (div x (sub y 1)) (add (log x) (div x (sub y 1)))) (div x (sub y 1)))",
    "(mul (add (div 1.0 (add x 1)) (add x y)) (mul (div 1.0 (add x 1)) 3))",
    "(div (add (add (log x) 1) 1) (sub (add (mul x 2.0) (log x)) 1))",
]

TABLE5_TEST = [
    "(div (add (mul 2.0 (add x y)) (add x y)) (mul x 2.0))",
    "(div (add (add (mul x 2.0) (mul x y)) 1) (sub (mul (mul x 2.0) 3) 1))",
    "(add (div (mul x y) (add (div x (sub y 1)) (mul x y))) (mul x y))",
    "(mul (add (div x (sub y 1)) (div 1.0 (add x 1))) (mul (div x (sub y 1)) 3))",
    "(div (add (add (div 1.0 (add x 1)) 1) 1) (sub (add (log x) (div 1.0 (add x 1))) 1))",
    "(sub (mul (mul 2.0 (log x)) (log x)) (add x y))",
    "(mul (add (mul x 2.0) 1) (add (log x) (mul x 2.0)))",
    "(mul (div (mul x y) (add (add x y) (mul x y))) (mul x y))",  # repaired
    "(add (add (div x (sub y 1)) (mul x 2.0)) (div (mul (div x (sub y 1)) 3) 2))",
    "(div (mul (div 1.0 (add x 1)) (div 1.0 (add x 1))) (sub (div 1.0 (add x 1)) (mul x y)))",
    "(mul (div (mul 2.0 (log x)) (sub (log x) 1)) (div x (sub y 1)))",
]

EXPRESSIONS: Dict[str, List[str]] = {
    "table6": TABLE6, "table5_train": TABLE5_TRAIN, "table5_test": TABLE5_TEST}


def evaluate(node: Node, env: Dict[str, float]) -> float:
    """The value of ``node`` with variables from ``env`` (floats; a
    division by zero raises ZeroDivisionError)."""
    import math
    memo: Dict[int, float] = {}

    def ev(n: Node) -> float:
        v = memo.get(n.id)
        if v is not None:
            return v
        if n.kind == "input":
            v = float(env[n.name])
        elif n.kind == "const":
            v = float(n.value)
        else:
            a = [ev(c) for c in n.args]
            name = n.op.name
            v = (a[0] + a[1] if name == "Add" else a[0] - a[1] if name == "Sub"
                 else a[0] * a[1] if name == "Mul" else a[0] / a[1] if name == "Div"
                 else math.exp(a[0]) if name == "Exp" else math.log(a[0]))
        memo[n.id] = v
        return v

    return ev(node)


__all__ = ["Add", "Sub", "Mul", "Div", "Exp", "Log", "OPS", "COSTS", "cost", "parse",
           "show", "graph_of", "evaluate", "RULE_TABLE", "PATTERNS", "EXPRESSIONS",
           "TABLE5_TRAIN", "TABLE5_TEST", "TABLE6"]
