"""``explain``: why a pattern does not match, at a node or over the model."""
from __future__ import annotations

import argparse
import os
from typing import Dict, List, Optional, Tuple

from .checks import (check_engine_library, check_html, check_imports, check_model_path,
                     check_patterns, load_program, load_rule_spec, read_example_inputs)
from . import heap
from .exitcodes import EXIT_OK, RuleFailure, UsageError
from ..errors import first_line
from .output import say, write_html
from .logs import log
from .parsing import _html_options, _import_option, _int_at_least, _verbosity_options, command

EXPLAIN_DESCRIPTION = """\
Why does a pattern not match? Loads MODEL (as `rewrite` does), imports its
graph into the term graph the rules match on, and explains pattern NAME:
with --node FX_NODE_NAME at that node (the match, or the deepest partial
match: which sub-pattern, alternate and child position failed, at which
node, and why: operator, guard and the values it read, unknown size,
conflict, fuel); without --node, the near misses over the whole model,
deepest first. The verdict is the matcher's (--engine); the explanation is
only attached to its "no". Where the pattern matches and has rules, its
rules are run on a copy of the model (as `rewrite` runs them, for --target,
the profitability table included unless --ignore-profitability) and each
match says which rule fires, or why each rule declines (its failed assert
with the values it read, or the profitability threshold and the size seen).
"""


def _configure_explain(sub) -> None:
    ex = sub.add_parser("explain", help="explain why a pattern does not match",
                        description=EXPLAIN_DESCRIPTION, epilog="""\
example:
  python -m pypm_verified explain bert.pt2 --pattern Attention --rules attention
  python -m pypm_verified explain m.pt2 --pattern MyPat --rules my_rules.py --node softmax
""", formatter_class=argparse.RawDescriptionHelpFormatter)
    ex.add_argument("model", help="model file (as for rewrite)")
    ex.add_argument("--pattern", required=True, metavar="NAME",
                    help="the pattern to explain (any pattern the rules define or call)")
    ex.add_argument("--node", metavar="FX_NODE_NAME",
                    help="the FX node to explain at (default: the near misses of the model)")
    ex.add_argument("--rules", action="append", metavar="MODULE_OR_FILE",
                    help="where the pattern is defined (repeatable; default: the library, "
                    "which 'library' names)")
    ex.add_argument("--engine", choices=("verified", "reference"), default="verified",
                    help="matcher whose verdict is explained (default: verified)")
    ex.add_argument("--target", choices=("cuda", "cpu"), default=None,
                    help="device the rules are run for at the matches (default: the device "
                    "the program's tensors are on, as rewrite)")
    ex.add_argument("--ignore-profitability", action="store_true",
                    help="run the rules at the matches whatever the profitability table says")
    ex.add_argument("--top", type=_int_at_least(1, "too few"), default=10, metavar="N",
                    help="near misses shown without --node, and matches whose rules are run "
                    "(default 10)")
    ex.add_argument("--example-inputs", metavar="FILE",
                    help="torch.save'd tuple of example inputs (TorchScript models)")
    _import_option(ex)
    _verbosity_options(ex, "errors and the explanation only")
    _html_options(ex, "the model's graph with the pattern's matches and near misses drawn "
                  "on it (where each attempt started and failed, the explanation on hover)")


def _explain_patterns(specs) -> list:
    """Every pattern of the ``--rules`` specs (or the library) and every
    pattern they call; a .py file without rules contributes its patterns."""
    from ..dsl.patterns import Pattern
    roots = []
    for spec in specs or [None]:
        if spec is None:
            from ..library import default_patterns
            roots.extend(default_patterns())
            continue
        try:
            roots.extend(load_rule_spec(spec))
        except UsageError:
            if not (spec.endswith(".py") and os.path.isfile(spec)):
                raise
            import importlib.util
            name = f"pypm_explain_{os.path.splitext(os.path.basename(spec))[0]}"
            mspec = importlib.util.spec_from_file_location(name, spec)
            mod = importlib.util.module_from_spec(mspec)
            try:
                mspec.loader.exec_module(mod)
            except Exception as e:  # noqa: BLE001 -- a user's file may raise anything
                raise UsageError(f"--rules {spec}: cannot import it: {type(e).__name__}: "
                                 f"{first_line(e)}") from None
            roots.extend(v for v in vars(mod).values() if isinstance(v, Pattern))
    out = {}
    for p in roots:
        out.setdefault(p, None)
        try:
            for q in p.linked.index:
                out.setdefault(q, None)
        except Exception as e:  # noqa: BLE001 -- PatternError and tracing errors
            raise UsageError(f"pattern {p.name}: {first_line(e)}") from None
    return list(out)


