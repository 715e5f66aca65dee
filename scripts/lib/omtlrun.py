"""Run ``omtl-mpi run`` from the benchmark and results scripts, in one process or under mpiexec."""
import json
import os
import subprocess
import sys

MPIEXEC = os.path.join(os.path.dirname(sys.executable), "mpiexec")


def command(args, ranks=None) -> list:
    """``omtl-mpi run ARGS`` as a command line; under ``mpiexec -n ranks`` when ranks is given."""
    if ranks:
        return [MPIEXEC, "-n", str(ranks), sys.executable, "-m", "mpi4py", "-m", "omtl_mpi", "run",
                *map(str, args)]
    return [sys.executable, "-m", "omtl_mpi", "run", *map(str, args)]


def report_of(stdout: str) -> dict:
    """The JSON report a ``--json`` run prints last."""
    return json.loads(stdout.strip().splitlines()[-1])


def run_json(args, ranks=None, env=None, timeout=1800) -> dict:
    """Run with ``--json --no-progress`` and return the report; stop the script if it fails."""
    cmd = command([*args, "--json", "--no-progress"], ranks)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                         env=dict(os.environ, PYTHONUNBUFFERED="1", **(env or {})))
    if out.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{out.stderr}")
    return report_of(out.stdout)
