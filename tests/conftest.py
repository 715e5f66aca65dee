"""Shared helpers: run the CLI in a subprocess (in-process or under mpiexec), always with a timeout."""
import os
import subprocess
import sys

import h5py
import numpy as np
import pytest

BIN = os.path.dirname(sys.executable)
MPIEXEC = os.path.join(BIN, "mpiexec")
TIMEOUT = 120


def _env():
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env["MPIEXEC_TIMEOUT"] = str(TIMEOUT)       # second guard: hydra kills the job itself
    env.pop("OMTL_MPI_WAIT", None)
    return env


def omtl(*args, np_ranks=None, timeout=TIMEOUT, cwd=None):
    """Run ``omtl-mpi ARGS`` (under ``mpiexec -n np_ranks`` if given); return CompletedProcess."""
    cmd = [sys.executable, "-m", "omtl_mpi", *map(str, args)]
    if np_ranks is not None:
        cmd = [MPIEXEC, "-n", str(np_ranks), sys.executable, "-m", "mpi4py", "-m", "omtl_mpi",
               *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env(), cwd=cwd)


def read_results(path):
    """Everything of a results file except timings, as plain numpy arrays."""
    out = {}
    with h5py.File(path, "r") as f:
        for group in ("metrics", "model", "predictions"):
            for key, ds in f[group].items():
                out[f"{group}/{key}"] = ds[()]
        out["attrs"] = {k: f.attrs[k] for k in f.attrs if k not in ("created", "seconds", "ms_per_round")}
    return out


@pytest.fixture(scope="session")
def mpiexec():
    if not os.access(MPIEXEC, os.X_OK):
        pytest.fail(f"mpiexec not found next to {sys.executable}; run 'make setup'")
    return MPIEXEC


@pytest.fixture(scope="session")
def small_tasks(tmp_path_factory):
    """5 related synthetic tasks of unequal lengths (700..1000), written as a task-stream file."""
    from omtl_mpi.data import generate, write_tasks
    names, X, y = generate(tasks=5, samples=1000, seed=3)
    lengths = [1000, 700, 900, 1000, 800]
    path = tmp_path_factory.mktemp("data") / "small.h5"
    write_tasks(path, names, [x[:n] for x, n in zip(X, lengths)], [v[:n] for v, n in zip(y, lengths)])
    return path
