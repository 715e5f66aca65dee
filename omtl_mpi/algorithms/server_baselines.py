"""Server-pattern baselines (docs/ALGORITHMS.md section 5): PMSC-Log, DROM, the multitask
perceptron, pooled: workers of contiguous task blocks exchange flat float64 messages with a
server on rank 0 (DROM only every ``tau`` rounds, ``sync_every``).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from ..data.sparse import SparseRows, combine, margins as margins_of
from ..errors import ConfigError
from .admm import AdmmParams, DivergenceError, fixed_fields
from .contract import ArrayState, QuietServer
from .losses import gradient_coef, predict
from .params import Settled, require_positive


# ----------------------------------------------------------------------------- PMSC-Log
@dataclass(frozen=True)
class PmscLogParams(AdmmParams):
    """PMSC-Log (Wu & Huang 2016) as reconstructed in docs/ALGORITHMS.md section 5: C-ADMM with
    the fields of ``FIXED_FIELDS`` fixed (setting them otherwise is refused), by default the
    Euclidean w-step and the paper's rho, eta and lambda1-3; the ADMM learners' other options
    can be set as for C-ADMM."""

    loss: str = "logistic"
    lambda4: float = 0.0
    relationship: bool = False
    # the published method's settings, not C-ADMM's defaults
    w_step: str = "euclid"
    lambda1: float = 0.01
    lambda2: float = 0.1
    lambda3: float = 0.01
    experts: bool = False
    FIXED_FIELDS = ("variant", "loss", "lambda4", "relationship", "experts")
    FIXED_FIELDS_WHY = "pmsc-log is the published method, with Omega fixed at I/K"

    def __post_init__(self):
        super().__post_init__()
        fixed_fields(self)

    def resolved(self, rounds: int) -> AdmmParams:
        fixed = {"variant": "exact", "loss": "logistic", "lambda4": 0.0, "relationship": False,
                 "experts": False}
        return AdmmParams(**{**asdict(super().resolved(rounds)), **fixed})


# ----------------------------------------------------------------------------- DROM
@dataclass(frozen=True)
class DromParams(Settled):
    """DROM (Yang & Li, AAAI 2020) as reconstructed in docs/ALGORITHMS.md section 5; the
    defaults are ours."""

    gamma0: float = field(default=0.1, metadata={
        "help": "Initial step size of the workers' capped-hinge steps, gamma0/sqrt(t) (> 0)."})
    mu: float = field(default=0.01, metadata={"help": "Weight of the relationship term (>= 0)."})
    cap: float = field(default=2.0, metadata={"help": "Cap of the capped hinge loss (> 0)."})
    tau: int = field(default=1, metadata={"help": "Rounds between synchronisations with the server.",
                                          "metavar": "ROUNDS"})
    omega_eps: float = field(default=1e-2, metadata={
        "help": "Ridge eps added to Omega before inverting it (> 0): the Frank-Wolfe steps make "
                "Omega nearly rank one, so a smaller eps can leave nothing to invert."})

    def __post_init__(self):
        require_positive("gamma0", self.gamma0)
        require_positive("mu", self.mu, allow_zero=True)
        require_positive("cap", self.cap)
        require_positive("omega_eps", self.omega_eps)
        if not isinstance(self.tau, int) or self.tau < 1:
            raise ConfigError(f"--tau must be an integer >= 1 (rounds between synchronisations), got {self.tau!r}")


class DromWorker(ArrayState):
    """Capped-hinge subgradient steps with the relationship term from the last synchronisation:
    ``w_k <- w_k - gamma_t (g_k + mu [W Omega^-1]_{:,k})``."""

    TASK_AXIS = {"W": 0, "R": 0}
    _STATE, _COUNTS = ("W", "R"), ("round",)

    def __init__(self, params: DromParams, n_tasks: int, dim: int, start: int, stop: int):
        self.p, self.dim = params, dim
        self.sync_every = params.tau
        self.W = np.zeros((stop - start, dim))
        self.R = np.zeros((stop - start, dim))       # rows of (W Omega^-1)^T for our tasks
        self.round = 0

    @staticmethod
    def up_size(params, n_tasks, kb, dim):
        return kb * dim

    down_size = up_size             # the reply is as long as the message

    def up(self, X, y, inv_count, active=slice(None)):
        self.round += 1
        W = self.W[active]
        margins = margins_of(W, X)
        yhat = predict(margins)
        slack = 1.0 - y * margins
        coef = np.where((slack > 0) & (slack < self.p.cap), -y, 0.0)     # capped hinge
        G = combine(coef, X) * inv_count[:, None]
        # a task without an instance in the round takes no step (docs/ALGORITHMS.md section 1)
        self.W[active] = W - (self.p.gamma0 / math.sqrt(self.round)) * (G + self.p.mu * self.R[active])
        return yhat, self.W.reshape(-1)

    def decide(self, X, active=slice(None)):
        """The margins (B, na) :meth:`up` predicts from, changing nothing."""
        return margins_of(self.W[active], X)

    def down(self, msg):
        self.R[...] = msg.reshape(-1, self.dim)

    def task_rows(self):
        return {"W": self.W}


class DromServer(ArrayState, QuietServer):
    """Every tau rounds: one Frank-Wolfe step on Omega, then [W Omega^-1]_{:,k} to each worker."""

    _STATE, _COUNTS = ("omega",), ("steps",)

    def __init__(self, params: DromParams, n_tasks: int, dim: int, blocks):
        self.p, self.K, self.dim = params, n_tasks, dim
        self.sync_every = params.tau
        self.omega = np.eye(n_tasks) / n_tasks
        self.steps = 0

    def step(self, up_all):
        W = up_all.reshape(self.K, self.dim)          # rows = tasks (W^T in the paper's layout)
        # a large mu feeds W Omega^-1 back into W until it overflows: stop with a reason, not a
        # LinAlgError from eigh on infinities
        if not np.abs(W).max() < 1e100:
            raise DivergenceError(f"drom diverged by synchronisation {self.steps + 1} (|W| > 1e100): "
                                  f"the relationship term mu = {self.p.mu} W Omega^-1 outgrows the "
                                  "loss; lower --mu or --gamma0")
        inv = self._inverse()
        grad = inv @ (W @ W.T) @ inv                   # Omega^-1 W^T W Omega^-1 (K x K)
        _, vecs = np.linalg.eigh((grad + grad.T) / 2.0)
        q = vecs[:, -1]
        beta = 2.0 / (self.steps + 2.0)
        self.omega = (1.0 - beta) * self.omega + beta * np.outer(q, q)
        self.steps += 1
        return (self._inverse() @ W).reshape(-1)       # row k = [W Omega^-1]_{:,k}

    def _inverse(self) -> np.ndarray:
        """``(Omega + eps I)^-1``; Frank-Wolfe makes Omega nearly rank one, so a tiny eps can
        leave nothing to invert."""
        A = self.omega + self.p.omega_eps * np.eye(self.K)
        try:
            inv = np.linalg.inv(A)
            # singular to working precision though LAPACK met no zero pivot (its 1-norm
            # condition number, exact from the inverse): the inverse is noise
            if not np.abs(A).sum(axis=0).max() * np.abs(inv).sum(axis=0).max() < 1.0 / np.finfo(float).eps:
                raise np.linalg.LinAlgError
            return inv
        except np.linalg.LinAlgError:
            raise DivergenceError(f"drom: Omega + eps I is singular at synchronisation "
                                  f"{self.steps + 1} (--omega-eps {self.p.omega_eps} is too small "
                                  "for an Omega that is nearly rank one); raise --omega-eps "
                                  "(default 0.01)") from None

    def global_arrays(self):
        return {"omega": self.omega}


# ----------------------------------------------------------------------------- multitask perceptron
@dataclass(frozen=True)
class NoParams(Settled):
    """This learner has no hyper-parameters."""


class MtPerceptronWorker(ArrayState):
    """Cavallanti, Cesa-Bianchi & Gentile 2010, fully connected interaction (docs/ALGORITHMS.md
    section 5): w_j = (S + O_j) / (K + 1), with S the sum of every mistake's y x over all tasks
    and O_j that of task j's own, so that workers send the sum of their round's mistakes' y x
    (d numbers) and a round touches only the tasks with an instance in it."""

    TASK_AXIS = {"O": 0}
    ROW_AXES = TASK_AXIS        # its state's keys are its attributes (.undo)
    _STATE = ("O", "S")

    def __init__(self, params, n_tasks, dim, start, stop):
        self.dim = dim
        self.S = np.zeros(dim)                       # every mistake's y x, all tasks
        self.O = np.zeros((stop - start, dim))       # each task's own mistakes' y x
        self.K = n_tasks
        self._delta = np.zeros(dim)

    @staticmethod
    def up_size(params, n_tasks, kb, dim):
        return dim

    down_size = up_size             # the reply is as long as the message

    def _models(self, active=slice(None)) -> np.ndarray:
        return (self.O[active] + self.S) / (self.K + 1)

    def up(self, X, y, inv_count, active=slice(None)):
        if isinstance(X, SparseRows):
            return self._sparse_up(X, y, active)
        margins = np.einsum("kd,bkd->bk", self._models(active), X)
        yhat = predict(margins)
        coef = gradient_coef("perceptron", y, margins, yhat)      # -y on a mistake
        own = -np.einsum("bk,bkd->kd", coef, X)
        self.O[active] += own
        self._delta = own.sum(axis=0)
        return yhat, self._delta

    def _sparse_margins(self, X: SparseRows, active) -> np.ndarray:
        """The margins of sparse instances, the models read at their coordinates only."""
        act = np.arange(len(self.O)) if isinstance(active, slice) else np.asarray(active)
        at = (self.O[act[X.task_ids()], X.indices] + self.S[X.indices]) / (self.K + 1)
        return X.row_sums(X.data * at).reshape(X.shape[:2]), act

    def _sparse_up(self, X: SparseRows, y, active):
        """:meth:`up` on sparse instances: a mistake adds to its coordinates only (the message,
        the sum over the block, is d numbers still)."""
        margins, act = self._sparse_margins(X, active)
        yhat = predict(margins)
        coef = gradient_coef("perceptron", y, margins, yhat)
        values = -(coef.reshape(-1)[X.row_ids()] * X.data)
        np.add.at(self.O, (act[X.task_ids()], X.indices), values)
        self._delta = np.zeros(self.dim)
        np.add.at(self._delta, X.indices, values)
        return yhat, self._delta

    def decide(self, X, active=slice(None)):
        """The margins (B, na) :meth:`up` predicts from, changing nothing."""
        if isinstance(X, SparseRows):
            return self._sparse_margins(X, active)[0]
        return np.einsum("kd,bkd->bk", self._models(active), X)

    def down(self, msg):
        self.S += msg

    def task_rows(self):
        return {"W": self._models()}


class SumServer(QuietServer):
    """Sums the workers' messages (in rank order) and sends the sum back to every worker: the
    server of the multitask perceptron and of the pooled model."""

    def __init__(self, params, n_tasks, dim, blocks):
        self.n_workers = len(blocks)

    def step(self, up_all):
        total = up_all.reshape(self.n_workers, -1).sum(axis=0)     # rank order, sequential
        return np.tile(total, self.n_workers)


# ----------------------------------------------------------------------------- pooled
@dataclass(frozen=True)
class PooledParams(Settled):
    """One model for all tasks, hinge OGD with step gamma0 / sqrt(t). Default gamma0 = 0.1."""

    gamma0: float = field(default=0.1, metadata={
        "help": "Initial step size of the one shared model's hinge steps, gamma0/sqrt(t) (> 0)."})

    def __post_init__(self):
        require_positive("gamma0", self.gamma0)


class PooledWorker(ArrayState):
    """Predicts every task with the one shared w; sends the sum of its round's gradients and
    their count."""

    # every array of its state is shared: the one w, the round
    TASK_AXIS: dict = {}
    _STATE, _COUNTS = ("w",), ("round",)

    def __init__(self, params: PooledParams, n_tasks, dim, start, stop):
        self.p, self.dim = params, dim
        self.w = np.zeros(dim)
        self.round = 0
        self.kb = stop - start
        self._msg = np.zeros(dim + 1)

    @staticmethod
    def up_size(params, n_tasks, kb, dim):
        return dim + 1

    down_size = up_size             # the reply is as long as the message

    def up(self, X, y, inv_count, active=slice(None)):
        self.round += 1
        sparse = isinstance(X, SparseRows)
        margins = X.dot(self.w) if sparse else X @ self.w
        yhat = predict(margins)
        coef = gradient_coef("hinge", y, margins, yhat)
        if sparse:
            self._msg[:-1] = 0.0
            np.add.at(self._msg, X.indices, coef.reshape(-1)[X.row_ids()] * X.data)
        else:
            self._msg[:-1] = np.einsum("bk,bkd->d", coef, X)
        self._msg[-1] = np.count_nonzero(y)
        return yhat, self._msg

    def decide(self, X, active=slice(None)):
        """The margins (B, na) :meth:`up` predicts from, changing nothing."""
        return X.dot(self.w) if isinstance(X, SparseRows) else X @ self.w

    def down(self, msg):
        n = max(msg[-1], 1.0)
        self.w = self.w - (self.p.gamma0 / math.sqrt(self.round)) * msg[:-1] / n

    def task_rows(self):
        return {"W": np.tile(self.w, (self.kb, 1))}
