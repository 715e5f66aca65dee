"""Shared helpers: run the CLI in a subprocess (alone or under mpiexec, always with a timeout), in
this process or in a forked child of it; the hostile corpus and the small sources that several
test files feed the commands; the MPI marker's enforcement."""
import hashlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time

# as the command line does (omtl_mpi/threads.py), before numpy: the test workers share the cores
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import h5py  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

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
    # the one-line errors the tests read (tests/test_launchers.py tests the notice)
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


def differing(a, b) -> list:
    """The names of the arrays of :func:`read_results` in which two results files differ."""
    a, b = read_results(a), read_results(b)
    return [k for k in a if k != "attrs" and not np.array_equal(a[k], b[k])]


def same_prior_as_one_block(blocks, spans, one, x) -> None:
    """Every block's empirical-Bayes prior (centres, V, const, Pi) is ``one``'s, the
    synchronous estimate of a block of every task, to rounding, and so are the tasks' margins
    on ``x`` (1, d) under it, the blocks holding the tasks ``spans``."""
    for b in blocks:
        np.testing.assert_allclose(b.centres_, one.centres_, rtol=0, atol=1e-10)
        np.testing.assert_allclose(b._V, one._V, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(b._const, one._const, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(b._prior[0], one._prior[0], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.concatenate([b.margins(x[:, a:c]) for (a, c), b in
                                               zip(spans, blocks)], axis=1),
                               one.margins(x), rtol=1e-9, atol=1e-12)


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
    r = omtl_forked("run", *args, *local_args, "--out", tmp_path / "a.h5")     # the one process
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


# ---------------------------------------------------------------------- the command line in this process
# A command whose test is about its exit code, its output and its files, not about a process
# of its own (signals, start-up, MPI), runs ``omtl_mpi.cli.main`` here: in this process with
# capsys (:func:`cli`), or in a forked child of it (:func:`forked`: the packages are already
# imported, so a command costs milliseconds instead of a Python start-up, and whatever it does
# to the process, its signal handlers included, ends with the child).
def cli_exit(args) -> int:
    """Exit code of ``omtl-mpi ARGS`` run in this process."""
    from omtl_mpi.cli import main
    try:
        main([str(a) for a in args])
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 0
    return 0


def cli(capsys, *args):
    """(exit code, stdout, stderr) of ``omtl-mpi ARGS`` run in this process."""
    from omtl_mpi.cli import main
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys, *args, needle=""):
    """The command exits 2 with exactly one ``error:`` line containing ``needle``, no traceback."""
    code, _, err = cli(capsys, *args)
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err and needle in lines[0], err
    return lines[0]


def forked(*args, timeout: float = 60.0, cwd=None, env=None):
    """``omtl-mpi ARGS`` in a forked child; (exit code, stdout, stderr). With ``env``, the child
    has that environment and Python's own warning filters (as a fresh ``python`` has: shown on
    stderr, not recorded by pytest); with ``cwd``, it runs there."""
    import omtl_mpi.cli as command_line
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    pid = os.fork()
    if pid == 0:                                    # the child: never returns
        code = 99
        try:
            os.dup2(out.fileno(), 1)
            os.dup2(err.fileno(), 2)
            sys.stdout = open(1, "w", closefd=False)
            sys.stderr = open(2, "w", closefd=False)
            sys.stdin = open(os.devnull)
            sys.argv = ["omtl-mpi", *map(str, args)]     # what --np passes on to mpiexec
            if cwd is not None:
                os.chdir(cwd)
            if env is not None:
                os.environ.clear()
                os.environ.update(env)
                _python_warnings()
            try:
                command_line.main([str(a) for a in args])
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:                   # noqa: BLE001 - reported as a traceback
                import traceback
                traceback.print_exc()
                code = 98
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    deadline = time.time() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.time() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail(f"omtl-mpi {' '.join(map(str, args))}: no answer in {timeout} s")
        time.sleep(0.005)
    texts = []
    for f in (out, err):
        f.seek(0)
        texts.append(f.read().decode(errors="replace"))
    return os.waitstatus_to_exitcode(status), texts[0], texts[1]


def _python_warnings() -> None:
    """The warning filters and output of a fresh interpreter, in place of pytest's."""
    import warnings
    warnings.resetwarnings()
    for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
        warnings.simplefilter("ignore", category)
    warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")
    warnings.showwarning = lambda message, category, filename, lineno, file=None, line=None: \
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def omtl_forked(*args, np_ranks=None, timeout=TIMEOUT, cwd=None):
    """:func:`omtl`, for a test about what the command says, exits with and writes: ``omtl-mpi
    ARGS`` run by :func:`forked` with the environment :func:`omtl` gives its subprocess (no
    Python start-up, no imports: milliseconds where a subprocess takes a second on a loaded
    machine); a CompletedProcess. A command that starts mpiexec (``--np``) starts it from the
    child, as the command line does; ``np_ranks`` runs :func:`omtl` itself under mpiexec. A test
    about the process (signals, start-up, what the interpreter prints) uses :func:`omtl`."""
    if np_ranks is not None:
        return omtl(*args, np_ranks=np_ranks, timeout=timeout, cwd=cwd)
    code, out, err = forked(*args, timeout=timeout, cwd=cwd, env=_env())
    return subprocess.CompletedProcess(["omtl-mpi", *map(str, args)], code, out, err)


def one_line_error(r, *needles):
    """Exit 2, exactly one `error:` line holding every needle, no traceback or warning (under
    mpiexec, MPICH adds its own line about the MPI_Abort that ends the job)."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith("Abort(")]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert "Traceback" not in r.stderr and "Warning" not in r.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


# ---------------------------------------------------------------------- hostile input
def one_line_errors(exc):
    assert str(exc).strip() and all(line.strip() for line in str(exc).splitlines())


# the hypothesis settings of the property tests: a fresh draw of 60 examples a test, and the
# hostile corpus's cases, the same on every run
HOSTILE_FAST = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
CASES = settings(max_examples=60, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.function_scoped_fixture])

# option values no command should take badly
HOSTILE = st.sampled_from(["-1", "0", "1e308", "-1e308", "nan", "inf", "-inf", "", " ", "1e-320",
                           "abc", "2.5", "99999999999999999999", "auto", "none", "balanced",
                           "\u00e9\u00e9", "../x", "1,2", "--json", "true"])

# any unicode but NUL (which HDF5 strings cannot hold, so no file could carry it)
HOSTILE_NAMES = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                min_size=0, max_size=12)
HOSTILE_VALUES = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-3, 3))


def digests(paths) -> dict:
    found = {}
    for p in paths:
        if os.path.isfile(p):
            with open(p, "rb") as f:
                found[str(p)] = hashlib.sha256(f.read()).hexdigest()
    return found


def digest(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def allowed(code: int, stdout: str, stderr: str, args) -> str:
    """Assert an allowed outcome; return "refused" or "ran"."""
    what = f"omtl-mpi {' '.join(map(str, args))}"
    assert "Traceback" not in stderr, f"{what}: traceback\n{stderr}"
    assert "Warning" not in stderr, f"{what}: warning\n{stderr}"
    if code == 0:
        if "--json" in args:
            for key, value in json.loads(stdout.strip().splitlines()[-1]).items():
                if isinstance(value, float):
                    assert math.isfinite(value), f"{what}: {key} = {value}"
        return "ran"
    # one line per problem found (several options may be wrong at once), nothing else
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert code == 2, f"{what}: exit {code}\n{stderr}"
    assert lines and all(ln.startswith(("error: ", "notice: ")) for ln in lines), \
        f"{what}: not error lines\n{stderr}"
    assert any(ln.startswith("error: ") and len(ln) > 12 for ln in lines), f"{what}\n{stderr}"
    return "refused"


def damaged(good: bytes, how: str, where: float, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    cut = int(where * len(good))
    if how == "truncate":
        return good[:cut]
    if how == "garbage":
        return good + rng.bytes(64)
    blob = bytearray(good)
    for i in rng.integers(cut, len(good), size=8):
        blob[i] ^= 0xFF
    return bytes(blob)


DAMAGE = dict(how=st.sampled_from(["truncate", "flip", "garbage"]), where=st.floats(0.0, 0.999),
              seed=st.integers(0, 2**16))


@pytest.fixture(scope="session")
def files(tmp_path_factory):
    """The hostile corpus: a small task file, a checkpoint of a run on it, a topology and a sweep
    file, and the sweep's finished folder (read, never changed, by the tests that use them)."""
    root = tmp_path_factory.mktemp("corpus")
    data = root / "tasks.h5"
    assert forked("data", "synth", "-o", data, "--tasks", "3", "--samples", "40")[0] == 0
    ckpt = root / "run.ckpt.h5"
    code, _, err = forked("run", "--data", data, "--out", root / "run.h5", "--checkpoint-every", "20",
                          "--fail-at", "30")
    assert ckpt.exists(), err
    topo = root / "topo.toml"
    topo.write_text('kind = "random-regular"\ndegree = 2\nseed = 1\n')
    sweep = root / "sweep.toml"
    sweep.write_text('[data.s]\nsynthetic = { tasks = 2, samples = 30 }\n[algorithms.pa]\n')
    sweep_out = root / "swept"
    assert forked("sweep", sweep, "--out", sweep_out, "--json")[0] == 0
    return {"data": data, "ckpt": ckpt, "topo": topo, "sweep": sweep, "root": root,
            "sweep_out": sweep_out}


GIB = 2 ** 30


@pytest.fixture
def eight_gib(monkeypatch):
    """Every machine looks like one with 8 GiB free, so the runaway checks are deterministic."""
    from omtl_mpi.data import footprint
    monkeypatch.setattr(footprint, "available_memory", lambda: 8 * GIB)


# ------------------------------------------------------------------ a small source of each importer
def sources(root):
    """{name: (import arguments before -o, the file an -o must not replace)} for every importer."""
    from test_importers import triangle_and_path, write_idx, write_landmine, write_tweeteval
    root.mkdir(exist_ok=True)
    (root / "x.csv").write_text("f1,f2,label,task\n1,2,1,a\n3,4,0,a\n5,6,1,b\n")
    (root / "s.txt").write_text("+1 qid:a 1:0.5 3:1\n-1 qid:b 2:2\n+1 qid:a 1:1\n-1 qid:b 1:1\n")
    svm = root / "svm"
    svm.mkdir()
    (svm / "a.txt").write_text("1 1:0.5\n-1 2:1\n")
    (svm / "b.txt").write_text("-1 1:1\n1 2:2\n")
    (root / "t.csv").write_text("text,label,task\ngood,positive,en\nbad,negative,en\n")
    tc = root / "tc"
    tc.mkdir()
    (tc / "en.csv").write_text("text,label\ngood,positive\nbad,negative\n")
    split = (["I love this", "so bad", "meh"], [1, 0, 0])
    write_tweeteval(root / "te", {"irony": {"train": split, "val": split, "test": split}})
    triangle_and_path(root / "tu")
    write_landmine(root / "l.mat", [np.ones((3, 9)), np.zeros((2, 9))],
                   [np.array([[0], [1], [1]]), np.array([[1], [0]])])
    images, labels = np.arange(20 * 28 * 28).reshape(20, 28, 28) % 256, np.arange(20) % 10
    np.savez(root / "m.npz", x_train=images.astype(np.uint8), y_train=labels)
    idx = root / "idx"
    idx.mkdir()
    write_idx(idx / "train-images-idx3-ubyte.gz", images)
    write_idx(idx / "train-labels-idx1-ubyte.gz", labels)
    np.savez(root / "p.npz", xs=np.ones((2, 3, 4)), ys=np.array([[1, -1, 1], [-1, 1, 1]]))
    (root / "v.vw").write_text("1 |task a |w good\n-1 |task b |w bad\n")
    vw = root / "vw"
    vw.mkdir()
    (vw / "a.vw").write_text("1 |w good\n-1 |w bad\n")
    return {
        "vw-file": (["vw", root / "v.vw", "--task-namespace", "task", "--dims", "8"], root / "v.vw"),
        "vw-folder": (["vw", vw, "--dims", "8"], vw / "a.vw"),
        "csv": (["csv", root / "x.csv"], root / "x.csv"),
        "libsvm-file": (["libsvm", root / "s.txt", "--task-field", "qid"], root / "s.txt"),
        "libsvm-folder": (["libsvm", svm], svm / "a.txt"),
        "text-csv-file": (["text-csv", root / "t.csv", "--task-col", "task", "--dims", "8"],
                          root / "t.csv"),
        "text-csv-folder": (["text-csv", tc, "--dims", "8"], tc / "en.csv"),
        "tweeteval": (["tweeteval", root / "te", "--tasks", "irony", "--dims", "8"],
                      root / "te" / "irony" / "train_text.txt"),
        "tudataset": (["tudataset", root / "tu", "--sets", "TOY", "--dims", "8"],
                      root / "tu" / "TOY" / "TOY_A.txt"),
        "landmine": (["landmine", root / "l.mat"], root / "l.mat"),
        "mnist-npz": (["mnist", root / "m.npz", "--dims", "8"], root / "m.npz"),
        "mnist-folder": (["mnist", idx], idx / "train-labels-idx1-ubyte.gz"),
        "npz": (["npz", root / "p.npz"], root / "p.npz"),
    }


@pytest.fixture(scope="session")
def tasks_3x60(tmp_path_factory):
    """3 synthetic tasks of 60 instances, as a task file: an input the run refusals must leave as it is."""
    folder = tmp_path_factory.mktemp("safety")
    path = folder / "tasks.h5"
    r = omtl("data", "synth", "-o", path, "--tasks", "3", "--samples", "60", "--seed", "1")
    assert r.returncode == 0, r.stderr
    return path
