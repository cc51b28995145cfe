"""The HTML report of ``rewrite --html`` and ``explain --html``: pictures of
the graph with the matches on it.

One self-contained file (no network: the SVG, the data, the CSS and the
script are inline). The graphs are laid out by Graphviz's ``dot`` (the
Debian package ``graphviz``, called as a program: :func:`find_dot`), the
one layout engine for layered, directed graphs that is packaged, maintained
for decades and needs no JavaScript at view time; the file holds the SVG it
wrote, so the page shows the graph even with scripts off.

What is drawn:

* ``rewrite``: the graph before and after, side by side. Every match the
  driver found (:class:`Recorder`, the driver's ``observer``) is drawn on
  the nodes it covers: filled in its rule's colour where a rule fired,
  dashed in its pattern's colour where every rule declined (the reasons
  on hover); in the "after" graph the nodes the rules built are filled and
  bold.
* ``explain``: the model's graph with the pattern's matches (filled) and
  its near misses (:func:`pypm_verified.explain_all`): the node the
  attempt started at, dotted red, and the node where it failed, red, with
  the explanation on hover.

Hovering a node (or clicking it: the panel stays) shows its name, operator,
shape, dtype, module and the matches on it. Parameters, buffers, constants
and metadata asserts are left out of the picture (they are a node's
arguments in its details).

Large models: a model with more than ``max_layers`` repeated layers
(``layers.N``, ``h.N``, ``encoder.layer.N``: the first numbered component
of the node's module path) shows the first layer expanded, and any layer
whose operators and matches differ from the ones shown (up to
``max_layers`` in all); every other layer is one box saying how many nodes
it has, which layer it looks like, and what matched in it (a 32-layer LLaMA
stays a page of a few hundred kilobytes that ``dot`` lays out in about a
second).

The matched subgraph of a match (the nodes its pattern's operators matched,
not the bound variables) is found by re-running the instrumented search of
:mod:`pypm_verified.engines.explain` at the match's root and recording the
nodes it matched, keeping the solution whose bindings are the engine's.
"""
from __future__ import annotations

import html as _html
import json
import re
import shutil
import subprocess
import time
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import torch.fx as fx

from ..engines import explain as _explain
# the nodes a match covers (torch-free: pm.rewrite's legality uses it too)
from ..engines.cover import cover_terms, near_terms  # noqa: F401

__all__ = ["GraphvizMissing", "find_dot", "Recorder", "MatchEvent", "rewrite_page",
           "explain_page", "DEFAULT_MAX_LAYERS"]

#: repeated layers shown expanded at most (the rest are collapsed boxes)
DEFAULT_MAX_LAYERS = 3
#: seconds ``dot`` may take for one graph
DOT_TIMEOUT = 300

# colour-blind-safe strokes (Okabe-Ito) and light fills of the same hue
PALETTE = (("#0072B2", "#cfe3f3"), ("#E69F00", "#fbe3ad"), ("#009E73", "#c2ecdd"),
           ("#CC79A7", "#f4d6e7"), ("#D55E00", "#f8cfb6"), ("#56B4E9", "#d5edfb"),
           ("#8C6D1F", "#eadfc0"), ("#7F7F7F", "#e2e2e2"))
NEAR = ("#C0392B", "#fbdcd8")  # near misses
HIDDEN_TARGETS = ("aten._assert_tensor_metadata", "aten._assert_scalar",
                  "aten.sym_constrain_range", "aten._assert_async")


class GraphvizMissing(RuntimeError):
    """``dot`` (Graphviz) is not installed: ``--html`` cannot draw."""


def find_dot() -> str:
    """The path of Graphviz's ``dot``; :class:`GraphvizMissing` (saying how
    to install it) when it is not on ``PATH`` or does not run."""
    path = shutil.which("dot")
    if path is None:
        raise GraphvizMissing("Graphviz's `dot` is not on PATH; install it "
                              "(`apt-get install graphviz`, or `make apt-deps`)")
    try:
        subprocess.run([path, "-V"], capture_output=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError) as e:
        raise GraphvizMissing(f"Graphviz's `dot` ({path}) does not run: {e}") from None
    return path


# ------------------------------------------------------------ recording

class MatchEvent:
    """One match drawn in the report: ``pattern``, ``root`` (FX node name),
    ``cover`` (the FX node names its pattern's operators matched, root
    included), ``status`` ("fired", "declined", "matched" or "near"),
    ``rule`` (the rule that fired), ``created`` (node names it built),
    ``declines`` (``[(rule, reason)]``), ``message``/``at`` (a near miss:
    the explanation and the node where it failed), ``rules`` (the
    pattern's rule names)."""

    __slots__ = ("pattern", "root", "cover", "status", "rule", "created", "declines",
                 "message", "at", "rules", "bindings")

    def __init__(self, pattern: str, root: str, cover: Sequence[str], status: str,
                 rules: Sequence[str] = (), bindings: Optional[Dict[str, str]] = None):
        self.pattern, self.root, self.cover, self.status = pattern, root, list(cover), status
        self.rules = list(rules)
        self.rule: Optional[str] = None
        self.created: List[str] = []
        self.declines: List[Tuple[str, str]] = []
        self.message: Optional[str] = None
        self.at: Optional[str] = None
        self.bindings = dict(bindings or {})

    # the driver's observer protocol
    def fired(self, rule: str, created: Iterable[fx.Node]) -> None:
        self.status, self.rule = "fired", rule
        self.created = [n.name for n in created]

    def declined(self, reasons: Sequence[Tuple[str, str]]) -> None:
        self.status = "declined"
        self.declines = [(r, why) for r, why in reasons]

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__slots__}


