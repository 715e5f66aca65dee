"""The vote's empirical-Bayes expert (omtl_mpi/algorithms/bayes.py) against its formulas:
posterior means from the tasks' own statistics, the prior from every task's by the method of
moments, blocks that add up to one, and the vote that uses it only with more tasks than
features."""
import numpy as np
import pytest

import omtl_mpi
from omtl_mpi.algorithms import bayes
from omtl_mpi.algorithms.bayes import NOISE, EmpiricalBayes, moved, prior, stats_size
from omtl_mpi.algorithms.experts import BAYES, EXPERTS, vote_experts


def rounds(K=30, d=4, T=12, B=1, seed=0):
    """Rounds of streams of unequal length: (X (B, na, d), y (B, na), active) each, labels
    from one of three task models."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(3, d))
    W = centres[rng.integers(0, 3, K)] + 0.2 * rng.normal(size=(K, d))
    lengths = rng.integers(1, T * B + 1, K)
    out = []
    for t in range(T):
        active = np.nonzero(lengths > t * B)[0]
        X = rng.normal(size=(B, len(active), d))
        y = np.where(np.einsum("bkd,kd->bk", X, W[active]) >= 0, 1.0, -1.0)
        y[(t * B + np.arange(B))[:, None] >= lengths[active][None]] = 0.0    # short last batch
        X[y == 0.0] = 0.0
        out.append((X, y, active))
    return out


def direct(Q, s, Pi, Pi_mu):
    """Every task's posterior mean h_k, from scratch (np.linalg.solve)."""
    return np.linalg.solve(Pi + Q / NOISE, (Pi_mu + s / NOISE)[:, :, None])[:, :, 0]


def totals_of(Q, s, n, QT, S1):
    """The statistics of every task, computed from their sums."""
    d = s.shape[1]
    w = np.where(n > 0, 1.0 / np.maximum(n, 1), 0.0)
    M = np.einsum("k,kd,ke->de", w, s, s) - np.einsum("k,kde->de", w, Q)
    return np.concatenate([M.ravel(), QT.ravel(), S1, [n.sum(), np.maximum(n - 1, 0).sum()]])


@pytest.mark.parametrize("B", [1, 3])
def test_margins_are_the_posterior_means_of_the_formula(B):
    """Sherman-Morrison between priors, matrices refreshed after each new prior, mini-batches:
    every round's margins are h_k . x of the formula with the prior last taken, which is the
    prior of the statistics then, and the statistics are their sums."""
    K, d = 30, 4
    e = EmpiricalBayes(K, d)
    Q, s, n = np.zeros((K, d, d)), np.zeros((K, d)), np.zeros(K)
    QT, S1 = np.zeros((d, d)), np.zeros(d)
    total = np.zeros(stats_size(d))
    versions, taken = set(), None
    for X, y, active in rounds(K, d, B=B):
        got = e.margins(X, active, store=True)
        if e.prior_version:
            h = direct(Q[active], s[active], *taken)
            np.testing.assert_allclose(got, np.einsum("kd,bkd->bk", h, X), rtol=0, atol=1e-10)
        else:
            assert not got.any()                # no prior before the first instances
        e.learn(X, y, active)
        total = e.statistics()
        real = y != 0
        Q[active] += np.einsum("bkd,bke->kde", X, X)
        s[active] += np.einsum("bk,bkd->kd", y, X)
        n[active] += real.sum(axis=0)
        QT += np.einsum("bkd,bke->de", X, X)
        S1 += np.einsum("bk,bkd->d", y, X)
        np.testing.assert_allclose(total, totals_of(Q, s, n, QT, S1), rtol=1e-12, atol=1e-9)
        version = e.prior_version
        e.set_totals(total)
        if e.prior_version != version:
            taken = prior(total, d)
            state = e.state()
            np.testing.assert_array_equal(state["Pi"], taken[0])
            np.testing.assert_array_equal(state["Pi_mu"], taken[1])
        versions.add(e.prior_version)
    assert len(versions) > 2                    # priors were taken again on the way


