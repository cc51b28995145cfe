"""The command line's use of the cyclic garbage collector
(``pypm_verified.cli.heap``): the console entry freezes what is alive after
the imports and after the load; ``main`` called in-process, and
``PYPM_FREEZE_HEAP=0``, leave the collector alone; the fast exit still
flushes a file opened before a freeze."""
import gc
import json
import os
import subprocess
import sys

import pytest

from pypm_verified.cli import heap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))


def _py(code, env=ENV):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=300)


@pytest.fixture
def restore_heap():
    was = heap._enabled
    yield
    heap._enabled = was
    gc.unfreeze()
    gc.enable()


@pytest.mark.parametrize("value, on", [(None, True), ("1", True), ("0", False),
                                       ("off", False), (" No ", False)])
def test_enable_reads_the_variable(monkeypatch, restore_heap, value, on):
    if value is None:
        monkeypatch.delenv(heap.FREEZE_VAR, raising=False)
    else:
        monkeypatch.setenv(heap.FREEZE_VAR, value)
    heap.enable()
    assert heap.enabled() is on
    gc.unfreeze()
    heap.settle()
    assert (gc.get_freeze_count() > 0) is on
    gc.unfreeze()
    with heap.importing():
        assert gc.isenabled() is not on  # paused while importing, when on
        kept = [object()]  # noqa: F841 -- alive when the block ends
    assert gc.isenabled()
    assert (gc.get_freeze_count() > 0) is on


def test_importing_resumes_and_freezes_after_an_error(monkeypatch, restore_heap):
    monkeypatch.delenv(heap.FREEZE_VAR, raising=False)
    heap.enable()
    gc.unfreeze()
    with pytest.raises(ImportError):
        with heap.importing():
            import no_such_module_here  # noqa: F401
    assert gc.isenabled() and gc.get_freeze_count() > 0


def test_main_in_process_leaves_the_collector_alone():
    # main() alone (as a test or a notebook calls it) never enables the freeze
    r = _py("import gc\n"
            "from pypm_verified.cli import app, heap\n"
            "code = app.main(['example', '--list'])\n"
            "print(code, heap.enabled(), gc.get_freeze_count(), gc.isenabled())\n")
    assert r.returncode == 0, r.stderr
    code, enabled, frozen, on = r.stdout.split()[-4:]
    assert (code, enabled, frozen, on) == ("0", "False", "0", "True")


def _mlp(tmp_path):
    """The small example MLP, written by ``pypm-verified example``."""
    model = tmp_path / "mlp.pt2"
    r = subprocess.run([sys.executable, "-m", "pypm_verified", "example", "mlp", "-o",
                        str(model), "-q"], capture_output=True, text=True, env=ENV,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return model


def _frozen_in_rewrite(tmp_path, env) -> dict:
    """A rewrite of the small example MLP through the console entry, with the
    freeze count and the collector's state recorded when it ends."""
    model = _mlp(tmp_path)
    probe = tmp_path / "probe.json"
    r = _py("import atexit, gc, json, sys\n"
            "from pypm_verified.cli import app\n"
            f"atexit.register(lambda: open({str(probe)!r}, 'w').write(json.dumps("
            "{'frozen': gc.get_freeze_count(), 'enabled': gc.isenabled()})))\n"
            f"app.run(['rewrite', {str(model)!r}, '-o', {str(tmp_path / 'out.pt2')!r}, "
            "'-q', '--force'])\n", env=env)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out.pt2").stat().st_size > 0
    return json.loads(probe.read_text())


def test_the_console_entry_freezes_and_the_variable_turns_it_off(tmp_path):
    on = _frozen_in_rewrite(tmp_path, ENV)
    # frozen (torch's modules and more), and the collector running
    assert on["frozen"] > 100_000 and on["enabled"]
    off = _frozen_in_rewrite(tmp_path, dict(ENV, PYPM_FREEZE_HEAP="0"))
    assert off == {"frozen": 0, "enabled": True}


def test_a_file_opened_before_a_freeze_keeps_its_buffered_writes(tmp_path):
    # exit_now flushes the files left open, frozen ones included
    path = tmp_path / "left-open.txt"
    r = _py("import gc\n"
            "from pypm_verified.cli.app import exit_now\n"
            f"f = open({str(path)!r}, 'w')\n"
            "f.write('written before the freeze, never flushed')\n"
            "gc.freeze()\n"
            "exit_now(0)\n")
    assert r.returncode == 0, r.stderr
    assert path.read_text() == "written before the freeze, never flushed"


def test_the_freeze_spares_full_collections(tmp_path):
    # bench/bench_cli.py's count of the collector's work in one rewrite
    # (gc.callbacks in the console entry): with the freeze, the imports run
    # without collections and later full ones skip what was frozen
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    try:
        import bench_cli
    finally:
        sys.path.remove(os.path.join(ROOT, "bench"))
    model = _mlp(tmp_path)
    out = str(tmp_path / "out.pt2")
    on = bench_cli.gc_time(str(model), out, True, 1)
    off = bench_cli.gc_time(str(model), out, False, 1)
    assert off["full"] >= 3  # torch's import alone sets off several
    assert on["full"] < off["full"] and on["collections"] < off["collections"]
