"""Rewriting with rules to a fixpoint: the one report type
(:mod:`.report`) and the rewriter of ``pm.Graph`` (:mod:`.graph_rewrite`).
The PyTorch driver (:mod:`pypm_verified.torch.driver`) fires rules the same
way (:meth:`pypm_verified.Rule.fire`) and reports with the same type."""
from .graph_rewrite import rewrite
from .report import RewriteReport

__all__ = ["rewrite", "RewriteReport"]
