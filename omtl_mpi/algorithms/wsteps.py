"""The w-step of the ADMM learners as a Bregman-proximal step, one class per divergence.

The w-step (eq. solution1-1) minimises, for each task k of a block,

    g_k . w + z_k . (w - u - v_k) + rho/2 |w - u - v_k|^2 + eta B(w, w_k)

with ``B(w, w_t) = (w - w_t)^T D_t (w - w_t) / 2``.  Its solution is

    w = (eta D_t w_t + rho (u + v_k) - g_k - z_k) / (eta D_t + rho)
      = w_t - (eta D_t + rho I)^{-1} (g_k + z_k + rho (w_t - u - v_k))

so only the metric D_t differs between the three steps below; nothing else in ADMM changes
(docs/ALGORITHMS.md section 2.1 has the derivation).  D_t includes round t's own data (as
AdaGrad does); every metric starts at D_0 = I (arow: r I), so that with r = 1 the three steps
start the same.

* :class:`EuclidStep` - D_t = I, the paper's step;
* :class:`AdagradStep` - D_t = diag(sqrt(delta + sum of squared past gradients)), elementwise;
* :class:`ArowStep` - D_t = r I + sum over margin errors of x x^T (AROW's precision times its
  r), kept as the inverse M = (eta D_t + rho I)^{-1}, updated by Sherman-Morrison (rank one,
  O(d^2)) at each margin error: never a fresh d x d solve;
* :class:`ArowDiagStep` - the diagonal of that metric, D_t = r I + sum over margin errors of
  diag(x x^T): d numbers per task and O(non-zeros) per step, for large d (``--arow-covariance``,
  :func:`arow_form`).

Every class holds the per-task state of a block of kb tasks and has ``step`` (with the round's
data, for its active tasks), ``state`` and ``load_state``; a state holds everything needed to
continue bit for bit. The diagonal ones also have ``step_pairs``, the same step on the
(task, coordinate) pairs a round's sparse instances touch only (the ADMM learners'
``--coordinates nonzero``, docs/ALGORITHMS.md section 2.1).
"""
from __future__ import annotations

import numpy as np

from ..data.sparse import SparseRows, rows_dense
from ..errors import ConfigError, UserError
from .fortran import dger

# the arow w-step's r when none is given is this factor times the squared norm of the task's
# first nonzero instance (the mean over the nonzero instances of its first mini-batch that has
# one: settle_r), so that r follows the features' scale; the second for the diagonal form, each
# chosen on the selection sets that take its form (docs/GUIDE.md, *How the defaults were
# chosen*; single-task AROW's are independent.AROW_R_PER_MEAN_SQ_NORM and
# AROW_DIAGONAL_R_PER_MEAN_SQ_NORM)
AROW_W_STEP_R_PER_MEAN_SQ_NORM = 0.2
AROW_DIAGONAL_W_STEP_R_PER_MEAN_SQ_NORM = 1.0

# AROW's covariance (the arow w-step's metric, and single-task AROW's): --arow-covariance auto
# keeps the full d x d matrix per task up to AROW_DIAGONAL_ABOVE weights and takes its diagonal
# above; an explicit 'full' is refused above AROW_FULL_MAX, where one task's matrix and its
# O(d^2) steps are out of proportion (docs/GUIDE.md, *Large d*). The threshold follows a cost
# rule: the full matrix while a round with it costs at most 10 times a round with the diagonal
# (docs/PERFORMANCE.md, *AROW's covariance*, checks it on the code as it is)
COVARIANCES = ("auto", "full", "diagonal")
AROW_DIAGONAL_ABOVE = 640
AROW_FULL_MAX = 4096


