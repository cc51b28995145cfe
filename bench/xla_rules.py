"""check-rules on the port of XLA's algebraic-simplifier rules
(``pypm_verified.library.xla_simplifier``, issue 14 item 5), beside
TensorRight's results on XLA's rule set (its Table 1).

Writes bench/results/xla_rules.{json,md} (``--quick``: fast mode,
xla_rules_quick.*). Part of ``make check-rules``.
"""
import argparse
import sys
import time
from collections import Counter

import common  # noqa: F401 -- sys.path
from common import RESULTS, stem, write_json

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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    mode = FAST if args.quick else FULL
    t0 = time.perf_counter()
    results = check_rules(X.PATTERNS, examples=mode["examples"], per_guard=mode["per_guard"],
                          progress=lambda p, r: print(f"checking {r.name} ...", file=sys.stderr))
    seconds = time.perf_counter() - t0
    by_cat = {}
    for r in results:
        by_cat.setdefault(X.CATEGORY[r.rule], Counter())[r.status] += 1
    rows = ["| class (TensorRight, Table 1) | XLA rules | TensorRight: represented (verified) "
            "| ported here | proved | tested | refuted |", "|---|---|---|---|---|---|---|"]
    for cat, (xla, rep, ver) in TENSORRIGHT.items():
        c = by_cat.get(cat, Counter())
        rows.append(f"| {cat} | {xla} | {rep} ({ver}) | {sum(c.values())} | {c['proved']} | "
                    f"{c['tested']} | {c['refuted']} |")
    lines = [
        f"`bench/xla_rules.py` ({'fast' if args.quick else 'full'} mode: {mode['examples']} "
        f"instances per rule, {mode['per_guard']} per guard; {seconds:.0f} s): "
        f"`check-rules` on the {len(results)} rules of "
        "`pypm_verified.library.xla_simplifier`, XLA algebraic-simplifier rules with ATen "
        "equivalents. \"proved\" is over the reals, for every size, for the structures "
        "generated (README, section `check-rules`); TensorRight's \"verified\" is for every "
        "rank and size, over its real-valued semantics.", "", *rows, "",
        "Why the tested ones are not proved: `div_by_const` (`A / c => A * (1/c)`, as XLA "
        "writes it) differs over the reals where `1/c` is not a double, and `div_by_pow2` "
        "(the same rule with the precondition that `c` is a power of two) is proved; "
        "`div_div` (`(A / B) / C => A / (B * C)`) differs over the reals where `B = 0`; "
        "`exp_mul` needs `exp(a) exp(b) = exp(a + b)`, which the uninterpreted `exp` does not "
        "give (TensorRight's advanced element-wise class: it verified one such rule, with cvc5)."]
    name = stem("xla_rules", args.quick)
    (RESULTS / f"{name}.md").write_text(markdown(results, "XLA simplifier rules (check-rules)",
                                                 "\n".join(lines)))
    write_json(RESULTS / f"{name}.json",
               {"seconds": seconds, "tensorright": TENSORRIGHT,
                "rules": [dict(r.as_dict(), category=X.CATEGORY[r.rule]) for r in results]})
    print("\n".join(rows))
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
