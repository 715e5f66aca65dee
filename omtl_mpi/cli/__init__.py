"""The ``omtl-mpi`` command line: the group of commands (one module each: run, data, topo, algos,
sweep, report; :mod:`.table` makes the option table's options) and the entry point."""
from .. import threads  # noqa: F401  (before numpy: one BLAS thread per rank)

import os
import sys
import time
import traceback

import click

from .. import __version__
from ..errors import ConfigError, UserError, one_line, printable


def _mpi_rank_size():
    """(rank, size) if this process is a rank of an MPI job, else (0, 1)."""
    from ..runtime.world import launched_by_mpi
    if not launched_by_mpi():
        return 0, 1
    from mpi4py import MPI as mpi
    if not mpi.Is_initialized() or mpi.Is_finalized():
        return 0, 1
    return mpi.COMM_WORLD.Get_rank(), mpi.COMM_WORLD.Get_size()


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="omtl-mpi")
def cli():
    """Online multi-task relationship learning on MPI (Li et al., Neurocomputing 2025).

    \b
    Typical session:
      omtl-mpi data synth -o tasks.h5               # the paper's synthetic family, 5 x 10000
      omtl-mpi data info tasks.h5                   # tasks, dims, samples, positive ratio
      omtl-mpi run --data tasks.h5 --np 6 --out run.h5
      python -c "import h5py; print(h5py.File('run.h5')['metrics/mean_curve'][-1])"
      omtl-mpi sweep scripts/paper.toml --out results/paper   # grids of runs, one index
      omtl-mpi report results/paper                 # the paper's tables and figures

    Every run writes its configuration, error curves, final model, learned task relationship
    matrix (Omega) and per-rank timings to one HDF5 file (--out). Under mpiexec, rank 0 is
    the C-ADMM server and ranks 1..P-1 hold contiguous blocks of tasks.
    """


from .algos import algos  # noqa: E402  (the commands, each in its module)
from .data import data  # noqa: E402
from .report import report  # noqa: E402
from .run import EPILOG_RUN, run  # noqa: E402,F401
from .sweep import sweep, sweep_element  # noqa: E402
from .topo import topo  # noqa: E402

for _command in (run, data, topo, algos, sweep, sweep_element, report):
    cli.add_command(_command)


def main(argv=None) -> None:
    """Console entry point: user errors as one line per problem and exit 2, never a hang.
    Under MPI, an error found on every rank (SetupFailed) is printed once by rank 0 and every
    rank exits 2; an error or crash on a single rank aborts the whole job at once."""
    from ..runtime.world import SetupFailed
    for word in sys.argv[1:] if argv is None else argv:
        one_line(word)                  # a message quoting it keeps it on one line
    try:
        code = cli.main(args=argv, prog_name="omtl-mpi", standalone_mode=False)
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except click.UsageError as exc:
        # one line, as for every other bad input: what is wrong, and where the options are
        where = exc.ctx.command_path if exc.ctx is not None else "omtl-mpi"
        _error(f"{exc.format_message()} (see '{where} --help')")
        code = exc.exit_code
    except click.ClickException as exc:
        _error(exc.format_message())
        code = exc.exit_code
    except click.Abort:
        click.echo("aborted", err=True)
        code = 130
    except (SetupFailed, ConfigError) as exc:
        # The same error on every rank (options are the same everywhere; SetupFailed was
        # agreed on): rank 0 prints it once and every rank leaves cleanly with the same code.
        rank, size = _mpi_rank_size()
        if rank == 0:
            for line in exc.lines:
                _error(line)
        _exit_all(size, exc.exit_code)
        code = exc.exit_code
    except UserError as exc:
        code = _fail_this_rank(exc.lines, exc.exit_code)
    except Exception as exc:
        # A crash (or --fail-at) on one rank: one line naming the rank and the cause, then the
        # whole job ends at once instead of leaving the other ranks waiting for this one.
        from ..runtime.faults import InjectedFailure
        if isinstance(exc, OSError) and exc.strerror:
            # what the system refused (a full disk, a file that vanished, a permission): the
            # file and the reason, as one line, on any rank
            line = f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
            code = _fail_this_rank([line], 2, _details())
        elif _mpi_rank_size()[1] == 1 and not isinstance(exc, (InjectedFailure, MemoryError)):
            raise
        else:
            code = _fail_this_rank([f"{type(exc).__name__}: {exc}; ending the job"], 1, _details())
    sys.exit(code if isinstance(code, int) else 0)


def _error(line: str) -> None:
    """Print one error line: every line of an error goes out here, its control characters
    escaped (:func:`omtl_mpi.errors.printable`), so that a path holding a newline or an
    escape sequence cannot break the line in two or move the terminal's cursor."""
    click.echo(f"error: {printable(line)}", err=True)


def _details() -> str:
    """The traceback, when OMTL_MPI_TRACEBACK=1 asks for it (for bug reports)."""
    return traceback.format_exc() if os.environ.get("OMTL_MPI_TRACEBACK") else ""


def _fail_this_rank(lines, code: int, details: str = "") -> int:
    """An error known to this rank only: print it, naming the rank, and abort the whole job."""
    rank, size = _mpi_rank_size()
    prefix = f"[rank {rank}] " if size > 1 else ""
    for line in lines:
        _error(prefix + line)
    sys.stderr.write(details)
    _abort_if_parallel(size, code)
    return code


def _exit_all(size: int, code: int) -> None:
    """End an MPI job whose every rank knows the error: rank 0 (which printed it) aborts the
    job with ``code``; the other ranks just wait to be stopped (an orderly exit races with the
    launcher, which kills the ranks still finalising: one MPI_Abort from rank 0 is reliable)."""
    if size > 1:
        if sys.modules["mpi4py.MPI"].COMM_WORLD.Get_rank() == 0:
            _abort_if_parallel(size, code)
        sys.stdout.flush()
        time.sleep(60)          # rank 0's abort ends us long before this
        os._exit(code)


def _abort_if_parallel(size: int, code: int) -> None:
    """Abort the whole MPI job with ``code`` (in one process, nothing), once the launcher has
    had the time to forward what was printed: the abort kills the pipes."""
    if size > 1:
        sys.stderr.flush()
        sys.stdout.flush()
        time.sleep(0.2)
        # MPI_Abort asks the launcher, which a rank cut off from it (its host's link down)
        # never reaches, and holds the interpreter while it waits: SIGALRM's default action
        # then ends the rank
        import signal
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(5)
        sys.modules["mpi4py.MPI"].COMM_WORLD.Abort(code)
