"""The metadata of rule-built nodes: the fast paths give what fake-tensor
propagation gives.

A replacement's ``meta["val"]`` comes from the driver's metadata cache (a
call whose arguments have the metadata of an earlier one: every layer after
the first) and, for the node that replaces the matched root when its
metadata is exactly the root's, is the root's own fake tensor. Checked on
multi-layer models against a driver without either fast path (every
replacement's value from a fake run of its operator): the same final graph,
and every node's value of the same sizes, strides, storage offset, dtype,
device and requires_grad; no two live nodes share a fake tensor or a
storage unless one is a view of the other. And the rule's builder hands the
root's fake tensor to no node that does not replace the root, nor while the
root stays in the graph.
"""
import copy

import pytest

torch = pytest.importorskip("torch")

from pypm_verified.library import default_patterns  # noqa: E402
from pypm_verified.torch import driver as D  # noqa: E402
from pypm_verified.torch import firing, metadata  # noqa: E402

aten = torch.ops.aten


class _Slow(D.Driver):
    """The driver without the fast paths: every new node's value from a fake
    run of its operator, no value taken from the root."""

    def meta_val(self, target, pos, kw, like=None):
        self.metadata.cache.clear()
        return super().meta_val(target, pos, kw, None)


def _rewrite(ep, cls, grad=True, taken=None):
    """Rewrite a copy of ``ep`` with the caller's grad mode ``grad`` (the
    programs' own values were traced below autograd: the weights' require
    grad, no call's does; a replacement's fake run follows its root, not the
    caller's mode)."""
    gm = copy.deepcopy(ep).graph_module
    d = cls(gm, default_patterns(), engine="verified", target="cpu", recompile=False,
            check_profitability=False)
    settle = firing.Builder.settle

    def spy(b, replacement):
        if b.holder is replacement and replacement is not None and b.root._erased:
            taken.append((b.root.name, replacement.name))
        return settle(b, replacement)

    if taken is not None:  # record which replacements took the root's fake tensor
        firing.Builder.settle = spy
    try:
        with torch.set_grad_enabled(grad):
            d.run()
    finally:
        firing.Builder.settle = settle
    return gm, d


def _meta(v):
    if not isinstance(v, torch.Tensor):
        return repr(v)
    return (tuple(v.shape), v.stride(), v.storage_offset(), v.dtype, v.device,
            v.requires_grad)


@pytest.mark.parametrize("model,grad", [("bert", False), ("gpt2", False), ("llama", False),
                                        ("bert", True), ("gpt2", True)])
def test_replacement_metadata_is_a_fake_runs(base_programs, model, grad):
    taken = []
    fast, d = _rewrite(base_programs[model], D.Driver, grad, taken)
    slow, _ = _rewrite(base_programs[model], _Slow, grad)
    assert d.report.firings, "no rule fired: the comparison would be empty"
    assert taken, "no replacement took the root's value: the fast path was not exercised"
    # the export IR's convention kept whatever the caller's grad mode: no
    # call's value requires grad, the replacements' included
    rg = [n.name for n in fast.graph.nodes if n.op == "call_function"
          and isinstance(n.meta.get("val"), torch.Tensor) and n.meta["val"].requires_grad]
    assert not rg, f"replacements whose value requires grad, unlike the export's: {rg}"
    assert any(n.op == "placeholder" and n.meta["val"].requires_grad for n in fast.graph.nodes)
    a = [(n.name, n.op, str(n.target)) for n in fast.graph.nodes]
    b = [(n.name, n.op, str(n.target)) for n in slow.graph.nodes]
    assert a == b
    for x, y in zip(fast.graph.nodes, slow.graph.nodes):
        assert _meta(x.meta.get("val")) == _meta(y.meta.get("val")), x.name


@pytest.mark.parametrize("model", ["bert", "gpt2"])
def test_no_two_live_nodes_share_a_fake_tensor(base_programs, model):
    gm, _ = _rewrite(base_programs[model], D.Driver, grad=False)
    seen = {}
    for n in gm.graph.nodes:
        v = n.meta.get("val")
        if isinstance(v, torch.Tensor):
            assert id(v) not in seen, f"{n.name} and {seen[id(v)]} share one fake tensor"
            seen[id(v)] = n.name
    # a storage is shared only along a chain of views: with an argument's value
    for n in gm.graph.nodes:
        v = n.meta.get("val")
        if n.op != "call_function" or not isinstance(v, torch.Tensor) \
                or not n.name.startswith(("linear_act", "scaled_dot_product")):
            continue
        for a in n.all_input_nodes:
            w = a.meta.get("val")
            if isinstance(w, torch.Tensor):
                assert w.untyped_storage()._cdata != v.untyped_storage()._cdata, \
                    f"{n.name} shares its argument {a.name}'s storage"


def _tiny():
    """relu(x @ w) twice, as an FX graph with fake values."""
    class M(torch.nn.Module):
        def forward(self, x, w):
            return torch.relu(x @ w) + torch.relu((x + 1) @ w)

    x, w = torch.randn(4, 8), torch.randn(8, 8)
    ep = torch.export.export(M(), (x, w)).run_decompositions({})
    return ep.graph_module


class _Op:
    """An operator as the builder sees it (``torch_targets``, ``name``)."""

    def __init__(self, target):
        self.torch_targets, self.name = (target,), str(target)


