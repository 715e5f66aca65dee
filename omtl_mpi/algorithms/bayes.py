"""The vote's empirical-Bayes expert: each task's posterior-mean linear model
``h_k = (Pi + Q_k / s2)^-1 (Pi mu + s_k / s2)`` under a Gaussian prior ``N(mu, Pi^-1)`` over the
tasks' models (Heskes, ICML 2000; Bakker and Heskes, JMLR 2003), so that a short stream borrows
from the tasks like it. ``mu`` and ``Pi`` come from sums over every task by the method of
moments (:func:`prior`), so that no rank needs another rank's tasks; each instance updates a
task's ``A_k = (Pi + Q_k / s2)^-1`` and ``h_k`` by Sherman-Morrison in O(d^2), and the prior is
estimated again when the instances seen have grown by :data:`GROWTH`. Used only with more tasks
than features (:func:`used`).

The model, the moments, the statistics a block sends and the costs: docs/ALGORITHMS.md
section 2.7.
"""
from __future__ import annotations

import numpy as np

from .wsteps import AROW_DIAGONAL_ABOVE

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


# the largest d with this expert: its two d x d matrices per task and O(d^2) work per instance
# are AROW's full covariance's order, which the defaults leave for the diagonal above that d
MAX_DIM = AROW_DIAGONAL_ABOVE


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


def packed_index(dim: int) -> np.ndarray:
    """(d, d) indices into a symmetric matrix's d (d + 1) / 2 entries on and above the
    diagonal, in ``np.triu_indices`` order: ``packed[packed_index(d)]`` is the whole matrix."""
    rows, cols = np.triu_indices(dim)
    index = np.zeros((dim, dim), dtype=np.intp)
    index[rows, cols] = index[cols, rows] = np.arange(len(rows))
    return index


def moved(old, new) -> bool:
    """Whether the prior ``new`` (Pi, Pi mu) differs from ``old`` by more than :data:`CHANGE`."""
    L = np.linalg.cholesky(old[0])
    # the eigenvalues of Sigma_new Sigma_old^-1, from the symmetric L^T Pi_new^-1 L
    ratios = np.linalg.eigvalsh(L.T @ np.linalg.solve(new[0], L))
    step = np.linalg.solve(new[0], new[1]) - np.linalg.solve(old[0], old[1])
    return bool(np.abs(np.log(ratios)).max() > np.log1p(CHANGE)
                or step @ old[0] @ step > CHANGE ** 2)


def floor(largest: float, Sx: np.ndarray) -> float:
    """The smallest prior variance: :data:`FLOOR` times the largest, or times d / tr Sx (the
    scale of a unit-margin model) when that is larger."""
    return FLOOR * max(largest, len(Sx) / max(float(np.trace(Sx)), np.finfo(float).tiny))


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
    values = np.maximum(values, floor(float(values[-1]), Sx))
    Pi = (vectors / values) @ vectors.T
    return Pi, Pi @ (Sx_inv @ m)


# up to this many numbers (4 MiB: the matrices of 1,024 tasks of d = 20) the tasks' matrices
# are inverted in place over the tasks (inverse_tasks_last), whose d passes over them then stay
# in the cache; above, by LAPACK one matrix at a time, which reads each matrix once, except up
# to d = IN_PLACE_INVERSE_DIM, where LAPACK's cost is mostly its call per matrix and the
# in-place inverse over chunks of that many numbers is faster (experiments/inverses.py)
IN_PLACE_INVERSE_MAX = 2 ** 19
IN_PLACE_INVERSE_DIM = 13


def inverse_tasks_last(P: np.ndarray, work: np.ndarray) -> np.ndarray:
    """The inverses of the symmetric positive-definite matrices ``P`` (d, d, n: the tasks on
    the last axis), in place, by Gauss-Jordan elimination over every task at once (d steps
    of array operations over the tasks; no pivoting, which a positive-definite matrix does not
    need). ``work`` is a (d, d, n) scratch array. Returns P."""
    for k in range(P.shape[0]):
        pivot = 1.0 / P[k, k]
        row = P[k] * pivot                       # (d, n): row k over its pivot
        column = P[:, k].copy()
        P -= np.multiply(column[:, None, :], row[None, :, :], out=work)
        P[k] = row
        P[:, k] = column * -pivot
        P[k, k] = pivot
    return P


