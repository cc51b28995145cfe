"""Saving safely: a full disk is an error, not an
abort; no temporary survives a signal at any moment of the save; the
temporaries a SIGKILL leaves are swept at the next save into that
directory; the file and its directory are fsynced around the rename. And
what must keep holding: the destination keeps its old content unless the
new one is complete, a read-only file system is refused, a symlinked
output is replaced (its target untouched)."""
import errno
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402

from pypm_verified import _atomic  # noqa: E402
from pypm_verified.cli import main  # noqa: E402
from pypm_verified.torch.pipeline import save_atomic  # noqa: E402

HERE = os.path.abspath(__file__)
ROOT = os.path.dirname(os.path.dirname(HERE))
PYDIR = os.path.join(ROOT, "python")
ENV = dict(os.environ, PYTHONPATH=PYDIR)
OLD = b"the old destination, which must survive\n"


def _model(width=128):
    """A 2-layer nn.Sequential, exported: 2 * width^2 floats of weights
    (width 128: about 130 KB saved)."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width)).eval()
    return torch.export.export(m, (torch.randn(2, width),))


@pytest.fixture(scope="module")
def ep():
    return _model()


def _temps(d):
    return sorted(n for n in os.listdir(d) if n.startswith(".pypm-tmp"))


def _load(path):
    """The saved program (CRCs checked first). torch.export.load, not
    pm.load: what is tested here is the file, not the loader's checks."""
    import zipfile
    with zipfile.ZipFile(path) as z:
        assert z.testzip() is None
    return torch.export.load(str(path))


def _same_output(path, ep):
    x = torch.randn(2, 128)
    return torch.allclose(_load(path).module()(x), ep.module()(x))


@pytest.fixture
def small_fs(tmp_path):
    """A 64 KiB tmpfs to fill (root, or CAP_SYS_ADMIN, needed to mount it)."""
    d = tmp_path / "small"
    d.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no `mount` here: cannot make a small file system to fill")
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0777", "tmpfs", str(d)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip("cannot mount a 64 KiB tmpfs to fill (needs root or CAP_SYS_ADMIN): "
                    + (p.stderr.strip() or f"mount exited {p.returncode}"))
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], capture_output=True)


# ---------------------------------------------------------- 5. disk full

def test_disk_full_is_an_oserror_and_the_destination_is_untouched(small_fs, ep):
    out = small_fs / "o.pt2"
    out.write_bytes(OLD)
    with pytest.raises(OSError) as ei:
        save_atomic(ep, str(out))
    e = ei.value
    assert e.errno == errno.ENOSPC and e.filename == str(out), e
    assert "\n" not in str(e) and "No space left on device" in str(e)
    assert out.read_bytes() == OLD
    assert _temps(small_fs) == []
    # the space is free again: a small program saves fine afterwards
    out.unlink()
    small = torch.export.export(nn.Linear(4, 4), (torch.randn(1, 4),))
    save_atomic(small, str(out))
    assert _temps(small_fs) == [] and _load(out) is not None


def test_disk_full_new_destination_stays_absent(small_fs, ep):
    out = small_fs / "new.pt2"
    with pytest.raises(OSError) as ei:
        save_atomic(ep, str(out))
    assert ei.value.errno == errno.ENOSPC
    assert os.listdir(small_fs) == []


def test_disk_full_in_the_cli_report_writer(small_fs, tmp_path):
    """The CLI's JSON/HTML writer shares the helper: a full disk is an
    OSError naming the destination, which keeps its old content."""
    from pypm_verified.cli import write_text_atomic
    rep = small_fs / "r.json"
    rep.write_bytes(OLD)
    with pytest.raises(OSError) as ei:
        write_text_atomic("x" * (200 << 10), str(rep))
    assert ei.value.errno == errno.ENOSPC and ei.value.filename == str(rep)
    assert rep.read_bytes() == OLD and _temps(small_fs) == []