_SIGMOID = _Op(aten.sigmoid.default)  # relu's metadata: what a root relu's replacement has


def _builder(gm, root_target):
    d = D.Driver(gm, [], engine="verified", recompile=False)
    d.prepare()
    root = next(n for n in gm.graph.nodes if n.target is root_target)
    return d, root


def test_settle_gives_an_interior_node_its_own_value():
    gm = _tiny()
    d, root = _builder(gm, aten.relu.default)
    x = root.args[0]
    # fill the cache: the same call again is a hit
    d.meta_val(aten.sigmoid.default, [x], {})
    b = firing.Builder(d, root, rule=type("R", (), {"name": "r"})(), take_root_val=True)
    assert b._lend is not None and b._lend[0] is root.meta["val"]
    node = b.apply(_SIGMOID, d.value(x)).fx
    assert node is not root and not root._erased
    assert b.holder is node and node.meta["val"] is root.meta["val"]
    b.settle(None)  # the rule did not fire: the root stays
    assert node.meta["val"] is not root.meta["val"]
    assert _meta(node.meta["val"]) == _meta(root.meta["val"])
    assert b.holder is None


def test_settle_keeps_the_value_only_for_the_replacement_of_a_removed_root():
    gm = _tiny()
    d, root = _builder(gm, aten.relu.default)
    x = root.args[0]
    d.meta_val(aten.sigmoid.default, [x], {})
    b = firing.Builder(d, root, rule=type("R", (), {"name": "r"})(), take_root_val=True)
    node = b.apply(_SIGMOID, d.value(x)).fx
    assert node is not root and not root._erased
    old = root.meta["val"]
    b.settle(node)  # the root is still in the graph: no sharing
    assert node.meta["val"] is not old
    b.holder = node
    node.meta["val"] = old
    root.replace_all_uses_with(node)
    d.remove_dead([root])
    assert root._erased
    b.settle(node)
    assert node.meta["val"] is old


def test_a_view_of_the_holder_views_its_own_value():
    """A call that may return a view of the node holding the root's fake
    tensor gives that node a fresh one first: the view's value views it."""
    gm = _tiny()
    d, root = _builder(gm, aten.relu.default)
    x = root.args[0]
    d.meta_val(aten.sigmoid.default, [x], {})
    b = firing.Builder(d, root, rule=type("R", (), {"name": "r"})(), take_root_val=True)
    node = b.apply(_SIGMOID, d.value(x)).fx
    assert node.meta["val"] is root.meta["val"]
    view = b.apply(_Op(aten.t.default), d.value(node)).fx
    assert b.holder is None and node.meta["val"] is not root.meta["val"]
    assert view.meta["val"].untyped_storage()._cdata == \
        node.meta["val"].untyped_storage()._cdata
    assert view.meta["val"].untyped_storage()._cdata != \
        root.meta["val"].untyped_storage()._cdata
    # lent once: a later node of the root's metadata (a cache hit) gets a new one
    d.meta_val(aten.tanh.default, [x], {})
    again = b.apply(_Op(aten.tanh.default), d.value(x)).fx
    assert again.meta["val"] is not root.meta["val"]


def test_a_view_root_lends_no_value():
    """A root sharing its argument's storage (``_unsafe_view`` has no view
    ``_base``) lends its fake tensor to no replacement."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    mode = FakeTensorMode()
    g = torch.fx.Graph()
    a = g.placeholder("a")
    r = g.call_function(aten._unsafe_view.default, (a, [8, 4]))
    f = g.call_function(aten.relu.default, (a,))
    with mode:
        a.meta["val"] = torch.empty(4, 8)
        r.meta["val"] = aten._unsafe_view.default(a.meta["val"], [8, 4])
        f.meta["val"] = aten.relu.default(a.meta["val"])
    assert r.meta["val"]._base is None  # so the storage comparison is what catches it
    assert metadata.ownable_val(r, mode) is None
    assert metadata.ownable_val(f, mode) is not None
    assert metadata.ownable_val(f, FakeTensorMode()) is None  # another fake mode's value


def test_the_fake_runs_follow_the_roots_grad_mode_not_the_callers():
    """A graph traced above autograd (a Dynamo graph: a value computed from
    one that requires grad requires grad): rewritten under ``no_grad``, the
    replacement of a root whose value requires grad requires grad too, and
    takes the root's own value; in the export IR (no call's value requires
    grad) it does not, under grad mode on."""
    for traced_with_grad in (True, False):
        gm = _tiny()
        d, root = _builder(gm, aten.relu.default)
        x = root.args[0]
        if traced_with_grad:
            with d.fake_mode:
                for n in (x, root):
                    n.meta["val"] = torch.empty_like(n.meta["val"]).requires_grad_(True)
        else:
            with d.fake_mode:
                x.meta["val"] = torch.empty_like(x.meta["val"]).requires_grad_(True)
        b = firing.Builder(d, root, rule=type("R", (), {"name": "r"})(), take_root_val=True)
        with torch.set_grad_enabled(not traced_with_grad):
            node = b.apply(_SIGMOID, d.value(x)).fx
        assert node.meta["val"].requires_grad is traced_with_grad
        assert node.meta["val"] is root.meta["val"], "the root's value was not taken"
        b.settle(None)
        assert node.meta["val"] is not root.meta["val"]
