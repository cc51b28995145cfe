"""The verified engine's memory budget: a pattern whose
backtracking grows with every step (left recursion, ``Loop(x) = Loop(x) ‖
Erf(x)``: about 100 bytes a step, gigabytes at the default fuel) is stopped
when the search's heap growth passes ``PYPM_MEMORY_MB`` (default 192); the
answer is undecided (:class:`pm.errors.MemoryBudget`, an
:class:`OutOfFuel`), and the engine answers later calls in the same process
normally. Run in subprocesses so that peak memory is the search's own."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = r"""
import json, resource, sys, time
import pypm_verified as pm
from pypm_verified.errors import MemoryBudget, OutOfFuel

@pm.op
def Erf(x): return 1

@pm.pattern
def Loop(x):
    return Loop(x)

@pm.pattern
def Loop(x):
    return Erf(x)

@pm.pattern
def E(x):
    return Erf(x)

g = pm.Graph()
a = g.input("a")
e = g.apply(Erf, a)
out = {}
for call in sys.argv[1].split(","):
    t = time.time()
    try:
        if call == "match":
            pm.match(Loop, e)
        else:
            pm.match_all([Loop], g)
        out[call] = "answered"
    except MemoryBudget as ex:
        out[call] = "budget: " + str(ex)
    except OutOfFuel as ex:
        out[call] = "fuel: " + str(ex)
    out[call + "_s"] = time.time() - t
out["after"] = {k: v.id for k, v in pm.match(E, e).bindings.items()}
out["after_all"] = len(pm.match_all([E], g))
# the peak of this process's own memory: VmHWM (ru_maxrss survives exec,
# so it would report the forking test runner's peak)
try:
    hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0]
    out["maxrss_mb"] = int(hwm.split()[1]) / 1024
except (OSError, IndexError):
    out["maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""


def run(calls, mb=None):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    env.pop("PYPM_MEMORY_MB", None)
    if mb is not None:
        env["PYPM_MEMORY_MB"] = str(mb)
    r = subprocess.run([sys.executable, "-c", SCRIPT, calls], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(autouse=True)
def _needs_lib(lib):
    pass


def test_left_recursion_stops_at_the_budget_and_the_engine_recovers():
    out = run("match,match_all", mb=48)
    for call in ("match", "match_all"):
        assert out[call].startswith("budget: "), out
        assert "memory budget (48 MB" in out[call] and "PYPM_MEMORY_MB" in out[call]
    # the same process: the engine answers normally afterwards
    assert out["after"] == {"x": 0} and out["after_all"] == 1
    # 48 MB of heap growth (plus the interpreter, ~20 MB, and the GC's slack)
    assert out["maxrss_mb"] < 48 * 2 + 60, out


def test_default_budget_bounds_the_process():
    """Default budget: the whole process stays under 320 MB (measured about
    225 MB; without the budget the same search took 7 GB)."""
    out = run("match")
    assert out["match"].startswith("budget: ") and "(192 MB" in out["match"], out
    assert out["maxrss_mb"] < 320, out
    assert out["after"] == {"x": 0}


RULES = '''
import pypm_verified as pm
import torch
aten = torch.ops.aten

@pm.op(torch=[aten.erf.default])
def Erf(x): return 1

@pm.pattern
def Loop(x):
    return Loop(x)

@pm.pattern
def Loop(x):
    return Erf(x)

@pm.rule(Loop)
def keep(x):
    return None
'''


def test_non_descending_rules_are_warned_about_when_loaded(tmp_path):
    """A user's rules file with a pattern outside the descending class gets
    ``pm.termination``'s reason as a warning when loaded (API and CLI); the
    library's own patterns are all descending."""
    import warnings

    from pypm_verified import cli, library
    from pypm_verified.errors import PatternWarning
    path = tmp_path / "looprules.py"
    path.write_text(RULES)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pats = library.load_rules(str(path))
    msgs = [str(w.message) for w in caught if issubclass(w.category, PatternWarning)]
    assert [p.name for p in pats] == ["Loop"]
    assert len(msgs) == 1 and "Loop: not descending" in msgs[0] and "Loop -> Loop" in msgs[0]
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    r = subprocess.run([sys.executable, "-c", "import sys; from pypm_verified import cli; "
                        "cli.load_rule_spec(sys.argv[1])", str(path)],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stderr.count("not descending") == 1, r.stderr
    assert r.stderr.startswith(f"warning: --rules {path}: Loop: not descending")
    for p in library.default_patterns(library.MODULES):
        if not p.is_multi:
            assert p.termination().descending, p.name
