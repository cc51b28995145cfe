"""Writing a file whole or not at all (torch-free; used by the CLI's report
writers and by :func:`pypm_verified.torch.pipeline.save_atomic`).

:func:`write_atomic` writes into a hidden temporary next to the destination
and renames it over the destination:

* The temporary is named ``.pypm-tmp-<pid>-<host>-<random>[.ext]``: the
  writing process's id, a tag of the machine and pid namespace it runs in
  (:func:`host_tag`), 12 random hex digits. Each write first removes the
  temporaries in that directory left by dead processes (SIGKILL, a crash,
  power loss): those whose name matches exactly, whose tag is this
  machine's, and whose process no longer exists (:func:`sweep_stale`). A
  live process's temporary, one written on another machine or pid namespace
  (a shared file system: its pid means nothing here) and any other name are
  left alone.
* The temporary's name is registered for removal *before* the file is
  created, and the signal handlers are installed before either, so a
  SIGTERM/SIGINT/SIGHUP at any moment removes it (:func:`cleanup_on_signal`);
  any error removes it too.
* The data goes through a file object whose ``write`` never raises
  (:class:`Sink`): the first OS error (``ENOSPC``, ``EDQUOT``, ``EIO``, ...)
  is kept, later data is dropped, and the error is raised once the writer
  has returned. This is what turns a full disk during ``torch.export.save``
  into a Python ``OSError``: torch's C++ zip writer aborts the process
  (``std::terminate``, SIGABRT) when its own file stream fails or when the
  Python ``write`` it calls raises, because its destructor then writes the
  zip directory again and throws. Given a file object that always accepts
  the bytes, torch finishes normally and the error surfaces afterwards. A
  free-space check before the write would race with other writers and
  cannot know the archive's size in advance; this does not race, and it
  catches every write error, not only ``ENOSPC``.
* The file is fsynced and closed before the rename (a close can report a
  deferred write error, e.g. on NFS), and the directory is fsynced after
  it, so after a crash the destination is the old file or the new one,
  complete.
* Only a regular file is replaced (:func:`check_destination`): a
  destination that exists and is anything else (a character or block
  device such as ``/dev/null``, a FIFO, a socket, a directory), or a
  symlink (chain) to one, or a link to an open file descriptor
  (``/dev/stdout``, ``/proc/self/fd/N``), is refused with
  :class:`NotARegularFile` (an ``OSError``) before anything is written, and
  checked again just before the rename. The rename would otherwise put a
  regular file in its place (as root: the system's ``/dev/null``).
* A new file gets the mode a plain ``open`` would give it (``0o666`` less
  the umask, the directory's default ACL applied). A replaced file keeps
  what a plain ``open`` keeps: its permission bits (setuid/setgid dropped)
  and, where permitted (root; a group the writer is in), its owner and
  group; the temporary gets them before any data is written. Extended ACLs
  and attributes are not copied. The rename replaces ``path`` itself: a
  symlink at ``path`` (to a regular file, or dangling) is replaced by the
  file, its target is not touched (its mode and owner are what the file
  keeps).
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import os
import re
import secrets
import shutil
import signal
import socket
import stat
import threading
from typing import Callable, Iterator, List, Optional

PREFIX = ".pypm-tmp-"

#: exactly the names :func:`temp_name` makes; nothing else is ever swept
NAME_RE = re.compile(r"\.pypm-tmp-(?P<pid>[1-9][0-9]{0,9})-(?P<tag>[0-9a-f]{8})-[0-9a-f]{12}"
                     r"(?:\.[A-Za-z0-9]{1,16})?\Z")


# ------------------------------------------------------------------ names

def host_tag() -> str:
    """8 hex digits naming this machine and the pid namespace pids are read
    in (host name, kernel boot id, ``/proc/self/ns/pid``): a temporary whose
    tag differs was written where this process cannot tell whether its
    writer is alive."""
    parts = [socket.gethostname()]
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            parts.append(f.read().strip())
    except OSError:
        pass
    try:
        parts.append(os.readlink("/proc/self/ns/pid"))
    except (OSError, AttributeError):
        pass
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:8]


def temp_name(suffix: str = "", pid: Optional[int] = None) -> str:
    """A fresh temporary's name (no directory): ``.pypm-tmp-<pid>-<tag>-<random><suffix>``."""
    return (f"{PREFIX}{os.getpid() if pid is None else pid}-{host_tag()}-"
            f"{secrets.token_hex(6)}{suffix}")