def arow_form(covariance: str, dim: int) -> str:
    """"full" or "diagonal": the AROW covariance ``--arow-covariance`` gives at ``dim`` weights
    (auto: full up to :data:`AROW_DIAGONAL_ABOVE`). Raises ConfigError for 'full' above
    :data:`AROW_FULL_MAX`, naming what it would need."""
    if covariance == "diagonal" or (covariance == "auto" and dim > AROW_DIAGONAL_ABOVE):
        return "diagonal"
    if covariance == "full" and dim > AROW_FULL_MAX:
        # d counts the weights, the intercept's among them: --dims 4096 gives 4097
        raise ConfigError(f"--arow-covariance full at d = {dim} weights (an intercept counts one): "
                          f"{full_arow_cost(dim)}, out of proportion above d = {AROW_FULL_MAX}; "
                          "use --arow-covariance diagonal (d numbers per task, O(non-zeros) per "
                          "step) or a smaller --dims")
    return "full"


def full_arow_cost(dim: int) -> str:
    """What full-covariance AROW needs at ``dim`` weights, in words: its matrix per task and
    its time per margin error (a d x d rank-one update at about 1 GFLOP/s, this project's
    VM's dger: docs/GUIDE.md, *Large d*)."""
    return (f"a {dim:,} x {dim:,} matrix per task ({8 * dim * dim / 2 ** 20:,.0f} MiB) and about "
            f"{2 * dim * dim / 1e9 * 1e3:,.0f} ms per margin error")


def settle_r(r: np.ndarray, X: np.ndarray, scale: float) -> np.ndarray:
    """Fill in place the entries of ``r`` (kb,) still 0 (not yet known) with ``scale`` times
    the mean squared norm of the task's nonzero instances in ``X`` (B, kb, d), its first
    mini-batch that has any; returns the mask of the tasks set.

    An all-zero instance (padding, or zero features without intercept) says nothing of the
    scale, so a task waits for one that is not."""
    squares = X.sq_norms() if isinstance(X, SparseRows) else np.einsum("bkd,bkd->bk", X, X)
    seen = np.count_nonzero(squares, axis=0)
    new = (r == 0.0) & (seen > 0)
    r[new] = scale * squares[:, new].sum(axis=0) / seen[new]
    return new


def inverse_rank_one(M: np.ndarray, x: np.ndarray, c: float):
    """``M <- (M^-1 + c x x^T)^-1`` in place by Sherman-Morrison, for a symmetric M (d x d).

    O(d^2) and no d x d temporary.  Returns ``(M x, x^T M x)`` of the M before the update
    (AROW's mean step uses them).
    """
    mx = M @ x
    v = float(x @ mx)
    # dger updates M in place; M is symmetric, so updating its Fortran-ordered view M.T is
    # the same update
    out = dger(-c / (1.0 + c * v), mx, mx, a=M.T, overwrite_a=1)
    if not np.may_share_memory(out, M):         # a BLAS build that copied after all
        M[...] = out.T
    return mx, v


def rows(array: np.ndarray, active):
    """``array[active]``: a view for ``slice(None)`` (every task of the block), else a copy."""
    return array[active]


def put(array: np.ndarray, active, value: np.ndarray) -> None:
    """``array[active] = value`` for ``value`` from :func:`rows` changed in place (nothing to do
    where :func:`rows` gave a view)."""
    if not isinstance(active, slice):
        array[active] = value


