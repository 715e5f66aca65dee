"""Many tasks (docs/ALGORITHMS.md sections 1 and 4.1): a round touches only the tasks with an
instance in it, the messages and the shared work do not grow with K, and nothing K x K is
formed."""
import numpy as np
import pytest

import omtl_mpi
from omtl_mpi.algorithms.admm import AdmmParams
from omtl_mpi.algorithms.cadmm import CAdmmWorker
from omtl_mpi.algorithms.wsteps import ArowStep
from omtl_mpi.data.rounds import RoundLayout, rounds_needed
from support.drive import simulate


def skewed_streams(K=40, d=4, seed=0):
    """One long stream and many short ones, as per-customer streams are."""
    rng = np.random.default_rng(seed)
    lengths = np.concatenate(([60], rng.integers(1, 8, size=K - 1)))
    X = [rng.normal(size=(n, d)) for n in lengths]
    y = [np.where(x[:, 0] >= 0, 1, -1) for x in X]
    return X, y, lengths


@pytest.fixture
def rows_seen(monkeypatch):
    """How many tasks' rows the arow w-step was given, round by round."""
    seen = []
    step = ArowStep.step

    def counting(self, W, *args):
        seen.append(W.shape[0])
        return step(self, W, *args)
    monkeypatch.setattr(ArowStep, "step", counting)
    return seen


@pytest.mark.parametrize("name, kw", [("c-admm", {}), ("d-admm", {"nodes": 4, "topology": "ring"}),
                                      ("admm-single", {})])
def test_a_round_steps_only_its_active_tasks(name, kw, rows_seen):
    X, y, lengths = skewed_streams()
    simulate(name, X, y, **kw)
    T = int(lengths.max())
    active = [int((lengths > t).sum()) for t in range(T)]
    if name == "d-admm":            # four nodes: each steps its own active tasks
        assert sum(rows_seen) == sum(active)
    else:
        assert rows_seen == active
    assert sum(rows_seen) == lengths.sum()        # one task-step per instance, none more


