"""pypm_verified: pattern matching on computation graphs (PyPM, CGO'25) with a
matcher proved correct in Coq.

    import pypm_verified as pm

    @pm.op
    def MatMul(x, y): return 1

    @pm.pattern
    def MM(x, y):
        assert x.shape.rank == 2
        return MatMul(x, y)

    g = pm.Graph()
    m = pm.match(MM, g.apply(MatMul, g.input("a", shape=(2, 2)), g.input("b")))

Patterns may be recursive, use alternates, guards (``assert``), operator
variables (a parameter applied as ``f(...)``), local variables (``pm.var()``,
``pm.Op(n_in, n_out)``) and match constraints (``x <= p``); rules
(``@pm.rule``) rewrite graphs with ``pm.rewrite``.
"""
from . import core
from .api import ENGINES, Match, match, match_all
from .binding import available as engine_available
from .core import DType, bf16, bool_, f16, f32, f64, i8, i16, i32, i64, u8
from .dsl import Op, op, var
from .errors import EngineError, EngineUnavailable, GraphError, OutOfFuel, PatternError
from .graph import Graph, Node, TensorShape
from .patterns import Pattern, pattern
from .rewriter import RewriteReport, rewrite
from .rule import Rule, rule
from .symbols import OpClass, opclass

__all__ = [
    "core", "ENGINES", "Match", "match", "match_all", "engine_available",
    "DType", "bf16", "bool_", "f16", "f32", "f64", "i8", "i16", "i32", "i64", "u8",
    "Op", "op", "var", "Pattern", "pattern", "Rule", "rule", "OpClass", "opclass",
    "RewriteReport", "rewrite",
    "EngineError", "EngineUnavailable", "GraphError", "OutOfFuel", "PatternError",
    "Graph", "Node", "TensorShape",
]
