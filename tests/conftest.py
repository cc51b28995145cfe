"""Shared fixtures.

``lib``: the verified engine's shared library. Tests that need it skip when it
is missing, unless ``PYPM_REQUIRE_LIB`` is set (as CI does), in which case
they fail: they can never silently skip there.

``engine``: parametrizes a test over both engines ("reference" always,
"verified" through ``lib``) and over "simulated": the verified engine's code
path (``api`` -> ``binding.match`` / ``match_all`` / ``candidates`` /
``candidates_at``) answered
by a simulated engine that decodes the wire buffers independently and runs the
transcription of ``Entry.match_root`` (the root-operator index, then
``Interpreter.run``; tests/wire.py, tests/machine.py), so that path is tested
even without the library.

``examples/`` is put on ``sys.path`` so that tests import the paper's
operators and patterns from ``paper_ops`` (examples/paper_ops.py).

Ctrl-C is made Python's KeyboardInterrupt here even when the suite was
started with SIGINT ignored (a background job of a non-interactive shell,
``make test &``): the signal tests send SIGINT to this process and to the
CLI's child processes, which inherit an ignored SIGINT but not a handler.

Under pytest-xdist (``make test`` runs ``-n 2``) each worker is a process of
its own: PyTorch's intra-op pool (one thread per core) would then run two
pools on the cores and the processes the tests start a third, so each worker,
and what it starts, uses one thread (``OMP_NUM_THREADS``; a value set
outside is kept). A test that needs more sets it itself.

Markers (registered in pyproject.toml, ``--strict-markers``): ``slow``
(the longest tests: tens of seconds to minutes each), ``zoo`` (the model
zoo), ``wheel`` (builds the wheel or the sdist), ``docs`` (builds the
documentation site). ``make test`` runs them all; ``-m "not slow"`` leaves
the slow ones out for a quick round.
"""
import os
import signal
import sys
from pathlib import Path

if os.environ.get("PYTEST_XDIST_WORKER"):
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TORCHINDUCTOR_COMPILE_THREADS"):
        os.environ.setdefault(_var, "1")
    if "torch" in sys.modules:  # imported before this file (a plugin): set it there too
        sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

import pytest  # noqa: E402

from pypm_verified.engines import binding  # noqa: E402
from pypm_verified.errors import EngineUnavailable  # noqa: E402

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

EXAMPLES = str(Path(__file__).resolve().parents[1] / "examples")
if EXAMPLES not in sys.path:
    sys.path.insert(0, EXAMPLES)


@pytest.fixture(scope="session")
def lib():
    try:
        return binding.open_engine_library()
    except EngineUnavailable as e:
        if os.environ.get("PYPM_REQUIRE_LIB"):
            pytest.fail(f"PYPM_REQUIRE_LIB is set but the library is unavailable: {e}")
        pytest.skip(f"verified engine library missing: {e}")


@pytest.fixture(params=["reference", "verified", "simulated"])
def engine(request, monkeypatch):
    if request.param == "verified":
        request.getfixturevalue("lib")
    if request.param == "simulated":
        import wire
        monkeypatch.setattr(binding, "match", wire.match)
        monkeypatch.setattr(binding, "match_all", wire.match_all)
        monkeypatch.setattr(binding, "candidates", wire.candidates)
        monkeypatch.setattr(binding, "candidates_at", wire.candidates_at)
        monkeypatch.setattr(binding, "SetMatcher", wire.SetMatcher)
        return "verified"
    return request.param


@pytest.fixture(scope="module")
def base_programs():
    """BERT (3 layers), GPT-2 and LLaMA (2 layers each) at the examples' base
    size, exported to ATen (examples/models.py); one export per test module."""
    pytest.importorskip("torch")
    import models
    return {"bert": models.export("bert", "base", layers=3),
            "gpt2": models.export("gpt2", "base", layers=2),
            "llama": models.export("llama", "base", layers=2)}


#: the zoo models (bench/zoo_models.py) the readers' tests export with their
#: dynamic shapes
ZOO = ("t5", "vit", "resnet", "mixtral")


@pytest.fixture(scope="module")
def zoo_programs():
    """The :data:`ZOO` models exported with their dynamic shapes (symbolic
    sizes) and decomposed as the loader does; one export per test module."""
    torch = pytest.importorskip("torch")
    bench = str(Path(__file__).resolve().parents[1] / "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    import zoo_models
    out = {}
    for name in ZOO:
        m, kw, spec = zoo_models.build(name)
        with torch.no_grad():
            out[name] = torch.export.export(m, (), kw, dynamic_shapes=spec).run_decompositions({})
    return out


def line_of(path: str, marker: str) -> int:
    """1-based line of the unique line of ``path`` containing ``marker``."""
    with open(path) as f:
        hits = [i + 1 for i, line in enumerate(f) if marker in line]
    assert len(hits) == 1, (marker, hits)
    return hits[0]


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist with N >= 2 workers: the test order that balances
    ``--dist worksteal``. It hands each worker a contiguous 1/N of the
    collection and lets an idle worker take the back half of another's
    queue, so a long test near the end of a queue (the wheel build, the zoo:
    the alphabet puts them last) finishes alone. Here each worker's share
    starts with modules holding ``slow`` tests, spread over the shares by the
    number of slow test functions they hold, and is filled with the other
    modules (what is stolen). A module's tests stay together (its
    module-scoped fixtures are built once). Without xdist: the usual order."""
    try:
        n = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    except ValueError:
        return
    if n < 2 or not items:
        return
    modules = {}  # module -> its items, in collection order
    for it in items:
        modules.setdefault(it.nodeid.split("::")[0], []).append(it)
    weight = {m: len({getattr(i, "originalname", i.name) for i in its
                      if i.get_closest_marker("slow")}) for m, its in modules.items()}
    shares, load = [[] for _ in range(n)], [0] * n
    for m in sorted((m for m in modules if weight[m]), key=lambda m: -weight[m]):
        k = load.index(min(load))  # the longest first, each to the lightest share
        shares[k] += modules[m]
        load[k] += weight[m]
    rest = [i for m, its in modules.items() if not weight[m] for i in its]
    order, left = [], len(items)
    for k in range(n):  # worksteal's first split: len(pending) // workers_left each
        end = len(order) + left // (n - k)
        order += shares[k]
        take = max(0, end - len(order))
        order += rest[:take]
        del rest[:take]
        left = len(items) - len(order)
    items[:] = order + rest