class Recorder:
    """The driver's ``observer`` (``rewrite_program(..., observer=)``): one
    :class:`MatchEvent` per match, with its matched subgraph."""

    def __init__(self):
        self.events: List[MatchEvent] = []
        self._tables: Dict[int, tuple] = {}
        self.cover_s = 0.0

    def matched(self, pattern, node: fx.Node, match, tg) -> MatchEvent:
        t0 = time.perf_counter()
        terms = cover_terms(pattern, match, self._tables)
        names = []
        for t in terms:
            fxn = tg.fx_of.get(t.id)
            if fxn is not None and fxn.name not in names:
                names.append(fxn.name)
        if node.name not in names:
            names.insert(0, node.name)
        binds = {}
        for k, t in match.bindings.items():
            fxn = tg.fx_of.get(t.id)
            binds[str(k)] = fxn.name if fxn is not None else _explain.node_desc(t)
        ev = MatchEvent(pattern.name, node.name, names, "matched",
                        [r.name for r in getattr(pattern, "rules", ())], binds)
        self.events.append(ev)
        self.cover_s += time.perf_counter() - t0
        return ev


# --------------------------------------------------------- graph model

def _short_target(n: fx.Node) -> str:
    if n.op == "placeholder":
        return "input"
    if n.op == "output":
        return "output"
    t = n.target
    if getattr(t, "__name__", None) == "getitem" and getattr(t, "__module__", "") in (
            "_operator", "operator"):
        return f"getitem[{n.args[1]}]" if len(n.args) > 1 else "getitem"
    s = str(t)
    if s.startswith("aten."):
        s = s[5:]
    for suf in (".default", ".Tensor", ".Scalar", ".int", ".dim", ".self"):
        if s.endswith(suf):
            s = s[:-len(suf)]
            break
    return s


def _full_target(n: fx.Node) -> str:
    if n.op in ("placeholder", "output"):
        return n.op
    t = n.target
    return getattr(t, "__name__", str(t)) if not hasattr(t, "_schema") else str(t)


def _tensor_info(v) -> Tuple[Optional[str], Optional[str]]:
    shape = getattr(v, "shape", None)
    dtype = getattr(v, "dtype", None)
    if shape is None and isinstance(v, (list, tuple)):
        parts = [_tensor_info(x) for x in v]
        return ("(" + ", ".join(p[0] or "?" for p in parts) + ")",
                "(" + ", ".join(p[1] or "?" for p in parts) + ")")
    if shape is None:
        return (None, type(v).__name__ if v is not None else None)
    sh = "[" + ", ".join(str(d) for d in shape) + "]"
    return sh, (str(dtype).replace("torch.", "") if dtype is not None else None)


_DT = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64",
       "int64": "i64", "int32": "i32", "bool": "bool", "int8": "i8", "uint8": "u8"}


def module_path(n: fx.Node) -> str:
    stack = n.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    path = list(stack.values())[-1]
    path = path[0] if isinstance(path, tuple) else str(path)
    path = re.sub(r"\[(\d+)\]", r".\1", path)  # L['self'].layers[0] forms
    return re.sub(r"^L\['self'\]\.?", "", path)


_LAYER = re.compile(r"^((?:[^.]+\.)*?[^.\d][^.]*)\.(\d+)(?:\.|$)")


def layer_of(n: fx.Node) -> Optional[Tuple[str, int]]:
    """``(template, index)`` of the repeated layer ``n`` belongs to
    (``("layers", 3)`` for ``layers.3.self_attn.q_proj``), None outside."""
    m = _LAYER.match(module_path(n))
    return (m.group(1), int(m.group(2))) if m else None


def hidden_names(ep) -> set:
    """Placeholders that are not user inputs (parameters, buffers,
    constants): left out of the picture."""
    out = set()
    sig = getattr(ep, "graph_signature", None)
    for spec in getattr(sig, "input_specs", ()) or ():
        if getattr(spec.kind, "name", str(spec.kind)) != "USER_INPUT":
            arg = getattr(spec, "arg", None)
            if hasattr(arg, "name"):
                out.add(arg.name)
    return out


def _hidden(n: fx.Node, params: set) -> bool:
    if n.op == "get_attr" or (n.op == "placeholder" and n.name in params):
        return True
    return n.op == "call_function" and str(n.target).startswith(HIDDEN_TARGETS)


class _Marks:
    """What is drawn on a graph's nodes: per node name, the events on it and
    how it is styled (the strongest mark wins: created > fired > matched >
    near > declined)."""
    RANK = {"created": 5, "fired": 4, "matched": 3, "near-at": 2, "near": 1, "declined": 0}

    def __init__(self):
        self.events: Dict[str, List[int]] = {}
        self.style: Dict[str, Tuple[str, str]] = {}  # name -> (kind, colour key)

    def add(self, name: str, ev_index: int, kind: str, key: str) -> None:
        lst = self.events.setdefault(name, [])
        if ev_index not in lst:
            lst.append(ev_index)
        old = self.style.get(name)
        if old is None or self.RANK[kind] > self.RANK[old[0]]:
            self.style[name] = (kind, key)


