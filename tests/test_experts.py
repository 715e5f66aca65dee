"""The experts' vote (--experts, the ADMM learners' default; docs/ALGORITHMS.md section 2.6): its
pieces, that it changes predictions only, its regret bound, and the criteria the vote was built
to meet on the known-answer test beds, for the default C-ADMM and D-ADMM."""
import math

import numpy as np
import pytest

from omtl_mpi.algorithms.admm import AdmmParams
from omtl_mpi.algorithms.experts import ExpertVote, Related, directions, moment_change, related_rows
from omtl_mpi.data.features import prepare
from omtl_mpi.data.source import shuffled
from omtl_mpi.data.taskfile import TaskStreams
from omtl_mpi.data.testbeds import generate_testbed
from support.drive import simulate


def cosine_related(W):
    """The related models by their definition: r_k = (1/K) sum_j cos(w_k, w_j) w_j, through
    the K x K matrix of cosines (0 against a zero model)."""
    norms = np.linalg.norm(W, axis=1)
    unit = np.divide(W, norms[:, None], out=np.zeros_like(W), where=norms[:, None] > 0)
    return (unit @ unit.T) @ W / len(W)


def test_related_models_pool_like_tasks_with_their_signs():
    rng = np.random.default_rng(0)
    w = rng.normal(size=6)
    W = np.stack([w, 1.1 * w, -w, -0.9 * w])
    r = related_rows(directions(W), W, 4)
    # all four lie on one line: every task gets the same pooled model, with its own sign
    pooled = (w + 1.1 * w + w + 0.9 * w) / 4
    np.testing.assert_allclose(r, np.stack([pooled, pooled, -pooled, -pooled]), atol=1e-12)


def test_related_models_leave_unrelated_and_zero_models_alone():
    W = np.array([[1.0, 0, 0], [0, 2.0, 0], [0, 0, 0.0]])
    np.testing.assert_allclose(related_rows(directions(W), W, 3), W / 3)   # orthogonal, a zero model
    assert np.all(np.isfinite(related_rows(directions(np.zeros((4, 3))), np.zeros((4, 3)), 4)))


