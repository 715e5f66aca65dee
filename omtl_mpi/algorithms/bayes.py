"""The vote's empirical-Bayes expert: each task's posterior-mean linear model under a Gaussian
prior over the tasks' models whose mean and covariance are estimated from every task's data
(docs/ALGORITHMS.md section 2.7).

The model (Heskes, ICML 2000; Bakker and Heskes, JMLR 2003, for its multi-task use): task k's
labels follow ``y = x . beta_k + noise`` (variance :data:`NOISE`, labels -1/+1), and the
tasks' ``beta_k`` are drawn from ``N(mu, Sigma)``. Given ``mu`` and ``Sigma`` the posterior mean
of beta_k is

    h_k = (Pi + Q_k / s2)^-1 (Pi mu + s_k / s2),   Pi = Sigma^-1,

from the task's own sufficient statistics ``Q_k = sum x x^T`` and ``s_k = sum y x``: a new task
predicts with ``mu``, a task with a long stream with its own least-squares model, and one in
between learns only the directions in which the tasks differ (the few that ``Sigma`` spans
when the tasks come in a few latent groups), so that five instances go a long way.

``mu`` and ``Sigma`` come from sums over every task, by the method of moments, so that no rank
needs another rank's tasks: with ``b_k = E[y x]`` of task k, ``(s_k s_k^T - Q_k) / n_k`` has
the mean ``(n_k - 1) b_k b_k^T``, and ``b_k = Sx beta_k`` for the features' second moment
``Sx``. So a block sends the change of

    M = sum_k (s_k s_k^T - Q_k) / n_k,  QT = sum x x^T,  S1 = sum y x,  N,  N1 = sum_k (n_k - 1)

(:func:`stats_size` numbers, whatever its number of tasks), and every rank computes the same
prior from their sums (:func:`prior`). The prior is estimated again whenever the instances seen
have grown by :data:`GROWTH` since the last estimate (a few dozen times in a run), and a task's
matrix ``(Pi + Q_k / s2)^-1`` is refreshed at its first instance after that; in between each
instance updates it by Sherman-Morrison, O(d^2).

Used by the vote only with more tasks than features (:func:`used`): the covariance of d
features is estimated from K tasks, and its d x d statistics then cost less than sending the
tasks' models.
"""
from __future__ import annotations

import numpy as np

# s2, the variance of the labels (-1/+1) around x . beta_k; chosen on the selection sets
# (docs/GUIDE.md, *How the defaults were chosen*)
NOISE = 0.7
# the smallest prior variance, relative to the largest (or to the scale of a unit-margin
# model, 1 / mean eigenvalue of Sx, when that is larger): the prior is never singular
FLOOR = 1e-3
# the prior is estimated again when the instances seen have grown by this factor, and taken
# when it differs from the one in use by more than CHANGE: a prior variance or precision
# moved by that fraction (log(1 + CHANGE) apart), or the mean by CHANGE prior standard
# deviations; the tasks' matrices are computed afresh only for a prior taken
GROWTH = 1.2
CHANGE = 0.25


# the largest d with this expert: its two d x d matrices per task are AROW's full covariance's
# order, which the defaults leave for the diagonal above the same d (wsteps.AROW_DIAGONAL_ABOVE)
MAX_DIM = 2048


def used(n_tasks: int, dim: int, class_weight="none") -> bool:
    """Whether the vote of a run of ``n_tasks`` tasks with ``dim`` weights has this expert:
    with more tasks than features, up to d = :data:`MAX_DIM`, and without ``--class-weight``
    (its least-squares posterior weighs every instance alike: leading the vote, it would undo
    the weights the user asked for)."""
    return dim < n_tasks and dim <= MAX_DIM and class_weight == "none"


def stats_size(dim: int) -> int:
    """Numbers in the statistics a block sends: M and QT (d x d each), S1 (d), N and N1."""
    return 2 * dim * dim + dim + 2


def _split(stats: np.ndarray, d: int):
    """(M, QT, S1, N, N1) views of a flat statistics vector."""
    dd = d * d
    return (stats[:dd].reshape(d, d), stats[dd:2 * dd].reshape(d, d), stats[2 * dd:2 * dd + d],
            stats[-2], stats[-1])


def moved(old, new) -> bool:
    """Whether the prior ``new`` (Pi, Pi mu) differs from ``old`` by more than :data:`CHANGE`."""
    L = np.linalg.cholesky(old[0])
    # the eigenvalues of Sigma_new Sigma_old^-1, from the symmetric L^T Pi_new^-1 L
    ratios = np.linalg.eigvalsh(L.T @ np.linalg.solve(new[0], L))
    step = np.linalg.solve(new[0], new[1]) - np.linalg.solve(old[0], old[1])
    return bool(np.abs(np.log(ratios)).max() > np.log1p(CHANGE)
                or step @ old[0] @ step > CHANGE ** 2)