class _Colors:
    def __init__(self, keys: Sequence[str]):
        self.index = {k: i for i, k in enumerate(dict.fromkeys(keys))}

    def of(self, key: str) -> Tuple[str, str, int]:
        i = self.index.setdefault(key, len(self.index))
        s, f = PALETTE[i % len(PALETTE)]
        return s, f, i

    def table(self) -> Dict[str, List[str]]:
        """rule (or pattern) -> [stroke, fill]."""
        return {k: list(PALETTE[i % len(PALETTE)]) for k, i in self.index.items()}


def _esc(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _dot_node_attrs(kind: Optional[str], color: Optional[Tuple[str, str, int]]) -> str:
    if kind is None:
        return ""
    if kind in ("near", "near-at"):
        s, f = NEAR
        if kind == "near":
            return (f', color="{s}", penwidth=1.5, style="rounded,filled,dashed", '
                    'fillcolor="#fff6f5"')
        return f', color="{s}", penwidth=2.5, style="rounded,filled,bold", fillcolor="{f}"'
    s, f, _ = color
    if kind == "declined":
        return f', color="{s}", penwidth=2, style="rounded,filled,dashed", fillcolor="#fafafa"'
    if kind == "created":
        return f', color="{s}", penwidth=3, style="rounded,filled,bold", fillcolor="{f}"'
    return f', color="{s}", penwidth=2, style="rounded,filled", fillcolor="{f}"'


def _layout(graph: fx.Graph, params: set, marks: _Marks, colors: _Colors, prefix: str,
            max_layers: int) -> Tuple[tuple, dict, dict]:
    """The dot source of ``graph`` drawn with ``marks`` (``(lines, boxes,
    box_of, nodes)``: node declarations, collapsed-layer boxes, which box
    each collapsed node is in, the nodes drawn), the node details and
    stats; node ids in the SVG are ``prefix + "_" + FX name``."""
    nodes = [n for n in graph.nodes if not _hidden(n, params)]
    layer = {n: layer_of(n) for n in nodes}
    # layers to collapse: per template, when there are more than max_layers
    by_tmpl: Dict[str, Dict[int, List[fx.Node]]] = {}
    for n in nodes:
        if layer[n] is not None:
            by_tmpl.setdefault(layer[n][0], {}).setdefault(layer[n][1], []).append(n)
    collapsed: Dict[Tuple[str, int], str] = {}  # layer -> what it looks like
    expanded_layers: List[Tuple[str, int]] = []
    for tmpl, layers in by_tmpl.items():
        idxs = sorted(layers)
        if len(idxs) <= max_layers:
            expanded_layers.extend((tmpl, i) for i in idxs)
            continue
        shown: Dict[tuple, int] = {}
        for i in idxs:
            sig = tuple((_short_target(n), marks.style.get(n.name, ("", ""))[0],
                         marks.style.get(n.name, ("", ""))[1]) for n in layers[i])
            if sig in shown:
                collapsed[(tmpl, i)] = f"like {tmpl}.{shown[sig]}"
            elif len(shown) < max_layers:
                shown[sig] = i
                expanded_layers.append((tmpl, i))
            else:
                collapsed[(tmpl, i)] = "differs from the layers shown"
    box_of = {n: f"{prefix}_layer_{layer[n][0]}.{layer[n][1]}" for n in nodes
              if layer[n] is not None and layer[n] in collapsed}
    details: Dict[str, dict] = {}
    lines = ['digraph G {',
             'graph [rankdir=TB, nodesep=0.18, ranksep=0.28, fontname="Helvetica", '
             'fontsize=11, bgcolor="transparent", pad=0.1];',
             'node [shape=box, style="rounded,filled", fillcolor="#ffffff", color="#8a8a8a", '
             'fontname="Helvetica", fontsize=9, height=0.3, margin="0.07,0.03"];',
             'edge [color="#9a9a9a", arrowsize=0.5];']
    by_layer_nodes: Dict[Optional[Tuple[str, int]], List[str]] = {}
    for n in nodes:
        if n in box_of:
            continue
        sh, dt = _tensor_info(n.meta.get("val"))
        kind, key = marks.style.get(n.name, (None, None))
        color = colors.of(key) if key else None
        label = n.name if n.op in ("placeholder", "output") else \
            f"{n.name}\n{_short_target(n)}" + (f" {sh}" if sh else "") + \
            (f" {_DT.get(dt, dt)}" if dt and sh else "")
        classes = ["fx"] + ([kind] if kind else []) + \
            ([f"c{color[2]}"] if color is not None and kind not in ("near", "near-at") else [])
        shape = ', shape=ellipse, style="filled", fillcolor="#eef3f7"' \
            if n.op in ("placeholder", "output") and kind is None else ""
        by_layer_nodes.setdefault(layer[n], []).append(
            f'"{_esc(n.name)}" [id="{prefix}_{_esc(n.name)}", class="{" ".join(classes)}", '
            f'label="{_esc(label)}"{shape}{_dot_node_attrs(kind, color)}];')
        details[n.name] = {
            "op": n.op, "target": _full_target(n), "shape": sh, "dtype": dt,
            "module": module_path(n) or None,
            "args": [a.name for a in n.all_input_nodes],
            "events": marks.events.get(n.name, [])}
    for key, decls in by_layer_nodes.items():
        if key is None:
            lines.extend(decls)
            continue
        cid = f"{key[0]}.{key[1]}"
        lines.append(f'subgraph "cluster_{_esc(cid)}" {{ id="{prefix}_cluster_{_esc(cid)}"; '
                     f'label="{_esc(cid)}"; labeljust=l; style="rounded,dashed"; '
                     f'color="#b5b5b5"; fontcolor="#666666";')
        lines.extend(decls)
        lines.append("}")
    # collapsed layers: one box each
    boxes: Dict[str, dict] = {}
    for n, box in box_of.items():
        b = boxes.setdefault(box, {"layer": f"{layer[n][0]}.{layer[n][1]}", "nodes": 0,
                                   "like": collapsed[layer[n]], "events": []})
        b["nodes"] += 1
        for e in marks.events.get(n.name, []):
            if e not in b["events"]:
                b["events"].append(e)
    for box, b in boxes.items():
        details[box] = {"op": "collapsed", "target": f"layer {b['layer']} (collapsed)",
                        "module": b["layer"], "nodes": b["nodes"], "like": b["like"],
                        "events": b["events"], "shape": None, "dtype": None, "args": []}
    stats = {"nodes": len(nodes), "drawn": len(details), "collapsed_layers": len(boxes),
             "expanded_layers": len(expanded_layers)}
    return (lines, boxes, box_of, nodes), details, stats


def _summary_counts(events: Sequence[MatchEvent], idxs: Sequence[int]
                    ) -> Dict[str, Dict[str, int]]:
    out: Dict[str, Dict[str, int]] = {}
    for i in idxs:
        e = events[i]
        what = f"{e.rule} fired" if e.status == "fired" else e.status
        d = out.setdefault(e.pattern, {})
        d[what] = d.get(what, 0) + 1
    return out


def draw(graph: fx.Graph, params: set, marks: _Marks, colors: _Colors, prefix: str,
         events: Sequence[MatchEvent], max_layers: int, dot: str) -> Tuple[str, dict, dict]:
    """``(svg, details, stats)``: ``graph`` laid out by ``dot`` with
    ``marks`` (ids ``prefix_NAME``; collapsed layers ``prefix_layer_T.I``)."""
    (lines, boxes, box_of, nodes), details, stats = _layout(
        graph, params, marks, colors, prefix, max_layers)
    for box, b in boxes.items():
        counts = _summary_counts(events, b["events"])
        fired_keys = []
        for i in b["events"]:
            e = events[i]
            if e.status == "fired":
                fired_keys.append(e.rule)
        fills = [colors.of(k)[1] for k in dict.fromkeys(fired_keys)]
        text = [f"{b['layer']}: {b['nodes']} nodes, {b['like']}"]
        for p, d in sorted(counts.items()):
            text.append(f"{p}: " + ", ".join(f"{v} {k}" for k, v in sorted(d.items())))
        if not counts:
            text.append("no match")
        style = ('style="filled,striped", fillcolor="' + ":".join(fills) + '"') if fills \
            else 'style="filled", fillcolor="#eeeeee"'
        lines.append(f'"{_esc(box)}" [id="{_esc(box)}", class="collapsed", shape=box, '
                     f'{style}, color="#555555", penwidth=1.5, fontsize=10, '
                     f'label="{_esc(chr(10).join(text))}"];')
    drawn = set(details)
    seen = set()
    for n in nodes:
        dst = box_of.get(n, n.name)
        for a in n.all_input_nodes:
            src = box_of.get(a, a.name)
            if src not in drawn or dst not in drawn or src == dst or (src, dst) in seen:
                continue
            seen.add((src, dst))
            if dst in boxes and a not in box_of and layer_of(a) is None:
                # a value from outside the layers (rotary tables, the mask)
                # read by a collapsed layer: named in the box's details, not
                # drawn (32 long edges would fan out over the page)
                details[dst]["args"].append(src)
                continue
            lines.append(f'"{_esc(src)}" -> "{_esc(dst)}";')
    lines.append("}")
    src = "\n".join(lines)
    t0 = time.perf_counter()
    try:
        r = subprocess.run([dot, "-Tsvg"], input=src.encode(), capture_output=True,
                           timeout=DOT_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"dot took more than {DOT_TIMEOUT} s on a graph of "
                           f"{len(drawn)} nodes") from None
    stats["dot_s"] = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"dot failed ({r.returncode}): "
                           f"{r.stderr.decode(errors='replace').strip()[:500]}")
    svg = r.stdout.decode("utf-8", errors="replace")
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r"<!--.*?-->\n?", "", svg, flags=re.S)
    svg = re.sub(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"',
                 lambda m: f'<svg class="graph" data-w="{m.group(1)}" data-h="{m.group(2)}" '
                           f'width="{m.group(1)}pt" height="{m.group(2)}pt"', svg, count=1)
    stats["svg_bytes"] = len(svg)
    return svg, details, stats