def _suffix(path: str) -> str:
    ext = os.path.splitext(path)[1]
    return ext if re.fullmatch(r"\.[A-Za-z0-9]{1,16}", ext) else ""


def _pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a process here (unknown counts as alive)."""
    if pid == os.getpid():
        return True
    if os.name == "nt":  # os.kill(pid, 0) is not a probe there
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError, ValueError):  # EPERM: someone else's process
        return True
    return True


def sweep_stale(directory: str) -> List[str]:
    """Remove the temporaries in ``directory`` that dead processes left
    (their name matches :data:`NAME_RE`, their tag is :func:`host_tag`, their
    pid is not a live process); returns the names removed. Never fails: a
    temporary that cannot be removed is left."""
    removed: List[str] = []
    tag = host_tag()
    try:
        entries = [e.name for e in os.scandir(directory) if e.name.startswith(PREFIX)]
    except OSError:
        return removed
    for name in entries:
        m = NAME_RE.match(name)
        if m is None or m.group("tag") != tag or _pid_alive(int(m.group("pid"))):
            continue
        p = os.path.join(directory, name)
        try:
            if stat.S_ISDIR(os.lstat(p).st_mode):
                shutil.rmtree(p)
            else:
                os.unlink(p)
            removed.append(name)
        except OSError:
            pass
    return removed


# ---------------------------------------------------------------- signals

_TERMINATING = tuple(s for s in (getattr(signal, "SIGTERM", None),
                                 getattr(signal, "SIGINT", None),
                                 getattr(signal, "SIGHUP", None)) if s is not None)


class Guard:
    """What :func:`cleanup_on_signal` yields. ``deferring()``: a block in
    which a signal whose handler would raise is recorded instead (its
    cleanup still runs at once) and acted on when the block ends; a signal
    handled inside a :class:`Sink` method (Python called back from native
    code, where an exception would abort the process) is deferred the same
    way, until :meth:`replay`. ``stopping``: a terminating signal is
    pending (writers may stop)."""

    def __init__(self):
        self.pending: List[int] = []
        self.raised: Optional[BaseException] = None  # what a handler raised
        self._defer = 0
        self._act: Optional[Callable[[int, object], None]] = None

    @property
    def stopping(self) -> bool:
        return any(s in _TERMINATING for s in self.pending)

    @contextlib.contextmanager
    def deferring(self) -> Iterator[None]:
        self._defer += 1
        try:
            yield
        finally:
            self._defer -= 1
            self.replay()

    def replay(self) -> None:
        """Act on the signals deferred so far (the handler they would have
        run: it may raise)."""
        while self.pending and self._act is not None and not self._defer:
            self._act(self.pending.pop(0), None)


def _in_callback(frame) -> bool:
    while frame is not None:
        if frame.f_code in _CALLBACK_CODES:
            return True
        frame = frame.f_back
    return False


@contextlib.contextmanager
def cleanup_on_signal(cleanup: Callable[[], None], what: str = "the save") -> Iterator[Guard]:
    """Run ``cleanup`` if SIGTERM, SIGINT or SIGHUP arrives inside the block,
    then act as the signal would have: the previous Python handler is called
    (Ctrl-C's default raises KeyboardInterrupt; a CLI's handler may raise its
    own exception; if it returns, ``InterruptedError`` is raised), and a
    default (``SIG_DFL``) disposition is re-delivered, ending the process
    with the conventional status (128 + signal number in a shell). Ignored
    signals stay ignored. Every other signal with a Python handler (e.g. a
    SIGALRM timeout) runs that handler as usual, except inside a
    :meth:`Guard.deferring` block or a :class:`Sink` callback, where it runs
    when that ends (see :class:`Guard`). The previous handlers are restored
    when the block ends. Outside the main thread (where handlers cannot be
    set, and do not run) the block runs unprotected: handlers run in the
    main thread, never inside this thread's callbacks."""
    guard = Guard()
    if threading.current_thread() is not threading.main_thread():
        yield guard
        return
    previous = {}
    for s in signal.valid_signals() if hasattr(signal, "valid_signals") else _TERMINATING:
        try:
            prev = signal.getsignal(s)
        except (ValueError, OSError):
            continue
        if s in _TERMINATING:
            if prev is None or prev == signal.SIG_IGN:
                continue  # set outside Python (cannot be restored) or ignored: leave it
        elif not callable(prev):
            continue  # only Python handlers are wrapped: they are what may raise
        previous[s] = prev

    def restore():
        for s, prev in list(previous.items()):
            try:
                signal.signal(s, prev)
            except (ValueError, OSError):
                pass
        previous.clear()

    def message(signum):
        return f"{what} was interrupted by signal {signal.Signals(signum).name}; nothing written"

    def call(prev, signum, frame):
        try:
            prev(signum, frame)
        except BaseException as e:
            guard.raised = e  # for the block's writer to raise if code inside wraps it
            raise

    def act(signum, frame):
        prev = previous.get(signum, signal.SIG_DFL)
        if signum not in _TERMINATING:
            if callable(prev):
                call(prev, signum, frame)
            return
        cleanup()
        if callable(prev):  # our handler stays until the block ends: a second
            call(prev, signum, frame)  # signal inside a callback is deferred, not raised there
            guard.raised = InterruptedError(message(signum))
            raise guard.raised
        restore()
        os.kill(os.getpid(), signum)
        raise InterruptedError(message(signum))  # still alive: the signal is blocked

    def handler(signum, frame):
        if signum in _TERMINATING:
            cleanup()  # at once, wherever we are: it only removes names
            if not callable(previous.get(signum, signal.SIG_DFL)):
                restore()
                os.kill(os.getpid(), signum)  # SIG_DFL: terminate as the signal would
        if guard._defer or _in_callback(frame):
            guard.pending.append(signum)
            return
        act(signum, frame)

    guard._act = act
    try:
        for s in list(previous):
            try:
                signal.signal(s, handler)
            except (ValueError, OSError):
                del previous[s]
        yield guard
    finally:
        guard._act = None
        restore()


