"""--transport: the rule that picks it, the shared-memory exchange (same bits as MPI, failures end
the job), and the bells under it (tokens counted per sender, a vanished peer is an error)."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import (MPIEXEC, TIMEOUT, _env, assert_in_process_equals_mpiexec,
                      assert_same_results, omtl)
from test_failures import leftover
from omtl_mpi.errors import ConfigError
from omtl_mpi.runtime.transport import decide

SMALL = ["--synth-samples", "400", "--no-progress"]


# -- the rule ------------------------------------------------------------------------------
def test_auto_picks_shared_memory_only_on_one_oversubscribed_node():
    both = [[0, 1]] * 6
    assert decide("auto", 6, both) == "shm"                     # 6 ranks, 2 CPUs, one node
    assert decide("auto", 2, [[0, 1]] * 2) == "mpi"             # a CPU per rank: polling wins
    assert decide("auto", 6, [[i] for i in range(6)]) == "mpi"  # launcher gave each its own CPU
    assert decide("auto", 6, [[0], [1]] * 3) == "shm"           # launcher stacked them on 2 CPUs
    assert decide("auto", 12, both) == "mpi"                    # half the job on another node


def test_mpi_and_shm_are_what_was_asked_where_possible():
    assert decide("mpi", 6, [[0, 1]] * 6) == "mpi"
    assert decide("shm", 2, [[0, 1]] * 2) == "shm"
    with pytest.raises(ConfigError, match="--transport shm needs every rank on one node, but only "
                                          "3 of the 6 ranks share this one"):
        decide("shm", 6, [[0, 1]] * 3)
    with pytest.raises(ConfigError, match="--transport must be one of auto, mpi, shm"):
        decide("fast", 6, [[0, 1]] * 6)


def test_bad_transport_is_one_clear_line():
    r = omtl("run", "--transport", "carrier-pigeon")
    assert r.returncode == 2
    assert "--transport" in r.stderr and "'auto'" in r.stderr and "Traceback" not in r.stderr


def test_bad_transport_through_the_python_api_is_a_config_error():
    from omtl_mpi.config import RunConfig
    from omtl_mpi.runtime.run import run
    with pytest.raises(ConfigError, match="--transport must be one of auto, mpi, shm"):
        run(RunConfig(synth_samples=10), transport="fast")


# -- the same numbers over both exchanges ---------------------------------------------------
@pytest.mark.parametrize("args, ranks", [
    (["--algo", "c-admm"], 6),
    (["--algo", "c-admm", "--variant", "paper", "--batch", "3"], 3),   # blocks of 2-3 tasks
    (["--algo", "d-admm", "--topology", "ring"], 5),
    (["--algo", "d-admm", "--topology", "full", "--loss", "logistic"], 4),
    (["--algo", "d-psgd", "--topology", "ring"], 5),
    (["--algo", "drom", "--tau", "3"], 4),                   # rounds without any exchange
])
def test_shared_memory_gives_the_same_bits_as_mpi(mpiexec, small_tasks, tmp_path, args, ranks):
    common = ["run", "--data", small_tasks, *args, *SMALL, "--json"]
    for kind in ("mpi", "shm"):
        r = omtl(*common, "--transport", kind, "--out", tmp_path / f"{kind}.h5", np_ranks=ranks)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["transport"] == kind
    assert_same_results(tmp_path / "mpi.h5", tmp_path / "shm.h5")


def test_in_process_equals_shared_memory(mpiexec, small_tasks, tmp_path):
    assert_in_process_equals_mpiexec(["--data", small_tasks, *SMALL, "--transport", "shm"], [], 6,
                                     tmp_path)


def test_auto_follows_the_rule_and_the_report_says_which(mpiexec):
    mask = sorted(os.sched_getaffinity(0))
    expected = decide("auto", 6, [mask] * 6)
    r = omtl("run", *SMALL, "--json", np_ranks=6)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["transport"] == expected
    r = omtl("run", *SMALL, "--transport", "shm", np_ranks=3)
    assert r.returncode == 0, r.stderr
    assert "transport shm: one node's shared memory, waiting ranks sleep" in r.stdout
    r = omtl("run", *SMALL, "--json")
    assert json.loads(r.stdout)["transport"] == "local"


@pytest.mark.parametrize("kind", ["mpi", "shm"])
def test_every_rank_reports_the_cpu_it_used_during_the_rounds(mpiexec, tmp_path, kind):
    import h5py
    r = omtl("run", "--synth-samples", "1500", "--no-progress", "--json", "--transport", kind,
             "--out", tmp_path / "r.h5", np_ranks=3)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    cpu = report["cpu_ms_per_round"]
    assert len(cpu) == 3 and min(cpu) > 0
    # the rounds only, not the start-up: one thread cannot use more CPU than the rounds lasted
    assert max(cpu) < 1.25 * report["ms_per_round"] + 0.02
    with h5py.File(tmp_path / "r.h5") as f:
        np.testing.assert_allclose(f["timing/cpu_seconds"][()] * 1000.0 / report["rounds"], cpu)
    r = omtl("run", "--synth-samples", "300", "--no-progress", "--transport", kind, np_ranks=3)
    assert "CPU per round, all ranks together:" in r.stdout


def test_bells_that_cannot_be_set_up_fall_back_to_mpi_or_are_an_error(tmp_path, monkeypatch):
    from omtl_mpi.fast import doorbell
    from omtl_mpi.runtime.roles import Roles
    from omtl_mpi.runtime.world import SetupFailed

    def no_fifos(path, mode=0o600):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(doorbell.os, "mkfifo", no_fifos)
    with pytest.raises(doorbell.SetupError, match="cannot create the ranks' FIFOs in .*Permission denied"):
        doorbell.Doorbells(OneRank(), ring=[], listen=[0], watchdog=0)

    built = []

    def build(kind):
        built.append(kind)
        if kind == "shm":
            doorbell.Doorbells(OneRank(), ring=[], listen=[0], watchdog=0)
        return kind

    roles = Roles.__new__(Roles)                # only the transport part of a rank's roles
    roles.transport, roles._policy = "shm", None
    assert roles._connect(True, build) == "mpi" and roles.transport == "mpi"   # --transport auto
    assert built == ["shm", "mpi"]
    roles.transport = "shm"
    with pytest.raises(SetupFailed, match="--transport shm: cannot create the ranks' FIFOs .*; use "
                                          "--transport mpi"):
        roles._connect(False, build)                                             # --transport shm


@pytest.mark.parametrize("fail_rank, mode", [(0, "raise"), (3, "raise"), (2, "kill")])
def test_a_failing_rank_ends_a_shared_memory_job(mpiexec, tmp_path, fail_rank, mode):
    out = tmp_path / "never.h5"
    t0 = time.monotonic()
    r = omtl("run", "--synth-samples", "5000", "--transport", "shm", "--fail-at", "300",
             "--fail-rank", fail_rank, "--fail-mode", mode, "--out", out, np_ranks=6, timeout=60)
    assert r.returncode != 0 and not out.exists()
    assert time.monotonic() - t0 < 30
    if mode == "raise":
        assert f"error: [rank {fail_rank}] InjectedFailure: injected failure at round 300" in r.stderr
    assert not leftover(str(out))


# -- the bells ------------------------------------------------------------------------------
BELLS = r"""
import sys, time
from mpi4py import MPI
from omtl_mpi.fast.doorbell import Doorbells
comm = MPI.COMM_WORLD
rank = comm.Get_rank()
if rank == 0:
    bells = Doorbells(comm, ring=[], listen=[1, 2])