# --------------------------------------------------------------- pages

def _marks_for(graph: fx.Graph, events: Sequence[MatchEvent], which: str) -> _Marks:
    names = {n.name for n in graph.nodes}
    m = _Marks()
    for i, e in enumerate(events):
        key = e.rule if e.status == "fired" else e.rules[0] \
            if e.status == "declined" and e.rules else e.pattern
        if e.status == "near":
            for c in e.cover:
                if c in names:
                    m.add(c, i, "near", key)
            if e.at in names:
                m.add(e.at, i, "near-at", key)
            continue
        if which == "after" and e.status == "fired":
            for c in e.created:
                if c in names:
                    m.add(c, i, "created", key)
            continue
        if which == "after" and e.status == "matched":
            continue
        for c in e.cover:
            if c in names:
                m.add(c, i, e.status, key)
    return m


def _legend(colors: _Colors, counts: Dict[str, str]) -> str:
    items = []
    for key, i in colors.index.items():
        s, f = PALETTE[i % len(PALETTE)]
        items.append(f'<span class="sw" style="background:{f};border-color:{s}"></span>'
                     f'<b>{_html.escape(key)}</b> <span class="dim">'
                     f'{_html.escape(counts.get(key, ""))}</span>')
    return " ".join(f'<span class="li">{x}</span>' for x in items)