@command("explain", _configure_explain)
def explain_main(args, state: dict) -> int:
    """``explain``: see :data:`EXPLAIN_DESCRIPTION`. The rules are loaded and
    checked before MODEL's path (as ``rewrite`` does)."""
    dot = check_html(args, (args.model, "input MODEL"))
    check_imports(args.imports)
    check_engine_library(args.engine)
    with heap.importing():  # torch, the library, the rules: objects that live to the end
        try:
            import torch
        except ImportError:
            raise UsageError("PyTorch is not installed; pip install -e '.[torch]' "
                             "-c requirements/constraints.txt") from None
        from ..engines.explain import explain, explain_all, node_desc
        from ..engines.matching import match_all
        from ..torch import kernels  # noqa: F401 -- programs may already use pypm ops
        from ..torch.importer import TermGraph
        patterns = _explain_patterns(args.rules)
    hits = [p for p in patterns if p.name == args.pattern] or \
        [p for p in patterns if p.name.lower() == args.pattern.lower()]
    if not hits:
        known = ", ".join(sorted({p.name for p in patterns}))
        raise UsageError(f"--pattern {args.pattern}: no such pattern in the rules "
                         f"(known: {known})")
    pat = hits[0]
    check_patterns(patterns, args.engine)
    check_model_path(args.model)
    prog = load_program(args, read_example_inputs(args, torch))
    from ..torch import dynamic
    # dynamic shapes: as the rewrite does, the engine reads each symbolic size
    # at its example value (else every guard on a size is unknown and nothing
    # matches), and each match is re-decided for every admissible size
    env = dynamic.shape_env_of(prog.ep.graph_module)
    tg = TermGraph(prog.ep.graph, size_hints=env is not None).build()

    def for_every_size(node, m) -> Optional[str]:
        """None if match ``m`` at ``node`` holds at every admissible size
        (always, for a static program); else why not."""
        if env is None or m is None:
            return None
        from ..core import Program
        return dynamic.confirm(Program(pat.linked.defs, pat.linked.index[pat]),
                               m.substitution, m.fsubstitution, node, tg, env)
    if env is not None:
        log.info("the program has dynamic shapes: sizes are read at their example values, and "
              "each match is re-decided for every admissible size (as rewrite does)")

    def describe(n) -> str:
        fx = tg.fx_of.get(n.id)
        return node_desc(n) if fx is None else f"{fx.name} = {node_desc(n)[len(str(n.id)) + 2:]}"

    if args.node:
        by_name = {fx.name: t for fx, t in tg.term.items()}
        node = by_name.get(args.node)
        if node is None:
            near = [n for n in by_name if args.node.lower() in n.lower()][:8]
            raise UsageError(f"--node {args.node}: no FX node of that name in the model"
                             + (f" (similar: {', '.join(near)})" if near else ""))
        e = explain(pat, node, engine=args.engine, describe=describe)
        say(args, e)
        why = for_every_size(node, e.match if e.matched else None)
        if why:
            say(args, f"  but not for every size: {why}")
        if e.matched:
            for line in _rule_lines(args, prog, pat, [args.node]):
                say(args, line)
        if dot:
            _explain_html(args, state, dot, prog, tg, pat, [], [e])
        return EXIT_OK
    g = tg.graph
    found = match_all([pat], g, engine=args.engine)
    matched = [n for _, n, _ in found]
    say(args, f"pattern {pat.name}: matches at {len(matched)} node(s)"
          + (": " + ", ".join(describe(n).split(" = ")[0] for n in matched[:10])
             + (" ..." if len(matched) > 10 else "") if matched else ""))
    for _, n, m in found:
        why = for_every_size(n, m)
        if why:
            say(args, f"  {describe(n).split(' = ')[0]}: matches at the example sizes only: "
                f"{why}")
    for line in _rule_lines(args, prog, pat, [describe(n).split(" = ")[0]
                                              for n in matched[:args.top]]):
        say(args, line)
    misses = explain_all(pat, g, top=args.top, engine=args.engine, describe=describe)
    if not misses:
        say(args, "no near misses: the root operator of the pattern occurs nowhere else")
    else:
        say(args, f"near misses (deepest first, top {args.top}):")
    for e in misses:
        say(args, "")
        say(args, e)
    if dot:
        _explain_html(args, state, dot, prog, tg, pat, [m for _, _, m in found], misses)
    return EXIT_OK