# ------------------------------------------------------------------ writing

class Sink(io.RawIOBase):
    """A write-only, seekable file object over ``fd`` whose ``write`` and
    ``seek`` never raise (native writers such as torch's zip writer abort
    the process when they do): the first error is kept in ``error`` and
    everything after it is dropped; so is everything after a terminating
    signal (``guard.stopping``). The caller raises ``error`` when the writer
    returns. The fd stays the caller's."""

    def __init__(self, fd: int, guard: Optional[Guard] = None):
        super().__init__()
        self._fd = fd
        self._guard = guard
        self._pos = 0
        self.error: Optional[BaseException] = None

    def _dropping(self) -> bool:
        return self.error is not None or (self._guard is not None and self._guard.stopping)

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def write(self, b) -> int:
        n = 0
        try:
            mv = memoryview(b).cast("B")
            n = len(mv)
            off = 0
            while off < n and not self._dropping():
                k = os.write(self._fd, mv[off:])
                if k <= 0:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                off += k
            self._pos += n
        except BaseException as e:  # noqa: BLE001 -- never into the native caller
            if self.error is None:
                self.error = e
        return n

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        try:
            if not self._dropping():
                self._pos = os.lseek(self._fd, offset, whence)
            elif whence == os.SEEK_SET:
                self._pos = offset
            elif whence == os.SEEK_CUR:
                self._pos += offset
        except BaseException as e:  # noqa: BLE001
            if self.error is None:
                self.error = e
        return self._pos

    def tell(self) -> int:
        return self._pos

    def flush(self) -> None:
        pass

    def close(self) -> None:  # the fd is the caller's
        try:
            super().close()
        except BaseException:  # noqa: BLE001
            pass


_CALLBACK_CODES = frozenset(f.__code__ for f in (Sink.write, Sink.seek, Sink.tell, Sink.flush,
                                                 Sink._dropping, Sink.writable, Sink.seekable,
                                                 Sink.readable))


def _with_path(e: OSError, path: str) -> OSError:
    """``e`` naming ``path`` (the destination, not the temporary)."""
    if e.errno is None:
        return e
    return OSError(e.errno, e.strerror or os.strerror(e.errno), path)


