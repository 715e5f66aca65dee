"""The empirical-Bayes expert with a mixture prior ``sum_g pi_g N(c_g, s_w I)``: tasks that come
in latent groups borrow from their group, not from all tasks. Its posterior is exact at little
more than the Gaussian's cost (a task's A_k is the same under every component; beside it the
task keeps h0_k and one number L_kg per component). The mixture is estimated where the Gaussian
prior of :mod:`.bayes` is, by :data:`EM_STEPS` steps of EM over the blocks, each one sum of the
blocks' E-step sums (through C-ADMM's server, :attr:`MixtureBayes.sum_blocks`, or over D-ADMM's
graph, :meth:`MixtureBayes.estimate`); the first estimate takes the Gaussian prior and draws the
centres from it.

The posterior, the EM steps' sums and the costs: docs/ALGORITHMS.md section 2.8.
"""
from __future__ import annotations

import numpy as np

from . import bayes
from .bayes import NOISE, EmpiricalBayes
from .contract import drive_sums

# the prior's components, and the EM steps (one exchange each) at every estimate; chosen on the
# selection sets (docs/GUIDE.md, *How the defaults were chosen*)
GROUPS = 8
EM_STEPS = 10
# the components' least squares' ridge (R_g + RIDGE I): a component with no task yet stays finite
RIDGE = 1.0
# the seed of the first centres' draw from the Gaussian prior, the same on every rank
SEED = 12345
# the largest d with a mixture prior: the E-step's sums are G d (d + 1) / 2 numbers a message
MAX_DIM = 128


def used(dim: int) -> bool:
    """Whether a run whose vote has the empirical-Bayes expert gives it a mixture prior."""
    return GROUPS > 1 and dim <= MAX_DIM


