"""The empirical-Bayes expert's mixture prior (omtl_mpi/algorithms/mixture.py) against its
formulas: the posterior mean of a mixture with one within-group variance, kept by
Sherman-Morrison; EM steps whose blocks add up to one block; the latent groups found; state
round trips; and one process == mpiexec with the EM steps' exchange."""
import threading

import numpy as np
import pytest

from omtl_mpi.algorithms import mixture
from omtl_mpi.algorithms.bayes import NOISE
from omtl_mpi.algorithms.mixture import MixtureBayes
from support.drive import simulate

from conftest import assert_in_process_equals_mpiexec, omtl
from test_bayes import rounds


def grouped(K=90, d=3, groups=3, n=40, seed=0):
    """K tasks in ``groups`` well-separated groups, each with ``n`` instances: (X, y, group)."""
    rng = np.random.default_rng(seed)
    centres = 3.0 * np.eye(d)[:groups]
    group = np.arange(K) % groups
    W = centres[group] + 0.05 * rng.normal(size=(K, d))
    X = [rng.normal(size=(n, d)) for _ in range(K)]
    y = [np.where(x @ w >= 0, 1, -1) for x, w in zip(X, W)]
    return X, y, group


def learn(e, data, estimate=True):
    for X, y, active in data:
        e.margins(X, active, store=True)
        e.learn(X, y, active)
        if estimate:
            e.set_totals(e.statistics())


def posterior_mean(Q, s, within, centres, share):
    """Every task's posterior mean under the mixture sum_g share_g N(c_g, within I), from
    scratch: per component the Gaussian posterior and the data's marginal likelihood."""
    K, d = s.shape
    out = np.zeros((K, d))
    for k in range(K):
        A = np.linalg.inv(np.eye(d) / within + Q[k] / NOISE)
        b = [centres[g] / within + s[k] / NOISE for g in range(len(share))]
        log_r = np.array([np.log(share[g]) - 0.5 * centres[g] @ centres[g] / within
                          + 0.5 * b[g] @ A @ b[g] for g in range(len(share))])
        r = np.exp(log_r - log_r.max())
        r /= r.sum()
        out[k] = sum(r[g] * (A @ b[g]) for g in range(len(share)))
    return out


@pytest.mark.parametrize("B", [1, 2])
def test_margins_are_the_mixtures_posterior_means(B):
    K, d = 30, 4
    e = MixtureBayes(K, d)
    rng = np.random.default_rng(1)
    within, centres = 0.3, rng.normal(size=(e.G, d))
    share = rng.dirichlet(np.ones(e.G))
    V = centres.T / within
    e._take(np.eye(d) / within, V, np.log(share) - 0.5 * np.einsum("gd,dg->g", centres, V))
    data = rounds(K, d, T=8, B=B)
    learn(e, data[:6], estimate=False)          # the prior fixed: Sherman-Morrison throughout
    state = e.state()
    h = posterior_mean(state["Q"], state["s"], within, centres, share)
    X, _, active = data[6]
    np.testing.assert_allclose(e.margins(X, active), np.einsum("bkd,kd->bk", X, h[active]),
                               rtol=0, atol=1e-10)


class Exchange:
    """The EM steps' exchange among ``n`` blocks in threads of one process: each waits for
    all, and every one gets the sum in block order (what MpiStar.reduce gives)."""

    def __init__(self, n):
        self.values, self.barrier = [None] * n, threading.Barrier(n, timeout=30)

    def reduce_of(self, i):
        def reduce(values):
            self.values[i] = values.copy()
            self.barrier.wait()
            total = sum(self.values[1:], self.values[0].copy())
            self.barrier.wait()
            return total
        return reduce


def test_the_em_steps_of_two_blocks_add_up_to_one_block():
    K, d, cut = 40, 3, 17
    data = rounds(K, d, T=10)
    whole = MixtureBayes(K, d)
    halves = [MixtureBayes(cut, d, total_tasks=K), MixtureBayes(K - cut, d, total_tasks=K)]
    exchange = Exchange(2)
    for i, half in enumerate(halves):
        half.sum_blocks = exchange.reduce_of(i)
    for X, y, active in data:
        whole.margins(X, active, store=True)
        whole.learn(X, y, active)
        whole.set_totals(whole.statistics())
        parts, margins = [], []
        for half, (a, b) in zip(halves, ((0, cut), (cut, K))):
            mine = (active >= a) & (active < b)
            margins.append(half.margins(X[:, mine], active[mine] - a, store=True))
            half.learn(X[:, mine], y[:, mine], active[mine] - a)
            parts.append(half.statistics().copy())
        totals = parts[0] + parts[1]
        threads = [threading.Thread(target=half.set_totals, args=(totals,)) for half in halves]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    assert whole.prior_version > 3 and whole._width == whole.G
    for half in halves:
        np.testing.assert_allclose(half.centres_, whole.centres_, rtol=0, atol=1e-10)
        np.testing.assert_allclose(half.share_, whole.share_, rtol=0, atol=1e-12)
        np.testing.assert_allclose(half._prior[0], whole._prior[0], rtol=1e-10)
    X, _, active = data[-1]
    mine = active < cut
    np.testing.assert_allclose(halves[0].margins(X[:, mine], active[mine]),
                               whole.margins(X[:, mine], active[mine]), rtol=0, atol=1e-10)


