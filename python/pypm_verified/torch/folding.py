"""Weights folded at rewrite time (``ctx.fold_cat``): the concatenation of
weights of the program, computed once and added to it as a new constant
input (the pipeline registers it in the exported program:
``pipeline._add_constants``)."""
from __future__ import annotations

from typing import Dict, FrozenSet, List, Optional, Tuple

import torch
import torch.fx as fx


class WeightFolder:
    """The folded weights of one driver run (``host``: the
    :class:`~.driver.Driver`, whose graph, term graph, fake mode and values
    it builds with).

    ``weights``: the program's weights by placeholder name (set by the
    pipeline; None: no weight is known, nothing folds), ``user_inputs``: the
    names of its user inputs (a new constant goes before them),
    ``new_constants``: ``[(placeholder, tensor)]`` the folds added,
    ``folded``: (weight names, dim) -> the placeholder of their fold."""

    def __init__(self, host):
        self.host = host
        self.weights: Optional[Dict[str, torch.Tensor]] = None
        self.user_inputs: FrozenSet[str] = frozenset()
        self.new_constants: List[Tuple[fx.Node, torch.Tensor]] = []
        self.folded: Dict[tuple, fx.Node] = {}

    def fold_cat(self, values, dim: int = 0):
        """See :meth:`.rule_api.RuleContext.fold_cat`."""
        host = self.host
        if self.weights is None or host.shape_env is not None:
            return None
        names, tensors = [], []
        for v in values:
            n = getattr(v, "fx", None)
            if n is None or n.op != "placeholder" or n.name not in self.weights:
                return None
            names.append(n.name)
            tensors.append(self.weights[n.name])
        key = (tuple(names), dim)
        node = self.folded.get(key)
        g = host.gm.graph
        if node is None or node.graph is not g:
            t = torch.cat([x.detach() for x in tensors], dim).contiguous()
            users = [n for n in g.nodes if n.op == "placeholder" and n.name in self.user_inputs]
            anchor = users[0] if users else next(n for n in g.nodes if n.op != "placeholder")
            with g.inserting_before(anchor):
                node = g.placeholder(f"c_pypm_fused_{len(self.new_constants)}")
            with host.fake_mode:
                node.meta["val"] = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype,
                                                       device=t.device)
            host.tg.add(node)
            self.new_constants.append((node, t))
            self.weights[node.name] = t
            self.folded[key] = node
        return host.value(node)


__all__ = ["WeightFolder"]
