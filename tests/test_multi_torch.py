"""Multi-root rewriting on PyTorch programs: QKV and gate/up fusion
(library/fusion.py) on the small models of examples/models.py fire in every
layer, outputs agree, and the saved .pt2 (with the weights concatenated at
rewrite time as constants) loads and runs in a fresh process."""
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))


def _rewrite(name, engine="verified"):
    import models
    from pypm_verified.library import fusion
    from pypm_verified.torch.loader import load_model
    from pypm_verified.torch.pipeline import rewrite_program
    m, inp = models.build(name, "small")
    prog = load_model(m, inp)
    return prog, rewrite_program(prog, fusion.PATTERNS, engine=engine, n_random=1), \
        models.layers("small")


@pytest.mark.parametrize("name,qkv,gate_up", [("bert", 1, 0), ("llama", 1, 1)])
def test_fusion_fires_in_every_layer(name, qkv, gate_up):
    prog, res, layers = _rewrite(name)
    assert res.numerics.ok
    assert res.report.firings.get("qkv_gemm", 0) == qkv * layers
    assert res.report.firings.get("gate_up_gemm", 0) == gate_up * layers
    consts = [k for k in res.ep.constants if k.startswith("c_pypm_fused")]
    assert consts  # the concatenated weights are constants of the program


def test_engines_rewrite_alike():
    _, a, _ = _rewrite("llama", "verified")
    _, b, _ = _rewrite("llama", "reference")
    assert a.report.firings == b.report.firings
    assert str(a.ep.graph_module.graph) == str(b.ep.graph_module.graph)


def test_saved_program_runs_in_a_fresh_process(tmp_path):
    from pypm_verified.torch.pipeline import save_atomic
    prog, res, _ = _rewrite("llama")
    path = str(tmp_path / "llama.fused.pt2")
    save_atomic(res.ep, path)
    inputs = str(tmp_path / "inputs.pt")
    want = res.ep.module()(*prog.args, **prog.kwargs)
    torch.save({"args": prog.args, "kwargs": prog.kwargs, "want": want}, inputs)
    code = (
        "import torch, pypm_verified as pm\n"
        f"ep = pm.load({path!r})\n"
        f"d = torch.load({inputs!r}, weights_only=False)\n"
        "got = ep.module()(*d['args'], **d['kwargs'])\n"
        "flat = lambda t: [x for x in torch.utils._pytree.tree_leaves(t) if isinstance(x, torch.Tensor)]\n"
        "assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(flat(got), flat(d['want'])))\n"
        "print('ok')\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "python"))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-2000:]


def test_wrong_fusion_is_refuted():
    """A wrong variant of QKV fusion (tests/wrong_rules/fusion_qk_swapped.py:
    the query's and key's slices swapped) fires on BERT and the numerical
    check refutes it."""
    import importlib.util
    import models
    from pypm_verified.torch.loader import load_model
    from pypm_verified.torch.pipeline import rewrite_program
    path = os.path.join(HERE, "wrong_rules", "fusion_qk_swapped.py")
    spec = importlib.util.spec_from_file_location("fusion_qk_swapped", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    m, inp = models.build("bert", "small")
    res = rewrite_program(load_model(m, inp), mod.PATTERNS, n_random=1)
    assert res.report.firings.get("qkv_gemm_qk_swapped", 0) == models.layers("small")
    assert not res.numerics.ok
