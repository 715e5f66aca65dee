"""How the ranks of a run are started: one interface, one module per launcher.

``local`` (:mod:`.local`)
    the ``mpiexec`` next to this Python or on PATH: ``omtl-mpi run --np P`` on a laptop, and
    every run of ``omtl-mpi sweep`` by default, each a subprocess of this machine.
``slurm`` (:mod:`.slurm`)
    ``srun --mpi=PLUGIN -n P`` for one run inside an allocation, and, for sweeps, ``sbatch
    --array`` jobs whose elements run one run each through that same srun command.
``launched`` (:mod:`.launched`)
    nothing to start: this process is one rank of a job that mpiexec or srun started (or the
    only process). It checks that the launcher and MPI agree on how many ranks there are.

A launcher is an object with a ``name``, ``ready()`` (refuses, within seconds and before
anything is started, a launcher that cannot start a job now: no mpiexec, no srun, Slurm's
controller down), ``command(n_ranks, args)`` (the command line that runs ``omtl-mpi ARGS`` on
``n_ranks`` ranks; made without starting anything, so that a dry run prints it anywhere) and
``environment(env)`` (the variables that command needs added to ``env``, with the notices that
announce them). A launcher that submits batch jobs (``batch = True``) also writes array
scripts, submits them and says which of its jobs are still queued or running
(:class:`.slurm.Slurm`). Adding a launcher is one module with a ``LAUNCHER`` object and one
line in :data:`MODULES`.
"""
from __future__ import annotations

import importlib

from ...errors import ConfigError

# name -> module (inside this package) holding its LAUNCHER
MODULES = {"local": "local", "slurm": "slurm", "launched": "launched"}


def get(name: str):
    """The launcher called ``name``.

    Raises
    ------
    ConfigError
        For a name that is not one of :data:`MODULES`.
    """
    if name not in MODULES:
        raise ConfigError(f"unknown launcher {name!r}; choose one of {', '.join(MODULES)}")
    return importlib.import_module(f"{__name__}.{MODULES[name]}").LAUNCHER
