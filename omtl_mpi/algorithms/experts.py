"""Adaptive sharing for the ADMM multi-task learners (``--experts``, the default): each task
predicts by a weighted vote of its experts (:data:`EXPERTS`: its multi-task model w_k, the shared
u and the related tasks' models r_k, :class:`Related`; with more tasks than features led by the
empirical-Bayes expert of :mod:`.bayes`), weighted by how few mistakes each has made on all the
tasks (:class:`ExpertVote`), so that the sharing follows how related the tasks are. The vote
only decides what is predicted: the ADMM updates are not changed.

docs/ALGORITHMS.md section 2.6 states what each rank computes, the weights and their
guarantee; why the defaults are what they are: docs/GUIDE.md, *How the defaults were chosen*.
"""
from __future__ import annotations

import math

import numpy as np

from . import bayes
from ..data.sparse import SparseRows

EXPERTS = ("multi-task", "shared", "related")
# the fourth expert, with more tasks than features: the empirical-Bayes model of bayes.py
BAYES = "bayes"
# from this many instances of a task on (before the round), the empirical-Bayes expert's margin
# for it is the task's multi-task model's: on a long stream the task's own model overtakes the
# posterior, and the vote's weights, shared by every task, would keep trusting the posterior;
# chosen on the selection sets (docs/GUIDE.md, *How the defaults were chosen*)
BAYES_HANDOVER = 256
# the prior weight of the first expert, the ADMM model (the others share the rest): it is
# trusted until the others have shown fewer mistakes
PRIOR_FIRST = 0.99
# c, the vote's step eta_t as a multiple of the anytime step sqrt(8 ln N / t): both chosen on
# the selection sets (docs/GUIDE.md, *How the defaults were chosen*)
STEP_MULTIPLE = 16.0
MOMENT, ROWS, MODELS = "moment", "rows", "models"


def vote_experts(n_tasks: int, dim: int, class_weight="none") -> tuple:
    """The experts of the vote of a run of ``n_tasks`` tasks with ``dim`` weights, in order
    (the first has the prior weight :data:`PRIOR_FIRST`): :data:`EXPERTS`, led by the
    empirical-Bayes expert where it is used (:func:`.bayes.used`; first, because a task with
    few instances is predicted best by it from its first round on: chosen on the selection
    sets, docs/GUIDE.md, *How the defaults were chosen*)."""
    return (BAYES,) + EXPERTS if bayes.used(n_tasks, dim, class_weight) else EXPERTS


def inverse_norms(W: np.ndarray) -> np.ndarray:
    """``1 / |w_k|`` for every row of W, 0 for a zero row (no division by zero, no NaN)."""
    norms = np.sqrt(np.vecdot(W, W))
    return 1.0 / np.where(norms > 0.0, norms, np.inf)


def directions(W: np.ndarray, inverse: np.ndarray | None = None) -> np.ndarray:
    """``w_k / |w_k|`` for every row of W (0 for a zero row); ``inverse`` is
    :func:`inverse_norms` of W where known."""
    return W * (inverse_norms(W) if inverse is None else inverse)[..., None]


def related_rows(W_hat: np.ndarray, W: np.ndarray, K: int, W_hat_all: np.ndarray | None = None) -> np.ndarray:
    """``r_k = (1/K) sum_j cos(w_k, w_j) w_j`` for the tasks whose directions are the rows of
    ``W_hat`` (n, d), from every task's model W (K, d) (``W_hat_all``: its directions, where
    known): the ``rows`` form, O(n K d)."""
    out = (W_hat @ (directions(W) if W_hat_all is None else W_hat_all).T) @ W
    out /= K
    return out


