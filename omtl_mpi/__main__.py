"""``python -m omtl_mpi`` (and ``python -m mpi4py -m omtl_mpi`` under mpiexec)."""
from .cli import main

if __name__ == "__main__":
    main()
