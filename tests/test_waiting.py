"""Ranks that wait: the transport recorded in the report, every rank's CPU time per round, and
set-up collectives that leave the CPU to the rank still working (comm/waiting.py)."""
import json
import subprocess
import sys

import numpy as np
import pytest

from conftest import MPIEXEC, TIMEOUT, _env, omtl


@pytest.fixture(scope="module")
def three_ranks(mpiexec, tmp_path_factory):
    """Two jobs of 3 ranks that the tests below read: the JSON report and results file of one
    (1500 rounds: long enough to time), and the summary of another."""
    out = tmp_path_factory.mktemp("waiting") / "r.h5"
    as_json = omtl("run", "--synth-samples", "1500", "--no-progress", "--json", "--out", out,
                   np_ranks=3)
    assert as_json.returncode == 0, as_json.stderr
    summary = omtl("run", "--synth-samples", "300", "--no-progress", np_ranks=3)
    assert summary.returncode == 0, summary.stderr
    return json.loads(as_json.stdout), out, summary.stdout


@pytest.mark.mpi
def test_the_report_says_how_the_messages_travelled(three_ranks):
    report, _, summary = three_ranks
    assert report["transport"] == "mpi"
    assert "transport mpi: MPI messages, waiting ranks yield, then sleep" in summary
    r = omtl("run", "--synth-samples", "400", "--no-progress", "--json")
    assert json.loads(r.stdout)["transport"] == "local"


@pytest.mark.mpi
def test_every_rank_reports_the_cpu_it_used_during_the_rounds(three_ranks):
    import h5py
    report, out, summary = three_ranks
    cpu = report["cpu_ms_per_round"]
    assert len(cpu) == 3 and min(cpu) > 0
    # the rounds only, not the start-up: one thread cannot use more CPU than the rounds lasted
    assert max(cpu) < 1.25 * report["ms_per_round"] + 0.02
    with h5py.File(out) as f:
        np.testing.assert_allclose(f["timing/cpu_seconds"][()] * 1000.0 / report["rounds"], cpu)
    assert "CPU per round, all ranks together:" in summary


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


@pytest.mark.mpi
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


def test_a_round_wait_gives_up_after_the_peer_timeout_and_a_set_up_wait_does_not(monkeypatch):
    """A message that never comes within a round (a host or link down) ends the wait with
    PeerTimeout after OMTL_MPI_PEER_TIMEOUT seconds; the set-up collectives' waits (arrive),
    which wait for data to load, have no limit."""
    from types import SimpleNamespace

    from mpi4py import MPI

    from omtl_mpi.comm import waiting
    from omtl_mpi.comm.clock import PhaseClock
    monkeypatch.setattr(waiting, "PEER_TIMEOUT", 0.3)
    monkeypatch.setattr(waiting, "SPIN_SECONDS", 0.01)
    never = MPI.COMM_SELF.Irecv([np.empty(1), MPI.DOUBLE], 0, 99)
    with pytest.raises(waiting.PeerTimeout, match="in 0.3 s .OMTL_MPI_PEER_TIMEOUT.: a host or"):
        waiting.wait(never, PhaseClock(1))
    # without a round's clock the same wait goes on: it ends when the message comes
    import threading
    box = np.zeros(1)
    threading.Timer(0.6, lambda: MPI.COMM_SELF.Send([np.ones(1), MPI.DOUBLE], 0, 98)).start()
    waiting.wait(MPI.COMM_SELF.Irecv([box, MPI.DOUBLE], 0, 98), SimpleNamespace(wait=0.0))
    assert box[0] == 1.0
    never.Cancel()
    never.Wait()
