"""The wire format of docs/internals/format.md (VERSION 2): graphs and pattern sets
(definition tables with roots) as int64 words, and the decoders of the
engine's result buffers."""
from __future__ import annotations

import sys
from array import array
from typing import List, Sequence, Tuple

from .. import core
# the graph's own encoding lives with the graph (core/encoding.py)
from ..core.encoding import (ID_LIMIT, MAGIC_EXTENSION, MAGIC_GRAPH, VERSION,  # noqa: F401
                             EncodeError, _id, _value, encode_graph, encode_graph_extension)

MAGIC_PATTERNS = 0x535441504D505950  # b"PYPMPATS"
MAX_DEPTH = 10000

STATUS_MATCH, STATUS_NO_MATCH, STATUS_OUT_OF_FUEL = 0, 1, 2

# prefix-form tags
P_VAR, P_APP, P_ALT, P_GUARD, P_EXISTS, P_EXISTSF, P_CONSTR, P_FUNVAR, P_CALL = range(1, 10)
G_TRUE, G_EQ, G_LT, G_AND, G_OR, G_NOT = 1, 2, 3, 4, 5, 6
E_CONST, E_ATTR, E_ADD, E_SUB, E_MUL, E_FATTR = 1, 2, 3, 4, 5, 6


_PATTERNS = core.PATTERN_TYPES
_GUARDS = (core.GTrue, core.GEq, core.GLt, core.GAnd, core.GOr, core.GNot)
_EXPRS = (core.EConst, core.EAttr, core.EFAttr, core.EAdd, core.ESub, core.EMul)
_KINDS = {"pattern": _PATTERNS, "guard": _GUARDS, "expression": _EXPRS}
_TAG = {core.GEq: G_EQ, core.GLt: G_LT, core.GAnd: G_AND, core.GOr: G_OR,
        core.EAdd: E_ADD, core.ESub: E_SUB, core.EMul: E_MUL}
_WORD = "word"  # a stack item standing for one literal word (PConstr's x)


def _ids(vs, what: str) -> List[int]:
    return [_id(v, what) for v in vs]


def _prefix(root, out: List[int], kind0: str = "pattern") -> None:
    """Append the pattern ``root`` (a guard if ``kind0 == "guard"``) in prefix
    form. Iterative, so deep terms do not hit Python's recursion limit;
    nesting is capped at MAX_DEPTH."""
    stack = [(root, 1, kind0)]
    pop, push = stack.pop, stack.append
    while stack:
        t, depth, kind = pop()
        if kind is _WORD:
            out.append(t)
            continue
        k = type(t)
        if k not in _KINDS[kind]:
            raise EncodeError(f"expected a {kind}, found {t!r}")
        if depth > MAX_DEPTH:
            raise EncodeError(f"nesting deeper than MAX_DEPTH={MAX_DEPTH}")
        d = depth + 1
        if k is core.PVar:
            out += (P_VAR, _id(t.x, "variable id"))
        elif k is core.PApp or k is core.PFunVar:
            if k is core.PApp:
                out += (P_APP, _id(t.f, "symbol id"), len(t.args))
            else:
                out += (P_FUNVAR, _id(t.F, "operator variable id"), len(t.args))
            for a in reversed(t.args):
                push((a, d, "pattern"))
        elif k is core.PAlt:
            out.append(P_ALT)
            push((t.p2, d, "pattern"))
            push((t.p1, d, "pattern"))
        elif k is core.PGuard:
            out.append(P_GUARD)
            push((t.g, d, "guard"))
            push((t.p, d, "pattern"))
        elif k is core.PExists:
            out += (P_EXISTS, _id(t.x, "variable id"))
            push((t.p, d, "pattern"))
        elif k is core.PExistsF:
            out += (P_EXISTSF, _id(t.F, "operator variable id"))
            push((t.p, d, "pattern"))
        elif k is core.PConstr:
            out.append(P_CONSTR)
            push((_id(t.x, "variable id"), d, _WORD))
            push((t.p2, d, "pattern"))
            push((t.p, d, "pattern"))
        elif k is core.PCall:
            out += (P_CALL, _id(t.P, "definition index"), len(t.xs))
            out += _ids(t.xs, "variable id")
            out.append(len(t.Fs))
            out += _ids(t.Fs, "operator variable id")
        elif k is core.GTrue:
            out.append(G_TRUE)
        elif k is core.GEq or k is core.GLt:
            out.append(_TAG[k])
            push((t.e2, d, "expression"))
            push((t.e1, d, "expression"))
        elif k is core.GAnd or k is core.GOr:
            out.append(_TAG[k])
            push((t.g2, d, "guard"))
            push((t.g1, d, "guard"))
        elif k is core.GNot:
            out.append(G_NOT)
            push((t.g, d, "guard"))
        elif k is core.EConst:
            out += (E_CONST, _value(t.z, "constant"))
        elif k is core.EAttr:
            out += (E_ATTR, _id(t.x, "variable id"), _id(t.attr, "attribute id"))
        elif k is core.EFAttr:
            out += (E_FATTR, _id(t.F, "operator variable id"), _id(t.attr, "attribute id"))
        else:  # EAdd, ESub, EMul
            out.append(_TAG[k])
            push((t.e2, d, "expression"))
            push((t.e1, d, "expression"))


