"""check-rules on the port of XLA's algebraic-simplifier rules
(``pypm_verified.library.xla_simplifier``), beside
TensorRight's results on XLA's rule set (its Table 1), and on XLA's forms
that are wrong in floating point (``tests/wrong_rules/xla_wrong.py``).

Both are checked with the module's ``CHECK_OPTIONS``: special input values
(NaN, infinities, signed zeros, +-100) in 30% of the instances and dtypes
from the rules' sources (``check-rules --special-values 0.3 --dtype-hints``).

Writes bench/results/xla_rules.{json,md} (``--quick``: fast mode,
xla_rules_quick.*). Part of ``make check-rules``.
"""
import argparse
import importlib.util
import sys
import time
from collections import Counter

import common  # noqa: F401 -- sys.path
from common import RESULTS, ROOT, stem, write_json

from pypm_verified.checking import FAST, FULL, check_rules, markdown
from pypm_verified.library import xla_simplifier as X

#: TensorRight, Table 1: (rules in XLA, represented, verified)
TENSORRIGHT = {
    "element-wise, simple": (56, 46, 45),
    "element-wise, advanced": (10, 1, 1),
    "non-element-wise, reductions": (22, 20, 17),
    "non-element-wise, layout-sensitive": (29, 0, 0),
    "non-element-wise, others": (58, 54, 52),
    "with preconditions": (61, 40, 34),
}