def test_blocks_add_up_to_one_block():
    """Two blocks' statistics sum to one block's: what C-ADMM's server and D-ADMM's table add."""
    K, d = 30, 4
    one, a, b = EmpiricalBayes(K, d), EmpiricalBayes(12, d), EmpiricalBayes(K - 12, d)
    for X, y, active in rounds(K, d):
        lo, hi = active < 12, active >= 12
        one.learn(X, y, active)
        a.learn(X[:, lo], y[:, lo], active[lo])
        b.learn(X[:, hi], y[:, hi], active[hi] - 12)
        np.testing.assert_allclose(one.statistics(), a.statistics() + b.statistics(),
                                   rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("B", [1, 3])
def test_the_running_changes_add_up_to_the_statistics(B):
    """With ``running`` (D-ADMM's rows), each round's change, from its active tasks only,
    adds up to the block's statistics."""
    K, d = 30, 4
    e = EmpiricalBayes(K, d)
    e.running = True
    total = np.zeros(stats_size(d))
    for X, y, active in rounds(K, d, B=B):
        e.margins(X, active, store=True)
        e.learn(X, y, active)
        total += e.delta
        np.testing.assert_allclose(total, e.statistics(), rtol=1e-12, atol=1e-9)
        e.set_totals(total)
    assert e.prior_version > 2


def test_the_statistics_the_prior_does_not_read_are_not_computed():
    """Given a bound on a round's instances, M, QT and S1 are computed only in the rounds
    that may end in a new prior (0 in the others), and the priors are those of statistics
    computed every round, bit for bit; a bound too small would be caught."""
    K, d = 30, 4
    data = rounds(K, d, T=40)
    eager, lazy = EmpiricalBayes(K, d), EmpiricalBayes(K, d)
    skipped = 0
    for X, y, active in data:
        for e in (eager, lazy):
            e.margins(X, active, store=True)
            e.learn(X, y, active)
        full = eager.statistics()
        got = lazy.statistics(K * X.shape[0])
        np.testing.assert_array_equal(got[-2:], full[-2:])
        if not got[:-2].any():
            skipped += 1
            assert full[-2] < bayes.GROWTH * lazy.estimated_at      # no estimate this round
        else:
            np.testing.assert_array_equal(got, full)
        eager.set_totals(full)
        lazy.set_totals(got)
        assert lazy.prior_version == eager.prior_version
        for key in ("Pi", "Pi_mu", "h", "A"):
            np.testing.assert_array_equal(lazy.state()[key], eager.state()[key], err_msg=key)
    assert skipped > len(data) // 3 and eager.prior_version > 2


def test_the_prior_recovers_the_tasks_covariance():
    """With isotropic features, many tasks and labels -1/+1 (y^2 = 1, which the moments use),
    mu and Sigma are the mean and covariance of the tasks' b_k = E[y x] (up to the sampling
    error): for y = sign(x . beta_k + 0.3 e), b_k = sqrt(2 / pi) beta_k / sqrt(|beta_k|^2 +
    0.09)."""
    rng = np.random.default_rng(1)
    K, d, n = 4000, 3, 40
    beta = np.array([1.0, -0.5, 0.2]) + rng.normal(size=(K, d)) @ np.diag([0.6, 0.4, 0.05])
    X = rng.normal(size=(K, n, d))
    y = np.where(np.einsum("knd,kd->kn", X, beta) + 0.3 * rng.normal(size=(K, n)) >= 0, 1.0, -1.0)
    b = np.sqrt(2 / np.pi) * beta / np.sqrt((beta ** 2).sum(axis=1, keepdims=True) + 0.09)
    e = EmpiricalBayes(K, d)
    e.learn(X.transpose(1, 0, 2), y.T)
    stats = e.statistics()
    Pi, Pi_mu = prior(stats, d)
    np.testing.assert_allclose(np.linalg.solve(Pi, Pi_mu), b.mean(axis=0), atol=0.01)
    np.testing.assert_allclose(np.linalg.inv(Pi), np.cov(b.T), atol=0.005)


def test_the_prior_is_never_singular_and_moves_only_when_it_changes():
    d = 3
    stats = np.zeros(stats_size(d))
    stats[2 * d * d: 2 * d * d + d] = [1.0, 0.0, 0.0]           # S1
    stats[d * d: 2 * d * d] = np.eye(d).ravel()                 # QT: Sx = I
    stats[-2:] = [1.0, 0.0]                                     # one instance: no spread seen
    Pi, Pi_mu = prior(stats, d)
    assert np.isfinite(Pi).all() and np.linalg.eigvalsh(Pi).min() > 0
    np.testing.assert_allclose(np.linalg.solve(Pi, Pi_mu), [1.0, 0, 0])
    assert not moved((Pi, Pi_mu), (Pi, Pi_mu))
    assert moved((Pi, Pi_mu), (Pi / 2, Pi_mu / 2))            # every variance doubled
    assert not moved((Pi, Pi_mu), (Pi / 1.1, Pi_mu / 1.1))
    assert moved((Pi, Pi_mu), (Pi, Pi_mu + Pi @ np.array([0, 1.0, 0])))   # the mean moved


def test_state_round_trip_continues_bit_for_bit():
    K, d = 30, 4
    data = rounds(K, d)
    a = EmpiricalBayes(K, d)
    for X, y, active in data[:6]:
        a.margins(X, active, store=True)
        a.learn(X, y, active)
        a.set_totals(a.statistics())
    b = EmpiricalBayes(K, d)
    b.load_state(a.state())
    for X, y, active in data[6:]:
        for e in (a, b):
            e.margins(X, active, store=True)
            e.learn(X, y, active)
            e.set_totals(e.statistics())
        np.testing.assert_array_equal(a.margins(X, active), b.margins(X, active))
    for key, value in a.state().items():
        np.testing.assert_array_equal(value, b.state()[key], err_msg=key)


def test_the_vote_has_it_only_with_more_tasks_than_features():
    assert vote_experts(5, 10) == EXPERTS
    assert vote_experts(11, 10) == (BAYES,) + EXPERTS
    assert not bayes.used(10, 10)
    # nor with class weights, which its posterior does not know, nor above bayes.MAX_DIM
    assert vote_experts(11, 10, "balanced") == vote_experts(11, 10, "2.0") == EXPERTS
    assert bayes.used(5000, bayes.MAX_DIM) and not bayes.used(5000, bayes.MAX_DIM + 1)
    few, many = omtl_mpi.CADMM(n_tasks=3, n_features=4), omtl_mpi.CADMM(n_tasks=12, n_features=2)
    many.learn_round(np.ones((12, 1, 2)), np.ones((12, 1)))
    few.learn_round(np.ones((3, 1, 4)), np.ones((3, 1)))
    assert any(k.startswith("bayes_") for k in many.state_dict()["state"]["roles"]["holder0"])
    assert not any(k.startswith("bayes_") for k in few.state_dict()["state"]["roles"]["holder0"])


@pytest.mark.mpi
def test_a_learner_with_it_passes_every_check():
    """The generic checks, on a C-ADMM of more tasks than features (so with the empirical-Bayes
    expert): determinism, the state's round trip, learn_one as its round, one process == MPI
    with the fitted learner's state..."""
    assert omtl_mpi.check_learner(omtl_mpi.CADMM(n_tasks=12, n_features=2)) == []


def learned(e: EmpiricalBayes, data) -> EmpiricalBayes:
    """``e`` after the rounds ``data`` (a prior taken on the way)."""
    for X, y, active in data:
        e.margins(X, active, store=True)
        e.learn(X, y, active)
        e.set_totals(e.statistics())
    assert e.prior_version
    return e


def test_a_checkpoint_without_the_posterior_means_resumes_with_them():
    """Checkpoints written before the posterior means h were kept hold A and s only: h = A b
    is computed on loading, and the margins are the formula's."""
    K, d = 30, 4
    data = rounds(K, d)
    a = learned(EmpiricalBayes(K, d), data[:8])
    older = {k: v for k, v in a.state().items() if k != "h"}
    b = EmpiricalBayes(K, d)
    b.load_state(older)
    X, y, active = data[8]
    np.testing.assert_allclose(b.margins(X, active), a.margins(X, active), rtol=0, atol=1e-12)


def test_the_tasks_matrices_are_inverted_in_place_over_the_tasks():
    """inverse_tasks_last (Gauss-Jordan over the tasks' axis) is numpy's inverse, also for
    the ill-conditioned matrices of long streams under a narrow prior."""
    rng = np.random.default_rng(3)
    d, n = 6, 40
    X = rng.normal(size=(n, 200, d)) * np.geomspace(1, 1e3, d)
    P = np.einsum("kid,kie->kde", X, X) + 1e-3 * np.eye(d)
    expected = np.linalg.inv(P)
    got = bayes.inverse_tasks_last(np.ascontiguousarray(np.moveaxis(P, 0, -1)), np.empty((d, d, n)))
    np.testing.assert_allclose(np.moveaxis(got, -1, 0), expected, rtol=1e-8,
                               atol=1e-12 * np.abs(expected).max())


def test_a_task_without_an_instance_keeps_its_posterior_whatever_its_row_holds():
    """A round's padding (label 0) changes nothing of its task, even where its row is not zero
    (the Python API's rows of tasks that are not active)."""
    K, d = 30, 4
    e = learned(EmpiricalBayes(K, d), rounds(K, d)[:8])
    X = np.random.default_rng(5).normal(size=(1, K, d))
    y = np.ones((1, K))
    y[0, :10] = 0.0                                     # tasks 0-9: padding with rows
    e.margins(X, store=True)                            # (refreshes the matrices of a new prior)
    before = e.state()
    e.learn(X, y)
    after = e.state()
    for key in ("A", "h", "Q", "s", "n"):
        np.testing.assert_array_equal(after[key][:10], before[key][:10], err_msg=key)
        assert not np.array_equal(after[key][10:], before[key][10:]), key


def test_a_long_stream_is_handed_over_to_the_tasks_own_model(monkeypatch):
    """From experts.BAYES_HANDOVER instances of a task on (its count before the round), the
    empirical-Bayes expert's margin for it is the multi-task model's; a shorter task keeps the
    posterior's. Here with the hand-over at 5 instances, on tasks of 2 to 8."""
    from omtl_mpi.algorithms import admm
    from omtl_mpi.algorithms.admm_params import AdmmParams
    from omtl_mpi.algorithms.experts import BAYES_HANDOVER
    assert BAYES_HANDOVER == 256
    monkeypatch.setattr(admm, "BAYES_HANDOVER", 5)
    K, d = 12, 3
    block = admm.TaskBlock(AdmmParams().resolved(10), K, d, mode=admm.FIXED_OMEGA)
    assert block.bayes is not None
    rng = np.random.default_rng(4)
    lengths = np.arange(K) % 7 + 2
    for t in range(8):
        X = rng.normal(size=(1, K, d)) * (lengths > t)[None, :, None]
        y = np.where(X.sum(axis=2) >= 0, 1.0, -1.0) * (lengths > t)
        block.predict_and_step(X, y, np.ones(K))
        block.bayes.set_totals(block.bayes.statistics())
    X = rng.normal(size=(1, K, d))
    margins = np.vecdot(block.W, X)
    out = block._expert_margins(margins, block.W, X, slice(None))[block._expert_row[BAYES]]
    long = block.bayes.n >= 5
    assert long.any() and (~long).any()
    np.testing.assert_array_equal(out[:, long], margins[:, long])
    posterior = block.bayes.margins(X, slice(None))
    np.testing.assert_array_equal(out[:, ~long], posterior[:, ~long])
    assert not np.allclose(posterior[:, long], margins[:, long])
