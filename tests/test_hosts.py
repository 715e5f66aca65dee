"""The job knows where its ranks ran: each rank's host and shared-memory group, ranks per host,
the MPI library and the transport settings, in the JSON report, the summary and the results."""
import json
import socket
import subprocess
import sys

import h5py
import pytest

from conftest import MPIEXEC, TIMEOUT, _env, cli, omtl


def test_one_process_names_its_host_and_no_mpi(capsys):
    code, out, _ = cli(capsys, "run", "--synth-samples", "50", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["hosts"] == [socket.gethostname()]
    assert report["ranks_per_host"] == {socket.gethostname(): 1}
    assert report["mpi_library"] == "none (one process)"
    assert report["shared_memory_across_hosts"] == []


@pytest.mark.mpi
def test_every_rank_says_its_host_library_and_shared_memory_group(mpiexec, tmp_path):
    out = tmp_path / "run.h5"
    r = omtl("run", "--synth-samples", "100", "--out", out, "--json", np_ranks=3, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    host = socket.gethostname()
    assert report["hosts"] == [host] * 3 and report["ranks_per_host"] == {host: 3}
    assert report["mpi_library"].startswith(("MPICH Version", "Open MPI"))
    with h5py.File(out) as f:
        assert [h.decode() for h in f["timing/hosts"][()]] == [host] * 3
        assert f["timing/shm_group"][()].tolist() == [0, 0, 0]       # one machine: one group
        assert f.attrs["mpi_library"] == report["mpi_library"]


@pytest.mark.mpi
def test_a_job_given_several_nodes_but_run_on_one_says_so(mpiexec):
    env = {**_env(), "SLURM_JOB_NUM_NODES": "2"}
    cmd = [MPIEXEC, "-n", "2", sys.executable, "-m", "mpi4py", "-m", "omtl_mpi", "run",
           "--synth-samples", "50", "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=env)
    assert r.returncode == 0, r.stderr
    notices = [line for line in r.stderr.splitlines() if "was given 2 nodes" in line]
    assert len(notices) == 1 and "all 2 ranks run on" in notices[0], r.stderr
