"""An Inductor custom graph pass running the rule library inside
``torch.compile(backend="inductor")``, in inference and in training.

    import torch, pypm_verified as pm
    p = pm.inductor_pass()
    with torch._inductor.config.patch(pre_grad_custom_pass=p):
        loss = torch.compile(model)(x).sum()
    loss.backward()
    print(p.summary())

Where it runs: Inductor's ``pre_grad_custom_pass``, the graph Dynamo
captured, before AOTAutograd. Inductor's hooks and the graph each receives
(torch 2.13, ``torch/_inductor/config.py``):

* ``pre_grad_custom_pass``: Dynamo's torch-level graph (``torch._C._nn.linear``,
  ``operator.matmul``, ``torch.softmax``, method calls) with fake example
  values, once per captured graph, before autograd;
* ``joint_custom_pre_pass`` / ``joint_custom_post_pass``: after AOTAutograd
  traced it with Inductor's decompositions: in training the *joint* forward +
  backward graph, whose backward already differentiates the written-out
  attention (it reads the softmax's output), so a forward replacement there
  would leave the old backward -- and keep the softmax alive for it;
* ``post_grad_custom_pre_pass`` / ``post_grad_custom_post_pass``: the
  forward and backward graphs after partitioning, decomposed (``softmax`` is
  ``amax``/``sub``/``exp``/``sum``/``div``, ``linear`` is ``addmm`` +
  views), so the library's patterns do not match them, and an op a rule
  emits there that Inductor decomposes (``aten.silu``) is never decomposed:
  Inductor stops with "both a fallback and a decomp for same op".

So the pass runs before autograd, in both modes: it traces the captured
graph to the ATen IR the rules are written for (``make_fx`` with
``pre_dispatch=True``, on the graph's fake values: ``aten.linear``,
``aten.matmul``, ``aten.softmax``, as ``torch.export`` gives), rewrites that
with the driver, and when a rule fired puts the rewritten graph in place of
the captured one (same inputs and outputs). AOTAutograd then derives the
backward of the replacements (SDPA's own backward kernel) and Inductor's
decompositions apply to them as to any op.

Training graphs (grad enabled, an input requiring grad): only the rules whose
replacement is differentiable fire (:meth:`InductorPass.rule_differentiable`:
``inductor_pass(differentiable={name: flag})``, else the rule's own
``@pm.rule(..., differentiable=flag)``, else :data:`DIFFERENTIABLE` for the
library's rules; ``pypm.linear_act`` is an inference kernel); the others are
declined with the reason in the report. Dynamic shapes (symbolic sizes,
``dynamic=True`` or a recompile) are rewritten with their symbols (the
driver decides each match for every admissible size).

``uuid()`` hashes the rules' sources, the profitability table and the
options, so Inductor's caches key on them. With a uuid Inductor runs the
pass after its cache lookup: a compile served by the cache does not run it
(no record); the config ``pre_grad_pass_timing="early"`` runs it always.
"""
from __future__ import annotations

import hashlib
import inspect
import json
import logging
import sys
import time
import warnings
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

import torch
import torch.fx as fx
from torch._inductor.custom_graph_pass import CustomGraphPass

from ..rewriting.report import RewriteReport
from . import profitability, registry
from .backend import (COMPILED_SKIP, GraphRecord, PassThroughWarning, Recorded, SkippingDriver,
                      _first_line, log_graph, show_verbose)
from .driver import count_calls

__all__ = ["InductorPass", "DIFFERENTIABLE", "inductor_pass"]

#: the pass's logger: one record per graph (``verbose=True``: INFO, shown on
#: stdout, :func:`.backend.show_verbose`; else DEBUG)
log = logging.getLogger(__name__)

#: the modules whose code decides a rewrite besides this one (their files'
#: hashes are in :meth:`InductorPass.uuid`): the driver and its collaborators
_DRIVER_MODULES = ("driver", "firing", "metadata", "deadcode", "folding", "rule_api")

#: Rule name -> the ops its replacement emits, for the library's rules (the
#: layout and pointwise ops around them have autograd formulas)
REPLACEMENT_OPS: Dict[str, Tuple[str, ...]] = {
    "sdpa": ("aten.scaled_dot_product_attention.default",),
    "sdpa_core": ("aten.scaled_dot_product_attention.default", "aten.mul.Scalar"),
    "linear_nt": ("aten.linear.default",),
    "gelu_erf": ("aten.gelu.default",),
    "gelu_tanh": ("aten.gelu.default",),
    "rms_norm": ("aten.rms_norm.default",),
    "linear_act": ("pypm.linear_act.default",),  # an inference kernel: no autograd formula
}

