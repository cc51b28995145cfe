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

Layers, one subpackage each (docs/internals/architecture.md): :mod:`.core` (the
calculus, the term graph), :mod:`.dsl` (operators, patterns, rules),
:mod:`.engines` (verified and reference matchers), :mod:`.rewriting`
(rules to a fixpoint), :mod:`.torch` (PyTorch programs) and :mod:`.library`
(the PyTorch rule library).
"""
from typing import Optional as _Optional

from . import core
from .core import DType, bf16, bool_, f16, f32, f64, i8, i16, i32, i64, u8
from .core.graph import Graph, Node, TensorShape
from .core.symbols import OpClass, opclass
from .dsl import Op, Pattern, Rule, pattern, rule, var
from .dsl import operators as _operators
from .dsl.relay import (GetItem, commute, getitem, has_attr, is_constant, is_input, is_tuple,
                        optional, tuple_op, wildcard)
from .engines.dominates import Dominates, dominates
from .engines import ENGINES, Match, match, match_all
from .engines.binding import available as engine_available
from .engines.explain import Explanation, explain, explain_all
from .errors import EngineError, EngineUnavailable, GraphError, OutOfFuel, PatternError
from .engines.matching import check_engine as _check_engine
from .rewriting import RewriteReport
from .rewriting import graph_rewrite as _graph_rewrite

__all__ = [
    "core", "ENGINES", "Match", "match", "match_all", "engine_available",
    "DType", "bf16", "bool_", "f16", "f32", "f64", "i8", "i16", "i32", "i64", "u8",
    "Op", "op", "var", "Pattern", "pattern", "Rule", "rule", "OpClass", "opclass",
    "RewriteReport", "rewrite",
    "EngineError", "EngineUnavailable", "GraphError", "OutOfFuel", "PatternError",
    "Graph", "Node", "TensorShape", "load",
    "explain", "explain_all", "Explanation", "termination", "backend", "inductor_pass",
    "wildcard", "is_constant", "is_input", "optional", "commute", "has_attr", "getitem",
    "is_tuple", "tuple_op", "GetItem", "dominates", "Dominates", "partition",
    "load_partitioned",
]


def partition(program, patterns=None, backend="inductor", **kwargs):
    """Outline each match of ``patterns`` (or each connected group of
    matches) of a PyTorch program into a submodule handed to ``backend``
    (default ``torch.compile`` with Inductor); see
    :func:`pypm_verified.torch.partition.partition`. Imports torch only
    when called."""
    from .torch.partition import partition as _partition
    return _partition(program, patterns, backend=backend, **kwargs)


def termination(pattern):
    """Whether ``pattern`` is in the class of ``Fuel.match_root_fuel`` (every
    cycle of calls passes under an operator application) and up to which
    graph depth the default fuel is proved to suffice; see
    :class:`pypm_verified.core.fuel.Termination`. Takes a ``@pm.pattern``
    or a :class:`core.Program`."""
    if isinstance(pattern, Pattern):
        return pattern.termination()
    from .core import fuel
    return fuel.termination(core.as_program(pattern))


def backend(rules=None, then="inductor", **kwargs):
    """A ``torch.compile`` backend that rewrites every graph Dynamo captures
    with ``rules`` (default: the rule library), then compiles it with
    ``then`` ("inductor", "eager", a Dynamo backend name or a callable)::

        torch.compile(model, backend=pm.backend(then="inductor"))

    Keyword arguments (``target``, ``engine``, ``skip``, ``check``,
    ``check_profitability``, ``verbose``...) and what it does with graph
    breaks, dynamic shapes and training graphs:
    :class:`pypm_verified.torch.backend.Backend`. Imports torch only when
    called."""
    from .torch.backend import Backend
    return Backend(rules, then, **kwargs)


def inductor_pass(rules=None, target="cpu", **kwargs):
    """The rule library as an Inductor custom graph pass, for
    ``torch.compile(backend="inductor")`` in inference and in training::

        p = pm.inductor_pass()
        with torch._inductor.config.patch(pre_grad_custom_pass=p):
            out = torch.compile(model)(x)

    It rewrites each captured graph in place before autograd (so a
    replacement's own backward is derived), fires only differentiable rules in
    training graphs, keeps its reports in ``p.reports`` and gives Inductor's
    cache a ``uuid()``: :class:`pypm_verified.torch.inductor.InductorPass`.
    Imports torch only when called."""
    from .torch.inductor import InductorPass
    return InductorPass(rules, target, **kwargs)


def load(path, imports=(), allow_pickle=False):
    """Load a ``.pt2`` written by the rewriter (or any ``torch.export.save``
    file) and return its ``ExportedProgram``, first registering what it
    needs: the modules of its input/output pytree types (e.g.
    ``transformers.modeling_outputs``) and the ``pypm`` kernels
    (``pypm.linear_act``). Checks the archive's CRCs; raises
    ``pypm_verified.torch.LoadError`` with a one-line reason otherwise.
    ``imports``: modules to import first, e.g. the library that registers a
    custom operator the program calls when no known library does
    (``pypm_verified.torch.loader.OP_LIBRARIES``). Nothing in the file runs:
    a module it names is imported only if listed in ``imports`` (or a known
    library), and a pickled part needing Python's full unpickler is refused
    unless ``allow_pickle=True`` (see :mod:`pypm_verified.torch.untrusted`).
    Imports torch only when called."""
    from .torch.loader import load_rewritten
    return load_rewritten(path, imports, allow_pickle=allow_pickle)


def load_partitioned(path, backend="inductor", allow_pickle=False):
    """A program written by ``pm.partition(...).save(path)``, its submodules
    handed to ``backend`` again (:func:`pypm_verified.torch.partition.load_partitioned`;
    the file is read without running code from it, ``allow_pickle`` as for
    :func:`load`). Imports torch only when called."""
    from .torch.partition import load_partitioned as _load
    return _load(path, backend, allow_pickle=allow_pickle)


def op(fn=None, *, op_class: _Optional[str] = None, torch=None, commutative=False):
    """Declare an operator: ``@pm.op``, ``@pm.op(op_class="...")`` or
    ``@pm.op(torch=[torch.ops.aten.matmul.default, ...])``.

    The function's parameters give the arity; its return value (an int) is
    the output arity. ``op_class`` names the operator's class (interned with
    :func:`opclass`; guards compare ``F.op_class`` with it).
    ``commutative=True`` (or a pair of positions) lets every application of
    this operator match its two arguments in either order.

    ``torch`` binds the operator to PyTorch targets: op overloads
    (``aten.mul.Tensor``), op packets (``aten.mul``: the functional
    overloads of the operator's arity), torch functions with an ATen op of
    the same name (``torch.sigmoid``, ``torch.nn.functional.silu``) or
    ``operator.getitem``; anything else is refused here, naming the
    declaration's ``file:line``. The arity must be each overload's schema
    argument count (calls are imported in full positional form). Each
    declaration is an operator of its own (its name, arity, commutativity):
    declaring ``Mul`` on ``aten.mul.Tensor`` in a user's module neither
    returns nor changes the library's ``Mul``; both match the graph's
    ``aten.mul.Tensor`` nodes, each with its own properties. Its ``op_class``
    must agree with the class the overloads already have, if any (guards
    read one class per overload); see :mod:`pypm_verified.torch.overloads`.
    Replacements in rule bodies call the first overload.
    """
    if torch is None:
        return _operators.op(fn, op_class=op_class, commutative=commutative)

    def make(f):
        o = _operators.op(f, op_class=op_class, torch=torch, commutative=commutative)
        from .torch import overloads  # binds the recorded targets now (imports torch)
        return overloads.bind_requested(o)
    if fn is None:
        return make
    return make(fn)


def rewrite(graph, patterns, engine: str = "verified", max_iterations: int = 100,
            fuel: _Optional[int] = None) -> RewriteReport:
    """Apply the rules of ``patterns`` to ``graph`` until none fires.

    Each pass matches every pattern at every node the outputs reach (nodes in
    id order, patterns in the given order); for each match whose root is
    still live, the pattern's rules are tried in definition order and the
    first whose assertions pass fires: its replacement is substituted for the
    root (a rule returning the root itself changes nothing and does not
    count). Passes repeat until one fires nothing, at most
    ``max_iterations`` times. Each firing is checked by the verified
    rewrite validator (:mod:`pypm_verified.rewriting.validate`; a rejection raises
    :class:`~pypm_verified.rewriting.validate.RewriteRejected`); the report's ``validation`` says
    "validated (N firings)", or "not validated: REASON" when the check did
    not run (``PYPM_VALIDATE=0``, no engine library). A graph without designated
    outputs gets its current sinks (nodes no node uses) as outputs. Raises
    OutOfFuel like
    :func:`match_all`. For each match where no rule fired, the report
    records why each rule declined (:attr:`RewriteReport.declines`).

    A rule's interior policy (``@pm.rule(P, interior=...)``,
    :mod:`pypm_verified.rewriting.legality`) is applied before it fires: under ``"refuse"`` or
    ``"relay"``, a match whose interior nodes are used outside it (by live
    nodes) may be declined, with the reason in the report.

    ``graph`` may also be a PyTorch program: a ``torch.export.ExportedProgram``
    or its ATen-level ``fx.GraphModule``, rewritten in place by
    :func:`pypm_verified.torch.rewrite_graph_module` (``fuel`` does not
    apply; the report is the driver's).
    """
    _check_engine(engine)
    if _graph_rewrite.is_torch_program(graph):
        if fuel is not None:
            raise ValueError("rewrite(): fuel= applies to pm.Graph rewriting, not to PyTorch "
                             "programs")
        from .torch.driver import rewrite_graph_module  # the PyTorch layer, when needed
        return rewrite_graph_module(graph, patterns, engine=engine,
                                    max_iterations=max_iterations)
    return _graph_rewrite.rewrite(graph, patterns, engine=engine, max_iterations=max_iterations,
                                  fuel=fuel)
