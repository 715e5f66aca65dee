"""``omtl-mpi run --np P``: start the same command on P ranks through a launcher
(:mod:`omtl_mpi.runtime.launchers`), in a process group of its own that a signal stops whole."""
from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys

from ..atomic import remove_stale
from ..errors import STOPPING
# with --aslr off, ranks sharing cores re-start without address randomisation before MPI starts
from ..fast.addresses import for_launch, reexec_early, reexec_if_sharing  # noqa: F401


class Stopped(Exception):
    """This process received one of :data:`~omtl_mpi.errors.STOPPING` while a job it started
    was running: passed on to the whole MPI job."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def stop_group(proc: subprocess.Popen, first: int = signal.SIGTERM, grace: float = 3.0) -> None:
    """Stop ``proc`` and everything it started (its own process group: mpiexec and its ranks):
    ``first``, then SIGKILL if the group is still there after ``grace`` seconds; waits for it."""
    for sig, wait in ((first, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    # the leader may be gone while ranks of its group are still ending: make sure of them
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def launch(launcher, n_ranks: int, args: list[str], before=None, echo=None, outputs=()) -> int:
    """Run ``omtl-mpi ARGS`` on ``n_ranks`` ranks started by ``launcher`` (mpiexec, srun);
    return its exit code, 128 + the signal's number where SIGINT, SIGTERM or SIGHUP stopped it.

    The launcher runs in a process group of its own, to which such a signal is passed on and
    waited for (SIGKILL after a grace period): stopping the command stops every rank, and no
    rank writes a file afterwards (docs/RELIABILITY.md). ``before`` runs in the launcher's
    process before it starts (what the ranks inherit, such as
    :func:`omtl_mpi.fast.addresses.for_launch`'s personality); ``echo(line)`` says that the job
    was stopped and, before it starts, what the launcher overrides (Open MPI run as root).
    ``outputs`` (results, checkpoint): the temporary files the ranks left of them are removed
    once the job has ended (mpiexec may kill a rank before it removes its own).
    """
    # one line of ours within seconds, where the launcher would fail later in its own words
    launcher.ready()
    try:
        return _launch(launcher, n_ranks, args, before, echo)
    finally:
        remove_stale([o for o in outputs if o], grace=3.0)


def _launch(launcher, n_ranks: int, args: list[str], before, echo) -> int:
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    added, notices = launcher.environment(env)
    env.update(added)
    # overriding a safety refusal is said, not done silently (stderr: --json stays clean)
    if echo is not None:
        for line in notices:
            echo(f"notice: {line}")
    command = launcher.command(n_ranks, args)
    with signals_raise():
        try:
            proc = subprocess.Popen(command, env=env, preexec_fn=before,
                                    start_new_session=True, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE)
        except Stopped as stop:
            return 128 + stop.signum
        relays = [_Relay(proc.stdout, sys.stdout), _Relay(proc.stderr, sys.stderr, _MPICH_ABORT)]
        try:
            code = proc.wait()
        except Stopped as stop:
            for relay in relays:        # mpiexec's banner about the ranks it is told to stop
                relay.quiet = True
            # SIGHUP kills MPICH's mpiexec, which then kills the ranks before they can remove
            # their temporary files; SIGTERM it passes on to them (as srun does), and waits
            stop_group(proc, first=signal.SIGTERM if stop.signum == signal.SIGHUP else stop.signum)
            for relay in relays:
                relay.join()
            if echo is not None:
                echo(f"error: stopped by {stop}: every rank of the job has ended")
            return 128 + stop.signum
        for relay in relays:
            relay.join()
        return code


# MPICH's own line about an MPI_Abort: the job's error line just before it says what happened
_MPICH_ABORT = re.compile(rb"^Abort\(\d+\) on node \S+ \(rank \d+ in comm \d+\): application called MPI_Abort")


class _Relay:
    """Copies one of mpiexec's output streams to this process's as it comes, leaving out the
    lines ``drop`` matches (MPICH's line about an MPI_Abort: a job stopped by an error ends in
    its one line, as in one process) and, once :attr:`quiet` (stopped on purpose), all."""

    def __init__(self, pipe, stream, drop=None):
        import threading
        self.pipe, self.drop, self.quiet = pipe, drop, False
        buffer = getattr(stream, "buffer", None)        # the bytes as they come, else decoded
        self.sink, self.decode = (stream, True) if buffer is None else (buffer, False)
        self.thread = threading.Thread(target=self._copy, daemon=True)
        self.thread.start()

    def _write(self, data: bytes) -> None:
        if self.quiet or (self.drop is not None and self.drop.match(data)):
            return
        try:
            self.sink.write(data.decode(errors="replace") if self.decode else data)
            self.sink.flush()
        except (OSError, ValueError):   # the reader went away (`| head`): keep draining, quietly
            self.quiet = True

    def _copy(self) -> None:
        fd, pending = self.pipe.fileno(), b""
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            # whole lines (a progress bar's '\r' ends one too); a partial line at once unless
            # it may be the start of the line left out
            *lines, pending = re.split(rb"(?<=[\r\n])", pending + chunk)
            for line in lines:
                self._write(line)
            if pending and (self.drop is None or not b"Abort(".startswith(pending[:6])):
                self._write(pending)
                pending = b""
        if pending:
            self._write(pending)
        self.pipe.close()

    def join(self) -> None:
        self.thread.join(timeout=10)


@contextlib.contextmanager
def signals_raise(signals=STOPPING):
    """Within this context, the ``signals`` raise :class:`Stopped` in the main thread, the
    first one only (the previous handlers come back on exit). Elsewhere than the main thread:
    no change."""
    import threading
    fired = []

    def _raise(signum, frame):
        # only the first: a second Ctrl-C must not interrupt the stopping of the job
        if not fired:
            fired.append(signum)
            raise Stopped(signum)
    previous = ({sig: signal.signal(sig, _raise) for sig in signals}
                if threading.current_thread() is threading.main_thread() else {})
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
