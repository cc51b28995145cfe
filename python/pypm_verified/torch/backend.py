"""``torch.compile`` integration: a Dynamo backend that rewrites every graph
Dynamo captures with the rule library, then hands it to Inductor (or any
other backend).

    import pypm_verified as pm
    compiled = torch.compile(model, backend=pm.backend(rules=None, then="inductor"))
    with torch.no_grad():
        out = compiled(**inputs)

Route, per captured graph (:meth:`Backend.__call__`):

1. Dynamo gives an FX ``GraphModule`` at the torch level (``torch.nn.functional``
   calls, parameters as inputs) and its example inputs. It is re-exported
   with ``torch.export.export`` (non-strict) and ``run_decompositions({})``:
   the ATen IR the driver and the rule library are written for (the same IR
   as ``python -m pypm_verified rewrite``).
2. The driver (:class:`~.driver.Driver`) rewrites that graph with the rules,
   the target's profitability table included; rules named in ``skip`` are
   declined (reason "skipped under torch.compile").
3. If a rule fired, the rewritten graph (optionally checked against the
   captured one on the example inputs, ``check=True``) goes to ``then``;
   if none fired, the *captured* graph goes there untouched, so the result
   is exactly ``torch.compile(model, backend=then)``.

``then``: ``"inductor"`` (``torch._inductor.compile_fx.compile_fx``),
``"eager"`` (run the rewritten graph as it is), any name Dynamo knows
(``torch._dynamo.list_backends()``) or a callable ``(gm, example_inputs) ->
callable`` (a Dynamo backend).

The fused kernels the rules emit compile under Inductor: ``aten.linear``,
``aten.gelu``, ``aten.rms_norm`` and ``aten.scaled_dot_product_attention``
are ATen ops Inductor lowers or decomposes itself (SDPA to the CPU flash
attention kernel), and ``pypm::linear_act`` is a ``torch.library`` custom op
with a fake implementation, which Inductor calls as an extern kernel.

Graphs that are not rewritten, with a note (``Backend.records``, and a
:class:`PassThroughWarning`), and passed to ``then`` unchanged:

* *training graphs*: grad mode on and an input requiring grad (with
  ``inline_inbuilt_nn_modules``, Dynamo passes the parameters as inputs):
  ``pypm::linear_act`` has no autograd formula. Run under
  ``torch.no_grad()`` or ``torch.inference_mode()`` to rewrite, or train
  with Inductor and :func:`pypm_verified.inductor_pass` (a pre-grad custom
  pass: the differentiable rules fire and AOTAutograd derives their
  backward, :mod:`.inductor`);
* *dynamic shapes* (a symbolic size in the captured graph, e.g. after a
  recompile with ``dynamic=None``, or ``dynamic=True``): the re-export would
  need the shape constraints Dynamo inferred; pass ``dynamic=False`` to
  rewrite each static graph;
* graphs that mutate their inputs (in-place ops on inputs or buffers),
  graphs that fail to export or rewrite, whose rewritten outputs differ
  from the captured graph's on the example inputs (``check=True``), or that
  ``then`` fails to compile once rewritten (it is then given the captured
  graph).

A graph break gives Dynamo several graphs: each is rewritten on its own
(a pattern split by the break cannot match).

``skip``: the rule names (``Rule.name``: ``gelu_erf``, ``gelu_tanh``,
``rms_norm``, ``sdpa``, ``linear_nt``, ``linear_act``) never fired in the
compiled path. The default ``"auto"`` is :data:`COMPILED_SKIP` for
``then="inductor"`` -- the rules whose kernel Inductor generates itself --
and nothing otherwise.
"""
from __future__ import annotations

import logging
import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.fx as fx

from ..dsl.patterns import Pattern
from ..engines.matching import check_engine
from ..errors import first_line
from ..rewriting.report import RewriteReport
from .check import TOLERANCE
from .driver import TARGETS, Driver, count_calls

