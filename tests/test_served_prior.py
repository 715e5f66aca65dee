"""The vote's empirical-Bayes prior under --sync partial: estimated by C-ADMM's server from
every worker's newest statistics, its mixture's EM steps each made once every worker's E-step
sums under the step's centres have arrived (omtl_mpi/algorithms/served_prior.py)."""
import numpy as np

from conftest import same_prior_as_one_block
from omtl_mpi.algorithms import mixture
from omtl_mpi.algorithms.mixture import MixtureBayes
from omtl_mpi.algorithms.served_prior import ServedPrior, TakenPrior, sums_size

K, D = 12, 4
BLOCKS = [(0, 4), (4, 8), (8, 12)]


def _learn(experts, X, y) -> None:
    """Every task's instances (X: n, K, d; y: n, K) into the experts, one task block each."""
    for x, labels in zip(X, y):
        for (a, b), expert in zip(BLOCKS if len(experts) > 1 else [(0, K)], experts):
            expert.learn(x[None, a:b], labels[None, a:b])


def _stream(seed: int, n: int):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(3, D)) * 2.0
    models = centres[np.arange(K) % 3] + 0.3 * rng.normal(size=(K, D))
    X = rng.normal(size=(n, K, D))
    return X, np.sign(np.einsum("nkd,kd->nk", X, models) + 0.1)


def _served(blocks, server, taken, steps: int, deliver=None) -> None:
    """``steps`` server steps: each sums every block's statistics and newest E-step sums, and
    replies to the blocks in ``deliver`` (default all)."""
    for _ in range(steps):
        totals = sum(b.statistics() for b in blocks)
        server.step(totals, [t.sums for t in taken])
        for i, t in enumerate(taken):
            if deliver is None or i in deliver:
                t.receive(server.flat)


def test_the_served_prior_is_the_synchronous_estimate_of_every_block_at_once():
    one = MixtureBayes(K, D)
    blocks = [MixtureBayes(b - a, D, total_tasks=K) for a, b in BLOCKS]
    taken = [TakenPrior(b, np.zeros(sums_size(D))) for b in blocks]
    server = ServedPrior(D)
    X, y = _stream(1, 60)
    _learn([one], X[:30], y[:30])
    _learn(blocks, X[:30], y[:30])
    one.set_totals(one.statistics())                # the first estimate: the Gaussian prior
    _served(blocks, server, taken, 1)
    assert server.version == 1 and all(b.prior_version == 1 for b in blocks)
    _learn([one], X[30:], y[30:])
    _learn(blocks, X[30:], y[30:])
    one.set_totals(one.statistics())                # ten EM steps, then the mixture
    assert one._width == mixture.GROUPS
    _served(blocks, server, taken, 1)               # the estimate starts: E-step sums asked
    assert server.em_left == mixture.EM_STEPS and server.version == 1
    _served(blocks, server, taken, mixture.EM_STEPS)
    assert server.em_left == 0 and server.version == 2
    for b in blocks:
        assert b._width == mixture.GROUPS and b.prior_version == 2
    # and the tasks' margins under it are the one block's
    same_prior_as_one_block(blocks, BLOCKS, one, X[-1][None])


def test_an_em_step_waits_for_every_workers_sums_and_the_rounds_do_not():
    blocks = [MixtureBayes(b - a, D, total_tasks=K) for a, b in BLOCKS]
    taken = [TakenPrior(b, np.zeros(sums_size(D))) for b in blocks]
    server = ServedPrior(D)
    X, y = _stream(2, 60)
    _learn(blocks, X[:30], y[:30])
    _served(blocks, server, taken, 1)
    _learn(blocks, X[30:], y[30:])
    _served(blocks, server, taken, 1, deliver={0, 1})
    assert server.em_left == mixture.EM_STEPS
    tag = server.tag
    # the third block hears nothing: the EM step is not made, however many steps go by
    _served(blocks, server, taken, 5, deliver={0, 1})
    assert server.em_left == mixture.EM_STEPS and server.tag == tag
    assert taken[2].tag < tag and all(t.tag == tag for t in taken[:2])
    _served(blocks, server, taken, 1)               # its reply arrives: sums computed
    _served(blocks, server, taken, 1)               # and taken: the step is made
    assert server.em_left == mixture.EM_STEPS - 1 and server.tag == tag + 1