else:
    bells = Doorbells(comm, ring=[0], listen=[])
comm.Barrier()
if rank == 1:
    bells.ring_all(); bells.ring_all()         # round 1 and, early, round 2
elif rank == 2:
    time.sleep(0.5)
    bells.ring_all()                           # round 1, late
    time.sleep(0.5)
    bells.ring_all()                           # round 2
else:
    t0 = time.monotonic()
    bells.wait_all()                           # round 1 needs rank 2's token, not rank 1's second
    first = time.monotonic() - t0
    bells.wait_all()                           # round 2: rank 1's early token was kept
    second = time.monotonic() - t0
    print(f"{first:.3f} {second:.3f}", flush=True)
bells.close()
"""


def test_bells_count_tokens_per_sender(mpiexec):
    r = subprocess.run([MPIEXEC, "-n", "3", sys.executable, "-c", BELLS], capture_output=True,
                       text=True, timeout=TIMEOUT, env=_env())
    assert r.returncode == 0, r.stderr
    first, second = map(float, r.stdout.split())
    assert 0.4 < first < 0.9           # not released by rank 1's early second token
    assert second > first + 0.4         # released only by rank 2's second token


# -- set-up collectives ---------------------------------------------------------------------
LATE_RANK = r"""
import os, time
import numpy as np
from omtl_mpi.comm.mpi import MpiWorld
world = MpiWorld()
world.barrier()
if world.rank == 2:
    time.sleep(1.5)                             # loading its tasks, say