__all__ = ["Backend", "GraphRecord", "PassThroughWarning", "COMPILED_SKIP", "backend",
           "SkippingDriver"]

#: the backend's logger: one record per graph (``verbose=True``: INFO, shown
#: on stdout by :func:`show_verbose`; else DEBUG)
log = logging.getLogger(__name__)

#: Rules skipped by default (``skip="auto"``) when the rewritten graph goes to
#: Inductor: those whose replacement Inductor generates itself from the
#: written-out form. GELU (erf and tanh forms) and RMSNorm are chains of
#: pointwise ops and a reduction that Inductor fuses into one loop either way
#: (``aten.rms_norm`` is even decomposed back into the same chain before
#: lowering), so under Inductor they change nothing but the graph it starts
#: from; skipping them leaves those parts exactly as ``torch.compile`` alone
#: compiles them. ``sdpa`` (the CPU flash-attention kernel; Inductor's own
#: ``fuse_attention`` pass does not match HF's eager attention, see
#: bench/results/compile.md), ``linear_act`` (oneDNN's GEMM with a fused
#: activation, which Inductor uses only with ``freezing``) and ``linear_nt``
#: stay. ``skip=()`` fires every rule (the "no skip" column of
#: bench/results/compile.md measures what that does).
COMPILED_SKIP: Dict[str, Tuple[str, ...]] = {
    "inductor": ("gelu_erf", "gelu_tanh", "rms_norm"),
}


class PassThroughWarning(UserWarning):
    """A captured graph the backend handed to ``then`` without rewriting it
    (the message says why)."""


@dataclass
class GraphRecord:
    """What the backend did with one graph Dynamo captured.

    ``status``: ``"rewritten"`` (a rule fired; the rewritten graph went to
    ``then``), ``"unchanged"`` (no rule fired; the captured graph went to
    ``then``) or ``"passed through"`` (not rewritten: ``note`` says why).
    ``report``: the driver's (None when it did not run); ``nodes``: call
    nodes of the captured graph; ``export_s``, ``rewrite_s``, ``check_s``,
    ``then_s``: seconds spent re-exporting, rewriting, checking and in
    ``then`` (compiling)."""

    index: int
    status: str
    note: str = ""
    report: Optional[RewriteReport] = None
    nodes: int = 0
    export_s: float = 0.0
    rewrite_s: float = 0.0
    check_s: float = 0.0
    then_s: float = 0.0
    max_abs_diff: Optional[float] = None

    @property
    def firings(self) -> Dict[str, int]:
        """Rule -> firings in the graph ``then`` received: empty unless
        ``status`` is "rewritten" (``report`` still says what fired in a
        rewrite that was then not used)."""
        if self.status != "rewritten" or self.report is None:
            return {}
        return dict(self.report.firings)

    def line(self) -> str:
        """One line: the graph, its status, the firings (``[sdpax1]``,
        ``[nothing fired]``), the matches whose rules all declined with the
        first rule's reason (``matched, declined: Attention x1 (sdpa: not
        profitable ...)``) and the note."""
        fired = ", ".join(f"{k}x{n}" for k, n in sorted(self.firings.items())) or "nothing fired"
        s = f"graph {self.index} ({self.nodes} nodes): {self.status}"
        if self.status != "passed through":
            s += f" [{fired}]"
            declined = self.report.declined_summary() if self.report is not None else ""
            if declined:  # a pattern matched, its rules declined: why
                s += f" matched, declined: {declined}"
        if self.note:
            s += f" -- {self.note}"
        return s


def _patterns(rules) -> List[Pattern]:
    from ..library import default_patterns, load_rules
    if rules is None:
        return default_patterns()
    if isinstance(rules, Pattern):
        rules = [rules]
    if isinstance(rules, str):
        rules = [rules]
    if not isinstance(rules, (list, tuple)):
        raise TypeError("rules must be None (the library), a @pm.pattern, a rules module name "
                        f"or .py file, or a list of those; got {type(rules).__name__}")
    out: List[Pattern] = []
    for r in rules:
        if isinstance(r, Pattern):
            out.append(r)
        elif isinstance(r, str):
            out.extend(load_rules(r))
        else:
            raise TypeError(f"rules: expected @pm.pattern patterns or rules module names, "
                            f"not {r!r}")
    if not any(p.rules for p in out):
        raise ValueError("rules: none of the patterns has a @pm.rule")
    return out


