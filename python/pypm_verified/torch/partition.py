"""``pm.partition``: outline matches into submodules compiled by a backend
(the directed graph partitioning of the PyPM paper's §4.2, and Relay's
``pattern.partition``).

    import pypm_verified as pm
    part = pm.partition(exported_program, [Attention, Gelu], backend="inductor")
    out = part(*inputs)                      # the submodules run compiled
    part.save("model.pypm.pt"); again = pm.load_partitioned("model.pypm.pt")

1. The program (an ``ExportedProgram``, an ``nn.Module`` with
   ``example_inputs``, or an ``fx.GraphModule``) is taken as an FX
   ``GraphModule`` (``ep.module()``: parameters are attributes) and
   imported as a term graph (:mod:`.importer`).
2. Nodes are visited from the output back to the inputs, so a match at a
   later root claims its nodes before a smaller match inside it; at each,
   the patterns are tried in order (the verified engine by default; the
   proved root-operator index skips the others). A ``pm.dominates``
   pattern is matched by its side condition (:mod:`..engines.dominates`).
3. A match covers a *region*: its root and the nodes its pattern's
   operators matched (the explanation's search, :func:`.html.cover_terms`),
   not the values bound to variables -- those are the region's inputs. A
   region that overlaps one already taken is skipped. Interior nodes used
   outside the region are judged by :func:`.legality.verdict` with the
   ``interior`` policy (default ``"relay"``: refused, unless every outside
   user flows into the root; then the used interior is *duplicated*: a copy
   stays outside for that user).
4. ``group="connected"`` merges regions one of which feeds the other when
   the union stays convex (no path leaves it and comes back), so a chain of
   matches becomes one submodule; ``"match"`` (default) keeps one per match.
5. Each region is outlined with ``torch.fx``'s ``fuse_by_partitions`` into a
   submodule named ``pm<k>_<pattern>`` whose inputs and outputs are the
   boundary tensors, and handed to the backend: ``"inductor"`` (default:
   ``torch.compile`` with Inductor, C++ on a CPU), any other
   ``torch.compile`` backend name, ``"eager"`` (no compilation), or a
   callable ``backend(submodule) -> callable``.
6. :meth:`Partitioned.save` writes the partitioned, uncompiled module and
   the list of submodules (``torch.save``); :func:`load_partitioned` reads
   it back and compiles the submodules again (Inductor's on-disk cache
   makes that fast).
"""
from __future__ import annotations

import copy
import os
import re
import time
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional, Set, Tuple

import torch
import torch.fx as fx

from ..dsl.patterns import Pattern
from ..engines.dominates import Dominates
from ..engines.matching import PatternSet, check_engine, match as pm_match
from . import legality
from .importer import TermGraph
from .loader import LoadError

FORMAT = "pypm-partition-1"
GROUPS = ("match", "connected")


@dataclass
class Submodule:
    """One outlined region: ``name`` (the submodule's attribute), ``patterns``
    (of the matches it holds), ``roots`` and ``nodes`` (FX node names in the
    original program), ``inputs``/``outputs`` (boundary: the submodule's
    call's arguments and users), ``duplicated`` (interior nodes copied for
    an outside user, see :mod:`.legality`)."""
    name: str
    patterns: List[str]
    roots: List[str]
    nodes: List[str]
    inputs: List[str] = field(default_factory=list)
    outputs: List[str] = field(default_factory=list)
    duplicated: List[str] = field(default_factory=list)


