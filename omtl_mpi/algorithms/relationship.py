"""The task-relationship matrix Omega and the (u, V) step built from it, kept factored
(docs/ALGORITHMS.md sections 2.2 and 4; the derivation is section 4.1).

With d features V has rank at most d, so Omega = (V^T V)^{1/2} + eps I, normalised, has at
most min(K, d) eigenvalues that are not the same number: Omega is held as

    Omega = rest I + B diag(values - rest) B^T,     B (K x r) with orthonormal columns, r <= min(K, d)

(:class:`Relationship`), and every matrix the learners need of it (the exact operator P, the
pseudo-inverse of the paper variant) is a spectral function f(Omega) of the same form,
f(rest) I + B diag(f(values) - f(rest)) B^T. Nothing of size K x K is ever formed: the Omega
update is one thin SVD of V (O(K d^2)), the (u, V) step O(K d r). The arrays are the code's
layout, one row per task: V and C are K x d (the paper's are d x K).

:func:`dense_omega` and the K x K reference in the tests form the matrices the spec writes,
for checking this module against them.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .fortran import dgesdd

# up to this many tasks the exact step is one (K + 1) x K matrix product (ExactStep._dense_operator)
DENSE_STEP_TASKS = 64
# numpy.linalg.pinv's cut-off: eigenvalues of Omega below this times the largest count as
# zero in the paper variant's pseudo-inverse
PINV_CUTOFF = 1e-15


class Relationship(NamedTuple):
    """Omega (K x K, symmetric PSD, trace 1) as ``rest I + basis diag(values - rest) basis^T``.

    ``basis`` (K x r) has orthonormal columns, Omega's eigenvectors for ``values``; every
    direction orthogonal to them is an eigenvector with eigenvalue ``rest``. I/K is
    ``rest = 1/K`` with every value 1/K (the basis then does not matter: zeros).
    """

    basis: np.ndarray
    values: np.ndarray
    rest: float

    @classmethod
    def identity(cls, n_tasks: int, rank: int = 0) -> "Relationship":
        """Omega = I / K, the initial value and the no-relationship ablation's fixed value;
        with ``rank`` columns of zeros as its basis (every value 1/K), so that its arrays have
        the shapes of the Omega an update of a K x d V gives (rank = min(K, d))."""
        return cls(np.zeros((n_tasks, rank)), np.full(rank, 1.0 / n_tasks), 1.0 / n_tasks)

    @property
    def n_tasks(self) -> int:
        return self.basis.shape[0]

    def spectral(self, f) -> tuple[np.ndarray, float]:
        """``f(Omega)`` as (the diagonal ``f(values) - f(rest)`` in the basis, ``f(rest)``):
        ``f(Omega) = f(rest) I + basis diag(diagonal) basis^T``. ``f`` maps an array of
        eigenvalues to an array."""
        at_rest = float(f(np.array([self.rest]))[0])
        return f(self.values) - at_rest, at_rest

    def apply(self, f, X: np.ndarray) -> np.ndarray:
        """``f(Omega) X`` for X (K x m), in O(K r m)."""
        diagonal, at_rest = self.spectral(f)
        out = at_rest * X
        if diagonal.size:
            out += self.basis @ (diagonal[:, None] * (self.basis.T @ X))
        return out

    @property
    def omega(self) -> np.ndarray:
        """The K x K matrix Omega, exactly symmetric (for results and checks at small K)."""
        return dense(self, lambda x: x)


def dense(rel: Relationship, f) -> np.ndarray:
    """``f(Omega)`` as a K x K matrix, exactly symmetric (results, tests)."""
    diagonal, at_rest = rel.spectral(f)
    out = (rel.basis * diagonal) @ rel.basis.T
    out += at_rest * np.eye(rel.n_tasks)
    return (out + out.T) / 2.0


def update_omega(V: np.ndarray, eps: float, previous: Relationship) -> Relationship:
    """Omega from the task-specific models (eq. solutionOptimProblem2, docs/ALGORITHMS.md section 4).

    ``S = (V^T V)^{1/2} + eps I`` and ``Omega = S / tr(S)`` (the paper's V^T V is the code's
    V V^T, K x K). With the thin SVD V = B diag(sigma) W^T, (V V^T)^{1/2} = B diag(sigma) B^T,
    so Omega's eigenvalues are (sigma_i + eps) / tr(S) on B's columns and eps / tr(S) on the
    rest, tr(S) = sum(sigma) + K eps. The SVD works on V itself (not on a Gram matrix, which
    would square its condition number), so a V of rank below min(K, d) gets singular values of
    rounding size, not their square roots, and nothing under- or overflows until sigma itself
    does. If V is not finite, the SVD fails, or tr(S) is not positive and finite, the previous
    Omega is returned: Omega stays symmetric PSD with trace 1 for any input.

    Parameters
    ----------
    V : ndarray, shape (K, d)
        Task-specific models, one row per task (may be a strided view).
    eps : float
        Ridge added to S (>= 0).
    previous : Relationship
        Returned unchanged when the update is undefined.
    """
    K = V.shape[0]
    if V.size == 0 or not np.isfinite(V).all():
        return previous
    B, sigma, _, info = dgesdd(V, compute_uv=1, full_matrices=0)
    if info != 0:                               # LAPACK did not converge
        return previous
    # LAPACK's arrays are column-major; a checkpoint's are row-major, and a product's last bits
    # depend on the layout: the same layout always, for resumed runs equal to the bit
    B = np.ascontiguousarray(B)
    trace = float(sigma.sum()) + K * eps
    if not (np.isfinite(trace) and trace > 0.0):
        return previous
    return Relationship(B, (sigma + eps) / trace, eps / trace)


def _eigenvalues(a: float, a_rho: float, lambda4: float, e):
    """P's eigenvalue ``omega / ((a + rho) omega + lambda4)`` and 1 - rho times it, written so
    that nothing cancels, ``(a omega + lambda4) / ((a + rho) omega + lambda4)``, for Omega's
    eigenvalues ``e`` (an array or a float); with lambda4 = 0, 1 / (a + rho) and a / (a + rho)
    whatever Omega is. The same expressions for an array and a float, so that Omega's rest and
    its values get the same bits as one array would."""
    if lambda4 == 0.0:
        return e * 0.0 + 1.0 / a_rho, e * 0.0 + a / a_rho
    den = a_rho * e + lambda4
    return e / den, (a * e + lambda4) / den


class ExactStep:
    """The exact (u, V) step (docs/ALGORITHMS.md section 2.2) for one Omega, factored.

    With ``P = ((a + rho) I + lambda4 Omega^-1)^-1 = f(Omega)``, ``p = P 1``,
    ``s = 1^T P 1``: ``u = C^T (1 - rho p) / (lambda2 + rho K - rho^2 s)`` and
    ``V = P (C - rho 1 u^T)``. In Omega's basis, with ``q = B^T 1`` and ``g = 1 - rho f``
    (each eigenvalue of 1 - rho P, computed without cancellation):
    ``1 - rho p = g(rest) 1 + B ((g - g(rest)) q)`` and the denominator is
    ``lambda2 + rho (g(rest) |1 - B q|^2 + sum_i g_i q_i^2)``, every term >= 0, so the step
    keeps its digits for any rho (docs/ALGORITHMS.md section 4.1). Built once per Omega.
    """

    def __init__(self, rel: Relationship, a: float, rho: float, lambda2: float, lambda4: float):
        K = rel.n_tasks
        a_rho = a + rho
        self.rel, self.rho = rel, rho
        # f(Omega) = P and g(Omega) = I - rho P in Omega's basis (Relationship.spectral's form),
        # the rest's as Python floats: this runs every round, and at small K its cost is the
        # number of numpy calls
        f_values, g_values = _eigenvalues(a, a_rho, lambda4, rel.values)
        self.f_rest, self.g_rest = _eigenvalues(a, a_rho, lambda4, float(rel.rest))
        self.f_diag = f_values - self.f_rest
        g_diag = g_values - self.g_rest
        B = rel.basis
        if B.shape[1]:
            q = B.sum(axis=0)                               # B^T 1
            residual = 1.0 - B @ q
            off_basis = float(residual @ residual)          # |1 - B q|^2, >= 0
        else:
            q, off_basis = np.zeros(0), float(K)
        den = lambda2 + rho * (self.g_rest * off_basis + float((g_values * q) @ q))
        # C^T (1 - rho p) / den = (g(rest) C^T 1 + (B^T C)^T ((g - g(rest)) q)) / den
        self._sum_weight = self.g_rest / den
        self._basis_weight = g_diag * q
        self._basis_weight /= den                           # (r,)
        self._q = q
        # with few tasks, the step as one (K + 1) x K matrix applied to C, [u; V] = T C: at small
        # K a round's cost is its number of numpy calls, and the factored step makes a dozen
        self._dense = self._dense_operator() if K <= DENSE_STEP_TASKS else None

    def _dense_operator(self) -> np.ndarray:
        """T ((K + 1) x K) with u = T[0] C and V = T[1:] C: u = w^T C with
        w = sum_weight 1 + B basis_weight, and V = F (C - rho 1 u^T) = (F - rho (F 1) w^T) C
        with F = f(Omega) = f_rest I + B diag(f_diag) B^T, F 1 = f_rest 1 + B (f_diag q)."""
        B = self.rel.basis
        K = B.shape[0]
        T = np.empty((K + 1, K))
        w, F = T[0], T[1:]
        Bf = B * self.f_diag
        np.matmul(Bf, B.T, out=F)
        F.reshape(-1)[::K + 1] += self.f_rest
        np.matmul(B, self._basis_weight, out=w)
        w += self._sum_weight
        F1 = Bf @ self._q
        F1 += self.f_rest
        F1 *= self.rho
        F -= F1[:, None] * w
        return T

    def u(self, C: np.ndarray, column_sum: np.ndarray | None = None,
          BtC: np.ndarray | None = None) -> np.ndarray:
        """u from C (K x d); ``column_sum`` (C^T 1) and ``BtC`` (B^T C) where known."""
        total = C.sum(axis=0) if column_sum is None else column_sum
        u = self._sum_weight * total
        if self._q.size:
            u += self._basis_weight @ (self.rel.basis.T @ C if BtC is None else BtC)
        return u

    def step(self, C: np.ndarray):
        """(u (d,), V (K x d)) from C (K x d)."""
        if self._dense is not None:
            uV = self._dense @ C
            return uV[0], uV[1:]
        B = self.rel.basis
        BtC = B.T @ C if B.shape[1] else None
        u = self.u(C, BtC=BtC)
        V = C - self.rho * u                                # C - rho 1 u^T
        if BtC is not None:
            inner = BtC - self.rho * np.outer(self._q, u)   # B^T (C - rho 1 u^T)
            V_basis = B @ (self.f_diag[:, None] * inner)
            V *= self.f_rest
            V += V_basis
        else:
            V *= self.f_rest
        return u, V


def paper_step(rel: Relationship, a: float, rho: float, lambda2: float, lambda4: float,
               C: np.ndarray, V_old: np.ndarray):
    """The paper variant's printed closed forms (eqs. solution1-2 and solution1-3):
    ``u = a C^T 1 / (a (lambda2 + rho K) + lambda2 rho)`` and
    ``V = lambda2 C / (lambda2 (a + rho) + rho K a) + lambda4 Omega^+ V_old`` (the "+" sign as
    printed; ``(Omega^+ + Omega^+^T) / 2 = Omega^+``, which is symmetric), with numpy's
    pinv cut-off (:data:`PINV_CUTOFF` times the largest eigenvalue)."""
    K = C.shape[0]
    u = a * C.sum(axis=0) / (a * (lambda2 + rho * K) + lambda2 * rho)
    largest = max(float(rel.values.max()) if rel.values.size else 0.0, rel.rest)
    cutoff = PINV_CUTOFF * largest

    def inverse(e):
        out = np.zeros_like(e, dtype=np.float64)
        keep = e > cutoff
        out[keep] = 1.0 / e[keep]
        return out
    V = (lambda2 / (lambda2 * (a + rho) + rho * K * a)) * C + lambda4 * rel.apply(inverse, V_old)
    return u, V
