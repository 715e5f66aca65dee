"""D-ADMM and D-PSGD: spec equivalence 2, in-process == MPI, gossip stamps, topology errors."""
from collections import deque

import h5py
import numpy as np
import pytest

from conftest import omtl_forked as omtl, read_results
from omtl_mpi.algorithms.admm import AdmmParams
from omtl_mpi.algorithms.dadmm import DAdmmNode
from omtl_mpi.comm.clock import PhaseClock
from omtl_mpi.comm.graph import LocalGraph
from omtl_mpi.topology import generate

SAME_EVERY_RUN = ("W", "Z", "V", "u")


def run_file(tmp_path, name, *args, np_ranks=None):
    out = tmp_path / f"{name}.h5"
    r = omtl("run", *args, "--out", out, np_ranks=np_ranks)
    assert r.returncode == 0, r.stderr
    return read_results(out)


def assert_same_predictions(a, b, models=("W", "Z", "V", "u"), atol=1e-10):
    for key in ("predictions", "metrics/mistakes"):
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    for name in models:
        np.testing.assert_allclose(a[f"model/{name}"], b[f"model/{name}"], rtol=0, atol=atol, err_msg=name)


@pytest.mark.parametrize("extra", [["--variant", "exact"], ["--variant", "paper"],
                                   ["--loss", "logistic", "--no-relationship"],
                                   # --relationship: without it --omega-every does nothing
                                   ["--loss", "perceptron", "--batch", "3", "--relationship",
                                    "--omega-every", "4"]])
def test_dadmm_full_equals_cadmm_in_process(small_tasks, tmp_path, extra):
    c = run_file(tmp_path, "c", "--data", small_tasks, *extra)
    d = run_file(tmp_path, "d", "--data", small_tasks, *extra, "--algo", "d-admm", "--topology", "full")
    assert_same_predictions(c, d)


@pytest.mark.mpi
def test_dadmm_full_equals_cadmm_under_mpi(mpiexec, small_tasks, tmp_path):
    omega = ["--relationship", "--omega-every", "2"]        # Omega learned, every other round
    c = run_file(tmp_path, "c", "--data", small_tasks, *omega)
    d = run_file(tmp_path, "d", "--data", small_tasks, *omega, "--algo", "d-admm",
                 "--topology", "full", np_ranks=5)
    assert np.abs(c["model/omega"] - np.eye(5) / 5).max() > 1e-2
    assert_same_predictions(c, d)
    with h5py.File(tmp_path / "d.h5") as f:
        assert f["timing/staleness"].shape == (5, 120)
        assert f["timing/staleness"][()].max() == 0.0


# D-ADMM on 3 nodes of the (default) ring, and D-PSGD on 5, in one process and under mpiexec:
# tests/test_algorithm_checks.py::test_in_process_equals_mpiexec (every model array)
@pytest.mark.mpi
@pytest.mark.parametrize("ranks, topology", [(5, "ring"), (4, "star")])
def test_dadmm_in_process_equals_mpi(mpiexec, small_tasks, tmp_path, ranks, topology):
    args = ["--data", small_tasks, "--algo", "d-admm", "--topology", topology]
    a = run_file(tmp_path, "a", *args, "--nodes", ranks)
    b = run_file(tmp_path, "b", *args, np_ranks=ranks)
    assert_same_predictions(a, b, models=("W", "Z", "V", "node_u", "node_omega"))
    assert a["metrics/mistakes"].sum() > 0


def test_dpsgd_is_the_mixing_step():
    """One round by hand: w_k <- sum_j M_kj w_j - gamma_1 g_k, g at the pre-mixing w."""
    from omtl_mpi.algorithms.dpsgd import DpsgdParams, DPsgdNode
    topo = generate("ring", 4)
    rng = np.random.default_rng(0)
    nodes = [DPsgdNode(DpsgdParams(gamma0=0.5), 4, 3, k, k + 1, topo, k) for k in range(4)]
    W0 = rng.normal(size=(4, 3))
    for k, n in enumerate(nodes):
        n.w = W0[k:k + 1].copy()
    X = rng.normal(size=(4, 1, 1, 3))
    y = np.array([1, -1, 1, -1], dtype=np.int8).reshape(4, 1, 1)
    for k, n in enumerate(nodes):
        n.local_step(X[k], y[k], np.ones(1))
    received = LocalGraph(topo).exchange([n.message for n in nodes], PhaseClock(1))
    for k, n in enumerate(nodes):
        n.merge(received[k])
    M = topo.mixing_matrix()
    margins = np.einsum("kd,kd->k", W0, X[:, 0, 0])
    G = np.where(y[:, 0, 0] * margins < 1, -y[:, 0, 0], 0)[:, None] * X[:, 0, 0]
    np.testing.assert_allclose(np.vstack([n.w for n in nodes]), M @ W0 - 0.5 * G, atol=1e-14)


def hops(topo, source):
    dist, queue = {source: 0}, deque([source])
    while queue:
        v = queue.popleft()
        for w in topo.neighbours(v):
            if w not in dist:
                dist[w] = dist[v] + 1
                queue.append(w)
    return dist


