"""bench/bench_zoo.py: three tiny zoo entries end to end (export, the CLI's
rewrite, the explanation of unfused blocks), the classification of a CLI
run's failures, and the loader/importer bug the zoo found.

The end-to-end test runs ``bench_zoo.py --only bert,nn_cnn,nn_data_dependent
--modes static`` with a build directory of its own (no cache from a real
run), as ``make bench`` would, and reads its per-model records.
"""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
for p in (str(BENCH), str(ROOT / "python")):
    if p not in sys.path:
        sys.path.insert(0, p)

import bench_zoo  # noqa: E402
import zoo_models  # noqa: E402

pytestmark = pytest.mark.zoo


def _env(**extra):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT / "python")] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                  if p]), **extra)
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(ROOT / "build" / "inductor"))
    return env


@pytest.fixture(scope="module")
def zoo_run(tmp_path_factory, lib):
    build = tmp_path_factory.mktemp("zoo")
    p = subprocess.run([sys.executable, str(BENCH / "bench_zoo.py"), "--only",
                        "bert,nn_cnn,nn_data_dependent", "--modes", "static", "--jobs", "2"],
                       cwd=ROOT, env=_env(PYPM_ZOO_BUILD=str(build)), text=True,
                       capture_output=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    recs = {}
    for f in (build / "results").glob("*.json"):
        r = json.loads(f.read_text())
        recs[r["model"]] = r
    return recs, p.stdout, build


@pytest.mark.slow
def test_zoo_bert_blocks_counted_and_fused(zoo_run):
    recs, out, build = zoo_run
    r = recs["bert"]
    assert r["exported"] == "yes" and not r["crash"]
    # BERT has one attention block per layer, none of them SDPA in the export
    assert r["export"]["softmax_blocks"] == zoo_models.LAYERS and r["export"]["sdpa"] == 0
    assert r["blocks_before"] == zoo_models.LAYERS
    # the CLI rewrote it (exit 0), the attention rule fired once per block and
    # the rewritten program holds that many new SDPA nodes, no softmax left
    assert r["rewrite"]["exit"] == 0 and r["rewritten"] == "ok"
    assert r["fired"].get("sdpa") == zoo_models.LAYERS
    assert r["fused"] == zoo_models.LAYERS and r["unfused_count"] == 0
    assert r["analysis"]["softmax_left"] == 0
    num = r["rewrite"]["report"]["numerics"]
    assert num["ok"] and num["runs"] >= 1 and r["numerics"].startswith("ok")
    assert r["rewrite_s"] is not None and r["rewrite_s"] > 0
    assert (build / "work" / "bert.static" / "model.rw.pt2").exists()
    assert '"model": "bert"' in out


@pytest.mark.slow
def test_zoo_cnn_has_no_blocks(zoo_run):
    recs, _, _ = zoo_run
    r = recs["nn_cnn"]
    assert r["exported"] == "yes" and r["rewritten"] == "ok" and not r["crash"]
    assert r["blocks_before"] == 0 and r["fused"] == 0 and r["unfused_count"] == 0
    assert r["export"]["nodes"] > 5  # it was exported: convolutions, relu, pooling, linear


@pytest.mark.slow
def test_zoo_export_failure_is_the_models(zoo_run):
    recs, _, _ = zoo_run
    r = recs["nn_data_dependent"]
    assert r["exported"] == "no" and not r["crash"]
    assert "rewrite" not in r  # nothing to rewrite
    # the loader's one line, quoting torch, naming the user's source line
    assert "data-dependent" in r["failure"] and "zoo_models.py" in r["failure"]


def test_zoo_unfused_block_explained(lib):
    """A block the attention patterns miss gets the explain machinery's
    reason (in-process: the analysis step on a program whose scores pass
    through abs before the softmax, a form no attention rule has)."""
    import tempfile

    class M(torch.nn.Module):
        def forward(self, q, k, v):
            s = torch.bmm(q, k.transpose(1, 2)).abs() * 0.25
            return torch.bmm(torch.softmax(s, -1), v)
    x = torch.randn(2, 8, 16)
    from pypm_verified.torch.loader import export_module
    ep = export_module(M(), (x, x, x))
    soft, sdpa = bench_zoo.attention_blocks(ep.graph)
    assert len(soft) == 1 and not sdpa
    with tempfile.TemporaryDirectory() as d:
        torch.export.save(ep, os.path.join(d, "model.pt2"))
        an = bench_zoo.step_analyze("m", "static", Path(d), None)
    assert an["softmax_left"] == 1
    (u,) = an["unfused"]
    assert u["root_op"] == "aten.bmm.default"
    assert u["kind"] and u["reason"] and u["key"]
    assert u["kind"] != "explain-error"


def test_classify_cli():
    c = bench_zoo.classify_cli
    assert c(0, "")["status"] == "ok" and not c(0, "")["crash"]
    num = c(1, "numerics: output 0: max abs 1.0\nerror: the rewritten program disagrees\n")
    assert num["status"] == "numerics" and not num["crash"]
    torch_tb = textwrap.dedent(f"""\
        Traceback (most recent call last):
          File "{torch.__file__}", line 10, in export
            raise ValueError("bad")
        torch._dynamo.exc.UserError: Could not guard on data-dependent expression

        The above exception was the direct cause of the following exception:

        Traceback (most recent call last):
          File "{ROOT}/python/pypm_verified/torch/loader.py", line 270, in export_module
            raise _export_error(e) from e
        pypm_verified.torch.loader.LoadError: torch.export could not export the model
        error: m.pt2: torch.export could not export the model
        """)
    ld = c(2, torch_tb)
    assert ld["status"] == "load-failed" and not ld["crash"]
    assert ld["message"].startswith("m.pt2: torch.export could not")
    ours = textwrap.dedent(f"""\
        Traceback (most recent call last):
          File "{ROOT}/python/pypm_verified/torch/loader.py", line 99, in _load_file
            x = y[3]
        IndexError: list index out of range
        error: m.pt2: cannot load it: IndexError: list index out of range
        """)
    cr = c(2, ours)
    assert cr["status"] == "load-failed" and cr["crash"] and "loader.py:99" in cr["message"]
    assert c(3, "error: rule 'sdpa' failed at line 3: KeyError: x; nothing written")["crash"]
    assert c(-11, "")["crash"] and "signal 11" in c(-11, "")["message"]
    assert c(None, "", timed_out=True)["status"] == "timeout"
    unc = c(1, "Traceback (most recent call last):\n  File \"x.py\", line 1, in f\n"
               "RuntimeError: boom\n")
    assert unc["status"] == "crash" and unc["crash"] and "RuntimeError: boom" in unc["message"]


def test_graph_imported_before_the_library_still_matches():
    """Found by the zoo: a graph imported before ``pypm_verified.torch.ops``
    was imported got operators made on first sight (``aten.matmul.default``)
    that the library's ``MatMul`` never matched ("the pattern's root can only
    be MatMul, found aten.matmul.default"). A fresh process, so the import
    order is the one under test."""
    code = textwrap.dedent("""\
        import torch
        from pypm_verified.torch.importer import TermGraph
        class M(torch.nn.Module):
            def forward(self, q, k, v):
                s = torch.matmul(q, k.transpose(-1, -2)) * 0.5
                return torch.matmul(torch.softmax(s, -1), v)
        x = torch.randn(1, 2, 4, 8)
        ep = torch.export.export(M(), (x, x, x)).run_decompositions({})
        tg = TermGraph(ep.graph).build()
        import pypm_verified as pm
        import pypm_verified.library.attention as A
        from pypm_verified.library import _patterns_of
        root = [n for n in ep.graph.nodes if n.op == "call_function"][-1]
        print(any(pm.match(p, tg.term[root]) is not None for p in _patterns_of(A)))
        """)
    p = subprocess.run([sys.executable, "-c", code], env=_env(), text=True,
                       capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip().splitlines()[-1] == "True"


def test_explain_cli_on_a_dynamic_program(tmp_path, capsys, lib):
    """Found by the zoo: ``explain`` imported a dynamic program without size
    hints, so every guard on a symbolic size was unknown and it reported "no
    match" where ``rewrite`` fires. It now reads sizes as the rewrite does
    and re-decides each match for every admissible size."""
    from torch.export import Dim
    from pypm_verified import cli
    from pypm_verified.torch.loader import export_module

    class M(torch.nn.Module):
        def forward(self, q, k, v):
            s = torch.matmul(q, k.transpose(-1, -2)) * 0.25
            return torch.matmul(torch.softmax(s, -1), v)
    x = torch.randn(2, 4, 8, 16)
    seq = Dim("seq", min=2, max=64)
    ep = export_module(M(), (x, x, x), dynamic_shapes=({2: seq}, {2: seq}, {2: seq}))
    assert any(not isinstance(d, int) for d in ep.example_inputs[0][0].shape) or \
        ep.range_constraints
    path = tmp_path / "m_dyn.pt2"
    torch.export.save(ep, str(path))
    assert cli.main(["explain", str(path), "--pattern", "Attention"]) == 0
    out, err = capsys.readouterr()
    assert "dynamic shapes" in err  # a note: logged to stderr
    assert "pattern Attention: matches at 1 node(s)" in out, out
    assert "example sizes only" not in out + err


@pytest.mark.parametrize("name, other", [
    ("wav2vec2", {"input_values": (3, 1000)}),   # a multiple of the conv stride (20)
    ("gpt_neo", {"input_ids": (3, 37), "attention_mask": (3, 37)}),
    # found by the zoo: their attention pattern binds a view's sizes, a list
    # of SymInts and ints in a dynamic program, which the driver had no value
    # for ("term %118 has no FX node", a crash)
    ("bloom", {"input_ids": (3, 21), "attention_mask": (3, 21)}),
    ("deberta_v2", {"input_ids": (3, 21), "attention_mask": (3, 21)}),
])
def test_zoo_constrained_models_export_dynamically(lib, name, other, tmp_path):
    """The dynamic specs that carry the models' own constraints (speech:
    the length a multiple of the feature encoder's stride; GPT-Neo: the
    sequence below max_position_embeddings) export; the rewritten program
    fuses every attention block and accepts inputs of other sizes.

    Also from the saved ``.pt2`` (what the CLI and the zoo rewrite): found by
    the zoo, GPT-Neo's blocks were left unfused there ("the size fact
    Eq(s43, 1) is not statically known"). The loaded program's batch ranges
    over [1, 64] (export's tracing assumed >= 2), and torch's meta kernel of
    the rule's ``add(mask, fill)`` asked ``guard_or_false(batch == 1)``, a
    question whose answer it does not need (see dynamic.no_new_guards)."""
    from pypm_verified.library import default_patterns
    from pypm_verified.torch.loader import load_model
    from pypm_verified.torch.pipeline import rewrite_program
    m, kw, spec = zoo_models.build(name)
    prog = load_model(m, (), example_kwargs=kw, dynamic_shapes=spec)
    assert prog.ep.range_constraints
    path = tmp_path / "m.pt2"
    torch.export.save(prog.ep, str(path))
    loaded = load_model(str(path))
    assert loaded.ep.range_constraints
    g = torch.Generator().manual_seed(3)

    def inputs(sizes):
        return {k: (torch.randn(sizes[k], generator=g) if v.is_floating_point()
                    else torch.ones(sizes[k], dtype=v.dtype) if k == "attention_mask"
                    else torch.randint(3, 1000, sizes[k], generator=g)) for k, v in kw.items()}
    one = {k: (1,) + tuple(s[1:]) for k, s in other.items()}  # batch 1: admissible too
    for p in (prog, loaded):
        r = rewrite_program(p, default_patterns(("attention",)), target="cuda", check=False)
        assert r.report.firings.get("sdpa") == 2, dict(r.report.declines)
        sdpa = [n for n in r.ep.graph.nodes
                if n.target == torch.ops.aten.scaled_dot_product_attention.default]
        assert len(sdpa) == 2
        for sizes, batch in ((other, 3), (one, 1)):
            kw2 = inputs(sizes)
            ours = r.ep.module()(**kw2).last_hidden_state
            with torch.no_grad():
                eager = m(**kw2).last_hidden_state
            assert ours.shape == eager.shape and ours.shape[0] == batch
            assert torch.allclose(ours, eager, atol=1e-4), (ours - eager).abs().max()


def test_mixtral_pt2_rewritten_by_the_cli(lib, tmp_path):
    """Found by the zoo: Mixtral's experts call
    ``torch.ops.transformers.grouped_mm_fallback``, a custom operator that
    transformers registers in ``transformers.integrations.moe`` (not at
    ``import transformers``), so a fresh process could not load the saved
    program. The loader imports it (loader.OP_LIBRARIES): the CLI rewrites
    the file (its attention fused) and ``pm.load`` reads the output back,
    each in a fresh process."""
    from pypm_verified.torch.loader import export_module
    m, kw, _ = zoo_models.build("mixtral")
    ep = export_module(m, (), kw)
    assert any("grouped_mm_fallback" in str(n.target) for n in ep.graph.nodes)
    model, out, rep = tmp_path / "mixtral.pt2", tmp_path / "mixtral.rw.pt2", tmp_path / "r.json"
    torch.export.save(ep, str(model))
    p = subprocess.run([sys.executable, "-m", "pypm_verified", "rewrite", str(model), "-o",
                        str(out), "--report", str(rep), "--target", "cuda", "-q"],
                       cwd=ROOT, env=_env(), text=True, capture_output=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    r = json.loads(rep.read_text())
    assert r["firings"].get("sdpa") == zoo_models.LAYERS and r["numerics"]["ok"], r["declines"]
    code = ("import sys, pypm_verified as pm\n"
            "ep = pm.load(sys.argv[1])\n"
            "t = [str(n.target) for n in ep.graph.nodes]\n"
            "print(sum('scaled_dot_product_attention' in x for x in t), "
            "sum('grouped_mm_fallback' in x for x in t))\n")
    p = subprocess.run([sys.executable, "-c", code, str(out)], cwd=ROOT, env=_env(), text=True,
                       capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    sdpa, moe = map(int, p.stdout.split()[-2:])
    assert sdpa == zoo_models.LAYERS and moe > 0
