"""paper/build.py: the paper is assembled from the sections and bench/results."""
import importlib.util
import os
from pathlib import Path

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def build(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("paper_build",
                                                  os.path.join(ROOT, "paper", "build.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "RESULTS", tmp_path)
    return mod


def test_results_nest_under_the_paper(build, tmp_path):
    (tmp_path / "x.md").write_text("# Title\n\ntext\n\n## Part\n\n```\n# not a heading\n```\n"
                                   "### Sub\n| a |\n")
    out = build.results("x", allow_missing=False).splitlines()
    assert out[0] == "**Title**"
    assert "#### Part" in out and "##### Sub" in out and "# not a heading" in out


def test_missing_results(build):
    with pytest.raises(SystemExit, match="bench/results/nope.md is missing"):
        build.results("nope", allow_missing=False)
    assert "not measured yet" in build.results("nope", allow_missing=True)
    assert "not measured yet" in build.figure("nope", allow_missing=True)


def test_every_placeholder_of_the_sections_resolves(build):
    """The checked-in sections only name results that `make bench` writes."""
    build.RESULTS = Path(ROOT) / "bench" / "results"
    text = build.build(allow_missing=False)
    assert "{{" not in text and "## 5. Evaluation" in text
