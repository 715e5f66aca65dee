"""Which world this process is in (one process, or a rank of an MPI job), and collective checks."""
from __future__ import annotations

import os
import sys

from ..comm.local import LocalWorld
from ..errors import UserError
from .launchers.launched import announced, check_world

# Variables that MPI launchers set in every rank's environment (MPICH/Hydra and Intel MPI,
# Open MPI, PMIx, MVAPICH, Slurm's srun with a PMI plugin).
_LAUNCHER_VARS = ("PMI_SIZE", "PMI_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK",
                  "MV2_COMM_WORLD_SIZE", "MPI_LOCALNRANKS")


def launched_by_mpi() -> bool:
    """True under mpiexec/srun, or when mpi4py.MPI was already imported (``python -m mpi4py``)."""
    return ("mpi4py.MPI" in sys.modules or any(v in os.environ for v in _LAUNCHER_VARS)
            or announced() is not None)


def default_world():
    """An :class:`~omtl_mpi.comm.mpi.MpiWorld` on COMM_WORLD under MPI with more than one rank,
    else the one-process :class:`~omtl_mpi.comm.local.LocalWorld` (no MPI initialised). Raises
    UserError on every lone copy (:func:`.launchers.launched.check_world`)."""
    if launched_by_mpi():
        from ..comm.mpi import MpiWorld
        world = MpiWorld()
        check_world(world.size)
        if world.size > 1:
            return world
    return LocalWorld()


class SetupFailed(UserError):
    """A user error found on one or more ranks, known to every rank: found before learning
    started, or by a check that every rank makes together (a model gone non-finite)."""


def collective(world, fn):
    """Run ``fn()`` on every rank; if it raised a UserError on any rank, raise SetupFailed on all,
    with every rank's lines once in rank order: every rank exits with the same code, no hang."""
    result, message = None, None
    try:
        result = fn()
    except UserError as exc:
        message = str(exc)
    lines = dict.fromkeys(line for msg in world.agree(message) for line in (msg or "").splitlines())
    if lines:
        raise SetupFailed("\n".join(lines))
    return result
