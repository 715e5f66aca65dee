"""The job knows where its ranks ran: each rank's host and shared-memory group, ranks per host,
the MPI library and the transport settings, in the JSON report, the summary and the results."""
import json
import socket
import subprocess
import sys

import h5py
import numpy as np
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


def _em_rounds(instances) -> list:
    """The rounds whose reply is followed by the mixture prior's EM exchanges, from every
    round's instances over all the tasks (docs/ALGORITHMS.md sections 2.7 and 2.8): a round ends
    in an estimate when the instances seen, N, are first > 0 and then when they reach 1.2 times
    N at the last estimate; every estimate but the first (which takes the Gaussian prior and
    draws the centres from it) runs the EM steps."""
    rounds, seen, last = [], 0, 0
    for t, n in enumerate(instances):
        seen += n
        if seen > 0 and seen >= 1.2 * last:
            if last > 0:
                rounds.append(t)
            last = seen
    return rounds


@pytest.mark.mpi
@pytest.mark.parametrize("options, fixed, mixture", [
    # docs/ALGORITHMS.md section 2.5, more tasks than features: up the change of the sum of
    # c_k (d), the experts' 4 mistakes, the change of H (d^2) and its tasks' empirical-Bayes
    # statistics (2 d^2 + d + 2); down u (d), 4 totals, H and the statistics' sums: as many
    ([], lambda d: d + 4 + d * d + (2 * d * d + d + 2), True),
    # --class-weight takes the empirical-Bayes expert out of the vote (section 2.7): 3 experts
    (["--class-weight", "balanced"], lambda d: d + 3 + d * d, False),
], ids=["defaults", "class-weight"])
def test_with_more_tasks_than_features_the_bytes_are_the_manuals_and_em_steps_add_their_sums(
        mpiexec, tmp_path, options, fixed, mixture):
    """With more tasks than features a worker's messages are the same size whatever its tasks
    (here 7 and 6), and with the empirical-Bayes expert's mixture prior (d <= 128) a round that
    ends in an estimate adds, after the reply, EM_STEPS exchanges of the E-step sums,
    G (d (d + 1) / 2 + d + 3) numbers each way (section 2.8)."""
    from omtl_mpi.algorithms.mixture import EM_STEPS, GROUPS
    K, n = 13, 30
    out = tmp_path / "run.h5"
    r = omtl("run", "--synth-tasks", K, "--synth-samples", n, *options, "--out", out, "--json",
             np_ranks=3, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    traffic, peers = _bytes(out)
    d = report["dim"]
    assert d == 10 and (not mixture or fixed(d) == 326)         # the manual's example
    per_round = np.full(n, 8.0 * fixed(d))
    em = _em_rounds([K] * n) if mixture else []
    per_round[em] += 8.0 * EM_STEPS * GROUPS * (d * (d + 1) // 2 + d + 3)
    if mixture:
        assert em == [1, 2, 3, 4, 5, 7, 9, 11, 14, 17, 21, 26]  # N = 13 (t + 1) grows by 1.2
    for rank in (1, 2):                             # tasks 0..6 and 7..12: the same sizes
        assert traffic[rank].tolist() == np.column_stack([per_round, per_round]).tolist()
        assert peers[rank, 0].tolist() == [per_round.sum()] * 2
        assert peers[0, rank].tolist() == [per_round.sum()] * 2
    assert traffic[0].tolist() == (2 * np.column_stack([per_round, per_round])).tolist()
    assert report["bytes_per_round"][1] == [per_round.mean()] * 2


def _sparse_streams(folder):
    """Five tasks of streams of different lengths, sparse instances of 30 features (about a
    tenth non-zero, some none), written as a task file; (path, every task's CSR rows)."""
    import scipy.sparse as sp
    from omtl_mpi.data.taskfile import write_tasks
    rng = np.random.default_rng(7)
    Xs, ys = [], []
    for k, n in enumerate((9, 14, 6, 12, 11)):
        X = sp.random(n, 30, density=0.1, random_state=k, format="csr")
        X.data = rng.normal(size=X.nnz)
        Xs.append(X)
        ys.append(np.where(rng.normal(size=n) >= 0, 1, -1))
    write_tasks(folder / "sparse.h5", [f"t{k}" for k in range(5)], Xs, ys)
    return folder / "sparse.h5", Xs


@pytest.mark.mpi
@pytest.mark.parametrize("batch", [1, 2])
def test_with_coordinates_nonzero_only_the_used_prefix_of_a_message_is_counted(mpiexec, tmp_path,
                                                                              batch):
    """--coordinates nonzero (docs/ALGORITHMS.md section 2.5): a message's first number says how
    much of its buffer it uses, and the bytes counted are that prefix, here computed from the
    data: per (task, coordinate) pair of a worker's round (the non-zero features of its tasks'
    instances of the round, and the intercept, each pair once), up its index, the change of
    c_k and the new w_k (3 m), after the numbers used and m and the 3 mistakes; down u's
    entries of every pair's coordinate (2 m'), every task's w_k entries (2 m''), after the
    numbers used, m' and m'', with the 3 totals and its tasks' rows of the models' Gram matrix
    and its diagonal (kb K + K). Streams that end early leave a worker rounds without pairs."""
    path, Xs = _sparse_streams(tmp_path)
    out = tmp_path / "run.h5"
    r = omtl("run", "--data", path, "--coordinates", "nonzero", "--arow-covariance", "diagonal",
             "--batch", batch, "--out", out, "--json", np_ranks=3, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    traffic, peers = _bytes(out)
    K, T = len(Xs), -(-14 // batch)
    assert report["dim"] == 31 and traffic.shape == (3, T, 2)
    blocks = [(0, 3), (3, 5)]                       # the two workers' tasks
    up, down = np.zeros((2, T)), np.zeros((2, T))
    for t in range(T):
        pairs = []                                  # every task's coordinates of the round
        for X in Xs:
            rows = X[t * batch:(t + 1) * batch]
            pairs.append(set(rows.indices.tolist()) | {"intercept"} if rows.shape[0] else set())
        m = [sum(len(pairs[k]) for k in range(a, b)) for a, b in blocks]
        every, columns = sum(m), len(set().union(*pairs))
        for w, (a, b) in enumerate(blocks):
            up[w, t] = 8 * (2 + 3 + 3 * m[w])
            down[w, t] = 8 * (3 + 3 + (b - a) * K + K + 2 * columns + 2 * every)
    assert (up[1] == 8 * 5).any()                   # a round without pairs on the second worker
    for w, rank in enumerate((1, 2)):
        assert traffic[rank, :, 0].tolist() == up[w].tolist()
        assert traffic[rank, :, 1].tolist() == down[w].tolist()
        assert peers[rank, 0].tolist() == [up[w].sum(), down[w].sum()]
        assert peers[0, rank].tolist() == [down[w].sum(), up[w].sum()]
    assert traffic[0, :, 0].tolist() == down.sum(axis=0).tolist()
    assert traffic[0, :, 1].tolist() == up.sum(axis=0).tolist()
    assert report["bytes_per_round"][1] == [up[0].mean(), down[0].mean()]


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
