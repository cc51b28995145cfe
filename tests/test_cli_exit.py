"""The command line's exit (``pypm_verified.cli.app.run``): the process ends
without the interpreter's teardown, after what a normal exit would still do
for the user: the ``atexit`` hooks, the flush of stdout and stderr, the exit
code; a command that left a non-daemon thread running, and every command
with ``PYPM_FAST_EXIT=0``, exits normally."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))


def _py(code, env=ENV):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120)


def test_exit_now_runs_the_atexit_hooks_flushes_and_keeps_the_code():
    r = _py("import atexit, sys\n"
            "from pypm_verified.cli.app import exit_now\n"
            "atexit.register(lambda: print('hook ran'))\n"
            "sys.stdout.write('buffered, no newline; ')\n"
            "sys.stderr.write('on stderr')\n"
            "exit_now(3)\n")
    assert r.returncode == 3
    assert r.stdout == "buffered, no newline; hook ran\n"
    assert r.stderr == "on stderr"


def test_a_file_left_open_keeps_its_buffered_writes(tmp_path):
    path = tmp_path / "left-open.txt"
    r = _py("from pypm_verified.cli.app import exit_now\n"
            f"f = open({str(path)!r}, 'w')\n"
            "f.write('written, never flushed nor closed')\n"
            "exit_now(0)\n")
    assert r.returncode == 0, r.stderr
    assert path.read_text() == "written, never flushed nor closed"


def test_a_command_gives_the_same_output_and_code_either_way():
    outs = []
    for fast in ("1", "0"):
        env = dict(ENV, PYPM_FAST_EXIT=fast)
        ok = subprocess.run([sys.executable, "-m", "pypm_verified", "example", "--list"],
                            capture_output=True, text=True, env=env, timeout=120)
        bad = subprocess.run([sys.executable, "-m", "pypm_verified", "rewrite",
                              os.path.join(ROOT, "no-such-model.pt2"), "-o", os.devnull + "x"],
                             capture_output=True, text=True, env=env, timeout=120)
        outs.append((ok.returncode, ok.stdout, bad.returncode, bad.stderr))
    assert outs[0] == outs[1]
    assert outs[0][0] == 0 and "mlp" in outs[0][1]
    assert outs[0][2] == 2 and "no such file" in outs[0][3]


def test_a_thread_left_running_is_waited_for():
    # run() falls back to a normal exit, which waits for non-daemon threads
    r = _py("import threading, time\n"
            "from pypm_verified.cli import app\n"
            "t = threading.Thread(target=lambda: (time.sleep(0.3), print('thread done')))\n"
            "t.start()\n"
            "app.main = lambda argv=None: 5\n"
            "app.run()\n")
    assert r.returncode == 5
    assert r.stdout == "thread done\n"
