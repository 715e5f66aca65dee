"""The task-relationship matrix Omega and the linear maps built from it (docs/ALGORITHMS.md
sections 2 and 4).

Omega is always held together with its symmetric eigendecomposition, because every formula
that uses it (the exact consensus operator P, the pseudo-inverse of the paper variant) needs
that decomposition, and the Omega update produces it for free: Omega = S / tr(S) with
S = (V^T V)^{1/2} + eps I shares the eigenvectors of V^T V.

These functions run once per round on K x K matrices, where Python's cost per numpy call, not
arithmetic, is the price: they are written to make few calls (docs/DESIGN.md).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from .fortran import dsyevd, dsyrk

# Below or above these, the Gram matrix V V^T may have underflowed or overflowed: the update
# is then redone on V rescaled by its largest entry (the square root is homogeneous in V).
_SAFE_LOW, _SAFE_HIGH = 1e-140, 1e140
_ZERO = np.array(0.0)      # 0-d array operands are cheaper for numpy than Python floats
# The most tasks for which the per-task scalars of the Omega update are Python floats (cheaper
# than numpy calls at small K, see below); above it they are arrays
_MAX_TASKS_AS_FLOATS = 16


def symmetric_eig(A: np.ndarray, overwrite: bool = False):
    """Eigenvalues (ascending) and eigenvectors of a symmetric matrix (LAPACK dsyevd).

    Reads the upper triangle only. Called once per round on K x K matrices: LAPACK directly
    costs a third of numpy.linalg.eigh, whose Python-side checks dominate at this size.
    Raises LinAlgError if it fails to converge.
    """
    w, v, info = dsyevd(A, overwrite_a=overwrite)
    if info != 0:
        raise np.linalg.LinAlgError(f"symmetric eigendecomposition failed (dsyevd info={info})")
    return w, v


class Relationship(NamedTuple):
    """Omega (K x K, symmetric PSD, trace 1), held as ``evecs @ diag(evals) @ evecs.T``.

    The per-round math only needs the decomposition; the matrix itself is formed on demand
    (results, checkpoints), which keeps a K x K product and a symmetrisation off the hot path.
    """

    evals: np.ndarray
    evecs: np.ndarray

    @classmethod
    def identity(cls, n_tasks: int) -> "Relationship":
        """Omega = I / K, the initial value and the no-relationship ablation's fixed value."""
        return cls(np.full(n_tasks, 1.0 / n_tasks), np.eye(n_tasks))

    @property
    def omega(self) -> np.ndarray:
        """The matrix Omega, exactly symmetric."""
        omega = (self.evecs * self.evals) @ self.evecs.T
        return (omega + omega.T) / 2.0


def update_omega(V: np.ndarray, eps: float, previous: Relationship) -> Relationship:
    """Omega from the task-specific models (eq. solutionOptimProblem2, docs/ALGORITHMS.md section 4).

    ``S = (V^T V)^{1/2} + eps I`` through a symmetric eigendecomposition with negative
    eigenvalues clipped to 0, then ``Omega = S / tr(S)``.  If ``tr(S)`` is not positive and
    finite the previous Omega is kept, so Omega stays symmetric PSD with trace 1 forever.

    Parameters
    ----------
    V : ndarray, shape (K, d)
        Task-specific models, one row per task (docs/ALGORITHMS.md's V is d x K; this is its transpose).
        May be a strided view (a column block of a wider table).
    eps : float
        Ridge added to S (>= 0).
    previous : Relationship
        Returned unchanged when the update is undefined.
    """
    # The common case in as few numpy calls as possible; anything out of range (a Gram matrix
    # that may have under- or overflowed, NaN, inf, all zeros) goes to the careful path.
    # BLAS syrk (upper triangle, which is all dsyevd reads): unlike numpy's product it raises
    # no floating-point warning when |V| is so large that the careful path takes over
    lam, Q, info = dsyevd(dsyrk(1.0, V.T, trans=1), overwrite_a=True)
    if info == 0:
        if lam.shape[0] <= _MAX_TASKS_AS_FLOATS:
            # K numbers: Python floats cost less than numpy calls, with the same IEEE
            # operations (clip, sqrt, +eps, /trace) in the same order; NaN stays NaN
            root = [math.sqrt(x) if x > 0.0 else 0.0 if x <= 0.0 else x for x in lam.tolist()]
            root_trace = sum(root)                    # sequential, as below
            if _SAFE_LOW < root_trace < _SAFE_HIGH:
                total = root_trace + len(root) * eps  # tr(S) = tr((V^T V)^{1/2}) + K eps
                return Relationship(np.array([(x + eps) / total for x in root]), Q)
        else:
            np.maximum(lam, _ZERO, out=lam)
            np.sqrt(lam, out=lam)
            root_trace = sum(lam.tolist())
            if _SAFE_LOW < root_trace < _SAFE_HIGH:
                lam += eps
                lam /= root_trace + lam.shape[0] * eps
                return Relationship(lam, Q)
    return _update_omega_rescaled(V, eps, previous)


def _update_omega_rescaled(V: np.ndarray, eps: float, previous: Relationship) -> Relationship:
    """:func:`update_omega` for V of any scale: (V^T V)^{1/2} is homogeneous of degree 1 in V,
    so the largest entry is factored out before the Gram matrix can over- or underflow."""
    scale = float(np.abs(V).max()) if V.size else 0.0
    if not np.isfinite(scale):
        return previous
    if scale > 0.0:
        Vs = V / scale
        try:
            lam, Q = symmetric_eig(Vs @ Vs.T, overwrite=True)
        except np.linalg.LinAlgError:
            return previous
        np.maximum(lam, 0.0, out=lam)
        s = scale * np.sqrt(lam) + eps
    else:
        Q = np.eye(V.shape[0])
        s = np.full(V.shape[0], float(eps))
    trace = float(s.sum())
    if not (np.isfinite(trace) and trace > 0.0):
        return previous
    return Relationship(s / trace, Q)