_NO_DIR_SYNC = {errno.EINVAL, errno.EBADF, errno.EROFS, errno.EACCES, errno.EPERM,
                getattr(errno, "ENOTSUP", errno.EINVAL), getattr(errno, "EOPNOTSUPP", errno.EINVAL)}


def _fsync_dir(d: str) -> None:
    """fsync the directory ``d`` (the rename's durability); a file system
    or platform that cannot is skipped."""
    try:
        fd = os.open(d, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno not in _NO_DIR_SYNC:
            raise
    finally:
        os.close(fd)


# ----------------------------------------------------- what is replaced

class NotARegularFile(OSError):
    """The destination exists and is not a regular file, nor a symlink
    (chain) to one: :func:`write_atomic` would replace it by one. ``str``:
    ``<path>: not a regular file (<kind>); ...``; ``filename``: the path;
    ``strerror``: the text after the path; ``kind``: what it is (``"a
    FIFO"``, ``"a symlink to a character device, /dev/null"``)."""

    def __init__(self, path: str, kind: str):
        self.kind = kind
        reason = f"not a regular file ({kind}); refusing to replace it with one"
        super().__init__(f"{path}: {reason}")
        self.strerror = reason
        self.filename = path

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self):  # pickled (a worker's error) as it was made
        return type(self), (self.filename, self.kind)


_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISDIR, "a directory"))


def file_kind(mode: int) -> str:
    """What a non-regular file of ``st_mode`` ``mode`` is, in words."""
    for test, kind in _KINDS:
        if test(mode):
            return kind
    return f"file type {stat.S_IFMT(mode):#o}"


def _in_proc(p: str) -> bool:
    """Whether ``p`` is an entry of /proc (``/proc/self/fd/1``: a link to an
    open file, whatever it is)."""
    if not os.path.isdir("/proc"):
        return False
    try:
        d = os.path.realpath(os.path.dirname(os.path.abspath(p)))
    except (OSError, ValueError):
        return False
    return d == "/proc" or d.startswith("/proc/")


def check_destination(path: str) -> Optional[os.stat_result]:
    """What :func:`write_atomic` may replace at ``path``: ``None`` when
    nothing is there (or a dangling symlink, or a symlink loop: only the
    link is replaced); the ``os.stat`` of the regular file it is, or that a
    symlink (chain) at it leads to. :class:`NotARegularFile` for anything
    else: a device, a FIFO, a socket, a directory, a symlink to one, or a
    link to an open file descriptor (``/dev/stdout``, ``/dev/fd/1``,
    ``/proc/self/fd/1``: the path of a link in /proc, whatever it leads
    to). Opens nothing (opening a FIFO would block)."""
    path = os.fspath(path)
    p, hops = path, 0
    while True:
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            return None  # nothing there, or a dangling symlink
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENAMETOOLONG, errno.EACCES):
                return None  # the write itself reports what is wrong
            raise _with_path(e, path) from None
        if not stat.S_ISLNK(st.st_mode):
            break
        if _in_proc(p):
            raise NotARegularFile(path, "a link to an open file descriptor" if p == path
                                  else f"a symlink to an open file descriptor, {p}")
        hops += 1
        if hops > 40:
            return None  # a loop: os.stat says ELOOP, the link alone is replaced
        try:
            target = os.readlink(p)
        except OSError:
            return None
        p = os.path.join(os.path.dirname(p), target)
    if stat.S_ISREG(st.st_mode):
        return st
    kind = file_kind(st.st_mode)
    raise NotARegularFile(path, kind if p == path else f"a symlink to {kind}, {p}")


_NO_CHOWN = {errno.EPERM, errno.EACCES, errno.EINVAL, errno.EROFS,
             getattr(errno, "ENOTSUP", errno.EPERM), getattr(errno, "EOPNOTSUPP", errno.EPERM)}


