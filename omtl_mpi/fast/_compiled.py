"""The numba functions behind :mod:`.kernels` (imported only by :func:`.kernels.load`).

Each is compiled for one signature when this module is first imported (or loaded from numba's
on-disk cache), so a call with arrays of another type fails loudly instead of compiling again
in the middle of a run. Arrays are of any layout: D-ADMM passes column blocks of its table.
"""
from __future__ import annotations

import math

import numpy as np
from numba import boolean, float64, int64, void

from .kernels import compiled as _compile

_f1, _f2, _f3 = float64[:], float64[:, :], float64[:, :, :]

# Every constant the compiled code freezes in is defined in this file, because numba's on-disk
# cache is checked against the defining file alone (numba#9304): a constant imported from
# another file could change without the cached code noticing. These two are relationship.py's
# (tests/test_kernels.py checks that they agree).
_SAFE_LOW, _SAFE_HIGH = 1e-140, 1e140
# relationship_step's and consensus_matrix's return codes
OK, RESCALE, STABLE = 0, 1, 2


@_compile(void(_f2, _f2, _f2, _f2, _f3, _f2, _f1, boolean[:, :], int64, float64, float64, float64))
def worker_step(W, Z, R, C, X, y, inv_count, positive, loss, keep, inv, rho):
    """TaskBlock.predict_and_step for the Euclidean w-step, in place.

    Writes the predictions ``positive`` (B x kb, made with the old W), the new ``W`` and the
    message ``C = rho W + Z``. ``R`` is ``(rho (u + v_k) - z_k) / (rho + eta)`` from
    :func:`dual_step`; ``keep = eta / (rho + eta)``, ``inv = 1 / (rho + eta)``; ``loss`` is a
    :data:`.kernels.LOSS_CODES` value.
    """
    B, kb, d = X.shape
    g = np.zeros(d)
    for k in range(kb):
        for i in range(d):
            g[i] = 0.0
        for b in range(B):
            m = 0.0
            for i in range(d):
                m += W[k, i] * X[b, k, i]
            pos = m >= 0.0
            positive[b, k] = pos
            lab = y[b, k]
            if loss == 0:            # hinge: y where y m < 1
                coef = lab if lab * m < 1.0 else 0.0
            elif loss == 1:          # perceptron: y on a mistake
                coef = lab * (1.0 if (lab > 0.0) != pos else 0.0)
            elif loss == 2:          # logistic: y expit(-y m) = y / (1 + exp(y m))
                coef = lab * (1.0 / (1.0 + math.exp(lab * m)))
            else:                    # squared hinge: y max(0, 1 - y m)
                coef = lab * max(0.0, 1.0 - lab * m)
            for i in range(d):
                g[i] += coef * X[b, k, i]
        # the batch mean (with B = 1 every count is 1: padding has a zero gradient)
        scale = inv_count[k] if B > 1 else 1.0
        for i in range(d):
            w = W[k, i] * keep + R[k, i] + (g[i] * scale) * inv
            W[k, i] = w
            C[k, i] = w * rho + Z[k, i]


@_compile(void(_f2, _f2, _f2, _f2, _f2, _f2, float64, float64))
def dual_step(u, V, C, Z, R, rY, rho, inv):
    """TaskBlock.dual_step with EuclidStep.prepare: ``rY = rho (V + u)``, ``Z = C - rY``,
    ``R = (rY - Z) inv``. ``u`` has one row (shared) or one per task (tasks learned alone)."""
    kb, d = V.shape
    shared = u.shape[0] == 1
    for k in range(kb):
        ku = 0 if shared else k
        for i in range(d):
            r = (V[k, i] + u[ku, i]) * rho
            z = C[k, i] - r
            rY[k, i] = r
            Z[k, i] = z
            R[k, i] = (r - z) * inv


