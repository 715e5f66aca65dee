"""``python -m omtl_mpi`` (and ``python -m mpi4py -m omtl_mpi`` under mpiexec)."""
import sys

if __name__ == "__main__":
    from . import threads  # noqa: F401  (before numpy: one BLAS thread per rank)
    # a rank told `--aslr off` re-executes itself without ASLR before importing the command line
    from .runtime.launch import reexec_early
    reexec_early(sys.argv[1:])
    from .cli import main
    main()
