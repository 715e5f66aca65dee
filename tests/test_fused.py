"""Fused rounds (runtime/fused.py): which runs use them, the same bits as the Python round loop,
failures and checkpoints through them, the compiled bells under them, and numba's cache kept
fresh when a file they take code from changes."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import MPIEXEC, TIMEOUT, _env, assert_same_results
from test_failures import leftover
from omtl_mpi.algorithms import kernels
from omtl_mpi.algorithms.admm import AdmmParams
from omtl_mpi.algorithms.registry import REGISTRY
from omtl_mpi.runtime import fused

pytestmark = pytest.mark.skipif(not kernels.available() or not sys.platform.startswith("linux"),
                                reason="fused rounds need numba, on Linux")

NUMBA_SHM = ("--kernel", "numba", "--transport", "shm", "--no-progress")


def run(*args, ranks, env=None, timeout=TIMEOUT):
    """``omtl-mpi run ARGS`` under mpiexec, with extra environment ``env``."""
    cmd = [MPIEXEC, "-n", str(ranks), sys.executable, "-m", "mpi4py", "-m", "omtl_mpi", "run",
           *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env={**_env(), **(env or {})})


# -- which runs -----------------------------------------------------------------------------
def params(**kw):
    return AdmmParams(**{"kernel": "numba", **kw})


@pytest.mark.parametrize("algo, kw, transport, tasks, expected", [
    ("c-admm", {}, "shm", 5, True),
    ("pmsc-log", {"loss": "logistic", "relationship": False, "lambda4": 0.0}, "shm", 5, True),
    ("d-admm", {}, "shm", 16, True),
    ("c-admm", {}, "mpi", 5, False),                        # MPI's messages: Python drives them
    ("c-admm", {"kernel": "numpy"}, "shm", 5, False),
    ("c-admm", {"variant": "paper"}, "shm", 5, False),      # not compiled
    ("d-admm", {"w_step": "adagrad", "kernel": "numpy"}, "shm", 5, False),
    ("d-admm", {}, "shm", 17, False),                       # Omega's update stays BLAS's
])
def test_which_runs_are_fused(algo, kw, transport, tasks, expected, monkeypatch):
    monkeypatch.delenv(fused.ENVIRONMENT, raising=False)
    assert fused.usable(REGISTRY[algo], params(**kw), transport, tasks) is expected


def test_the_environment_keeps_the_python_loop(monkeypatch):
    monkeypatch.setenv(fused.ENVIRONMENT, "0")
    assert not fused.usable(REGISTRY["c-admm"], params(), "shm", 5)


def test_learners_without_compiled_rounds_are_not_fused(monkeypatch):
    monkeypatch.delenv(fused.ENVIRONMENT, raising=False)
    for name in ("d-psgd", "drom"):
        algo = REGISTRY[name]
        assert not fused.usable(algo, algo.params(), "shm", 5)


def test_ranks_that_disagree_on_fusing_stop_before_the_first_round(mpiexec, tmp_path):
    """MPMD launch with OMTL_MPI_FUSED=0 on rank 0 only: the two loops ring differently, so
    the job must stop with one line, not hang."""
    base = [sys.executable, "-m", "mpi4py", "-m", "omtl_mpi", "run", "--synth-samples", "100",
            *NUMBA_SHM, "--out", str(tmp_path / "r.h5")]
    cmd = [MPIEXEC, "-n", "1", "-env", fused.ENVIRONMENT, "0", *base, ":", "-n", "2", *base]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=_env())
    assert r.returncode == 2
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "ranks disagree on fusing the rounds" in errors[0]
    assert not (tmp_path / "r.h5").exists()


# -- the same bits as the Python loop -------------------------------------------------------
@pytest.fixture(scope="module")
def scaled_tasks(tmp_path_factory):
    """Random tasks whose features are so large, or so small, that V V^T leaves the range the
    compiled Omega update accepts: every round takes relationship.py's careful path."""
    from omtl_mpi.data import write_tasks
    folder = tmp_path_factory.mktemp("scaled")
    paths = {}
    for name, scale in (("huge", 1e160), ("tiny", 1e-150)):
        rng = np.random.default_rng(1)
        X = [rng.normal(size=(150, 4)) * scale for _ in range(4)]
        y = [np.where(rng.normal(size=150) > 0, 1, -1) for _ in range(4)]
        paths[name] = folder / f"{name}.h5"
        write_tasks(paths[name], [f"t{k}" for k in range(4)], X, y)
    return paths