#: Rule name -> whether its replacement is differentiable: whether torch has
#: an autograd formula for every op it emits (the op registry's
#: :func:`~.registry.differentiable`), for the library's rules. In a
#: training graph only rules marked True fire; a rule not listed here (a
#: user's) fires there only when it declares ``@pm.rule(...,
#: differentiable=True)`` or the pass is given ``differentiable={"name": True}``.
DIFFERENTIABLE: Dict[str, bool] = {
    rule: all(registry.differentiable(op) for op in ops) for rule, ops in REPLACEMENT_OPS.items()}


def _source(obj) -> str:
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        code = getattr(obj, "__code__", None)
        return repr(code.co_code) if code is not None else repr(obj)


def _file_text(module_name: str) -> str:
    f = getattr(sys.modules.get(module_name), "__file__", None)
    if not f:
        return ""
    try:
        with open(f, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return ""


class InductorPass(CustomGraphPass, Recorded):
    """The rule library as an Inductor ``pre_grad_custom_pass`` (see the
    module docstring for why that hook). Made by :func:`pypm_verified.inductor_pass`.

    ``rules``, ``target``, ``engine``, ``check_profitability``,
    ``max_iterations``: as for :class:`~.backend.Backend`. ``skip``: rule
    names never fired; ``"auto"`` (default) is ``COMPILED_SKIP["inductor"]``
    (the rules whose kernel Inductor generates itself). ``differentiable``:
    rule name -> bool, for training graphs: overrides the rule's own
    ``@pm.rule(..., differentiable=...)`` and :data:`DIFFERENTIABLE`
    (:meth:`rule_differentiable`). ``verbose``: one line per graph on stdout
    (logger ``pypm_verified.torch.inductor``, INFO; without it the line is
    logged at DEBUG).

    ``records`` (one :class:`~.backend.GraphRecord` per graph the pass saw),
    ``reports`` (the driver's :class:`RewriteReport` of each graph it
    rewrote or tried), :attr:`firings` and :meth:`summary` say what happened.
    Register it with ``torch._inductor.config.patch(pre_grad_custom_pass=p)``
    or :meth:`install`."""

    _what, _nothing = "pypm_verified.inductor_pass", "no graph seen yet"

    def __init__(self, rules=None, target: str = "cpu", *, engine: str = "verified",
                 check_profitability: bool = True, skip: Union[str, Sequence[str]] = "auto",
                 differentiable: Optional[Mapping[str, bool]] = None,
                 max_iterations: int = 20, verbose: bool = False):
        self._configure(
            rules, target, engine, check_profitability, max_iterations, skip,
            COMPILED_SKIP["inductor"],
            "skipped under Inductor: it generates the same kernel from the original "
            "(COMPILED_SKIP; skip=() fires it)",
            "skipped under Inductor (skip=...)")
        self.differentiable = dict(DIFFERENTIABLE)
        self._given: Dict[str, bool] = {}  # the call's own: they win over the rules'
        for name, flag in (differentiable or {}).items():
            if not isinstance(flag, bool):
                raise TypeError(f"differentiable[{name!r}] must be a bool, not {flag!r}")
            self.differentiable[name] = flag
            self._given[name] = flag
        self.verbose = bool(verbose)
        if self.verbose:
            show_verbose(log)
        self.records: List[GraphRecord] = []
        self._uuid: Optional[str] = None

    # ------------------------------------------------------------------ reporting

    @property
    def reports(self) -> List[RewriteReport]:
        """The driver's report of every graph it ran on, in order."""
        return [r.report for r in self.records if r.report is not None]

    def __repr__(self):
        return (f"pypm_verified.inductor_pass(target={self.target!r}, "
                f"{len(self.patterns)} patterns, skip={list(self.skip)})")

    def __deepcopy__(self, memo):
        # torch.compile snapshots Inductor's config with copy.deepcopy; the
        # pass is shared, not copied (its patterns may hold the engine's
        # handles, and its records belong to the one pass the user reads)
        return self

    def install(self):
        """A context manager registering this pass as Inductor's
        ``pre_grad_custom_pass`` (``torch._inductor.config.patch``)."""
        import torch._inductor.config as inductor_config
        return inductor_config.patch(pre_grad_custom_pass=self)

    # ---------------------------------------------------------------- cache key

    def uuid(self) -> str:
        """A hash of what decides the rewrite: the rules' sources (their
        modules' files and the rule functions), the profitability table, the
        options and the code of the pass and of the driver."""
        if self._uuid is None:  # the rules and options: fixed for this pass
            h = hashlib.sha256()
            package = __name__.rsplit(".", 1)[0]
            parts = [_file_text(__name__)]
            parts += [_file_text(f"{package}.{m}") for m in _DRIVER_MODULES]
            parts.append(repr((self.target, self.engine, self.check_profitability,
                               self.max_iterations, self.skip,
                               sorted(self.differentiable.items()),
                               [(r.name, r.differentiable) for p in self.patterns
                                for r in p.rules])))
            for p in self.patterns:
                parts.append(f"{p.module}.{p.qualname}:{_file_text(p.module)}")
                parts.extend(f"{r.name}:{_source(r.fn)}" for r in p.rules)
            for s in parts:
                h.update(s.encode())
                h.update(b"\0")
            self._uuid = h.hexdigest()
        # the table may change between compiles (profitability.use_table)
        table = json.dumps(profitability.table(), sort_keys=True, default=str)
        return hashlib.sha256((self._uuid + table).encode()).hexdigest()

    def rule_differentiable(self, rule) -> Tuple[Optional[bool], str]:
        """Whether ``rule`` may fire in a training graph, and who says so:
        the pass's ``differentiable={name: flag}`` first, then the rule's own
        ``@pm.rule(..., differentiable=flag)``, then :data:`DIFFERENTIABLE`
        (the library's rules, from the op registry); ``(None, "")`` when
        none does (the rule then fires in inference only)."""
        if rule.name in self._given:
            return self._given[rule.name], "inductor_pass(differentiable=...)"
        flag = getattr(rule, "differentiable", None)
        if flag is not None:
            return flag, f"@pm.rule(differentiable={flag}) at {rule.where}"
        if rule.name in DIFFERENTIABLE:
            return DIFFERENTIABLE[rule.name], "DIFFERENTIABLE"
        return None, ""

    # --------------------------------------------------------------------- the pass

    def __call__(self, graph: fx.Graph) -> None:
        """Rewrite ``graph`` (the graph Dynamo captured, as Inductor's
        pre-grad passes hand it) in place; record what happened."""
        gm = graph.owning_module
        rec = GraphRecord(len(self.records), "passed through", nodes=count_calls(graph))
        try:
            self._rewrite(gm, rec)
        except Exception as e:  # never break the compile: the graph stays as captured
            rec.status = "passed through"
            rec.note = f"rewrite failed ({type(e).__name__}: {_first_line(e)})"
        self.records.append(rec)
        if rec.status == "passed through":
            warnings.warn(f"pypm_verified.inductor_pass: {rec.line()}", PassThroughWarning,
                          stacklevel=2)
        log_graph(log, self.verbose, "pypm_verified.inductor_pass", rec)

    def _rewrite(self, gm: Optional[fx.GraphModule], rec: GraphRecord) -> None:
        if gm is None:
            rec.note = "the graph has no owning GraphModule"
            return
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        vals = [n.meta.get("example_value", n.meta.get("val")) for n in placeholders]
        if any(v is None for v in vals):
            rec.note = "an input of the captured graph has no example value"
            return
        if rec.nodes == 0:
            rec.status = "unchanged"
            return
        training = torch.is_grad_enabled() and any(
            isinstance(v, torch.Tensor) and v.requires_grad for v in vals)
        t0 = time.perf_counter()
        traced = _trace_aten(gm, vals)
        rec.export_s = time.perf_counter() - t0
        declined = {s: self.skip_reason for s in self.skip}
        if training:
            for p in self.patterns:
                for r in p.rules:
                    if r.name in declined:
                        continue
                    flag, said = self.rule_differentiable(r)
                    if flag is None:
                        declined[r.name] = (
                            "training graph: not known to be differentiable "
                            f"(@pm.rule(..., differentiable=True) or inductor_pass("
                            f"differentiable={{{r.name!r}: True}}) fires it)")
                    elif not flag:
                        declined[r.name] = (
                            "training graph: the replacement has no autograd formula "
                            "(inference-only)" if said == "DIFFERENTIABLE" else
                            f"training graph: not differentiable ({said})")
        t0 = time.perf_counter()
        driver = SkippingDriver(traced, self.patterns, engine=self.engine, target=self.target,
                                max_iterations=self.max_iterations,
                                check_profitability=self.check_profitability, skip=declined)
        rec.report = driver.run()
        rec.rewrite_s = time.perf_counter() - t0
        if rec.report.total == 0:
            rec.status = "unchanged"
            rec.note = "training graph" if training else ""
            return
        _replace_graph(gm, traced)
        rec.status = "rewritten"
        rec.note = "training graph" if training else ""


def _trace_aten(gm: fx.GraphModule, vals) -> fx.GraphModule:
    """``gm`` traced to ATen (pre-dispatch: ``aten.linear``, ``aten.matmul``,
    ``aten.softmax``, as ``torch.export`` gives) on its inputs' fake values,
    in the fake mode of the compile (symbolic sizes kept)."""
    from torch._guards import detect_fake_mode
    from torch.fx.experimental.proxy_tensor import make_fx
    fake_mode = detect_fake_mode() or detect_fake_mode(vals)
    if fake_mode is None:
        raise RuntimeError("no fake mode for the captured graph's example values")
    args = []
    for v in vals:
        if isinstance(v, torch.Tensor) and getattr(v, "fake_mode", None) is not fake_mode:
            v = fake_mode.from_tensor(v)
        args.append(v)
    with fake_mode, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = make_fx(gm, pre_dispatch=True)(*args)
    _drop_identity_casts(traced)
    return traced


_TO = torch.ops.aten.to


def _drop_identity_casts(gm: fx.GraphModule) -> None:
    """Remove the ``aten.to`` calls that return their input unchanged (same
    dtype, device and layout, no copy): the pre-dispatch trace keeps them
    (HF's ``softmax(...).to(q.dtype)``), ``torch.export`` drops them, and the
    rules are written for the latter."""
    for n in list(gm.graph.nodes):
        if n.op != "call_function" or getattr(n.target, "overloadpacket", None) is not _TO \
                or not n.args or not isinstance(n.args[0], fx.Node):
            continue
        a, b = n.args[0].meta.get("val"), n.meta.get("val")
        if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
            continue
        copy = n.kwargs.get("copy", False) or any(x is True for x in n.args[1:])
        fmt = n.kwargs.get("memory_format")
        if copy or fmt not in (None, torch.preserve_format) or \
                (a.dtype, a.device, a.layout) != (b.dtype, b.device, b.layout):
            continue
        n.replace_all_uses_with(n.args[0])
        gm.graph.erase_node(n)


def _replace_graph(gm: fx.GraphModule, new: fx.GraphModule) -> None:
    """Replace the body of ``gm``'s graph (in place) with ``new``'s, the
    placeholders kept: both take the same inputs in the same order."""
    graph = gm.graph
    old_ph = [n for n in graph.nodes if n.op == "placeholder"]
    new_ph = [n for n in new.graph.nodes if n.op == "placeholder"]
    if len(old_ph) != len(new_ph):
        raise RuntimeError(f"the traced graph takes {len(new_ph)} inputs, the captured "
                           f"graph {len(old_ph)}")
    for n in new.graph.nodes:  # constants the trace lifted: move them onto gm
        if n.op == "get_attr":
            name = f"_pypm_{n.target}"
            i = 0
            while hasattr(gm, name):
                i += 1
                name = f"_pypm_{n.target}_{i}"
            setattr(gm, name, getattr(new, n.target))
            n.target = name
    old_body = [n for n in graph.nodes if n.op != "placeholder"]
    (old_out,) = [n for n in old_body if n.op == "output"]
    val_map = dict(zip(new_ph, old_ph))
    try:
        with graph.inserting_before(old_out):
            out = graph.graph_copy(new.graph, val_map)
    except Exception:  # leave the captured graph as it was
        for n in reversed([v for k, v in val_map.items() if k not in new_ph]):
            graph.erase_node(n)
        raise
    old_out.args = (out,)
    for n in reversed(old_body):
        if n is not old_out:
            graph.erase_node(n)
    graph.lint()
    gm.recompile()


def inductor_pass(rules=None, target: str = "cpu", **kwargs) -> InductorPass:
    """The rule library as an Inductor custom graph pass (see
    :class:`InductorPass`)."""
    return InductorPass(rules, target, **kwargs)