def wrong_module():
    spec = importlib.util.spec_from_file_location(
        "xla_wrong", ROOT / "tests" / "wrong_rules" / "xla_wrong.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _why_not_proved(r) -> str:
    s = r.symbolic or {}
    if r.status != "tested":
        return ""
    parts = []
    if s.get("proved_like_instances"):
        parts.append(f"{s['proved_like_instances']} structure(s) proved only for the "
                     "instances' size patterns (a Python guard on sizes)")
    if s.get("differs"):
        parts.append(f"{len(s['differs'])} differ over the reals (e.g. "
                     f"`{s['differs'][0].split(':')[0]}`)")
    if s.get("unsupported"):
        parts.append("unsupported: " + "; ".join(s["unsupported"]))
    if s.get("unknown"):
        parts.append(f"{len(s['unknown'])} unknown (z3 gave up)")
    return ", ".join(parts)


#: why each tested rule is not proved (what its symbolic summary shows)
REASONS = {
    "div_by_const": "`A / c => A * (1/c)` differs over the reals where `1/c` is not a "
                    "double (one rounding); `div_by_pow2`, with XLA's exactness "
                    "precondition, is proved",
    "div_div": "over the reals `(A/B)/C = A/(B*C)` only where `B, C != 0` (z3's `x/0` "
               "is a free value); in floats up to rounding",
    "div_div_div": "as `div_div`: needs `B, C, D != 0`",
    "div_by_div": "as `div_div`: needs `B, C != 0`",
    "div_sqrt": "needs `rsqrt(x) = 1/sqrt(x)`, which the uninterpreted `rsqrt` does not "
                "give",
    "div_rsqrt": "as `div_sqrt`",
    "exp_mul": "needs `exp(a) exp(b) = exp(a + b)` (TensorRight: cvc5); where the "
               "original overflows the rewrite is the exact value",
    "exp_div": "needs `exp(a) / exp(b) = exp(a - b)`",
    "where_same": "proved for the instances' size patterns (its broadcast guard is Python)",
    "where_true": "as `where_same`",
    "where_false": "as `where_same`",
    "flip_unit_axes": "proved for the instances' size patterns (the size-1 guard is Python)",
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--examples", type=int, default=None,
                    help="instances per rule (default: the mode's)")
    ap.add_argument("--per-guard", type=int, default=None,
                    help="instances per guard (default: the mode's)")
    args = ap.parse_args(argv)
    mode = dict(FAST if args.quick else FULL)
    if args.examples is not None:
        mode["examples"] = args.examples
    if args.per_guard is not None:
        mode["per_guard"] = args.per_guard
    opts = X.CHECK_OPTIONS
    reduced = args.examples is not None or args.per_guard is not None
    t0 = time.perf_counter()
    results = check_rules(X.PATTERNS, examples=mode["examples"], per_guard=mode["per_guard"],
                          progress=lambda p, r: print(f"checking {r.name} ...", file=sys.stderr),
                          **opts)
    W = wrong_module()
    # a wrong form stops at its first counterexample: up to 100 instances each
    wrong = check_rules(W.PATTERNS, examples=max(mode["examples"], 100), per_guard=0, **opts)
    seconds = time.perf_counter() - t0
    by_cat = {}
    for r in results:
        by_cat.setdefault(X.CATEGORY[r.rule], Counter())[r.status] += 1
    rows = ["| class (TensorRight, Table 1) | XLA rules | TensorRight: represented (verified) "
            "| ported here | proved | tested | refuted |", "|---|---|---|---|---|---|---|"]
    tot = Counter()
    for cat, (xla, rep, ver) in TENSORRIGHT.items():
        c = by_cat.get(cat, Counter())
        tot.update(c)
        rows.append(f"| {cat} | {xla} | {rep} ({ver}) | {sum(c.values())} | {c['proved']} | "
                    f"{c['tested']} | {c['refuted']} |")
    rows.append(f"| total | 175 | 121 (115) | {sum(tot.values())} | {tot['proved']} | "
                f"{tot['tested']} | {tot['refuted']} |")
    tested = [r for r in results if r.status == "tested"]
    why = [f"* `{r.rule}`: {REASONS.get(r.rule) or _why_not_proved(r) or r.reason}"
           for r in tested]
    wrows = ["| XLA's form (tests/wrong_rules/xla_wrong.py) | status | why it is wrong | "
             "counterexample |", "|---|---|---|---|"]
    for r in wrong:
        c = r.counterexample
        dts = ", ".join(i["dtype"] for i in c.inputs if "shape" in i) if c else ""
        ce = f"`{c.expression}` ({dts}): {c.message}" if c else ""
        wrows.append(f"| `{r.rule}` | **{r.status}** | {W.WRONG[r.rule]} | {ce} |")
    lines = [
        f"`bench/xla_rules.py` ({'fast' if args.quick else 'full'} mode"
        f"{'' if args.quick or reduced is False else ', reduced (--examples/--per-guard)'}"
        f": {mode['examples']} "
        f"instances per rule, {mode['per_guard']} per guard; {seconds:.0f} s): "
        f"`check-rules` on the {len(results)} rules of "
        "`pypm_verified.library.xla_simplifier`, XLA algebraic-simplifier rules with ATen "
        f"equivalents, with `{opts}` (30% of the instances with NaN, +-inf, +-0.0 and +-100 "
        "among their inputs, signed zeros told apart; half in a dtype the rule names). "
        "\"proved\" is over the reals (integers: unbounded; booleans: 0/1), for every size, "
        "for the structures generated, *and* no counterexample in the instances "
        "(docs/guides/check-rules.md); TensorRight's \"verified\" is for every rank and size, "
        "over its real-valued semantics.", "", *rows, "",
        "Why the tested ones are not proved:", "", *why, "",
        "XLA's forms that are wrong in IEEE arithmetic (the module ships narrowed forms; "
        "these are checked the same way and must be refuted):", "", *wrows]
    name = stem("xla_rules", args.quick)
    (RESULTS / f"{name}.md").write_text(markdown(results, "XLA simplifier rules (check-rules)",
                                                 "\n".join(lines)))
    write_json(RESULTS / f"{name}.json",
               {"seconds": seconds, "tensorright": TENSORRIGHT, "options": opts,
                "rules": [dict(r.as_dict(), category=X.CATEGORY[r.rule]) for r in results],
                "wrong_variants": [dict(r.as_dict(), why=W.WRONG[r.rule]) for r in wrong]})
    print("\n".join(rows))
    print("\n".join(wrows))
    ok = all(r.ok for r in results) and all(r.status == "refuted" for r in wrong)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