@pytest.mark.parametrize("kind", ["ring", "full", "star"])
def test_rows_from_h_hops_are_h_minus_1_rounds_old(kind):
    K, d = 8, 3
    topo = generate(kind, K)
    params = AdmmParams(eta=5.0)
    nodes = [DAdmmNode(params, K, d, k, k + 1, topo, k) for k in range(K)]
    comm = LocalGraph(topo)
    rng = np.random.default_rng(0)
    for t in range(1, 12):
        for n in nodes:
            n.local_step(rng.normal(size=(1, 1, d)), np.ones((1, 1), dtype=np.int8), np.ones(1))
        received = comm.exchange([n.message for n in nodes], PhaseClock(1))
        staleness = [n.merge(r) for n, r in zip(nodes, received)]
        for n in nodes:
            n.finish_round()
        if t > topo.diameter:
            for i, n in enumerate(nodes):
                dist = hops(topo, i)
                expected = [t if j == i else t - (dist[j] - 1) for j in range(K)]
                np.testing.assert_array_equal(n.stamps, expected)
                assert staleness[i] == pytest.approx(np.mean([t - e for e in expected]))
            if kind == "full":
                assert max(staleness) == 0.0


@pytest.mark.parametrize("args, message", [
    (["--topology", "hexagon"], "unknown topology 'hexagon'"),
    (["--topology", "DISCONNECTED"], "is disconnected: components {0,1} and {2}"),
    (["--algo", "d-psgd", "--synth-tasks", "4"], "d-psgd runs one task per node: use 4 nodes"),
    (["--synth-tasks", "2"], "uses at most 2 nodes"),
])
@pytest.mark.mpi
def test_bad_topology_stops_every_rank(mpiexec, tmp_path, args, message):
    f = tmp_path / "disc.toml"
    f.write_text("nodes = 3\nedges = [[0, 1]]\n")
    args = [str(f) if a == "DISCONNECTED" else a for a in args]
    base = ["--algo", "d-admm", "--synth-tasks", "3", "--synth-samples", "50"]
    r = omtl("run", *base, *args, np_ranks=3, timeout=60)
    assert r.returncode == 2
    errors = [l for l in r.stderr.splitlines() if l.startswith("error:")]
    assert len(errors) == 1 and message in errors[0], r.stderr
    assert "Traceback" not in r.stderr


def test_topo_show_cli(tmp_path):
    import json
    r = omtl("topo", "show", "ring", "--nodes", "6", "--json", "--png", tmp_path / "ring.png")
    assert r.returncode == 0, r.stderr
    facts = json.loads(r.stdout)
    assert (facts["nodes"], facts["edges"], facts["diameter"]) == (6, 6, 3)
    assert facts["slem"] == pytest.approx(2 / 3)
    assert (tmp_path / "ring.png").read_bytes()[:4] == b"\x89PNG"
    r = omtl("topo", "show", "hexagon", "--nodes", "6")
    assert r.returncode == 2 and "unknown topology 'hexagon'" in r.stderr


def test_summary_reports_topology_and_staleness():
    r = omtl("run", "--algo", "d-admm", "--topology", "ring", "--synth-samples", "200", "--no-progress")
    assert r.returncode == 0, r.stderr
    assert "topology ring on 5 nodes" in r.stdout
    assert "mean staleness of the gossiped rows: 0.400 rounds" in r.stdout


SUM_NODES = """
import numpy as np
from mpi4py import MPI
from omtl_mpi.comm.clock import PhaseClock
from omtl_mpi.comm.graph import LocalGraph, MpiGraph
from omtl_mpi.topology import generate
comm = MPI.COMM_WORLD
rank, N = comm.Get_rank(), comm.Get_size()
for name in ("ring", "full", "star", "torus", "erdos-renyi"):
    topo = generate(name, N, seed=3) if name == "erdos-renyi" else generate(name, N)
    graph = MpiGraph(comm, topo, (3,))
    for n in (5, 1, 40):           # sums of several sizes through the same schedule
        parts = [np.random.default_rng([i, n]).standard_normal(n) * 10.0 ** i for i in range(N)]
        (total,) = graph.sum_nodes([parts[rank]], PhaseClock(1))
        (local, *_) = LocalGraph(topo).sum_nodes(parts, PhaseClock(1))
        assert np.array_equal(total, local), (name, n, rank)
    graph.free()
if rank == 0:
    print("ok")
"""


@pytest.mark.mpi
def test_sums_over_the_graph_reach_every_node_in_node_order(mpiexec, tmp_path):
    """MpiGraph.sum_nodes (a flood through the neighbours, diameter hops) gives every rank the
    bits of LocalGraph's sum in node order, on graphs of diameter 1 to 3, for parts of
    different sizes and magnitudes (so that another order of the additions would show)."""
    import subprocess
    import sys
    from conftest import _env
    script = tmp_path / "sums.py"
    script.write_text(SUM_NODES)
    r = subprocess.run([mpiexec, "-n", "6", sys.executable, str(script)], capture_output=True,
                       text=True, timeout=120, env=_env())
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"
