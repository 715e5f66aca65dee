"""What loading scipy's BLAS/LAPACK wrappers privately saves every rank at start-up (the
measurement behind docs/DESIGN.md, *Start-up*).

omtl_mpi/algorithms/fortran.py loads the two extension modules that hold scipy's wrappers of
dsyevd, dsyrk and dger by themselves; the public way (``scipy.linalg.lapack``,
``scipy.linalg.blas``) imports the whole ``scipy.linalg`` package first. Each command below is
timed whole, the private way and the public way alternately (the public way: the same command
with ``import scipy.linalg.blas, scipy.linalg.lapack`` run first, through ``-c``), and the
median wall and CPU time (user + system, of the command and its children) is printed.

Run from the repository root:

    .venv/bin/python experiments/startup_scipy.py [--repeats 10] [--mpi-repeats 7] [--ranks 6]
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

PY = sys.executable
MPIEXEC = os.path.join(os.path.dirname(PY), "mpiexec")
PUBLIC = "import scipy.linalg.blas, scipy.linalg.lapack; "
RUN = "import sys, runpy; sys.argv = ['omtl_mpi', 'run', '--synth-samples', '10', '--json']; " \
      "runpy.run_module('omtl_mpi', run_name='__main__')"


def commands(ranks: int) -> dict:
    """Each measured command, the private way and the public way."""
    mpi = [MPIEXEC, "-n", str(ranks), PY, "-m", "mpi4py", "-c"]
    return {
        "import omtl_mpi.algorithms.fortran": ([PY, "-c", "import omtl_mpi.algorithms.fortran"],
                                               [PY, "-c", PUBLIC + "import omtl_mpi.algorithms.fortran"]),
        "omtl-mpi run --synth-samples 10 --json": ([PY, "-c", RUN], [PY, "-c", PUBLIC + RUN]),
        f"the same run under mpiexec -n {ranks}": (mpi + [RUN], mpi + [PUBLIC + RUN]),
    }


def timed(cmd: list) -> tuple:
    """Wall and CPU seconds of one run of ``cmd`` (which must succeed)."""
    r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.perf_counter() - t0, r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=10, help="runs of each one-process command")
    ap.add_argument("--mpi-repeats", type=int, default=7, help="runs of the mpiexec command")
    ap.add_argument("--ranks", type=int, default=6)
    args = ap.parse_args()
    import scipy
    print(f"scipy {scipy.__version__}, {os.cpu_count()} CPUs; medians, wall / CPU seconds")
    print("| command | private: wall | private: CPU | public: wall | public: CPU |")
    print("|---|---|---|---|---|")
    for name, (private, public) in commands(args.ranks).items():
        n = args.mpi_repeats if "mpiexec" in name else args.repeats
        got = {"private": [], "public": []}
        for _ in range(n):                       # alternately: drift hits both alike
            got["private"].append(timed(private))
            got["public"].append(timed(public))
        cells = [f"{statistics.median(x[i] for x in got[way]):.3f}"
                 for way in ("private", "public") for i in (0, 1)]
        print(f"| `{name}` | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
