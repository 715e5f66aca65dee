"""One BLAS thread per process, for the command line and its ranks (imported before numpy).

Every array here is small (K x d, K x K): BLAS threads only add jitter and, with more MPI
ranks than cores (the normal case on a laptop), starve the other ranks. The command line sets
this before numpy is first imported; importing the package as a library changes nothing (a
program that runs many ranks sets the variables itself). A user who wants threads can still
set them before starting the command.
"""
import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