class EuclidStep:
    """``B(w, w_t) = |w - w_t|^2 / 2``: the paper's eq. solution1-1.

    Every step class takes the loss gradient as its negative ``D = -g`` (the descent
    direction) and ``R = rho (u + v_k) - z_k``, the constant part of the linearised
    Lagrangian, for the round's active tasks only: a task without an instance in the round
    takes no step at all (docs/ALGORITHMS.md section 1), so a round's cost follows its active
    tasks.
    """

    def __init__(self, params, n_tasks: int, dim: int):
        self.p = params
        # 0-d arrays: cheaper numpy operands than Python floats on this per-round path
        self._inv = np.array(1.0 / (params.rho + params.eta))
        self._keep = np.array(params.eta * (1.0 / (params.rho + params.eta)))

    # the axis of the tasks in each array of state() (contract.merge_states): none here
    TASK_AXIS: dict = {}

    def step(self, W, D, X, coef, inv_count, R, active):
        """The new w of the active tasks (na x d), a new array.

        Parameters
        ----------
        W, D, R : ndarray, shape (na, d)
            Current w_k, the batch-mean negative loss gradient ``-g_k`` and
            ``rho (u + v_k) - z_k`` of the active tasks (D and R may be overwritten).
        X : ndarray, shape (B, na, d)
            The round's instances (zero rows for padding).
        coef : ndarray, shape (B, na)
            Each instance's negative loss-gradient factor (-g = coef x); 0 where the loss is flat.
        inv_count : ndarray, shape (na,)
            1 / (number of real instances of each task in this batch).
        active : slice or ndarray of int
            Which tasks of the block these rows are (``slice(None)``: all of them, in order).
        """
        # w = eta w_t / (rho + eta) + (R + D) / (rho + eta)
        R += D
        R *= self._inv
        W = W * self._keep
        W += R
        return W

    def step_pairs(self, W, D, R, X, coef, inv_count, active, rows, flat, inverse):
        """:meth:`step` on the (task, coordinate) pairs of a round's sparse instances only.

        Parameters
        ----------
        W, D, R : ndarray, shape (m,)
            w_k, -g_k and ``rho (u + v_k) - z_k`` at the m pairs (D and R may be overwritten).
        X : SparseRows
            The round's instances; ``coef``, ``inv_count`` and ``active`` as in :meth:`step`.
        rows, flat : ndarray, shape (m,)
            The pairs: each one's task (its row in the block) and its index in a flattened
            kb x d array of the block (row * d + coordinate).
        inverse : ndarray or None
            The pair of every entry of X (None: the entries are the pairs, B = 1).

        Returns
        -------
        ndarray, shape (m,)
            The new w_k at the pairs; every other coordinate keeps its w.
        """
        return self.step(W, D, X, coef, inv_count, R, None)

    def state(self) -> dict:
        return {}

    def load_state(self, state: dict) -> None:
        pass

    def checked(self, rows) -> list:
        """The arrays whose finiteness says the w-step's is: the state of the tasks ``rows``
        (indices, or a slice)."""
        return []


class AdagradStep(EuclidStep):
    """Diagonal AdaGrad metric ``D_t = diag(sqrt(delta + sum_s g_s^2))`` per task (Duchi et al.
    2011): coordinates that have seen large or frequent gradients take smaller steps."""

    def __init__(self, params, n_tasks: int, dim: int):
        super().__init__(params, n_tasks, dim)
        self.S = np.zeros((n_tasks, dim))        # sum of squared past loss gradients

    TASK_AXIS = {"S": 0}
    ROW_AXES = TASK_AXIS        # its state's keys are its attributes (.undo)

    def step(self, W, D, X, coef, inv_count, R, active):
        S = rows(self.S, active)
        S += D * D
        put(self.S, active, S)
        return self._move(W, D, R, S)

    def step_pairs(self, W, D, R, X, coef, inv_count, active, rows, flat, inverse):
        S = np.take(self.S, flat)
        S += D * D
        np.put(self.S, flat, S)
        return self._move(W, D, R, S)

    def _move(self, W, D, R, S):
        """The new w from the sums S (this round's included)."""
        p = self.p
        Dt = np.sqrt(p.delta + S)
        Dt *= p.eta
        # (eta D_t w_t + rho (u + v_k) - z_k - g_k) / (eta D_t + rho)
        W = W * Dt
        W += R
        W += D
        Dt += p.rho
        W /= Dt
        return W

    def state(self) -> dict:
        return {"S": self.S.copy()}

    def checked(self, rows) -> list:
        return [self.S[rows]]

    def load_state(self, state: dict) -> None:
        self.S = np.array(state["S"], dtype=np.float64)