def prior(stats: np.ndarray, dim: int):
    """The prior ``(Pi, Pi mu)`` from every task's statistics (:func:`stats_size` numbers),
    or None before any instance.

    ``Sigma = Sx^+ (M / N1 - m m^T) Sx^+`` and ``mu = Sx^+ m`` with ``Sx = QT / N`` and
    ``m = S1 / N``; Sigma's eigenvalues below the floor (:data:`FLOOR`) are raised to it.
    """
    M, QT, S1, N, N1 = _split(stats, dim)
    if N <= 0:
        return None
    Sx = QT / N
    m = S1 / N
    C = M / max(N1, 1.0)
    C -= np.outer(m, m)
    Sx_inv = np.linalg.pinv(Sx, hermitian=True)
    Sigma = Sx_inv @ C @ Sx_inv
    Sigma += Sigma.T
    Sigma /= 2.0
    values, vectors = np.linalg.eigh(Sigma)
    scale = dim / max(float(np.trace(Sx)), np.finfo(float).tiny)
    values = np.maximum(values, FLOOR * max(float(values[-1]), scale))
    Pi = (vectors / values) @ vectors.T
    return Pi, Pi @ (Sx_inv @ m)


def _weights(n: np.ndarray) -> np.ndarray:
    """``1 / n_k``, 0 where n_k = 0."""
    return np.where(n > 0, 1.0 / np.maximum(n, 1.0), 0.0)


