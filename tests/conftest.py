"""Shared fixtures.

``lib``: the verified engine's shared library. Tests that need it skip when it
is missing, unless ``PYPM_REQUIRE_LIB`` is set (as CI does), in which case
they fail: they can never silently skip there.

``engine``: parametrizes a test over both engines ("reference" always,
"verified" through ``lib``).
"""
import os

import pytest

from pypm_verified import binding
from pypm_verified.errors import EngineUnavailable


@pytest.fixture(scope="session")
def lib():
    try:
        return binding.load()
    except EngineUnavailable as e:
        if os.environ.get("PYPM_REQUIRE_LIB"):
            pytest.fail(f"PYPM_REQUIRE_LIB is set but the library is unavailable: {e}")
        pytest.skip(f"verified engine library missing: {e}")


@pytest.fixture(params=["reference", "verified"])
def engine(request):
    if request.param == "verified":
        request.getfixturevalue("lib")
    return request.param


def line_of(path: str, marker: str) -> int:
    """1-based line of the unique line of ``path`` containing ``marker``."""
    with open(path) as f:
        hits = [i + 1 for i, line in enumerate(f) if marker in line]
    assert len(hits) == 1, (marker, hits)
    return hits[0]
