"""Shared helpers: run the CLI in a subprocess (in-process or under mpiexec), always with a timeout."""
import os
import subprocess
import sys

# as the command line does (omtl_mpi/threads.py), before numpy: the test workers share the cores
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import h5py  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

BIN = os.path.dirname(sys.executable)
MPIEXEC = os.path.join(BIN, "mpiexec")
TIMEOUT = 120
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pytest_configure(config):
    """Byte-compile the package and the scripts' modules once, before the tests start their
    processes: several hundred of them (every MPI rank is one) import omtl_mpi, and where
    PYTHONDONTWRITEBYTECODE is set (as on the project's shared machines) none of them would
    write its .pyc, so each would compile every module again, some 0.15 s of CPU a process.
    Python checks each .pyc against its source, so an edited module is never run stale."""
    if not hasattr(config, "workerinput"):             # once, in the process that starts xdist's
        import compileall
        for folder in ("omtl_mpi", "scripts"):
            compileall.compile_dir(os.path.join(ROOT, folder), quiet=1)


# what a test not marked mpi finds as hydra's launcher: mpiexec then refuses to start, naming it
NOT_MARKED_MPI = "a-test-not-marked-mpi"
_USERS_LAUNCHER = os.environ.get("HYDRA_LAUNCHER")      # what a marked test gets