class EmpiricalBayes:
    """The empirical-Bayes expert of a block of ``n_tasks`` tasks with ``dim`` weights.

    Attributes
    ----------
    s, Q, n : ndarray
        Every task's ``sum y x`` (kb, d), ``sum x x^T`` (kb, d, d) and instances (kb,).
    A : ndarray, shape (kb, d, d)
        ``(Pi + Q_k / s2)^-1`` for the prior of version ``version[k]`` (-1: not computed).
    totals : ndarray
        Every task's statistics (the sum over the blocks), from which the prior comes.
    delta : ndarray
        The change of this block's statistics in the last :meth:`learn`.
    """

    TASK_AXIS = {"s": 0, "Q": 0, "n": 0, "A": 0, "version": 0}

    def __init__(self, n_tasks: int, dim: int):
        self.d = dim
        self.s = np.zeros((n_tasks, dim))
        self.Q = np.zeros((n_tasks, dim, dim))
        self.n = np.zeros(n_tasks)
        self.A = np.zeros((n_tasks, dim, dim))
        self.version = np.full(n_tasks, -1, dtype=np.int64)
        self.totals = np.zeros(stats_size(dim))
        self.delta = np.zeros(stats_size(dim))
        self.prior_version = 0          # priors estimated so far
        self.estimated_at = 0.0         # N when the prior was last estimated
        self._prior = None
        self._work = None
        self._Ax = None                 # A x of the round's instances, from margins

    def _matrices(self, active, store: bool) -> np.ndarray:
        """``A`` of the tasks ``active`` for the current prior, computed where out of date
        (and kept, when ``store``): a view of :attr:`A` for every task when none is."""
        stale = self.version[active] != self.prior_version
        if not stale.any():
            return self.A[active]
        A = self.A[active] if store or not isinstance(active, slice) else self.A.copy()
        if stale.any():
            A[stale] = np.linalg.inv(self._prior[0] + self.Q[active][stale] / NOISE)
            if store:
                if not isinstance(active, slice):       # a view of A needs no copying back
                    self.A[active] = A
                self.version[active] = self.prior_version
        return A

    def margins(self, X: np.ndarray, active=slice(None), store: bool = False) -> np.ndarray:
        """``h_k . x`` (B, na) of X (B, na, d) for the block's tasks ``active`` (0 before the
        first prior); ``store`` keeps the matrices computed on the way."""
        if self._prior is None:
            return np.zeros(X.shape[:2])
        A = self._matrices(active, store)
        b = self.s[active] / NOISE
        b += self._prior[1]
        if store and X.shape[0] == 1:
            # A x too, in the same pass over A: learn's Sherman-Morrison step needs it
            both = np.matmul(A, np.stack((b, X[0]), axis=2))
            self._Ax = both[:, :, 1]
            return np.vecdot(both[:, :, 0], X)
        self._Ax = None
        h = np.matmul(A, b[:, :, None])[:, :, 0]
        return np.vecdot(h, X)

    def _scratch(self, n: int) -> np.ndarray:
        """An (n, d, d) work array, the same memory every round: an array of this size made
        afresh every round costs the system's page faults, more than the arithmetic."""
        if self._work is None or len(self._work) < n:
            self._work = np.empty((n, self.d, self.d))
        return self._work[:n]

    def learn(self, X: np.ndarray, y: np.ndarray, active=slice(None)) -> np.ndarray:
        """Add a round's instances (X (B, na, d), y (B, na), 0 for padding) of the tasks
        ``active``; returns the change of the block's statistics (:attr:`delta`)."""
        d = self.d
        real = y != 0.0
        count = real.sum(axis=0)
        n_old = self.n[active].copy()         # a view for every task: kept from the update
        n_new = n_old + count
        w_old, w_new = _weights(n_old), _weights(n_new)
        s_old = self.s[active]
        yx = np.einsum("bk,bkd->kd", y, X)
        s_new = s_old + yx
        M, QT, S1, N, N1 = _split(self.delta, d)
        # the change of sum_k (s_k s_k^T - Q_k) / n_k: Q_k' / n_k' - Q_k / n_k is
        # Q_k (1/n_k' - 1/n_k) + (Q_k' - Q_k) / n_k', so Q_k is read once; sums over the tasks
        # as matrix products
        Q = self.Q[active]                    # a view for every task, else a copy
        M[...] = (s_new * w_new[:, None]).T @ s_new
        M -= (s_old * w_old[:, None]).T @ s_old
        M -= ((w_new - w_old) @ Q.reshape(len(n_old), d * d)).reshape(d, d)
        added = self._scratch(len(n_old))
        if X.shape[0] == 1:
            x = X[0] * real[0][:, None]
            M -= (x * w_new[:, None]).T @ x
            QT[...] = x.T @ x
            np.multiply(x[:, :, None], x[:, None, :], out=added)
        else:
            x = X * real[:, :, None]
            np.einsum("bkd,bke->kde", x, x, out=added)
            M -= (w_new @ added.reshape(len(n_old), d * d)).reshape(d, d)
            QT[...] = added.sum(axis=0)
        Q += added
        if not isinstance(active, slice):
            self.Q[active] = Q
        self.s[active] = s_new
        self.n[active] = n_new
        S1[...] = yx.sum(axis=0)
        total = float(count.sum())
        self.delta[-2] = total
        self.delta[-1] = total - np.count_nonzero((n_old == 0) & (count > 0))
        if self._prior is not None:
            self._update_matrices(x if X.shape[0] == 1 else None, count, active)
        return self.delta

    def _update_matrices(self, x, count, active) -> None:
        """Keep ``A`` of the current tasks ``active`` up to date with one new instance each
        (rows of ``x``; zero rows for tasks without one) by Sherman-Morrison, or, after a
        mini-batch (``x`` None), mark those that learned to be computed afresh."""
        current = self.version[active] == self.prior_version
        if x is None:
            version = self.version[active]
            version[count > 0] = -1
            self.version[active] = version
            return
        A = self.A[active]                   # a view for every task, else a copy
        Ax = self._Ax if self._Ax is not None else np.matmul(A, x[:, :, None])[:, :, 0]
        self._Ax = None
        Ax *= np.sqrt(current / (NOISE + np.vecdot(x, Ax)))[:, None]
        A -= np.multiply(Ax[:, :, None], Ax[:, None, :], out=self._scratch(len(Ax)))
        if not isinstance(active, slice):
            self.A[active] = A

    def set_totals(self, totals: np.ndarray) -> None:
        """Every task's statistics (the sum over the blocks, the same on every rank): the
        prior is estimated again when their instances have grown by :data:`GROWTH`, and
        taken when it has moved (:func:`moved`)."""
        self.totals[...] = totals
        N = self.totals[-2]
        if N > 0 and N >= GROWTH * self.estimated_at:
            self.estimated_at = N
            new = prior(self.totals, self.d)
            if self._prior is None or moved(self._prior, new):
                self._prior = new
                self.prior_version += 1

    def finite(self, rows) -> bool:
        return bool(all(np.isfinite(a[rows]).all() for a in (self.s, self.Q, self.A))
                    and np.isfinite(self.totals).all())

    def state(self) -> dict:
        return {"s": self.s.copy(), "Q": self.Q.copy(), "n": self.n.copy(), "A": self.A.copy(),
                "version": self.version.copy(), "totals": self.totals.copy(),
                "prior_version": np.int64(self.prior_version),
                "estimated_at": np.float64(self.estimated_at),
                # the prior itself (zeros before the first): estimating it again from the
                # totals would give the same, but the totals may have moved on since
                "Pi": (self._prior[0] if self._prior else np.zeros((self.d, self.d))).copy(),
                "Pi_mu": (self._prior[1] if self._prior else np.zeros(self.d)).copy()}

    def load_state(self, state: dict) -> None:
        for key in ("s", "Q", "n", "A", "totals"):
            getattr(self, key)[...] = state[key]
        self.version[...] = state["version"]
        self.prior_version = int(state["prior_version"])
        self.estimated_at = float(state["estimated_at"])
        self._prior = ((np.array(state["Pi"], dtype=np.float64),
                        np.array(state["Pi_mu"], dtype=np.float64)) if self.prior_version else None)