class _RuleVerdicts:
    """The driver's observer for :func:`rule_verdicts`: what the rules of
    ``pattern`` did at each of its matches, by the root's FX name."""

    def __init__(self, pattern):
        self.pattern = pattern
        self.at: Dict[str, Tuple[Optional[str], List[Tuple[str, str]]]] = {}

    def matched(self, pattern, node, match, tg):
        if pattern is not self.pattern:
            return None
        return _Verdict(self.at, node.name)


class _Verdict:
    def __init__(self, at, name):
        self.at, self.name = at, name

    def fired(self, rule: str, created) -> None:
        self.at[self.name] = (rule, [])

    def declined(self, reasons) -> None:
        self.at[self.name] = (None, list(reasons))


def rule_verdicts(prog, pattern, target: str, engine: str = "verified",
                  check_profitability: bool = True
                  ) -> Dict[str, Tuple[Optional[str], List[Tuple[str, str]]]]:
    """What ``pattern``'s rules do at its matches in ``prog`` (a loaded
    model; a copy of its graph is rewritten, one pass, with this pattern
    alone, for ``target``): FX name of each match's root -> ``(rule that
    fired or None, [(rule, why it declined), ...])``. A rule that raises is
    a :class:`RuleFailure` naming it."""
    from ..torch.pipeline import rewrite_program
    from .rewrite import rule_failure
    obs = _RuleVerdicts(pattern)
    try:
        rewrite_program(prog, [pattern], engine=engine, target=target, max_iterations=1,
                        check=False, observer=obs, check_profitability=check_profitability)
    except Exception as e:  # noqa: BLE001 -- a user's rule may raise anything
        raise RuleFailure(rule_failure(e, [pattern])) from None
    return obs.at


def _rule_lines(args, prog, pat, names) -> List[str]:
    """The lines saying what ``pat``'s rules do at its matches rooted at the
    FX nodes ``names`` (none when it matches nowhere or has no rules)."""
    if not names or not getattr(pat, "rules", None) or getattr(pat, "is_multi", False):
        return []
    from .rewrite import program_device
    target = args.target or program_device(prog)[0]
    verdicts = rule_verdicts(prog, pat, target, args.engine, not args.ignore_profitability)
    prof = "profitability ignored" if args.ignore_profitability else "profitability checked"
    out = [f"its rules at the matches (target {target}, {prof}):"]
    for name in names:
        rule, declined = verdicts.get(name, (None, None))
        if rule is not None:
            out.append(f"  {name}: rule {rule} fires")
        elif declined:
            out.append(f"  {name}: matched, but no rule fires:")
            out.extend(f"    {r}: {why}" for r, why in declined)
        else:
            out.append(f"  {name}: not reached (an earlier firing replaced it)")
    return out


def _explain_html(args, state, dot, prog, tg, pat, matches, explanations) -> None:
    from ..torch.html import explain_events, explain_page
    ms, near = explain_events(pat, tg, matches, explanations)
    write_html(args, state, explain_page, ep=prog.ep, pattern_name=pat.name, matches=ms,
               misses=near, dot=dot, title=f"explain {pat.name} on "
               f"{os.path.basename(args.model)}", info={"engine": args.engine})
