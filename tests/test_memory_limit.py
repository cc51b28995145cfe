"""The memory a run needs, estimated before it runs.

A ``.pt2`` of a few KB whose sample input is an expanded view
(``torch.zeros(1).expand(2**31)``: 4 bytes stored, 8 GiB as elements) is
refused in seconds with exit 2, naming the estimate and ``--max-memory``,
and never allocates it (the process runs under an address-space limit far
below the input's size). A program whose original fails on its own inputs
is exit 2, blamed on the original, never exit 3 (a rule). The estimator
(:mod:`pypm_verified.torch.memory`) is checked on small models: inputs
counted whole, weights, the liveness peak, views, symbolic sizes."""
import os
import resource
import subprocess
import sys
import time
import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("rich")

import torch.nn as nn  # noqa: E402

from pypm_verified.cli import main  # noqa: E402
from pypm_verified.cli.parsing import _max_memory, parse, parser  # noqa: E402
from pypm_verified.torch import check, memory  # noqa: E402
from pypm_verified.torch.loader import load_model  # noqa: E402
from pypm_verified.torch.pipeline import check_numerics, rewrite_program  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))

NEGNEG_RULES = """
import pypm_verified as pm
from pypm_verified.torch.ops import Neg

@pm.pattern
def NN(x):
    return Neg(Neg(x))

@pm.rule(NN)
def drop_negs(x):
    return x
"""


class NegNeg(nn.Module):
    def forward(self, x):
        return -(-x) * 2


class AllNonNegative(nn.Module):
    """Exported on inputs in [0, 1): a runtime assertion that every element
    is >= 0, which the numerics check's random (normal) inputs break, in the
    original program as much as in the rewritten one."""

    def forward(self, x):
        n = (x >= 0).sum().item()
        torch._check(n == x.numel())
        return -(-x) * 2


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 64)
        self.ln = nn.LayerNorm(64)

    def forward(self, x):
        h = torch.relu(self.lin(x))
        return self.ln(h).transpose(0, 1).sum(0)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("memory")
    f = {}
    for name, m, x in (("huge", NegNeg(), torch.zeros(1).expand(2 ** 31)),
                       ("small", NegNeg(), torch.zeros(1).expand(2 ** 20)),
                       ("asserts", AllNonNegative(), torch.rand(4, 8))):
        f[name] = str(d / f"{name}.pt2")
        torch.export.save(torch.export.export(m, (x,)), f[name])
    f["rules"] = str(d / "negneg_rules.py")
    with open(f["rules"], "w") as fh:
        fh.write(NEGNEG_RULES)
    return f


def _one_error(err: str) -> str:
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, err
    return lines[0]


def _address_space_limit(nbytes: int):
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (nbytes, nbytes))
    return limit


# ------------------------------------------------------------- the command line

def test_expanded_input_is_refused_in_seconds_without_allocating(files):
    """The 2**31-element view (8 GiB as float32) of a 4-byte storage: exit 2
    in seconds, naming the input, the estimate and --max-memory, under an
    address-space limit of 6 GiB (so the input was never materialized)."""
    assert os.path.getsize(files["huge"]) < 16 * 1024
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "pypm_verified", "rewrite", files["huge"],
                        "--rules", files["rules"], "--dry-run"], capture_output=True,
                       text=True, env=ENV, timeout=300,
                       preexec_fn=_address_space_limit(6 * memory.GiB))
    took = time.perf_counter() - t
    assert p.returncode == 2, p.stderr
    line = _one_error(p.stderr)
    assert line.startswith("error: the original program would need about 24.0 GiB to run on "
                           "its sample inputs (inputs 8.0 GiB"), line
    assert "largest: input x, 8.0 GiB" in line and "over --max-memory " in line, line
    assert "(the default: half the physical memory, at most 16G)" in line, line
    assert took < 120, took


def test_max_memory_option_refuses_and_lifts(files, capsys):
    base = ["rewrite", files["small"], "--rules", files["rules"], "--dry-run", "-q"]
    code = main(base + ["--max-memory", "1M"])
    _, err = capsys.readouterr()
    assert code == 2
    line = _one_error(err)
    assert ("would need about 12.0 MiB to run on its sample inputs (inputs 4.0 MiB, weights "
            "0 B, intermediates 8.0 MiB at node neg_1; largest: input x, 4.0 MiB), over "
            "--max-memory 1.0 MiB; --max-memory SIZE raises it, 0 or none lifts it") in line
    for lifted in ("none", "0", "1G"):
        assert main(base + ["--max-memory", lifted]) == 0, capsys.readouterr()
        out, _ = capsys.readouterr()
        assert "numerics ok" in out


def test_rewritten_program_is_sized_with_the_originals_outputs(files, capsys):
    """12 MiB: the original fits (12.0 MiB); the rewritten program (x*2: 8
    MiB) with the original's outputs kept (4 MiB) fits too. 11.5 MiB: the
    original does not."""
    base = ["rewrite", files["small"], "--rules", files["rules"], "--dry-run", "-q"]
    assert main(base + ["--max-memory", "12M"]) == 0
    capsys.readouterr()
    assert main(base + ["--max-memory", "11.5M"]) == 2
    assert "the original program would need" in _one_error(capsys.readouterr()[1])