CASES = [
    (["--algo", "c-admm"], 6),                                        # a worker per task
    (["--algo", "c-admm", "--batch", "3", "--omega-every", "2", "--loss", "logistic"], 3),
    (["--algo", "d-admm", "--topology", "ring"], 5),                  # a node per task
    (["--algo", "d-admm", "--topology", "full", "--loss", "perceptron", "--batch", "2"], 3),
    (["--algo", "d-admm", "--topology", "star", "--no-relationship"], 3),
    # a consensus matrix that would cancel: built in Omega's eigenvectors, in Python
    (["--algo", "c-admm", "--lambda1", "1e-9", "--lambda2", "1e-9", "--lambda3", "1e-9",
      "--lambda4", "0", "--rho", "1"], 3),
    (["--algo", "d-admm", "--topology", "ring", "--lambda1", "1e-9", "--lambda2", "1e-9",
      "--lambda3", "1e-9", "--lambda4", "0", "--rho", "1"], 4),
]


@pytest.mark.parametrize("args, ranks", CASES)
def test_fused_rounds_give_the_python_loops_bits(mpiexec, small_tasks, tmp_path, args, ranks):
    outs = []
    for env, loop in (({}, "fused"), ({fused.ENVIRONMENT: "0"}, "python")):
        out = tmp_path / f"{loop}.h5"
        r = run("--data", small_tasks, *args, *NUMBA_SHM, "--json", "--out", out, ranks=ranks,
                env=env)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout.splitlines()[-1])["loop"] == loop
        outs.append(out)
    assert_same_results(*outs)


@pytest.mark.parametrize("scale, args, ranks", [
    ("huge", ["--algo", "c-admm"], 3), ("tiny", ["--algo", "d-admm", "--topology", "ring"], 4)])
def test_rounds_finished_by_the_careful_omega_update_give_the_same_bits(
        mpiexec, scaled_tasks, tmp_path, scale, args, ranks):
    outs = []
    for env, loop in (({}, "fused"), ({fused.ENVIRONMENT: "0"}, "python")):
        outs.append(tmp_path / f"{loop}.h5")
        r = run("--data", scaled_tasks[scale], *args, *NUMBA_SHM, "--out", outs[-1], ranks=ranks,
                env=env)
        assert r.returncode == 0, r.stderr
    assert_same_results(*outs)


def test_fused_timings_are_phases_of_each_round(mpiexec, small_tasks, tmp_path):
    import h5py
    out = tmp_path / "r.h5"
    r = run("--data", small_tasks, "--algo", "d-admm", "--topology", "ring", *NUMBA_SHM, "--out",
            out, ranks=5)
    assert r.returncode == 0, r.stderr
    assert "whole rounds in compiled code" in r.stdout
    with h5py.File(out) as f:
        seconds, per_round = f["timing/seconds"][()], f.attrs["ms_per_round"] / 1000.0
        staleness = f["timing/staleness"][()]
    assert seconds.shape == (5, 1000, 3) and np.isfinite(seconds).all()
    assert (seconds[:, :, 1:] >= 0).all() and (seconds[:, :, 0] > -1e-9).all()
    assert (seconds[:, :, 2].sum(axis=1) > 0).all()            # every rank waited at some point
    # the rounds' phases add up to the wall time of the rounds on every rank
    np.testing.assert_allclose(seconds.sum(axis=2).mean(axis=1), per_round, rtol=0.25)
    # a ring of 5: per node its own row and two rows 1 hop away are fresh, two rows 2 hops away
    # are 1 round old
    np.testing.assert_allclose(staleness, 0.4)


# -- failures and checkpoints through the fused loops ---------------------------------------
@pytest.mark.parametrize("algo, fail_rank, mode", [
    (["--algo", "c-admm"], 0, "raise"), (["--algo", "c-admm"], 3, "kill"),
    (["--algo", "d-admm", "--topology", "ring"], 2, "raise")])
def test_a_failing_rank_ends_a_fused_job(mpiexec, tmp_path, algo, fail_rank, mode):
    out = tmp_path / "never.h5"
    t0 = time.monotonic()
    r = run(*algo, "--synth-samples", "20000", *NUMBA_SHM, "--fail-at", "3000", "--fail-rank",
            fail_rank, "--fail-mode", mode, "--out", out, ranks=5, timeout=60)
    assert r.returncode != 0 and not out.exists()
    assert time.monotonic() - t0 < 30
    if mode == "raise":
        assert f"error: [rank {fail_rank}] InjectedFailure: injected failure at round 3000" in r.stderr
    assert not leftover(str(out))


@pytest.mark.parametrize("algo, ranks", [(["--algo", "c-admm"], 3),
                                         (["--algo", "d-admm", "--topology", "ring"], 4)])
