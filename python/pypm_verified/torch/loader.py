"""Loading models for rewriting, all into one form: an ExportedProgram at
the export IR after ``run_decompositions({})`` (an *empty* table: it
functionalizes, e.g. ``relu_`` -> ``relu`` and eval-mode dropout ->
``clone``, and keeps ``linear``, ``matmul``, ``softmax``, ``gelu``,
``layer_norm`` and ``scaled_dot_product_attention`` whole; the default
core-ATen table would turn SDPA back into bmm/softmax and is never used).

Accepted inputs (files are told apart by their zip entries before anything
is unpickled, after every entry's CRC-32 has been checked):

* ``.pt2``: a ``torch.export.save``\\ d ExportedProgram (preferred; it
  carries its example inputs);
* a ``torch.save``\\ d dict ``{"model": nn.Module, "example_inputs": tuple}``
  (optionally ``"example_kwargs": dict``). Unpickling it needs Python's full
  unpickler, which runs code the file names: refused (:class:`NeedsPickle`)
  unless the caller opts in with ``allow_pickle=True`` (the CLI's
  ``--allow-pickle``); load only files you trust that way;
* a TorchScript archive (``torch.jit.save``), converted with torch's
  ``TS2EPConverter``; it needs example inputs given separately;
* in-process: an ``ExportedProgram``, an ``nn.Module`` or
  ``fx.GraphModule`` with example inputs.

A module is exported in eval mode and the caller's module is left in the
mode it was in; a module (or submodule) in training mode gets a warning in
:attr:`LoadedModel.warnings` (dropout becomes the identity, batch norm uses
its running statistics).

A ``state_dict`` alone, a corrupt or truncated file, a class that cannot be
found when unpickling, or a model ``torch.export`` cannot export gets a
:class:`LoadError` whose message (one line) says what is wrong and, where
torch names it, the user's source line.

Programs written by the rewriter are loaded back with
:func:`load_rewritten` (``pypm_verified.load``): it registers what the file
needs first (pytree types of its inputs/outputs, e.g. ``transformers``'
model outputs, and operator libraries such as ``pypm.linear_act``). A
``.pt2`` of any kind gets the same: a custom operator it calls is registered
by importing its library (:data:`OP_LIBRARIES`, e.g. ``transformers``'
``grouped_mm_fallback`` of Mixtral's experts), or by modules the caller
names (``imports=``, the CLI's ``--import MODULE``); one still missing is a
LoadError naming it and that remedy.

Nothing in a ``.pt2`` runs when it is loaded (:mod:`.untrusted`): its
pickled parts are read by the safe unpickler (``weights_only``), its names,
size expressions and guards are checked before torch evaluates them, and no
module is imported because the file names it (only :data:`TYPE_PACKAGES`
and :data:`OP_LIBRARIES`, and what the caller imports).
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import io
import json
import logging
import os
import pickle
import re
import sys
import sysconfig
import traceback
import warnings as _warnings
import zipfile
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

import torch

from . import archive as zipcheck
from . import untrusted
from ..errors import first_line
from .errors import LoadError


@dataclass
class LoadedModel:
    """A loaded model: ``ep`` (the ExportedProgram at the export IR),
    ``args``/``kwargs`` (example inputs), ``kind`` (how it was given),
    ``path`` (None in-process) and ``warnings`` (things the user should
    know that did not stop the load, e.g. a model in training mode that was
    exported in eval mode; one line each)."""

    ep: Any
    args: Tuple = ()
    kwargs: Dict[str, Any] = field(default_factory=dict)
    kind: str = "ExportedProgram"
    path: Optional[str] = None
    warnings: List[str] = field(default_factory=list)


# ------------------------------------------------------------------ quiet torch

# torch's pytree deprecation, emitted while (un)pickling treespecs: noise to a user
_NOISE = r".*isinstance\(treespec, LeafSpec\)` is deprecated.*"


@contextlib.contextmanager
def _quiet_torch_logs(level: int = logging.CRITICAL) -> Iterator[None]:
    """Raise every ``torch`` logger to ``level`` for the duration (export
    logs ~25 lines and a graph dump, twice, for a data-dependent branch; the
    :class:`LoadError` says it in one line instead). Restored afterwards."""
    names = ["torch"] + [n for n in logging.root.manager.loggerDict if n.startswith("torch.")]
    saved = []
    for n in names:
        lg = logging.getLogger(n)
        if lg.level < level:
            saved.append((lg, lg.level))
            lg.setLevel(level)
    try:
        with _warnings.catch_warnings():
            _warnings.filterwarnings("ignore", message=_NOISE)
            yield
    finally:
        for lg, lvl in saved:
            lg.setLevel(lvl)


class _HeldStderr(io.StringIO):
    """``sys.stderr`` held back during export: torch ``print``\\ s the partial
    graph of a failed export to stderr (twice); that text is dropped, the
    rest is written out when the block ends."""

    def __init__(self):
        super().__init__()
        self.drop: List[str] = []


@contextlib.contextmanager
def _hold_stderr() -> Iterator[_HeldStderr]:
    held = _HeldStderr()
    real = sys.stderr
    sys.stderr = held
    try:
        yield held
    finally:
        sys.stderr = real
        text = held.getvalue()
        for d in held.drop:
            if d:
                text = text.replace(d + "\n", "").replace(d, "")
        if text.strip():
            real.write(text)
            real.flush()


def _partial_graph(e: BaseException) -> str:
    g = getattr(e, "partial_fx_graph", None)
    return str(g) if g is not None else ""


class _Capture(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: List[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


@contextlib.contextmanager
def _capture_export_logs() -> Iterator[_Capture]:
    """Collect (and do not print) what ``torch.export`` logs: its load logs
    the deserializer's real error as a warning and then raises a generic
    "check the warnings above"."""
    lg = logging.getLogger("torch.export")
    cap = _Capture()
    prop, lvl, handlers = lg.propagate, lg.level, lg.handlers[:]
    for h in handlers:  # torch._logging may have put its own handler here
        lg.removeHandler(h)
    lg.addHandler(cap)
    lg.propagate = False
    if lg.getEffectiveLevel() > logging.WARNING:
        lg.setLevel(logging.WARNING)
    try:
        with _warnings.catch_warnings():
            _warnings.filterwarnings("ignore", message=_NOISE)
            yield cap
    finally:
        lg.removeHandler(cap)
        for h in handlers:
            lg.addHandler(h)
        lg.propagate = prop
        lg.setLevel(lvl)


# ------------------------------------------------------------------ messages

def _innermost(e: BaseException) -> BaseException:
    """The first error of an explicit ``raise ... from`` chain."""
    seen = set()
    while e.__cause__ is not None and id(e) not in seen:
        seen.add(id(e))
        e = e.__cause__
    return e


_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))
_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_FILE_LINE = re.compile(r'File "([^"]+)", line (\d+)(?:, in \S+)?\n\s*(\S[^\n]*)?')


_STDLIB_DIR = os.path.abspath(sysconfig.get_paths()["stdlib"])


def _is_user_file(filename: str) -> bool:
    """Not torch, not this package, not the standard library (site-packages
    counts as the user's: a model from ``transformers`` is user code)."""
    if not filename or filename.startswith("<"):
        return False
    f = os.path.abspath(filename)
    if f.startswith(_STDLIB_DIR + os.sep) and "site-packages" not in f:
        return False
    return not (f.startswith(_TORCH_DIR + os.sep) or f.startswith(_PKG_DIR + os.sep))


def source_line(e: BaseException) -> Optional[str]:
    """``file:line (code)`` of the user's source line that ``e`` (an export
    failure) comes from: the call torch's message names ("The following call
    raised this error"), else the deepest traceback frame outside torch and
    this package (the file relative to the current directory when under it:
    :func:`~pypm_verified.dsl.rules.short_path`); None when there is none."""
    from ..dsl.rules import short_path
    chain, seen = [], set()
    x: Optional[BaseException] = e
    while x is not None and id(x) not in seen:
        seen.add(id(x))
        chain.append(x)
        x = x.__cause__ or x.__context__
    for x in chain:  # torch's own pointer at the user's code
        text = str(x)
        i = text.find("The following call raised this error")
        for m in _FILE_LINE.finditer(text, i if i >= 0 else 0):
            if _is_user_file(m.group(1)):
                code = (m.group(3) or "").strip()
                return f"{short_path(m.group(1))}:{m.group(2)}" + (f" ({code})" if code else "")
    for x in chain:
        frames = [f for f in traceback.extract_tb(x.__traceback__) if _is_user_file(f.filename)]
        if frames:
            f = frames[-1]
            return (f"{short_path(f.filename)}:{f.lineno}"
                    + (f" ({f.line.strip()})" if f.line else ""))
    return None


_DATA_DEPENDENT = ("GuardOnDataDependentSymNode", "DataDependentOutputException",
                   "UserError")


def _export_error(e: BaseException) -> LoadError:
    """One line: torch's reason, and the user's source line where known."""
    reason = f"{type(e).__name__}: {first_line(e).split(' (unhinted')[0]}"
    where = source_line(e)
    if type(e).__name__ in _DATA_DEPENDENT and "data-dependent" in str(e):
        return LoadError("torch.export could not export the model: a Python branch on a "
                         "tensor's values (data-dependent control flow)"
                         + (f" at {where}" if where else "")
                         + "; compute it with torch.where/torch.cond, or take the decision "
                         f"outside the model ({reason})")
    return LoadError(f"torch.export could not export the model: {reason}"
                     + (f" (at {where})" if where else ""))


# ------------------------------------------------------------------ export

_TRAIN_ONLY = ("Dropout", "BatchNorm", "InstanceNorm", "RReLU")


@contextlib.contextmanager
def _eval_mode(model: torch.nn.Module, warns: List[str]) -> Iterator[None]:
    """``model`` in eval mode for the duration; every submodule's own mode
    restored afterwards (the caller's object is left as it was). Appends a
    warning to ``warns`` when some submodule was training."""
    modes = [(m, m.training) for m in model.modules()]
    training = [m for m, t in modes if t]
    if training:
        kinds = sorted({type(m).__name__ for m in training
                        if any(k in type(m).__name__ for k in _TRAIN_ONLY)})
        what = (f" (affects {', '.join(kinds)})" if kinds
                else " (no dropout or batch norm found, so probably no effect)")
        warns.append(f"the model was in training mode; it was exported in eval mode: "
                     f"dropout is the identity and batch norm uses its running "
                     f"statistics{what}")
    model.eval()
    try:
        yield
    finally:
        for m, t in modes:
            m.training = t


def export_module(model, args: Tuple, kwargs: Optional[dict] = None,
                  warnings: Optional[List[str]] = None, dynamic_shapes=None):
    """``torch.export.export`` (in eval mode, under ``no_grad``, torch's
    logging quiet; ``dynamic_shapes`` as torch takes it, e.g. ``{"x": {0:
    Dim("batch")}}``) then ``run_decompositions({})``. The caller's module is
    not changed (its training flags are restored). Warnings (training mode)
    are appended to ``warnings`` when given. LoadError quoting torch's reason
    and the user's source line when export fails."""
    if not isinstance(args, tuple):
        raise LoadError(f"example inputs must be a tuple, not {type(args).__name__}")
    warns = warnings if warnings is not None else []
    ctx = _eval_mode(model, warns) if isinstance(model, torch.nn.Module) \
        else contextlib.nullcontext()
    with ctx, _quiet_torch_logs(), _hold_stderr() as held:
        try:
            with torch.no_grad():
                ep = torch.export.export(model, args, kwargs or {},
                                         dynamic_shapes=dynamic_shapes)
        except Exception as e:  # torch raises many types; quote its reason
            held.drop.append(_partial_graph(e))
            raise _export_error(e) from e
        return decompose(ep)


def decompose(ep):
    """The export IR the rules are written for: ``run_decompositions({})``;
    a program already there (:func:`is_decomposed`, e.g. a ``.pt2`` this
    loader exported and saved) is returned as it is: decomposing it again
    gives the same graph, and takes seconds on a real model."""
    if is_decomposed(ep):
        return ep
    with _quiet_torch_logs():
        return ep.run_decompositions({})


def is_decomposed(ep) -> bool:
    """Whether ``ep`` is already in the export IR ``run_decompositions``
    produces: its dialect is ``"ATEN"`` (``torch.export.export`` gives
    ``"TRAINING"``; ``run_decompositions`` sets ``"ATEN"``, and
    ``torch.export.save`` keeps it) and no operator of its graph mutates an
    input (the IR is functional: ``relu_`` has become ``relu``)."""
    if getattr(ep, "dialect", None) != "ATEN":
        return False
    for n in ep.graph.nodes:
        if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload) \
                and n.target._schema.is_mutable:
            return False
    return True


