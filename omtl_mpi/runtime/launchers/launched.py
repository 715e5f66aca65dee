"""The "already launched" mode: this process is one rank of a job that mpiexec or srun started
(or the only process), and nothing is to be started. :func:`check_world` stops lone copies
(processes that each see an MPI world of one rank, and would each run the whole job and write
the same ``--out``: srun under Slurm's ``MpiDefault=none``, or an mpiexec of another MPI than
mpi4py's) before they read data, with one line naming the fix (docs/DESIGN.md, *Launchers*).
"""
from __future__ import annotations

import os

from ...errors import UserError

# The number of processes an MPI launcher started, by what it sets in every one of them: Open
# MPI's mpirun, MPICH's Hydra and Slurm's PMI-2 plugin, MVAPICH. Said, they are what counts:
# Hydra and mpirun start their proxies on a Slurm cluster as a job step of one task per node.
_MPI_SIZE_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE")


def _count(environ, name: str) -> int | None:
    value = environ.get(name, "").strip()
    return int(value) if value.isdigit() else None


def announced(environ=None) -> tuple[int, str] | None:
    """(processes, "srun" or "mpiexec"): how many processes this process's launcher says it
    started, when more than one; None otherwise. Slurm's step says it with SLURM_STEP_NUM_TASKS
    (SLURM_NTASKS inside a step of an older srun; alone, it is set in a batch script too)."""
    environ = os.environ if environ is None else environ
    said = next((n for n in map(lambda v: _count(environ, v), _MPI_SIZE_VARS) if n is not None), None)
    step = _count(environ, "SLURM_STEP_NUM_TASKS")
    if step is None and "SLURM_STEP_ID" in environ:
        step = _count(environ, "SLURM_NTASKS")
    started = said if said is not None else step
    if started is None or started < 2:
        return None
    return started, "srun" if step == started else "mpiexec"


def srun_plugin(library: str) -> str:
    """The srun ``--mpi`` plugin that starts ranks of the MPI library ``library`` (as
    ``MPI.Get_library_version()`` names it): pmix for Open MPI 5, pmi2 for MPICH and its kin."""
    return "pmix" if "open mpi" in library.lower() else "pmi2"


def lone_copies_message(started: int, who: str, library: str) -> str:
    """The one line that stops a lone copy: what happened and the fix for this MPI."""
    name = "Open MPI" if "open mpi" in library.lower() else "MPICH" if "mpich" in library.lower() else "this MPI"
    if who == "srun":
        fix = (f"start the ranks with 'srun --mpi={srun_plugin(library)}' (this mpi4py uses {name}), "
               "or with mpiexec inside the allocation")
    else:
        fix = (f"start it with the mpiexec of the MPI that mpi4py uses ({name}: "
               "'python -m mpi4py --mpi-library' names it), or with srun --mpi=pmi2/pmix")
    return (f"{who} started {started} copies of this command, but MPI sees each as a job of one "
            "rank: every copy would run the whole job alone and write the same files; " + fix)


def check_world(size: int, environ=None) -> None:
    """Refuse to go on when the launcher started several processes and MPI's world (``size``
    ranks, MPI initialised) has one: a UserError of one line, how many copies and the launch
    command that joins them into one job."""
    said = announced(environ)
    if said is None or size != 1:
        return
    from mpi4py import MPI
    raise UserError(lone_copies_message(said[0], said[1], MPI.Get_library_version()))


def check_not_copied(environ=None) -> None:
    """``run --np`` starts its own ranks: refuse to be one of several copies of a job step
    (``srun -n 4 omtl-mpi run --np 4`` would start four jobs of four ranks)."""
    said = announced(environ)
    if said is not None:
        raise UserError(f"--np starts the ranks itself, but {said[1]} started {said[0]} copies "
                        "of this command: run 'omtl-mpi run --np P' once (in the batch script, "
                        "or 'srun -n 1'), or leave out --np and start the ranks with srun "
                        "--mpi=pmi2/pmix or mpiexec")


class Launched:
    """No launching: the ranks are already there."""

    name = "launched"
    batch = False

    def ready(self) -> None:
        """Refuse, as :meth:`command` does: there is nothing this launcher could start."""
        self.command(0, [])

    def command(self, n_ranks: int, args: list[str]) -> list[str]:
        raise UserError("the 'launched' launcher starts nothing: leave out --np and start the "
                        "ranks yourself (mpiexec, or srun --mpi=pmi2/pmix)")

    def environment(self, env) -> tuple[dict, list[str]]:
        return {}, []


LAUNCHER = Launched()