def test_a_fused_run_resumed_from_a_checkpoint_ends_as_an_uninterrupted_one(
        mpiexec, small_tasks, tmp_path, algo, ranks):
    whole, part = tmp_path / "whole.h5", tmp_path / "part.h5"
    common = ["--data", small_tasks, *algo, *NUMBA_SHM]
    assert run(*common, "--out", whole, ranks=ranks).returncode == 0
    r = run(*common, "--out", part, "--checkpoint-every", "300", "--fail-at", "700",
            "--fail-rank", "1", ranks=ranks)
    assert r.returncode != 0 and not part.exists()
    r = run(*common, "--out", part, "--resume", tmp_path / "part.ckpt.h5", "--json", ranks=ranks)
    assert r.returncode == 0, r.stderr
    assert "resumed from" in r.stderr and "after round 600" in r.stderr
    assert_same_results(whole, part)
    report = json.loads(r.stdout.splitlines()[-1])      # per round of this invocation's rounds
    assert report["ms_per_round"] == pytest.approx(1000 * report["seconds"] / (1000 - 600))


def test_interrupting_a_fused_job_ends_every_rank(mpiexec, tmp_path):
    """SIGINT (Ctrl-C at the terminal: the whole process group) ends a job whose ranks are in
    compiled code, asleep or computing, within seconds."""
    marker = str(tmp_path / "interrupted.h5")
    cmd = [MPIEXEC, "-n", "5", sys.executable, "-m", "mpi4py", "-m", "omtl_mpi", "run", "--algo",
           "d-admm", "--synth-samples", "1000000", *NUMBA_SHM, "--out", marker,
           "--checkpoint-every", "2000"]
    # SIGINT at its default in the job, as in a terminal (a script's background ignores it)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(),
                            start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        checkpoint = tmp_path / "interrupted.ckpt.h5"
        end = time.monotonic() + 60
        while not checkpoint.exists() and proc.poll() is None and time.monotonic() < end:
            time.sleep(0.1)                     # the rounds have begun once it is written
        assert checkpoint.exists() and proc.poll() is None
        time.sleep(1.0)
        t0 = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        proc.communicate(timeout=30)
        assert proc.returncode != 0 and time.monotonic() - t0 < 15
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert not leftover(marker) and not os.path.exists(marker)


# -- the compiled bells ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def bells():
    fused.load()
    from omtl_mpi.comm import _compiled
    return _compiled


def token(rank):
    return int(rank).to_bytes(4, sys.byteorder)


def waiter(listen, size=4):
    where = np.full(size, -1, dtype=np.int64)
    where[listen] = np.arange(len(listen))
    return where, np.zeros(len(listen), dtype=np.int64), np.zeros(64, dtype=np.uint32), np.zeros(1, dtype=np.int64)


def test_compiled_wait_counts_tokens_per_sender(bells):
    r, w = os.pipe()
    where, count, buf, info = waiter([1, 2])
    try:
        os.write(w, token(1) + token(1) + token(2))      # rank 1 is a round ahead
        assert bells.wait(r, where, count, buf, info) == bells.OK
        assert count.tolist() == [1, 0]                  # its early token is kept for the next
        os.write(w, token(2))
        assert bells.wait(r, where, count, buf, info) == bells.OK
        assert count.tolist() == [0, 0]
    finally:
        os.close(r)
        os.close(w)


def test_compiled_wait_reports_instead_of_raising(bells):
    r, w = os.pipe()
    where, count, buf, info = waiter([1])
    try:
        os.write(w, token(3))                            # a rank it does not listen to
        assert bells.wait(r, where, count, buf, info) == bells.UNEXPECTED and info[0] == 3
        os.write(w, bells.POISON.to_bytes(4, sys.byteorder))   # the watchdog's
        assert bells.wait(r, where, count, buf, info) == bells.PEER_LOST
    finally:
        os.close(r)
        os.close(w)
    closed = 10 ** 6                                     # no such file descriptor: EBADF
    assert bells.wait(closed, where, count, buf, info) == bells.IO_ERROR and info[0] == 9
    info[0] = 0
    peers = np.array([closed], dtype=np.int64)
    assert bells.ring(peers, np.zeros(1, np.uint32), info) == bells.IO_ERROR and info[0] == 9


def test_compiled_wait_returns_on_a_signal_and_resumes(bells):
    r, w = os.pipe()
    where, count, buf, info = waiter([1])
    fired = []
    old = signal.signal(signal.SIGALRM, lambda *a: fired.append(1))
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        t0 = time.monotonic()
        assert bells.wait(r, where, count, buf, info) == bells.INTERRUPTED   # nothing to read
        assert 0.15 < time.monotonic() - t0 < 5 and fired == [1]
        os.write(w, token(1))
        assert bells.wait(r, where, count, buf, info) == bells.OK
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        os.close(r)
        os.close(w)