_CSS = """
*{box-sizing:border-box}
body{margin:0;font:13px/1.35 Helvetica,Arial,sans-serif;color:#222;background:#fff;
 display:flex;flex-direction:column;height:100vh}
header{padding:8px 12px;border-bottom:1px solid #ddd;background:#fafafa}
h1{font-size:16px;margin:0 0 4px}
.dim{color:#777}
.li{display:inline-block;margin:2px 12px 2px 0;white-space:nowrap}
.sw{display:inline-block;width:14px;height:11px;border:2px solid;border-radius:3px;
 vertical-align:-1px;margin-right:4px}
.sw.declined{border-style:dashed;background:#fafafa}
.sw.created{border-width:3px}
.sw.near{border-style:dashed;background:#fff6f5}
table.sum{border-collapse:collapse;margin:4px 0;font-size:12px}
table.sum td,table.sum th{padding:1px 8px 1px 0;text-align:left;vertical-align:top}
table.sum th{color:#555;font-weight:600}
main{flex:1;display:flex;min-height:0}
.panel{flex:1;display:flex;flex-direction:column;min-width:0;border-right:1px solid #ddd}
.panel h2{font-size:13px;margin:0;padding:4px 8px;background:#f0f0f0;display:flex;
 align-items:center;gap:8px}
.panel h2 button{font-size:11px;padding:0 6px}
.view{flex:1;overflow:auto;background:#fff}
aside{width:340px;overflow:auto;padding:8px 10px;background:#fcfcfc;font-size:12px}
aside h3{font-size:13px;margin:0 0 4px;word-break:break-all}
aside .k{color:#666}
aside ul{padding-left:16px;margin:4px 0}
aside li{margin-bottom:4px}
.reason{font-family:ui-monospace,Menlo,monospace;font-size:11px;white-space:pre-wrap;
 word-break:break-word}
svg.graph .node{cursor:pointer}
svg.graph .node.sel polygon,svg.graph .node.sel path,svg.graph .node.sel ellipse{
 stroke:#000!important;stroke-width:3.5px}
svg.graph .node.hl polygon,svg.graph .node.hl path{stroke:#000;stroke-width:2.5px}
.misses li{cursor:pointer}
"""