def _resolve_then(then) -> Tuple[str, Callable]:
    """``(name, backend callable)`` for ``then``."""
    if callable(then):
        return getattr(then, "__name__", type(then).__name__), then
    if not isinstance(then, str):
        raise TypeError(f"then must be 'inductor', 'eager', a Dynamo backend name or a "
                        f"callable (gm, example_inputs) -> callable; got {type(then).__name__}")
    if then == "inductor":
        def inductor(gm, example_inputs):
            from torch._inductor.compile_fx import compile_fx
            return compile_fx(gm, example_inputs)
        return then, inductor
    if then == "eager":
        return then, lambda gm, example_inputs: gm.forward
    import torch._dynamo
    known = torch._dynamo.list_backends(exclude_tags=())
    if then not in known:
        raise ValueError(f"then={then!r}: unknown backend; expected 'inductor', 'eager', a "
                         f"Dynamo backend ({', '.join(sorted(known))}) or a callable "
                         "(gm, example_inputs) -> callable")
    return then, torch._dynamo.lookup_backend(then)


class _Stdout(logging.StreamHandler):
    """A handler writing to ``sys.stdout`` as it is when a record comes (a
    test, or a caller, may have replaced it since), flushed after each."""

    def __init__(self):
        super().__init__(sys.stdout)

    @property
    def stream(self):
        return sys.stdout

    @stream.setter
    def stream(self, value):
        pass


def show_verbose(logger: logging.Logger) -> None:
    """What a compiled path's ``verbose=True`` installs on its ``logger``
    (once): its INFO records, one line each as is, on stdout (what the
    option always showed); the logger is set to INFO if it showed less."""
    if not any(isinstance(h, _Stdout) for h in logger.handlers):
        h = _Stdout()
        h.setLevel(logging.INFO)
        h.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(h)
    if not logger.isEnabledFor(logging.INFO):
        logger.setLevel(logging.INFO)


def log_graph(logger: logging.Logger, verbose: bool, what: str, rec: "GraphRecord") -> None:
    """Log ``rec``'s line (``what: line``): INFO when ``verbose`` (shown by
    :func:`show_verbose`'s handler), else DEBUG."""
    logger.log(logging.INFO if verbose else logging.DEBUG, "%s: %s", what, rec.line())


class SkippingDriver(Driver):
    """The driver, declining the rules named in ``skip`` (with the reason
    ``why``; or ``skip`` maps each rule name to its own reason)."""

    def __init__(self, *args, skip=(), why="", **kwargs):
        super().__init__(*args, **kwargs)
        # (Driver.skip is the search's hook)
        self.skip_rules = dict(skip) if isinstance(skip, dict) else dict.fromkeys(skip, why)
        self.why = why

    def fire_at(self, rule, values, root, declined=None):
        if rule.name in self.skip_rules:
            if declined is not None:
                declined.append((rule.name, self.skip_rules[rule.name]))
            return None
        return super().fire_at(rule, values, root, declined)


def _tensors(out) -> List[torch.Tensor]:
    import torch.utils._pytree as pytree
    return [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]