def pytest_collection_modifyitems(config, items):
    """A test that asks for mpiexec is marked mpi without saying so."""
    for item in items:
        if "mpiexec" in getattr(item, "fixturenames", ()) and item.get_closest_marker("mpi") is None:
            item.add_marker(pytest.mark.mpi)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Every test that starts an MPI job, itself or through a fixture, is marked ``mpi`` (so
    that ``pytest -m 'not mpi'`` is the quick loop): for one that is not, before its fixtures
    are made, mpiexec is set to refuse to start ("unrecognized launcher:
    a-test-not-marked-mpi"), in the test's own processes and the package's alike."""
    if item.get_closest_marker("mpi") is None:
        os.environ["HYDRA_LAUNCHER"] = NOT_MARKED_MPI
    elif _USERS_LAUNCHER is None:
        os.environ.pop("HYDRA_LAUNCHER", None)
    else:
        os.environ["HYDRA_LAUNCHER"] = _USERS_LAUNCHER


def _env():
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env["MPIEXEC_TIMEOUT"] = str(TIMEOUT)       # second guard: hydra kills the job itself
    # as root (CI), let Open MPI run ourselves, so that the launcher has no notice to add to
    # the one-line errors the tests read (tests/test_safe_defaults.py tests the notice)
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
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
    """Everything of a results file except timings, as plain numpy arrays ("predictions" is
    every instance's, task-major: split it with :func:`per_task`)."""
    out = {}
    with h5py.File(path, "r") as f:
        for group in ("metrics", "model"):
            for key, ds in f[group].items():
                out[f"{group}/{key}"] = ds[()]
        out["predictions"] = f["predictions"][()]
        out["tasks/offsets"] = f["tasks/offsets"][()]
        out["attrs"] = {k: f.attrs[k] for k in f.attrs if k not in ("created", "seconds", "ms_per_round")}
    return out


def layout_of(X_list, y_list, batch, rounds, dim):
    """The runtime's round layout (omtl_mpi.data.rounds.RoundLayout) of in-memory streams."""
    from omtl_mpi.data.rounds import RoundLayout
    lengths = [len(y) for y in y_list]
    layout = RoundLayout(lengths, batch, rounds, dim)
    layout.fill(0, np.concatenate(X_list), np.concatenate(y_list), lengths)
    return layout


def dense_rounds(X_list, y_list, batch, rounds):
    """Streams as whole rounds of every task, X (T, B, K, d) and y (T, B, K), zero-padded
    (label 0) where a stream has ended: what the Python API's learn_round takes."""
    K, d = len(X_list), X_list[0].shape[1]
    X, y = np.zeros((rounds * batch, K, d)), np.zeros((rounds * batch, K))
    for k, (Xk, yk) in enumerate(zip(X_list, y_list)):
        X[: len(yk), k], y[: len(yk), k] = Xk, yk
    return X.reshape(rounds, batch, K, d), y.reshape(rounds, batch, K)


def per_task(results, key="predictions"):
    """A per-instance array of :func:`read_results` split into its tasks' parts."""
    offsets = results["tasks/offsets"]
    return [results[key][a:b] for a, b in zip(offsets[:-1], offsets[1:])]


@pytest.fixture(scope="session")
def mpiexec():
    if not os.access(MPIEXEC, os.X_OK):
        pytest.fail(f"mpiexec not found next to {sys.executable}; run 'make setup'")
    return MPIEXEC


@pytest.fixture(scope="session")
def unequal_streams():
    """5 related synthetic tasks of unequal lengths (200..300), as in-memory streams."""
    from omtl_mpi.data import generate
    _, X, y = generate(tasks=5, samples=300, seed=1)
    lengths = [300, 200, 250, 300, 220]
    return [x[:n] for x, n in zip(X, lengths)], [v[:n] for v, n in zip(y, lengths)]


# the stream lengths of the small_tasks fixture (tests that check shapes read them here)
SMALL_LENGTHS = [120, 84, 108, 120, 96]


@pytest.fixture(scope="session")
def small_tasks(tmp_path_factory):
    """5 related synthetic tasks of unequal lengths (84..120), written as a task-stream file.

    120 rounds: enough for every equivalence and resume test (streams that end at different
    rounds, Omega learned well away from its start); every round more is paid by every rank of
    every MPI job that reads it."""
    from omtl_mpi.data import generate, write_tasks
    names, X, y = generate(tasks=5, samples=120, seed=3)
    lengths = SMALL_LENGTHS
    path = tmp_path_factory.mktemp("data") / "small.h5"
    write_tasks(path, names, [x[:n] for x, n in zip(X, lengths)], [v[:n] for v, n in zip(y, lengths)])
    return path


def assert_same_results(a, b):
    """Two results files hold the same arrays, bit for bit (timings aside)."""
    a, b = read_results(a), read_results(b)
    assert a.keys() == b.keys()
    for key in a:
        if key != "attrs":
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def assert_in_process_equals_mpiexec(args, local_args, ranks, tmp_path, models=("W",)):
    """``omtl-mpi run ARGS`` in one process (with ``local_args``) and under mpiexec on ``ranks``
    ranks make the same predictions and mistakes, and the ``models`` arrays agree to 1e-10
    (``models=None``: every array of the results' /model, which both runs must have alike);
    returns the one process's results."""
    import numpy as np
    r = omtl("run", *args, *local_args, "--out", tmp_path / "a.h5")
    assert r.returncode == 0, r.stderr
    r = omtl("run", *args, "--out", tmp_path / "b.h5", np_ranks=ranks)
    assert r.returncode == 0, r.stderr
    a, b = read_results(tmp_path / "a.h5"), read_results(tmp_path / "b.h5")
    for key in ("predictions", "metrics/mistakes"):
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    if models is None:
        models = [key[len("model/"):] for key in a if key.startswith("model/")]
        assert models and models == [key[len("model/"):] for key in b if key.startswith("model/")]
    for key in models:
        np.testing.assert_allclose(a[f"model/{key}"], b[f"model/{key}"], rtol=0, atol=1e-10,
                                   err_msg=key)
    return a


def write_declared_only(path, rows: int, dim: int, tasks: int = 2):
    """A small task file (compressed, never written) whose tasks declare rows x dim features."""
    import h5py
    import numpy as np
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "omtl-mpi-tasks"
        for k in range(tasks):
            g = f.create_group(f"tasks/{k:04d}")
            g.attrs["name"] = f"t{k}"
            g.create_dataset("X", shape=(rows, dim), dtype="f8", chunks=(1, min(dim, 10**6)),
                             compression="gzip")
            g.create_dataset("y", data=np.resize(np.array([1.0, -1.0]), rows))
    return path
