"""One executor for independent, deterministic tasks: check-rules' rules,
the zoo's jobs, the differential tests' batches.

:func:`run_tasks` calls ``fn(*args)`` for each ``args`` of a list and
returns the results in the list's order, whatever order they finished in
(so a merge is the serial run's), with a progress bar (rich) over the tasks.
Three ways to run them, chosen by :func:`executor`:

* **serial** (``jobs=1``, no Ray): in this process, one after the other;
* **local** (``jobs=N``): ``concurrent.futures.ProcessPoolExecutor`` with N
  worker processes (started with ``spawn``: a fresh interpreter, no forked
  torch threads). A worker that dies breaks the pool: it is rebuilt and the
  tasks that had not finished are submitted again, each at most once more;
* **ray** (``ray="auto"``: start or join a local cluster; ``ray=ADDRESS``:
  join that cluster): one Ray task each, retried once by Ray if its worker
  dies (``max_retries=1``). Needs the ``cluster`` extra
  (``pip install 'pypm_verified[cluster]' -c requirements/constraints.txt``);
  the code, the rule files and the inputs must be at the same paths on
  every node.

A task's exception is re-raised here as :class:`TaskFailed`, naming the
task; ``Executor.retries`` counts the tasks run again after a worker died.
No scheduler of our own: the pool or Ray decides where a task runs.

    with executor(jobs=2) as ex:
        squares = ex.run(pow, [(i, 2) for i in range(10)], labels=None)
"""
from __future__ import annotations

import os
import sys
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, List, Optional, Sequence

__all__ = ["Executor", "TaskFailed", "RayUnavailable", "executor", "run_command",
           "CLUSTER_EXTRA"]

#: how to install Ray, for the error when it is missing
CLUSTER_EXTRA = ("pip install -e '.[cluster]' -c requirements/constraints.txt "
                 "(the 'cluster' extra: Ray)")


class TaskFailed(RuntimeError):
    """A task raised (``label``: which; ``cause``: its exception's text), or
    its worker died again after its one retry."""

    def __init__(self, label: str, cause: str):
        super().__init__(f"{label}: {cause}")
        self.label, self.cause = label, cause


class RayUnavailable(RuntimeError):
    """Ray was asked for but is not installed."""


def _progress(enabled: bool):
    """A rich progress bar on stderr (tasks done / total, elapsed, ETA)."""
    from rich.console import Console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                   console=Console(file=sys.stderr), disable=not enabled, transient=False)
    return bar


class Executor:
    """Runs tasks (see the module docstring); made by :func:`executor`.
    ``kind``: "serial", "local" or "ray"; ``workers``: processes (local) or
    the cluster's CPUs (ray); ``retries``: tasks run again after their worker
    died, over every :meth:`run`."""

    def __init__(self, kind: str, workers: int, address: Optional[str] = None,
                 sys_path: Sequence[str] = ()):
        self.kind, self.workers, self.address = kind, workers, address
        self.sys_path = [os.path.abspath(p) for p in sys_path]
        self.retries = 0
        self._pool: Optional[ProcessPoolExecutor] = None
        self._ray_started = False

    # -- lifecycle
    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        self.close(now=exc_type is not None)

    def close(self, now: bool = False) -> None:
        """Stop the worker processes (``now``: without waiting for the tasks
        they run; a Ray cluster this process started goes down with them,
        one it joined stays up)."""
        if self._pool is not None:
            if now:  # an error or Ctrl-C: the running tasks are not waited for
                for p in list((getattr(self._pool, "_processes", None) or {}).values()):
                    p.terminate()
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        if self._ray_started:
            import ray
            ray.shutdown()
            self._ray_started = False

    def describe(self) -> dict:
        """What the report says of the run: kind, workers, retries."""
        return {"kind": self.kind, "workers": self.workers, "retries": self.retries}

    # -- running
    def run(self, fn: Callable, tasks: Sequence[tuple], labels: Optional[Sequence[str]] = None,
            progress: bool = True, what: str = "tasks") -> List[Any]:
        """``[fn(*args) for args in tasks]``, run on this executor; ``labels``
        name the tasks in errors; ``progress``: the bar on stderr, described
        by ``what``. ``fn`` and the arguments must pickle (a module-level
        function)."""
        labels = list(labels) if labels is not None else [f"task {i}" for i in
                                                            range(len(tasks))]
        bar = _progress(progress)
        with bar:
            tid = bar.add_task(what, total=len(tasks))
            step = lambda: bar.advance(tid)  # noqa: E731
            if self.kind == "serial":
                return self._run_serial(fn, tasks, labels, step)
            if self.kind == "local":
                return self._run_local(fn, tasks, labels, step)
            return self._run_ray(fn, tasks, labels, step)

    def _run_serial(self, fn, tasks, labels, step) -> List[Any]:
        out = []
        for args, label in zip(tasks, labels):
            try:
                out.append(fn(*args))
            except Exception as e:  # noqa: BLE001 -- named and re-raised
                raise TaskFailed(label, f"{type(e).__name__}: {e}") from e
            step()
        return out

    def _new_pool(self) -> ProcessPoolExecutor:
        import multiprocessing as mp
        return ProcessPoolExecutor(max_workers=self.workers, mp_context=mp.get_context("spawn"),
                                   initializer=_add_sys_path, initargs=(self.sys_path,))

    def _run_local(self, fn, tasks, labels, step) -> List[Any]:
        results: dict = {}
        tries = [0] * len(tasks)
        todo = list(range(len(tasks)))
        while todo:
            if self._pool is None:
                self._pool = self._new_pool()
            futs = {}
            for i in todo:
                tries[i] += 1
                futs[self._pool.submit(fn, *tasks[i])] = i
            broken: List[int] = []
            pending = set(futs)
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in done:
                    i = futs[f]
                    try:
                        results[i] = f.result()
                    except BrokenProcessPool:
                        broken.append(i)
                        continue
                    except Exception as e:  # noqa: BLE001 -- named and re-raised
                        raise TaskFailed(labels[i], f"{type(e).__name__}: {e}") from e
                    step()
            if broken:  # a worker died: every unfinished task goes to a new pool
                self._pool.shutdown(wait=True, cancel_futures=True)
                self._pool = None
                again = [i for i in sorted(broken) if tries[i] >= 2]
                if again:
                    raise TaskFailed(labels[again[0]], "its worker process died, twice")
                self.retries += len(broken)
            todo = sorted(broken)
        return [results[i] for i in range(len(tasks))]

    def _run_ray(self, fn, tasks, labels, step) -> List[Any]:
        import ray
        from ray import cloudpickle
        payload = cloudpickle.dumps(fn)
        attempts = _attempts_actor()
        call = ray.remote(max_retries=1)(_ray_call)
        refs = {call.remote(self.sys_path, payload, args, i, attempts): i
                for i, args in enumerate(tasks)}
        results: dict = {}
        pending = list(refs)
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                for r in done:
                    i = refs[r]
                    try:
                        results[i] = ray.get(r)
                    except ray.exceptions.RayTaskError as e:
                        cause = e.cause if getattr(e, "cause", None) is not None else e
                        raise TaskFailed(labels[i], f"{type(cause).__name__}: "
                                         f"{cause}") from None
                    except ray.exceptions.WorkerCrashedError:
                        raise TaskFailed(labels[i], "its worker process died, twice") from None
                    step()
            self.retries += ray.get(attempts.retries.remote())
        finally:
            for r in pending:
                ray.cancel(r, force=True)
            ray.kill(attempts)
        return [results[i] for i in range(len(tasks))]