def _keep_owner_and_mode(fd: int, tmp: str, old: os.stat_result) -> None:
    """Give the temporary ``fd`` the owner and group (where permitted:
    EPERM is ignored) and the permission bits (setuid and setgid dropped)
    of the file it replaces, ``old``: what a plain ``open`` of it keeps."""
    if hasattr(os, "fchown"):
        st = os.fstat(fd)
        uid = old.st_uid if old.st_uid != st.st_uid else -1
        gid = old.st_gid if old.st_gid != st.st_gid else -1
        tries = [(uid, gid)] + ([(-1, gid)] if uid != -1 and gid != -1 else [])
        for u, g in tries if uid != -1 or gid != -1 else ():
            try:  # then the group alone: one of ours, though the owner is not us
                os.fchown(fd, u, g)
                break
            except OSError as e:
                if e.errno not in _NO_CHOWN:
                    raise
    want = stat.S_IMODE(old.st_mode) & 0o777
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, want)
        else:
            os.chmod(tmp, want)
    except OSError as e:
        # a file system without modes (vfat, some FUSE): fine, unless the
        # temporary would be readable by more than the file it replaces
        if e.errno not in _NO_CHOWN or stat.S_IMODE(os.fstat(fd).st_mode) & ~want & 0o777:
            raise


def write_atomic(path: str, write: Callable[[Sink], None], what: Optional[str] = None) -> None:
    """Call ``write(f)`` with a binary file object ``f`` (a :class:`Sink`)
    over a temporary next to ``path``, then rename it over ``path``:
    ``path`` is written whole or not at all, nothing is left behind (see
    the module docstring). An OS error while writing is raised as an
    ``OSError`` naming ``path`` after ``write`` returns; on a signal, as
    :func:`cleanup_on_signal` says. ``what`` names the work in messages.
    A destination that is not a regular file (a device, a FIFO, ...) is
    refused with :class:`NotARegularFile` before anything is written
    (:func:`check_destination`); a replaced file's mode and owner are kept
    (see the module docstring)."""
    path = os.fspath(path)
    old = check_destination(path)
    d = os.path.dirname(os.path.abspath(path))
    sweep_stale(d)
    tmp = os.path.join(d, temp_name(_suffix(path)))
    names: List[str] = []
    fds: List[int] = []

    def cleanup():  # from a signal handler too: only removes the name
        for t in names:
            try:
                os.unlink(t)
            except OSError:
                pass

    try:
        with cleanup_on_signal(cleanup, what or f"writing {path}") as guard:
            try:
                with guard.deferring():  # registered before created; the fd kept
                    names.append(tmp)
                    try:
                        fds.append(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                                           | getattr(os, "O_BINARY", 0),
                                           0o666 if old is None
                                           else stat.S_IMODE(old.st_mode) & 0o777))
                    except OSError as e:
                        names.remove(tmp)  # not created: never remove what is not ours
                        raise _with_path(e, path) from None
                if old is not None:  # before any data is in it
                    try:
                        _keep_owner_and_mode(fds[0], tmp, old)
                    except OSError as e:
                        raise _with_path(e, path) from None
                sink = Sink(fds[0], guard)
                try:
                    write(sink)
                except BaseException as e:
                    # a handler's exception that the writer wrapped in its own
                    # (torch.export.save turns an Exception into SerializeError)
                    if guard.raised is not None and e is not guard.raised:
                        raise guard.raised from e
                    raise
                finally:
                    sink.close()
                    guard.replay()  # a signal deferred in a callback acts now
                if guard.raised is not None:  # a handler raised and the writer swallowed it
                    raise guard.raised
                if sink.error is not None:
                    if isinstance(sink.error, OSError):
                        raise _with_path(sink.error, path) from None
                    raise sink.error
                try:
                    os.fsync(fds[0])
                    os.close(fds.pop())  # a close may report a deferred write error
                    check_destination(path)  # again: it may have been replaced meanwhile
                    os.replace(tmp, path)
                except OSError as e:
                    raise _with_path(e, path) from None
                names.clear()
            finally:
                guard.replay()
        _fsync_dir(d)
    finally:
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass
        cleanup()


def write_bytes_atomic(data: bytes, path: str) -> None:
    """``data`` to ``path`` with :func:`write_atomic`."""
    write_atomic(path, lambda f: f.write(data))


def write_text_atomic(text: str, path: str, encoding: str = "utf-8") -> None:
    """``text`` to ``path`` with :func:`write_atomic`."""
    write_bytes_atomic(text.encode(encoding), path)


__all__ = ["write_atomic", "write_bytes_atomic", "write_text_atomic", "cleanup_on_signal",
           "sweep_stale", "temp_name", "host_tag", "Sink", "Guard", "NAME_RE", "PREFIX",
           "check_destination", "NotARegularFile", "file_kind"]