@pytest.mark.slow
def test_disk_full_cli_exit_2_one_line(small_fs, tmp_path, ep):
    """End to end, in a process of its own (what aborted with SIGABRT, exit
    134): exit 2, one error line naming the output and the OS error, the
    existing output untouched, no temporary."""
    src = tmp_path / "m.pt2"
    torch.export.save(ep, str(src))
    out = small_fs / "out.pt2"
    out.write_bytes(OLD)
    p = subprocess.run([sys.executable, "-m", "pypm_verified", "rewrite", str(src), "-o",
                        str(out), "--write-unchanged", "--no-check", "-q"],
                       capture_output=True, text=True, env=ENV, timeout=300)
    assert p.returncode == 2, (p.returncode, p.stderr[-3000:])
    assert "Traceback" not in p.stderr and "terminate called" not in p.stderr, p.stderr
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, p.stderr
    assert str(out) in errors[0] and "No space left on device" in errors[0], errors[0]
    assert out.read_bytes() == OLD and _temps(small_fs) == []


def test_read_only_file_system_is_refused(tmp_path, ep):
    d = tmp_path / "ro"
    d.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(d)],
                       capture_output=True, text=True) if shutil.which("mount") else None
    if p is None or p.returncode != 0:
        pytest.skip("cannot mount a read-only tmpfs (needs root or CAP_SYS_ADMIN)")
    try:
        with pytest.raises(OSError) as ei:
            save_atomic(ep, str(d / "o.pt2"))
        assert ei.value.errno == errno.EROFS and ei.value.filename == str(d / "o.pt2")
        assert os.listdir(d) == []
    finally:
        subprocess.run(["umount", "-l", str(d)], capture_output=True)


# --------------------------------------------- 6. signals at every moment

_RACE = """
    import json, os, random, signal, sys, time
    import torch
    torch.set_num_threads(1)  # no thread pool: fork below is safe
    import torch.nn as nn
    from pypm_verified.torch.pipeline import save_atomic

    root, rounds, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 128)).eval()
    ep = torch.export.export(m, (torch.randn(2, 128),))
    ref = os.path.join(root, "ref.pt2")  # what a complete save writes (saves are deterministic)
    t = time.perf_counter()
    for _ in range(5):
        save_atomic(ep, ref)
    dt = (time.perf_counter() - t) / 5

    class Stop(Exception):
        pass

    def stop(signum, frame):
        raise Stop()

    rng = random.Random(seed)
    results = {}
    for mode in ("default", "handler", "kill"):
        results[mode] = []
        for i in range(rounds):
            d = os.path.join(root, f"{mode}{i}")
            os.mkdir(d)
            out = os.path.join(d, "o.pt2")
            if i % 2:
                with open(out, "wb") as f:
                    f.write(OLD)
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                if mode == "handler":
                    signal.signal(signal.SIGTERM, stop)
                try:
                    os.write(w, b"go")
                    os.close(w)
                    while True:
                        save_atomic(ep, out)
                except Stop:
                    os._exit(10)
                except BaseException as e:
                    import traceback
                    with open(d + ".err", "w") as f:
                        f.write("".join(traceback.format_exception(e)))
                    os._exit(12)
            os.close(w)
            os.read(r, 2)
            os.close(r)
            delay = rng.uniform(0, 3 * dt)
            time.sleep(delay)
            os.kill(pid, signal.SIGKILL if mode == "kill" else signal.SIGTERM)
            _, status = os.waitpid(pid, 0)
            results[mode].append({
                "dir": d, "old": bool(i % 2), "delay": delay,
                "signaled": os.WIFSIGNALED(status),
                "sig": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                "code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None})

    # a handler that raises, run while torch's C++ writer calls back into Python
    real_write, callback = os.write, {}
    for name in ("SIGTERM", "SIGALRM", "SIGINT"):
        sig = getattr(signal, name)
        out = os.path.join(root, name, "o.pt2")
        os.mkdir(os.path.dirname(out))
        with open(out, "wb") as f:
            f.write(b"old")
        old = signal.signal(sig, stop)
        n = [0]

        def write(fd, data):  # torch's zip writer -> Sink.write -> here
            n[0] += 1
            if n[0] == 3:
                os.kill(os.getpid(), sig)
            return real_write(fd, data)
        os.write = write
        try:
            save_atomic(ep, out)
            what = "DONE"
        except Stop:
            what = "STOPPED"
        finally:
            os.write = real_write
            signal.signal(sig, old)
        callback[name] = [what, n[0], sorted(os.listdir(os.path.dirname(out))),
                          open(out, "rb").read() == b"old"]
    print(json.dumps({"dt": dt, "ref": ref, "results": results, "callback": callback}))
"""