def chunk_of(dim: int) -> int:
    """Tasks of d x d matrices in :data:`IN_PLACE_INVERSE_MAX` numbers (at least one)."""
    return max(1, IN_PLACE_INVERSE_MAX // (dim * dim))


def inverse_in_chunks(P: np.ndarray, work: np.ndarray) -> np.ndarray:
    """:func:`inverse_tasks_last` of ``P`` (d, d, n) over chunks of :func:`chunk_of` tasks,
    each chunk's d passes in the cache; ``work`` a (d, d, min(n, chunk)) scratch array.
    Returns P."""
    n, chunk = P.shape[-1], chunk_of(P.shape[0])
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        inverse_tasks_last(P[..., a:b], work[..., :b - a])
    return P


def _weights(n: np.ndarray) -> np.ndarray:
    """``1 / n_k``, 0 where n_k = 0."""
    return np.where(n > 0, 1.0 / np.maximum(n, 1.0), 0.0)


class EmpiricalBayes:
    """The empirical-Bayes expert of a block of ``n_tasks`` tasks with ``dim`` weights.

    The per-task arrays are held with the tasks on the last axis (``s`` as d x kb, ``Q`` and
    ``A`` as d x d x kb), so that a round's element-wise passes run their inner loops over the
    tasks, not over d-long rows; :meth:`state` gives them task-first, as checkpoints hold them.

    Attributes
    ----------
    n : ndarray
        Every task's number of instances (kb,).
    totals : ndarray
        Every task's statistics (the sum over the blocks' :meth:`statistics`), from which the
        prior comes.
    running : bool
        Keep :attr:`delta`, the change of the block's statistics in the last :meth:`learn`,
        in O(d^2) per task that learned (for sums kept by adding changes, as D-ADMM's table
        rows, whose blocks cannot tell in which rounds a prior will read them).
    delta : ndarray
        With :attr:`running`: the change of the block's statistics in the last :meth:`learn`.

    Every task's ``sum y x``, ``sum x x^T``, and ``A = (Pi + Q_k / s2)^-1`` and the posterior
    mean ``h`` for the prior of version ``version[k]`` (-1: not computed) are in :meth:`state`.
    ``Q`` is held packed, its d (d + 1) / 2 entries on and above the diagonal: read only at a
    new prior's refresh and in :meth:`statistics`, it costs half the memory and updates so.
    """

    TASK_AXIS = {"s": 0, "Q": 0, "n": 0, "A": 0, "h": 0, "version": 0}
    # the attributes of the task axes, and scratch that no round leaves anything in (.undo)
    ROW_AXES = {"_s": 1, "_Q": 1, "n": 0, "_A": 2, "_h": 1, "version": 0}
    NOT_STATE = ("_work",)

    def __init__(self, n_tasks: int, dim: int):
        self.d = dim
        self._s = np.zeros((dim, n_tasks))
        # Q packed: row p of _Q is entry (_rows[p], _cols[p]); _Q[_unpack] is every Q_k whole
        self._rows, self._cols = np.triu_indices(dim)
        self._unpack = packed_index(dim)
        self._Q = np.zeros((len(self._rows), n_tasks))
        self.n = np.zeros(n_tasks)
        self._A = np.zeros((dim, dim, n_tasks))
        self._h = np.zeros((dim, n_tasks))
        self.version = np.full(n_tasks, -1, dtype=np.int64)
        self.totals = np.zeros(stats_size(dim))
        self._stats = np.zeros(stats_size(dim))     # the block's, as statistics() gives them
        self.running = False
        self.delta = np.zeros(stats_size(dim))
        self._N = 0.0                   # the block's instances, and its tasks that have one
        self._started = 0
        self.prior_version = 0          # priors estimated so far
        self.estimated_at = 0.0         # N when the prior was last estimated
        self._prior = None
        self._work = np.empty(0)
        self._Ax = None                 # A x of the round's instances, from margins
        self._x = None                  # and those instances (d, na)

    def _matrices(self, active, store: bool) -> tuple:
        """The per-task arrays a prior sets (:meth:`_kept`: here ``A (d, d, na)`` and
        ``h (d, na)``) of the tasks ``active`` for the current prior, computed where out of
        date (and kept, when ``store``): views of every task's when none is."""
        stale = self.version[active] != self.prior_version
        kept = [a[..., active] for a in self._kept()]
        if not stale.any():
            return tuple(kept)
        if isinstance(active, slice) and not store:
            kept = [a.copy() for a in kept]
        # every task at once after a new prior: plain slices, not a mask over the last axis
        which = slice(None) if stale.all() else np.flatnonzero(stale)
        self._refresh(kept, self._inverses(active, which), active, which)
        if store:
            if not isinstance(active, slice):       # views need no copying back
                for whole, part in zip(self._kept(), kept):
                    whole[..., active] = part
            self.version[active] = self.prior_version
        return tuple(kept)

    def _kept(self) -> list:
        """Every task's arrays that depend on the prior, the tasks on the last axis."""
        return [self._A, self._h]

    def _refresh(self, kept, fresh, active, which) -> None:
        """Write the tasks ``active[which]``'s arrays for the prior in use into ``kept`` (the
        tasks ``active``'s of :meth:`_kept`), from their fresh matrices ``fresh``."""
        A, h = kept
        b = self._s[:, active][:, which] / NOISE
        b += self._prior[1][:, None]
        A[..., which] = fresh
        h[:, which] = np.einsum("ijk,jk->ik", fresh, b)

    def _inverses(self, active, which) -> np.ndarray:
        """``(Pi + Q_k / s2)^-1`` (d, d, n) of the tasks ``active[which]`` for the prior in use."""
        fresh = np.take(self._Q[:, active][:, which], self._unpack, axis=0)
        fresh /= NOISE
        fresh += self._prior[0][:, :, None]
        if fresh.size > IN_PLACE_INVERSE_MAX and self.d > IN_PLACE_INVERSE_DIM:
            return np.moveaxis(np.linalg.inv(np.moveaxis(fresh, -1, 0)), 0, -1)
        return inverse_in_chunks(fresh, self._scratch(min(fresh.shape[-1], chunk_of(self.d))))

    def margins(self, X: np.ndarray, active=slice(None), store: bool = False) -> np.ndarray:
        """``h_k . x`` (B, na) of X (B, na, d) for the block's tasks ``active`` (0 before the
        first prior); ``store`` keeps the matrices computed on the way."""
        self._Ax = self._x = None
        if self._prior is None:
            return np.zeros(X.shape[:2])
        A, h = self._matrices(active, store)
        if store and X.shape[0] == 1:
            # A x too (and x as learn reads it): learn's Sherman-Morrison step needs it
            x = self._x = X[0].T.copy()       # learn masks it in place: never a view of X
            self._Ax = np.einsum("ijk,jk->ik", A, x)
            return np.einsum("ik,ik->k", h, x)[None]
        return np.einsum("ik,bki->bk", h, X)

    def _scratch(self, n: int) -> np.ndarray:
        """A (d, d, n) work array, the same memory every round (a fresh one would cost more in
        page faults than the arithmetic)."""
        return self._buffer(self.d * self.d * n).reshape(self.d, self.d, n)

    def _buffer(self, size: int) -> np.ndarray:
        """The work array's first ``size`` numbers, grown when short (one array for the d x d
        products and the packed x x^T's two factors, d (d + 1) numbers per task)."""
        if len(self._work) < size:
            self._work = np.empty(size)
        return self._work[:size]

    def learn(self, X: np.ndarray, y: np.ndarray, active=slice(None)) -> None:
        """Add a round's instances (X (B, na, d), y (B, na), 0 for padding) of the tasks
        ``active``."""
        d = self.d
        real = y != 0.0
        count = real.sum(axis=0)
        na = len(count)
        if self.running:
            M, QT, S1, _, _ = _split(self.delta, d)
            M[...], QT[...], S1[...] = self._part(active)
            N, N1 = self._N, self._N - self._started
        if X.shape[0] == 1:
            if self._x is not None and self._x.shape == (d, na):
                x = self._x                                                  # from margins
                x *= real[0]
            else:
                x = np.ascontiguousarray((X[0] * real[0][:, None]).T)       # (d, na)
            self._s[:, active] += x * y[0]
            # x x^T's packed entries: x_i x_j for the pairs i <= j (clip: take's out= unbuffered),
            # in the work array (its d (d + 1) numbers per task hold both factors)
            size, shape = len(self._rows) * na, (len(self._rows), na)
            work = self._buffer(2 * size)
            left = np.take(x, self._rows, axis=0, out=work[:size].reshape(shape), mode="clip")
            right = np.take(x, self._cols, axis=0, out=work[size:].reshape(shape), mode="clip")
            added = np.multiply(left, right, out=left)
        else:
            x = (X * real[:, :, None]).transpose(0, 2, 1)                    # (B, d, na)
            self._s[:, active] += np.einsum("bk,bdk->dk", y, x)
            added = np.einsum("bik,bjk->ijk", x, x, out=self._scratch(na))[self._rows, self._cols]
        if isinstance(active, slice):
            self._Q[:, active] += added
        else:
            self._Q[:, active] = self._Q[:, active] + added
        n = self.n[active]
        if self._started < len(self.n):             # some task has had no instance yet
            self._started += int(np.count_nonzero((n == 0) & (count > 0)))
        self._N += float(count.sum())
        self.n[active] = n + count
        if self._prior is not None:
            self._update_matrices(x if X.shape[0] == 1 else None, y[0], count, active)
        self._Ax = self._x = None
        if self.running:            # the tasks' part after the round less theirs before it
            after = self._part(active)
            for part, new in zip((M, QT, S1), after):
                np.subtract(new, part, out=part)
            self.delta[-2] = self._N - N
            self.delta[-1] = self._N - self._started - N1

    def _part(self, active):
        """M, QT and S1 (d x d, d x d, d) over the block's tasks ``active``."""
        s, w = self._s[:, active], _weights(self.n[active])
        # M = sum_k (s_k s_k^T - Q_k) / n_k and QT = sum_k Q_k: Q read once for both
        sums = (self._Q[:, active] @ np.stack([w, np.ones_like(w)], axis=1))[self._unpack]
        return (s * w) @ s.T - sums[..., 0], sums[..., 1], s.sum(axis=1)

    def statistics(self, bound: float | None = None) -> np.ndarray:
        """The block's statistics (:func:`stats_size` numbers, the same buffer every call),
        which the blocks' sum makes :attr:`totals`. Only an estimate reads M, QT and S1, so
        given ``bound``, an upper bound on the coming round's instances over every block (the
        same on every block), they are 0 unless the round may end in one (docs/ALGORITHMS.md
        section 2.7); ``bound`` None: computed every time."""
        stats, d = self._stats, self.d
        M, QT, S1, _, _ = _split(stats, d)
        stats[-2] = self._N
        stats[-1] = self._N - self._started
        if bound is not None and self.totals[-2] + bound < GROWTH * self.estimated_at:
            M[...] = QT[...] = S1[...] = 0.0
        else:
            M[...], QT[...], S1[...] = self._part(self.seen())
        return stats

    def seen(self):
        """The tasks the sums over the block's tasks run over: every one (``slice(None)``), or,
        while fewer than an eighth of them have had an instance, the indices of those that
        have, so that a learner's first calls cost what their few tasks do, not what K would
        (a task without one adds zeros: the same sums but for their rounding; a run, whose
        every task starts in its first round, always takes every task)."""
        if self._started * 8 >= len(self.n):
            return slice(None)
        return np.flatnonzero(self.n > 0)

    def _update_matrices(self, x, y, count, active) -> None:
        """Keep ``A`` and ``h`` of the current tasks ``active`` up to date with one new
        instance each (columns of ``x``, d x na, labels ``y``; zero for tasks without one) by
        Sherman-Morrison, or, after a mini-batch (``x`` None), mark those that learned to be
        computed afresh."""
        current = self.version[active] == self.prior_version
        if x is None:
            version = self.version[active]
            version[count > 0] = -1
            self.version[active] = version
            return
        A, h = self._A[..., active], self._h[:, active]      # views for every task, else copies
        Ax = self._Ax if self._Ax is not None else np.einsum("ijk,jk->ik", A, x)
        scale = 1.0 / (NOISE + np.einsum("ik,ik->k", x, Ax))
        scale *= current & (y != 0.0)          # a task without an instance keeps its A and h
        residual = y - np.einsum("ik,ik->k", x, h)
        self._update_more(Ax, residual, scale, active)
        h += Ax * (residual * scale)
        Ax *= np.sqrt(scale)
        A -= np.multiply(Ax[:, None, :], Ax[None, :, :], out=self._scratch(len(current)))
        if not isinstance(active, slice):
            self._A[..., active] = A
            self._h[:, active] = h

    def _update_more(self, Ax, residual, scale, active) -> None:
        """The instance's step of whatever else a task keeps with A and h (``Ax``: A x and
        ``residual``: y - x . h before the step, ``scale``: 1 / (s2 + x . A x), 0 where no
        step): nothing here."""

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

    def _take(self, Pi, V, const) -> None:
        """Use the prior of precision ``Pi`` and ``Pi mu`` the column of ``V`` (d, 1) (``const``:
        a mixture's log weights' constants, none here), as a server estimated it
        (:mod:`.served_prior`): every task's matrices are computed afresh when next used."""
        self._prior = (Pi, V[:, 0])
        self.prior_version += 1

    def checked(self, rows) -> list:
        """The arrays whose finiteness says this expert's is: the tasks ``rows``'s, the totals
        and the prior estimated from them."""
        arrays = [a[..., rows] for a in (self._s, self._Q, self._A, self._h)] + [self.totals]
        return arrays + list(self._prior) if self._prior is not None else arrays

    def state(self) -> dict:
        """The state, every per-task array with the tasks first."""
        return {"s": self._s.T.copy(), "Q": np.moveaxis(self._Q[self._unpack], -1, 0).copy(),
                "n": self.n.copy(), "A": np.moveaxis(self._A, -1, 0).copy(), "h": self._h.T.copy(),
                "version": self.version.copy(), "totals": self.totals.copy(),
                "prior_version": np.int64(self.prior_version),
                "estimated_at": np.float64(self.estimated_at),
                # the prior itself (zeros before the first): estimating it again from the
                # totals would give the same, but the totals may have moved on since
                "Pi": (self._prior[0] if self._prior else np.zeros((self.d, self.d))).copy(),
                "Pi_mu": (self._prior[1] if self._prior else np.zeros(self.d)).copy()}

    def load_state(self, state: dict) -> None:
        self._s[...] = np.asarray(state["s"]).T
        self._Q[...] = np.asarray(state["Q"])[:, self._rows, self._cols].T
        self._A[...] = np.moveaxis(np.asarray(state["A"]), 0, -1)
        self.n[...] = state["n"]
        self.totals[...] = state["totals"]
        self.version[...] = state["version"]
        self._N = float(self.n.sum())
        self._started = int(np.count_nonzero(self.n))
        self.prior_version = int(state["prior_version"])
        self.estimated_at = float(state["estimated_at"])
        self._prior = ((np.array(state["Pi"], dtype=np.float64),
                        np.array(state["Pi_mu"], dtype=np.float64)) if self.prior_version else None)
        if "h" in state:
            self._h[...] = np.asarray(state["h"]).T
        elif self._prior is not None:       # a checkpoint of an earlier version: h = A b
            b = self._s / NOISE
            b += self._prior[1][:, None]
            self._h[...] = np.einsum("ijk,jk->ik", self._A, b)
