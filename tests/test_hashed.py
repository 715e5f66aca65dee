"""Hashed personalisation (omtl_mpi/algorithms/hashed.py) against its formulas: without
collisions it is the shared model plus each task's own, learned from the same instances, with
AdaGrad or diagonal AROW per weight; with collisions it still learns; bad options are one line.
Every learner's generic checks (one process == MPI among them) run in test_api.py."""
import numpy as np
import pytest

import omtl_mpi
from omtl_mpi.algorithms.hashed import hashed

from conftest import omtl_forked as omtl


def streams(K=4, d=3, T=25, seed=0):
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)
    X = rng.normal(size=(K, T, d))
    y = np.where(X @ w + 0.3 * rng.normal(size=(K, T)) >= 0, 1, -1)
    return X, y


def reference(X, y, step, gamma0=0.1, delta=1.0):
    """The shared part w0 and every task's own W, stepped per weight from the round's summed
    gradient (adagrad) or as diagonal AROW in precision form, r = 0.5 |x|^2 of each task's
    first instance: the predictions, round by round."""
    K, T, d = X.shape
    X = np.concatenate([X, np.ones((K, T, 1))], axis=2)        # the intercept
    d += 1
    w0, W = np.zeros(d), np.zeros((K, d))
    a0, A = np.full(d, delta if step == "adagrad" else 1.0), np.full((K, d), delta if step == "adagrad" else 1.0)
    r = 0.5 * (X[:, 0] ** 2).sum(axis=1)
    out = np.zeros((K, T), int)
    for t in range(T):
        x, yt = X[:, t], y[:, t].astype(float)
        m = x @ w0 + (W * x).sum(axis=1)
        out[:, t] = np.where(m >= 0, 1, -1)
        wrong = yt * m < 1
        if step == "adagrad":
            g = np.where(wrong, -yt, 0.0)[:, None] * x
            a0 += (g * g).sum(axis=0)
            A += g * g
            w0 -= gamma0 * g.sum(axis=0) / np.sqrt(a0)
            W -= gamma0 * g / np.sqrt(A)
        else:
            v = (x * x * (1.0 / a0 + 1.0 / A)).sum(axis=1)
            alpha = np.where(wrong, (1 - yt * m) / (v + r) * yt, 0.0)
            add = np.where(wrong, 1.0 / r, 0.0)[:, None] * x * x
            a0 += add.sum(axis=0)
            A += add
            w0 += (alpha[:, None] * x).sum(axis=0) / a0
            W += alpha[:, None] * x / A
    return out


@pytest.mark.parametrize("step", ["adagrad", "arow"])
def test_without_collisions_it_is_the_shared_model_plus_each_tasks_own(step):
    X, y = streams()
    index, _ = hashed(np.arange(4), 4, 20)
    assert len(set(index.ravel())) == index.size            # 2^20 weights: no collision here
    res = omtl_mpi.run_streams(list(X), list(y), algo="hashed", bits=20, hash_step=step)
    np.testing.assert_array_equal(np.array(res.predictions), reference(X, y, step))


def test_hashing_is_the_same_everywhere_and_signs_cancel():
    index, sign = hashed(np.arange(1000), 20, 18)
    again, sign2 = hashed(np.arange(1000), 20, 18)
    np.testing.assert_array_equal(index, again)
    np.testing.assert_array_equal(sign, sign2)
    assert index.min() >= 0 and index.max() < 2 ** 18
    assert abs(sign.mean()) < 0.02                          # about as many + as -
    # a task's keys do not depend on which other tasks are hashed with it
    np.testing.assert_array_equal(hashed(np.array([7]), 20, 18)[0][1], index[8])


def test_with_collisions_it_learns_and_stays_finite():
    X, y = streams(K=20, d=5, T=60)
    res = omtl_mpi.run_streams(list(X), list(y), algo="hashed", bits=4)
    assert np.isfinite(res.model["W"]).all()
    assert res.mean_error < 0.45


@pytest.mark.parametrize("option, message", [
    (["--bits", "0"], "--bits must be an integer from 1 to 40"),
    (["--hash-step", "sgd"], "--hash-step"),
    (["--arow-r", "-1"], "--arow-r must be"),
])
def test_bad_options_are_one_line(option, message):
    r = omtl("run", "--data", "synthetic", "--synth-samples", "20", "--algo", "hashed", *option)
    assert r.returncode != 0
    assert message in r.stderr and "Traceback" not in r.stderr


def test_a_table_larger_than_memory_is_refused_before_it_is_made():
    r = omtl("run", "--data", "synthetic", "--synth-samples", "20", "--algo", "hashed",
             "--bits", "40")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "use fewer --bits" in r.stderr and len(r.stderr.strip().splitlines()) == 1