def test_no_check_runs_nothing_and_is_not_refused(files, capsys):
    code = main(["rewrite", files["small"], "--rules", files["rules"], "--dry-run", "-q",
                 "--no-check", "--max-memory", "1K"])
    assert code == 0, capsys.readouterr()


def test_original_failing_on_its_inputs_is_exit_2_not_a_rule(files, capsys):
    """The original's own runtime assertion fails on the random inputs: exit
    2, blamed on the original (it was exit 3, "the rewritten program fails
    to run")."""
    code = main(["rewrite", files["asserts"], "--rules", files["rules"], "--dry-run"])
    _, err = capsys.readouterr()
    assert code == 2, err
    line = _one_error(err)
    assert line.startswith("error: the original program fails to run on random inputs of its "
                           "sample inputs' shapes (set 1): RuntimeError: Runtime assertion "
                           "failed"), line
    assert "rewritten" not in line
    assert line.endswith("; --random-runs 0 checks on the sample inputs only"), line


@pytest.mark.parametrize("bad", ["1x", "-1", "", "G", "8Q", "1e9", "8 GB B"])
def test_bad_max_memory_is_a_usage_error(bad, files, capsys):
    code = main(["rewrite", files["small"], "--max-memory", bad])
    _, err = capsys.readouterr()
    assert code == 2
    line = _one_error(err)
    assert line.startswith("error: argument --max-memory: "), line
    assert "is not a size" in line


@pytest.mark.parametrize("text, value", [
    ("8G", 8 << 30), ("8g", 8 << 30), ("8GB", 8 << 30), ("8GiB", 8 << 30), ("1.5G", 3 << 29),
    ("512M", 512 << 20), ("64K", 64 << 10), ("2T", 2 << 40), ("1000", 1000), ("0", 0),
    ("none", 0), ("NONE", 0), (" 4 G ", 4 << 30)])
def test_max_memory_values(text, value):
    args = parse(parser(), ["rewrite", "m.pt2", "--max-memory", text])
    assert args.max_memory == value
    # the Python API's parser reads the same grammar (None: no limit)
    assert memory.parse_size(text) == (value or None)


def test_max_memory_default_is_none_then_resolved():
    assert parse(parser(), ["rewrite", "m.pt2"]).max_memory is None
    assert memory.resolve_limit("default") == memory.default_limit()
    assert memory.resolve_limit(None) is None and memory.resolve_limit(0) is None
    assert memory.resolve_limit("none") is None and memory.resolve_limit(5) == 5
    with pytest.raises(ValueError):
        memory.parse_size("lots")


def test_default_limit(monkeypatch):
    phys = memory.physical_memory()
    lim = memory.default_limit()
    assert 0 < lim <= 16 * memory.GiB
    if phys:
        assert lim <= phys // 2
    monkeypatch.setattr(memory, "physical_memory", lambda: 8 * memory.GiB)
    assert memory.default_limit() == 4 * memory.GiB
    monkeypatch.setattr(memory, "physical_memory", lambda: 256 * memory.GiB)
    assert memory.default_limit() == 16 * memory.GiB
    monkeypatch.setattr(memory, "physical_memory", lambda: None)
    assert memory.default_limit() == 16 * memory.GiB


# ------------------------------------------------------------- the numerics check

def test_compare_blames_the_original(files):
    """An original that raises on its inputs: OriginalFailed, saying so,
    before the rewritten program runs; a rewritten one that raises: its
    own exception, as before."""
    prog = load_model(files["small"], None)
    ran = []

    class Raising:
        def __init__(self, ep, who):
            self.ep, self.who = ep, who

        def module(self):
            def run(*a, **k):
                ran.append(self.who)
                raise RuntimeError(f"{self.who} cannot run")
            return run

    with pytest.raises(check.OriginalFailed) as e:
        check.compare(Raising(prog.ep, "original"), Raising(prog.ep, "rewritten"),
                      prog.args, prog.kwargs)
    assert str(e.value) == ("the original program fails to run on its sample inputs: "
                            "RuntimeError: original cannot run")
    assert ran == ["original"]
    with pytest.raises(RuntimeError, match="rewritten cannot run") as e:
        check.compare(prog.ep, Raising(prog.ep, "rewritten"), prog.args, prog.kwargs)
    assert not isinstance(e.value, check.OriginalFailed)


def test_python_api_takes_max_memory(files):
    prog = load_model(files["small"], None)
    with pytest.raises(memory.MemoryLimitExceeded) as e:
        rewrite_program(prog, None, max_memory="1M")
    assert e.value.what == "the original program" and e.value.limit == 1 << 20
    assert "over the limit max_memory=1.0 MiB (None lifts it)" in str(e.value)
    res = rewrite_program(prog, None, max_memory=None)
    assert res.numerics is not None and res.numerics.ok
    num, _ = check_numerics(prog, res.ep, n_random=1, max_memory="64M")
    assert num.ok and num.runs == 2