_JS = r"""
(function(){
var D=JSON.parse(document.getElementById('pm-data').textContent);
var panel=document.getElementById('details');
function esc(s){return String(s==null?'':s).replace(/[&<>"]/g,function(c){
 return {'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c];});}
function evText(i){var e=D.events[i],h='<li><b>'+esc(e.pattern)+'</b> ';
 if(e.status==='fired')h+='fired: rule <b>'+esc(e.rule)+'</b>'+(e.created.length?
  ' built '+esc(e.created.join(', ')):'');
 else if(e.status==='declined'){h+='matched, <b>no rule fired</b>:<ul>';
  e.declines.forEach(function(d){h+='<li>'+esc(d[0])+': <span class="reason">'+esc(d[1])+
  '</span></li>';});h+='</ul>';}
 else if(e.status==='matched')h+='matches here';
 else if(e.status==='near')h+='near miss from <b>'+esc(e.root)+'</b>'+(e.at?', failed at <b>'+
  esc(e.at)+'</b>':'')+'<div class="reason">'+esc(e.message)+'</div>';
 h+='<div class="dim">root '+esc(e.root)+(e.cover.length>1?', '+e.cover.length+
  ' nodes matched':'')+'</div>';
 var b=Object.keys(e.bindings||{});if(b.length)h+='<div class="dim">bindings: '+
  esc(b.map(function(k){return k+'='+e.bindings[k];}).join(', '))+'</div>';
 return h+'</li>';}
function show(g,name){var d=(D.nodes[g]||{})[name];if(!d){return;}
 var h='<h3>'+esc(name)+'</h3><div><span class="k">'+esc(g)+' graph</span></div>';
 h+='<div><span class="k">op</span> '+esc(d.target)+'</div>';
 if(d.shape)h+='<div><span class="k">shape</span> '+esc(d.shape)+'</div>';
 if(d.dtype)h+='<div><span class="k">dtype</span> '+esc(d.dtype)+'</div>';
 if(d.module)h+='<div><span class="k">module</span> '+esc(d.module)+'</div>';
 if(d.nodes)h+='<div><span class="k">collapsed</span> '+d.nodes+' nodes, '+esc(d.like)+'</div>';
 if(d.args&&d.args.length)h+='<div><span class="k">args</span> '+esc(d.args.join(', '))+'</div>';
 if(d.events.length){h+='<div style="margin-top:6px"><b>matches</b></div><ul>';
  var seen=0;d.events.forEach(function(i){if(seen++<40)h+=evText(i);});
  if(d.events.length>40)h+='<li>… '+(d.events.length-40)+' more</li>';h+='</ul>';}
 else h+='<div class="dim" style="margin-top:6px">no match on this node</div>';
 panel.innerHTML=h;}
var pinned=null;
function nameOf(el){return el.getAttribute('data-name');}
var svgs=document.querySelectorAll('svg.graph');
svgs.forEach(function(svg){var g=svg.getAttribute('data-graph');
 svg.querySelectorAll('g.node').forEach(function(n){
  var t=n.querySelector('title');n.setAttribute('data-name',t?t.textContent:'');
  n.addEventListener('mouseenter',function(){show(g,nameOf(n));});
  n.addEventListener('mouseleave',function(){if(pinned)show(pinned.closest('svg')
   .getAttribute('data-graph'),nameOf(pinned));});
  n.addEventListener('click',function(ev){if(pinned)pinned.classList.remove('sel');
   if(pinned===n){pinned=null;return;}pinned=n;n.classList.add('sel');show(g,nameOf(n));
   ev.stopPropagation();});});});
function fit(view){var svg=view.querySelector('svg.graph');if(!svg)return;
 var w=+svg.getAttribute('data-w'),h=+svg.getAttribute('data-h');
 var z=+(view.getAttribute('data-zoom')||1);
 svg.setAttribute('width',(w*z).toFixed(1)+'pt');svg.setAttribute('height',(h*z).toFixed(1)+'pt');}
document.querySelectorAll('.panel').forEach(function(p){var v=p.querySelector('.view');
 p.querySelectorAll('button[data-z]').forEach(function(b){b.addEventListener('click',function(){
  var z=+(v.getAttribute('data-zoom')||1),k=b.getAttribute('data-z');
  if(k==='fit'){var svg=v.querySelector('svg.graph');
   z=Math.min(1,v.clientWidth/(+svg.getAttribute('data-w')*4/3));}
  else z=Math.max(0.05,Math.min(4,z*(+k)));
  v.setAttribute('data-zoom',z);fit(v);});});});
window.pmFocus=function(id){var el=document.getElementById(id);if(!el)return false;
 var v=el.closest('.view');var r=el.getBoundingClientRect(),vr=v.getBoundingClientRect();
 v.scrollTop+=r.top-vr.top-vr.height*0.6;v.scrollLeft+=r.left-vr.left-vr.width/2+r.width/2;
 return true;};
document.querySelectorAll('[data-focus]').forEach(function(li){li.addEventListener('click',
 function(){var id=li.getAttribute('data-focus');pmFocus(id);var el=document.getElementById(id);
 if(el){if(pinned)pinned.classList.remove('sel');pinned=el;el.classList.add('sel');
 show(el.closest('svg').getAttribute('data-graph'),nameOf(el));}});});
function place(el,rect,y){var v=el.closest('.view'),vr=v.getBoundingClientRect();
 v.scrollTop+=rect.top-y;v.scrollLeft+=(rect.left+rect.right)/2-(vr.left+vr.right)/2;}
// start on the focus match: its nodes at the top of the view, details shown;
// what it became (after) level with its root
var first=D.focus,hash=decodeURIComponent(location.hash.slice(1));
if(hash&&document.getElementById(hash)){var h=document.getElementById(hash);  // a link to a node
 first={id:hash,graph:h.closest('svg').getAttribute('data-graph'),name:nameOf(h)};}
if(first){var el=document.getElementById(first.id);
 if(el){pinned=el;el.classList.add('sel');show(first.graph,first.name);
  var r=null;(first.cover||[first.id]).forEach(function(id){var c=document.getElementById(id);
   if(!c)return;var b=c.getBoundingClientRect();r=r?{top:Math.min(r.top,b.top),
   left:Math.min(r.left,b.left),right:Math.max(r.right,b.right)}:
   {top:b.top,left:b.left,right:b.right};});
  var vr=el.closest('.view').getBoundingClientRect();place(el,r,vr.top+vr.height*0.05);
  var y=el.getBoundingClientRect().top;
  (first.also||[]).forEach(function(id){var a=document.getElementById(id);
   if(a)place(a,a.getBoundingClientRect(),y);});}}
var counts={};['fired','declined','created','matched','near','near-at','collapsed']
 .forEach(function(k){counts[k]=document.querySelectorAll('svg.graph g.node.'+k).length;});
document.body.setAttribute('data-highlighted',JSON.stringify(counts));
document.body.setAttribute('data-ready','1');
})();
"""


