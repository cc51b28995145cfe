"""Stand-ins for ``transformers``' model outputs (``load_model(...,
stand_in_outputs=True)``, what the command line does): a ``.pt2`` whose
outputs are ``transformers.modeling_outputs`` classes loads, runs and is
saved without importing ``transformers``, and the file saved is the one the
real classes give.

* the stand-in's pytree registration is the one ``transformers`` makes, for
  every class of the module in the installed version (flattening, keys,
  the serialized spec);
* in a fresh process, the BERT example loads without ``transformers``, and
  what it saves reads back with the real classes: the same output spec and
  the same outputs.
"""
import dataclasses
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
modeling_outputs = pytest.importorskip("transformers.modeling_outputs")

import torch.utils._pytree as pytree  # noqa: E402

from pypm_verified import examples  # noqa: E402
from pypm_verified.torch import loader  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))


def _python(code: str) -> subprocess.CompletedProcess:
    """``code`` run by a fresh interpreter (nothing imported yet); must exit 0."""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return r


def _output_classes():
    out = []
    for name in dir(modeling_outputs):
        cls = getattr(modeling_outputs, name)
        if isinstance(cls, type) and cls.__module__ == loader.MODEL_OUTPUTS \
                and cls in pytree.SUPPORTED_SERIALIZED_TYPES:
            out.append(cls)
    return out


def test_the_stand_in_flattens_and_serializes_as_transformers_registers_it():
    classes = _output_classes()
    assert len(classes) > 30  # the module's output classes, registered on import
    for cls in classes:
        if not dataclasses.is_dataclass(cls):
            continue  # a base (MultimodalModelOutput): transformers refuses to make one
        fields = [f.name for f in dataclasses.fields(cls)][:3]
        values = {f: torch.full((2,), float(i)) for i, f in enumerate(fields)}
        real = cls(**values)
        full = f"{cls.__module__}.{cls.__name__}"
        leaves, spec = pytree.tree_flatten(real)
        stand = type(cls.__name__, (loader._OutputStandIn,), {"__module__": cls.__module__})
        try:
            pytree.register_pytree_node(
                stand, loader._output_flatten,
                lambda v, c, t=stand: loader._output_unflatten(v, c, output_type=t),
                serialized_type_name=full + ".__test__")
            s_leaves, s_spec = pytree.tree_flatten(stand(**values))
            assert [id(x) for x in s_leaves] == [id(x) for x in leaves], cls
            assert s_spec.context == spec.context == list(real.keys()), cls
            assert pytree.treespec_dumps(s_spec).replace(".__test__", "") == \
                pytree.treespec_dumps(spec), cls
            back = pytree.tree_unflatten(s_leaves, s_spec)
            assert list(back.keys()) == fields and back[fields[0]] is values[fields[0]]
            assert getattr(back, fields[0]) is values[fields[0]]
        finally:
            pytree._deregister_pytree_node(stand)


def test_the_example_loads_without_transformers_and_saves_the_real_spec(tmp_path):
    src, out = tmp_path / "bert.pt2", tmp_path / "bert.saved.pt2"
    examples.save("bert", str(src), layers=1)
    code = ("import sys, torch\n"
            "from pypm_verified.torch.loader import load_model\n"
            f"m = load_model({str(src)!r}, stand_in_outputs=True)\n"
            "assert 'transformers' not in sys.modules, 'imported'\n"
            "o = m.ep.module()(*m.args, **m.kwargs)\n"
            "print(type(o).__name__, list(o.keys()), o.last_hidden_state.shape)\n"
            f"torch.export.save(m.ep, {str(out)!r})\n"
            "assert 'transformers' not in sys.modules, 'imported'\n")
    r = _python(code)
    assert r.stdout.startswith("BaseModelOutputWithPoolingAndCrossAttentions ['last_hidden_state'")
    a, b = torch.export.load(str(src)), torch.export.load(str(out))
    assert b.call_spec.out_spec == a.call_spec.out_spec
    assert b.call_spec.out_spec.type is a.call_spec.out_spec.type  # the real class now
    args, kwargs = a.example_inputs
    oa, ob = a.module()(*args, **kwargs), b.module()(*args, **kwargs)
    assert type(oa) is type(ob)
    la, lb = pytree.tree_leaves(oa), pytree.tree_leaves(ob)
    assert len(la) == len(lb) and all(torch.equal(x, y) for x, y in zip(la, lb))


def test_without_the_option_transformers_is_imported_as_before(tmp_path):
    src = tmp_path / "bert.pt2"
    examples.save("bert", str(src), layers=1)
    code = ("import sys\n"
            "from pypm_verified.torch.loader import load_model\n"
            f"m = load_model({str(src)!r})\n"
            "print('transformers' in sys.modules)\n")
    assert _python(code).stdout.strip() == "True"
