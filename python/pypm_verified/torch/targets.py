"""The PyTorch target registry: which :class:`~pypm_verified.dsl.Op` an
FX node calling a torch target is labelled with. Filled by
``@pm.op(torch=[...])`` and by the importer for targets nobody declared
(marked ``auto``)."""
from __future__ import annotations

import threading
from typing import Callable, Dict, Optional

from ..dsl.operators import Op
from ..errors import PatternError

__all__ = ["TORCH_OPS", "bind_torch", "op_of_target"]

TORCH_OPS: Dict[object, Op] = {}
_torch_lock = threading.RLock()


def _schema_arity(target) -> Optional[int]:
    schema = getattr(target, "_schema", None)
    return None if schema is None else len(schema.arguments)


def bind_torch(fn: Callable, targets, op_class: Optional[str] = None, auto: bool = False) -> Op:
    """The operator ``fn`` bound to the torch ``targets`` (see :func:`op`)."""
    if not isinstance(targets, (list, tuple)):
        targets = [targets]
    targets = tuple(targets)
    if not targets:
        raise PatternError(f"operator {getattr(fn, '__name__', fn)}: torch= needs at least "
                           "one target")
    with _torch_lock:
        bound = [TORCH_OPS.get(t) for t in targets]
        live = [b for b in bound if b is not None and not getattr(b, "torch_auto", False)]
        if live:
            first = live[0]
            if len(live) == len(targets) and all(b is first for b in live) \
                    and set(first.torch_targets) == set(targets):
                return first  # the same declaration again (a re-imported module)
            t = next(t for t, b in zip(targets, bound) if b in live)
            raise PatternError(
                f"operator {getattr(fn, '__name__', fn)}: torch target {t} is already bound to "
                f"operator {TORCH_OPS[t].name} (declared in "
                f"{getattr(TORCH_OPS[t].fn, '__module__', '?')}); use that operator")
    o = Op(fn, op_class=op_class)
    for t in targets:
        n = _schema_arity(t)
        if n is not None and n != o.arity:
            raise PatternError(
                f"operator {o.name}: torch target {t} takes {n} argument(s) in full positional "
                f"form ({t._schema}), but the operator has {o.arity} parameter(s)")
    o.torch_targets = targets
    o.torch_auto = auto
    with _torch_lock:
        for t in targets:
            TORCH_OPS[t] = o
    return o




def op_of_target(target) -> Optional[Op]:
    """The operator bound to the torch ``target``, or None."""
    return TORCH_OPS.get(target)