def _page(title: str, head_html: str, panels: Sequence[Tuple[str, str, str]], data: dict,
          side_extra: str = "") -> str:
    blob = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    out = ['<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
           f"<title>{_html.escape(title)}</title><style>{_CSS}</style></head><body>",
           f"<header><h1>{_html.escape(title)}</h1>{head_html}</header><main>"]
    for graph, heading, svg in panels:
        svg = svg.replace('<svg class="graph"', f'<svg class="graph" data-graph="{graph}"', 1)
        out.append(f'<section class="panel" id="panel-{graph}"><h2>{_html.escape(heading)}'
                   '<button data-z="1.25" title="zoom in">+</button>'
                   '<button data-z="0.8" title="zoom out">−</button>'
                   '<button data-z="fit" title="fit the width">fit</button></h2>'
                   f'<div class="view" data-zoom="1">{svg}</div></section>')
    out.append('<aside><div id="details"><span class="dim">Hover a node for its details; '
               'click to keep them.</span></div>' + side_extra + "</aside></main>")
    out.append(f'<script type="application/json" id="pm-data">{blob}</script>')
    out.append(f"<script>{_JS}</script></body></html>\n")
    return "".join(out)


def _style_legend() -> str:
    return ('<span class="li"><span class="sw" style="background:#cfe3f3;border-color:#0072B2">'
            '</span>fired (rule\'s colour)</span>'
            '<span class="li"><span class="sw declined" style="border-color:#0072B2"></span>'
            'matched, every rule declined</span>'
            '<span class="li"><span class="sw created" style="background:#cfe3f3;'
            'border-color:#0072B2"></span>built by the rule (after)</span>'
            '<span class="li"><span class="sw" style="background:#eeeeee;border-color:#555">'
            '</span>collapsed layer</span>')


def rewrite_page(before_ep, after_ep, report, recorder: Recorder, title: str = "rewrite",
                 info: Optional[Dict[str, str]] = None, max_layers: int = DEFAULT_MAX_LAYERS,
                 dot: Optional[str] = None) -> Tuple[str, dict]:
    """``(html, stats)``: the report page of a rewrite of ``before_ep`` into
    ``after_ep`` (ExportedPrograms; ``report`` the driver's
    :class:`~pypm_verified.rewriting.report.RewriteReport`, ``recorder`` the
    observer it ran with). ``info``: extra summary rows. ``stats``: nodes
    drawn, layers collapsed, ``dot`` seconds and SVG bytes per graph."""
    dot = dot or find_dot()
    events = recorder.events
    keys = []
    for p, rules in report.rules.items():
        keys.extend(rules)
    keys.extend(e.rule for e in events if e.status == "fired")
    keys.extend(e.rules[0] if e.rules else e.pattern for e in events if e.status == "declined")
    colors = _Colors(keys)
    stats, nodes, panels = {}, {}, []
    for which, ep in (("before", before_ep), ("after", after_ep)):
        marks = _marks_for(ep.graph, events, which)
        svg, det, st = draw(ep.graph, hidden_names(ep), marks, colors, which, events,
                            max_layers, dot)
        stats[which], nodes[which] = st, det
        heading = (f"before: {report.nodes_before} call nodes" if which == "before" else
                   f"after: {report.nodes_after} call nodes")
        panels.append((which, heading, svg))
    fired = [e for e in events if e.status == "fired"]
    declined = [e for e in events if e.status == "declined"]
    rows = []
    for p in sorted(report.matches):
        m = report.matches[p]
        rows.append(f"<tr><td><b>{_html.escape(p)}</b></td><td>{m} match(es)</td>"
                    f"<td>{m - report.unfired(p)} fired</td><td></td></tr>")
        for r in report.rules.get(p, ()):
            reasons = report.why_not_fired(p, r)
            why = ""
            if reasons:
                why = reasons[0][0] + (f" ({reasons[0][1]} of {sum(c for _, c in reasons)}; "
                                       f"{len(reasons) - 1} other reason(s) on hover)"
                                       if len(reasons) > 1 else "")
            s, f, _ = colors.of(r)
            rows.append(f'<tr><td>&nbsp;&nbsp;<span class="sw" style="background:{f};'
                        f'border-color:{s}"></span>{_html.escape(r)}</td><td></td>'
                        f"<td>{report.firings.get(r, 0)} fired</td>"
                        f'<td class="reason">{_html.escape(why)}</td></tr>')
    if not rows:
        rows.append("<tr><td>(no pattern matched)</td></tr>")
    info = dict(info or {})
    facts = [f"nodes {report.nodes_before} → {report.nodes_after}",
             f"{report.total} rewrite(s) in {report.iterations} pass(es)",
             f"engine {report.engine}", f"target {report.target}"] + \
        [f"{k} {v}" for k, v in info.items()]
    counts = {}
    for p, rules in report.rules.items():
        for r in rules:
            counts[r] = f"({p}): fired {report.firings.get(r, 0)}"
    head = (f'<div class="dim">{_html.escape(" · ".join(facts))}</div>'
            f'<table class="sum"><tr><th>pattern / rule</th><th>matches</th><th>fired</th>'
            f'<th>why not fired</th></tr>{"".join(rows)}</table>'
            f"<div>{_legend(colors, counts)}</div><div>{_style_legend()}</div>")
    focus = None  # the page opens on the largest fired match (else a declined one)
    for e in sorted(fired, key=lambda e: -len(e.cover)) + declined:
        if e.root in nodes["before"]:
            also = [f"after_{c}" for c in e.created + [e.root] if c in nodes["after"]][:1]
            focus = {"graph": "before", "name": e.root, "id": f"before_{e.root}", "also": also,
                     "cover": [f"before_{c}" for c in e.cover if c in nodes["before"]]}
            break
    data = {"kind": "rewrite", "events": [e.as_dict() for e in events], "nodes": nodes,
            "focus": focus, "stats": stats, "colors": colors.table()}
    return _page(title, head, panels, data), stats