def _max_diff(ref, got) -> Tuple[float, Optional[str]]:
    """Largest abs difference of the outputs, and why they disagree (None: within the
    dtype-aware tolerance of :mod:`.check`)."""
    a, b = _tensors(ref), _tensors(got)
    if len(a) != len(b):
        return float("nan"), f"{len(b)} output tensors instead of {len(a)}"
    worst = 0.0
    for i, (x, y) in enumerate(zip(a, b)):
        if x.shape != y.shape or x.dtype != y.dtype:
            return float("nan"), f"output {i}: {tuple(y.shape)} {y.dtype} instead of " \
                                 f"{tuple(x.shape)} {x.dtype}"
        if not x.is_floating_point():
            if not torch.equal(x, y):
                return float("inf"), f"output {i} differs"
            continue
        if x.numel() == 0:
            continue
        x64, y64 = x.detach().double(), y.detach().double()
        if not torch.equal(torch.isfinite(x64), torch.isfinite(y64)):
            return float("inf"), f"output {i}: non-finite values differ"
        fin = torch.isfinite(x64)
        d = (x64 - y64).abs()[fin]
        if d.numel():
            worst = max(worst, float(d.max()))
            atol, rtol = TOLERANCE.get(x.dtype, (1e-4, 1e-3))
            if bool((d > atol + rtol * x64[fin].abs()).any()):
                return worst, f"output {i}: max abs difference {float(d.max()):.3g} " \
                              f"exceeds atol {atol:g} + rtol {rtol:g}*|ref|"
    return worst, None


def _symbolic(gm: fx.GraphModule, example_inputs) -> bool:
    """Whether the captured graph has a symbolic size (dynamic shapes)."""
    if any(isinstance(x, (int, torch.SymInt)) and not isinstance(x, bool)
           for x in example_inputs):
        return True
    for n in gm.graph.nodes:
        if n.op != "placeholder":
            continue
        v = n.meta.get("example_value", n.meta.get("val"))
        if isinstance(v, torch.SymInt):
            return True
        if isinstance(v, torch.Tensor) and any(isinstance(d, torch.SymInt)
                                               for d in (*v.shape, *v.stride())):
            return True
    return False


class Recorded:
    """What a compiled path keeps of each graph it saw: ``records`` (a
    :class:`GraphRecord` each), the firings summed and a summary."""

    records: List[GraphRecord]
    _what, _nothing = "pypm_verified.backend", "no graph compiled yet"

    @property
    def firings(self) -> Dict[str, int]:
        """Rule -> firings, summed over every graph seen so far."""
        out: Dict[str, int] = {}
        for r in self.records:
            for k, n in r.firings.items():
                out[k] = out.get(k, 0) + n
        return out

    def summary(self) -> str:
        """One line per graph seen so far."""
        if not self.records:
            return f"{self._what}: {self._nothing}"
        return "\n".join(r.line() for r in self.records)


    def _configure(self, rules, target: str, engine: str, check_profitability: bool,
                   max_iterations: int, skip, auto_skip: Sequence[str], auto_reason: str,
                   given_reason: str) -> None:
        """Check and set the options both compiled paths take: ``patterns``,
        ``target``, ``engine``, ``check_profitability``, ``max_iterations``,
        ``skip`` (``"auto"``: those of ``auto_skip`` among the rules, with
        ``auto_reason``; else rule names, each checked, with ``given_reason``)
        and ``skip_reason``. Raises ``ValueError`` naming a bad option."""
        self.patterns = _patterns(rules)
        if target not in TARGETS:
            raise ValueError(f"unknown target {target!r}; expected one of {TARGETS}")
        self.target = target
        self.engine = check_engine(engine)
        if not isinstance(max_iterations, int) or isinstance(max_iterations, bool) \
                or max_iterations < 1:
            raise ValueError(f"max_iterations must be a positive int, got {max_iterations!r}")
        self.max_iterations = max_iterations
        self.check_profitability = bool(check_profitability)
        known = sorted({r.name for p in self.patterns for r in p.rules})
        if isinstance(skip, str):
            if skip != "auto":
                raise ValueError(f"skip={skip!r}: expected 'auto' or a list of rule names "
                                 f"(of {', '.join(known)})")
            self.skip = tuple(s for s in auto_skip if s in known)
            self.skip_reason = auto_reason
        else:
            self.skip = tuple(skip)
            unknown = [s for s in self.skip if s not in known]
            if unknown:
                raise ValueError(f"skip: unknown rule name(s) {', '.join(map(repr, unknown))}; "
                                 f"the rules are {', '.join(known)}")
            self.skip_reason = given_reason


