"""``check-rules``: are the rewrite rules right?

The matcher is proved; a rewrite is only as correct as its rule. For every
``@pm.rule``, :func:`check_rules` generates concrete PyTorch subgraphs from
the rule's *pattern* -- every alternate, operator-variable choice and
recursion depth up to a bound, with shapes, dtypes and constants drawn from
what the guards plausibly admit -- runs the rule on them through the real
matcher and driver, and compares the original and rewritten subgraphs in
torch. Each rule comes out (:class:`RuleResult`):

* **tested**: no counterexample in N instances the rule fired on (N and the
  instance space are in the result);
* **refuted**: a concrete counterexample -- the subgraph, its input shapes
  and dtypes, the constants, the error;
* **vacuous**: the guards admit none of the generated instances (nothing
  matched, or the rule's asserts declined every match);
* **degenerate**: the rule fired only on instances where an axis its
  pattern reduces, normalizes, softmaxes or contracts has size 1 (or
  constant inputs along it), where a wrong rule cannot show;
* **proved**: tested, and every structure it fired on (operators, axes,
  constants and input ranks fixed, sizes free) proved equal to its
  replacement over the reals for every size by :mod:`.smt` (z3 over an
  index-level semantics of the ATen ops); the structures are those the
  generator reached, not every rank.

For a tested rule, every guard (each ``assert`` of the rule, each conjunct
of its pattern's guards) is dropped in turn to look for a counterexample:
"necessary" guards come with the counterexample they exclude, "redundant"
ones did not change any result.

One module per concept: :mod:`.instances` (instance generation from the
lowered pattern), :mod:`.hints` (constants read from the rule's source),
:mod:`.evaluate` (build, match, fire, compare), :mod:`.smt` (proofs), :mod:`.guards` (guard
necessity), :mod:`.checker` (the search per rule, and its split into units
of work: the instance search, one proof per structure, the merge),
:mod:`.report` (result types, JSON, Markdown).

    from pypm_verified.checking import check_rules
    from pypm_verified.library import default_patterns
    for r in check_rules(default_patterns(), examples=50):
        print(r.rule, r.status, r.examples)
"""
from .checker import (FAST, FULL, InstancePhase, Structure, check_rule, check_rule_instances,
                      check_rules, default_engine, finish_rule, prove_structure)
from .report import (STATUSES, Counterexample, GuardResult, RuleResult, markdown,
                     summary_lines)

__all__ = ["check_rules", "check_rule", "default_engine", "RuleResult", "GuardResult",
           "Counterexample", "STATUSES", "FAST", "FULL", "markdown", "summary_lines",
           "check_rule_instances", "prove_structure", "finish_rule", "Structure",
           "InstancePhase"]