def test_the_layout_holds_only_active_tasks():
    _, y, lengths = skewed_streams()
    layout = RoundLayout(lengths, 1, int(lengths.max()), 4)
    assert layout.n_slots == lengths.sum()        # no padding of ended streams
    assert layout.active_counts.tolist() == [int((lengths > t).sum()) for t in range(60)]
    layout3 = RoundLayout(lengths, 3, rounds_needed(lengths, 3), 4)
    assert layout3.n_slots == 3 * (-(-lengths // 3)).sum()


@pytest.mark.parametrize("batch", [1, 3])
def test_every_rounds_instances_are_counted_from_the_lengths(batch):
    from omtl_mpi.data.rounds import round_instances
    _, _, lengths = skewed_streams()
    T = rounds_needed(lengths, batch)
    expected = [int(np.minimum(batch, np.maximum(0, lengths - t * batch)).sum()) for t in range(T)]
    assert round_instances(lengths, batch, T).tolist() == expected
    assert round_instances([], batch, 0).tolist() == []


@pytest.mark.parametrize("batch", [1, 3])
def test_the_empirical_bayes_statistics_travel_only_for_a_new_prior(batch, monkeypatch):
    """Skewed streams, more tasks than features: planned by every round's instances (or,
    unplanned, in one block of every task, by its own), a worker computes the expert's d x d
    statistics only in the rounds that end in a new estimate of the prior, and the
    predictions are the same."""
    from omtl_mpi.algorithms import bayes, mixture
    computed, estimates = [], []
    # C-ADMM's expert has the mixture prior (d <= mixture.MAX_DIM here)
    statistics, set_totals = bayes.EmpiricalBayes.statistics, mixture.MixtureBayes.set_totals

    def counting(self, bound=None):
        out = statistics(self, bound)
        computed[-1].append(bool(out[:-2].any()))
        return out

    def estimating(self, totals):
        at = self.estimated_at
        set_totals(self, totals)
        estimates[-1].append(self.estimated_at != at)
    monkeypatch.setattr(bayes.EmpiricalBayes, "statistics", counting)
    monkeypatch.setattr(mixture.MixtureBayes, "set_totals", estimating)
    X, y, _ = skewed_streams(K=60)
    runs = []
    for planned in (True, False):
        computed.append([])
        estimates.append([])
        runs.append(simulate("c-admm", X, y, batch=batch, planned=planned)[0])
    assert computed[0] == estimates[0] and 2 < sum(estimates[0]) < len(estimates[0]) // 2
    assert computed[1] == computed[0] and estimates[1] == estimates[0]
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)


def test_a_worker_bounds_a_rounds_instances_by_what_every_rank_knows():
    """The plan's count; unplanned, a block of part of the tasks (one of several ranks) can
    only bound the round by B instances of every task, a block of all of them counts its own."""
    params = AdmmParams().resolved(10)
    y = np.array([[1.0, -1.0, 0.0], [1.0, 0.0, 0.0]])           # B = 2, 3 active tasks
    part, whole = CAdmmWorker(params, 40, 3, 0, 10), CAdmmWorker(params, 40, 3, 0, 40)
    assert part._bound(0, y) == 80.0 and whole._bound(0, y) == 3.0
    part.plan([5, 7, 9], first_round=1)
    assert part._bound(1, y) == 7.0 and part._bound(2, y) == 9.0 and part._bound(3, y) == 80.0


def test_learn_one_steps_one_task_of_many(rows_seen):
    m = omtl_mpi.CADMM(n_tasks=100_000, n_features=5)
    for t in range(20):
        m.learn_one(np.full(5, 0.1 * (t + 1)), 1 if t % 2 else -1, task=t * 997 % 100_000)
    assert rows_seen == [1] * 20
    assert m.n_seen_.sum() == 20


def test_c_admm_messages_do_not_grow_with_the_tasks():
    """With Omega fixed (the defaults) a worker sends d + 4 + d^2 + (2 d^2 + d + 2) numbers
    (its sums, four experts' mistakes, H's change and the empirical-Bayes statistics) and gets
    as many back, however many tasks it holds; the paper's model sends its tasks' rows."""
    d, p = 10, AdmmParams()
    for kb in (1, 100, 100_000):
        assert CAdmmWorker.up_size(p, 400_000, kb, d) == d + 4 + d * d + 2 * d * d + d + 2
        assert CAdmmWorker.down_size(p, 400_000, kb, d) == d + 4 + d * d + 2 * d * d + d + 2
    paper = AdmmParams.paper()
    assert CAdmmWorker.up_size(paper, 400_000, 1000, d) == 1000 * d
    assert CAdmmWorker.down_size(paper, 400_000, 1000, d) == 1001 * d


def test_d_admm_tables_hold_a_row_per_node(monkeypatch):
    """D-ADMM with Omega fixed gossips a row per node (its block's sums, 1 + d + 4 + d^2
    numbers with the vote, and 2 d^2 + d + 2 more for the empirical-Bayes expert's Gaussian
    prior; its mixture prior's sums go over the graph only in the rounds of an estimate), not
    a row per task."""
    from omtl_mpi.algorithms import mixture
    from omtl_mpi.algorithms.dadmm import DAdmmNode
    from omtl_mpi.topology import generate
    topo = generate("ring", 4)
    node = DAdmmNode(AdmmParams().resolved(10), 100_000, 10, 0, 25_000, topo, 0)
    assert node.message.size == 4 * (1 + 10 + 4 + 100)
    assert node.sums is not None
    monkeypatch.setattr(mixture, "GROUPS", 1)
    node = DAdmmNode(AdmmParams().resolved(10), 100_000, 10, 0, 25_000, topo, 0)
    assert node.message.size == 4 * (1 + 10 + 4 + 100 + 212)
    assert node.sums is None
    paper = DAdmmNode(AdmmParams.paper().resolved(10), 1000, 10, 0, 250, topo, 0)
    assert paper.message.size == 4 * 1 + 1000 * 2 * 10


@pytest.mark.parametrize("groups", [8, 1])
def test_skewed_streams_d_admm_on_a_full_graph_equals_c_admm(monkeypatch, groups):
    """Four nodes of unequal activity on a full graph learn as C-ADMM's one block (spec
    equivalence 5), with the empirical-Bayes expert's mixture prior (its sums over the nodes,
    planned or not) and with its Gaussian prior (GROUPS = 1: the table's rows)."""
    from omtl_mpi.algorithms import mixture
    monkeypatch.setattr(mixture, "GROUPS", groups)
    X, y, _ = skewed_streams()
    b, rows = simulate("c-admm", X, y)
    for planned in (True, False):
        a, node_rows = simulate("d-admm", X, y, nodes=4, topology="full", planned=planned)
        assert all(len(p) == len(t) for p, t in zip(a, y))
        for p, q in zip(a, b):
            np.testing.assert_array_equal(p, q)
        np.testing.assert_allclose(node_rows["W"], rows["W"], rtol=0, atol=1e-10)


@pytest.mark.parametrize("graph", ["ring", "star"])
def test_d_admm_nodes_hold_one_mixture_on_any_graph(graph):
    """With the mixture prior, every node of a graph holds the same mixture, to the bit, and
    it is C-ADMM's (the EM steps' sums cover every node)."""
    from omtl_mpi.algorithms import mixture
    from omtl_mpi.engine import build
    from omtl_mpi.algorithms import registry
    from omtl_mpi.comm.clock import PhaseClock
    from omtl_mpi.data.rounds import RoundLayout, round_instances, rounds_needed
    from omtl_mpi.topology import load_topology
    X, y, _ = skewed_streams()
    K, d = len(X), X[0].shape[1]
    lengths = [len(t) for t in y]
    T = rounds_needed(lengths, 1)

    def run(name, nodes, topology):
        algo = registry.get(name)
        params = algo.params().resolved(T)
        topo = load_topology(topology, nodes) if topology else None
        roles = build(algo, params, K, d, topology=topo, nodes=nodes)
        layouts = []
        for a, b in roles.blocks:
            layout = RoundLayout(lengths[a:b], 1, T, d)
            layout.fill(0, np.concatenate(X[a:b]), np.concatenate(y[a:b]), lengths[a:b])
            layouts.append(layout)
        roles.run(layouts, PhaseClock(T), instances=round_instances(lengths, 1, T))
        return [h.block.bayes for h in roles.holders]

    ring = run("d-admm", 4, graph)
    (one,) = run("c-admm", 1, None)
    assert all(isinstance(b, mixture.MixtureBayes) for b in ring + [one])
    assert one.estimated_at > 0 and one._width == mixture.GROUPS
    for node in ring:
        np.testing.assert_array_equal(node.centres_, ring[0].centres_)
        np.testing.assert_array_equal(node._V, ring[0]._V)
        assert node.estimated_at == one.estimated_at
    np.testing.assert_allclose(ring[0].centres_, one.centres_, rtol=1e-9, atol=1e-12)


@pytest.mark.mpi
def test_skewed_streams_four_workers_equal_one_process(mpiexec, tmp_path):
    """C-ADMM's four workers, whose blocks have unequal activity (one long stream, many short
    ones ending at different rounds), learn as the one process's single block."""
    from conftest import assert_in_process_equals_mpiexec
    from omtl_mpi.data import write_tasks
    X, y, _ = skewed_streams()
    path = tmp_path / "skewed.h5"
    write_tasks(path, [f"c{k}" for k in range(len(X))], X, y)
    for extra in ([], ["--batch", "3"]):
        assert_in_process_equals_mpiexec(["--data", path, *extra], [], 5, tmp_path,
                                         ("W", "Z", "V", "u"))


# ---------------------------------------------------------------- 10,000 tasks, end to end
@pytest.fixture(scope="module")
def ten_thousand(tmp_path_factory):
    """10,000 tasks of unequal streams (10 to 40 instances), written as a task file."""
    from omtl_mpi.data import write_tasks
    rng = np.random.default_rng(0)
    K, d = 10_000, 6
    lengths = rng.integers(10, 41, size=K)
    centre = rng.normal(size=d)
    X = [rng.normal(size=(n, d)) for n in lengths]
    y = [np.where(x @ (centre + 0.5 * rng.normal(size=d)) >= 0, 1, -1) for x in X]
    path = tmp_path_factory.mktemp("many") / "k10000.h5"
    write_tasks(path, [f"c{k}" for k in range(K)], X, y)
    return path


@pytest.mark.mpi
@pytest.mark.parametrize("algo, ranks", [("c-admm", 3), ("d-admm", 4)])
def test_ten_thousand_tasks_in_process_equal_mpiexec(mpiexec, tmp_path, ten_thousand, algo, ranks):
    """Spec equivalence 1 at 10,000 tasks: the same predictions and mistakes, W, Z, V and u to
    1e-10, in one process and under mpiexec."""
    from conftest import assert_in_process_equals_mpiexec
    local = ["--nodes", str(ranks)] if algo == "d-admm" else []
    args = ["--data", ten_thousand, "--algo", algo, "--seed", "1"]
    a = assert_in_process_equals_mpiexec(args, local, ranks, tmp_path,
                                         ("W", "Z", "V", "u" if algo == "c-admm" else "node_u"))
    assert len(a["tasks/offsets"]) == 10_001 and a["predictions"].shape == (a["tasks/offsets"][-1],)


@pytest.mark.mpi
def test_ten_thousand_tasks_resume_bit_for_bit(mpiexec, tmp_path, ten_thousand):
    """Killed under mpiexec after a checkpoint and resumed, a run of 10,000 tasks ends with the
    bits of the run left alone."""
    import h5py
    from conftest import omtl, read_results
    args = ["--data", ten_thousand, "--seed", "2"]
    full, part = tmp_path / "full.h5", tmp_path / "part.h5"
    assert omtl("run", *args, "--out", full, np_ranks=3).returncode == 0
    r = omtl("run", *args, "--out", part, "--checkpoint-every", "10", "--fail-at", "25",
             "--fail-rank", "2", "--fail-mode", "kill", np_ranks=3, timeout=90)
    assert r.returncode != 0 and not part.exists()
    with h5py.File(tmp_path / "part.ckpt.h5") as f:
        assert f.attrs["round"] == 20
    r = omtl("run", *args, "--out", part, "--resume", tmp_path / "part.ckpt.h5", np_ranks=3)
    assert r.returncode == 0, r.stderr
    a, b = read_results(full), read_results(part)
    for key in a:
        if key != "attrs":
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_the_defaults_need_nothing_k_by_k():
    """What a run of the defaults keeps grows with K d^2 (the arow w-step's matrix and the
    empirical-Bayes expert's two per task), never K^2: twice the tasks, twice the bytes, and a
    million tasks of 10 weights about 5.3 GB; DROM's K x K is named."""
    from omtl_mpi.options import run_config
    from omtl_mpi.runtime.run import model_bytes
    total = {K: sum(part.bytes for part in model_bytes(run_config({}), K, 10, 1, "server"))
             for K in (1_000_000, 2_000_000)}
    assert abs(total[2_000_000] - 2 * total[1_000_000]) < 10**6     # the messages: O(d^2)
    assert total[1_000_000] < 1_000_000 * (30 * 10 + 7 * 10 * 10) * 8
    drom = model_bytes(run_config({"algo": "drom"}), 100_000, 10, 1, "server")
    assert max(drom).bytes >= 100_000 ** 2 * 8 and "100000 x 100000" in max(drom).what


def test_a_task_starts_from_the_shared_model():
    """A task without an instance yet predicts with u, and its first step starts there (the
    point the spec's rounds without instances would take it to, were u to stay as it is); the
    rows of the tasks that have learned are not touched."""
    rng = np.random.default_rng(3)
    m = omtl_mpi.CADMM(n_tasks=50, n_features=3, experts=False)
    w_true = np.array([1.0, -2.0, 0.5])
    for t in range(60):
        x = rng.normal(size=3)
        m.learn_one(x, 1 if x @ w_true >= 0 else -1, task=t % 10)
    x = rng.normal(size=3)
    u = m.u_
    np.testing.assert_array_equal(m.W_[40], u)
    assert m.decision_one(x, task=40) == pytest.approx(np.append(x, 1.0) @ u, abs=1e-12)
    before = m.W_
    m.learn_one(x, 1, task=40)
    after = m.W_
    np.testing.assert_array_equal(after[:10], before[:10])     # the tasks that have learned
    np.testing.assert_array_equal(after[10:40], np.broadcast_to(m.u_, (30, 4)))   # still at u
    assert not np.array_equal(after[40], u)


def test_new_tasks_among_many_learn_from_the_others():
    """20,000 tasks of one problem, one instance at a time to a random task: nearly every
    instance is its task's first, so what the others learned must carry over (a task
    starting from zero predicts +1, about half wrong)."""
    rng = np.random.default_rng(0)
    K, d = 20_000, 5
    w_true = rng.normal(size=d)
    m, wrong = omtl_mpi.CADMM(n_tasks=K, n_features=d), []
    for _ in range(1500):       # the last 1,000 about 0.015 wrong, as after 3,000 calls
        k, x = int(rng.integers(K)), rng.normal(size=d)
        y = 1 if x @ w_true >= 0 else -1
        wrong.append(m.predict_one(x, task=k) != y)
        m.learn_one(x, y, task=k)
    assert np.mean(wrong[-1000:]) < 0.15


def test_the_summary_of_many_tasks_lists_their_ends():
    """A run of more than 100 tasks prints its first and last 5 tasks, as 'data info' does,
    and says where the others are; --json keeps them all."""
    from conftest import omtl_forked as omtl
    r = omtl("run", "--synth-tasks", "150", "--synth-samples", "3")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    start = lines.index(f"{'task':<24}{'cumulative error':>18}")
    listed = lines[start + 1:lines.index(next(x for x in lines if x.startswith("mean ")))]
    assert [x.split()[0] for x in listed if "..." not in x] == [
        f"task{k}" for k in (0, 1, 2, 3, 4, 145, 146, 147, 148, 149)]
    assert ("  ... 140 more tasks (every task's error: --json, or the results file's "
            "/metrics/per_task_error)") in listed
    r = omtl("run", "--synth-tasks", "150", "--synth-samples", "3", "--json")
    assert len(__import__("json").loads(r.stdout)["per_task_error"]) == 150