def test_chunked_comparison_matches_one_pass(monkeypatch):
    g = torch.Generator().manual_seed(0)
    r = torch.randn(1000, generator=g)
    r[[3, 500]] = float("nan")
    r[[7, 999]] = float("inf")
    o = r + 1e-3 * torch.randn(1000, generator=g)
    o[[3, 500]] = float("nan")
    o[[7, 999]] = float("inf")
    whole = check._compare_floats(r, o, 1e-4, 1e-3)
    monkeypatch.setattr(check, "CHUNK", 7)
    chunked = check._compare_floats(r, o, 1e-4, 1e-3)
    assert whole[0] == chunked[0] == 996 and whole[3] == chunked[3] > 0
    assert whole[1] == pytest.approx(chunked[1]) and whole[2] == pytest.approx(chunked[2])
    o2 = o.clone()
    o2[999] = -float("inf")  # in the last chunk
    assert check._compare_floats(r, o2, 1e-4, 1e-3) is None


# ------------------------------------------------------------- the estimator

def _block_program():
    torch.manual_seed(0)
    m = Block().eval()
    x = torch.randn(8, 16)
    with warnings.catch_warnings():  # torch's own pytree deprecation, from deepcopy
        warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)")
        return torch.export.export(m, (x,)).run_decompositions({}), m, x


def test_estimate_counts_inputs_weights_and_the_largest_node():
    ep, m, x = _block_program()
    est = memory.estimate_run_bytes(ep, (x,), {})
    weights = sum(p.numel() * p.element_size() for p in m.parameters())
    assert est.inputs == x.numel() * x.element_size() == 512
    assert est.weights == weights
    assert est.total == est.inputs + est.weights + est.intermediates
    assert est.total >= est.inputs + weights
    # the largest tensor: the weight of lin (64 x 16 float32), bigger than any activation
    assert est.largest == ("weight lin.weight", 64 * 16 * 4)
    # intermediates: every node's value is an (8, 64) float32 at most; at the peak two are
    # alive (an op and its input) plus layer_norm's saved statistics at most
    assert 8 * 64 * 4 * 2 <= est.intermediates <= 8 * 64 * 4 * 3
    assert est.outputs == 8 * 4  # sum(0) of the (64, 8) transpose
    # without inputs: the placeholders' values
    assert memory.estimate_run_bytes(ep) == est
    # a GraphModule whose nodes carry meta["val"]
    assert memory.estimate_run_bytes(ep.graph_module, (x,), {}).total >= est.inputs


def test_estimate_liveness_and_views():
    class Chain(nn.Module):
        def forward(self, x):
            a = x + 1          # 4 KiB
            b = a * 2          # a freed after this
            c = b.view(-1)     # a view: nothing new, keeps b alive
            d = c.exp()
            return d.reshape(32, 32).t() + 0

    x = torch.randn(32, 32)
    ep = torch.export.export(Chain(), (x,))
    est = memory.estimate_run_bytes(ep, (x,), {})
    kib4 = 32 * 32 * 4
    assert est.inputs == kib4 and est.weights == 0
    assert est.intermediates == 2 * kib4, est   # two live at once, never three
    assert est.largest[1] == kib4


def test_estimate_counts_an_expanded_view_whole():
    x = torch.zeros(1).expand(2 ** 31)
    assert x.untyped_storage().nbytes() == 4
    ep = torch.export.export(NegNeg(), (x,))
    est = memory.estimate_run_bytes(ep, (x,), {})
    assert est.inputs == 8 * memory.GiB
    assert est.total == 24 * memory.GiB  # input, then two 8 GiB values alive at once
    with pytest.raises(memory.MemoryLimitExceeded) as e:
        memory.check_limit("the original program", est, 16 * memory.GiB)
    assert e.value.needed == 24 * memory.GiB


def test_estimate_of_a_dynamic_program_uses_the_inputs_sizes():
    """Symbolic sizes are bound to the inputs given (or to ``sizes``, or to
    their hints); a data-dependent size (nonzero) never makes it fail."""
    class Dyn(nn.Module):
        def forward(self, x):
            y = torch.cat([x, x], 0) * 2
            return y, torch.nonzero(y > 0)

    x = torch.randn(10, 16)
    batch = torch.export.Dim("batch", max=4096)
    ep = torch.export.export(Dyn(), (x,), dynamic_shapes=({0: batch},))
    small = memory.estimate_run_bytes(ep, (x,), {})
    big = memory.estimate_run_bytes(ep, (torch.randn(1000, 16),), {})
    assert small.inputs == 10 * 16 * 4 and big.inputs == 1000 * 16 * 4
    assert big.total > 50 * small.total
    assert memory.estimate_run_bytes(ep) == small  # hints: the example's sizes
    (sym,) = {d.node.expr for n in ep.graph.nodes if n.op == "placeholder"
              for d in n.meta["val"].shape if isinstance(d, torch.SymInt)}
    assert memory.estimate_run_bytes(ep, sizes={sym: 1000}).total == big.total
    # the nonzero's rows: at most the elements of the tensor it selects from
    nz = 2 * 1000 * 16 * 2 * 8
    assert big.largest[1] <= nz
