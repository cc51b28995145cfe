"""The reference engine's memory: a search keeps its state on a trail (one
store per search, bindings undone on backtracking), so a match at depth d
takes O(d) memory; a search whose choice points grow without bound (left
recursion) stops at the memory budget (``PYPM_MEMORY_MB``, as the verified
engine) with :class:`pm.errors.MemoryBudget`. Each check runs in a
subprocess under an address-space limit, so that the peak (``VmHWM``) is the
search's own and a regression cannot take the machine."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = r"""
import json, resource, sys, time
lim = int(sys.argv[3]) << 20
resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
import pypm_verified as pm
import paper_ops as po
from pypm_verified.engines import reference
from pypm_verified.errors import MemoryBudget, OutOfFuel

@pm.pattern
def Loop(x):
    return Loop(x)

@pm.pattern
def Loop(x):
    return po.Relu(x)

def hwm_mb():
    with open("/proc/self/status") as f:
        return int([l for l in f if l.startswith("VmHWM:")][0].split()[1]) / 1024

what, depth = sys.argv[1], int(sys.argv[2])
g = pm.Graph()
x = po.MatMul(g.input("a"), g.input("b"))
for _ in range(depth):
    x = po.Relu(x)
prog = (po.PwChain if what == "chain" else Loop).program
out = {"base_mb": hwm_mb()}
t = time.time()
try:
    if what == "loop-api":  # through the public entry point
        m = pm.match(Loop, x, engine="reference")
        out["answer"] = None if m is None else "match"
    else:
        sol = reference.first_solution(prog, x)
        out["answer"] = None if sol is None else {"x": sol[0][0].id, "a": sol[0][1].id,
                                                  "b": sol[0][2].id}
except MemoryBudget as e:
    out["answer"] = "budget: " + str(e)
except OutOfFuel as e:
    out["answer"] = "fuel: " + str(e)
except MemoryError:
    out["answer"] = "MemoryError"
out["s"] = time.time() - t
out["peak_mb"] = hwm_mb()
print(json.dumps(out))
"""


def run(what, depth, limit_mb=2048, mb=None):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.join(ROOT, "python"), os.path.join(ROOT, "examples")]))
    env.pop("PYPM_MEMORY_MB", None)
    if mb is not None:
        env["PYPM_MEMORY_MB"] = str(mb)
    r = subprocess.run([sys.executable, "-c", SCRIPT, what, str(depth), str(limit_mb)],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_chain_match_memory_is_linear_in_depth():
    """PwChain over 3000 pointwise ops: the match binds x at the top and a, b
    at the MatMul's inputs in about 15 MB of growth (measured 13 MB; copying
    the substitution at every binding took 346 MB here, 3.7 GB at depth
    10000)."""
    out = run("chain", 3000)
    assert out["answer"] == {"x": 3002, "a": 0, "b": 1}, out
    assert out["peak_mb"] - out["base_mb"] < 60, out


def test_left_recursion_stops_at_the_memory_budget():
    """``Loop(x) = Loop(x) ‖ Relu(x)``: a choice point per call, at the
    default fuel (2^26 steps) tens of GB; with ``PYPM_MEMORY_MB=16`` the
    search stops undecided within the budget (measured 30 MB of process)."""
    out = run("loop", 1, limit_mb=1024, mb=16)
    assert out["answer"].startswith("budget: "), out
    assert "memory budget (16 MB" in out["answer"] and "PYPM_MEMORY_MB" in out["answer"], out
    assert out["peak_mb"] < 16 * 2 + 60, out


def test_pm_match_reports_the_budget_not_fuel():
    """``pm.match(..., engine="reference")`` says the memory budget stopped
    the search (a MemoryBudget, still an OutOfFuel), not "ran out of fuel"."""
    out = run("loop-api", 1, limit_mb=1024, mb=16)
    assert out["answer"].startswith("budget: "), out


def test_the_default_budget_still_answers_deep_chains():
    """The default budget (192 MB) leaves room for PwChain at depth 10000
    (about 46 MB): the budget stops runaway searches, not deep ones."""
    out = run("chain", 10000)
    assert out["answer"] == {"x": 10002, "a": 0, "b": 1}, out
    assert out["peak_mb"] - out["base_mb"] < 150, out