# up to this many weights per task, ArowStep updates every task's matrix with broadcast array
# operations; above it, in place per margin error
BATCHED_DIM = 64
# from this many tasks in a block (and up to BATCHED_DIM weights), ArowStep holds the matrices
# with the tasks on the last axis: its loops then run over the tasks (docs/PERFORMANCE.md, *Many
# tasks: the tasks-last layout*); with fewer, numpy's per-call cost makes that layout slower
TASKS_LAST_FROM = 48


class _PerTaskR(EuclidStep):
    """What both forms of the arow w-step share: each task's r, ``arow_r`` or, when that is
    None, set from the task's first nonzero instances (:func:`settle_r`), and the metric each
    task starts with once its r is known (the subclass's ``_start_metric``)."""

    def _begin_r(self, params, n_tasks: int) -> None:
        """r of every task (0: not known yet) and the metric of those whose r is known."""
        self.r = np.full(n_tasks, 0.0 if params.arow_r is None else float(params.arow_r))
        self._start_metric(np.nonzero(self.r)[0])
        self._unsettled = int(np.count_nonzero(self.r == 0.0))    # tasks whose r is not known

    @staticmethod
    def _r_per_sq_norm() -> float:
        """The factor of :func:`settle_r` (read when used, so that an experiment may set it)."""
        return AROW_W_STEP_R_PER_MEAN_SQ_NORM

    def _settle(self, X, active) -> None:
        """:func:`settle_r` for the tasks ``active`` whose r is not known, and their metric."""
        if self._unsettled:
            r = rows(self.r, active)
            new = settle_r(r, X, self._r_per_sq_norm())
            put(self.r, active, r)
            self._start_metric(np.nonzero(new)[0] if isinstance(active, slice)
                               else np.asarray(active)[new])
            self._unsettled -= int(np.count_nonzero(new))


