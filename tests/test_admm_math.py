"""Pure-math tests of the ADMM pieces against docs/ALGORITHMS.md sections 2 and 4 (no MPI, no
files), the factored Omega against the spec's K x K formulas among them."""
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import HOSTILE_FAST as FAST, one_line_errors

from omtl_mpi.algorithms.admm import GIVEN, AdmmParams, Consensus, TaskBlock
from omtl_mpi.algorithms.relationship import ExactStep, Relationship, paper_step, update_omega
from omtl_mpi.errors import ConfigError, UserError


# ---------------------------------------------------------------- the spec's K x K formulas
def dense_omega(V, eps):
    """Omega = ((V^T V)^{1/2} + eps I) / tr, K x K (docs/ALGORITHMS.md section 4), through the
    eigendecomposition of the K x K Gram matrix. Its eigenvalues of rounding size are zero:
    V has rank <= min(K, d), and the square root of rounding noise (about 1e-8 |V|) is not
    an eigenvalue of (V^T V)^{1/2} but an artefact of squaring V."""
    lam, Q = np.linalg.eigh(V @ V.T)
    cut = max(V.shape) * np.finfo(float).eps * max(lam.max(), 0.0)
    s = np.sqrt(np.where(lam > cut, lam, 0.0)) + eps
    omega = (Q * (s / s.sum())) @ Q.T
    return (omega + omega.T) / 2


def dense_exact_step(omega, p, C):
    """The spec's exact (u, V) step with Omega as a K x K matrix (section 2.2)."""
    K = C.shape[0]
    w, Q = np.linalg.eigh(omega)
    w = np.maximum(w, 0.0)
    f = w / ((p.a + p.rho) * w + p.lambda4) if p.lambda4 else np.full(K, 1 / (p.a + p.rho))
    P = (Q * f) @ Q.T
    p_vec = P.sum(axis=1)
    u = C.T @ (1 - p.rho * p_vec) / (p.lambda2 + p.rho * K - p.rho ** 2 * p_vec.sum())
    return u, P @ (C - p.rho * u)


def dense_paper_step(omega, p, C, V_old):
    """The paper variant's printed formulas with numpy's pseudo-inverse (section 2.2)."""
    K, a = C.shape[0], p.a
    u = a * C.sum(axis=0) / (a * (p.lambda2 + p.rho * K) + p.lambda2 * p.rho)
    pinv = np.linalg.pinv(omega)
    V = p.lambda2 * C / (p.lambda2 * (a + p.rho) + p.rho * K * a) + (p.lambda4 / 2) * (pinv + pinv.T) @ V_old
    return u, V


def factored(omega):
    """A K x K Omega (full rank) as a Relationship: its whole eigenbasis, nothing left over."""
    evals, evecs = np.linalg.eigh(omega)
    return Relationship(evecs, evals, 0.0)


def _problems(n, seed):
    """Random (K, d, V) with K from 1 to 300, d from 1 to 40, some of rank below min(K, d),
    some with K = d, at scales 1e-3..1e3."""
    rng = np.random.default_rng(seed)
    for trial in range(n):
        K, d = int(rng.integers(1, 301)), int(rng.integers(1, 41))
        if trial % 5 == 0:
            K = d = int(rng.integers(1, 41))
        rank = int(rng.integers(1, min(K, d) + 1)) if trial % 3 == 0 else min(K, d)
        V = rng.normal(size=(K, rank)) @ rng.normal(size=(rank, d)) * 10 ** rng.uniform(-3, 3)
        yield rng, K, d, V


def test_factored_omega_and_steps_equal_the_k_by_k_formulas():
    """Omega's update and the exact and paper (u, V) steps, factored (O(K d^2)), equal the
    spec's K x K formulas on random problems to 1e-9 (relative to the largest entry)."""
    for rng, K, d, V in _problems(150, 0):
        eps = 1e-8
        rel = update_omega(V, eps, Relationship.identity(K))
        omega = dense_omega(V, eps)
        np.testing.assert_allclose(rel.omega, omega, rtol=0, atol=1e-9, err_msg=f"K={K} d={d}")
        p = AdmmParams.paper(eta=1.0, lambda4=float(rng.choice([0.0, 0.01, 0.3])))
        C = rng.normal(size=(K, d))
        # the paper variant multiplies V_old by Omega's pseudo-inverse, whose condition number
        # is about |V| / eps: compared with a ridge that keeps it well conditioned (with
        # eps = 1e-8 both forms are right to that conditioning, not to 1e-9)
        ridged = update_omega(V, 1e-2 * np.abs(V).max(), Relationship.identity(K))
        ridged_dense = dense_omega(V, 1e-2 * np.abs(V).max())
        for (u, Vn), (u_ref, V_ref) in (
                (ExactStep(rel, p.a, p.rho, p.lambda2, p.lambda4).step(C), dense_exact_step(omega, p, C)),
                (paper_step(ridged, p.a, p.rho, p.lambda2, p.lambda4, C, V),
                 dense_paper_step(ridged_dense, p, C, V))):
            scale = max(1.0, np.abs(V_ref).max(), np.abs(u_ref).max())
            np.testing.assert_allclose(u, u_ref, rtol=0, atol=1e-9 * scale, err_msg=f"K={K} d={d}")
            np.testing.assert_allclose(Vn, V_ref, rtol=0, atol=1e-9 * scale, err_msg=f"K={K} d={d}")


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
@pytest.mark.parametrize("K", [4, 20])
def test_exact_variant_is_the_joint_minimiser(lambda4, K):
    rng = np.random.default_rng(1)
    d = 6
    p = AdmmParams.paper(eta=10.0, lambda4=lambda4, relationship=False)
    cons = Consensus(p, K, d)
    omega = random_omega(rng, K)
    cons.rel = factored(omega)
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


