"""The HTML report of ``rewrite --html`` and ``explain --html``: pictures of
the graph with the matches on it.

One self-contained file (no network: the SVG, the data, the CSS and the
script are inline). The markup is in the Jinja2 templates of
``templates/`` (``report.html.j2``, which ``rewrite.html.j2`` and
``explain.html.j2`` extend; it includes ``report.css`` and ``report.js``),
autoescaped; this module prepares what they show. The graphs are laid out
by Graphviz's ``dot`` (the Debian package ``graphviz``, called as a
program: :func:`find_dot`), the one layout engine for layered, directed
graphs that is packaged, maintained for decades and needs no JavaScript at
view time; the file holds the SVG it wrote, so the page shows the graph
even with scripts off.

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
not the bound variables) is found by re-running the reference matcher with
the tracer of :mod:`pypm_verified.engines.cover` at the match's root and recording the
nodes it matched, keeping the solution whose bindings are the engine's.
"""
from __future__ import annotations

import functools
import re
import shutil
import subprocess
import time
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import jinja2
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


@functools.lru_cache(maxsize=None)
def _templates() -> jinja2.Environment:
    """The page templates (``templates/`` in this package, read through the
    package loader so an installed wheel finds them). Autoescaped: every
    string a template prints is escaped once, by Jinja; the page's data
    reaches the script through ``|tojson`` (``<``, ``>``, ``&`` and ``'``
    written as ``\\u003c`` etc., so no string can end the script element),
    in the order it was built."""
    env = jinja2.Environment(loader=jinja2.PackageLoader(__package__, "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True)
    env.policies["json.dumps_kwargs"] = {"separators": (",", ":")}
    return env


def _page(template: str, title: str, panels: Sequence[Tuple[str, str, str]], data: dict,
          **context) -> str:
    """Render ``template`` (extending ``report.html.j2``); ``panels`` are
    ``(graph, heading, svg)``."""
    tag = '<svg class="graph"'
    return _templates().get_template(template).render(
        title=title, data=data, **context,
        panels=[{"graph": g, "heading": heading,
                 "svg": svg.replace(tag, f'{tag} data-graph="{g}"', 1)}
                for g, heading, svg in panels])


def _swatch(colors: _Colors, key: str) -> dict:
    s, f, _ = colors.of(key)
    return {"stroke": s, "fill": f}


def rewrite_page(before_ep, after_ep, report, recorder: Recorder, title: str = "rewrite",
                 info: Optional[Dict[str, str]] = None, max_layers: int = DEFAULT_MAX_LAYERS,
                 dot: Optional[str] = None) -> Tuple[str, dict]:
    """``(html, stats)``: the report page of a rewrite of ``before_ep`` into
    ``after_ep`` (ExportedPrograms; ``report`` the driver's
    :class:`~pypm_verified.rewriting.report.RewriteReport`, ``recorder`` the
    observer it ran with). The page says whether the rewrite was validated
    (``report.validation``: "validated (N passes)", or "not validated:
    REASON" in red). ``info``: extra summary rows. ``stats``: nodes
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
    summary = []  # the table of matches, firings and why not fired
    for p in sorted(report.matches):
        m = report.matches[p]
        rules = []
        for r in report.rules.get(p, ()):
            reasons = report.why_not_fired(p, r)
            why = ""
            if reasons:
                why = reasons[0][0] + (f" ({reasons[0][1]} of {sum(c for _, c in reasons)}; "
                                       f"{len(reasons) - 1} other reason(s) on hover)"
                                       if len(reasons) > 1 else "")
            rules.append({"name": r, "fired": report.firings.get(r, 0), "why": why,
                          **_swatch(colors, r)})
        summary.append({"pattern": p, "matches": m, "fired": m - report.unfired(p),
                        "rules": rules})
    facts = [f"nodes {report.nodes_before} → {report.nodes_after}",
             f"{report.total} rewrite(s) in {report.iterations} pass(es)",
             f"engine {report.engine}", f"target {report.target}"] + \
        [f"{k} {v}" for k, v in (info or {}).items()]
    notes = {}
    for p, rules in report.rules.items():
        for r in rules:
            notes[r] = f"({p}): fired {report.firings.get(r, 0)}"
    legend = [{"key": k, "note": notes.get(k, ""), **_swatch(colors, k)}
              for k in list(colors.index)]
    focus = None  # the page opens on the largest fired match (else a declined one)
    for e in sorted(fired, key=lambda e: -len(e.cover)) + declined:
        if e.root in nodes["before"]:
            also = [f"after_{c}" for c in e.created + [e.root] if c in nodes["after"]][:1]
            focus = {"graph": "before", "name": e.root, "id": f"before_{e.root}", "also": also,
                     "cover": [f"before_{c}" for c in e.cover if c in nodes["before"]]}
            break
    data = {"kind": "rewrite", "events": [e.as_dict() for e in events], "nodes": nodes,
            "focus": focus, "stats": stats, "colors": colors.table()}
    validation = getattr(report, "validation", None)  # validated, or why not: always shown
    return _page("rewrite.html.j2", title, panels, data, facts=" · ".join(facts),
                 summary=summary, legend=legend,
                 validation={"ok": bool(validation and validation.validated),
                             "text": str(validation) if validation is not None else
                             "not validated: no validation was recorded"}), stats


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
    near = [{"target": "model_" + (e.at if e.at in det else e.root), "root": e.root,
             "reason": e.message.splitlines()[-1] if e.message else ""}
            for e in events if e.status == "near"]
    facts = [f"{len(matches)} match(es)", f"{len(misses)} near miss(es) shown"] + \
        [f"{k} {v}" for k, v in (info or {}).items()]
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
    return _page("explain.html.j2", title,
                 [("model", f"{pattern_name} on the model's graph", svg)], data,
                 facts=" · ".join(facts), misses=near,
                 pattern={"name": pattern_name, **_swatch(colors, pattern_name)},
                 near={"stroke": NEAR[0], "fill": NEAR[1]}), {"model": st}


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
