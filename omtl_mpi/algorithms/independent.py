"""Learners with no communication at all: every task alone (docs/ALGORITHMS.md section 5).

* ``admm-single`` - the C-ADMM math with K = 1 for every task (its own u, no Omega, no lambda4
  term): the paper's ADMM-Single baseline and the ablation's "Indpt" column.
* ``pa`` - independent Passive-Aggressive PA-I (Crammer et al. 2006);
* ``adagrad`` - independent diagonal AdaGrad on the hinge loss (Duchi et al. 2011);
* ``arow`` - independent full-covariance AROW (Crammer, Kulesza & Dredze 2009).

All hold a contiguous block of tasks per rank and are vectorised over it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from ..errors import ConfigError
from ..data.sparse import SparseRows, margins as margins_of, rows_dense
from .admm import ALONE, AdmmParams, BlockRole, TaskBlock, fixed_fields
from .contract import ArrayState, QuietNode
from .losses import gradient_coef, predict
from .params import Settled, require_positive
from .wsteps import (AROW_DIAGONAL_ABOVE, AROW_FULL_MAX, COVARIANCES, arow_form, inverse_rank_one,
                     older_checkpoint_r, put, rows, settle_r)


class _SingleTaskNode(ArrayState, QuietNode):
    """A learner that keeps per-task arrays only (named in ``_STATE``, W first, each with the
    tasks on axis 0, set by the subclass's ``__init__`` beside W and ``p``, the parameters),
    which predicts from the margins of W: it gets ``TASK_AXIS`` (axis 0 for each, unless it sets
    its own) and :meth:`decide`."""

    _STATE: tuple = ("W",)
    TASK_AXIS = {"W": 0}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # per-task arrays only: each is split by task on its first axis
        if "TASK_AXIS" not in vars(cls):
            cls.TASK_AXIS = {k: 0 for k in cls._STATE}
        cls.ROW_AXES = {k: 0 for k in cls._STATE}       # its state's keys are its attributes (.undo)

    def __init__(self, params, n_tasks: int, dim: int, start: int, stop: int,
                 topology=None, node: int = 0):
        self.p = params
        self.W = np.zeros((stop - start, dim))

    def decide(self, X, active=slice(None)) -> np.ndarray:
        """The margins ``w_k . x`` (B, na) of ``X`` (B, na, d), instances of the block's tasks
        ``active``, changing nothing: the call with which the subclasses' ``local_step``
        predicts (a subclass that predicts otherwise overrides this)."""
        return margins_of(self.W[active], X)

    def checked(self, rows=None) -> list:
        """The arrays of the tasks ``rows`` (None: all), to be finite, without copying the rest."""
        rows = slice(None) if rows is None else rows
        return [getattr(self, k)[rows] for k in self._STATE]

    def task_rows(self) -> dict:
        return {"W": self.W}


class AdmmSingleNode(BlockRole, QuietNode):
    """Each task of the block runs C-ADMM alone: u_k and v_k from its own c_k (K = 1), in
    closed form (docs/ALGORITHMS.md section 5; :class:`.admm.TaskBlock`'s ALONE mode)."""

    # every task has its own u
    TASK_AXIS = TaskBlock.task_axis(ALONE)

    def __init__(self, params: AdmmParams, n_tasks: int, dim: int, start: int, stop: int,
                 topology=None, node: int = 0):
        self.p = params
        self.block = TaskBlock(params, stop - start, dim, mode=ALONE)

    def local_step(self, X, y, inv_count, active=slice(None)) -> np.ndarray:
        yhat = self.block.predict_and_step(X, y, inv_count, active)
        self.block.dual_step(None)
        return yhat

    def decide(self, X, active=slice(None)) -> np.ndarray:
        """The margins (B, na) :meth:`local_step` predicts from, changing nothing."""
        return self.block.decide(X, active)

    def task_rows(self) -> dict:
        return self.block.task_rows()


@dataclass(frozen=True)
class PaParams(Settled):
    """PA-I: ``tau = min(C, hinge loss / |x|^2)``, ``w += tau y x``. Default C = 1."""

    C: float = field(default=1.0, metadata={"help": "Aggressiveness C of PA-I (> 0)."})

    def __post_init__(self):
        require_positive("C", self.C)


class PaNode(_SingleTaskNode):
    """Independent PA-I for every task of the block; a mini-batch takes the mean of the
    per-instance PA steps, all computed at the same w."""

    def local_step(self, X, y, inv_count, active=slice(None)) -> np.ndarray:
        W = rows(self.W, active)
        sparse = isinstance(X, SparseRows)
        margins = margins_of(W, X)
        yhat = predict(margins)
        loss = np.maximum(0.0, 1.0 - y * margins) * (y != 0)
        sq = X.sq_norms() if sparse else np.einsum("bkd,bkd->bk", X, X)
        tau = np.minimum(self.p.C, np.divide(loss, sq, out=np.zeros_like(loss), where=sq > 0))
        if sparse:          # only the instances' coordinates move
            X.add_to(W, tau * y, inv_count)
        else:
            W += np.einsum("bk,bkd->kd", tau * y, X) * inv_count[:, None]
        put(self.W, active, W)
        return yhat


@dataclass(frozen=True)
class SingleParams(AdmmParams):
    """C-ADMM's hyper-parameters for tasks learned alone; lambda4 and Omega do not apply."""

    lambda4: float = 0.0
    relationship: bool = False
    experts: bool = False           # no shared model to vote with: each task is alone
    # what this learner fixes: --preset leaves them, and setting them otherwise is an error
    FIXED_FIELDS = ("lambda4", "relationship", "experts")
    FIXED_FIELDS_WHY = "admm-single learns each task alone"

    def __post_init__(self):
        super().__post_init__()
        fixed_fields(self)

    def resolved(self, rounds: int) -> AdmmParams:
        return AdmmParams(**{**asdict(super().resolved(rounds)), "lambda4": 0.0,
                             "relationship": False, "experts": False})


@dataclass(frozen=True)
class AdagradParams(Settled):
    """Diagonal AdaGrad on the hinge loss: ``w -= gamma0 g / sqrt(delta + sum of g^2)``."""

    gamma0: float = field(default=1.0, metadata={
        "help": "Step size, the same every round: the accumulator alone shrinks the steps (> 0)."})
    delta: float = field(default=1.0, metadata={
        "help": "Initial value of the accumulator of squared gradients, which keeps the first "
                "steps finite (> 0)."})

    def __post_init__(self):
        require_positive("gamma0", self.gamma0)
        require_positive("delta", self.delta)


class AdagradNode(_SingleTaskNode):
    """Independent diagonal AdaGrad (Duchi, Hazan & Singer 2011) per task; a mini-batch takes
    the mean gradient, as the ADMM learners do."""

    _STATE = ("W", "S")

    def __init__(self, params: AdagradParams, n_tasks: int, dim: int, start: int, stop: int,
                 topology=None, node: int = 0):
        super().__init__(params, n_tasks, dim, start, stop)
        self.S = np.zeros((stop - start, dim))

    def local_step(self, X, y, inv_count, active=slice(None)) -> np.ndarray:
        if isinstance(X, SparseRows):
            return self._sparse_step(X, y, inv_count, active)
        W, S = rows(self.W, active), rows(self.S, active)
        margins = np.einsum("kd,bkd->bk", W, X)
        yhat = predict(margins)
        G = np.einsum("bk,bkd->kd", gradient_coef("hinge", y, margins, yhat), X)
        if X.shape[0] > 1:
            G *= inv_count[:, None]
        S += G * G
        W -= self.p.gamma0 * G / np.sqrt(self.p.delta + S)
        put(self.W, active, W)
        put(self.S, active, S)
        return yhat

    def _sparse_step(self, X: SparseRows, y, inv_count, active) -> np.ndarray:
        """:meth:`local_step` on sparse instances: the gradient is zero off their coordinates,
        where nothing moves, so only their (task, coordinate) pairs are touched."""
        act = np.arange(len(self.W)) if isinstance(active, slice) else np.asarray(active)
        margins = X.margins(self.W, act)
        yhat = predict(margins)
        coef = gradient_coef("hinge", y, margins, yhat)
        tasks, cols, inverse = X.pairs()
        G = X.pair_sums(X.data * coef.reshape(-1)[X.row_ids()], inverse)
        if X.shape[0] > 1:
            G *= inv_count[tasks]
        rows_ = act[tasks]
        S = self.S[rows_, cols] + G * G
        self.S[rows_, cols] = S
        self.W[rows_, cols] -= self.p.gamma0 * G / np.sqrt(self.p.delta + S)
        return yhat


# single-task AROW's r when none is given is this factor times the squared norm of the task's
# first nonzero instance (the mean over the nonzero instances of its first mini-batch that has
# one), in the diagonal form the second (docs/GUIDE.md, *How the defaults were chosen*)
AROW_R_PER_MEAN_SQ_NORM = 0.5
AROW_DIAGONAL_R_PER_MEAN_SQ_NORM = 2.0


@dataclass(frozen=True)
class ArowParams(Settled):
    """AROW's regularisation r (> 0): larger r, smaller and more cautious updates; None
    (auto): each task's own, at the scale of its features (wsteps.settle_r)."""

    arow_r: float | None = field(default=None, metadata={
        "help": "AROW's regularisation r (> 0): larger r, smaller and more cautious updates. "
                f"auto: each task's r is {AROW_R_PER_MEAN_SQ_NORM} times the squared norm of its "
                "first nonzero instance (with --batch B, the mean over the nonzero instances of "
                "its first mini-batch that has one), so that r follows the features' scale; "
                f"{AROW_DIAGONAL_R_PER_MEAN_SQ_NORM} times with the diagonal covariance "
                "(docs/GUIDE.md, How the defaults were chosen).", "none_text": "auto"})
    arow_covariance: str = field(default="auto", metadata={
        "help": "AROW's covariance: the full d x d matrix per task, or its diagonal (d numbers "
                "per task, O(non-zeros) per instance). auto: full up to d = "
                f"{AROW_DIAGONAL_ABOVE}, diagonal above; full is refused above d = "
                f"{AROW_FULL_MAX}.", "choices": COVARIANCES})

    def __post_init__(self):
        if self.arow_r is not None:
            require_positive("arow_r", self.arow_r)
        if self.arow_covariance not in COVARIANCES:
            raise ConfigError(f"--arow-covariance must be one of {', '.join(COVARIANCES)}, got "
                              f"{self.arow_covariance!r}")


class ArowNode(_SingleTaskNode):
    """Independent AROW (Crammer, Kulesza & Dredze 2009) per task, full covariance, or its
    diagonal (``arow_covariance``, :func:`.wsteps.arow_form`), whose step is the ADMM learners'
    diagonal arow w-step without the consensus terms (docs/ALGORITHMS.md section 5). A
    mini-batch's predictions are all made first; its instances then update the model one after
    another. r is per task: ``arow_r``, or each task's own (:func:`.wsteps.settle_r`).
    """

    _STATE = ("W", "Sigma", "r")

    def __init__(self, params: ArowParams, n_tasks: int, dim: int, start: int, stop: int,
                 topology=None, node: int = 0):
        super().__init__(params, n_tasks, dim, start, stop)
        kb = stop - start
        self.diagonal = arow_form(params.arow_covariance, dim) == "diagonal"
        self._r_per_sq_norm = (AROW_DIAGONAL_R_PER_MEAN_SQ_NORM if self.diagonal
                               else AROW_R_PER_MEAN_SQ_NORM)
        if self.diagonal:
            self.Sigma = np.ones((kb, dim))
        else:
            self.Sigma = np.zeros((kb, dim, dim))
            self.Sigma[:, np.arange(dim), np.arange(dim)] = 1.0
        self.r = np.full(kb, 0.0 if params.arow_r is None else float(params.arow_r))
        self._unsettled = int(np.count_nonzero(self.r == 0.0))     # tasks whose r is not known

    def load_state(self, state: dict) -> None:
        if "r" not in state:            # an older checkpoint: AROW's Sigma means the same
            state = {**state, "r": older_checkpoint_r(self.p.arow_r, len(state["W"]), None)}
        super().load_state(state)
        self._unsettled = int(np.count_nonzero(self.r == 0.0))

    def local_step(self, X, y, inv_count, active=slice(None)) -> np.ndarray:
        if self._unsettled:
            r = rows(self.r, active)
            self._unsettled -= int(np.count_nonzero(settle_r(r, X, self._r_per_sq_norm)))
            put(self.r, active, r)
        r = self.r[active]
        if self.diagonal:
            return self._diagonal_step(X, y, r, active)
        X = rows_dense(X)           # the full covariance is for small d
        W = rows(self.W, active)
        margins = np.einsum("kd,bkd->bk", W, X)
        yhat = predict(margins)
        for b in range(X.shape[0]):
            m = margins[0] if b == 0 else np.einsum("kd,kd->k", W, X[b])
            yb = np.asarray(y[b], dtype=np.float64)
            # covariance updates are rank one per task (no batched BLAS for them); a task whose
            # r is not known yet has seen only zero instances, whose update is nothing
            for i in np.nonzero((yb != 0) & (yb * m < 1.0) & (r > 0.0))[0]:
                k = i if isinstance(active, slice) else active[i]
                sx, v = inverse_rank_one(self.Sigma[k], X[b, i], 1.0 / r[i])
                W[i] += ((1.0 - yb[i] * m[i]) / (v + r[i]) * yb[i]) * sx
        put(self.W, active, W)
        return yhat

    def decide(self, X, active=slice(None)) -> np.ndarray:
        """The margins (B, na) :meth:`local_step` predicts from, changing nothing (the
        diagonal covariance takes every instance as sparse rows, as its step does)."""
        if not self.diagonal:
            return super().decide(X, active)
        act = np.arange(len(self.W)) if isinstance(active, slice) else np.asarray(active)
        return (X if isinstance(X, SparseRows) else SparseRows.from_dense(X)).margins(self.W, act)

    def _diagonal_step(self, X, y, r, active) -> np.ndarray:
        """The diagonal covariance's round: every instance's margin first, then its update, one
        instance of each task after another, on the instance's non-zero coordinates only."""
        act = np.arange(len(self.W)) if isinstance(active, slice) else np.asarray(active)
        X = X if isinstance(X, SparseRows) else SparseRows.from_dense(X)
        B, na, _ = X.shape
        margins = X.margins(self.W, act)
        yhat = predict(margins)
        # a task whose r is not known yet (only zero instances so far) takes no step; 1 stands
        # in for its r in beta, which it never uses, to keep 1 / 0 out
        known = np.where(r > 0.0, r, 1.0)
        for b in range(B):
            ptr = X.indptr[b * na: (b + 1) * na + 1]
            a, e = int(ptr[0]), int(ptr[-1])
            task = act[X.task_ids()[a:e]]
            cols, x = X.indices[a:e], X.data[a:e]
            row = X.row_ids()[a:e] - b * na
            m = margins[0] if b == 0 else np.bincount(
                row, weights=x * self.W[task, cols], minlength=na)
            yb = np.asarray(y[b], dtype=np.float64)
            wrong = (yb != 0) & (yb * m < 1.0) & (r > 0.0)
            keep = wrong[row]
            if not keep.any():
                continue
            task, cols, x, row = task[keep], cols[keep], x[keep], row[keep]
            sigma = self.Sigma[task, cols]
            sx = sigma * x
            beta = 1.0 / (np.bincount(row, weights=sx * x, minlength=na) + known)  # (x^T Sigma x + r)^-1
            self.W[task, cols] += ((1.0 - yb * m) * yb * beta)[row] * sx
            self.Sigma[task, cols] = 1.0 / (1.0 / sigma + x * x / r[row])
        return yhat