@pytest.mark.parametrize("K, d", [(3, 8), (8, 8), (40, 5)])
def test_the_two_forms_of_the_related_models_are_the_cosine_sum(K, d):
    """The ``rows`` form (every task's model) and the ``moment`` form (H = sum_j w_j w_j^T /
    |w_j|, kept up to date by changes) both give the cosine-weighted sum, zero models too."""
    rng = np.random.default_rng(K)
    W = rng.normal(size=(K, d))
    W[1] = 0.0
    expected = cosine_related(W)
    np.testing.assert_allclose(related_rows(directions(W), W, K), expected, atol=1e-12)
    related = Related(K, d, K, "moment")
    related.H += moment_change(np.zeros_like(W), W)            # every task learns from zero
    W2 = W.copy()
    W2[: K // 2] = rng.normal(size=(K // 2, d))                # then half of them again
    related.H += moment_change(W[: K // 2], W2[: K // 2])
    np.testing.assert_allclose(related.models(W2), cosine_related(W2), atol=1e-12)
    X = rng.normal(size=(2, K, d))
    np.testing.assert_allclose(related.margins(W2, X), np.vecdot(cosine_related(W2), X), atol=1e-12)


def test_a_blocks_changes_of_h_add_up_to_its_part_of_h():
    """The block's changes of H over rounds of every task (its part of H kept from the last
    one) and of some tasks add up to sum_k w_k w_k^T / |w_k| of its models."""
    from omtl_mpi.algorithms.admm import TaskBlock
    K, d = 24, 3
    rng = np.random.default_rng(4)
    block = TaskBlock(AdmmParams().resolved(d), K, d, total_tasks=K, related_mode="moment")
    H = np.zeros((d, d))
    for t in range(12):
        active = slice(None) if t % 4 != 3 else np.arange(0, K, 3)
        na = K if isinstance(active, slice) else len(active)
        X = rng.normal(size=(1, na, d))
        y = np.where(rng.random((1, na)) < 0.5, 1.0, -1.0)
        block.predict_and_step(X, y, np.ones(na), active)
        H += block.delta_H
        norms = np.linalg.norm(block.W, axis=1)
        expected = np.einsum("kd,ke,k->de", block.W, block.W, 1.0 / norms)
        np.testing.assert_allclose(H, expected, rtol=1e-12, atol=1e-12)


def test_weights_sum_to_one_and_follow_the_fewest_mistakes():
    """The documented numbers, written out (not experts.PRIOR_FIRST and STEP_MULTIPLE, which a
    change would carry into the expectation): prior (0.99, 0.005, 0.005), c = 16."""
    vote = ExpertVote(2, total_tasks=4)
    np.testing.assert_allclose(vote.weights(), [0.99, 0.005, 0.005])    # before any mistake
    vote.steps = 10.0
    vote.set_totals([9.0, 0.0, 3.0])            # every task's mistakes, summed
    p = vote.weights()
    np.testing.assert_allclose(p.sum(), 1.0)
    assert p[1] > p[2] and p[1] > p[0]          # enough mistakes overcome the prior
    # pi_e exp(-eta_t (M_e - min M) / K), eta_t = c sqrt(8 ln 3 / t)
    eta = 16.0 * math.sqrt(8 * math.log(3) / 10.0)
    np.testing.assert_allclose(p[2] / p[1], math.exp(-eta * 3.0 / 4))
    np.testing.assert_allclose(p[0] / p[1], 0.99 / 0.005 * math.exp(-eta * 9.0 / 4))


def _stream(vote, rates, rounds, rng, kb):
    """Rounds where expert e is right with probability 1 - rates[e]; the vote's predictions,
    and each expert's."""
    agree = []
    for _ in range(rounds):
        y = rng.choice([-1.0, 1.0], size=(1, kb))
        right = rng.random((3, kb)) > np.asarray(rates)[:, None]
        margins = np.where(right, y, -y)[:, None, :]             # (experts, B, kb)
        positive = vote.predict(margins)
        agree.append(positive[0] == (margins[:, 0] > 0))         # (3, kb)
        vote.update(y, slice(None))
        vote.set_totals(vote.mistakes.sum(axis=1))   # one block: its sums are everyone's
    return np.array(agree)


def test_the_vote_follows_the_expert_with_fewest_mistakes_and_switches():
    """Early on, expert 0 is best: the vote follows it. Then it turns bad: once its mistakes
    exceed expert 1's, the vote follows expert 1."""
    rng = np.random.default_rng(0)
    kb = 4
    vote = ExpertVote(kb, total_tasks=kb)
    first = _stream(vote, [0.1, 0.3, 0.45], 500, rng, kb)
    assert first[100:, 0].mean() > 0.99
    second = _stream(vote, [0.6, 0.3, 0.45], 1500, rng, kb)
    assert second[-300:, 1].mean() > 0.99
    assert second[:100, 0].mean() > 0.9        # it does not jump at the first bad rounds


def test_the_vote_changes_predictions_only(unequal_streams):
    """Every ADMM variable is bit for bit the same with and without the vote."""
    X, y = unequal_streams
    with_vote, rows_v = simulate("c-admm", X, y, params=AdmmParams())
    alone, rows_a = simulate("c-admm", X, y, params=AdmmParams(experts=False))
    for key in ("W", "Z"):
        np.testing.assert_array_equal(rows_v[key], rows_a[key], err_msg=key)
    assert any(np.any(a != b) for a, b in zip(with_vote, alone))


def test_d_admm_on_a_full_graph_votes_like_c_admm(unequal_streams):
    X, y = unequal_streams
    cen, _ = simulate("c-admm", X, y)
    dec, _ = simulate("d-admm", X, y, topology="full")
    for a, b in zip(cen, dec):
        np.testing.assert_array_equal(a, b)


def _errors(family, name, seed, **kw):
    names, X, y = generate_testbed(family, seed=0)
    streams = shuffled(TaskStreams(np.arange(len(X)), tuple(names), X, y), seed)
    preds, _ = simulate(name, prepare(streams.X, intercept=True), streams.y, **kw)
    return np.mean([np.mean(p != t) for p, t in zip(preds, streams.y)])


def _mean(family, name, **kw):
    return float(np.mean([_errors(family, name, seed, **kw) for seed in (0, 1, 2)]))


@pytest.fixture(scope="module")
def references():
    """The learners the criteria compare with: pooled, and the best single-task learner."""
    return {family: (_mean(family, "pooled"), min(_mean(family, "arow"), _mean(family, "adagrad")))
            for family in ("identical", "clustered", "unrelated")}


@pytest.mark.parametrize("name,kw", [("c-admm", {}), ("d-admm", {"topology": "ring"})])
def test_the_vote_meets_its_criteria_on_the_test_beds(name, kw, references):
    """Mean over seeds 0-2 (stream orders) of the recipe's draw, with the intercept of every
    learner's default: identical <= pooled + 0.01, unrelated <= best single-task + 0.01,
    clustered <= min(pooled, best single-task) - 0.02."""
    pooled, single = references["identical"]
    assert _mean("identical", name, **kw) <= pooled + 0.01
    pooled, single = references["unrelated"]
    assert _mean("unrelated", name, **kw) <= single + 0.01
    pooled, single = references["clustered"]
    assert _mean("clustered", name, **kw) <= min(pooled, single) - 0.02
