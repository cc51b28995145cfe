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
import importlib

from . import core
from .core import DType, bf16, bool_, f16, f32, f64, i8, i16, i32, i64, u8
from .core.graph import Graph, Node, TensorShape
from .core.symbols import OpClass, opclass
from .dsl import Op, Pattern, Rule, op, pattern, rule, var
from .dsl import operators as _operators
from .dsl.relay import (GetItem, commute, getitem, has_attr, is_constant, is_input, is_tuple,
                        optional, tuple_op, wildcard)
from .engines.dominates import Dominates, dominates
from .engines import ENGINES, Match, match, match_all
from .engines.binding import available as engine_available
from .engines.explain import Explanation, explain, explain_all
from .errors import EngineError, EngineUnavailable, GraphError, OutOfFuel, PatternError
from .rewriting import RewriteReport, rewrite

# ``@pm.op(torch=...)``: the DSL asks for the PyTorch layer's target registry
# through this loader rather than importing that layer itself
_operators.set_binder_loader(lambda: importlib.import_module(".torch.targets", __name__))

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