def test_the_steps_handle_a_singular_omega():
    """Omega with a null direction (eps = 0): the exact step gives V no part along it, and the
    paper variant's pseudo-inverse is numpy's."""
    K, d = 3, 2
    rng = np.random.default_rng(4)
    Q = np.linalg.qr(rng.normal(size=(K, K)))[0]
    rel = Relationship(Q[:, :2], np.array([0.5, 0.5]), 0.0)
    p = AdmmParams.paper(eta=1.0, lambda4=0.01)
    u, V = ExactStep(rel, p.a, p.rho, p.lambda2, p.lambda4).step(rng.normal(size=(K, d)))
    assert np.all(np.isfinite(V)) and np.all(np.isfinite(u))
    np.testing.assert_allclose(Q[:, 2] @ V, 0.0, atol=1e-14)   # null direction gets v = 0
    V_old = rng.normal(size=(K, d))
    _, V = paper_step(rel, p.a, p.rho, p.lambda2, p.lambda4, np.zeros((K, d)), V_old)
    np.testing.assert_allclose(V, p.lambda4 * np.linalg.pinv(rel.omega) @ V_old, atol=1e-10)


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
    np.testing.assert_allclose(rel.basis.T @ rel.basis, np.eye(rel.basis.shape[1]), atol=1e-12)
    if scale == 1.0:
        # the spec's formula (V^T V)^{1/2} + eps I, normalised
        np.testing.assert_allclose(om, dense_omega(V, 1e-8), atol=1e-12)


@pytest.mark.parametrize("K", [3, 20])
def test_omega_update_keeps_previous_when_undefined(K):
    prev = Relationship.identity(K)
    assert update_omega(np.zeros((K, 4)), 0.0, prev) is prev
    assert update_omega(np.full((K, 4), np.inf), 1e-8, prev) is prev
    V = np.ones((K, 4))
    V[1, 2] = np.nan
    assert update_omega(V, 1e-8, prev) is prev


def test_w_step_matches_equation():
    rng = np.random.default_rng(6)
    kb, d = 3, 4
    p = AdmmParams.paper(eta=7.0)
    blk = TaskBlock(p, kb, d, mode=GIVEN)
    W0, Z0 = rng.normal(size=(kb, d)), rng.normal(size=(kb, d))
    u0, V0 = rng.normal(size=d), rng.normal(size=(kb, d))
    blk.load_state({"W": W0, "Z": Z0, "C": Z0 + p.rho * W0, "u": u0, "V": V0,
                    "started": np.ones(kb, dtype=bool)})
    X = rng.normal(size=(1, kb, d))
    y = np.array([[1.0, -1.0, 0.0]])                # last one padding: a zero gradient
    positive = blk.predict_and_step(X, y, np.ones(kb))
    C = blk.C
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
    """Found by the random command-line values (tests/test_run_refusals.py): drom with --mu
    3.8e16 ended in numpy's LinAlgError."""
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
    """Found by the random command-line values (tests/test_run_refusals.py): ``lambda2 + rho K -
    rho^2 s`` cancelled to 0 at rho = 1.5e14.  With lambda4 = 0 the paper's u (eq. solution1-2) is free of cancellation,
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
    alone = [(TaskBlock(params, 1, d, mode=GIVEN), Consensus(params, 1, d)) for _ in range(K)]
    for t in range(T):
        node.local_step(X[t], y[t], np.ones(K))
        for k, (block, cons) in enumerate(alone):
            block.predict_and_step(X[t][:, k:k + 1], y[t][:, k:k + 1], np.ones(1))
            block.dual_step(*cons.step(block.C))
    # two algebraically equal forms: with the defaults' lambdas (10^-6) V is a difference of
    # near-equal numbers, which rounds differently by ~1e-12 relative
    for k, (block, _) in enumerate(alone):
        np.testing.assert_allclose(node.block.W[k], block.W[0], rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(node.block.V[k], block.V[0], rtol=1e-10, atol=1e-14)


def test_omega_fixed_step_is_each_tasks_own():
    """With Omega = I/K (the defaults) every v_k follows from its own c_k and u: the block's
    FIXED_OMEGA mode equals the consensus step over every task's messages."""
    rng = np.random.default_rng(5)
    K, d = 6, 3
    p = AdmmParams(eta=1.0, lambda4=0.05, experts=False)
    C = rng.normal(size=(K, d))
    u, V = Consensus(p, K, d).step(C)
    step = ExactStep(Relationship.identity(K), p.a, p.rho, p.lambda2, p.lambda4)
    np.testing.assert_allclose(step.u(C), u, rtol=1e-13)
    np.testing.assert_allclose(step.f_rest * (C - p.rho * u), V, rtol=1e-12, atol=1e-15)


