"""The embedded DSL: operators (:mod:`.operators`), the tracer
(:mod:`.trace`) and the symbolic values it computes with
(:mod:`.symbolic`), the AST frontend (:mod:`.ast_transform`), patterns
(:mod:`.patterns`), their lowering to the core calculus (:mod:`.lowering`),
rules (:mod:`.rules`), the context their bodies build in
(:mod:`.building`) and Relay's pattern features as sugar (:mod:`.relay`)."""
from .operators import Op, op
from .patterns import Pattern, pattern
from .rules import Rule, rule
from .symbolic import var

__all__ = ["Op", "op", "Pattern", "pattern", "Rule", "rule", "var"]