def encode_pattern(p: core.CorePattern) -> List[int]:
    """One pattern (a definition body) in prefix form."""
    out: List[int] = []
    _prefix(p, out)
    return out


def encode_patterns(defs: Sequence[core.PDef], roots: Sequence[int]) -> array:
    """A pattern set (``MAGIC_PATTERNS`` layout): the definition table ``defs``
    (with their ``pbinds``/``pfbinds``, written as given) and the root
    definition indices. Encodes; does not check well-formedness."""
    defs = list(defs)
    words: List[int] = [MAGIC_PATTERNS, VERSION, len(defs)]
    for d in defs:
        if not isinstance(d, core.PDef):
            raise EncodeError(f"expected a definition (core.PDef), found {d!r}")
        words += (_id(d.nparams, "parameter count"), _id(d.nfparams, "parameter count"))
        words.append(len(d.pbinds))
        words += _ids(d.pbinds, "pbinds entry")
        words.append(len(d.pfbinds))
        words += _ids(d.pfbinds, "pfbinds entry")
        body = encode_pattern(d.body)
        words.append(len(body))
        words.extend(body)
    roots = list(roots)
    words.append(len(roots))
    for r in roots:
        if not isinstance(r, int) or not 0 <= r < len(defs):
            raise EncodeError(f"root {r!r} is not a definition index")
        words.append(r)
    return array("q", words)


def encode_multi_spec(n: int, m: int, roots: Sequence[int], guard,
                      index_only: bool = False) -> array:
    """A multi-root spec (docs/internals/format.md, "Multi-root patterns"): the shared
    variable counts, the root indices (positions in the loaded pattern set's
    roots), the cross-root guard and, when ``index_only``, the word 1 (later
    roots' candidates by the index alone, ``Multi.match_multi_idx``; the
    default is upward traversal, ``Multi.match_multi``)."""
    words: List[int] = [_id(n, "parameter count"), _id(m, "parameter count"), len(roots)]
    words += _ids(roots, "root index")
    _prefix(guard, words, "guard")
    if index_only:
        words.append(1)
    return array("q", words)


def decode_match_multi(words: Sequence[int]):
    """The result words of ``pypm_match_multi``: a list of ``(root, status,
    nodes, bindings, function_bindings)``."""
    n = words[0]
    pos, out = 1, []
    for _ in range(n):
        root, status, k = words[pos], words[pos + 1], words[pos + 2]
        nodes = list(words[pos + 3:pos + 3 + k])
        pos += 3 + k
        binds, pos = _pairs(words, pos, "bindings")
        fbinds, pos = _pairs(words, pos, "operator bindings")
        out.append((root, status, nodes, binds, fbinds))
    if pos != len(words):
        raise EncodeError(f"multi-root result: {len(words) - pos} trailing words")
    return out