class ArowStep(_PerTaskR):
    """Full AROW-style precision ``D_t = r I + sum over margin errors of x x^T`` (Crammer,
    Kulesza & Dredze 2009: their precision times r) per task, held as
    ``M = (eta D_t + rho I)^{-1}`` (kb x d x d); with eta = 1 and no consensus terms the step
    is AROW's own.

    A margin error is an instance whose loss gradient is not zero (hinge: y w.x < 1; perceptron:
    a mistake; logistic: every instance).  With a mini-batch each instance counts 1/n of a
    round, as the gradient is the batch mean.  r is ``arow_r``, or when that is None each
    task's own, :data:`AROW_W_STEP_R_PER_MEAN_SQ_NORM` times the squared norm of its first
    nonzero instance (:func:`settle_r`); until then M = 0 and w stays put.
    """

    def __init__(self, params, n_tasks: int, dim: int):
        super().__init__(params, n_tasks, dim)
        # the matrices of many tasks of small d are held with the tasks last (d x d x kb) in a
        # round of every task of the block, so that its few element-wise passes loop over the
        # tasks, not over d-long rows; else task-first (kb x d x d): a round of some tasks reads
        # their matrices, contiguous task-first and strided tasks-last (5x slower at
        # K = 100,000), and above BATCHED_DIM BLAS updates one task's matrix in place. The
        # layout follows the round (switched by a transpose), a function of the round alone, so
        # a resumed run takes the same path; :meth:`state` gives the matrices task-first.
        self._can_tasks_last = dim <= BATCHED_DIM and n_tasks >= TASKS_LAST_FROM
        self._tasks_last = self._can_tasks_last
        self._M = np.zeros((dim, dim, n_tasks) if self._tasks_last else (n_tasks, dim, dim))
        self._work = np.empty(0)
        self._begin_r(params, n_tasks)

    TASK_AXIS = {"M": 0, "r": 0}
    NOT_STATE = ("_inv", "_keep", "_work")     # constants and scratch (.undo)

    def row_axes(self) -> dict:
        """The attributes of the task axes (:mod:`.undo`): M's follows its layout."""
        return {"r": 0, "_M": 2 if self._tasks_last else 0}

    def _start_metric(self, k: np.ndarray) -> None:
        """M = (eta r + rho)^-1 I for the tasks ``k`` (indices)."""
        i = np.arange(self._M.shape[1])
        value = (1.0 / (self.p.eta * self.r[k] + self.p.rho))[:, None]
        if self._tasks_last:
            self._M[i, i, k[:, None]] = value
        else:
            self._M[k[:, None], i, i] = value

    def _scratch(self, n: int) -> np.ndarray:
        """A (d, d, n) work array, the same memory every round (no page faults for it)."""
        d = self._M.shape[0]
        if len(self._work) < d * d * n:
            self._work = np.empty(d * d * n)
        return self._work[:d * d * n].reshape(d, d, n)

    def step(self, W, D, X, coef, inv_count, R, active):
        p = self.p
        if self._can_tasks_last and self._tasks_last != isinstance(active, slice):
            self._tasks_last = not self._tasks_last
            if self._unsettled == len(self.r):
                # no task has started: M is zeros, which need no copying (nor their pages
                # touching: 350 MB at K = 100,000 and d = 21)
                self._M = np.zeros(self._M.shape[1:] + self._M.shape[:1] if self._tasks_last
                                   else self._M.shape[-1:] + self._M.shape[:-1])
            else:
                self._M = np.ascontiguousarray(np.moveaxis(self._M, 0, -1) if self._tasks_last
                                               else np.moveaxis(self._M, -1, 0))
        self._settle(X, active)
        c = p.eta * inv_count
        X = rows_dense(X)           # the full metric is for small d: dense rows cost no more
        # w_t - M (g + z + rho (w_t - u - v_k)) = w_t - M (rho w_t - R - D)
        G = W * p.rho
        G -= R
        G -= D
        if self._tasks_last:
            # every task's rank-one update in a few array operations over the tasks (only a
            # round of every task gets here: the layout follows the round)
            M = self._M
            for b in range(X.shape[0]):
                x = np.ascontiguousarray(X[b].T)                # (d, na)
                Mx = np.einsum("ijk,jk->ik", M, x)
                f = np.where(coef[b] != 0.0, c, 0.0)
                f /= 1.0 + f * np.einsum("ik,ik->k", x, Mx)
                fMx = Mx * f
                M -= np.multiply(fMx[:, None, :], Mx[None, :, :], out=self._scratch(len(f)))
            return W - np.einsum("ijk,jk->ik", M, np.ascontiguousarray(G.T)).T
        if X.shape[-1] <= BATCHED_DIM:
            # a few tasks: the same on task-first matrices
            M = rows(self._M, active)
            for b in range(X.shape[0]):
                x = X[b]
                Mx = np.matmul(M, x[:, :, None])                # (na, d, 1)
                f = np.where(coef[b] != 0.0, c, 0.0)
                f /= 1.0 + f * np.vecdot(x, Mx[:, :, 0])
                fMx = Mx * f[:, None, None]
                M -= fMx * Mx.transpose(0, 2, 1)                # f (M x)(M x)^T, one temporary
            put(self._M, active, M)
            return W - np.matmul(M, G[:, :, None])[:, :, 0]
        # one in-place rank-one update per margin error (BLAS dger, no d x d temporary)
        for b, i in zip(*np.nonzero(coef)):
            k = i if isinstance(active, slice) else active[i]
            inverse_rank_one(self._M[k], X[b, i], float(c[i]))
        return W - np.matmul(self._M[active], G[:, :, None])[:, :, 0]

    def state(self) -> dict:
        M = np.moveaxis(self._M, -1, 0) if self._tasks_last else self._M
        return {"M": M.copy(), "r": self.r.copy()}

    def checked(self, rows) -> list:
        return [self._M[..., rows] if self._tasks_last else self._M[rows], self.r[rows]]

    def load_state(self, state: dict) -> None:
        M = np.array(state["M"], dtype=np.float64)
        self._M = np.ascontiguousarray(np.moveaxis(M, 0, -1)) if self._tasks_last else M
        r = state["r"] if "r" in state else older_checkpoint_r(self.p.arow_r, len(M), 1.0)
        self.r = np.array(r, dtype=np.float64)
        self._unsettled = int(np.count_nonzero(self.r == 0.0))