@pytest.fixture(scope="module")
def races(tmp_path_factory):
    if not hasattr(os, "fork"):
        pytest.skip("the signal races fork a process per save (POSIX only)")
    """16 saves per mode, each in a process forked to save in a loop and
    signalled after a random delay (0 to 3 saves' time): SIGTERM with the
    default disposition (the process dies of it), SIGTERM with a Python
    handler that raises (the CLI's case), and SIGKILL. One child process
    (one torch import) runs all 48, and then the callback cases."""
    root = tmp_path_factory.mktemp("races")
    code = "OLD = %r\n" % OLD + textwrap.dedent(_RACE)
    p = subprocess.run([sys.executable, "-c", code, str(root), "16", "0"],
                       capture_output=True, text=True, env=ENV, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout.strip().splitlines()[-1])
    with open(res["ref"], "rb") as f:
        res["ref_bytes"] = f.read()
    return res


def _intact(out, old, ref: bytes):
    """The destination is absent (none before), the old bytes, or the
    complete new archive."""
    if not os.path.exists(out):
        return not old
    with open(out, "rb") as f:
        data = f.read()
    return data == ref or (old and data == OLD)


def test_complete_saves_are_loadable(races, ep):
    assert _same_output(races["ref"], ep)


@pytest.mark.parametrize("mode", ["default", "handler"])
def test_sigterm_at_random_moments_leaves_no_temporary(races, mode):
    """Never a temporary left, never an abort, the destination old or whole;
    the process ends as SIGTERM would (default) or the handler's exception
    comes out of the save (handler: not 134, the abort)."""
    for r in races["results"][mode]:
        if mode == "default":
            assert r["signaled"] and r["sig"] == signal.SIGTERM, r
        else:
            err = r["dir"] + ".err"
            assert r["code"] == 10, (r, open(err).read() if os.path.exists(err) else "")
        assert _temps(r["dir"]) == [], r
        assert _intact(os.path.join(r["dir"], "o.pt2"), r["old"], races["ref_bytes"]), r


def test_signal_inside_the_native_writer_callback(races):
    """A handler that raises, run while torch's C++ writer is calling back
    into Python (an exception there aborts the process): it takes effect
    when torch returns; the save raises it, nothing is left, the
    destination keeps its old content. After SIGTERM/SIGINT the rest of the
    archive is dropped (no more writes); SIGALRM stands for any other
    Python handler (a timeout): the writes go on, then it raises."""
    got = races["callback"]
    assert got["SIGTERM"] == ["STOPPED", 3, ["o.pt2"], True], got
    assert got["SIGINT"] == ["STOPPED", 3, ["o.pt2"], True], got
    what, n, left, old = got["SIGALRM"]
    assert what == "STOPPED" and n > 3 and left == ["o.pt2"] and old, got


def test_sigkill_leaves_destination_intact_and_the_next_save_sweeps(races, ep):
    """SIGKILL cannot be handled: the temporary may stay, but the destination
    is old or whole, and the next save into the directory removes the
    temporary (its process is dead)."""
    left = 0
    for r in races["results"]["kill"]:
        assert r["signaled"] and r["sig"] == signal.SIGKILL, r
        out = os.path.join(r["dir"], "o.pt2")
        assert _intact(out, r["old"], races["ref_bytes"]), r
        left += len(_temps(r["dir"]))
        save_atomic(ep, out)  # the next save into that directory
        assert _temps(r["dir"]) == [], r
    assert _same_output(out, ep)
    print(f"SIGKILL left {left} temporaries in 16 runs; all swept")