def test_the_watchdog_ends_a_compiled_wait_and_names_the_lost_rank(bells):
    from omtl_mpi.comm.doorbell import Doorbells, PeerLost, _Watchdog
    from test_transport import OneRank
    peer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    door = Doorbells(OneRank(), ring=[], listen=[0], watchdog=0)
    door._watch = _Watchdog(door._fd, {4: peer.pid}, 0.05)
    where, count, buf, info = waiter([0], size=1)
    try:
        os.kill(peer.pid, signal.SIGKILL)
        peer.wait()
        t0 = time.monotonic()
        # the compiled wait holds no GIL, so the watchdog thread runs while it sleeps
        assert bells.wait(door.arrays()["fd"], where, count, buf, info) == bells.PEER_LOST
        assert time.monotonic() - t0 < 5
        role = object.__new__(fused._Role)                  # how the driver reports it
        role.loops, role.bells, role.state = fused.load(), door, np.zeros(6, dtype=np.int64)
        error = role._error(bells.PEER_LOST)
        assert isinstance(error, PeerLost)
        assert str(error) == f"rank 4 (process {peer.pid}) on this node has exited"
    finally:
        door.close()


def test_only_a_rounds_last_message_rings(bells):
    r, w = os.pipe()
    os.set_blocking(r, False)
    counters, info = np.zeros(4, dtype=np.int64), np.zeros(1, dtype=np.int64)
    try:
        for round_ in range(2):
            for sender in range(3):
                assert bells.arrive(counters, 2, 3, w, np.array([sender], np.uint32), info) == bells.OK
                tokens = os.read(r, 64) if sender == 2 else b""
                if sender < 2:
                    with pytest.raises(BlockingIOError):
                        os.read(r, 64)
            assert tokens == token(2)                    # one token, from the third sender
        assert counters.tolist() == [0, 0, 6, 0]
    finally:
        os.close(r)
        os.close(w)


def test_the_compiled_clock_is_perf_counters(bells):
    before = time.perf_counter()
    now = bells.now(time.CLOCK_MONOTONIC)
    assert before <= now <= time.perf_counter()


# -- numba's cache kept fresh ---------------------------------------------------------------
FROZEN = """
from numba import int64
from omtl_mpi.algorithms.kernels import compiled

BUILT_FROM = 1


@compiled(int64())
def built_from():
    return BUILT_FROM


@compiled(int64())
def answer():
    return BUILT_FROM * 10


@compiled(int64())
def caller():
    return answer() + 1
"""


def test_refresh_recompiles_code_cached_before_a_file_it_uses_changed(tmp_path, monkeypatch):
    (tmp_path / "frozen_module.py").write_text(FROZEN)
    monkeypatch.syspath_prepend(str(tmp_path))
    import frozen_module as module
    kernels.refresh(module)                              # fresh: nothing to do
    assert (module.built_from(), module.caller()) == (1, 11)
    # what a cached module looks like after a file it froze a value from has changed
    monkeypatch.setattr(module, "BUILT_FROM", 2)
    kernels.refresh(module)
    assert (module.built_from(), module.answer(), module.caller()) == (2, 20, 21)


def test_every_compiled_module_records_the_files_it_takes_code_from():
    loops = fused.load()
    from omtl_mpi.algorithms import _compiled as steps
    from omtl_mpi.comm import _compiled as compiled_bells
    for module in (steps, compiled_bells, loops):
        assert module.built_from() == module.BUILT_FROM
    assert loops.BUILT_FROM == kernels.sources_digest(
        "algorithms/_compiled.py", "algorithms/kernels.py", "algorithms/relationship.py",
        "comm/_compiled.py")


def test_ranks_load_at_once_only_when_the_cache_was_loaded_from_these_sources(tmp_path,
                                                                             monkeypatch):
    fused.load()                                         # loaded (compiled if it had to): ready
    assert kernels.cache_ready("kernels") and kernels.cache_ready("fused")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))  # numba told to cache elsewhere
    assert not kernels.cache_ready("fused")
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    monkeypatch.setitem(kernels._SOURCES, "fused", ("algorithms/admm.py",))   # other sources
    assert not kernels.cache_ready("fused")
    # a folder that cannot be written: no stamp, no error (ranks then load rank 0 first)
    monkeypatch.setattr(kernels, "_stamp", lambda level: ("/proc/no-such/stamp", "x"))
    kernels.mark_cache_ready("fused")
    assert not kernels.cache_ready("fused")
