"""What a rule body receives from the PyTorch driver (:mod:`.driver`): its
bound values (:class:`Value`: FX values and constants that behave as
tensors), its ``ctx`` (:class:`RuleContext`: the target, the profitability
table, weights folded at rewrite time, constants read) and the error an
invalid replacement raises (:class:`RewriteError`)."""
from __future__ import annotations

import sys
from typing import Dict, List, Optional, Tuple

import torch
import torch.fx as fx

from ..core.graph import TensorShape
from ..dsl.symbolic import TensorCode
from . import dynamic, profitability

TARGETS = profitability.TARGETS
_REFUSAL_FRAMES = 6  # how far up a refusal looks for the rule's assert
#: identity copies a constant goes through before a rule reads it (RuleContext.constant)
_COPIES = (torch.ops.aten.clone.default, torch.ops.aten.lift_fresh_copy.default)


class RewriteError(RuntimeError):
    """A rule built an invalid replacement (wrong shape or dtype, an operator
    without a torch target, a call torch rejects)."""


class RuleContext:
    """What a rule's ``ctx`` parameter receives from the PyTorch driver:
    ``target`` (the device the rewrite optimizes for, "cpu" or "cuda") and
    :meth:`profitable`, the measured profitability table on that target
    (answering True for every kernel when ``check_profitability`` is off,
    e.g. to make every rule fire in a benchmark or a test).

    ``refusals`` lists, since the driver last cleared it (before each rule
    it fires), every ``profitable`` call that answered False: ``(sites,
    reason)``, the ``(file, line)`` of the call and of its callers (a few
    frames up: the guard may call a helper that calls ``profitable``) and
    :func:`~pypm_verified.torch.profitability.refusal`'s reason, so that a
    rule declining on a ``ctx.profitable(...)`` guard is reported with the
    threshold and the size seen (:meth:`explain`)."""

    __slots__ = ("target", "check_profitability", "refusals", "driver", "memo")

    def __init__(self, target: str, check_profitability: bool = True):
        if target not in TARGETS:
            raise ValueError(f"unknown target {target!r}; expected one of {TARGETS}")
        self.target = target
        self.check_profitability = check_profitability
        self.refusals: List[Tuple[Tuple[Tuple[str, int], ...], str]] = []
        self.driver = None
        #: a rewrite's scratch space for what a rule helper computed from the
        #: graph (e.g. a folded mask), by helper; an entry is reused only
        #: after checking that what it read is unchanged
        self.memo: Dict[str, dict] = {}

    def fold_cat(self, values, dim: int = 0):
        """The concatenation of the weights ``values`` along ``dim``, computed
        now (at rewrite time) and added to the program as a new constant
        input; a :class:`Value`, or None when a value is not a weight of the
        program (then the rule should decline). Reused for the same weights."""
        if self.driver is None:
            return None
        return self.driver.fold_cat(values, dim)

    def constant(self, value) -> Optional[torch.Tensor]:
        """The tensor ``value`` holds when it is a constant of the program (a
        parameter, buffer or lifted tensor constant, maybe copied by
        ``clone``/``lift_fresh_copy``), else None: a rule may read a small
        constant's value (e.g. a 0-d fill) to decide whether it applies."""
        n = getattr(value, "fx", None)
        weights = getattr(self.driver, "weights", None) or {}
        while n is not None and n.op == "call_function" and n.target in _COPIES and n.args:
            n = n.args[0] if isinstance(n.args[0], fx.Node) else None
        if n is None or n.op != "placeholder":
            return None
        return weights.get(n.name)

    def profitable(self, rule: str, *, dtype, variant: str = "default", **sizes) -> bool:
        """:func:`pypm_verified.torch.profitability.profitable` on this target
        (a refusal is recorded in :attr:`refusals`)."""
        if not self.check_profitability:
            return True
        # speed, not correctness: a symbolic size is asked with its example value
        sizes = {k: dynamic.hint(v) if isinstance(v, torch.SymInt) else v
                 for k, v in sizes.items()}
        why = profitability.refusal(rule, self.target, dtype=dtype, variant=variant, **sizes)
        if why is None:
            return True
        sites, frame = [], sys._getframe(1)
        while frame is not None and len(sites) < _REFUSAL_FRAMES:
            sites.append((frame.f_code.co_filename, frame.f_lineno))
            frame = frame.f_back
        self.refusals.append((tuple(sites), why))
        return False

    def explain(self, decline):
        """``decline`` (a :class:`~pypm_verified.dsl.rules.Decline`) with the
        reason of the profitability refusal recorded at its failing assert,
        if there is one."""
        for sites, why in reversed(self.refusals):
            if any(decline.covers(f, ln) for f, ln in sites):
                return decline.with_detail(why)
        return decline

    def __repr__(self):
        return (f"RuleContext(target={self.target!r}"
                + ("" if self.check_profitability else ", check_profitability=False") + ")")


class Value(TensorCode):
    """A bound value in a rule body: an FX value or a constant. It behaves
    as a tensor (:class:`~pypm_verified.dsl.symbolic.TensorCode`): ``torch.*``
    functions, operators and Tensor methods on it build ATen nodes.

    ``fx`` (the FX node, None for constants), ``is_const``, ``value`` (the
    constant's Python/torch value; for a list argument with FX elements, such
    as a view's sizes in a dynamic program, the list of the elements' values:
    numbers, ``torch.SymInt``s, tensors' Values; None for tensors), ``shape`` (a
    :class:`TensorShape`, None when unknown; in a program with dynamic
    shapes a symbolic size is its ``torch.SymInt``, whose comparisons are
    decided for every admissible size or decline the rule),
    ``rank``, ``dtype`` (``pm.f32`` ...), ``torch_dtype``, ``device``.
    """

    __slots__ = ("fx", "term", "is_const", "value", "meta", "symbolic")

    def __init__(self, term, fx_node: Optional[fx.Node], value=None, is_const=False,
                 symbolic: bool = False):
        self.symbolic = symbolic  # dynamic shapes: symbolic sizes as SymInts
        self.term = term
        self.fx = fx_node
        self.is_const = is_const
        self.value = value
        self.meta = fx_node.meta.get("val") if fx_node is not None else None

    @property
    def shape(self) -> Optional[TensorShape]:
        shape = self.term.shape
        # dynamic shapes (the term holds example values): the SymInts instead
        if self.symbolic and shape is not None and isinstance(self.meta, torch.Tensor) \
                and dynamic.is_symbolic(self.meta):
            return TensorShape(self.meta.shape)
        return shape

    @property
    def rank(self) -> Optional[int]:
        return self.term.rank

    @property
    def dtype(self):
        return self.term.dtype

    @property
    def torch_dtype(self) -> Optional[torch.dtype]:
        return getattr(self.meta, "dtype", None)

    @property
    def device(self) -> Optional[torch.device]:
        return getattr(self.meta, "device", None)

    def __repr__(self):
        if self.is_const:
            return f"<const {self.value!r}>"
        return f"<value {self.fx.name if self.fx is not None else '?'}{self.term.type_str()}>"


__all__ = ["RewriteError", "RuleContext", "Value", "TARGETS"]