def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of a 1-D array, sorted (a sort and a comparison: cheaper than
    numpy.unique on the few thousand entries of a round)."""
    ordered = np.sort(values)
    keep = np.ones(len(ordered), dtype=bool)
    keep[1:] = ordered[1:] != ordered[:-1]
    return ordered[keep]


def gram_change(models: np.ndarray, gram: np.ndarray, tasks, cols, values) -> None:
    """Set ``models[cols, tasks] = values`` (entries of every task's model, kept by coordinate:
    ``models`` is d x K, each (task, coordinate) once) and update their Gram matrix ``gram``
    (K x K) in place for it, in O(K^2 m) for the m coordinates changed: G += N^T N - O^T O
    over those coordinates (their old and new values)."""
    if not len(values):
        return
    changed = distinct(cols)
    old = np.take(models, changed, axis=0)
    np.put(models, cols * models.shape[1] + tasks, values)
    new = np.take(models, changed, axis=0)
    gram += new.T @ new
    gram -= old.T @ old


def moment_change(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """The change of H = sum_j w_j w_j^T / |w_j| (d x d) when some tasks' models change from
    rows ``old`` to rows ``new`` (the tasks in the same order in both)."""
    change = moment(new)
    change -= moment(old)
    return change


def moment(W: np.ndarray, inverse: np.ndarray | None = None) -> np.ndarray:
    """The rows' part of H, ``sum_j w_j w_j^T / |w_j|`` (d x d): Y^T Y, Y the rows
    ``w_j / sqrt|w_j|``; ``inverse`` as in :func:`directions`."""
    y = W * np.sqrt(inverse_norms(W) if inverse is None else inverse)[..., None]
    return y.T @ y


class Related:
    """The related expert of a block of ``n_tasks`` tasks of a run of ``total_tasks``:
    ``r_k = (1/K) sum_j cos(w_k, w_j) w_j = H w_hat_k / K``, ``H = sum_j w_j w_j^T / |w_j|``.

    The same r_k up to rounding in three forms, the run's ``mode`` (docs/ALGORITHMS.md section
    2.6, *Computed through d x d sums*): ``moment``, the block holds H (d x d), for more tasks
    than features (:func:`moment_change`); ``rows``, its tasks' r_k (kb x d), computed where
    every task's model is known (:func:`related_rows`), for fewer; ``models``, every task's
    model (d x K) and its tasks' cosines (kb x K), for ``--coordinates nonzero``, whose rounds
    change a few entries of the models (:func:`gram_change`).
    """

    def __init__(self, n_tasks: int, dim: int, total_tasks: int, mode: str):
        self.K, self.mode = total_tasks, mode
        self.H = np.zeros((dim, dim)) if mode == MOMENT else None
        self.rows = np.zeros((n_tasks, dim)) if mode == ROWS else None
        # every task's model by coordinate (d x K): a round reads and writes a few coordinates
        # of every task, each coordinate's K numbers side by side
        self.all_models = np.zeros((dim, total_tasks)) if mode == MODELS else None
        self.cos = np.zeros((n_tasks, total_tasks)) if mode == MODELS else None

    def models(self, W: np.ndarray, active=slice(None), inverse=None) -> np.ndarray:
        """r_k (n, d) of the block's tasks ``active``, whose models are the rows of W (n, d)
        (``inverse``: :func:`inverse_norms` of W where known)."""
        if self.mode == ROWS:
            return self.rows[active]
        if self.mode == MODELS:
            out = self.cos[active] @ self.all_models.T
            out /= self.K
            return out
        out = directions(W, inverse) @ self.H           # H is symmetric
        out /= self.K
        return out

    def margins(self, W: np.ndarray, X: np.ndarray, active=slice(None), inverse=None) -> np.ndarray:
        """``r_k . x`` (B, n) of X (B, n, d), dense or sparse rows, for the block's tasks
        ``active``."""
        if self.mode == MODELS and isinstance(X, SparseRows):
            # every task's margin on each instance, then the cosine-weighted sum: O(K nnz)
            per_task = X.row_sums(np.take(self.all_models, X.indices, axis=0) * X.data[:, None])
            cos = self.cos[active][X.row_tasks()]                                   # (rows, K)
            out = np.vecdot(cos, per_task).reshape(X.shape[:2])
            out /= self.K
            return out
        models = self.models(W, active, inverse)
        return X.margins(models) if isinstance(X, SparseRows) else np.vecdot(models, X)

    def set_cosines(self, gram_rows: np.ndarray, gram_diag: np.ndarray, first: int) -> None:
        """The block's cosines (the ``models`` form) from its tasks' rows of the models' Gram
        matrix (kb x K) and its diagonal (K,), the block's tasks being ``first``,
        ``first + 1``, ...: c_kj = G_kj / (|w_k| |w_j|), 0 against a zero model."""
        inverse = 1.0 / np.where(gram_diag > 0.0, np.sqrt(gram_diag), np.inf)
        np.multiply(gram_rows, inverse, out=self.cos)
        self.cos *= inverse[first:first + len(self.cos), None]

    def _arrays(self) -> dict:
        """The arrays of this form, by their names in :meth:`state`."""
        if self.mode == MOMENT:
            return {"H": self.H}
        if self.mode == MODELS:
            return {"models": self.all_models, "cos": self.cos}
        return {"rows": self.rows}

    def state(self) -> dict:
        return {k: v.copy() for k, v in self._arrays().items()}

    def load_state(self, state: dict) -> None:
        for k, v in self._arrays().items():
            v[...] = state[k]


class ExpertVote:
    """The vote of ``n_experts`` experts (:func:`vote_experts`) of a block of ``n_tasks``
    tasks, with weights shared by every task of the run's ``total_tasks`` (K, which the sums
    are divided by): each task's experts' mistakes are counted here, the weights come from
    their sums over every task (:attr:`totals`), which the consensus step returns. The first
    expert has the prior weight :data:`PRIOR_FIRST`, the others share the rest equally."""

    # the axis of the tasks in each per-task array of state() (contract.merge_states); the
    # totals and steps are the same in every block of a run
    TASK_AXIS = {"mistakes": 1}
    ROW_AXES = {"mistakes": 1}  # the attributes of the task axes (.undo), and this round's
    NOT_STATE = ("_votes",)     # votes, which only its own update reads

    def __init__(self, n_tasks: int, total_tasks: int, n_experts: int = len(EXPERTS)):
        self._rate = 8.0 * math.log(n_experts) * STEP_MULTIPLE ** 2    # eta_t^2 t
        rest = (1.0 - PRIOR_FIRST) / (n_experts - 1)
        self._log_prior = [math.log(p) for p in [PRIOR_FIRST] + [rest] * (n_experts - 1)]
        self.K = total_tasks
        self.mistakes = np.zeros((n_experts, n_tasks))     # m_{k,e} of this block, expert-major
        self.totals = np.zeros(n_experts)                  # M_e: summed over every task
        self.steps = 0.0                                   # t: instances per task so far
        self._q = self._unnormalised()
        self._votes = None                                 # this round's votes (experts, B, na)

    def _unnormalised(self) -> np.ndarray:
        """``pi_e exp(-eta_t (M_e - min_f M_f) / K)``, (experts x 1 x 1): the weights up to their
        sum, which the vote does not need."""
        # three numbers: Python floats cost less than numpy calls on this per-round path
        totals = self.totals.tolist()
        low, scale = min(totals), math.sqrt(self._rate / max(self.steps, 1.0)) / self.K
        q = [math.exp(p - scale * (m - low)) for p, m in zip(self._log_prior, totals)]
        return np.array(q).reshape(-1, 1, 1)

    def weights(self) -> np.ndarray:
        """``p_e`` (experts,), summing to 1: the same for every task."""
        q = self._q[:, 0, 0]
        return q / q.sum()

    def decide(self, margins: np.ndarray) -> np.ndarray:
        """The weighted vote sum (B, n) of the experts' ``margins`` (experts, B, n): its sign
        (>= 0 for +1) is the vote, at least half the weight predicting +1."""
        return np.where(margins >= 0.0, self._q, -self._q).sum(axis=0)

    def predict(self, margins: np.ndarray) -> np.ndarray:
        """The vote on a round's instances from the experts' ``margins`` (experts, B, n): True
        for +1, shape (B, n); the experts' own predictions are kept for :meth:`update`."""
        self._votes = margins >= 0.0
        return np.where(self._votes, self._q, -self._q).sum(axis=0) >= 0.0

    def update(self, y, active) -> np.ndarray:
        """Count each expert's mistakes on the round just predicted (labels ``y`` (B, n), 0 for
        padding, of the block's tasks ``active``); returns the round's mistakes per expert
        (summed over those tasks: what the block adds to the totals)."""
        wrong = self._votes != (y > 0.0)
        wrong &= y != 0.0
        counts = wrong[:, 0] if y.shape[0] == 1 else wrong.sum(axis=1)     # (experts, n)
        self.mistakes[:, active] += counts
        self.steps += y.shape[0]
        return counts.sum(axis=1)

    def set_totals(self, totals) -> None:
        """Every task's mistakes so far, per expert (the sum over every block): the weights of
        the next round."""
        self.totals[...] = totals
        self._q = self._unnormalised()

    def state(self) -> dict:
        return {"mistakes": self.mistakes.copy(), "totals": self.totals.copy(),
                "steps": np.float64(self.steps)}

    def load_state(self, state: dict) -> None:
        self.mistakes = np.array(state["mistakes"], dtype=np.float64)
        self.steps = float(state["steps"])
        self.set_totals(np.array(state["totals"], dtype=np.float64))
