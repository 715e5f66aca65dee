"""omtl-mpi: online multi-task relationship learning (C-ADMM, D-ADMM and baselines) on MPI.

The package is layered (each layer imports only from the ones below it; tests/test_layers.py)::

    cli                  what users type and read (click, matplotlib)
    sweep, report        grids of runs as separate jobs; tables and figures from them
    runtime              roles by rank, the round loop, timing, results file
      fast               the speed plug-in (address layout): imported by the runtime only
    comm                 how arrays move: in-process | MPI star | MPI graph
    options, config      one table of run options; the validated description of a run
    algorithms           pure numpy math of one round, per role
    data, topology       task streams and graphs (pure data)
"""
import os as _os

# Every array here is small (K x d, K x K): BLAS threads only add jitter and, with more MPI
# ranks than cores (the normal case on a laptop), starve the other ranks.  A user who wants
# threads can still set these variables before starting Python.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    _os.environ.setdefault(_var, "1")

__version__ = "0.1.0"
