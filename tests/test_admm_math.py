"""Pure-math tests of the ADMM pieces against docs/ALGORITHMS.md sections 2 and 4 (no MPI, no files)."""
import numpy as np
import pytest

from omtl_mpi.algorithms.admm import AdmmParams, Consensus, TaskBlock
from omtl_mpi.algorithms.relationship import (Relationship, consensus_matrix, exact_operator,
                                              pseudo_inverse, update_omega)
from omtl_mpi.errors import ConfigError


def random_omega(rng, K):
    A = rng.normal(size=(K, K))
    S = A @ A.T + 0.1 * np.eye(K)
    return S / np.trace(S)


def brute_force_minimiser(C, omega, p):
    """Solve the stationarity equations of the (u, V) block directly (needs Omega^-1)."""
    K, d = C.shape
    om_inv = np.linalg.inv(omega)
    n = (K + 1) * d
    A = np.zeros((n, n))
    b = np.zeros(n)
    I = np.eye(d)
    # u rows: (l2 + rho K) u + rho sum_k v_k = sum_k c_k
    A[:d, :d] = (p.lambda2 + p.rho * K) * I
    for k in range(K):
        A[:d, d * (k + 1): d * (k + 2)] = p.rho * I
    b[:d] = C.sum(axis=0)
    # v_k rows: rho u + (a + rho) v_k + l4 sum_j Om^-1_kj v_j = c_k
    for k in range(K):
        r = slice(d * (k + 1), d * (k + 2))
        A[r, :d] = p.rho * I
        for j in range(K):
            A[r, d * (j + 1): d * (j + 2)] += p.lambda4 * om_inv[k, j] * I
        A[r, r] += (p.a + p.rho) * I
        b[r] = C[k]
    x = np.linalg.solve(A, b)
    return x[:d], x[d:].reshape(K, d)