def explain_page(ep, pattern_name: str, matches: Sequence[MatchEvent],
                 misses: Sequence[MatchEvent], title: str = "explain",
                 info: Optional[Dict[str, str]] = None, max_layers: int = DEFAULT_MAX_LAYERS,
                 dot: Optional[str] = None) -> Tuple[str, dict]:
    """``(html, stats)``: the picture of ``explain``: ``ep``'s graph with the
    pattern's ``matches`` (status "matched") and near ``misses`` (status
    "near", with ``message`` and ``at``)."""
    dot = dot or find_dot()
    events = list(matches) + list(misses)
    colors = _Colors([pattern_name])
    marks = _marks_for(ep.graph, events, "before")
    svg, det, st = draw(ep.graph, hidden_names(ep), marks, colors, "model", events,
                        max_layers, dot)
    items = []
    for i, e in enumerate(events):
        if e.status != "near":
            continue
        target = e.at if e.at in det else e.root
        items.append(f'<li data-focus="model_{_html.escape(target)}"><b>'
                     f"{_html.escape(e.root)}</b>: <span class=\"reason\">"
                     f"{_html.escape((e.message or '').splitlines()[-1] if e.message else '')}"
                     "</span></li>")
    side = ""
    if items:
        side = ('<div style="margin-top:12px"><b>near misses</b> (deepest first; click '
                f'to show)<ol class="misses">{"".join(items)}</ol></div>')
    facts = [f"{len(matches)} match(es)", f"{len(misses)} near miss(es) shown"] + \
        [f"{k} {v}" for k, v in (info or {}).items()]
    s, f, _ = colors.of(pattern_name)
    head = (f'<div class="dim">{_html.escape(" · ".join(facts))}</div><div>'
            f'<span class="li"><span class="sw" style="background:{f};border-color:{s}"></span>'
            f'<b>{_html.escape(pattern_name)}</b> matches</span>'
            f'<span class="li"><span class="sw near" style="border-color:{NEAR[0]}"></span>'
            'near miss: what matched before it failed</span>'
            f'<span class="li"><span class="sw" style="background:{NEAR[1]};'
            f'border-color:{NEAR[0]}"></span>near miss: where it failed</span>'
            '<span class="li"><span class="sw" style="background:#eeeeee;border-color:#555">'
            '</span>collapsed layer</span></div>')
    focus = None  # the deepest near miss (what explain is for), else the first match
    for e in list(misses) + list(matches):
        name = e.at if e.status == "near" and e.at in det else e.root
        if name in det:
            focus = {"graph": "model", "name": name, "id": f"model_{name}",
                     "cover": [f"model_{c}" for c in e.cover + [name] if c in det]}
            break
    data = {"kind": "explain", "events": [e.as_dict() for e in events],
            "nodes": {"model": det}, "focus": focus, "stats": {"model": st},
            "colors": colors.table()}
    return _page(title, head, [("model", f"{pattern_name} on the model's graph", svg)], data,
                 side), {"model": st}


def explain_events(pattern, tg, matches: Sequence, explanations: Sequence
                   ) -> Tuple[List[MatchEvent], List[MatchEvent]]:
    """``(matches, near misses)`` as :class:`MatchEvent` s for
    :func:`explain_page`: ``matches`` are :class:`~pypm_verified.Match` es
    of ``pattern`` on ``tg`` (a :class:`~.importer.TermGraph`), ``explanations``
    :class:`~pypm_verified.engines.explain.Explanation` s (a matched one
    counts as a match)."""
    def fx_name(t) -> Optional[str]:
        n = tg.fx_of.get(t.id) if t is not None else None
        return n.name if n is not None else None

    cache: dict = {}
    found, near = [], []
    for m in list(matches) + [e.match for e in explanations if e.matched]:
        root = fx_name(m.root)
        if root is None or any(e.root == root for e in found):
            continue
        cover = [c for c in (fx_name(t) for t in cover_terms(pattern, m, cache)) if c]
        binds = {str(k): fx_name(t) or _explain.node_desc(t) for k, t in m.bindings.items()}
        found.append(MatchEvent(pattern.name, root, cover or [root], "matched",
                                [r.name for r in getattr(pattern, "rules", ())], binds))
    for e in explanations:
        if e.matched:
            continue
        root = fx_name(e.node)
        if root is None:
            continue
        terms = near_terms(pattern, e.node, cache) if e.kind != "root" else [e.node]
        cover = [c for c in (fx_name(t) for t in terms) if c]
        ev = MatchEvent(pattern.name, root, cover or [root], "near",
                        [r.name for r in getattr(pattern, "rules", ())])
        ev.message = str(e)
        ev.at = fx_name(e.at)
        if ev.at is None and e.at is not None:  # a constant: where its consumer is
            for t in reversed(terms):
                if any(a is e.at for a in getattr(t, "args", ())) and fx_name(t):
                    ev.at = fx_name(t)
                    break
        near.append(ev)
    return found, near