# ------------------------------------------------------------------ archives

_ZIP_MAGIC = b"PK\x03\x04"


def check_archive(path: str, limits: Optional["zipcheck.Limits"] = None) -> "zipcheck.Archive":
    """The zip archive ``path`` checked as torch will read it
    (:func:`.archive.inspect`: no ambiguous, overlapping or oversized
    entries, caps from ``limits``), then every member read and its CRC-32
    checked (PyTorch's own readers do not: a file with damaged weights would
    load, with wrong weights). LoadError naming the damaged or refused
    member, and saying "truncated or corrupt" for an archive whose end (the
    zip directory) is missing."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as e:
        raise LoadError(f"{path}: cannot read it: {e.strerror or e}") from None
    try:
        arch = zipcheck.inspect(path, str(path), limits or zipcheck.DEFAULT_LIMITS)
    except zipfile.BadZipFile:
        if head == _ZIP_MAGIC:
            raise LoadError(f"{path}: truncated or corrupt: it begins as a zip archive (as "
                            "PyTorch files do) but is not a zip archive that can be read (its "
                            "directory at the end is missing or damaged); re-save or re-copy "
                            "it") from None
        if head[:1] == b"\x80":
            raise LoadError(f"{path}: not a PyTorch file this tool reads: a plain pickle or a "
                            "legacy (pre-1.6) torch.save file, not a zip archive; re-save it "
                            "with torch.export.save (.pt2) or torch.save's default format") \
                from None
        raise LoadError(f"{path}: not a PyTorch file (not a zip archive; expected a "
                        ".pt2 from torch.export.save, a torch.save'd dict or a "
                        "TorchScript archive)") from None
    except OSError as e:
        raise LoadError(f"{path}: cannot read it: {e.strerror or e}") from None
    try:
        zipcheck.read_all(path, arch)
    except OSError as e:
        raise LoadError(f"{path}: cannot read it: {e.strerror or e}") from None
    return arch


def _kind_of(arch: "zipcheck.Archive") -> str:
    base = set(arch.rels)
    if any(n.startswith("models/") for n in base) or "archive_format" in base:
        return "pt2"
    if "constants.pkl" in base or any(n.startswith("code/") for n in base):
        return "torchscript"
    if "data.pkl" in base:
        return "pickle"
    raise LoadError(f"{arch.label}: a zip archive but not one PyTorch writes (no model.json, "
                    "code/ or data.pkl)")


def _kind(path: str, limits: Optional["zipcheck.Limits"] = None) -> str:
    arch = check_archive(path, limits)
    kind = _kind_of(arch)
    if kind == "pt2":
        zipcheck.classify(arch, limits or zipcheck.DEFAULT_LIMITS)
    return kind


def _describe_state_dict(obj) -> Optional[str]:
    if isinstance(obj, dict) and obj and all(isinstance(v, torch.Tensor) for v in obj.values()):
        return (f"a state_dict ({len(obj)} tensors, e.g. {next(iter(obj))!r}) holds weights "
                "but not the model's code; save the model instead: "
                "torch.export.save(torch.export.export(model, example_inputs), 'model.pt2') "
                "(preferred) or torch.save({'model': model, 'example_inputs': "
                "example_inputs}, 'model.pt')")
    return None


# ------------------------------------------------------------------ .pt2 requirements

def requirements(path) -> Tuple[Set[str], Set[str]]:
    """What the ``.pt2`` at ``path`` needs registered before
    ``torch.export.load``: ``(pytree type names, operator names)``, e.g.
    ``({"transformers.modeling_outputs.BaseModelOutput"},
    {"torch.ops.pypm.linear_act.default", "torch.ops.aten.linear.default"})``,
    read from its ``models/*.json``. LoadError when that JSON is damaged."""
    scan = _scan(path)
    return scan.types, scan.ops


def _scan(path, label: Optional[str] = None) -> "untrusted.Scan":
    """:func:`untrusted.check_program` over every program of the archive
    ``path`` (a path or a binary file), and its payload configs' names:
    every member torch would parse as JSON (:func:`.archive.classify`; a
    member under ``models/`` that is not a program by name is refused).
    LoadError when a program's JSON is damaged."""
    label = label or str(path)
    try:
        arch = zipcheck.classify(zipcheck.inspect(path, label))
    except zipfile.BadZipFile as e:
        raise LoadError(f"{label}: not a readable .pt2 archive "
                        f"({first_line(e) or type(e).__name__})") from None
    scan = untrusted.Scan()
    with zipfile.ZipFile(path) as z:
        for m in arch.members:
            if m.kind not in ("program", "config"):
                continue
            try:
                doc = json.loads(z.read(m.name))
            except (ValueError, UnicodeDecodeError, RecursionError) as e:
                what = "a nesting deeper than Python's parser takes" \
                    if isinstance(e, RecursionError) else first_line(e) or type(e).__name__
                raise LoadError(f"{label}: the program ({m.name}) is damaged: not valid JSON "
                                f"({what}); re-save or re-copy it") from None
            where = f" (in {m.rel})"
            if m.kind == "program":
                untrusted.check_program(doc, scan, where)
            else:
                scan.problems += untrusted.check_payload_config(doc, where)
    if hasattr(path, "seek"):
        path.seek(0)
    return scan


def _registered_types() -> Dict[str, Any]:
    import torch.utils._pytree as pytree
    return getattr(pytree, "SERIALIZED_TYPE_TO_PYTHON_TYPE", {})


#: Packages whose modules the loader imports on its own to register a pytree
#: type a ``.pt2`` uses (``transformers.modeling_outputs.BaseModelOutput``: the
#: model outputs of ``transformers``). A type of any other module is never
#: imported because a file names it (``python -m`` puts the working directory
#: on ``sys.path``: a ``somemod.py`` beside the model would run): the user
#: imports it (the CLI's ``--import MODULE``, ``imports=[MODULE]``), or the
#: load is refused naming the type and that opt-in.
TYPE_PACKAGES: Tuple[str, ...] = ("transformers", "torch")


def _import_hint(mod: str) -> str:
    return (f"if you trust it, import the module that registers it first (the CLI: --import "
            f"{mod}; Python: pypm_verified.load(path, imports=[{mod!r}]))")


def _import_for_type(path: str, full: str) -> None:
    """Register pytree type ``full``: import its module when it belongs to
    :data:`TYPE_PACKAGES`; LoadError when it cannot be imported, does not
    register the type, or belongs to another package (never imported
    because a file names it)."""
    parts = full.split(".")
    mod = ".".join(parts[:-1]) or parts[0]
    if parts[0] not in TYPE_PACKAGES:
        if any(".".join(parts[:i]) in sys.modules for i in range(len(parts) - 1, 0, -1)):
            raise LoadError(f"{path}: the program's inputs/outputs use {full}, which is not "
                            "registered as a pytree node in this process (its module is "
                            "imported); register it (torch.utils._pytree.register_pytree_node"
                            f"(..., serialized_type_name={full!r})) before loading")
        raise LoadError(f"{path}: the program's inputs/outputs use the type {full}, which is "
                        f"not registered in this process; the loader never imports a module "
                        f"because a file names it (only {', '.join(TYPE_PACKAGES)}): "
                        + _import_hint(mod))
    for i in range(len(parts) - 1, 0, -1):
        mod = ".".join(parts[:i])
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name and (mod == e.name or mod.startswith(e.name + ".")):
                continue  # not a module: try a shorter prefix
            raise LoadError(f"{path}: the program's inputs/outputs use {full}; importing "
                            f"{mod} failed: {type(e).__name__}: {first_line(e)}") from None
        except Exception as e:  # noqa: BLE001 -- an installed module failing to import
            raise LoadError(f"{path}: the program's inputs/outputs use {full}; importing "
                            f"{mod} failed: {type(e).__name__}: {first_line(e)}") from None
        if full in _registered_types():
            return
        raise LoadError(f"{path}: the program's inputs/outputs use {full}, which importing "
                        f"{mod} did not register as a pytree node; register it "
                        "(torch.utils._pytree.register_pytree_node(..., "
                        f"serialized_type_name={full!r})) before loading")
    top = parts[0]
    raise LoadError(f"{path}: the program's inputs/outputs use {full}, but no module "
                    f"{'.'.join(parts[:-1]) or top!r} can be imported here; install the "
                    f"package that defines it ({top!r}?)")


#: The module of ``transformers``' model outputs: each class is a ``ModelOutput``
#: (an ordered dict of the output fields) that ``transformers`` registers as a
#: pytree node when the module is imported: flattened to its values, with its
#: keys as the context (serialized as JSON), unflattened by ``cls(**fields)``.
MODEL_OUTPUTS = "transformers.modeling_outputs"


def _output_flatten(output) -> Tuple[list, list]:
    return list(output.values()), list(output.keys())


def _output_unflatten(values, context, output_type=None):
    return output_type(**dict(zip(context, values)))


class _OutputStandIn(dict):
    """The base of a stand-in for one of ``transformers``' model output
    classes (:func:`_register_stand_in`): a dict of the fields, in order,
    also read as attributes (``out.last_hidden_state``) as the real one."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def _register_stand_in(full: str) -> None:
    """Register a stand-in for the ``transformers`` model output class
    ``full`` (in :data:`MODEL_OUTPUTS`) as the pytree node ``transformers``
    registers for it: same serialized name, flattening and context, so the
    program loads, runs and is saved as with the real class, without
    importing ``transformers`` (~0.5 s). Importing ``transformers`` later
    registers the real class under the same name, which then wins."""
    import torch.utils._pytree as pytree
    mod, name = full.rsplit(".", 1)
    cls = type(name, (_OutputStandIn,), {
        "__module__": mod, "__qualname__": name,
        "__doc__": f"Stand-in for {full} (loaded without importing transformers)."})
    pytree.register_pytree_node(
        cls, _output_flatten, functools.partial(_output_unflatten, output_type=cls),
        serialized_type_name=full,
        flatten_with_keys_fn=getattr(pytree, "_dict_flatten_with_keys", None))


def _op_resolves(name: str) -> bool:
    parts = name.split(".")  # torch.ops.<ns>.<op>[.<overload>]
    if len(parts) < 4:
        return True
    try:
        obj = getattr(torch.ops, parts[2])
        for p in parts[3:]:
            obj = getattr(obj, p)
        return True
    except (AttributeError, RuntimeError):
        return False


_TORCH_NAMESPACES = {"aten", "prims", "higher_order", "_c10d_functional", "c10d_functional",
                     "quantized", "quantized_decomposed", "_quantized", "mkldnn", "onednn"}

#: Operator namespaces (``torch.ops.<ns>``) that a library registers when one
#: of its modules is imported, not when the package is: namespace -> the
#: modules to import, in order, until the program's operators resolve.
#: ``transformers`` 5 registers ``transformers::grouped_mm_fallback`` (the
#: experts of its mixture-of-experts models: Mixtral, Qwen2-MoE, ...) in
#: ``transformers.integrations.moe``, which a process that loads a saved
#: program has not imported; ``torchvision`` registers ``torchvision::nms`` on
#: import. A namespace not listed here is never imported because a file
#: names it (a ``.pt2`` calling ``torch.ops.somemod.f`` would otherwise run a
#: ``somemod.py`` on the path): :func:`import_modules` (the CLI's ``--import
#: MODULE``) imports what registers it.
OP_LIBRARIES: Dict[str, Tuple[str, ...]] = {
    "pypm": ("pypm_verified.torch.kernels",),
    "transformers": ("transformers.integrations.moe",),
    "transformers_msa": ("transformers.integrations.msa_attention",),
    "torchvision": ("torchvision",),
    "torchaudio": ("torchaudio",),
    "torchao": ("torchao",),
}


def import_modules(modules) -> List[str]:
    """Import ``modules`` (dotted names), e.g. the library that registers a
    program's custom operators (the CLI's ``--import MODULE``); returns
    them. LoadError (one line) naming a module that cannot be imported."""
    done = []
    for mod in modules or ():
        try:
            importlib.import_module(mod)
        except Exception as e:  # noqa: BLE001 -- whatever the module raises on import
            raise LoadError(f"cannot import {mod}: {type(e).__name__}: {first_line(e)}") \
                from None
        done.append(mod)
    return done


def _register_namespace(ns: str, ops: List[str]) -> Tuple[List[str], List[str]]:
    """Import what registers operator namespace ``ns`` (:data:`OP_LIBRARIES`
    only: never a module because a file names it) until ``ops`` resolve:
    ``(modules imported, why others could not be)``."""
    import importlib.util
    candidates = []
    for mod in OP_LIBRARIES.get(ns, ()):
        try:
            if importlib.util.find_spec(mod.split(".")[0]) is not None:
                candidates.append(mod)
        except (ImportError, ValueError):
            pass
    imported, failed = [], []
    for mod in candidates:
        try:
            importlib.import_module(mod)
        except Exception as e:  # noqa: BLE001 -- an installed module failing to import
            failed.append(f"{mod} cannot be imported: {type(e).__name__}: {first_line(e)}")
            continue
        imported.append(mod)
        if all(_op_resolves(o) for o in ops):
            break
    return imported, failed


def register_requirements(path, scan=None, stand_in_outputs: bool = False) -> List[str]:
    """Register what the ``.pt2`` at ``path`` needs (see
    :func:`requirements`; ``scan``: its :func:`_scan` when already read):
    import the module of every pytree type not yet registered when it
    belongs to :data:`TYPE_PACKAGES` (e.g. ``transformers.modeling_outputs``;
    with ``stand_in_outputs``, while ``transformers`` is not imported, a
    model output class of :data:`MODEL_OUTPUTS` gets a stand-in instead:
    :func:`_register_stand_in`) and, for operators not registered yet, what
    registers their namespace
    (:data:`OP_LIBRARIES`: ``pypm`` from :mod:`pypm_verified.torch.kernels`,
    ``transformers`` from ``transformers.integrations.moe``). Returns the
    modules imported. LoadError naming what cannot be registered: a type of
    another package (never imported because a file names it) or an operator,
    with the remedy (import its library first: the CLI's ``--import
    MODULE``)."""
    if scan is None:
        scan = _scan(path)
    types, ops = scan.types, scan.ops
    imported = []
    known = _registered_types()
    for full in sorted(types):
        if full in known or full == "NO_SERIALIZED_TYPE_NAME_FOUND":
            continue
        if stand_in_outputs and full.rsplit(".", 1)[0] == MODEL_OUTPUTS \
                and "transformers" not in sys.modules:
            _register_stand_in(full)
            continue
        _import_for_type(path, full)
        imported.append(full.rsplit(".", 1)[0])
    missing = sorted(o for o in ops if not _op_resolves(o))
    core = [o for o in missing if o.split(".")[2] in _TORCH_NAMESPACES]
    if core:
        raise LoadError(f"{path}: the program calls {core[0]}, which this torch "
                        f"({torch.__version__}) does not have: the file is damaged or was "
                        "written by a different torch version")
    failed: List[str] = []
    tried: Dict[str, List[str]] = {}
    for ns in sorted({o.split(".")[2] for o in missing}):
        got, why = _register_namespace(ns, [o for o in missing if o.split(".")[2] == ns])
        tried[ns] = got
        imported += got
        failed += why
    missing = [o for o in missing if not _op_resolves(o)]
    if missing:
        ns = sorted({o.split(".")[2] for o in missing})
        done = sorted({m for n in ns for m in tried.get(n, ())})
        note = (f" (importing {', '.join(done)} did not register it)" if done else "") + \
            (f" ({'; '.join(failed)})" if failed else "")
        raise LoadError(f"{path}: the program calls operator(s) not registered in this "
                        f"process: {', '.join(missing[:3])}"
                        f"{' ...' if len(missing) > 3 else ''}{note}; import the module that "
                        f"registers namespace {', '.join(ns)} before loading (the CLI: "
                        "--import MODULE; Python: import it, or pypm_verified.load(path, "
                        "imports=[MODULE]))")
    return imported


ALLOW_PICKLE_HINT = ("pass --allow-pickle (Python: allow_pickle=True) only for a file you "
                     "trust")


class NeedsPickle(LoadError):
    """The file can be read only with Python's full unpickler, which runs
    code the file names (``__reduce__``): refused unless the caller opted in
    (``allow_pickle=True``, the CLI's ``--allow-pickle``)."""


def _needs_pickle(label: str, what: str, named: Optional[str]) -> NeedsPickle:
    return NeedsPickle(f"{label}: {what} needs Python's full unpickler"
                       + (f" (it names {named})" if named and "." in named else
                          f" ({named})" if named else "")
                       + f", which can run code from the file: refused; {ALLOW_PICKLE_HINT}")


def _load_pt2(path, allow_pickle: bool = False, label: Optional[str] = None,
              stand_in_outputs: bool = False):
    """``torch.export.load`` of ``path`` (a path or a binary file; ``label``
    names it in messages) without running code from the file
    (:mod:`.untrusted`): its names, size expressions and guards checked,
    what it needs registered (:func:`register_requirements`, importing only
    known libraries), then loaded with every pickled part read by the safe
    unpickler (``weights_only``) unless ``allow_pickle``. LoadError (one
    line) otherwise, with the deserializer's real reason (torch logs it,
    then raises "check the warnings above"); :class:`NeedsPickle` for a part
    that needs the full unpickler."""
    label = label or str(path)
    scan = _scan(path, label)
    if scan.problems:
        raise LoadError(f"{label}: refused, not a program torch writes: {scan.problems[0]}"
                        + (f" (and {len(scan.problems) - 1} more)" if len(scan.problems) > 1
                           else "") + "; it may have been crafted to run code when loaded")
    for mod in sorted(scan.modules):
        if mod not in sys.modules and mod.split(".")[0] not in TYPE_PACKAGES:
            raise LoadError(f"{label}: the program's tree specs name the module {mod} (an "
                            "enum or a defaultdict factory), which is not imported in this "
                            "process; the loader never imports a module because a file names "
                            "it: " + _import_hint(mod))
    register_requirements(label, scan, stand_in_outputs)  # scan given: path only names it
    if hasattr(path, "seek"):
        path.seek(0)
    with _capture_export_logs() as cap, untrusted.guarded(allow_pickle) as guard:
        try:
            ep = _load_pt2_archive(path)
            err: Optional[BaseException] = None
        except RecursionError:
            raise LoadError(f"{label}: refused: the program is nested too deeply for torch's "
                            "reader (a tree spec or an expression); it may have been crafted") \
                from None
        except Exception as e:  # noqa: BLE001 -- torch raises many types
            ep, err = None, e
    if guard.refused:
        raise _needs_pickle(label, "a pickled part of the program (sample inputs, a weight "
                            "or a constant)", guard.refused)
    if guard.structure:
        raise LoadError(f"{label}: refused: a pickled part of the program (its sample inputs, "
                        f"a weight or a constant) holds {guard.structure}; it may have been "
                        "crafted to make loading hang")
    if guard.expression:
        raise LoadError(f"{label}: refused, not a program torch writes: the size expression "
                        f"{guard.expression}; it may have been crafted to run code when loaded")
    if guard.module:
        raise LoadError(f"{label}: loading the program would import the module "
                        f"{guard.module}, which is not imported in this process; the loader "
                        "never imports a module because a file names it: "
                        + _import_hint(guard.module))
    if err is not None:
        cause: BaseException = err
        for rec in cap.records:  # the real error, logged before the generic one
            if rec.exc_info and rec.exc_info[1] is not None:
                cause = rec.exc_info[1]
                break
        cause = _innermost(cause)
        raise LoadError(f"{label}: torch.export.load could not read the program (its "
                        "models/model.json is damaged, or was written by an incompatible "
                        f"torch): {type(cause).__name__}: {first_line(cause)}") from None
    return ep


def _load_pt2_archive(path):
    """The program ``model`` of the PT2 archive ``path``, read by torch's
    ``load_pt2`` alone: ``torch.export.load`` falls back, when that raises,
    to a legacy reader of root-level ``serialized_*`` members that none of
    the checks here cover."""
    from torch.export.pt2_archive._package import load_pt2
    contents = load_pt2(path)
    programs = contents.exported_programs
    if "model" not in programs:
        raise LoadError("the archive holds no program named model (models/model.json), "
                        "the one torch.export.load returns")
    return programs["model"]


def load_exported(source, allow_pickle: bool = False, imports=(),
                  label: Optional[str] = None) -> Any:
    """The ``ExportedProgram`` in ``source``: a ``.pt2`` path, its bytes or a
    binary file (``label`` names it in messages), loaded as
    :func:`load_rewritten` loads a file: checked, its requirements
    registered, nothing in it run."""
    import_modules(imports)
    if isinstance(source, (bytes, bytearray, memoryview)):
        source = io.BytesIO(bytes(source))
    if isinstance(source, (str, os.PathLike)):
        return load_rewritten(source, imports=(), allow_pickle=allow_pickle)
    label = label or "the program"
    try:
        arch = zipcheck.classify(zipcheck.inspect(source, label))
        zipcheck.read_all(source, arch)
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise LoadError(f"{label}: not a readable .pt2 archive "
                        f"({first_line(e) or type(e).__name__})") from None
    source.seek(0)
    return _load_pt2(source, allow_pickle, label)


def load_rewritten(path, imports=(), allow_pickle: bool = False) -> Any:
    """Load a ``.pt2`` (e.g. one the rewriter wrote) and return its
    ``ExportedProgram``, registering what it needs first: the modules of the
    pytree types of its inputs and outputs (e.g. ``transformers``' model
    outputs) and the operator libraries it calls (``pypm.linear_act`` from
    :mod:`pypm_verified.torch.kernels`). The archive's checksums are checked.
    ``imports``: modules to import first (e.g. the library that registers a
    custom operator the program calls; see :func:`import_modules`).
    Nothing in the file runs (:mod:`.untrusted`): a module it names is not
    imported unless it is in ``imports`` (or a known library), and a pickled
    part that needs Python's full unpickler is refused
    (:class:`NeedsPickle`) unless ``allow_pickle`` -- a file
    ``torch.export.save`` wrote from tensors never needs it.
    Exposed as ``pypm_verified.load``. LoadError (one line) when the file is
    missing, corrupt, or needs something that cannot be registered."""
    path = os.fspath(path)
    import_modules(imports)
    if not os.path.exists(path):
        raise LoadError(f"{path}: no such file")
    if os.path.isdir(path):
        raise LoadError(f"{path}: is a directory, expected a .pt2 file")
    kind = _kind(path)
    if kind != "pt2":
        raise LoadError(f"{path}: not a .pt2 (torch.export.save) file but a "
                        f"{'TorchScript archive' if kind == 'torchscript' else 'torch.save file'}"
                        "; use load_model for it")
    return _load_pt2(path, allow_pickle)


# ------------------------------------------------------------------ pickles

def _unpickle_error(path: str, e: BaseException) -> LoadError:
    msg = first_line(e)
    m = re.search(r"Can't get attribute '([^']+)' on <module '([^']+)'", msg)
    if m:
        cls, mod = m.groups()
        if mod == "__main__" or mod.endswith(".__main__"):  # python -m pkg: pkg.__main__
            hint = (f"the class {cls} was defined in the script that saved the file "
                    "(__main__), so it cannot be found here: define it in an importable "
                    "module (and import it before loading), or save a .pt2 with "
                    "torch.export.save, which needs no class")
        else:
            hint = (f"the class {cls} is not in module {mod} here (renamed or removed?); "
                    "or save a .pt2 with torch.export.save, which needs no class")
        return LoadError(f"{path}: cannot unpickle it: {hint}")
    if isinstance(e, ModuleNotFoundError) and e.name:
        return LoadError(f"{path}: cannot unpickle it: the module {e.name!r} that defines the "
                         "model's class cannot be imported here; put it on the path "
                         "(PYTHONPATH), or save a .pt2 with torch.export.save")
    return LoadError(f"{path}: cannot unpickle it: {type(e).__name__}: {msg}")


def _load_file(path: str, example_inputs: Optional[Tuple] = None,
               imports=(), allow_pickle: bool = False,
               stand_in_outputs: bool = False) -> LoadedModel:
    """Load ``path`` (see the module docs), after importing ``imports``;
    raises LoadError (:class:`NeedsPickle` for a pickle that needs the full
    unpickler, unless ``allow_pickle``)."""
    if not os.path.exists(path):
        raise LoadError(f"{path}: no such file")
    if os.path.isdir(path):
        raise LoadError(f"{path}: is a directory, expected a model file")
    import_modules(imports)
    kind = _kind(path)
    if kind == "pt2":
        ep = _load_pt2(path, allow_pickle, stand_in_outputs=stand_in_outputs)
        if example_inputs is not None:
            args, kwargs = example_inputs, {}
        elif ep.example_inputs is not None:
            args, kwargs = ep.example_inputs
        else:
            raise LoadError(f"{path}: the program carries no example inputs; pass them")
        return LoadedModel(decompose(ep), tuple(args), dict(kwargs), "pt2", path)
    if kind == "torchscript":
        if example_inputs is None:
            raise LoadError(f"{path}: a TorchScript archive carries no example inputs; "
                            "give them (--example-inputs FILE, a torch.save'd tuple)")
        try:
            with _quiet_torch_logs():
                ts = torch.jit.load(path)
                from torch._export.converter import TS2EPConverter
                ep = TS2EPConverter(ts, tuple(example_inputs)).convert()
        except Exception as e:
            raise LoadError(f"{path}: converting TorchScript with TS2EPConverter failed: "
                            f"{type(e).__name__}: {first_line(e)}") from None
        return LoadedModel(decompose(ep), tuple(example_inputs), {}, "torchscript", path)
    # a pickle: first the safe unpickler (weights_only: tensors and plain
    # containers, nothing runs); the full one only when the caller opted in
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        if not allow_pickle:
            named = untrusted.global_named(e)
            raise _needs_pickle(path, "a pickled model (torch.save of an nn.Module)" if named
                                and named.startswith("torch.nn.") else "the pickle",
                                named) from None
        obj = None
    except (RuntimeError, AttributeError, TypeError) as e:
        if not allow_pickle:
            raise _unpickle_error(path, e) from None
        obj = None
    except Exception as e:
        raise _unpickle_error(path, e) from None
    if obj is None:
        try:
            obj = torch.load(path, map_location="cpu", weights_only=False)
        except Exception as e:
            raise _unpickle_error(path, e) from None
    msg = _describe_state_dict(obj)
    if msg:
        raise LoadError(f"{path}: {msg}")
    if isinstance(obj, torch.nn.Module):
        if example_inputs is None:
            raise LoadError(f"{path}: a pickled module without example inputs; save "
                            "{'model': model, 'example_inputs': (...)} instead")
        obj = {"model": obj, "example_inputs": example_inputs}
    if not isinstance(obj, dict) or "model" not in obj or "example_inputs" not in obj:
        what = type(obj).__name__ if not isinstance(obj, dict) else \
            f"a dict with keys {sorted(map(str, obj))}"
        raise LoadError(f"{path}: holds {what}; expected a dict {{'model': nn.Module, "
                        "'example_inputs': tuple}")
    model, args = obj["model"], obj["example_inputs"]
    kwargs = obj.get("example_kwargs") or {}
    if not isinstance(model, torch.nn.Module):
        raise LoadError(f"{path}: 'model' is a {type(model).__name__}, not an nn.Module")
    if isinstance(args, list):
        args = tuple(args)
    if not isinstance(args, tuple):
        args = (args,)
    warns: List[str] = []
    ep = export_module(model, args, kwargs, warnings=warns)
    warns = [w.replace("the model was in training mode", "the model was saved in training mode")
             for w in warns]
    return LoadedModel(ep, args, dict(kwargs), "pickle", path, warns)


def load_model(src, example_inputs: Optional[Tuple] = None,
               example_kwargs: Optional[dict] = None, dynamic_shapes=None,
               imports=(), allow_pickle: bool = False,
               stand_in_outputs: bool = False) -> LoadedModel:
    """A :class:`LoadedModel` from a path, an ExportedProgram, or an
    ``nn.Module``/``fx.GraphModule`` with ``example_inputs``. A module is
    exported in eval mode without changing the caller's object (see
    :attr:`LoadedModel.warnings`), with ``dynamic_shapes`` if given (symbolic
    sizes; a ``.pt2`` or an ExportedProgram keeps the dynamic sizes it was
    exported with). ``imports``: modules a file needs imported before it is
    loaded (the library registering a custom operator its program calls, or
    defining a pickled model's class; see :func:`import_modules`).

    Loading a file runs no code from it unless ``allow_pickle=True``: a
    pickle that needs Python's full unpickler (a ``torch.save``\\ d
    ``nn.Module``) is refused with :class:`NeedsPickle`; a ``.pt2`` and a
    TorchScript archive never need it (see :mod:`.untrusted`).

    ``stand_in_outputs``: a ``.pt2`` whose outputs are ``transformers``'
    model outputs loads without importing ``transformers`` (unless it is
    already imported): each output class gets a stand-in (a dict of the
    fields, also read as attributes) registered as ``transformers``
    registers it, so the program runs and is saved the same (the command
    line does this: it only compares and saves the outputs)."""
    if isinstance(src, (str, os.PathLike)):
        return _load_file(os.fspath(src), example_inputs, imports, allow_pickle,
                          stand_in_outputs)
    if isinstance(src, torch.export.ExportedProgram):
        if example_inputs is not None:
            args, kwargs = tuple(example_inputs), dict(example_kwargs or {})
        elif src.example_inputs is not None:
            args, kwargs = src.example_inputs
        else:
            raise LoadError("the ExportedProgram carries no example inputs; pass them")
        return LoadedModel(decompose(src), tuple(args), dict(kwargs), "ExportedProgram")
    if isinstance(src, torch.nn.Module):  # fx.GraphModule included
        if example_inputs is None:
            raise LoadError(f"a {type(src).__name__} needs example inputs to be exported")
        kind = "GraphModule" if isinstance(src, torch.fx.GraphModule) else "nn.Module"
        args = tuple(example_inputs)
        warns: List[str] = []
        ep = export_module(src, args, example_kwargs, warnings=warns,
                           dynamic_shapes=dynamic_shapes)
        return LoadedModel(ep, args, dict(example_kwargs or {}), kind, None, warns)
    if isinstance(src, dict):
        msg = _describe_state_dict(src)
        if msg:
            raise LoadError(msg)
    raise LoadError(f"cannot load a {type(src).__name__}; expected a path, an "
                    "ExportedProgram, an nn.Module or an fx.GraphModule")
