"""The task-relationship matrix Omega and the linear maps built from it (spec sections 2, 4).

Omega is always held together with its symmetric eigendecomposition, because every formula
that uses it (the exact consensus operator P, the pseudo-inverse of the paper variant) needs
that decomposition, and the Omega update produces it for free: Omega = S / tr(S) with
S = (V^T V)^{1/2} + eps I shares the eigenvectors of V^T V.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import lapack


def symmetric_eig(A: np.ndarray):
    """Eigenvalues (ascending) and eigenvectors of a symmetric matrix (LAPACK dsyevd).

    Called once per round on K x K matrices: LAPACK directly costs half of numpy.linalg.eigh,
    whose Python-side checks dominate at this size. Raises LinAlgError if it fails to converge.
    """
    w, v, info = lapack.dsyevd(A)
    if info != 0:
        raise np.linalg.LinAlgError(f"symmetric eigendecomposition failed (dsyevd info={info})")
    return w, v


@dataclass(frozen=True)
class Relationship:
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
    """Omega from the task-specific models (eq. solutionOptimProblem2, spec section 4).

    ``S = (V^T V)^{1/2} + eps I`` through a symmetric eigendecomposition with negative
    eigenvalues clipped to 0, then ``Omega = S / tr(S)``.  If ``tr(S)`` is not positive and
    finite the previous Omega is kept, so Omega stays symmetric PSD with trace 1 forever.

    Parameters
    ----------
    V : ndarray, shape (K, d)
        Task-specific models, one row per task (the spec's V is d x K; this is its transpose).
    eps : float
        Ridge added to S (>= 0).
    previous : Relationship
        Returned unchanged when the update is undefined.
    """
    # (V^T V)^{1/2} is homogeneous of degree 1 in V: factor out the largest entry so that
    # the Gram matrix can neither overflow (|V| ~ 1e150) nor underflow (|V| ~ 1e-150).
    scale = float(np.abs(V).max()) if V.size else 0.0
    if not np.isfinite(scale):
        return previous
    if scale > 0.0:
        # rescale only where V V^T could leave the floating-point range
        Vs = V if 1e-100 < scale < 1e100 else V / scale
        unit = 1.0 if Vs is V else scale
        # eigh reads one triangle only, so the Gram matrix needs no explicit symmetrisation
        try:
            lam, Q = symmetric_eig(Vs @ Vs.T)
        except np.linalg.LinAlgError:
            return previous
        np.maximum(lam, 0.0, out=lam)
        s = unit * np.sqrt(lam) + eps
    else:
        Q = np.eye(V.shape[0])
        s = np.full(V.shape[0], float(eps))
    trace = float(s.sum())
    if not (np.isfinite(trace) and trace > 0.0):
        return previous
    return Relationship(s / trace, Q)


def exact_operator(rel: Relationship, a: float, rho: float, lambda4: float) -> np.ndarray:
    """``P = ((a + rho) I + lambda4 Omega^{-1})^{-1}`` without inverting Omega (spec section 2).

    ``P = Q diag(omega_i / ((a + rho) omega_i + lambda4)) Q^T``; null directions of Omega get 0.
    With ``lambda4 = 0`` the operator is exactly ``I / (a + rho)`` whatever Omega is.
    """
    k = rel.evals.shape[0]
    if lambda4 == 0.0:
        return np.eye(k) / (a + rho)
    diag = rel.evals / ((a + rho) * rel.evals + lambda4)
    return (rel.evecs * diag) @ rel.evecs.T


def pseudo_inverse(rel: Relationship) -> np.ndarray:
    """Moore-Penrose pseudo-inverse of Omega, with numpy.linalg.pinv's cut-off (1e-15 x largest)."""
    cutoff = 1e-15 * float(np.max(rel.evals)) if rel.evals.size else 0.0
    inv = np.zeros_like(rel.evals)
    keep = rel.evals > cutoff
    inv[keep] = 1.0 / rel.evals[keep]
    return (rel.evecs * inv) @ rel.evecs.T
