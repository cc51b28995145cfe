"""``check-rules --jobs N`` and ``--ray``: the checks run as tasks of
:mod:`pypm_verified.parallel` (local worker processes, or a Ray cluster): one
per rule (the instance search), then one per structure to prove; the report
is the serial run's; a worker that dies mid-task is replaced, the task run
again and the retry counted in the report.

Three cheap rules (quick mode): the library's ``linear_nt`` and two of a
file written here: one whose body ends its process (``os._exit``) the first
time it runs without a marker file, creating the marker (the serial run has
the marker, the parallel runs do not, so one worker dies in each), and one
over an operator the file declares.
"""
import json
import re
import sys
import textwrap

import pytest

pytest.importorskip("torch")

from pypm_verified.cli import main  # noqa: E402

CRASH_ONCE = """\
    import os

    import torch

    import pypm_verified as pm
    from pypm_verified.torch.ops import Neg, Relu

    MARKER = {marker!r}

    @pm.pattern
    def ReluRelu(x):
        return Relu(Relu(x))

    @pm.rule(ReluRelu)
    def relu_once(x):
        if not os.path.exists(MARKER):  # the worker dies, once
            open(MARKER, "w").close()
            os._exit(3)
        return Relu(x)

    # an operator of this file: a proof task loads the instances found by
    # the rule's task, naming it by its name and place
    @pm.op(torch=[torch.ops.aten.hardswish.default])
    def Hardswish(x):
        return 1

    @pm.pattern
    def NegNegHardswish(x):
        return Neg(Neg(Hardswish(x)))

    @pm.rule(NegNegHardswish)
    def hardswish_negneg(x):
        return Hardswish(x)
    """


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("parallel")
    marker = d / "crashed"
    rules = d / "crash_once_rules.py"
    rules.write_text(textwrap.dedent(CRASH_ONCE.format(marker=str(marker))))
    return d, marker, rules


def _check_rules(setup, *extra):
    d, marker, rules = setup
    report = d / f"report{len(list(d.glob('report*.json')))}.json"
    code = main(["check-rules", "--rules", "transpose", "--rules", str(rules), "--fast",
                 "--report", str(report), "-q", *extra])
    assert code == 0
    return json.loads(report.read_text())


def _rules(doc):
    """The per-rule results, but their times (and the loaded file's module
    name, numbered by how many rule files this process loaded before)."""
    out = []
    for r in doc["rules"]:
        r = {k: v for k, v in r.items() if k != "seconds"}
        r["module"] = re.sub(r"_\d+$", "", r["module"])
        out.append(r)
    return out


def _run(doc):
    """The executor entry but the task times."""
    run = dict(doc["executor"])
    run["tasks"] = {k: v for k, v in run["tasks"].items() if k != "seconds"}
    return run


def _tasks(doc):
    """One task per rule, then one per structure a tested rule fired on."""
    return {"rules": len(doc["rules"]),
            "structures": sum(r["symbolic"].get("structures", 0) for r in doc["rules"])}


@pytest.fixture(scope="module")
def serial(setup):
    setup[1].write_text("")  # no crash in this process
    doc = _check_rules(setup)
    assert [r["rule"] for r in doc["rules"]] == ["linear_nt", "relu_once", "hardswish_negneg"]
    assert all(r["status"] in ("proved", "tested") for r in doc["rules"])
    assert all(r["symbolic"]["structures"] >= 1 for r in doc["rules"])
    assert _run(doc) == {"kind": "serial", "workers": 1, "retries": 0, "tasks": _tasks(doc)}
    times = doc["executor"]["tasks"]["seconds"]
    assert set(times) == {"rules", "structures"}
    assert all(0 < t["median"] <= t["max"] <= t["total"] for t in times.values())
    return doc


@pytest.mark.slow
def test_local_workers_same_report_and_a_dead_worker_retried(setup, serial, capsys):
    setup[1].unlink()
    doc = _check_rules(setup, "--jobs", "2")
    assert setup[1].exists()  # the rule did end a worker
    assert _rules(doc) == _rules(serial)
    assert doc["executor"]["kind"] == "local" and doc["executor"]["workers"] == 2
    assert _run(doc)["tasks"] == _tasks(serial)
    # the broken pool's unfinished tasks are all submitted again: the dead one at least
    assert doc["executor"]["retries"] >= 1
    assert "retried after a worker died" in capsys.readouterr().out


@pytest.mark.slow
def test_ray_same_report_and_a_dead_worker_retried(setup, serial, capsys):
    ray = pytest.importorskip("ray", reason="the 'cluster' extra (Ray) is not installed")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        setup[1].unlink()
        doc = _check_rules(setup, "--ray", "auto")
    finally:
        ray.shutdown()
    assert setup[1].exists()
    assert _rules(doc) == _rules(serial)
    assert _run(doc) == {"kind": "ray", "workers": 2, "retries": 1, "tasks": _tasks(serial)}


def test_ray_not_installed_is_exit_2_naming_the_extra(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails
    code = main(["check-rules", "--rules", "transpose", "--fast", "--ray", "auto"])
    err = capsys.readouterr().err
    assert code == 2 and "Ray is not installed" in err and "[cluster]" in err


def test_jobs_and_ray_are_exclusive(capsys):
    code = main(["check-rules", "--jobs", "2", "--ray", "auto"])
    assert code == 2 and "not allowed with argument --jobs" in capsys.readouterr().err
