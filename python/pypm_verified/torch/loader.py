"""Loading models for rewriting, all into one form: an ExportedProgram at
the export IR after ``run_decompositions({})`` (an *empty* table: it
functionalizes, e.g. ``relu_`` -> ``relu`` and eval-mode dropout ->
``clone``, and keeps ``linear``, ``matmul``, ``softmax``, ``gelu``,
``layer_norm`` and ``scaled_dot_product_attention`` whole; the default
core-ATen table would turn SDPA back into bmm/softmax and is never used).

Accepted inputs (files are told apart by their zip entries before anything
is unpickled):

* ``.pt2``: a ``torch.export.save``\\ d ExportedProgram (preferred; it
  carries its example inputs);
* a ``torch.save``\\ d dict ``{"model": nn.Module, "example_inputs": tuple}``
  (optionally ``"example_kwargs": dict``). Unpickling it runs code
  (``weights_only=False``): load only files you trust;
* a TorchScript archive (``torch.jit.save``), converted with torch's
  ``TS2EPConverter``; it needs example inputs given separately;
* in-process: an ``ExportedProgram``, an ``nn.Module`` or
  ``fx.GraphModule`` with example inputs.

A ``state_dict`` alone, a corrupt file or a model ``torch.export`` cannot
export gets a :class:`LoadError` that says what is wrong.
"""
from __future__ import annotations

import importlib
import logging
import os
import pickle
import re
import zipfile
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

import torch


class LoadError(ValueError):
    """The model cannot be loaded or exported; the message says why."""


@dataclass
class LoadedModel:
    """A loaded model: ``ep`` (the ExportedProgram at the export IR),
    ``args``/``kwargs`` (example inputs), ``kind`` (how it was given) and
    ``path`` (None in-process)."""

    ep: Any
    args: Tuple = ()
    kwargs: Dict[str, Any] = field(default_factory=dict)
    kind: str = "ExportedProgram"
    path: Optional[str] = None


def export_module(model, args: Tuple, kwargs: Optional[dict] = None):
    """``torch.export.export`` then ``run_decompositions({})``; LoadError
    quoting torch's reason when it fails."""
    if not isinstance(args, tuple):
        raise LoadError(f"example inputs must be a tuple, not {type(args).__name__}")
    if isinstance(model, torch.nn.Module):
        model.eval()
    try:
        with torch.no_grad():
            ep = torch.export.export(model, args, kwargs or {})
    except Exception as e:  # torch raises many types; quote its reason
        reason = str(e).strip().splitlines()
        reason = reason[0] if reason else type(e).__name__
        raise LoadError(f"torch.export could not export the model: {type(e).__name__}: "
                        f"{reason}") from e
    return decompose(ep)


def decompose(ep):
    """The export IR the rules are written for: ``run_decompositions({})``."""
    return ep.run_decompositions({})


def _kind(path: str) -> str:
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
    except zipfile.BadZipFile:
        raise LoadError(f"{path}: not a PyTorch file (not a zip archive; expected a "
                        ".pt2 from torch.export.save, a torch.save'd dict or a "
                        "TorchScript archive)") from None
    except OSError as e:
        raise LoadError(f"{path}: cannot read it: {e.strerror or e}") from None
    base = {n.split("/", 1)[1] if "/" in n else n for n in names}
    if "models/model.json" in base or any(n.startswith("models/") for n in base) \
            or "archive_format" in base:
        return "pt2"
    if "constants.pkl" in base or any(n.startswith("code/") for n in base):
        return "torchscript"
    if "data.pkl" in base:
        return "pickle"
    raise LoadError(f"{path}: a zip archive but not one PyTorch writes (no model.json, "
                    "code/ or data.pkl)")


def _describe_state_dict(obj) -> Optional[str]:
    if isinstance(obj, dict) and obj and all(isinstance(v, torch.Tensor) for v in obj.values()):
        return (f"a state_dict ({len(obj)} tensors, e.g. {next(iter(obj))!r}) holds weights "
                "but not the model's code; save the model instead: "
                "torch.export.save(torch.export.export(model, example_inputs), 'model.pt2') "
                "(preferred) or torch.save({'model': model, 'example_inputs': "
                "example_inputs}, 'model.pt')")
    return None


_UNREGISTERED = re.compile(r"Deserializing ([\w.]+)\.(\w+) in pytree is not registered")