def test_signal_right_after_the_temporary_is_created(tmp_path, ep, monkeypatch):
    """SIGTERM at the worst moment: the file exists, the call that created it
    has just returned (the race that left `.pypm-tmp-*` 3 times in 16). The
    handler's exception comes out of the save, the temporary is gone and no
    descriptor is leaked."""
    class Stop(Exception):
        pass

    def stop(signum, frame):
        raise Stop()

    real_open, real_mkdir = os.open, os.mkdir

    def creating(real):
        def f(p, *a, **k):
            r = real(p, *a, **k)
            if os.path.basename(os.fspath(p)).startswith(".pypm-tmp"):
                os.kill(os.getpid(), signal.SIGTERM)
            return r
        return f
    monkeypatch.setattr(os, "open", creating(real_open))
    monkeypatch.setattr(os, "mkdir", creating(real_mkdir))
    fds = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    old = signal.signal(signal.SIGTERM, stop)
    try:
        for _ in range(4):
            with pytest.raises(Stop):
                save_atomic(ep, str(tmp_path / "o.pt2"))
            assert os.listdir(tmp_path) == []
    finally:
        signal.signal(signal.SIGTERM, old)
    if fds is not None:
        assert len(os.listdir("/proc/self/fd")) == fds


# ----------------------------------------------------- stale temporaries

def _dead_pid():
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_stale_temporaries_of_dead_processes_are_swept(tmp_path, ep):
    dead = _dead_pid()
    live_child = subprocess.Popen(["sleep", "60"])
    try:
        d = tmp_path
        other_tag = "0" * 8 if _atomic.host_tag() != "0" * 8 else "1" * 8
        names = {
            "dead file": _atomic.temp_name(".pt2", pid=dead),
            "dead dir": _atomic.temp_name("", pid=dead),
            "dead json": _atomic.temp_name(".json", pid=dead),
            "this process": _atomic.temp_name(".pt2"),
            "another live process": _atomic.temp_name(".pt2", pid=live_child.pid),
            # dead pid, but written on another machine or pid namespace
            "other host": f".pypm-tmp-{dead}-{other_tag}-{'a' * 12}.pt2",
            # not exactly our pattern: never touched
            "short": f".pypm-tmp-{dead}-x",
            "old style": ".pypm-tmp-k2x9q_ab",
            "a user's file": f".pypm-tmp-{dead}-{_atomic.host_tag()}-{'a' * 12}.pt2.bak~",
        }
        for what, n in names.items():
            if what == "dead dir":
                os.mkdir(d / n)
                (d / n / "o.pt2").write_bytes(b"partial")
            else:
                (d / n).write_bytes(b"partial")
        save_atomic(ep, str(d / "o.pt2"))
        left = set(os.listdir(d))
        for what, n in names.items():
            assert (n in left) == (not what.startswith("dead")), what
        assert _same_output(d / "o.pt2", ep)
    finally:
        live_child.kill()
        live_child.wait()


def test_cli_report_writer_sweeps_too(tmp_path):
    from pypm_verified.cli import write_text_atomic
    stale = tmp_path / _atomic.temp_name(".json", pid=_dead_pid())
    stale.write_text("{")
    write_text_atomic("{}\n", str(tmp_path / "r.json"))
    assert os.listdir(tmp_path) == ["r.json"]
    assert stat.S_IMODE(os.stat(tmp_path / "r.json").st_mode) == 0o666 & ~_umask()


def _umask():
    m = os.umask(0)
    os.umask(m)
    return m


def test_temporary_name_encodes_the_pid(tmp_path, monkeypatch):
    seen = []
    real = os.open

    def spy(p, *a, **k):
        if os.path.basename(os.fspath(p)).startswith(".pypm-tmp"):
            seen.append(os.path.basename(os.fspath(p)))
        return real(p, *a, **k)
    monkeypatch.setattr(os, "open", spy)
    _atomic.write_text_atomic("x", str(tmp_path / "a.json"))
    assert len(seen) == 1
    m = _atomic.NAME_RE.match(seen[0])
    assert m and int(m.group("pid")) == os.getpid() and m.group("tag") == _atomic.host_tag()
    assert seen[0].endswith(".json")


# ------------------------------------------------------ fsync and rename