def sums_size(dim: int, groups: int = GROUPS) -> int:
    """Numbers in a block's E-step sums: per component R_g (packed), T_g, n_g, N1_g, m_g."""
    return groups * (dim * (dim + 1) // 2 + dim + 3)


def em_steps(N: float, estimated_at: float) -> tuple[int, float]:
    """The EM steps (sums over the blocks) the round whose totals hold ``N`` instances ends
    with, and the instances of the last estimate after it (the same on every rank): whether
    a D-ADMM node's round ends in sums, and what :meth:`MixtureBayes.set_totals` does, for a
    server that takes part in the exchanges without holding tasks."""
    if not (N > 0 and N >= bayes.GROWTH * estimated_at):
        return 0, estimated_at
    return (EM_STEPS if estimated_at > 0 else 0), N


def split_sums(sums: np.ndarray, d: int, G: int = GROUPS):
    """(R (p, G), T (d, G), n, N1, m (G each)) views of E-step sums (p = d (d + 1) / 2)."""
    p = d * (d + 1) // 2
    R = sums[:p * G].reshape(p, G)
    T = sums[p * G:(p + d) * G].reshape(d, G)
    n, N1, m = sums[(p + d) * G:].reshape(3, G)
    return R, T, n, N1, m


def first_centres(Pi: np.ndarray, Pi_mu: np.ndarray, G: int = GROUPS) -> tuple:
    """The first estimate's centres (G, d), drawn from the Gaussian prior ``(Pi, Pi mu)`` with
    :data:`SEED`, and equal weights (G,)."""
    mu = np.linalg.solve(Pi, Pi_mu)
    L = np.linalg.cholesky(np.linalg.inv(Pi))
    return mu + np.random.default_rng(SEED).standard_normal((G, len(mu))) @ L.T, np.full(G, 1.0 / G)


def moments_of(totals: np.ndarray, d: int) -> tuple:
    """``Sx`` (the instances' second moment) of the statistics ``totals`` and ``P = Sx^-2``,
    with which an E-step's within moments are taken."""
    Sx = totals[d * d:2 * d * d].reshape(d, d) / totals[-2]
    Sx_inv = np.linalg.pinv(Sx, hermitian=True)
    return Sx, Sx_inv @ Sx_inv


def m_step(total: np.ndarray, d: int, G: int = GROUPS) -> tuple:
    """An EM step's centres (G, d) and weights (G,) from the E-step sums over every block."""
    R, T, n, _, _ = split_sums(total, d, G)
    pooled = R[bayes.packed_index(d)]                                   # (d, d, G)
    pooled += RIDGE * np.eye(d)[:, :, None]
    centres = np.linalg.solve(np.moveaxis(pooled, -1, 0), T.T[:, :, None])[..., 0]
    return centres, n / max(float(n.sum()), np.finfo(float).tiny)


def mixture_prior(centres: np.ndarray, share: np.ndarray, total: np.ndarray, Sx) -> tuple:
    """The prior the EM steps end in, ``(Pi, V, const)`` as :meth:`MixtureBayes._take` takes
    it: the components' shared precision from the within moments of the last E-step's sums
    ``total``, v_g = c_g / s_w and the log weights' constants."""
    G, d = centres.shape
    _, _, _, N1, m = split_sums(total, d, G)
    share = np.maximum(share, 1e-3)
    share /= share.sum()
    spread = m / np.maximum(N1, np.finfo(float).tiny) - np.einsum("gd,gd->g", centres, centres)
    mean = float(share[N1 > 0] @ spread[N1 > 0]) / d
    within = max(mean, bayes.floor(mean, Sx))
    V = centres.T / within
    return np.eye(d) / within, V, np.log(share) - 0.5 * np.einsum("gd,dg->g", centres, V)


class MixtureBayes(EmpiricalBayes):
    """The empirical-Bayes expert of a block of ``n_tasks`` tasks with ``dim`` weights, with a
    mixture prior (module text). ``total_tasks``: the run's tasks; a block that holds fewer
    needs :attr:`sum_blocks` (C-ADMM) or a driver of :meth:`estimate` (D-ADMM).

    Attributes
    ----------
    sum_blocks : callable or None
        ``sum_blocks(sums)``: the sum of every block's ``sums`` (ndarray of :func:`sums_size`
        numbers), the same on every rank, in rank order; None where this block holds every task.
    centres_, share_ : ndarray
        The components' centres (G, d) and weights (G,) as the last EM step left them (None
        before the first estimate).
    """

    TASK_AXIS = {**EmpiricalBayes.TASK_AXIS, "L": 0}
    ROW_AXES = {**EmpiricalBayes.ROW_AXES, "_L": 1}

    def __init__(self, n_tasks: int, dim: int, total_tasks: int | None = None):
        super().__init__(n_tasks, dim)
        G = GROUPS
        self.G, self.total_tasks = G, total_tasks or n_tasks
        self._L = np.zeros((G, n_tasks))             # v_g . A_k v_g / 2 + v_g . h0_k; _h: h0_k
        self._width = 0                              # components in use (1: the Gaussian)
        self._V = np.zeros((dim, G))                 # v_g = c_g / s_w
        self._const = np.zeros(G)                    # log pi_g - c_g . v_g / 2
        self.centres_ = self.share_ = None
        self.sum_blocks = None
        self._sums = np.zeros(sums_size(dim, G))
        self._double = np.where(self._rows == self._cols, 1.0, 2.0)   # x^T Q x from packed Q

    # -- the prior ---------------------------------------------------------------------------
    def set_totals(self, totals: np.ndarray) -> None:
        """Every task's statistics: at an estimate (:func:`em_steps`), the EM steps, their
        sums over the blocks by :attr:`sum_blocks`, and the mixture taken (the first: the
        Gaussian prior, and the centres drawn from it)."""
        sum_blocks = self.sum_blocks
        if sum_blocks is None and len(self.n) < self.total_tasks:
            def sum_blocks(sums):
                raise RuntimeError("a block of a mixture prior's run without the exchange that "
                                   "sums the blocks' EM steps (bind sum_blocks)")
        # one block of every task: its sums are the total
        drive_sums([self.estimate(totals)],
                   lambda parts: parts if sum_blocks is None else [sum_blocks(parts[0])])

    def estimate(self, totals: np.ndarray):
        """:meth:`set_totals` as a generator for a driver that sums the blocks' EM steps itself
        (D-ADMM, whose nodes take each step together): it yields the block's E-step sums
        (:func:`sums_size` numbers) and is sent their sum over every block, once per step."""
        self.totals[...] = totals
        steps, at = em_steps(self.totals[-2], self.estimated_at)
        if at == self.estimated_at:
            return
        self.estimated_at = at
        d, G = self.d, self.G
        Pi, Pi_mu = bayes.prior(self.totals, d)
        if self.centres_ is None:
            self.centres_, self.share_ = first_centres(Pi, Pi_mu, G)
            self._take(Pi, Pi_mu[:, None], np.zeros(1))
            return
        Sx, P = moments_of(self.totals, d)
        for step in range(steps):
            total = yield self._e_step(P if step == steps - 1 else None)
            self.centres_, self.share_ = m_step(total, d, G)
        self._take(*mixture_prior(self.centres_, self.share_, total, Sx))

    def _take(self, Pi, V, const) -> None:
        """Use the prior of precision ``Pi`` (the components' shared one), v_g the columns of
        ``V`` (d, width) and the log weights' constants ``const``: every task's matrices are
        computed afresh when next used."""
        width = V.shape[1]
        self._width = width
        self._V[:, :width] = V
        self._const[:width] = const
        self._prior = (Pi, V[:, 0])
        self.prior_version += 1

    def _e_step(self, P) -> np.ndarray:
        """The block's E-step sums (:func:`sums_size` numbers, the same buffer every call)
        under the current centres and weights; ``P = Sx^-2`` for the within moments, which
        only the last step's are read for (None: N1 and m left 0)."""
        seen = self.seen()
        Q, s, counts, C = self._Q[:, seen], self._s[:, seen], self.n[seen], self.centres_
        started = counts > 0
        quad = (C[:, self._rows] * C[:, self._cols] * self._double) @ Q       # c^T Q_k c (G, kb)
        log_r = C @ s
        log_r -= 0.5 * quad
        log_r /= NOISE
        log_r += np.log(np.maximum(self.share_, 1e-12))[:, None]
        log_r -= log_r.max(axis=0)
        r = np.exp(log_r, out=log_r)
        r *= started / r.sum(axis=0)                   # tasks without an instance weigh 0
        R, T, n, N1, m = split_sums(self._sums, self.d, self.G)
        np.matmul(Q, r.T, out=R)
        np.matmul(s, r.T, out=T)
        n[...] = r.sum(axis=1)
        if P is None:
            N1[...] = m[...] = 0.0
            return self._sums
        N1[...] = r @ np.maximum(counts - 1.0, 0.0)
        moments = np.einsum("ik,ik->k", s, P @ s) - (P[self._rows, self._cols] * self._double) @ Q
        m[...] = r @ (moments * bayes._weights(counts))
        return self._sums

    # -- the tasks' matrices -----------------------------------------------------------------
    def _kept(self) -> list:
        """A (d, d, K), h0 (d, K) and L (width, K): :meth:`_matrices` gives them for the tasks
        it is asked for."""
        return [self._A, self._h, self._L[:self._width]]

    def _refresh(self, kept, fresh, active, which) -> None:
        A, h, L = kept
        width, d = self._width, self.d
        A[..., which] = fresh
        h0 = np.einsum("ijk,jk->ik", fresh, self._s[:, active][:, which]) / NOISE
        h[:, which] = h0
        V = self._V[:, :width]
        # v_g . A_k v_g = <v_g v_g^T, A_k>: one matrix product over the tasks' flat matrices
        quad = (V[:, None, :] * V[None, :, :]).reshape(d * d, width).T @ fresh.reshape(d * d, -1)
        quad *= 0.5
        quad += V.T @ h0
        L[:, which] = quad

    def _responsibilities(self, L) -> np.ndarray:
        """r_kg (width, na) of the tasks whose L this is."""
        log_r = L + self._const[:self._width, None]
        log_r -= log_r.max(axis=0)
        r = np.exp(log_r, out=log_r)
        r /= r.sum(axis=0)
        return r

    def margins(self, X: np.ndarray, active=slice(None), store: bool = False) -> np.ndarray:
        """``sum_g r_kg h_kg . x`` (B, na) of X (B, na, d) for the block's tasks ``active``
        (0 before the first prior); ``store`` keeps the matrices computed on the way."""
        self._Ax = self._x = None
        if self._prior is None:
            return np.zeros(X.shape[:2])
        A, h, L = self._matrices(active, store)
        r = self._responsibilities(L)
        V = self._V[:, :self._width]
        if X.shape[0] == 1:
            x = X[0].T.copy()
            Ax = np.einsum("ijk,jk->ik", A, x)
            if store:
                self._x, self._Ax = x, Ax
            # sum_g r_g h_kg . x = h0 . x + sum_g r_g v_g . A x
            return (np.einsum("ik,ik->k", h, x) + np.einsum("gk,gk->k", r, V.T @ Ax))[None]
        # A is symmetric: (sum_g r_g v_g) . A x = (A sum_g r_g v_g) . x
        return np.einsum("ik,bki->bk", h + np.einsum("ijk,jk->ik", A, V @ r), X)

    def _update_more(self, Ax, residual, scale, active) -> None:
        """L's step with A's and h0's: L_kg += c (e (u . v_g) - (u . v_g)^2 / 2)."""
        width = self._width
        L = self._L[:width, active]                       # a view for every task, else a copy
        uv = self._V[:, :width].T @ Ax                    # u . v_g (width, na)
        step = residual * uv
        uv *= uv
        uv *= 0.5
        step -= uv
        step *= scale
        L += step
        if not isinstance(active, slice):
            self._L[:width, active] = L

    def checked(self, rows) -> list:
        shared = [self._V, self._const] + ([self.centres_, self.share_] if self.centres_ is not None else [])
        return super().checked(rows) + [self._L[:, rows]] + shared

    # -- checkpoints -------------------------------------------------------------------------
    def state(self) -> dict:
        out = super().state()
        G, d = self.G, self.d
        out.update(L=self._L.T.copy(), width=np.int64(self._width),
                   V=self._V.copy(), const=self._const.copy(),
                   centres=(self.centres_ if self.centres_ is not None else np.zeros((G, d))).copy(),
                   share=(self.share_ if self.share_ is not None else np.zeros(G)).copy())
        return out

    def load_state(self, state: dict) -> None:
        super().load_state(state)
        self._L[...] = np.asarray(state["L"]).T
        self._width = int(state["width"])
        self._V[...] = state["V"]
        self._const[...] = state["const"]
        if self._width:
            self._prior = (np.array(state["Pi"], dtype=np.float64), self._V[:, 0].copy())
        # the centres exist once the first estimate drew them; a provisional Gaussian prior
        # (gossiped_prior) is in use before that, with no centres: their weights are then zero
        started = bool(np.any(np.asarray(state["share"])))
        self.centres_ = np.array(state["centres"], dtype=np.float64) if started else None
        self.share_ = np.array(state["share"], dtype=np.float64) if started else None
