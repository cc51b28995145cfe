"""Shared fixtures.

``lib``: the verified engine's shared library. Tests that need it skip when it
is missing, unless ``PYPM_REQUIRE_LIB`` is set (as CI does), in which case
they fail: they can never silently skip there.

``engine``: parametrizes a test over both engines ("reference" always,
"verified" through ``lib``) and over "simulated": the verified engine's code
path (``api`` -> ``binding.match`` / ``match_all`` / ``candidates``) answered
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
"""
import os
import signal
import sys
from pathlib import Path

import pytest

from pypm_verified.engines import binding
from pypm_verified.errors import EngineUnavailable

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

EXAMPLES = str(Path(__file__).resolve().parents[1] / "examples")
if EXAMPLES not in sys.path:
    sys.path.insert(0, EXAMPLES)


@pytest.fixture(scope="session")
def lib():
    try:
        return binding.open_library()
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


def line_of(path: str, marker: str) -> int:
    """1-based line of the unique line of ``path`` containing ``marker``."""
    with open(path) as f:
        hits = [i + 1 for i, line in enumerate(f) if marker in line]
    assert len(hits) == 1, (marker, hits)
    return hits[0]
