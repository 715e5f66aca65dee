"""``python -m omtl_mpi`` (and ``python -m mpi4py -m omtl_mpi`` under mpiexec), and the
``omtl-mpi`` console script (:func:`main`)."""
# first of all, before the slow imports (click, numpy, MPI): a signal from here on ends the
# command in one line (omtl_mpi.errors.stop_on_signals); the console script imports this too
from .errors import ended, stop_on_signals

stop_on_signals()

import sys  # noqa: E402  (after the handler, as everything else)


def main() -> None:
    """The command line, as ``python -m omtl_mpi`` and the ``omtl-mpi`` script start it."""
    from . import threads  # noqa: F401  (before numpy: one BLAS thread per rank)
    # a rank told `--aslr off` re-executes itself without ASLR before importing the command line
    from .runtime.launch import reexec_early
    reexec_early(sys.argv[1:])
    from .cli import main as cli_main
    try:
        cli_main()
    finally:
        ended()


if __name__ == "__main__":
    main()
