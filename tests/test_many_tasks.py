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
from omtl_mpi.runtime.simulate import simulate


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


def test_learn_one_steps_one_task_of_many(rows_seen):
    m = omtl_mpi.CADMM(n_tasks=100_000, n_features=5)
    for t in range(20):
        m.learn_one(np.full(5, 0.1 * (t + 1)), 1 if t % 2 else -1, task=t * 997 % 100_000)
    assert rows_seen == [1] * 20
    assert m.n_seen_.sum() == 20


def test_c_admm_messages_do_not_grow_with_the_tasks():
    """With Omega fixed (the defaults) a worker sends d + 3 + d^2 numbers and gets as many
    back, however many tasks it holds; the paper's model sends its tasks' rows."""
    d, p = 10, AdmmParams()
    for kb in (1, 100, 100_000):
        assert CAdmmWorker.up_size(p, 400_000, kb, d) == d + 3 + d * d
        assert CAdmmWorker.down_size(p, 400_000, kb, d) == d + 3 + d * d
    paper = AdmmParams.paper()
    assert CAdmmWorker.up_size(paper, 400_000, 1000, d) == 1000 * d
    assert CAdmmWorker.down_size(paper, 400_000, 1000, d) == 1001 * d


def test_d_admm_tables_hold_a_row_per_node():
    """D-ADMM with Omega fixed gossips a row per node (its block's sums, d^2 + d + 4 numbers
    with the vote), not a row per task."""
    from omtl_mpi.algorithms.dadmm import DAdmmNode
    from omtl_mpi.topology import generate
    topo = generate("ring", 4)
    node = DAdmmNode(AdmmParams().resolved(10), 100_000, 10, 0, 25_000, topo, 0)
    assert node.message.size == 4 * (1 + 10 + 3 + 100)
    paper = DAdmmNode(AdmmParams.paper().resolved(10), 1000, 10, 0, 250, topo, 0)
    assert paper.message.size == 4 * 1 + 1000 * 2 * 10


@pytest.mark.parametrize("name", ["c-admm", "d-admm"])
def test_skewed_streams_in_one_process_equal_mpiexec_layouts(name):
    """Blocks of unequal activity: one block holding every task and four blocks give the
    same predictions (the in-process == MPI equivalence is tests/test_equivalence.py's)."""
    X, y, _ = skewed_streams()
    if name == "c-admm":
        a, _ = simulate(name, X, y)
    else:
        a, _ = simulate(name, X, y, nodes=4, topology="full")
        b, _ = simulate("c-admm", X, y)
        for p, q in zip(a, b):
            np.testing.assert_array_equal(p, q)
    assert all(len(p) == len(t) for p, t in zip(a, y))


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
    """What a run of the defaults keeps grows with K d (and K d^2 for the arow w-step), never
    K^2: a million tasks of 10 weights need about 1.4 GB, and DROM's K x K is named."""
    from omtl_mpi.options import run_config
    from omtl_mpi.runtime.run import model_bytes
    parts = model_bytes(run_config({}), 1_000_000, 10, 1, "server")
    assert sum(b for b, _ in parts) < 1_000_000 * 10 * 8 * 30
    drom = model_bytes(run_config({"algo": "drom"}), 100_000, 10, 1, "server")
    assert max(drom)[0] >= 100_000 ** 2 * 8 and "100000 x 100000" in max(drom)[1]