@_compile(int64(_f1, _f2, float64, float64, float64, float64, _f2))
def consensus_matrix(evals, Q, a, rho, lambda2, lambda4, M):
    """relationship.consensus_matrix: the exact variant's (K+1) x K matrix M with
    ``[u; V] = M C``, from Omega's eigenpairs (``evals``, ``Q``), into ``M``.

    Returns OK, or STABLE when M would lose digits to cancellation (relationship then builds
    it in Omega's eigenvectors).
    """
    K = evals.shape[0]
    a_rho = a + rho
    # P = Q diag(f) Q^T (or I / (a + rho) when lambda4 = 0) into M[1:], p = P 1
    f = np.empty(K)
    for i in range(K):
        f[i] = evals[i] / (evals[i] * a_rho + lambda4)
    p = np.empty(K)
    p_sum = 0.0
    for i in range(K):
        s = 0.0
        for j in range(K):
            if lambda4 == 0.0:
                P = 1.0 / a_rho if i == j else 0.0
            else:
                P = 0.0
                for l in range(K):
                    P += Q[i, l] * f[l] * Q[j, l]
            M[1 + i, j] = P
            s += P
        p[i] = s
        p_sum += s
    den = lambda2 + rho * K - rho * rho * p_sum
    if not den > 4e-6 * rho * K:
        return STABLE
    for j in range(K):
        M[0, j] = p[j] * (-rho / den) + 1.0 / den
    for i in range(K):
        rp = p[i] * rho
        for j in range(K):
            M[1 + i, j] -= rp * M[0, j]
    return OK


@_compile(int64(_f2, float64, float64, float64, float64, float64, _f1, _f2, _f2))
def relationship_step(V, eps, a, rho, lambda2, lambda4, evals, Q, M):
    """Omega from V and the exact variant's consensus matrix: relationship.update_omega and
    consensus_matrix in one call.

    Writes Omega's eigenpairs (``evals``, K; ``Q``, K x K) and ``M`` ((K+1) x K). Returns OK;
    RESCALE when the Gram matrix ``V V^T`` is not finite or may have under- or overflowed
    (relationship's careful path then takes over); STABLE when M would lose digits to
    cancellation (relationship builds it in Omega's eigenvectors).
    """
    K, d = V.shape
    G = np.empty((K, K))
    for i in range(K):
        for j in range(i + 1):
            s = 0.0
            for l in range(d):
                s += V[i, l] * V[j, l]
            if not math.isfinite(s):
                return RESCALE
            G[i, j] = s
            G[j, i] = s
    lam, vecs = np.linalg.eigh(G)          # LAPACK dsyevd, as relationship.symmetric_eig
    Q[...] = vecs
    root_trace = 0.0
    for i in range(K):
        x = lam[i]
        r = math.sqrt(x) if x > 0.0 else 0.0
        evals[i] = r
        root_trace += r
    if not (_SAFE_LOW < root_trace < _SAFE_HIGH):
        return RESCALE
    total = root_trace + K * eps
    for i in range(K):
        evals[i] = (evals[i] + eps) / total
    return consensus_matrix(evals, Q, a, rho, lambda2, lambda4, M)


@_compile(void(_f2, _f2, _f2))
def apply_consensus(M, C, uv):
    """``uv = M C``: the exact variant's (u, V) step (Consensus.step), for C of any layout
    (D-ADMM's is a column block of its table)."""
    n, K = M.shape
    d = C.shape[1]
    for i in range(n):
        for l in range(d):
            uv[i, l] = 0.0
        for j in range(K):
            m = M[i, j]
            for l in range(d):
                uv[i, l] += m * C[j, l]


@_compile(float64(_f3))
def merge_tables(slots):
    """DAdmmNode.merge: the freshest row per task from ``slots[0]`` (this node's table) and the
    neighbours' tables, kept in ``slots[0]``; the first maximum wins, so on a tie our own copy
    stays. Returns the sum of the kept stamps (the last column)."""
    n, K, width = slots.shape
    total = 0.0
    for j in range(K):
        best, stamp = 0, slots[0, j, width - 1]
        for s in range(1, n):
            if slots[s, j, width - 1] > stamp:
                best, stamp = s, slots[s, j, width - 1]
        if best != 0:
            for i in range(width):
                slots[0, j, i] = slots[best, j, i]
        total += stamp
    return total
