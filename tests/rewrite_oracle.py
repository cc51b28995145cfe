"""An independent oracle for the rewrite validator (``pypm_validate_rewrite``).

A deliberately simple, pure-Python reading of the acceptance condition, from
its written description (the buffer format and the rules in
docs/internals/format.md), not from the Coq development: used to test the
drivers' encoders before the C entry point existed, and differentially
against it (tests/test_validate_drivers.py).

:func:`violations` lists every ``(reason, where)`` that fails, stage by
stage (well-formedness, then firings, then the map, then nodes, arguments,
outputs and reachability together); :func:`validate` answers like the C entry:
``(0, 0)`` when accepted, else the first violation; :class:`Malformed` for a
buffer that does not parse.
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

BEFORE_ILL_FORMED, AFTER_ILL_FORMED, FIRING, MAP, NODE, ARG, OUTPUT, DEAD = range(1, 9)
LIMIT = 2 ** 62


class Malformed(ValueError):
    """The buffer does not parse."""


class _Reader:
    def __init__(self, words: Sequence[int]):
        self.w = [int(x) for x in words]
        self.i = 0

    def word(self, lo: int = 0) -> int:
        if self.i >= len(self.w):
            raise Malformed("buffer ends early")
        v = self.w[self.i]
        self.i += 1
        if not lo <= v < LIMIT:
            raise Malformed(f"word {v} out of range at {self.i - 1}")
        return v

    def count(self) -> int:
        n = self.word()
        if n > len(self.w) - self.i:
            raise Malformed("a count larger than the words left")
        return n


def parse(words: Sequence[int]):
    """``(before, after, firings, map)``; a graph is ``(nodes, outputs)``,
    a node ``(label, args)``."""
    r = _Reader(words)

    def graph():
        nodes = []
        for _ in range(r.count()):
            label = r.word()
            k = r.count()
            nodes.append((label, [r.word() for _ in range(k)]))
        outs = [r.word() for _ in range(r.count())]
        return nodes, outs

    before, after = graph(), graph()
    firings = []
    nf = r.count()
    for _ in range(nf):
        firings.append((r.word(), r.word()))
    amap = [r.word(lo=-1) for _ in range(len(after[0]))]
    if r.i != len(r.w):
        raise Malformed("trailing words")
    return before, after, firings, amap


def violations(words: Sequence[int]) -> List[Tuple[int, int]]:
    """Every failed condition of the first stage that fails (empty: accepted)."""
    (bn, bo), (an, ao), firings, amap = parse(words)
    out = []
    for code, nodes, outs in ((BEFORE_ILL_FORMED, bn, bo), (AFTER_ILL_FORMED, an, ao)):
        for i, (_, args) in enumerate(nodes):
            if any(a >= i for a in args):
                out.append((code, i))
        for j, o in enumerate(outs):
            if o >= len(nodes):
                out.append((code, len(nodes) + j))
    if out:
        return out
    roots = {}
    for k, (r, h) in enumerate(firings):
        if r >= len(bn) or h >= len(an) or r in roots:
            out.append((FIRING, k))
        roots.setdefault(r, h)
    if out:
        return out
    seen = {}
    for h, g in enumerate(amap):
        if g == -1:
            continue
        if g >= len(bn) or g in roots:
            out.append((MAP, h))
        elif g in seen:
            out.extend([(MAP, seen[g]), (MAP, h)])
        else:
            seen[g] = h
    if out:
        return out

    def image_ok(a: int, b: int) -> bool:  # b (after) stands for a (before)?
        return b == roots[a] if a in roots else amap[b] == a

    for h, g in enumerate(amap):
        if g == -1:
            continue
        (la, aa), (lb, ab) = an[h], bn[g]
        if la != lb or len(aa) != len(ab):
            out.append((NODE, h))
        elif not all(image_ok(a, b) for a, b in zip(ab, aa)):
            out.append((ARG, h))
    if len(bo) != len(ao):
        out.append((OUTPUT, -1))
    else:
        out.extend((OUTPUT, j) for j, (a, b) in enumerate(zip(bo, ao)) if not image_ok(a, b))
    live = set()
    stack = list(ao)
    while stack:
        h = stack.pop()
        if h not in live:
            live.add(h)
            stack.extend(an[h][1])
    out.extend((DEAD, h) for h in range(len(an)) if h not in live)
    return out


def validate(words: Sequence[int]) -> Tuple[int, int]:
    """``(verdict, where)`` like the C entry point: ``(0, 0)`` accepted."""
    v = violations(words)
    return v[0] if v else (0, 0)
