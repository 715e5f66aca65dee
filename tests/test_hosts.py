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


@pytest.mark.mpi
def test_a_job_whose_host_file_names_several_hosts_but_run_on_one_says_so(mpiexec, tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("# the cluster\nnodea:2\nnodeb\n")
    env = {**_env(), "HYDRA_HOST_FILE": str(hosts)}
    # mpiexec's fork launcher starts every rank here, whatever the host file names
    cmd = [MPIEXEC, "-launcher", "fork", "-n", "3", sys.executable, "-m", "mpi4py", "-m",
           "omtl_mpi", "run", "--synth-samples", "50", "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=env)
    assert r.returncode == 0, r.stderr
    notices = [line for line in r.stderr.splitlines() if "names 2 hosts" in line]
    assert len(notices) == 1 and f"all 3 ranks run on {socket.gethostname()}" in notices[0], r.stderr


def _bytes(path):
    with h5py.File(path) as f:
        return f["timing/bytes"][()], f["timing/peer_bytes"][()]


@pytest.mark.mpi
@pytest.mark.parametrize("options, up, down", [
    # docs/ALGORITHMS.md section 2.5, per worker of kb tasks, d weights (float64):
    # the defaults with fewer tasks than features: up the change of the sum of c_k (d), the
    # experts' 3 mistakes and its tasks' models (kb d); down u (d), 3 totals, kb d related models
    ([], lambda kb, d: d + 3 + kb * d, lambda kb, d: d + 3 + kb * d),
    # the paper's protocol: up its tasks' c_k (kb d); down u and its tasks' v_k ((kb + 1) d)
    (["--preset", "paper"], lambda kb, d: kb * d, lambda kb, d: (kb + 1) * d),
])
def test_the_bytes_counted_are_the_message_sizes_the_manual_gives(mpiexec, tmp_path, options,
                                                                  up, down):
    out = tmp_path / "run.h5"
    r = omtl("run", "--synth-tasks", "5", "--synth-samples", "100", *options, "--out", out,
             "--json", np_ranks=3, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    traffic, peers = _bytes(out)
    d = report["dim"]
    blocks = [(0, 3), (3, 5)]                       # the two workers' tasks
    for rank, (a, b) in enumerate(blocks, start=1):
        assert (traffic[rank, :, 0] == 8 * up(b - a, d)).all()
        assert (traffic[rank, :, 1] == 8 * down(b - a, d)).all()
        assert peers[rank, 0].tolist() == [8 * up(b - a, d) * 100, 8 * down(b - a, d) * 100]
        assert peers[0, rank].tolist() == [8 * down(b - a, d) * 100, 8 * up(b - a, d) * 100]
    assert (traffic[0, :, 1] == traffic[1:, :, 0].sum(axis=0)).all()
    assert report["bytes_per_round"][1] == [8.0 * up(3, d), 8.0 * down(3, d)]


@pytest.mark.mpi
def test_a_d_admm_node_sends_its_table_to_each_neighbour_once_a_round(mpiexec, tmp_path):
    out = tmp_path / "run.h5"
    r = omtl("run", "--algo", "d-admm", "--topology", "ring", "--synth-tasks", "4",
             "--synth-samples", "100", "--out", out, np_ranks=4, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    traffic, peers = _bytes(out)
    table = traffic[0, 0, 0] / 2                    # two neighbours on a ring
    assert table > 0 and (traffic[:, :, 0] == 2 * table).all() and (traffic[:, :, 1] == 2 * table).all()
    ring = {0: (1, 3), 1: (0, 2), 2: (1, 3), 3: (0, 2)}
    for rank, nb in ring.items():
        for q in range(4):
            assert peers[rank, q].tolist() == ([table * 100] * 2 if q in nb else [0.0, 0.0])


def test_one_process_sends_nothing(capsys, tmp_path):
    out = tmp_path / "run.h5"
    code, stdout, _ = cli(capsys, "run", "--synth-samples", "50", "--out", out, "--json")
    assert code == 0 and json.loads(stdout)["bytes_per_round"] == [[0.0, 0.0]]
    traffic, peers = _bytes(out)
    assert not traffic.any() and not peers.any()
