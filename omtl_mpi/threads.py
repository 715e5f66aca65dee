"""One BLAS thread per process, for the command line and its ranks (imported before numpy).

Every array here is small (K x d, K x K): BLAS threads only add jitter and, with more MPI ranks
than cores, starve the other ranks. Only the command line imports this; a library user's or an
explicit setting of the variables stands.
"""
import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