class ArowDiagStep(_PerTaskR):
    """:class:`ArowStep`'s metric with the past margin errors kept on the diagonal: ``D_t =
    Lambda_t + sum over this round's margin errors of x x^T``, ``Lambda_t = r I + sum over the
    earlier ones of diag(x x^T)``, held as ``P = eta Lambda_t + rho`` (kb x d): d numbers per task.
    The round's own instances enter exactly (Woodbury: a rank-one correction per margin error of
    the task, along its instances), then join the diagonal. So the step of one instance is
    AROW's with a diagonal covariance (Crammer, Kulesza & Dredze 2009, the diagonal variant):
    its length follows x^T Sigma x + r, as the full step's does, where a diagonal metric alone
    would step each coordinate as if the instance held no other. On sparse instances it works on
    their non-zero coordinates only. r as in :class:`ArowStep`, its factor
    :data:`AROW_DIAGONAL_W_STEP_R_PER_MEAN_SQ_NORM` (until a task's r is known its w stays
    put)."""

    def __init__(self, params, n_tasks: int, dim: int):
        super().__init__(params, n_tasks, dim)
        self.P = np.zeros((n_tasks, dim))
        self._begin_r(params, n_tasks)

    TASK_AXIS = {"P": 0, "r": 0}
    ROW_AXES = TASK_AXIS        # its state's keys are its attributes (.undo)

    @staticmethod
    def _r_per_sq_norm() -> float:
        return AROW_DIAGONAL_W_STEP_R_PER_MEAN_SQ_NORM

    def _start_metric(self, k: np.ndarray) -> None:
        """P = eta r + rho for the tasks ``k`` (indices)."""
        self.P[k] = (self.p.eta * self.r[k] + self.p.rho)[:, None]

    def _errors(self, coef, inv_count):
        """Each instance's weight in the metric: eta / n at a margin error, else 0 (B, na)."""
        return np.where(coef != 0.0, self.p.eta * inv_count, 0.0)

    def step(self, W, D, X, coef, inv_count, R, active):
        self._settle(X, active)
        X = X if isinstance(X, SparseRows) else SparseRows.from_dense(X)
        P = rows(self.P, active)
        moving = (rows(self.r, active) > 0.0)[:, None]
        inverse_P = np.divide(1.0, P, out=np.zeros_like(P), where=moving & (P > 0.0))
        G = W * self.p.rho
        G -= R
        G -= D
        G *= inverse_P                                  # Lambda^-1 (rho w_t - R - D)
        tasks, cols, inverse = X.pairs()
        weight = self._errors(coef, inv_count)
        G[tasks, cols] -= woodbury(X, weight, inverse_P[tasks, cols], G[tasks, cols], tasks, inverse)
        P[tasks, cols] += X.pair_sums(X.data * X.data * weight.reshape(-1)[X.row_ids()], inverse)
        put(self.P, active, P)
        return W - G

    def step_pairs(self, W, D, R, X, coef, inv_count, active, rows, flat, inverse):
        self._settle(X, active)
        P = np.take(self.P, flat)
        inverse_P = np.divide(1.0, P, out=np.zeros_like(P), where=(self.r[rows] > 0.0) & (P > 0.0))
        G = W * self.p.rho
        G -= R
        G -= D
        G *= inverse_P
        weight = self._errors(coef, inv_count)
        tasks = X.task_ids() if inverse is None else X.pairs()[0]
        G -= woodbury(X, weight, inverse_P, G, tasks, inverse)
        P += X.pair_sums(X.data * X.data * weight.reshape(-1)[X.row_ids()], inverse)
        np.put(self.P, flat, P)
        return W - G

    def state(self) -> dict:
        return {"P": self.P.copy(), "r": self.r.copy()}

    def checked(self, rows) -> list:
        return [self.P[rows], self.r[rows]]

    def load_state(self, state: dict) -> None:
        self.P = np.array(state["P"], dtype=np.float64)
        self.r = np.array(state["r"], dtype=np.float64)
        self._unsettled = int(np.count_nonzero(self.r == 0.0))