@pytest.mark.parametrize("lambda4", [0.01, 0.5, 3.0])
@pytest.mark.parametrize("K", [4, 20])           # task scalars as Python floats, and as arrays
def test_exact_variant_is_the_joint_minimiser(lambda4, K):
    rng = np.random.default_rng(1)
    d = 6
    p = AdmmParams.paper(eta=10.0, lambda4=lambda4, relationship=False)
    cons = Consensus(p, K, d)
    omega = random_omega(rng, K)
    evals, evecs = np.linalg.eigh(omega)
    cons.rel = Relationship(evals, evecs)
    C = rng.normal(size=(K, d))
    u, V = cons.step(C)
    u_ref, V_ref = brute_force_minimiser(C, omega, p)
    np.testing.assert_allclose(u, u_ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(V, V_ref, rtol=0, atol=1e-12)


def test_exact_with_lambda4_zero_equals_paper_u():
    """Spec equivalence 3: u of eq. solution1-2 and v_k = (c_k - rho u) / (a + rho)."""
    rng = np.random.default_rng(2)
    K, d = 5, 9
    exact = Consensus(AdmmParams.paper(eta=1.0, lambda4=0.0), K, d)
    paper = Consensus(AdmmParams.paper(eta=1.0, lambda4=0.0, variant="paper"), K, d)
    for _ in range(5):
        C = rng.normal(size=(K, d))
        u_e, V_e = exact.step(C)
        u_p, _ = paper.step(C)
        exact.update_relationship()
        paper.update_relationship()
        np.testing.assert_allclose(u_e, u_p, rtol=0, atol=1e-12)
        p = exact.p
        np.testing.assert_allclose(V_e, (C - p.rho * u_e) / (p.a + p.rho), rtol=0, atol=1e-12)


def test_paper_variant_is_the_printed_formula():
    rng = np.random.default_rng(3)
    K, d = 3, 4
    p = AdmmParams.paper(eta=1.0, variant="paper", relationship=False)
    cons = Consensus(p, K, d)
    V_old = rng.normal(size=(K, d))
    cons.V = V_old.copy()
    C = rng.normal(size=(K, d))
    u, V = cons.step(C)
    a = p.a
    u_ref = a * C.sum(axis=0) / (a * (p.lambda2 + p.rho * K) + p.lambda2 * p.rho)
    om_pinv = np.linalg.pinv(np.eye(K) / K)
    Vcols = V_old.T                                            # d x K, the paper's layout
    extra = (p.lambda4 / 2) * (Vcols @ om_pinv + Vcols @ om_pinv.T)
    V_ref = (p.lambda2 * C.T / (p.lambda2 * (a + p.rho) + p.rho * K * a) + extra).T
    np.testing.assert_allclose(u, u_ref, atol=1e-13)
    np.testing.assert_allclose(V, V_ref, atol=1e-13)


def test_exact_operator_handles_singular_omega():
    K = 3
    Q = np.linalg.qr(np.random.default_rng(4).normal(size=(K, K)))[0]
    rel = Relationship(np.array([0.5, 0.5, 0.0]), Q)
    P = exact_operator(rel, a=0.02, rho=0.1, lambda4=0.01)
    assert np.all(np.isfinite(P))
    np.testing.assert_allclose(P @ Q[:, 2], 0.0, atol=1e-14)   # null direction gets v = 0
    np.testing.assert_allclose(pseudo_inverse(rel), np.linalg.pinv(rel.omega), atol=1e-10)


@pytest.mark.parametrize("scale", [1.0, 1e-150, 1e150, 0.0])
@pytest.mark.parametrize("K", [5, 20])
def test_omega_update_is_psd_trace_one_at_any_scale(scale, K):
    rng = np.random.default_rng(5)
    d = K + 2          # rank K - 1: one zero eigenvalue, whose square root amplifies rounding
    V = rng.normal(size=(K, d)) * scale
    V[3] = V[1]                                 # duplicate task: V^T V rank-deficient
    prev = Relationship.identity(K)
    rel = update_omega(V, 1e-8, prev)
    om = rel.omega
    assert np.all(np.isfinite(om))
    np.testing.assert_allclose(om, om.T, atol=0)
    assert abs(np.trace(om) - 1.0) < 1e-12
    assert np.linalg.eigvalsh(om).min() > -1e-14
    np.testing.assert_allclose((rel.evecs * rel.evals) @ rel.evecs.T, om, atol=1e-14)
    if scale == 1.0:
        # matches the textbook formula (V^T V)^{1/2} + eps I, normalised
        lam, Q = np.linalg.eigh(V @ V.T)
        S = Q @ np.diag(np.sqrt(np.clip(lam, 0, None))) @ Q.T + 1e-8 * np.eye(K)
        np.testing.assert_allclose(om, S / np.trace(S), atol=1e-12)


@pytest.mark.parametrize("K", [3, 20])
def test_omega_update_keeps_previous_when_undefined(K):
    prev = Relationship.identity(K)
    assert update_omega(np.zeros((K, 4)), 0.0, prev) is prev
    assert update_omega(np.full((K, 4), np.inf), 1e-8, prev) is prev
    V = np.ones((K, 4))
    V[1, 2] = np.nan
    assert update_omega(V, 1e-8, prev) is prev


@pytest.mark.parametrize("K", [1, 3, 5, 16])
def test_python_float_and_array_paths_give_the_same_bits(K, monkeypatch):
    """Up to 16 tasks the Omega update and P's eigenvalues are computed on Python floats: the
    same IEEE operations in the same order as the array code, so the same bits."""
    from omtl_mpi.algorithms import relationship
    rng = np.random.default_rng(K)
    V = rng.normal(size=(K, 9)) * 0.3
    prev = Relationship.identity(K)

    def everything():
        rel = update_omega(V, 1e-8, prev)
        return [rel.evals, rel.evecs, exact_operator(rel, 0.02, 0.1, 0.01),
                relationship.consensus_matrix(rel, 0.02, 0.1, 0.1, 0.01)]

    small = everything()
    monkeypatch.setattr(relationship, "_MAX_TASKS_AS_FLOATS", 0)
    for a, b in zip(small, everything()):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("loss", ["hinge", "perceptron"])
def test_one_task_loss_in_python_floats_gives_the_same_bits(loss):
    """A block of one task (a rank per task) takes the loss factor in Python floats; the
    model, duals and messages are bit for bit those of the array code."""
    rng = np.random.default_rng(9)
    p = AdmmParams.paper(eta=30.0, loss=loss)
    fast, slow = TaskBlock(p, 1, 9), TaskBlock(p, 1, 9)
    assert fast._scalar_loss == loss
    slow._scalar_loss = None
    for t in range(2000):
        X = rng.normal(size=(1, 1, 9))
        y = np.where(rng.random((1, 1)) < 0.5, -1.0, 1.0)
        if t % 97 == 0:                                   # a padding instance
            X[...], y[...] = 0.0, 0.0
        a = fast.predict_and_step(X, y, np.ones(1))
        b = slow.predict_and_step(X, y, np.ones(1))
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
        u, V = rng.normal(size=9) * 0.1, rng.normal(size=(1, 9)) * 0.1
        fast.dual_step(u, V)
        slow.dual_step(u, V)
    assert np.array_equal(fast.W, slow.W) and np.array_equal(fast.Z, slow.Z)
    assert TaskBlock(p, 2, 9)._scalar_loss is None
    assert TaskBlock(AdmmParams.paper(eta=1.0, loss=loss, w_step="adagrad"), 1, 9)._scalar_loss is None


def test_w_step_matches_equation():
    rng = np.random.default_rng(6)
    kb, d = 3, 4
    p = AdmmParams.paper(eta=7.0)
    blk = TaskBlock(p, kb, d)
    W0, Z0 = rng.normal(size=(kb, d)), rng.normal(size=(kb, d))
    u0, V0 = rng.normal(size=d), rng.normal(size=(kb, d))
    blk.load_state({"W": W0, "Z": Z0, "u": u0, "V": V0})
    X = rng.normal(size=(1, kb, d))
    y = np.array([[1.0, -1.0, 0.0]])                # last task inactive (padding)
    positive, C = blk.predict_and_step(X, y, np.ones(kb))
    m = np.einsum("kd,kd->k", W0, X[0])
    g = np.where(y[0] * m < 1, -y[0], 0.0)[:, None] * X[0]
    W_ref = (p.eta * W0 + p.rho * (u0 + V0) - g - Z0) / (p.rho + p.eta)
    np.testing.assert_allclose(blk.W, W_ref, atol=1e-14)
    np.testing.assert_allclose(C, Z0 + p.rho * W_ref, atol=1e-14)
    np.testing.assert_array_equal(positive[0], m >= 0)
    u1, V1 = rng.normal(size=d), rng.normal(size=(kb, d))
    blk.dual_step(u1, V1)
    np.testing.assert_allclose(blk.Z, Z0 + p.rho * (W_ref - u1 - V1), atol=1e-14)


@pytest.mark.parametrize("bad", [dict(rho=0), dict(lambda1=-1), dict(lambda2=0), dict(lambda4=-0.1),
                                 dict(eta=-1.0), dict(omega_every=0), dict(rho=float("nan")),
                                 dict(variant="nope"), dict(loss="squared"), dict(omega_eps=-1)])
def test_invalid_hyper_parameters_are_refused(bad):
    with pytest.raises(ConfigError) as err:
        AdmmParams.paper(**bad)
    assert "--" in str(err.value)


def test_drom_divergence_is_an_error_not_a_linalg_traceback():
    """Found by tests/test_hostile_more.py: drom with --mu 3.8e16 ended in numpy's LinAlgError."""
    from omtl_mpi.algorithms.admm import DivergenceError
    from omtl_mpi.algorithms.server_baselines import DromParams, DromServer
    server = DromServer(DromParams(mu=3.8e16), 3, 4, [(0, 3)])
    with pytest.raises(DivergenceError, match="lower --mu or --gamma0"):
        server.step(np.full(12, 1e200))


def test_paper_variant_divergence_is_an_error_not_nan():
    from omtl_mpi.algorithms.admm import DivergenceError
    rng = np.random.default_rng(7)
    cons = Consensus(AdmmParams.paper(eta=1.0, variant="paper", lambda4=0.9), 5, 4)
    with pytest.raises(DivergenceError, match="lower --lambda4 or use --variant exact"):
        for _ in range(10000):
            cons.step(rng.normal(size=(5, 4)))
            cons.update_relationship()


@pytest.mark.parametrize("rho", [1e9, 1.5e14])
def test_exact_step_does_not_cancel_at_huge_rho(rho):
    """Found by tests/test_hostile_more.py: ``lambda2 + rho K - rho^2 s`` cancelled to 0 at
    rho = 1.5e14.  With lambda4 = 0 the paper's u (eq. solution1-2) is free of cancellation,
    and the exact step must equal it to rounding at any rho."""
    rng = np.random.default_rng(8)
    K, d = 5, 4
    p = AdmmParams.paper(eta=1.0, rho=rho, lambda4=0.0)
    cons = Consensus(p, K, d)
    cons.rel = update_omega(rng.normal(size=(K, d)), 1e-8, Relationship.identity(K))
    C = rng.normal(size=(K, d))
    u, V = cons.step(C)
    a = p.a
    u_ref = a * C.sum(axis=0) / (a * (p.lambda2 + rho * K) + p.lambda2 * rho)
    np.testing.assert_allclose(u, u_ref, rtol=1e-9, atol=0)
    np.testing.assert_allclose(V, (C - rho * u) / (a + rho), rtol=1e-6, atol=1e-25)


def test_admm_single_is_c_admm_alone_per_task():
    """ADMM-Single's closed form equals C-ADMM run on each task alone (K = 1, lambda4 = 0)."""
    from omtl_mpi.algorithms.independent import AdmmSingleNode, SingleParams
    rng = np.random.default_rng(3)
    K, d, T = 3, 4, 6
    X, y = rng.normal(size=(T, 1, K, d)), np.where(rng.normal(size=(T, 1, K)) > 0, 1.0, -1.0)
    params = SingleParams().resolved(T)
    node = AdmmSingleNode(params, K, d, 0, K)
    alone = [(TaskBlock(params, 1, d), Consensus(params, 1, d)) for _ in range(K)]
    for t in range(T):
        node.local_step(X[t], y[t], np.ones(K))
        for k, (block, cons) in enumerate(alone):
            _, C = block.predict_and_step(X[t][:, k:k + 1], y[t][:, k:k + 1], np.ones(1))
            block.dual_step(*cons.step(C))
    # two algebraically equal forms: with the defaults' lambdas (10^-6) V is a difference of
    # near-equal numbers, which rounds differently by ~1e-12 relative
    for k, (block, _) in enumerate(alone):
        np.testing.assert_allclose(node.block.W[k], block.W[0], rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(node.block.V[k], block.V[0], rtol=1e-10, atol=1e-14)


def test_a_learned_omega_takes_the_matrix_step_from_the_first_round():
    """With K > d a run is sensitive to the last bit (docs/DESIGN.md), so the paper's model
    (Omega learned) takes the one matrix product of docs/ALGORITHMS.md section 2.2 from the first round on,
    while Omega is still I/K: a shortcut for that round would change every later one."""
    rng = np.random.default_rng(5)
    K, d = 6, 3
    p = AdmmParams.paper(eta=1.0)
    C = rng.normal(size=(K, d))
    u, V = Consensus(p, K, d).step(C)
    M = consensus_matrix(Relationship.identity(K), p.a, p.rho, p.lambda2, p.lambda4)
    np.testing.assert_array_equal(np.vstack([u, V]), M @ C)