def _add_sys_path(paths: Sequence[str]) -> None:
    for p in reversed(paths):
        if p not in sys.path:
            sys.path.insert(0, p)


def _ray_call(paths, payload: bytes, args: tuple, index: int, attempts):
    """A Ray task: the task's function (pickled by the driver, loaded once the
    paths it may import from are on ``sys.path``) on ``args``; tells
    ``attempts`` it started, so a rerun after a dead worker is counted."""
    import ray
    from ray import cloudpickle
    ray.get(attempts.start.remote(index))
    _add_sys_path(paths)
    return cloudpickle.loads(payload)(*args)


_ATTEMPTS = []  # the Ray actor class counting task starts, made on first use


def _attempts_actor():
    """A new actor counting the starts of each task (a start after the
    first is a retry)."""
    import ray
    if not _ATTEMPTS:
        class Attempts:
            def __init__(self):
                self.starts: dict = {}

            def start(self, index: int) -> None:
                self.starts[index] = self.starts.get(index, 0) + 1

            def retries(self) -> int:
                return sum(n - 1 for n in self.starts.values())

        _ATTEMPTS.append(ray.remote(num_cpus=0)(Attempts))
    return _ATTEMPTS[0].remote()


def run_command(cmd: Sequence[str], env: Optional[dict] = None, cwd: Optional[str] = None,
                tail: int = 4000) -> tuple:
    """A task that runs a command (e.g. a seeded batch of a test):
    ``(exit code, the last tail characters of its stdout and stderr)``;
    ``env``: variables set on top of the worker's environment."""
    import subprocess
    p = subprocess.run(list(cmd), cwd=cwd, env={**os.environ, **(env or {})}, text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return p.returncode, p.stdout[-tail:]


def executor(jobs: int = 1, ray: Optional[str] = None, sys_path: Sequence[str] = ()
             ) -> Executor:
    """The executor for ``jobs`` local processes (1: serial, in this
    process) or, with ``ray`` ("auto" or a cluster's address), for a Ray
    cluster (``jobs`` is then ignored: the cluster's CPUs decide).
    ``sys_path``: folders a worker needs on ``sys.path`` to load the tasks'
    functions (e.g. a script's own folder). :class:`RayUnavailable` when
    Ray is asked for and not installed."""
    if ray is None:
        return Executor("serial" if jobs <= 1 else "local", max(1, jobs), sys_path=sys_path)
    try:
        import ray as _ray
    except ImportError:
        raise RayUnavailable(f"Ray is not installed; {CLUSTER_EXTRA}") from None
    ex = Executor("ray", 0, address=ray, sys_path=sys_path)
    if not _ray.is_initialized():
        # "auto": the cluster RAY_ADDRESS or `ray start` named, else a new local one
        _ray.init(address=None if ray == "auto" else ray,
                  include_dashboard=False, configure_logging=False)
        ex._ray_started = True
    ex.workers = int(_ray.cluster_resources().get("CPU", 0))
    return ex