def woodbury(X: SparseRows, weight: np.ndarray, inverse_A: np.ndarray, y: np.ndarray, tasks,
             inverse) -> np.ndarray:
    """The correction that the round's instances make to a diagonal metric's step, on the
    (task, coordinate) pairs of X: with y = A^-1 v, ``(A + sum_b c_b x_b x_b^T)^-1 v = y -
    correction`` for each task (its instances x_b of X, their weights c_b, 0 for an instance
    that does not grow the metric), by Woodbury: A^-1 X^T C (I + X A^-1 X^T C)^-1 X y.

    ``inverse_A`` and ``y`` hold A^-1 and y at the pairs (m,), ``tasks`` each pair's task
    (0..na-1), ``inverse`` the pair of each entry of X (None: the entries are the pairs, B = 1).
    """
    B, na, _ = X.shape
    entry = np.arange(X.nnz) if inverse is None else inverse
    x = X.data
    if B == 1:                  # one instance per task: a scalar per task (Sherman-Morrison)
        task = X.task_ids()
        c = weight[0]
        s = np.bincount(task, weights=x * x * inverse_A[entry], minlength=na)     # x^T A^-1 x
        t = np.bincount(task, weights=x * y[entry], minlength=na)                 # x^T y
        factor = c * t / (1.0 + c * s)
        out = np.zeros(len(y))
        np.add.at(out, entry, factor[task] * inverse_A[entry] * x)
        return out
    # every task's instances as a (pairs x B) block: S = X A^-1 X^T (na, B, B), X y (na, B)
    m = len(y)
    Xb = np.zeros((m, B))
    Xb[entry, X.row_ids() // na] = x
    S = np.zeros((na, B, B))
    np.add.at(S, tasks, (Xb * inverse_A[:, None])[:, :, None] * Xb[:, None, :])
    t = np.zeros((na, B))
    np.add.at(t, tasks, Xb * y[:, None])
    C = weight.T                                                                # (na, B)
    z = np.linalg.solve(np.eye(B) + S * C[:, None, :], t[:, :, None])[:, :, 0]
    return inverse_A * np.einsum("mb,mb->m", Xb, (C * z)[tasks])


def older_checkpoint_r(arow_r, n_tasks: int, same_from) -> np.ndarray:
    """r for a checkpoint written before r was kept per task (it had one fixed r): ``arow_r``
    where its state means the same now (r == ``same_from``, or any r where ``same_from`` is
    None), else a UserError."""
    if arow_r is None or (same_from is not None and arow_r != same_from):
        raise UserError("--resume: the checkpoint was written by an older omtl-mpi, whose AROW "
                        "state means something else with this --arow-r; start the run afresh")
    return np.full(n_tasks, float(arow_r))


W_STEP_CLASSES = {"euclid": EuclidStep, "adagrad": AdagradStep, "arow": ArowStep}
# every class a w-step may be (the arow w-step is ArowDiagStep at large d)
STEP_CLASSES = (EuclidStep, AdagradStep, ArowStep, ArowDiagStep)


def make_w_step(params, n_tasks: int, dim: int):
    """The w-step object named by ``params.w_step`` for a block of ``n_tasks`` tasks (the
    arow w-step with the covariance :func:`arow_form` gives at ``dim``)."""
    if params.w_step == "arow" and arow_form(params.arow_covariance, dim) == "diagonal":
        return ArowDiagStep(params, n_tasks, dim)
    return W_STEP_CLASSES[params.w_step](params, n_tasks, dim)
