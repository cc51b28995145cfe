"""The README's Python examples run as written (in order, one namespace)."""
import re
from pathlib import Path

import pytest

import pypm_verified as pm

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_blocks_run(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 2
    src = tmp_path / "readme_examples.py"  # patterns read their source: a real file
    src.write_text("\n".join(blocks))
    monkeypatch.syspath_prepend(str(tmp_path))
    ns = {"__name__": "readme_examples"}
    if not pm.engine_available():
        pytest.skip("the README's examples use the verified engine (make lib)")
    exec(compile(src.read_text(), str(src), "exec"), ns)  # noqa: S102 -- the README's code
    assert ns["report"].firings == {"cublasrule": 1}
    assert ns["m"].bindings == {"x": ns["a"], "y": ns["b"]}