def exact_operator(rel: Relationship, a: float, rho: float, lambda4: float,
                   out: np.ndarray | None = None) -> np.ndarray:
    """``P = ((a + rho) I + lambda4 Omega^{-1})^{-1}`` without inverting Omega
    (docs/ALGORITHMS.md section 2.2).

    ``P = Q diag(omega_i / ((a + rho) omega_i + lambda4)) Q^T``; null directions of Omega get 0.
    With ``lambda4 = 0`` the operator is exactly ``I / (a + rho)`` whatever Omega is. Written
    into ``out`` (K x K) when given.
    """
    if lambda4 == 0.0:
        P = np.eye(rel.evals.shape[0]) / (a + rho)
        if out is None:
            return P
        out[...] = P
        return out
    return np.dot(rel.evecs * _operator_diagonal(rel.evals, a + rho, lambda4), rel.evecs.T, out=out)


def _operator_diagonal(evals: np.ndarray, a_rho: float, lambda4: float):
    """``omega_i / ((a + rho) omega_i + lambda4)``, P's eigenvalues: a list of Python floats for
    small K (cheaper than three numpy calls, same IEEE operations), else an array."""
    if evals.shape[0] <= _MAX_TASKS_AS_FLOATS:
        return np.array([x / (x * a_rho + lambda4) for x in evals.tolist()])
    diag = evals * a_rho
    diag += lambda4
    return np.divide(evals, diag, out=diag)


def consensus_matrix(rel: Relationship, a: float, rho: float, lambda2: float, lambda4: float) -> np.ndarray:
    """The (K+1) x K matrix M with ``[u; V] = M C`` for the exact variant (docs/ALGORITHMS.md section 2.2).

    With P from :func:`exact_operator`, ``p = P 1``, ``s = 1^T P 1`` and
    ``r = (1 - rho p) / (lambda2 + rho K - rho^2 s)``: ``u = r^T C`` and
    ``V = P (C - rho 1 u^T) = (P - rho p r^T) C``, so M's first row is ``r^T`` and the others
    ``P - rho p r^T``.  The per-round (u, V) step is then one matrix product.

    ``rho K - rho^2 s`` and ``1 - rho p`` cancel: they lose ``rho / a`` of their digits.  That
    is nothing for any sensible rho, but when the denominator could be off by more than about
    1e-10 of its value the matrix is built in Omega's eigenvectors instead, where nothing
    cancels (:func:`_consensus_matrix_stable`).
    """
    K = rel.evals.shape[0]
    M = np.empty((K + 1, K))
    P = exact_operator(rel, a, rho, lambda4, out=M[1:])
    p = P.sum(axis=1)
    den = lambda2 + rho * K - rho * rho * sum(p.tolist())
    if not den > 4e-6 * rho * K:
        return _consensus_matrix_stable(rel, a, rho, lambda2, lambda4)
    r = M[0]
    np.multiply(p, -rho / den, out=r)
    r += 1.0 / den
    # P - rho p r^T. (BLAS dger would be one call instead of three, but it rounds differently
    # for larger K, and with more tasks than features the run is sensitive to the last bit:
    # Omega's square root of V^T V's rounding-level eigenvalues; see docs/DESIGN.md)
    p *= rho
    P -= np.multiply.outer(p, r)
    return M


def _consensus_matrix_stable(rel: Relationship, a: float, rho: float, lambda2: float,
                             lambda4: float) -> np.ndarray:
    """:func:`consensus_matrix` without cancellation, for any rho.

    With ``Omega = Q diag(e) Q^T``, ``q = Q^T 1``, ``f = e / ((a + rho) e + lambda4)`` and
    ``g = 1 - rho f = (a e + lambda4) / ((a + rho) e + lambda4)`` (computed as the right-hand
    side, every term positive): ``P = Q diag(f) Q^T``, ``1 - rho p = Q (g q)`` and the
    denominator is ``lambda2 + rho sum_i g_i q_i^2`` (>= lambda2).
    """
    e, Q = rel.evals, rel.evecs
    c = (a + rho) * e + lambda4
    f = np.divide(e, c, out=np.zeros_like(e), where=c > 0)
    g = np.divide(a * e + lambda4, c, out=np.ones_like(e), where=c > 0)
    q = Q.sum(axis=0)
    den = lambda2 + rho * float(np.sum(g * q * q))
    QF = Q * f
    M = np.empty((e.shape[0] + 1, e.shape[0]))
    M[0] = Q @ (g * q) / den
    M[1:] = QF @ Q.T - np.multiply.outer(rho * (QF @ q), M[0])
    return M


def pseudo_inverse(rel: Relationship) -> np.ndarray:
    """Moore-Penrose pseudo-inverse of Omega, with numpy.linalg.pinv's cut-off (1e-15 x largest)."""
    cutoff = 1e-15 * float(np.max(rel.evals)) if rel.evals.size else 0.0
    inv = np.zeros_like(rel.evals)
    keep = rel.evals > cutoff
    inv[keep] = 1.0 / rel.evals[keep]
    return (rel.evecs * inv) @ rel.evecs.T