# ---------------------------------------------------------------- a whole run, as the spec writes it
def spec_run(Xs, ys, B, p, relationship, variant, eps=1e-8):
    """C-ADMM as docs/ALGORITHMS.md sections 1, 2 and 4 write it, K x K and task by task:
    euclid w-step, hinge loss, sign(w . x); a task without instances in a round takes no
    w-step or z-step, and the last mini-batch of a stream may be short."""
    K, d = len(Xs), Xs[0].shape[1]
    n = np.array([len(y) for y in ys])
    W, Z, C, V = (np.zeros((K, d)) for _ in range(4))
    u, omega = np.zeros(d), np.eye(K) / K
    preds = [np.zeros(len(y), np.int8) for y in ys]
    for t in range(int(np.ceil(n.max() / B))):
        active = [k for k in range(K) if t * B < n[k]]
        for k in active:
            X, y = Xs[k][t * B:(t + 1) * B], ys[k][t * B:(t + 1) * B].astype(float)
            m = X @ W[k]
            preds[k][t * B:(t + 1) * B] = np.where(m >= 0, 1, -1)
            g = -(np.where(y * m < 1, y, 0.0)[:, None] * X).mean(axis=0)
            W[k] = (p.eta * W[k] + p.rho * (u + V[k]) - g - Z[k]) / (p.rho + p.eta)
            C[k] = Z[k] + p.rho * W[k]
        u, V = (dense_exact_step(omega, p, C) if variant == "exact"
                else dense_paper_step(omega, p, C, V))
        for k in active:
            Z[k] += p.rho * (W[k] - u - V[k])
        if relationship:
            omega = dense_omega(V, eps)
    return preds, W


@pytest.mark.parametrize("relationship, variant, batch, atol", [
    (False, "exact", 3, 1e-13), (False, "exact", 1, 1e-13),
    (True, "exact", 2, 1e-8), (True, "exact", 3, 1e-8), (True, "paper", 3, 1e-8)])
def test_a_whole_run_is_the_spec_loop(relationship, variant, batch, atol):
    """Unequal streams whose lengths the mini-batch does not divide (7, 2, 5, 1, 8 with B = 3:
    short last batches, tasks ending at different rounds): the same predictions as the spec's
    loop, and W to rounding (with Omega learned, to the square roots of rounding that the K x K
    Omega takes)."""
    from omtl_mpi.algorithms import registry
    from support.drive import simulate
    rng = np.random.default_rng(11)
    lengths, d = [7, 2, 5, 1, 8], 4
    Xs = [rng.normal(size=(n, d)) for n in lengths]
    ys = [np.where(X @ rng.normal(size=d) >= 0, 1, -1).astype(np.int8) for X in Xs]
    params = registry.get("c-admm").params(
        w_step="euclid", loss="hinge", experts=False, relationship=relationship, variant=variant,
        rho=0.1, eta=3.0, lambda1=0.01, lambda2=0.1, lambda3=0.01, lambda4=0.01)
    preds, rows = simulate("c-admm", Xs, ys, params=params, batch=batch)
    ref_preds, ref_W = spec_run(Xs, ys, batch, params.resolved(8), relationship, variant)
    for a, b in zip(preds, ref_preds):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(rows["W"], ref_W, rtol=0, atol=atol)


# -------------------------------------------------------- hostile hyper-parameters (hypothesis)
@FAST
@given(st.dictionaries(st.sampled_from(["rho", "eta", "lambda1", "lambda2", "lambda3", "lambda4",
                                        "omega_eps"]),
                       st.floats(allow_nan=True, allow_infinity=True), max_size=4),
       st.integers(-3, 3))
def test_hostile_hyper_parameters(params, every):
    try:
        p = AdmmParams(**params, omega_every=every)
        assert p.rho > 0 and p.lambda1 > 0 and p.lambda2 > 0 and p.omega_every >= 1
        assert all(math.isfinite(getattr(p, k)) for k in params)
    except UserError as exc:
        one_line_errors(exc)
