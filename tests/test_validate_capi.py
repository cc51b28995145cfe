"""``binding.validate_rewrite`` (C ``pypm_validate_rewrite``, the extracted
``Rewrite.validate``): accepted passes, each reason code on a hand-made
buffer, malformed buffers refused with ``PYPM_E_MALFORMED``, random buffers
never crash, and random firings applied in Python accepted (and refused once
the after graph is altered)."""
import re
from array import array
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from pypm_verified.engines import binding
from pypm_verified.errors import EngineError

HEADER = Path(__file__).resolve().parents[1] / "ocaml" / "capi" / "pypm_verified.h"


def encode(before, after, firings, mapping):
    """The buffer of a pass: graphs as (nodes, outputs), nodes as (label, args)."""
    words = []
    for nodes, outs in (before, after):
        words.append(len(nodes))
        for label, args in nodes:
            words += [label, len(args), *args]
        words += [len(outs), *outs]
    words.append(len(firings))
    for r, p in firings:
        words += [r, p]
    return words + list(mapping)


# before: x; relu(x); neg(relu(x)) -> output 2. relu(x) -> gelu(x) fires at
# node 1; after: x; gelu(x) (new); neg(gelu(x)) -> output 2.
BEFORE = ([(0, []), (1, [0]), (2, [1])], [2])
AFTER = ([(0, []), (3, [0]), (2, [1])], [2])
FIRINGS = [(1, 1)]
MAP = [0, -1, 2]


def test_header_constants_match_binding():
    defined = dict(re.findall(r"#define (PYPM_REJECT_\w+)\s+(\d+)", HEADER.read_text()))
    assert len(defined) == 13  # Rewrite.validate's 8 and Certify.validate_firings's 5
    for name, value in defined.items():
        assert getattr(binding, name[len("PYPM_"):]) == int(value), name


def test_accepted(lib):
    assert binding.validate_rewrite(encode(BEFORE, AFTER, FIRINGS, MAP)) == (0, -1)
    buf = array("q", encode(BEFORE, AFTER, FIRINGS, MAP))
    assert binding.validate_rewrite(buf) == (0, -1)


def test_identity_accepted(lib):
    assert binding.validate_rewrite(encode(BEFORE, BEFORE, [], [0, 1, 2])) == (0, -1)


@pytest.mark.parametrize("before,after,firings,mapping,expected", [
    (([(0, []), (1, [1]), (2, [1])], [2]), AFTER, FIRINGS, MAP,
     (binding.REJECT_BEFORE_ILL_FORMED, 1)),
    (([(0, []), (1, [0]), (2, [1])], [3]), AFTER, FIRINGS, MAP,
     (binding.REJECT_BEFORE_ILL_FORMED, 3)),
    (BEFORE, ([(0, []), (3, [2]), (2, [1])], [2]), FIRINGS, MAP,
     (binding.REJECT_AFTER_ILL_FORMED, 1)),
    (BEFORE, AFTER, [(7, 1)], MAP, (binding.REJECT_FIRING, 0)),
    (BEFORE, AFTER, [(1, 1), (1, 1)], MAP, (binding.REJECT_FIRING, 1)),
    (BEFORE, AFTER, [(1, 5)], MAP, (binding.REJECT_FIRING, 0)),
    (BEFORE, AFTER, FIRINGS, [0, 1, 2], (binding.REJECT_MAP, 1)),
    (BEFORE, AFTER, FIRINGS, [0, -1, 0], (binding.REJECT_MAP, 2)),
    (BEFORE, ([(0, []), (3, [0]), (4, [1])], [2]), FIRINGS, MAP, (binding.REJECT_NODE, 2)),
    (BEFORE, ([(0, []), (3, [0]), (2, [1, 1])], [2]), FIRINGS, MAP, (binding.REJECT_NODE, 2)),
    (BEFORE, ([(0, []), (3, [0]), (2, [0])], [2]), FIRINGS, MAP, (binding.REJECT_ARG, 2)),
    (BEFORE, ([(0, []), (3, [0]), (2, [1])], [2, 2]), FIRINGS, MAP,
     (binding.REJECT_OUTPUT, -1)),
    (BEFORE, ([(0, []), (3, [0]), (2, [1])], [1]), FIRINGS, MAP, (binding.REJECT_OUTPUT, 0)),
    (BEFORE, ([(0, []), (3, [0]), (2, [1]), (5, [])], [2]), FIRINGS, MAP + [-1],
     (binding.REJECT_DEAD, 3)),
], ids=["before-arg", "before-output", "after-arg", "firing-range", "firing-repeated",
        "firing-replacement", "map-fired-root", "map-not-injective", "node-label",
        "node-arity", "arg", "output-count", "output", "dead"])