cpu = time.process_time()
values = world.agree(world.rank * 10)
rows = world.gather_rows(np.full((1, 2), float(world.rank)))
world.barrier()
line = f"{world.rank} {time.process_time() - cpu} {values} {None if rows is None else rows.tolist()}"
os.write(1, (line + "\n").encode())            # one write: the ranks share the pipe
"""


def test_ranks_that_wait_in_a_set_up_collective_leave_the_cpu_to_the_late_one(mpiexec):
    # MPI's own collectives poll: an early rank would spin for the whole 1.5 s
    r = subprocess.run([MPIEXEC, "-n", "3", sys.executable, "-c", LATE_RANK], capture_output=True,
                       text=True, timeout=TIMEOUT, env=_env())
    assert r.returncode == 0, r.stderr
    lines = sorted(r.stdout.splitlines())
    assert len(lines) == 3
    for line in lines:
        rank, cpu, rest = line.split(" ", 2)
        assert rest.startswith("[0, 10, 20]")
        if rank == "0":
            assert rest.endswith("[[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]")
        if rank != "2":
            assert float(cpu) < 0.5, line          # asleep, not polling


class OneRank:
    """The few communicator calls Doorbells makes, for a job of one rank."""

    def Get_rank(self):
        return 0

    def Get_size(self):
        return 1

    def bcast(self, value, root=0):
        return value

    def allgather(self, value):
        return [value]

    def Barrier(self):
        pass


def test_a_rank_can_ring_and_wait_and_leaves_no_files(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)
    from omtl_mpi.fast.doorbell import Doorbells
    bells = Doorbells(OneRank(), ring=[0], listen=[0], watchdog=0)
    assert list(tmp_path.iterdir()) == []          # the FIFOs are gone once open
    for _ in range(3):
        bells.ring_all()
    for _ in range(3):
        bells.wait_all()
    bells.close()
    bells.close()


def test_watchdog_turns_a_vanished_peer_into_an_error():
    from omtl_mpi.fast.doorbell import Doorbells, PeerLost, _Watchdog
    peer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    bells = Doorbells(OneRank(), ring=[], listen=[0], watchdog=0)
    bells._watch = _Watchdog(bells._fd, {4: peer.pid}, 0.05)
    try:
        os.kill(peer.pid, signal.SIGKILL)
        peer.wait()
        t0 = time.monotonic()
        with pytest.raises(PeerLost, match=f"rank 4 \\(process {peer.pid}\\) on this node has "
                                           "exited"):
            bells.wait_all()
        assert time.monotonic() - t0 < 5
    finally:
        bells.close()