class Partitioned:
    """A partitioned program: ``module`` (the ``GraphModule`` whose
    submodules run with the backend; call the object itself to run it),
    ``plain`` (the same without compilation: what :meth:`save` writes),
    ``submodules`` (:class:`Submodule` s), ``refused`` (``(pattern, root,
    reason)`` for matches not outlined), ``backend``, ``partition_s`` (time
    to match and outline) and ``compile_s`` (time of the first call, which
    compiles: set by :meth:`warmup`)."""

    def __init__(self, plain: fx.GraphModule, submodules: List[Submodule], refused,
                 backend, partition_s: float = 0.0, program=None, plan=None):
        self.plain = plain
        self.submodules = submodules
        self.refused = refused
        self.backend = backend
        self.partition_s = partition_s
        self.program = program  # the ExportedProgram partitioned (None: an fx.GraphModule)
        self.plan = plan
        self.compile_s: Optional[float] = None
        self.module = _compile(plain, submodules, backend)

    def __call__(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def warmup(self, *args, **kwargs):
        """Run once (compiling every submodule); sets and returns ``compile_s``."""
        t0 = time.perf_counter()
        with torch.no_grad():
            self.module(*args, **kwargs)
        self.compile_s = time.perf_counter() - t0
        return self.compile_s

    def save(self, path: str) -> None:
        """Write the program and how it was partitioned to ``path`` (one
        ``torch.save`` file: the ``ExportedProgram`` as ``torch.export.save``
        writes it, and the plan -- merged duplicates, copies, each
        submodule's nodes by name; a temporary file renamed over ``path``).
        :func:`load_partitioned` rebuilds the same submodules by replaying
        the plan, without matching again."""
        if self.program is None:
            raise ValueError("save() needs the program as an ExportedProgram or an nn.Module "
                             "(an fx.GraphModule given to pm.partition cannot be saved)")
        import io
        buf = io.BytesIO()
        torch.export.save(self.program, buf)
        tmp = f"{path}.tmp{os.getpid()}"
        torch.save({"format": FORMAT, "program": buf.getvalue(), "plan": self.plan,
                    "refused": [list(r) for r in self.refused]}, tmp)
        os.replace(tmp, path)

    def __repr__(self):
        return (f"<Partitioned: {len(self.submodules)} submodule(s) "
                f"{[s.name for s in self.submodules]}, backend {_backend_name(self.backend)}>")


def load_partitioned(path: str, backend="inductor", allow_pickle: bool = False) -> Partitioned:
    """A program written by :meth:`Partitioned.save`, its submodules rebuilt
    from the saved plan and handed to ``backend`` again. Nothing in the file
    runs: the file is read with the safe unpickler (``weights_only``: its
    format is plain data -- strings, lists, dicts, the program's bytes), the
    program as :func:`pypm_verified.load` reads a ``.pt2`` (``allow_pickle``
    as there). ``LoadError`` (a ``ValueError``, one line) for a file that
    is not one :meth:`Partitioned.save` writes."""
    import pickle
    from .loader import load_exported
    path = os.fspath(path)
    not_ours = f"{path}: not a partitioned program written by pm.partition"
    from . import archive
    try:  # the zip directory first: no bomb reaches torch's reader
        archive.inspect(path)
    except LoadError:
        raise
    except Exception:  # noqa: BLE001 -- not a zip archive: torch.load says what it is
        pass
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        from .untrusted import global_named
        named = global_named(e)
        raise LoadError(f"{not_ours}: it needs Python's full unpickler"
                        + (f" (it names {named})" if named else "")
                        + ", which can run code from the file: refused (the format is plain "
                        "data and never needs it)") from None
    except FileNotFoundError:
        raise LoadError(f"{path}: no such file") from None
    except Exception as e:  # noqa: BLE001 -- torch raises many types for a foreign file
        raise LoadError(f"{not_ours} ({type(e).__name__}: "
                        f"{(str(e).strip().splitlines() or [''])[0]})") from None
    if not isinstance(blob, dict) or blob.get("format") != FORMAT:
        raise LoadError(not_ours)
    _check_plan(blob, not_ours)
    ep = load_exported(blob["program"], allow_pickle=allow_pickle,
                       label=f"{path} (its program)")
    t0 = time.perf_counter()
    gm, subs = _replay(ep, blob["plan"])
    return Partitioned(gm, subs, [tuple(r) for r in blob["refused"]], backend,
                       time.perf_counter() - t0, ep, blob["plan"])


def _check_plan(blob: dict, not_ours: str) -> None:
    """LoadError unless ``blob`` has the shape :meth:`Partitioned.save`
    writes: the program's bytes, a plan of names, the refused matches."""
    def strs(x) -> bool:
        return isinstance(x, (list, tuple)) and all(isinstance(v, str) for v in x)
    plan = blob.get("plan")
    ok = isinstance(blob.get("program"), (bytes, bytearray)) and isinstance(plan, dict) \
        and isinstance(plan.get("dups"), list) and isinstance(plan.get("subs"), list) \
        and isinstance(blob.get("refused", []), list)
    if ok:
        for d in plan["dups"]:
            ok = ok and isinstance(d, (list, tuple)) and len(d) == 3 and strs(d[0]) \
                and isinstance(d[1], str) and isinstance(d[2], (list, tuple)) \
                and all(strs(e) and len(e) == 2 for e in d[2])
        fields = set(Submodule.__dataclass_fields__)
        for d in plan["subs"]:
            ok = ok and isinstance(d, dict) and set(d) <= fields and \
                isinstance(d.get("name"), str) and \
                all(strs(v) for k, v in d.items() if k != "name")
        ok = ok and all(strs(r) for r in blob.get("refused", []))
    if not ok:
        raise LoadError(f"{not_ours} (its plan is damaged)")


# ------------------------------------------------------------------ backend


def _backend_name(backend) -> str:
    return backend if isinstance(backend, str) else getattr(backend, "__name__", repr(backend))


class _Wrapped(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def _compile(plain: fx.GraphModule, submodules: List[Submodule], backend) -> fx.GraphModule:
    gm = copy.copy(plain)  # shares the weights; the submodules are replaced below
    gm._modules = dict(plain._modules)
    for s in submodules:
        sub = getattr(plain, s.name)
        if backend == "eager":
            c = sub
        elif isinstance(backend, str):
            c = torch.compile(sub, backend=backend, dynamic=False)
        elif callable(backend):
            c = backend(sub)
            if not isinstance(c, torch.nn.Module):
                c = _Wrapped(c)
        else:
            raise TypeError(f"backend must be a torch.compile backend name, 'eager' or a "
                            f"callable, not {backend!r}")
        gm._modules[s.name] = c
    return gm


# ----------------------------------------------------------------- matching


_exports: Dict[int, object] = {}


def _exported(module: torch.nn.Module, example_inputs):
    """``module`` exported at the IR the rewriter works on (once per module)."""
    hit = _exports.get(id(module))
    if hit is not None and hit[0] is module:
        return hit[1]
    if example_inputs is None:
        raise ValueError("pm.partition of an nn.Module needs example_inputs")
    args, kwargs = (example_inputs, {}) if isinstance(example_inputs, tuple) \
        else ((), dict(example_inputs))
    with torch.no_grad():
        ep = torch.export.export(module.eval(), args, kwargs).run_decompositions({})
    _exports.clear()
    _exports[id(module)] = (module, ep)
    return ep


def _graph_module(program, example_inputs) -> fx.GraphModule:
    if isinstance(program, torch.export.ExportedProgram):
        return program.module()
    if isinstance(program, fx.GraphModule):
        return copy.deepcopy(program)
    if isinstance(program, torch.nn.Module):
        return _exported(program, example_inputs).module()
    from .loader import LoadedModel
    if isinstance(program, LoadedModel):
        return program.ep.module()
    raise TypeError(f"pm.partition takes an ExportedProgram, an nn.Module with "
                    f"example_inputs or an fx.GraphModule, not {type(program).__name__}")


def _region(pattern, m, root: fx.Node, tg: TermGraph) -> Set[fx.Node]:
    from .html import cover_terms
    bound = {t.id for t in m.bindings.values()}
    region = {root}
    for t in cover_terms(pattern, m):
        n = tg.fx_of.get(t.id)
        if n is not None and n.op == "call_function" and t.id not in bound:
            region.add(n)
    return region


def _convex(nodes: Set[fx.Node]) -> bool:
    """No path leaves ``nodes`` and comes back."""
    seen: Set[fx.Node] = set()
    stack = [u for n in nodes for u in n.users if u not in nodes]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        for u in n.users:
            if u in nodes:
                return False
            stack.append(u)
    return True


def _absorb(region: Set[fx.Node], root: fx.Node) -> Set[fx.Node]:
    """``region`` with every node its interior reaches before the root (all
    dominated by the root, :func:`.legality.verdict` checked it)."""
    region = set(region)
    stack = [u for n in region if n is not root for u in legality.users(n) if u not in region]
    while stack:
        u = stack.pop()
        if u in region:
            continue
        region.add(u)
        stack.extend(w for w in legality.users(u) if w not in region)
    return region


def _duplicate(gm: fx.GraphModule, region: Set[fx.Node], root: fx.Node, esc) -> List[str]:
    """Give each outside user of an interior node a copy of it (and of the
    interior it depends on)."""
    g = gm.graph
    memo: Dict[fx.Node, fx.Node] = {}

    def clone(n):
        if not isinstance(n, fx.Node) or n not in region or n is root:
            return n
        if n in memo:
            return memo[n]
        args, kwargs = fx.node.map_arg((n.args, n.kwargs), clone)
        with g.inserting_before(n):
            c = g.call_function(n.target, args, kwargs)
        c.meta = dict(n.meta)
        memo[n] = c
        return c

    for n, u in esc:
        u.replace_input_with(n, clone(n))
    return sorted(n.name for n in memo)


def _clean(name: str) -> str:
    return re.sub(r"[^0-9A-Za-z_]", "_", name)[:40] or "p"


def partition(program, patterns=None, backend="inductor", *, example_inputs=None,
              engine: str = "verified", interior: str = "relay", group: str = "match",
              dominated: str = "absorb", min_nodes: int = 1) -> Partitioned:
    """Outline the matches of ``patterns`` (``@pm.pattern`` s or
    ``pm.dominates`` patterns; default: the rule library's patterns) in
    ``program`` into submodules compiled by ``backend`` (see the module's
    docstring). ``interior`` is the legality policy
    (:mod:`.legality`); where it lets a match with interior nodes used
    outside proceed (every such user flows into the root), ``dominated``
    says how: ``"absorb"`` (default) takes those users into the region --
    they only feed the root, so nothing is computed twice -- and
    ``"duplicate"`` copies the used interior for them, as Relay does.
    ``group`` is ``"match"`` or ``"connected"``, and a region of fewer than
    ``min_nodes`` call nodes is not outlined."""
    check_engine(engine)
    legality.check_policy(interior)
    if dominated not in ("absorb", "duplicate"):
        raise ValueError(f"dominated must be 'absorb' or 'duplicate', not {dominated!r}")
    if group not in GROUPS:
        raise ValueError(f"unknown group {group!r}; expected one of {GROUPS}")
    if patterns is None:
        from ..library import default_patterns
        patterns = default_patterns()
    patterns = list(patterns)
    for p in patterns:
        if not isinstance(p, (Pattern, Dominates)):
            raise TypeError(f"pm.partition takes @pm.pattern or pm.dominates patterns, "
                            f"not {p!r}")
    t0 = time.perf_counter()
    gm = _graph_module(program, example_inputs)
    tg = TermGraph(gm.graph).build()
    plain = [p for p in patterns if isinstance(p, Pattern)]
    pset = PatternSet(plain, engine) if plain else None
    index = {p: i for i, p in enumerate(plain)}
    fx_users = lambda t: [tg.term[u] for u in tg.fx_of[t.id].users if u in tg.term] \
        if t.id in tg.fx_of else []  # noqa: E731
    fx_output = lambda t: t.id in tg.fx_of and any(  # noqa: E731
        u.op == "output" for u in tg.fx_of[t.id].users)

    taken: Dict[fx.Node, int] = {}
    regions: List[dict] = []
    refused: List[Tuple[str, str, str]] = []
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    for node in reversed(calls):
        if node in taken or node not in tg.term:
            continue
        term = tg.term[node]
        for p in patterns:
            if isinstance(p, Dominates):
                m = p.match(term, engine, users=fx_users, is_output=fx_output,
                            matcher=lambda q, n: pm_match(q, n, engine=engine))
                if m is None:
                    continue
                region = {tg.fx_of[t.id] for t in m.nodes if t.id in tg.fx_of}
                region = {n for n in region if n.op == "call_function"}
            else:
                i = index[p]
                if i not in pset.candidates_at(term):
                    continue
                m = pset.match(i, term)
                if m is None:
                    continue
                region = _region(p, m, node, tg)
            if len(region) < min_nodes:
                continue
            if any(n in taken for n in region):
                refused.append((p.name, node.name, "overlaps a region already outlined"))
                continue
            reason, esc = legality.verdict(region, node, interior)
            if reason is not None:
                refused.append((p.name, node.name, reason))
                continue
            if esc and interior == "relay" and dominated == "absorb":
                region = _absorb(region, node)
                esc = []
                if any(n in taken for n in region):
                    refused.append((p.name, node.name, "overlaps a region already outlined"))
                    continue
            k = len(regions)
            regions.append({"nodes": region, "roots": [node], "patterns": [p.name],
                            "esc": esc})
            for n in region:
                taken[n] = k
            break
    regions.reverse()  # program order
    dups = [([n.name for n in r["nodes"]], r["roots"][0].name,
             [(n.name, u.name) for n, u in r["esc"]]) for r in regions if r["esc"]]
    duplicated: List[List[str]] = []
    for r in regions:
        duplicated.append(_duplicate(gm, r["nodes"], r["roots"][0], r["esc"])
                          if r["esc"] else [])
    if group == "connected":
        regions, duplicated = _merge(regions, duplicated)
    subs = _outline(gm, regions, duplicated)
    plan = {"dups": dups, "subs": [asdict(x) for x in subs]}
    ep = program if isinstance(program, torch.export.ExportedProgram) else None
    if ep is None and hasattr(program, "ep"):
        ep = program.ep
    if ep is None and isinstance(program, torch.nn.Module) \
            and not isinstance(program, fx.GraphModule):
        ep = _exported(program, example_inputs)
    return Partitioned(gm, subs, refused, backend, time.perf_counter() - t0, ep, plan)


def _replay(ep, plan) -> Tuple[fx.GraphModule, List[Submodule]]:
    """The partitioned module of ``ep`` by a recorded plan: the same import
    (its merging of duplicate nodes), copies and outlining, by node name."""
    gm = ep.module()
    TermGraph(gm.graph).build()
    for names, root, esc in plan["dups"]:
        by_name = {n.name: n for n in gm.graph.nodes}
        region = {by_name[x] for x in names}
        _duplicate(gm, region, by_name[root], [(by_name[a], by_name[b]) for a, b in esc])
    recorded = [Submodule(**d) for d in plan["subs"]]
    regions = [{"nodes": {n for n in gm.graph.nodes if n.name in set(x.nodes)},
                "roots": [], "patterns": x.patterns} for x in recorded]
    subs = _outline(gm, regions, [x.duplicated for x in recorded],
                    roots=[x.roots for x in recorded])
    return gm, subs


def _merge(regions, duplicated):
    merged: List[dict] = []
    dups: List[List[str]] = []
    for r, d in zip(regions, duplicated):
        for k, q in enumerate(merged):
            feeds = any(u in r["nodes"] for n in q["nodes"] for u in n.users) or \
                any(u in q["nodes"] for n in r["nodes"] for u in n.users)
            union = q["nodes"] | r["nodes"]
            if feeds and _convex(union):
                merged[k] = {"nodes": union, "roots": q["roots"] + r["roots"],
                             "patterns": q["patterns"] + r["patterns"], "esc": []}
                dups[k] = dups[k] + d
                break
        else:
            merged.append(dict(r))
            dups.append(list(d))
    return merged, dups


def _outline(gm: fx.GraphModule, regions, duplicated, roots=None) -> List[Submodule]:
    from torch.fx.passes.utils.fuser_utils import fuse_by_partitions
    subs: List[Submodule] = []
    # by name: outlining may rebuild the graph's node objects
    wanted = [({n.name for n in r["nodes"]}, roots[k] if roots else [n.name for n in r["roots"]])
              for k, r in enumerate(regions)]
    for k, (r, dup) in enumerate(zip(regions, duplicated)):
        names = "_".join(dict.fromkeys(_clean(p) for p in r["patterns"]))
        name = f"pm{k}_{names}"
        want, roots = wanted[k]
        nodes = [n for n in gm.graph.nodes if n.name in want]
        if len(nodes) != len(want):
            raise RuntimeError(f"partition {name}: nodes {sorted(want - {n.name for n in nodes})}"
                               " disappeared while outlining")
        node_names = [n.name for n in nodes]
        tmp = f"__pm_tmp{k}_"
        fuse_by_partitions(gm, [dict.fromkeys(nodes)], prefix=tmp)
        call = next(n for n in gm.graph.nodes if n.op == "call_module"
                    and n.target == f"{tmp}0")
        sub = getattr(gm, call.target)
        delattr(gm, call.target)
        gm.add_submodule(name, sub)
        call.target = name
        call.name = name
        inputs = [a.name for a in call.all_input_nodes]
        outputs = sorted({u.name for u in call.users})
        subs.append(Submodule(name, list(r["patterns"]), roots, node_names, inputs, outputs,
                              list(dup)))
    gm.graph.lint()
    gm.recompile()
    return subs


def outputs_agree(a, b, rtol: float = 1e-4, atol: float = 1e-5) -> bool:
    """Whether two programs' outputs (tensors, or pytrees of them) agree."""
    la, lb = torch.utils._pytree.tree_leaves(a), torch.utils._pytree.tree_leaves(b)
    if len(la) != len(lb):
        return False
    for x, y in zip(la, lb):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape or not torch.allclose(x.float(), y.float(), rtol=rtol,
                                                         atol=atol):
                return False
        elif x != y:
            return False
    return True


__all__ = ["partition", "load_partitioned", "Partitioned", "Submodule", "outputs_agree"]
