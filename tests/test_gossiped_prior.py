"""The vote's mixture prior under D-ADMM's --sync partial: every node estimates it from the
snapshots and E-step sums it finds in the gossiped table (omtl_mpi/algorithms/gossiped_prior.py,
docs/ALGORITHMS.md section 2.9)."""
import h5py
import numpy as np
import pytest

from conftest import cli, differing, omtl, same_prior_as_one_block
from omtl_mpi.algorithms import bayes, gossiped_prior, mixture
from omtl_mpi.algorithms.experts import vote_experts
from omtl_mpi.algorithms.gossiped_prior import DONE, GossipedPrior, columns
from omtl_mpi.algorithms.mixture import MixtureBayes

K, D = 12, 4
BLOCKS = [(0, 4), (4, 8), (8, 12)]


def _stream(seed: int, n: int, K=K, d=D):
    """Tasks in three latent groups: X (n, K, d), y (n, K)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(3, d)) * 2.0
    models = centres[np.arange(K) % 3] + 0.3 * rng.normal(size=(K, d))
    X = rng.normal(size=(n, K, d))
    return X, np.sign(np.einsum("nkd,kd->nk", X, models) + 0.1)


def _learn(experts, blocks, X, y) -> None:
    for x, labels in zip(X, y):
        for (a, b), expert in zip(blocks, experts):
            expert.learn(x[None, a:b], labels[None, a:b])


class _Gossip:
    """Nodes whose tables hold every other node's row as its owner left it ``delay[i][j]``
    rounds before (a constant per pair: the copies of a row come in the order written, some
    skipped), their blocks frozen while an estimate goes on."""

    def __init__(self, experts, delay):
        self.cols, width = columns(D, 1)        # column 0: the stamp, as in a node's row
        self.tables = [np.zeros((len(experts), width)) for _ in experts]
        self.priors = [GossipedPrior(e, t, self.cols, i)
                       for i, (e, t) in enumerate(zip(experts, self.tables))]
        self.history = [[] for _ in experts]    # each node's own row after each round
        self.delay = delay
        self.lagged_reads = 0                   # a step's sums found in the earlier slot

    def round(self, seen: float) -> None:
        r, N = len(self.history[0]), len(self.priors)
        for i, prior in enumerate(self.priors):
            for j in range(N):
                if j != i and r - self.delay[i][j] >= 0:
                    self.tables[i][j] = self.history[j][r - self.delay[i][j]]
            if 1 <= prior.step < DONE:
                tags = self.tables[i][:, self.cols["em_tag"]]
                self.lagged_reads += int(((tags[:, 0] == prior.estimate)
                                          & (tags[:, 1] == prior.step + 1)).sum())
            snap = self.cols["snap_tag"]
            before = int(self.tables[i][i][snap][0])
            prior.advance(seen)
            e = int(self.tables[i][i][snap][0]) - 1
            if e >= 1 and e + 1 != before:
                # a snapshot of e + 1, written now, only once every node is past reading e's
                # (checked against every node's state at this moment): after the first
                # estimate (no EM steps), once every node finished it; after a later one, once
                # every node is at its last EM step or beyond
                least = (1, DONE) if e == 1 else (e, mixture.EM_STEPS)
                assert all((p.estimate, p.step) >= least for p in self.priors)
        for i in range(N):
            self.history[i].append(self.tables[i][i].copy())

    def until_done(self, estimate: int, seen: float, most: int = 400) -> int:
        for n in range(most):
            if all(p.estimate == estimate and p.step == DONE for p in self.priors):
                return n
            self.round(seen)
        raise AssertionError(f"estimate {estimate} not finished in {most} rounds")


def test_every_node_takes_the_synchronous_estimate_of_the_same_totals():
    """Frozen blocks: each estimate is the one a block of every task makes synchronously from
    the same statistics (to rounding), the same bits on every node, though every node finds
    the other nodes' parts in its table at different rounds (and some a step late, in the
    earlier E-step slot)."""
    one = MixtureBayes(K, D)
    experts = [MixtureBayes(b - a, D, total_tasks=K) for a, b in BLOCKS]
    gossip = _Gossip(experts, delay=[[0, 1, 3], [2, 0, 1], [4, 2, 0]])
    X, y = _stream(1, 60)
    _learn([one], [(0, K)], X[:30], y[:30])
    _learn(experts, BLOCKS, X[:30], y[:30])
    gossip.round(0.0)                               # nothing seen yet: no estimate starts
    assert all(p.estimate == 0 for p in gossip.priors)
    seen = 30.0 * K
    one.set_totals(one.statistics())                # the first estimate: the Gaussian prior
    gossip.until_done(1, seen)
    for e in experts:
        assert e._width == 1 and e.estimated_at == seen
        np.testing.assert_allclose(e._prior[0], one._prior[0], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(e.centres_, one.centres_, rtol=0, atol=1e-10)
    gossip.round(seen)                              # the instances have not grown: nothing
    assert all(p.estimate == 1 and p.step == DONE for p in gossip.priors)
    _learn([one], [(0, K)], X[30:], y[30:])
    _learn(experts, BLOCKS, X[30:], y[30:])
    one.set_totals(one.statistics())                # ten EM steps, then the mixture
    assert one._width == mixture.GROUPS
    rounds = gossip.until_done(2, 2 * seen)
    assert rounds > mixture.EM_STEPS and gossip.lagged_reads > 0
    for e in experts:
        assert e._width == mixture.GROUPS
        np.testing.assert_array_equal(e._V, experts[0]._V)
        np.testing.assert_array_equal(e._const, experts[0]._const)
        np.testing.assert_array_equal(e._prior[0], experts[0]._prior[0])
        np.testing.assert_array_equal(e.centres_, experts[0].centres_)
    # and the tasks' margins under it are the one block's
    same_prior_as_one_block(experts, BLOCKS, one, X[-1][None])


def test_a_node_waits_for_every_nodes_part_and_resumes_from_its_state():
    experts = [MixtureBayes(b - a, D, total_tasks=K) for a, b in BLOCKS]
    # node 2 never hears from node 0
    gossip = _Gossip(experts, delay=[[0, 1, 1], [1, 0, 1], [10 ** 6, 1, 0]])
    X, y = _stream(2, 60)
    _learn(experts, BLOCKS, X, y)
    for seen in (60.0 * K,) * 20 + (600.0 * K,) * 20:
        gossip.round(seen)
    # node 2 lacks node 0's snapshot: it never takes estimate 1, and so, though the instances
    # have grown tenfold, nobody starts the next (node 2 may still need their snapshots of 1)
    assert [(p.estimate, p.step) for p in gossip.priors] == [(1, DONE), (1, DONE), (1, 0)]
    # meanwhile node 2 uses the Gaussian prior of the snapshots it holds, its own and node 1's
    assert experts[0]._width == experts[2]._width == 1
    Pi, _ = bayes.prior(experts[1].statistics().copy() + experts[2].statistics(), D)
    np.testing.assert_array_equal(experts[2]._prior[0], Pi)
    assert not np.array_equal(experts[0]._prior[0], Pi)
    # a node's state holds the estimate in progress: a copy loaded from it goes on alike
    state = gossip.priors[1].state()
    copy = GossipedPrior(experts[1], gossip.tables[1].copy(), gossip.cols, 1)
    copy.load_state(state)
    assert (copy.estimate, copy.step, copy.at) == (1, DONE, 60.0 * K)


def _engine_run(monkeypatch, slow: float = 3.0, nodes: int = 4):
    """Asynchronous D-ADMM of 24 tasks in one process on a ring, node 1 slowed; every node's
    estimates as it finished them: {node: [(estimate, Pi, V, const, centres, totals, last)]},
    ``totals`` the snapshots' sum and ``last`` the last E-step's sums over every node."""
    from omtl_mpi.algorithms import registry
    from omtl_mpi.comm.clock import PhaseClock
    from omtl_mpi.data.rounds import RoundLayout, round_instances, rounds_needed
    from omtl_mpi.engine import build
    from omtl_mpi.engine.partial import Partial
    from omtl_mpi.engine.stragglers import Stragglers
    from omtl_mpi.topology import load_topology
    Kr = 24
    X, y = _stream(3, 120, K=Kr)
    lengths = [120] * Kr
    T = rounds_needed(lengths, 1)
    algo = registry.get("d-admm")
    roles = build(algo, algo.params().resolved(T), Kr, D, topology=load_topology("ring", nodes),
                  nodes=nodes, partial=Partial(1, 3, Stragglers({1: slow}), rounds=T))
    finished, totals_of = {}, {}
    finish, e_step = GossipedPrior._finish, GossipedPrior._e_step

    def e_stepping(self, s):
        if s == 1:      # every node's snapshot of the estimate is in the table now
            totals_of[self.node, self.estimate] = sum(r[self.cols["snap"]] for r in self.rows)
        e_step(self, s)

    def recording(self):
        finish(self)
        rows, cols = self.rows, self.cols
        # (a node that finished the estimate may have written its next snapshot already)
        totals = totals_of.get((self.node, self.estimate),
                               sum(r[cols["snap"]] for r in rows))
        # each node's last step's sums: beside, once it marked the estimate finished
        last = sum(r[cols["em_last"] if r[cols["em_tag"]][1] == DONE else cols["em"]]
                   for r in rows)
        e = self.expert
        finished.setdefault(self.node, []).append(
            (self.estimate, e._prior[0].copy(), e._V[:, :e._width].copy(),
             e._const[:e._width].copy(), e.centres_.copy(), totals, last))
    monkeypatch.setattr(GossipedPrior, "_finish", recording)
    monkeypatch.setattr(GossipedPrior, "_e_step", e_stepping)
    layouts = []
    for a, b in roles.blocks:
        layout = RoundLayout(lengths[a:b], 1, T, D)
        layout.fill(0, X[:, a:b].transpose(1, 0, 2).reshape(-1, D), y[:, a:b].T.reshape(-1),
                    lengths[a:b])
        layouts.append(layout)
    roles.run(layouts, PhaseClock(T), instances=round_instances(lengths, 1, T))
    return roles, finished


def test_the_nodes_of_an_asynchronous_run_hold_one_prior_per_estimate(monkeypatch):
    """Every node that finished estimate e took the same prior to the bit, and it is the one
    mixture.py's functions give from the totals and E-step sums in the node's table."""
    roles, finished = _engine_run(monkeypatch)
    assert sorted(finished) == [0, 1, 2, 3]
    estimates = [len(finished[i]) for i in range(4)]
    assert min(estimates) >= 3, estimates
    first = {}                  # estimate: the first node's that finished it
    for i in range(4):
        assert [f[0] for f in finished[i]] == list(range(1, estimates[i] + 1))
        for e, Pi, V, const, centres, totals, last in finished[i]:
            for mine, theirs in zip((Pi, V, const, centres),
                                    first.setdefault(e, (Pi, V, const, centres))):
                np.testing.assert_array_equal(mine, theirs)
            if e == 1:
                Pi_x, Pi_mu = bayes.prior(totals, D)
                np.testing.assert_allclose(Pi, Pi_x, rtol=1e-10, atol=1e-12)
                np.testing.assert_allclose(V[:, 0], Pi_mu, rtol=1e-10, atol=1e-12)
                np.testing.assert_allclose(centres, mixture.first_centres(Pi_x, Pi_mu)[0],
                                           rtol=1e-10, atol=1e-10)
                continue
            c, share = mixture.m_step(last, D)
            Sx = mixture.moments_of(totals, D)[0]
            Pi_x, V_x, const_x = mixture.mixture_prior(c, share, last, Sx)
            np.testing.assert_allclose(centres, c, rtol=1e-10, atol=1e-10)
            for mine, expected in ((Pi, Pi_x), (V, V_x), (const, const_x)):
                np.testing.assert_allclose(mine, expected, rtol=1e-10, atol=1e-10)
    # the nodes now: one prior per estimate finished, one set of centres per (estimate, step)
    by_estimate, by_step = {}, {}
    for node in roles.holders:
        b, p = node.block.bayes, node.prior
        done = p.estimate if p.step == DONE else p.estimate - 1
        prior = by_estimate.setdefault(done, (b._prior[0], b._V, b._const))
        for mine, theirs in zip((b._prior[0], b._V, b._const), prior):
            np.testing.assert_array_equal(mine, theirs)
        centres = by_step.setdefault((node.prior.estimate, node.prior.step), b.centres_)
        np.testing.assert_array_equal(b.centres_, centres)


def _synth(*extra, samples: int = 300):
    return ("run", "--algo", "d-admm", "--synth-tasks", "12", "--synth-samples", samples, *extra)


def test_one_process_with_the_mixture_prior_runs_and_repeats_to_the_bit(capsys, tmp_path,
                                                                         monkeypatch):
    import collections
    import json
    a, b, full = (tmp_path / f"{n}.h5" for n in ("a", "b", "full"))
    finished = collections.Counter()
    real = GossipedPrior._finish

    def counting(self):
        finished[self.node] += 1
        return real(self)
    monkeypatch.setattr(GossipedPrior, "_finish", counting)
    code, out, err = cli(capsys, *_synth("--sync", "partial", "--slow", "2:3", "--json",
                                         "--out", a, samples=150))
    assert code == 0, err
    # in 150 rounds every node finishes estimates of the mixture prior (the Gaussian one
    # first, then EM's), each at its own rounds
    assert len(finished) >= 3 and min(finished.values()) >= 3, finished
    summary = json.loads(out)
    # more tasks than features, d <= 128: the vote's four experts, the empirical-Bayes one
    # with the mixture prior
    assert summary["tasks"] > summary["dim"] and mixture.used(summary["dim"])
    assert len(vote_experts(summary["tasks"], summary["dim"])) == 4
    assert cli(capsys, *_synth("--sync", "partial", "--slow", "2:3", "--out", b, samples=150))[0] == 0
    assert cli(capsys, *_synth("--out", full, samples=150))[0] == 0
    assert differing(a, b) == []
    assert "predictions" in differing(a, full)
    again = tmp_path / "again.h5"
    assert cli(capsys, "run", "--replay", a, "--out", again)[0] == 0
    assert differing(a, again) == []


def test_resumed_from_a_checkpoint_with_an_estimate_in_progress_is_the_uninterrupted_run(
        capsys, tmp_path):
    base = _synth("--sync", "partial", "--max-delay", "3", "--delays", "srad",
                  "--checkpoint-every", "100", samples=150)
    whole, part = tmp_path / "whole.h5", tmp_path / "part.h5"
    assert cli(capsys, *base, "--out", whole)[0] == 0
    assert cli(capsys, *base, "--fail-at", "125", "--out", part)[0] == 1
    ckpt = tmp_path / "part.ckpt.h5"
    with h5py.File(ckpt) as f:
        steps = []
        f.visititems(lambda name, obj: steps.append(int(obj[()])) if name.endswith("gossiped_step")
                     else None)
    # the cut falls inside an estimate on some node: its state is the estimate in progress
    assert len(steps) == 12 and any(s != DONE for s in steps), steps
    assert cli(capsys, *base, "--resume", ckpt, "--out", part)[0] == 0
    assert differing(whole, part) == []


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [3, 5])
def test_an_mpi_run_with_the_mixture_prior_is_replayed_bit_for_bit(mpiexec, capsys, tmp_path,
                                                                   ranks, monkeypatch):
    run, again = tmp_path / "run.h5", tmp_path / "again.h5"
    finished, finish = [], GossipedPrior._finish

    def counting(self):
        finish(self)
        finished.append((self.node, self.estimate))
    monkeypatch.setattr(GossipedPrior, "_finish", counting)
    r = omtl(*_synth("--topology", "ring", "--sync", "partial", "--max-delay", "3", "--slow",
                     "1:4", "--out", run), np_ranks=ranks, timeout=180)
    assert r.returncode == 0, r.stderr
    with h5py.File(run) as f:
        used = f["schedule/used"][()]
    from omtl_mpi.engine.partial_graph import check_graph_schedule
    ring = [[(i - 1) % ranks, (i + 1) % ranks] for i in range(ranks)]
    check_graph_schedule(used, ring, ranks, 300, 3)
    code, _, err = cli(capsys, "run", "--replay", run, "--out", again)
    assert code == 0, err
    assert differing(run, again) == []
    # the replay is the MPI run: there too every node finished a mixture's estimate
    assert all((i, 2) in finished for i in range(ranks)), finished


@pytest.mark.mpi
def test_an_mpi_run_with_the_mixture_prior_resumed_replays_bit_for_bit(mpiexec, capsys, tmp_path):
    part, again = tmp_path / "part.h5", tmp_path / "again.h5"
    base = _synth("--topology", "ring", "--sync", "partial", "--max-delay", "3", "--slow", "1:3",
                  "--checkpoint-every", "150", samples=400)
    r = omtl(*base, "--fail-at", "250", "--fail-rank", "2", "--out", part, np_ranks=3, timeout=180)
    assert r.returncode == 1 and not part.exists(), r.stderr
    r = omtl(*base, "--resume", tmp_path / "part.ckpt.h5", "--out", part, np_ranks=3, timeout=180)
    assert r.returncode == 0, r.stderr
    assert cli(capsys, "run", "--replay", part, "--out", again)[0] == 0
    assert differing(part, again) == []


def test_a_row_grows_by_the_priors_columns_only_asynchronously():
    from omtl_mpi.algorithms.admm import AdmmParams
    from omtl_mpi.algorithms.dadmm import DAdmmNode
    from omtl_mpi.topology import load_topology
    params, ring = AdmmParams().resolved(10), load_topology("ring", 3)
    sync = DAdmmNode(params, K, D, 0, 4, ring, 0)
    partial = DAdmmNode(params, K, D, 0, 4, ring, 0, asynchronous=True)
    assert sync.prior is None and sync.sums is not None
    assert partial.prior is not None and partial.sums is None
    assert partial.table.size - sync.table.size == 3 * gossiped_prior.row_size(D)
    assert gossiped_prior.row_size(D) == (5 + 2 * D * D + D
                                          + 2 * mixture.GROUPS * (D * (D + 1) // 2 + D + 3))
    # without the mixture prior (fewer tasks than features) nothing changes
    few = [DAdmmNode(params, 3, D, 0, 1, ring, 0, asynchronous=a) for a in (False, True)]
    assert few[0].table.size == few[1].table.size and few[1].prior is None
