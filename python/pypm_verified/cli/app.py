"""``main``: parse, run the subcommand, map its outcome to an exit code."""
from __future__ import annotations

import logging
import os
import signal
import threading
import traceback
import _thread
import sys
from typing import Optional, Sequence

from .exitcodes import (EXIT_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_RULE,
                        EXIT_TERMINATED, RuleFailure, Terminated, UsageError)
from .logs import log, logging_to_stderr
from ..errors import first_line
from .parsing import COMMANDS, parse, parser
from .text import printable


#: SIGTERM's state: "seen" once the handler ran, "handled" once main caught it
_term = {"seen": False, "handled": False}

#: seconds between the repeats of an unhandled SIGTERM
TERM_REPEAT_S = 2.0


def _on_sigterm(signum, frame):
    if not _term["seen"]:
        _term["seen"] = True
        threading.Thread(target=_repeat_sigterm, name="sigterm-repeat", daemon=True).start()
    raise Terminated()


def _repeat_sigterm():
    """Signal the main thread again until it has caught the
    :class:`Terminated`: Python drops an exception raised while it runs a
    ``__del__`` or a weakref callback (it prints "Exception ignored"), so
    the handler's one may be lost when the signal lands there."""
    import time
    while not _term["handled"]:
        time.sleep(TERM_REPEAT_S)
        if not _term["handled"]:
            _thread.interrupt_main(signal.SIGTERM)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command line; returns the exit code (never raises SystemExit)."""
    try:
        args = parse(parser(), argv)
    except SystemExit as e:  # --help, --version, or a usage error (one line, code 2)
        return e.code if isinstance(e.code, int) else (EXIT_OK if e.code is None else EXIT_INPUT)
    _, run = COMMANDS[args.command]
    state = {"written": []}
    old = None
    try:
        old = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread
        pass
    with logging_to_stderr(getattr(args, "verbosity", 0)) as log:
        try:
            return run(args, state)
        except UsageError as e:
            log.error("%s", e)
            _tb(e)
            return EXIT_INPUT
        except RuleFailure as e:
            log.error("%s; nothing written", e)
            _tb(e)
            return EXIT_RULE
        except KeyboardInterrupt as e:
            _term["handled"] = True
            done = state["written"]
            what = "nothing written" if not done else f"wrote only {', '.join(done)}"
            term = isinstance(e, Terminated)
            log.error("%s; %s", "terminated" if term else "interrupted", what,
                      extra={"plain": True})
            return EXIT_TERMINATED if term else EXIT_INTERRUPTED
        except BrokenPipeError:  # `| head`: the reader left; nothing more to say
            _quiet_broken_pipe()
            return 128 + signal.SIGPIPE  # 141, as a process SIGPIPE ended
        except Exception as e:  # noqa: BLE001 -- a bug: never exit 1, which is a verdict
            done = state["written"]
            log.error("internal error (a bug, not a verdict on the model or the rules): "
                      "%s: %s; %s; PYPM_TRACEBACK=1 prints the traceback", type(e).__name__,
                      first_line(e), f"wrote {', '.join(done)}" if done else "nothing written")
            _tb(e, own=True)
            return EXIT_INTERNAL
        finally:
            _term["handled"] = True
            if old is not None:
                signal.signal(signal.SIGTERM, old)


def _quiet_broken_pipe() -> None:
    """After the reader of stdout left: point stdout at /dev/null, so that
    Python's flush at exit does not complain again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def _tb(e: BaseException, own: bool = False) -> None:
    """The traceback behind an error (``e``'s own with ``own``, else the
    exception it was raised from), with ``PYPM_TRACEBACK=1`` or ``-v``;
    inert (:func:`.text.printable`: its messages may quote a file)."""
    if os.environ.get("PYPM_TRACEBACK") or log.isEnabledFor(logging.DEBUG):
        tb = "".join(traceback.format_exception(e if own else e.__context__ or e))
        sys.stderr.write(printable(tb, lines=True))
        sys.stderr.flush()


#: set to 0 (or false, no, off): the command line ends as any Python program,
#: with the interpreter's teardown (see :func:`run`)
FAST_EXIT_VAR = "PYPM_FAST_EXIT"


def run(argv: Optional[Sequence[str]] = None) -> None:
    """The console entry (``pypm-verified``, ``python -m pypm_verified``):
    :func:`main`, then the process exits with its code.

    With torch loaded, the interpreter's teardown (freeing some 350,000
    objects one by one, then torch's own destructors) takes 0.3-0.7 s after
    the command is done; nothing in it is the command's. So the exit is
    made as a normal one would be, minus the teardown: the ``atexit`` hooks
    (weakref finalizers, temporary directories, profilers and coverage),
    logging's handlers, every file still open for writing flushed, then
    stdout and stderr, then ``os._exit``.
    A command that left a non-daemon thread running exits normally (Python
    waits for it); so does every command with ``PYPM_FAST_EXIT=0``."""
    from . import heap
    heap.enable()  # the process is the command's: long-lived objects frozen (heap.py)
    code = main(argv)
    if os.environ.get(FAST_EXIT_VAR, "1").strip().lower() in ("0", "false", "no", "off") or \
            any(t is not threading.main_thread() and not t.daemon and t.is_alive()
                for t in threading.enumerate()):
        sys.exit(code)
    exit_now(code)


def exit_now(code: int) -> None:
    """End the process with ``code`` after the ``atexit`` hooks, logging's
    handlers and a flush of stdout and stderr, without the interpreter's
    teardown (:func:`run`)."""
    import atexit
    import gc
    import io
    try:
        atexit._run_exitfuncs()  # what Py_Finalize runs first; it prints a hook's error
    finally:
        logging.shutdown()
        # files still open (a rules module's, say) lose no buffered write:
        # the teardown would have flushed them when it freed them (the
        # frozen objects too, heap.settle: get_objects lists the others)
        gc.unfreeze()
        for obj in gc.get_objects():
            if issubclass(type(obj), io.IOBase) and obj is not sys.stdout \
                    and obj is not sys.stderr:
                try:
                    if not obj.closed and obj.writable():
                        obj.flush()
                except Exception:  # noqa: BLE001 -- a file that cannot be flushed now
                    pass
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BrokenPipeError:  # the reader left: as main's _quiet_broken_pipe
                _quiet_broken_pipe()
            except (OSError, ValueError, AttributeError):
                pass
        os._exit(code)