def test_reason_codes(lib, before, after, firings, mapping, expected):
    assert binding.validate_rewrite(encode(before, after, firings, mapping)) == expected


GOOD = encode(BEFORE, AFTER, FIRINGS, MAP)


@pytest.mark.parametrize("words", [
    [], [-1], [5, 0, 0], GOOD + [0], GOOD[:-1],
    [3, -5] + GOOD[2:],        # label out of range
    [3, 0, -1] + GOOD[3:],     # negative arity
    [3, 0, 0, 1, 1, -1] + GOOD[6:],  # argument out of range
    GOOD[:-2] + [-2, 2],       # map entry neither -1 nor an index
    GOOD[:-1] + [1 << 62],     # word at 2^62
    GOOD[:-1] + [1 << 64],     # word outside int64
], ids=["empty", "negative-count", "count-above-words", "trailing", "truncated-map",
        "label", "arity", "argument", "map-entry", "word-2^62", "word-int64"])
def test_malformed_refused(lib, words):
    with pytest.raises(EngineError) as e:
        binding.validate_rewrite(words)
    assert e.value.code == lib.PYPM_E_MALFORMED
    assert "rewrite-validation buffer" in str(e.value) or "int64" in str(e.value)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.integers(-2, 6), st.integers(-2**63, 2**63 - 1)), max_size=40))
def test_random_buffers_never_crash(lib, words):
    try:
        verdict, where = binding.validate_rewrite(words)
    except EngineError as e:
        assert e.code == lib.PYPM_E_MALFORMED
    else:
        assert 0 <= verdict <= 8 and where >= -1


def fire(nodes, outs, r, label, args):
    """The firing in Python: node ``r`` replaced by a new node
    ``(label, args)``, its uses redirected, dead nodes dropped, the rest
    renumbered in order (new node placed just before ``r``). Returns the
    after graph and the map."""
    order = list(range(r)) + ["new"] + list(range(r + 1, len(nodes)))
    node_of = {i: (nodes[i][0], [("new" if a == r else a) for a in nodes[i][1]])
               for i in range(len(nodes)) if i != r}
    node_of["new"] = (label, list(args))
    outs2 = ["new" if o == r else o for o in outs]
    live = set(outs2)
    for k in reversed(order):
        if k in live:
            live.update(node_of[k][1])
    kept = [k for k in order if k in live]
    index = {k: i for i, k in enumerate(kept)}
    after = [(node_of[k][0], [index[a] for a in node_of[k][1]]) for k in kept]
    mapping = [-1 if k == "new" else k for k in kept]
    return (after, [index[o] for o in outs2]), index["new"], mapping


@st.composite
def passes(draw):
    n = draw(st.integers(1, 12))
    nodes = []
    for i in range(n):
        k = draw(st.integers(0, min(i, 3)))
        nodes.append((draw(st.integers(0, 4)), [draw(st.integers(0, i - 1)) for _ in range(k)]))
    outs = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=3))
    r = draw(st.sampled_from(outs))
    args = [draw(st.integers(0, r - 1)) for _ in range(draw(st.integers(0, min(r, 2))))]
    return (nodes, outs), r, (draw(st.integers(5, 9)), args)


@settings(max_examples=200, deadline=None)
@given(passes(), st.data())
def test_random_firings_accepted_and_alterations_refused(lib, p, data):
    (nodes, outs), r, (label, args) = p
    after, rep, mapping = fire(nodes, outs, r, label, args)
    words = encode((nodes, outs), after, [(r, rep)], mapping)
    assert binding.validate_rewrite(words) == (0, -1)
    # relabel one mapped after node: refused as a node mismatch at that node
    mapped = [h for h, g in enumerate(mapping) if g >= 0]
    if mapped:
        h = data.draw(st.sampled_from(mapped))
        nodes2 = list(after[0])
        nodes2[h] = (nodes2[h][0] + 100, nodes2[h][1])
        words = encode((nodes, outs), (nodes2, after[1]), [(r, rep)], mapping)
        assert binding.validate_rewrite(words) == (binding.REJECT_NODE, h)
