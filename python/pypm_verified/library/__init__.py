"""The rule library: PyTorch rewrites to faster kernels, each guarded on
every constant and axis it relies on and on profitability per target
(``ctx.profitable``, :mod:`pypm_verified.torch.profitability`).

=================  ==============================================  =====================
module             rewrites                                        to
=================  ==============================================  =====================
``gelu``           GELU written out (erf form, GPT-2's tanh form)  ``aten.gelu``
``rmsnorm``        RMSNorm written out (LLaMA/Qwen2)               ``aten.rms_norm``
``attention``      attention written out, its family of forms      ``aten.scaled_dot_product_attention``
``transpose``      matmul with a transposed 2-D operand (Fig. 1)   ``aten.linear`` (NT GEMM)
``epilogue``       linear + pointwise activation                   ``pypm.linear_act``
=================  ==============================================  =====================

:func:`default_patterns` is the library in this order (patterns are tried
in order at each node); :func:`load_rules` reads patterns from a module name or a
``.py`` file (its ``PATTERNS`` list, else every ``@pm.pattern`` with rules), or
the whole default library by its name, :data:`LIBRARY` (``--rules library
--rules mine.py``: the library, then your rules); :func:`load_rule_specs` reads
several.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import threading
from typing import Dict, List, Tuple

from ..dsl.patterns import Pattern

#: the default library, in the order its patterns are tried
MODULES = ("gelu", "rmsnorm", "attention", "transpose", "epilogue")
#: rule modules that only ``--rules NAME`` (``load_rules(NAME)``) loads:
#: ``fusion`` (multi-root GEMM fusions, no faster on the measured CPU),
#: ``xla_simplifier`` (XLA's simplifier rules, for ``check-rules``) and
#: ``knossos`` (arithmetic over ``pm.Graph``, not ATen)
EXTRA_MODULES = ("fusion", "xla_simplifier", "knossos")
#: every rule module of the library: the names ``load_rules`` takes
ALL_MODULES = MODULES + EXTRA_MODULES
#: the name ``load_rules`` (and ``--rules``) takes for the whole default
#: library (:data:`MODULES`, in order): a file or module of that name is
#: given as a path (``./library.py``) or a dotted path
LIBRARY = "library"


def _patterns_of(mod) -> List[Pattern]:
    pats = getattr(mod, "PATTERNS", None)
    if pats is None:
        pats = [v for v in vars(mod).values() if isinstance(v, Pattern) and v.rules]
    return list(pats)


def default_patterns(modules=MODULES) -> List[Pattern]:
    """The patterns of the library's ``modules``, in order."""
    out: List[Pattern] = []
    for name in modules:
        if name not in MODULES:
            raise ValueError(f"unknown rule module {name!r}; expected some of {MODULES}")
        out.extend(_patterns_of(importlib.import_module(f"{__name__}.{name}")))
    return out


_files: Dict[str, Tuple[Tuple[int, int], object]] = {}  # path -> ((mtime, size), module)
_file_lock = threading.Lock()
_loads = [0]  # rules files executed: each gets a module name of its own


def _after_fork_in_child() -> None:
    # a thread of the parent holding the lock does not exist in the child; a
    # file it was executing is not cached, and runs again under a new name
    global _file_lock
    _file_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _load_file(path: str):
    """The module of the rules file ``path``, executed once per version of the
    file: loading it again returns the same module (executing it again would
    add every definition as a further alternate of the same patterns); a
    changed file is executed as a new module, with patterns of its own."""
    path = os.path.realpath(path)
    st = os.stat(path)
    stamp = (st.st_mtime_ns, st.st_size)
    with _file_lock:
        hit = _files.get(path)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        stem = os.path.splitext(os.path.basename(path))[0]
        _loads[0] += 1
        name = f"pypm_user_rules_{stem}_{_loads[0] - 1}"
        s = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(s)
        s.loader.exec_module(mod)
        _files[path] = (stamp, mod)
        return mod


def load_rules(spec: str) -> List[Pattern]:
    """Patterns from ``spec``: :data:`LIBRARY` (``"library"``: the whole
    default library, as :func:`default_patterns`), a library module name
    (one of :data:`ALL_MODULES`, e.g. ``attention`` or ``fusion``), a
    dotted module path, or a ``.py`` file. Raises ValueError when it cannot
    be imported or defines no pattern with rules."""
    if spec == LIBRARY:
        return default_patterns()
    if spec in MODULES:
        return default_patterns((spec,))
    if spec in EXTRA_MODULES:
        spec = f"{__name__}.{spec}"
    else:
        _declarations_first()
    try:
        if spec.endswith(".py") or os.sep in spec:
            if not os.path.isfile(spec):
                raise ValueError(f"rules file {spec!r} does not exist")
            mod = _load_file(spec)
        else:
            mod = importlib.import_module(spec)
    except ValueError:
        raise
    except Exception as e:
        raise ValueError(f"cannot import rules {spec!r}: {type(e).__name__}: {e}") from None
    pats = _patterns_of(mod)
    if not pats:
        raise ValueError(f"rules {spec!r} define no @pm.pattern with @pm.rule rules")
    _warn_non_descending(pats)
    return pats


def _declarations_first() -> None:
    """Load the PyTorch layer's operator declarations (where torch is
    installed) before a user's rules: they label their overloads, so the
    labels the file's PyTorch code applies (:mod:`pypm_verified.dsl.torch_labels`)
    are theirs whatever the file traces first."""
    try:
        from ..torch import ops  # noqa: F401
    except ModuleNotFoundError as e:
        if e.name != "torch":
            raise


def load_rule_specs(specs) -> List[Pattern]:
    """The patterns of several ``specs`` (each as :func:`load_rules` takes
    it), in the order given, each pattern once (``["library", "gelu"]``
    does not try the GELU patterns twice); None or empty: the library."""
    if not specs:
        return default_patterns()
    out: Dict[Pattern, None] = {}
    for spec in specs:
        for p in load_rules(spec):
            out.setdefault(p, None)
    return list(out)


def _warn_non_descending(pats) -> None:
    """A :class:`PatternWarning` for each pattern outside ``Fuel.v``'s
    descending class (``pm.termination``'s reason): its search at a node can
    unfold calls forever, so only the fuel or the engine's memory budget
    stops it (each stop is an undecided answer, never a no-match)."""
    import warnings
    from ..errors import PatternWarning
    for p in pats:
        if getattr(p, "is_multi", False):
            continue
        try:
            t = p.termination()
        except Exception:  # noqa: BLE001 -- a lint, never an obstacle to loading
            continue
        if not t.descending:
            warnings.warn(f"{t}; a search there is stopped only by the fuel (--fuel) or the "
                          "memory budget (PYPM_MEMORY_MB)", PatternWarning, stacklevel=3)
