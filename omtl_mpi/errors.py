"""Errors that reach the user as clear lines and a non-zero exit code, and the signals that
stop a command (:func:`stop_on_signals`)."""
import re
import signal
import sys
from contextlib import suppress

# C0 and C1 control characters, DEL and the Unicode line and paragraph separators: any of them
# in a value shown to the user (a path typed with $'...', a file name from a folder) would break
# its line in two, or move the terminal's cursor, or be invisible
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def printable(text) -> str:
    """``str(text)`` on one line, every control character written as a Python escape
    (``\\n``, ``\\x1b``): only they change, so applying it twice changes nothing more."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], str(text))


# values the user gave that hold a newline (a path typed as $'no\nsuch/x.h5'), as they were
# checked: wherever a message quotes one, it is shown escaped, not as two lines
_MULTILINE: dict = {}
_MULTILINE_KEPT = 64


def one_line(value):
    """Note ``value`` (a str the user gave: a path, an option's value) so that every
    :class:`UserError` that quotes it shows it escaped, on its line, not broken in two by a
    newline it holds; return it unchanged (anything but a str with a newline is passed
    through). :func:`omtl_mpi.paths.as_path` notes every path it checks and the command line
    every word of its own; the last 64 such values are kept (docs/RELIABILITY.md)."""
    if isinstance(value, str) and "\n" in value:
        _MULTILINE[value] = None
        while len(_MULTILINE) > _MULTILINE_KEPT:         # the oldest go first
            del _MULTILINE[next(iter(_MULTILINE))]
    return value


class UserError(ValueError):
    """A problem with the user's input (file, option, world size, an argument of the Python API).

    The one exception class a caller of the package catches for bad input: a ValueError, as
    Python and scikit-learn raise for a bad argument value (an ``except ValueError`` around
    code that may raise it must let it through first).

    The message is shown prefixed with ``error:``, one line per problem; the process exits
    with :attr:`exit_code` (2, like click's usage errors). Nothing is half-written. Within a
    line every control character is shown escaped (:func:`printable`): a newline separates
    problems, one inside a value noted by :func:`one_line` is escaped.
    """

    exit_code = 2

    def __init__(self, message: str):
        text = str(message)
        for value in sorted((v for v in _MULTILINE if v in text), key=len, reverse=True):
            text = text.replace(value, printable(value))
        lines = [" ".join(printable(line).split()) for line in text.split("\n")]
        super().__init__("\n".join(line for line in lines if line))

    @property
    def lines(self) -> list[str]:
        return str(self).splitlines()


class DataError(UserError):
    """A data file is malformed, or its contents are not a valid multi-task stream."""


class ConfigError(UserError):
    """A hyper-parameter or option value is invalid."""


# What a user, a terminal or a scheduler sends to stop a command
STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

# what the handler of stop_on_signals runs before the process ends (omtl_mpi.atomic registers
# the removal of the temporary files being written)
_AT_STOP: list = []
_stopping = False


def at_stop(fn):
    """Register ``fn()`` to be run when a signal stops the command (:func:`stop_on_signals`),
    before the process ends: the cleanup a ``finally`` would do. It must be quick, must not
    raise (what it raises is ignored) and returns True when it had something to clean up;
    returns ``fn`` (usable as a decorator)."""
    _AT_STOP.append(fn)
    return fn


def _stop(signum, frame):
    """The handler of :data:`STOPPING`: run the :func:`at_stop` cleanups, print one line and end
    the process with 128 + the signal's number, at once. It raises nothing (one raised where
    Python cannot raise, a garbage collector's callback, is swallowed and the command would
    run on) and waits for no MPI; a second signal while it runs is ignored
    (docs/RELIABILITY.md)."""
    global _stopping
    if _stopping:
        return
    _stopping = True
    import os
    cleaned = False
    for fn in _AT_STOP:
        with suppress(Exception):       # the others and the exit still run
            cleaned = bool(fn()) or cleaned
    # ``[rank R] `` in an MPI job of more than one rank (asked of MPI only if it was started)
    rank, mpi = "", sys.modules.get("mpi4py.MPI")
    with suppress(Exception):           # the line goes out without it
        if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized() \
                and mpi.COMM_WORLD.Get_size() > 1:
            rank = f"[rank {mpi.COMM_WORLD.Get_rank()}] "
    if rank and not cleaned:
        # mpiexec ends the whole job as soon as one rank exits: a rank with nothing to clean
        # up leaves the one writing a file (rank 0, which got the same signal) a moment to
        # remove it first
        import time
        time.sleep(0.5)
    with suppress(Exception):           # interrupted inside a write: let it go
        sys.stdout.flush()              # what the command printed so far (a progress line)
    # straight to the descriptor: the signal may have come in the middle of a write to stderr
    line = f"error: {rank}interrupted by {signal.Signals(signum).name}\n"
    with suppress(OSError):
        os.write(2, line.encode(errors="replace"))
    os._exit(128 + signum)


def ended() -> None:
    """The command's work is done (its outputs written, its last line printed): from here a
    signal stops nothing, and is ignored. Python's exit would set the default action back for
    the signals with a handler (it leaves ignored ones ignored), so a signal in its last
    milliseconds would end the process silently, with -15 for its status."""
    for sig in STOPPING:
        if signal.getsignal(sig) is _stop:
            signal.signal(sig, signal.SIG_IGN)


def stop_on_signals() -> None:
    """Make SIGINT, SIGTERM and SIGHUP end the command line, and each of its MPI ranks, with
    the temporary files being written removed, one line (``error: interrupted by SIGTERM``)
    and exit code 128 + the signal's number (the Python API leaves a program's signals alone).
    A signal ignored at start (``nohup``) or handled by the program stays so. Called first
    thing by the entry points, before the heavy imports; a command that acts on a signal itself
    (``run --np``, a sweep) sets its own handler meanwhile (``runtime.launch.signals_raise``).
    """
    import threading
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in STOPPING:
        if signal.getsignal(sig) in (signal.SIG_DFL, signal.default_int_handler):
            signal.signal(sig, _stop)
