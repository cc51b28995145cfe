"""The embedded DSL: operators (:mod:`.operators`), the tracer
(:mod:`.trace`) and the symbolic values it computes with
(:mod:`.symbolic`), the AST frontend (:mod:`.ast_transform`), patterns
(:mod:`.patterns`), their lowering to the core calculus (:mod:`.lowering`),
rules (:mod:`.rules`), the context their bodies build in
(:mod:`.building`), Relay's pattern features as sugar (:mod:`.relay`), and
PyTorch code in bodies (:mod:`.torch_code`, with the labels of PyTorch
targets it applies, :mod:`.torch_labels`: both import torch when used).
Never the PyTorch layer (:mod:`pypm_verified.torch`)."""
from .operators import Op, op
from .patterns import Pattern, pattern
from .rules import Rule, rule
from .symbolic import var

__all__ = ["Op", "op", "Pattern", "pattern", "Rule", "rule", "var"]