def test_file_fsynced_before_rename_and_directory_after(tmp_path, ep, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append("fsync dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "fsync file")
        return real_fsync(fd)

    def replace(a, b, *k, **kw):
        events.append("replace")
        return real_replace(a, b, *k, **kw)
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    save_atomic(ep, str(tmp_path / "o.pt2"))
    assert events == ["fsync file", "replace", "fsync dir"]


# ------------------------------------------------- what must keep holding

def test_symlinked_output_is_replaced_and_its_target_untouched(tmp_path, ep):
    target = tmp_path / "target.pt2"
    target.write_bytes(OLD)
    link = tmp_path / "link.pt2"
    link.symlink_to(target)
    save_atomic(ep, str(link))
    assert not link.is_symlink() and target.read_bytes() == OLD
    assert _same_output(link, ep) and _temps(tmp_path) == []


def test_output_equal_to_input_is_refused(tmp_path, ep, capsys):
    src = tmp_path / "m.pt2"
    torch.export.save(ep, str(src))
    before = src.read_bytes()
    for out in (src, tmp_path / "alias.pt2"):
        if out != src:
            out.symlink_to(src)
        code = main(["rewrite", str(src), "-o", str(out), "--write-unchanged", "-q"])
        err = capsys.readouterr().err
        assert code == 2 and "would overwrite the input" in err, err
    assert src.read_bytes() == before and _temps(tmp_path) == []


def test_save_adds_nothing_to_what_torch_writes(tmp_path, ep, monkeypatch):
    """The sink adds no cost of its own: the save is torch's own writes to a
    file object, each passed on as one ``os.write`` (no splitting, no
    buffering copy, no byte written twice), the same bytes, and two fsyncs
    (the file, its directory). Counted, not timed: a slow machine cannot
    fail it, a sink that writes byte by byte or copies the archive can."""
    import io

    class Counting(io.BytesIO):
        writes = 0

        def write(self, b):
            Counting.writes += 1
            return super().write(b)

    plain = Counting()
    torch.export.save(ep, plain)
    calls = {"write": 0, "bytes": 0, "fsync": 0}
    real_write, real_fsync = os.write, os.fsync

    def write(fd, data):
        calls["write"] += 1
        k = real_write(fd, data)
        calls["bytes"] += k
        return k

    def fsync(fd):
        calls["fsync"] += 1
        return real_fsync(fd)
    monkeypatch.setattr(os, "write", write)
    monkeypatch.setattr(os, "fsync", fsync)
    out = tmp_path / "o.pt2"
    save_atomic(ep, str(out))
    monkeypatch.undo()
    data = out.read_bytes()
    assert data == plain.getvalue()  # saves are deterministic
    assert calls == {"write": Counting.writes, "bytes": len(data), "fsync": 2}, calls


# ------------------------------- only a regular file is replaced

def _junk_model(tmp_path):
    """A MODEL that is not one: a path check that comes first refuses before
    it is read (and old code failed on it without writing anything)."""
    m = tmp_path / "m.pt2"
    m.write_bytes(b"not a model, never loaded\n")
    return m


def _errors(capsys):
    err = capsys.readouterr().err
    return [ln for ln in err.splitlines() if ln.startswith("error:")], err


def _fifo(tmp_path, name="fifo"):
    p = tmp_path / name
    os.mkfifo(p)
    return p


def _is_fifo(p):
    return stat.S_ISFIFO(os.stat(p).st_mode)


def test_cli_output_to_a_fifo_is_refused_exit_2(tmp_path, ep, capsys):
    """A real model, which used to be rewritten and saved over the FIFO."""
    src = tmp_path / "src.pt2"
    torch.export.save(ep, str(src))
    fifo = _fifo(tmp_path)
    code = main(["rewrite", str(src), "-o", str(fifo), "--write-unchanged", "--no-check", "-q"])
    errors, err = _errors(capsys)
    assert code == 2 and len(errors) == 1, err
    assert errors[0].startswith(f"error: -o {fifo}: not a regular file (a FIFO); "), errors[0]
    assert "--dry-run writes nothing" in errors[0]
    assert _is_fifo(fifo) and _temps(tmp_path) == []


def test_cli_output_checked_before_the_model_is_read(tmp_path, capsys):
    fifo = _fifo(tmp_path)
    code = main(["rewrite", str(_junk_model(tmp_path)), "-o", str(fifo), "-q"])
    errors, err = _errors(capsys)
    assert code == 2 and len(errors) == 1 and "not a regular file (a FIFO)" in errors[0], err
    assert _is_fifo(fifo)


def test_cli_output_symlink_to_a_fifo_is_refused(tmp_path, capsys):
    fifo = _fifo(tmp_path)
    link = tmp_path / "o.pt2"
    link.symlink_to(fifo)
    code = main(["rewrite", str(_junk_model(tmp_path)), "-o", str(link), "-q"])
    errors, err = _errors(capsys)
    assert code == 2 and len(errors) == 1, err
    assert f"-o {link}: not a regular file (a symlink to a FIFO, {fifo})" in errors[0], errors[0]
    assert link.is_symlink() and _is_fifo(fifo)


def test_cli_output_dev_null_is_refused(tmp_path, capsys):
    before = os.stat("/dev/null")
    assert stat.S_ISCHR(before.st_mode)
    # /dev/stdout: a link to fd 1, whatever it is (under pytest: a regular
    # temporary file; the link in /dev would have been replaced)
    cases = [("/dev/null", "a character device")]
    if os.path.islink("/dev/stdout") and os.readlink("/dev/stdout") == "/proc/self/fd/1":
        cases.append(("/dev/stdout", "a symlink to an open file descriptor, /proc/self/fd/1"))
    for out, kind in cases:
        code = main(["rewrite", str(_junk_model(tmp_path)), "-o", out, "-q"])
        errors, err = _errors(capsys)
        assert code == 2 and len(errors) == 1, err
        assert errors[0].startswith(f"error: -o {out}: not a regular file ({kind}); "), errors[0]
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev
    if len(cases) > 1:
        assert os.readlink("/dev/stdout") == "/proc/self/fd/1"


def _char_device(tmp_path):
    """A character device like /dev/null (1, 3) in tmp_path: root only."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("making a character device needs root")
    dev = tmp_path / "null"
    try:
        os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except OSError as e:
        pytest.skip(f"cannot mknod here: {e}")
    return dev


def test_cli_output_character_device_is_refused(tmp_path, capsys):
    dev = _char_device(tmp_path)
    code = main(["rewrite", str(_junk_model(tmp_path)), "-o", str(dev), "-q"])
    errors, err = _errors(capsys)
    assert code == 2 and len(errors) == 1, err
    assert errors[0].startswith(f"error: -o {dev}: not a regular file (a character device); ")
    assert stat.S_ISCHR(os.lstat(dev).st_mode)


@pytest.mark.parametrize("argv", [["rewrite", "--dry-run", "--report"],
                                  ["rewrite", "--dry-run", "--html"],
                                  ["check-rules", "--rules", "no_such_rules.py", "--report"],
                                  ["check-rules", "--rules", "no_such_rules.py", "--markdown"]])
def test_cli_report_html_markdown_to_a_fifo_are_refused(tmp_path, capsys, argv):
    fifo = _fifo(tmp_path)
    if argv[0] == "rewrite":
        argv = argv[:1] + [str(_junk_model(tmp_path))] + argv[1:]
    code = main(argv + [str(fifo), "-q"])
    errors, err = _errors(capsys)
    assert code == 2 and len(errors) == 1, err
    assert errors[0].startswith(f"error: {argv[-1]} {fifo}: not a regular file (a FIFO); "), \
        errors[0]
    assert _is_fifo(fifo)


def test_cli_report_on_stdout_still_works(tmp_path, ep, capsys):
    src = tmp_path / "src.pt2"
    torch.export.save(ep, str(src))
    code = main(["rewrite", str(src), "--dry-run", "--no-check", "--report", "-", "-q"])
    out = capsys.readouterr().out
    assert code == 0 and json.loads(out)["engine"]


def test_api_refuses_a_fifo_and_a_symlink_to_one(tmp_path, ep):
    fifo = _fifo(tmp_path)
    link = tmp_path / "link.pt2"
    link.symlink_to(fifo)
    called = []
    for dest in (fifo, link):
        with pytest.raises(_atomic.NotARegularFile) as ei:
            _atomic.write_atomic(str(dest), called.append)
        assert isinstance(ei.value, OSError) and ei.value.filename == str(dest)
        assert str(ei.value).startswith(f"{dest}: not a regular file (")
        with pytest.raises(OSError, match="not a regular file"):
            save_atomic(ep, str(dest))
    assert called == [] and _is_fifo(fifo) and link.is_symlink()
    assert sorted(os.listdir(tmp_path)) == ["fifo", "link.pt2"]


def test_api_refuses_a_character_device(tmp_path):
    dev = _char_device(tmp_path)
    with pytest.raises(_atomic.NotARegularFile, match=r"\(a character device\)"):
        _atomic.write_text_atomic("x", str(dev))
    assert stat.S_ISCHR(os.lstat(dev).st_mode)


def test_api_refuses_what_became_a_fifo_during_the_write(tmp_path):
    """Checked again just before the rename."""
    dest = tmp_path / "r.json"

    def write(f):
        os.mkfifo(dest)
        f.write(b"{}")
    with pytest.raises(_atomic.NotARegularFile):
        _atomic.write_atomic(str(dest), write)
    assert _is_fifo(dest) and os.listdir(tmp_path) == ["r.json"]


def test_dangling_symlink_is_still_replaced(tmp_path):
    link = tmp_path / "r.json"
    link.symlink_to(tmp_path / "nowhere")
    _atomic.write_text_atomic("{}", str(link))
    assert not link.is_symlink() and link.read_text() == "{}"


# ------------------------------------- a replaced file keeps its mode

@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _mode(p):
    return stat.S_IMODE(os.stat(p).st_mode)


def test_cli_rewrite_keeps_the_outputs_mode(tmp_path, ep, capsys, umask_022):
    src = tmp_path / "src.pt2"
    torch.export.save(ep, str(src))
    out, rep = tmp_path / "o.pt2", tmp_path / "r.json"
    for p, mode in ((out, 0o600), (rep, 0o640)):
        p.write_bytes(OLD)
        os.chmod(p, mode)
    code = main(["rewrite", str(src), "-o", str(out), "--report", str(rep),
                 "--write-unchanged", "--no-check", "-q"])
    assert code == 0, capsys.readouterr().err
    assert _mode(out) == 0o600 and _mode(rep) == 0o640
    assert _same_output(out, ep) and json.loads(rep.read_text())


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o666, 0o400])
def test_api_keeps_the_mode_of_the_file_it_replaces(tmp_path, ep, umask_022, mode):
    for name, write in (("o.pt2", lambda p: save_atomic(ep, p)),
                        ("r.json", lambda p: _atomic.write_text_atomic("{}", p))):
        p = tmp_path / name
        p.write_bytes(OLD)
        os.chmod(p, mode)
        write(str(p))
        assert _mode(p) == mode and p.read_bytes() != OLD
    assert _temps(tmp_path) == []


def test_symlinked_output_gets_its_targets_mode(tmp_path, umask_022):
    target = tmp_path / "target.json"
    target.write_bytes(OLD)
    os.chmod(target, 0o600)
    link = tmp_path / "link.json"
    link.symlink_to(target)
    _atomic.write_text_atomic("{}", str(link))
    assert not link.is_symlink() and _mode(link) == 0o600
    assert target.read_bytes() == OLD


def test_new_file_still_gets_0666_less_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        _atomic.write_text_atomic("{}", str(tmp_path / "r.json"))
    finally:
        os.umask(old)
    assert _mode(tmp_path / "r.json") == 0o640


def test_replaced_file_keeps_its_owner_and_group(tmp_path):
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("giving a file to another owner needs root")
    p = tmp_path / "r.json"
    p.write_bytes(OLD)
    os.chown(p, 12345, 23456)
    os.chmod(p, 0o640)
    _atomic.write_text_atomic("{}", str(p))
    st = os.stat(p)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (12345, 23456, 0o640)
