"""Adaptive sharing for the ADMM multi-task learners (``--experts``, the default): each task
predicts by a weighted vote of three experts, weighted by how few mistakes each has made on
all the tasks (docs/ALGORITHMS.md section 2.6 states exactly what each rank computes; why the
defaults are what they are: docs/GUIDE.md, *How the defaults were chosen*).

The experts of task k, each a linear model whose margin on x is computed before y is revealed:

* ``multi-task``: w_k, the ADMM model itself;
* ``shared``: u, the pattern shared by every task (near what pooling all tasks learns);
* ``related``: r_k = sum_j c_kj (u + v_j) / sum_j |c_kj|, the tasks' models weighted by their
  cosine similarity c_kj to task k's model u + v_k, sign included (:func:`related_models`):
  tasks that point the same way pool their evidence, anti-correlated ones count with a minus
  sign, unrelated ones hardly count.

Every task counts its experts' mistakes m_(k,e); the weights, the same for every task, are
``p_e proportional to pi_e exp(-eta_t M_e / K)`` with the prior pi = (0.99, 0.005, 0.005)
(:data:`PRIOR_FIRST`: the ADMM model first), M_e = sum_k m_(k,e) and
``eta_t = c sqrt(8 ln 3 / t)`` after t instances per task (c = :data:`STEP_MULTIPLE`); a task
predicts +1 when the experts voting +1 have at least half the weight. That is the exponentially weighted
average forecaster on the per-round mistakes scaled by 1/K, whose expected regret, and so half
the weighted majority's mistakes, the guarantee in docs/ALGORITHMS.md section 2.6 bounds.

Where each piece is computed: the vote and the mistake counts on the rank holding the task; u
comes with every reply already; the related models and the sums M need every task, so C-ADMM's
server computes them (workers send their sums, 3 numbers) and returns each worker its rows and
M, and a D-ADMM node computes them from its gossiped table, whose rows carry every task's
m_(k,e). The ADMM updates are not changed: the vote only decides what is predicted.
"""
from __future__ import annotations

import math

import numpy as np

EXPERTS = ("multi-task", "shared", "related")
# the prior weight of the first expert, the ADMM model (the others share the rest): it is
# trusted until the others have shown fewer mistakes
PRIOR_FIRST = 0.99
# c, the vote's step eta_t as a multiple of the anytime step sqrt(8 ln N / t): both chosen on the selection sets
# (docs/GUIDE.md, *How the defaults were chosen*)
STEP_MULTIPLE = 16.0


def related_models(u: np.ndarray, V: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Every task's ``related`` expert: ``r_k = sum_j c_kj a_j / sum_j |c_kj|``, a_j = u + v_j.

    Parameters
    ----------
    u : ndarray, shape (d,)
    V : ndarray, shape (K, d)
    out : ndarray, shape (K, d), optional
        Where to write the result.

    Returns
    -------
    ndarray, shape (K, d)
        ``c_kj`` is the cosine of a_k and a_j (c_kk = 1; 0 against a zero model), so a task
        whose model is still zero gets its own (zero) model.
    """
    A = V + u
    G = A @ A.T
    norms = np.sqrt(G.diagonal())
    norms[norms == 0.0] = 1.0
    c = G / np.outer(norms, norms)
    c.flat[:: len(c) + 1] = 1.0
    out = np.matmul(c, A, out=out)
    out /= np.abs(c).sum(axis=1)[:, None]
    return out


class ExpertVote:
    """The vote of a block of ``n_tasks`` tasks, with weights shared by every task of the run.

    Each task's experts' mistakes are counted here; the weights come from their sums over every
    task of the run (:attr:`totals`), which the consensus step returns (:meth:`partial` is this
    block's share of them).

    Parameters
    ----------
    n_tasks, dim : int
        This block's tasks, and the weights of each task's model.
    total_tasks : int
        Every task of the run (K): the sums are divided by it.

    Notes
    -----
    The experts are :data:`EXPERTS`, in that order; the first is the ADMM model, with the prior
    weight :data:`PRIOR_FIRST`, and the others share the rest equally.
    """

    # the axis of the tasks in each per-task array of state() (contract.merge_states); the
    # totals and steps are the same in every block of a run
    TASK_AXIS = {"mistakes": 1, "models": 1}

    def __init__(self, n_tasks: int, dim: int, total_tasks: int):
        n_experts = len(EXPERTS)
        self._rate = 8.0 * math.log(n_experts) * STEP_MULTIPLE ** 2    # eta_t^2 t
        rest = (1.0 - PRIOR_FIRST) / (n_experts - 1)
        self._log_prior = [math.log(p) for p in [PRIOR_FIRST] + [rest] * (n_experts - 1)]
        self.K = total_tasks
        self.mistakes = np.zeros((n_experts, n_tasks))     # m_{k,e} of this block, expert-major
        self.totals = np.zeros(n_experts)                  # M_e: summed over every task
        self.steps = 0.0                                   # t: instances per task so far
        # the experts' models, one (kb, d) slice each: w_k, u, r_k (set by the caller)
        self.models = np.zeros((n_experts, n_tasks, dim))
        self._q = self._unnormalised()
        self._votes = None                                 # this round's votes (experts, B, kb)

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

    def predict(self, X) -> np.ndarray:
        """The vote on a round's instances ``X`` (B, kb, d), with :attr:`models` as they are:
        True for +1, shape (B, kb)."""
        votes = np.vecdot(self.models[:, None], X) >= 0.0          # (experts, B, kb)
        self._votes = votes
        # at least half the weight predicts +1: sum of the weights, +1 for +1 and -1 for -1, >= 0
        return np.where(votes, self._q, -self._q).sum(axis=0) >= 0.0

    def decide(self, X, first: np.ndarray) -> np.ndarray:
        """The vote's decision values (B, kb) on ``X`` (B, kb, d) with ``first`` (kb, d) as
        the first expert's model and the others' :attr:`models` as they are, changing nothing:
        ``decide(X, W) >= 0`` is what :meth:`predict` returns once ``models[0]`` is W.

        The weighted vote sum of :meth:`predict`, by the same numpy expressions, so that a tie
        (a sum of exactly 0) falls the same way.
        """
        models = self.models.copy()
        models[0] = first
        votes = np.vecdot(models[:, None], X) >= 0.0
        return np.where(votes, self._q, -self._q).sum(axis=0)

    def update(self, y) -> None:
        """Count each expert's mistakes on the round just predicted (labels ``y``, (B, kb), 0
        for padding)."""
        wrong = self._votes != (y > 0.0)
        wrong &= y != 0.0
        self.mistakes += wrong[:, 0] if y.shape[0] == 1 else wrong.sum(axis=1)
        self.steps += y.shape[0]

    def partial(self) -> np.ndarray:
        """This block's part of :attr:`totals`: its tasks' mistakes so far, per expert."""
        return self.mistakes.sum(axis=1)

    def set_totals(self, totals) -> None:
        """Every task's mistakes so far, per expert (the sum of every block's :meth:`partial`,
        in block order): the weights of the next round."""
        self.totals[...] = totals
        self._q = self._unnormalised()

    def state(self) -> dict:
        return {"mistakes": self.mistakes.copy(), "totals": self.totals.copy(),
                "steps": np.float64(self.steps), "models": self.models.copy()}

    def load_state(self, state: dict) -> None:
        self.mistakes = np.array(state["mistakes"], dtype=np.float64)
        self.steps = float(state["steps"])
        self.models[...] = state["models"]
        self.set_totals(np.array(state["totals"], dtype=np.float64))