DOM_CONST, DOM_OUTPUT, DOM_LIVE = 1, 2, 4


def encode_dominates_spec(parent: int, path: int, child: int, flags: Sequence[int]) -> array:
    """A dominator spec (docs/internals/format.md, "Dominator patterns"): the parent,
    path and child root indices, the node count, one flag word per node
    (``DOM_CONST | DOM_OUTPUT | DOM_LIVE``)."""
    words = _ids([parent, path, child], "root index") + [len(flags)]
    for t, f in enumerate(flags):
        if not 0 <= f <= 7:
            raise EncodeError(f"dominator spec: flags {f} of node {t} outside bits 0..2")
    return array("q", words + list(flags))


def decode_dominates(words: Sequence[int]):
    """The result words of ``pypm_dominates``: a list of ``(root, status,
    parent, region)`` (parent None when there is none)."""
    n = words[0]
    pos, out = 1, []
    for _ in range(n):
        root, status, parent, k = words[pos:pos + 4]
        out.append((root, status, None if parent < 0 else parent,
                    list(words[pos + 4:pos + 4 + k])))
        pos += 4 + k
    if pos != len(words):
        raise EncodeError(f"dominator result: {len(words) - pos} trailing words")
    return out


def encode_program(program: core.Program) -> array:
    """A one-root pattern set of a :class:`~pypm_verified.core.Program`."""
    return encode_patterns(program.defs, [program.root])


def to_bytes(words: Sequence[int]) -> bytes:
    """Little-endian bytes of a word buffer (for files)."""
    arr = array("q", words)
    if sys.byteorder == "big":
        arr.byteswap()
    return arr.tobytes()


def from_bytes(data: bytes) -> array:
    """Inverse of :func:`to_bytes`."""
    if len(data) % 8:
        raise ValueError("buffer length is not a multiple of 8 bytes")
    arr = array("q")
    arr.frombytes(data)
    if sys.byteorder == "big":
        arr.byteswap()
    return arr


# ----------------------------------------------------------------- results

Bindings = List[Tuple[int, int]]


def _pairs(words: Sequence[int], pos: int, what: str) -> Tuple[Bindings, int]:
    if pos >= len(words):
        raise ValueError(f"truncated result: missing the number of {what}")
    n = words[pos]
    if n < 0 or len(words) < pos + 1 + 2 * n:
        raise ValueError(f"malformed result: {n} {what}")
    return [(words[pos + 1 + 2 * i], words[pos + 2 + 2 * i]) for i in range(n)], pos + 1 + 2 * n


def decode_match(words: Sequence[int]) -> Tuple[int, Bindings, Bindings]:
    """``status, n, (var, node)*n, m, (fvar, symbol)*m`` ->
    ``(status, [(var, node)], [(fvar, symbol)])``."""
    if not words or words[0] not in (STATUS_MATCH, STATUS_NO_MATCH, STATUS_OUT_OF_FUEL):
        raise ValueError(f"malformed match result {list(words[:2])}")
    binds, pos = _pairs(words, 1, "bindings")
    fbinds, pos = _pairs(words, pos, "function bindings")
    if pos != len(words):
        raise ValueError(f"match result has {len(words) - pos} trailing words")
    return words[0], binds, fbinds


def decode_match_all(words: Sequence[int]) -> List[Tuple[int, int, int, Bindings, Bindings]]:
    """``n_entries, (root_index, node, status, n, (var, node)*n, m,
    (fvar, symbol)*m)*`` -> list of ``(root_index, node, status, bindings,
    function_bindings)``."""
    n_entries = words[0]
    pos, out = 1, []
    for _ in range(n_entries):
        if len(words) < pos + 3:
            raise ValueError("truncated match_all result")
        pi, root, status = words[pos:pos + 3]
        binds, pos = _pairs(words, pos + 3, "bindings")
        fbinds, pos = _pairs(words, pos, "function bindings")
        out.append((pi, root, status, binds, fbinds))
    if pos != len(words):
        raise ValueError(f"match_all result has {len(words) - pos} trailing words")
    return out