def _load_pt2(path: str):
    """``torch.export.load``; when the program's input/output types are
    pytree nodes registered by a package (e.g. ``transformers``' model
    outputs), that installed module is imported and the load retried."""
    log = logging.getLogger("torch.export")
    tried = set()
    while True:
        level = log.level
        log.setLevel(logging.ERROR)
        try:
            return torch.export.load(path)
        except Exception as e:
            cause = e
            while cause.__cause__ is not None or cause.__context__ is not None:
                nxt = cause.__cause__ or cause.__context__
                if _UNREGISTERED.search(str(cause)):
                    break
                cause = nxt
            m = _UNREGISTERED.search(str(cause)) or _UNREGISTERED.search(_last_error(path))
            if m and m.group(1) not in tried:
                tried.add(m.group(1))
                try:
                    importlib.import_module(m.group(1))
                    continue
                except ImportError:
                    raise LoadError(f"{path}: the program's inputs/outputs use "
                                    f"{m.group(1)}.{m.group(2)}; install the package that "
                                    "defines it") from None
            text = str(cause).strip().splitlines()
            raise LoadError(f"{path}: torch.export.load failed: {type(cause).__name__}: "
                            f"{text[0] if text else ''}") from None
        finally:
            log.setLevel(level)


def _last_error(path: str) -> str:
    """torch.export.load logs the deserializer's error and raises a generic
    one; re-run the deserializer's pytree step to read the real reason."""
    try:
        with zipfile.ZipFile(path) as z:
            for n in z.namelist():
                if n.endswith("models/model.json"):
                    return _scan_types(z.read(n))
    except Exception:
        pass
    return ""


def _scan_types(raw: bytes) -> str:
    # the serialized treespecs name their types; report the first unregistered one
    import torch.utils._pytree as pytree
    text = raw.decode("utf-8", "replace")
    for m in re.finditer(r'\\"type\\": \\"([\w.]+)\.(\w+)\\"', text):
        full = f"{m.group(1)}.{m.group(2)}"
        if full not in pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE:
            return f"Deserializing {full} in pytree is not registered"
    return ""


def _load_file(path: str, example_inputs: Optional[Tuple] = None) -> LoadedModel:
    """Load ``path`` (see the module docs); raises LoadError."""
    if not os.path.exists(path):
        raise LoadError(f"{path}: no such file")
    if os.path.isdir(path):
        raise LoadError(f"{path}: is a directory, expected a model file")
    kind = _kind(path)
    if kind == "pt2":
        ep = _load_pt2(path)
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
            ts = torch.jit.load(path)
            from torch._export.converter import TS2EPConverter
            ep = TS2EPConverter(ts, tuple(example_inputs)).convert()
        except Exception as e:
            raise LoadError(f"{path}: converting TorchScript with TS2EPConverter failed: "
                            f"{type(e).__name__}: {str(e).strip().splitlines()[0]}") from None
        return LoadedModel(decompose(ep), tuple(example_inputs), {}, "torchscript", path)
    # a pickle: first without running code, to recognize a state_dict
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, AttributeError, TypeError):
        obj = None
    except Exception as e:
        raise LoadError(f"{path}: cannot unpickle it: {type(e).__name__}: {e}") from None
    if obj is not None:
        msg = _describe_state_dict(obj)
        if msg:
            raise LoadError(f"{path}: {msg}")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as e:
        raise LoadError(f"{path}: cannot unpickle it: {type(e).__name__}: {e}") from None
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
    return LoadedModel(export_module(model, args, kwargs), args, dict(kwargs), "pickle", path)


def load_model(src, example_inputs: Optional[Tuple] = None,
                 example_kwargs: Optional[dict] = None) -> LoadedModel:
    """A :class:`LoadedModel` from a path, an ExportedProgram, or an
    ``nn.Module``/``fx.GraphModule`` with ``example_inputs``."""
    if isinstance(src, (str, os.PathLike)):
        return _load_file(os.fspath(src), example_inputs)
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
        return LoadedModel(export_module(src, args, example_kwargs), args,
                       dict(example_kwargs or {}), kind)
    if isinstance(src, dict):
        msg = _describe_state_dict(src)
        if msg:
            raise LoadError(msg)
    raise LoadError(f"cannot load a {type(src).__name__}; expected a path, an "
                    "ExportedProgram, an nn.Module or an fx.GraphModule")