def test_a_block_of_some_tasks_needs_the_exchange():
    K, d = 30, 3
    e = MixtureBayes(10, d, total_tasks=K)
    data = rounds(10, d, T=6)
    with pytest.raises(RuntimeError, match="exchange"):
        learn(e, data)


def test_em_finds_the_latent_groups():
    """Long streams in three well-separated groups: every component's centre points at one
    group's model, and every task's responsibilities lie on its own group's components."""
    X, y, group = grouped()
    K, d = len(X), X[0].shape[1]
    e = MixtureBayes(K, d)
    for t in range(len(y[0])):
        Xt = np.stack([x[t] for x in X])[None]
        e.margins(Xt, slice(None), store=True)
        e.learn(Xt, np.array([[v[t] for v in y]], dtype=float))
        e.set_totals(e.statistics())
    A, h, L = e._matrices(slice(None), store=True)
    r = e._responsibilities(L)                          # (G, K)
    # each component's group: the true model its centre points at (the groups' models are
    # the axes 3 e_g)
    cosine = e.centres_ / np.linalg.norm(e.centres_, axis=1, keepdims=True)
    owner = cosine.argmax(axis=1)
    used = r.sum(axis=1) > 0.5                        # components some task is in
    assert cosine.max(axis=1)[used].min() > 0.95
    on_own = np.array([r[owner == group[k], k].sum() for k in range(K)])
    assert on_own.min() > 0.99, on_own.min()
    assert set(owner[used]) == {0, 1, 2}


def test_state_round_trip_continues_bit_for_bit():
    K, d = 30, 4
    data = rounds(K, d)
    a = MixtureBayes(K, d)
    learn(a, data[:6])
    assert a._width == a.G
    b = MixtureBayes(K, d)
    b.load_state(a.state())
    for X, y, active in data[6:]:
        for e in (a, b):
            learn(e, [(X, y, active)])
        np.testing.assert_array_equal(a.margins(X, active), b.margins(X, active))
    for key, value in a.state().items():
        np.testing.assert_array_equal(value, b.state()[key], err_msg=key)


def skewed(K=60, d=3, seed=0):
    """Many short streams and a few long ones, in two groups of task models."""
    rng = np.random.default_rng(seed)
    lengths = np.concatenate(([50, 40], rng.integers(1, 10, size=K - 2)))
    W = np.array([[2.0, 0, 0], [-2.0, 1, 0]])[np.arange(K) % 2] + 0.1 * rng.normal(size=(K, d))
    X = [rng.normal(size=(n, d)) for n in lengths]
    return X, [np.where(x @ w >= 0, 1, -1) for x, w in zip(X, W)]


@pytest.mark.parametrize("algo, graph", [("c-admm", {}), ("d-admm", {"nodes": 3, "topology": "ring"})])
def test_it_is_used_and_resumes_from_a_checkpoint_bit_for_bit(monkeypatch, algo, graph):
    X, y = skewed()
    whole, _ = simulate(algo, X, y, **graph)
    resumed, _ = simulate(algo, X, y, restart_at=12, **graph)
    for a, b in zip(whole, resumed):
        np.testing.assert_array_equal(a, b)
    monkeypatch.setattr(mixture, "GROUPS", 1)   # the Gaussian prior: different predictions
    gaussian, _ = simulate(algo, X, y, **graph)
    assert any(np.any(a != b) for a, b in zip(whole, gaussian))


@pytest.mark.parametrize("algo, extra", [
    ("c-admm", []), ("d-admm", ["--topology", "ring"]),
    ("d-admm", ["--topology", "star", "--batch", "2"])])
@pytest.mark.mpi
def test_one_process_equals_mpiexec_with_the_em_exchange(mpiexec, tmp_path, algo, extra):
    """C-ADMM's EM steps through the server, D-ADMM's over a ring and a star (sums flooded
    through the neighbours): the same predictions and models in one process and on 4 ranks."""
    from omtl_mpi.data import write_tasks
    X, y = skewed(K=48)
    tasks = tmp_path / "skewed.h5"
    write_tasks(tasks, [f"c{k}" for k in range(len(X))], X, y)
    local = ["--nodes", "4"] if algo == "d-admm" else []
    assert_in_process_equals_mpiexec(["--data", tasks, "--algo", algo, *extra], local, 4,
                                     tmp_path, models=None)


def test_a_provisional_prior_is_restored_without_centres():
    """Before the first estimate draws the centres, a gossiped node uses a provisional Gaussian
    prior (width 1, no centres): a checkpoint taken then is restored with none (not zeros),
    and one taken after the centres were drawn gives them back as they were."""
    K, d = 30, 4
    e = MixtureBayes(K, d)
    e._take(np.eye(d) / 0.3, np.ones((d, 1)), np.zeros(1))           # as gossiped_prior does
    learn(e, rounds(K, d, T=4, B=1), estimate=False)
    back = MixtureBayes(K, d)
    back.load_state(e.state())
    assert e.centres_ is None and back.centres_ is None and back.share_ is None
    e.centres_, e.share_ = np.arange(e.G * d, dtype=float).reshape(e.G, d), np.full(e.G, 1 / e.G)
    back.load_state(e.state())
    assert np.array_equal(back.centres_, e.centres_) and np.array_equal(back.share_, e.share_)
