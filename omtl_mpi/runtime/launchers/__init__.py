"""How the ranks of a run are started: one interface, one module per launcher (docs/DESIGN.md,
*Launchers*): ``local`` (:mod:`.local`, mpiexec on this machine: ``run --np P`` and a sweep's
runs by default), ``slurm`` (:mod:`.slurm`, srun for one run, ``sbatch --array`` jobs for
sweeps) and ``launched`` (:mod:`.launched`, nothing to start: this process is a rank already).

A launcher has a ``name``, ``batch``, ``ready()`` (refuses, within seconds and before anything
starts, a launcher that cannot start a job now), ``command(n_ranks, args)`` (the command line
that runs ``omtl-mpi ARGS`` on ``n_ranks`` ranks, made without starting anything) and
``environment(env)`` (the variables it needs added, with the notices that announce them); a
batch launcher also ``array_script``, ``submit``, ``states`` and ``element_id``
(:class:`.slurm.Slurm`). Adding a launcher is one module with a ``LAUNCHER`` object and one
line in :data:`MODULES`.
"""
from __future__ import annotations

import importlib

from ...errors import ConfigError

# name -> module (inside this package) holding its LAUNCHER
MODULES = {"local": "local", "slurm": "slurm", "launched": "launched"}


def get(name: str):
    """The launcher called ``name``; ConfigError for one that is not in :data:`MODULES`."""
    if name not in MODULES:
        raise ConfigError(f"unknown launcher {name!r}; choose one of {', '.join(MODULES)}")
    return importlib.import_module(f"{__name__}.{MODULES[name]}").LAUNCHER