class Backend(Recorded):
    """A Dynamo backend (``torch.compile(model, backend=Backend(...))``) that
    rewrites each captured graph with ``rules`` and compiles the result with
    ``then``; see the module docstring. Made by :func:`pypm_verified.backend`.

    ``rules``: None (the library, :func:`~pypm_verified.library.default_patterns`),
    a ``@pm.pattern``, a rules module name or ``.py`` file
    (:func:`~pypm_verified.library.load_rules`), or a list of those.
    ``then``: ``"inductor"`` (default), ``"eager"``, a Dynamo backend name or a
    callable ``(gm, example_inputs) -> callable``.
    ``target`` ("cpu" or "cuda"), ``engine`` ("verified" or "reference"),
    ``check_profitability`` and ``max_iterations``: the driver's.
    ``skip``: rule names never fired here; ``"auto"`` (default):
    :data:`COMPILED_SKIP` for ``then``.
    ``check``: compare the rewritten graph's outputs with the captured graph's
    on the example inputs (runs both once; a mismatch passes the graph
    through unchanged). ``verbose``: one line per graph on stdout (logger
    ``pypm_verified.torch.backend``, INFO; without it the line is logged at
    DEBUG).

    ``records`` (one :class:`GraphRecord` per graph, in the order Dynamo
    compiled them), :attr:`firings` and :meth:`summary` say what happened."""

    def __init__(self, rules=None, then: Union[str, Callable] = "inductor", *,
                 target: str = "cpu", engine: str = "verified",
                 check_profitability: bool = True, skip: Union[str, Sequence[str]] = "auto",
                 check: bool = True, max_iterations: int = 20, verbose: bool = False):
        self.then_name, self._then = _resolve_then(then)
        self._configure(
            rules, target, engine, check_profitability, max_iterations, skip,
            COMPILED_SKIP.get(self.then_name, ()) if isinstance(then, str) else (),
            f"skipped under torch.compile(then={self.then_name!r}): it generates the same "
            "kernel from the original (COMPILED_SKIP; skip=() fires it)",
            "skipped under torch.compile (skip=...)")
        self.check = bool(check)
        self.verbose = bool(verbose)
        if self.verbose:
            show_verbose(log)
        self.records: List[GraphRecord] = []

    # ------------------------------------------------------------------ reporting

    def __repr__(self):
        return (f"pypm_verified.backend(then={self.then_name!r}, target={self.target!r}, "
                f"{len(self.patterns)} patterns, skip={list(self.skip)})")

    def _done(self, rec: GraphRecord) -> None:
        self.records.append(rec)
        if rec.status == "passed through":
            warnings.warn(f"pypm_verified.backend: {rec.line()}", PassThroughWarning,
                          stacklevel=3)
        log_graph(log, self.verbose, "pypm_verified.backend", rec)

    # --------------------------------------------------------------------- the pass

    def rewrite(self, gm: fx.GraphModule, example_inputs) -> Tuple[Optional[fx.GraphModule],
                                                                   GraphRecord]:
        """The rewritten graph (None when not rewritten) and the record; does not
        call ``then``."""
        rec = GraphRecord(len(self.records), "passed through", nodes=count_calls(gm.graph))
        if _symbolic(gm, example_inputs):
            rec.note = ("dynamic shapes (symbolic sizes in the captured graph) are not "
                        "rewritten; torch.compile(..., dynamic=False) gives static graphs")
            return None, rec
        if torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad
                                           for x in example_inputs):
            rec.note = ("training graph (grad enabled and inputs requiring grad): the fused "
                        "kernels have no autograd formulas; run under torch.no_grad() or "
                        "torch.inference_mode() to rewrite, or compile with Inductor and "
                        "pypm_verified.inductor_pass() to train through the rewrite")
            return None, rec
        if rec.nodes == 0:
            rec.status = "unchanged"
            return None, rec
        t0 = time.perf_counter()
        try:
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ep = torch.export.export(gm, tuple(example_inputs), strict=False)
                ep = ep.run_decompositions({})
        except Exception as e:
            rec.export_s = time.perf_counter() - t0
            rec.note = f"torch.export failed ({type(e).__name__}: {_first_line(e)})"
            return None, rec
        rec.export_s = time.perf_counter() - t0
        from torch.export.graph_signature import OutputKind
        mutated = [str(s.kind.name).lower() for s in ep.graph_signature.output_specs
                   if s.kind != OutputKind.USER_OUTPUT]
        if mutated:
            rec.note = (f"the graph mutates its inputs ({', '.join(sorted(set(mutated)))}); "
                        "not rewritten (the check would run the mutation twice)")
            return None, rec
        t0 = time.perf_counter()
        try:
            driver = SkippingDriver(ep.graph_module, self.patterns, engine=self.engine,
                                    target=self.target, max_iterations=self.max_iterations,
                                    check_profitability=self.check_profitability,
                                    skip=self.skip, why=self.skip_reason)
            rec.report = driver.run()
            for spec in ep.graph_signature.output_specs:
                arg = getattr(spec, "arg", None)
                if hasattr(arg, "name"):
                    arg.name = driver.replacement_name(arg.name)
            new = self._callable(ep)
        except Exception as e:
            rec.rewrite_s = time.perf_counter() - t0
            rec.report = None
            rec.note = f"rewrite failed ({type(e).__name__}: {_first_line(e)})"
            return None, rec
        rec.rewrite_s = time.perf_counter() - t0
        if rec.report.total == 0:
            rec.status = "unchanged"
            return None, rec
        if self.check:
            t0 = time.perf_counter()
            try:
                with torch.no_grad():
                    ref, got = gm(*example_inputs), new(*example_inputs)
                rec.max_abs_diff, why = _max_diff(ref, got)
            except Exception as e:
                why = f"the rewritten graph failed to run ({type(e).__name__}: {_first_line(e)})"
            rec.check_s = time.perf_counter() - t0
            if why is not None:
                rec.note = f"numerics check failed: {why}"
                return None, rec
        rec.status = "rewritten"
        return new, rec

    @staticmethod
    def _callable(ep) -> fx.GraphModule:
        """A GraphModule taking the captured graph's inputs and returning its
        outputs: the exported graph itself when every input and output is the
        user's (Dynamo passes parameters as inputs), else ``ep.module()``."""
        from torch.export.graph_signature import InputKind, OutputKind
        sig = ep.graph_signature
        if all(s.kind == InputKind.USER_INPUT for s in sig.input_specs) and \
                all(s.kind == OutputKind.USER_OUTPUT for s in sig.output_specs):
            gm = ep.graph_module
            gm.recompile()
            return gm
        return ep.module()

    def __call__(self, gm: fx.GraphModule, example_inputs):
        new, rec = self.rewrite(gm, example_inputs)
        t0 = time.perf_counter()
        try:
            if new is not None:
                try:
                    return self._then(new, example_inputs)
                except Exception as e:  # e.g. a compiler that cannot take a fused kernel
                    rec.status = "passed through"
                    rec.note = (f"{self.then_name} failed on the rewritten graph "
                                f"({type(e).__name__}: {_first_line(e)}); it compiled the "
                                "captured graph instead")
            return self._then(gm, example_inputs)
        finally:
            rec.then_s = time.perf_counter() - t0
            self._done(rec)


def _first_line(e: BaseException) -> str:
    return first_line(e, 300)  # a record's note stays short


def backend(rules=None, then: Union[str, Callable] = "inductor", **kwargs) -> Backend:
    """A Dynamo backend rewriting each captured graph with ``rules``, then
    compiling it with ``then``: ``torch.compile(model,
    backend=pypm_verified.backend(then="inductor"))``. See :class:`Backend`."""
    return Backend(rules, then, **kwargs)
