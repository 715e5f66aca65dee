"""Ranks that wait: the transport recorded in the report, every rank's CPU time per round, and
set-up collectives that leave the CPU to the rank still working (comm/waiting.py)."""
import json
import subprocess
import sys

import numpy as np

from conftest import MPIEXEC, TIMEOUT, _env, omtl

SMALL = ["--synth-samples", "400", "--no-progress"]


def test_the_report_says_how_the_messages_travelled(mpiexec):
    r = omtl("run", *SMALL, "--json", np_ranks=3)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["transport"] == "mpi"
    r = omtl("run", *SMALL, np_ranks=3)
    assert "transport mpi: MPI messages, waiting ranks yield, then sleep" in r.stdout
    r = omtl("run", *SMALL, "--json")
    assert json.loads(r.stdout)["transport"] == "local"


def test_every_rank_reports_the_cpu_it_used_during_the_rounds(mpiexec, tmp_path):
    import h5py
    r = omtl("run", "--synth-samples", "1500", "--no-progress", "--json",
             "--out", tmp_path / "r.h5", np_ranks=3)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    cpu = report["cpu_ms_per_round"]
    assert len(cpu) == 3 and min(cpu) > 0
    # the rounds only, not the start-up: one thread cannot use more CPU than the rounds lasted
    assert max(cpu) < 1.25 * report["ms_per_round"] + 0.02
    with h5py.File(tmp_path / "r.h5") as f:
        np.testing.assert_allclose(f["timing/cpu_seconds"][()] * 1000.0 / report["rounds"], cpu)
    r = omtl("run", "--synth-samples", "300", "--no-progress", np_ranks=3)
    assert "CPU per round, all ranks together:" in r.stdout


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
