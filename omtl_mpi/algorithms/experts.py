"""Adaptive sharing for the ADMM multi-task learners (``--experts``, the default): each task
predicts by a weighted vote of four experts, weighted by how few mistakes each has made on it.

The experts of task k, each a linear model whose margin on x is computed before y is revealed:

* ``multi-task``: w_k, the ADMM model itself;
* ``shared``: u, the pattern shared by every task (near what pooling all tasks learns);
* ``single-task``: s_k, AROW on task k's stream alone (Crammer, Kulesza & Dredze 2009; the
  ``--algo arow`` learner, run beside the ADMM model on the same rank);
* ``related``: r_k = sum_j c_kj (u + v_j) / sum_j |c_kj|, the other tasks' models weighted by
  their cosine similarity c_kj to task k's model u + v_k, sign included (:func:`related_models`):
  tasks that point the same way pool their evidence, anti-correlated ones count with a minus
  sign, unrelated ones hardly count.

Each task keeps its experts' mistake counts m_{k,e} over the n_k instances it has seen and
predicts the sign (0 counts as +1) of the vote ``sum_e p_{k,e} sign(x . expert_e)`` with
``p_{k,e} proportional to exp(-eta_k m_{k,e})``, ``eta_k = sqrt(8 ln 4 / max(n_k, 1))``.
With these weights, the forecaster that follows expert e with probability p_{k,e} makes in
expectation at most ``min_e m_{k,e} + sqrt(2 n ln 4) + sqrt(ln 4 / 8)`` mistakes on a stream of
n instances (exponentially weighted average forecaster with the anytime step, Cesa-Bianchi and
Lugosi 2006, Theorem 2.3), and the weighted majority errs only where that forecaster errs with
probability at least 1/2, so its mistakes are at most twice that. The bound is per task and
makes no assumption on the data; the figures in docs/RESULTS.md ("quality") are measured.

Where each piece is computed: the vote, the mistake counts and the single-task AROW are local
to the rank holding the task; u is already sent to it every round; the related models need
every task's v_j, so C-ADMM's server computes them with (u, V) and sends each worker its rows
beside (u, V) (kb d more numbers per round), and a D-ADMM node computes them from its gossiped
table, which holds every v_j already. The ADMM updates themselves are not changed: the vote
only decides what is predicted. docs/SHARING.md has the measurements behind the choice.
"""
from __future__ import annotations

import math

import numpy as np

EXPERTS = ("multi-task", "shared", "related")


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
    """The vote of a block of ``n_tasks`` tasks, and each expert's mistakes on each task.

    Parameters
    ----------
    n_tasks, dim : int
    n_experts : int
        :data:`EXPERTS` by default (other numbers: the comparisons of scripts/sharing.py).
    """

    def __init__(self, n_tasks: int, dim: int, n_experts: int = len(EXPERTS)):
        self._rate = 8.0 * math.log(n_experts)            # eta_k^2 n_k
        self.mistakes = np.zeros((n_experts, n_tasks))     # m_{k,e}, expert-major
        self.seen = np.zeros(n_tasks)                      # n_k, real instances so far
        # the experts' models, one (kb, d) slice each: w_k, u, r_k (set by the caller)
        self.models = np.zeros((n_experts, n_tasks, dim))
        self._q = self._unnormalised()
        self._votes = None                                 # this round's votes (experts, B, kb)

    def _unnormalised(self) -> np.ndarray:
        """``exp(-eta_k (m_(k,e) - min_f m_(k,f)))``, (experts x 1 x kb): the weights up to
        their sum, which the vote does not need."""
        m = self.mistakes
        q = m - m.min(axis=0)
        q *= np.sqrt(self._rate / np.maximum(self.seen, 1.0))
        np.negative(q, out=q)
        return np.exp(q, out=q)[:, None, :]

    def weights(self) -> np.ndarray:
        """``p_{k,e}`` (experts x kb), each column summing to 1."""
        q = self._q[:, 0, :]
        return q / q.sum(axis=0)

    def predict(self, X) -> np.ndarray:
        """The vote on a round's instances ``X`` (B, kb, d), with :attr:`models` as they are:
        True for +1, shape (B, kb)."""
        votes = np.vecdot(self.models[:, None], X) >= 0.0          # (experts, B, kb)
        self._votes = votes
        # at least half the weight predicts +1: sum of the weights, +1 for +1 and -1 for -1, >= 0
        return np.where(votes, self._q, -self._q).sum(axis=0) >= 0.0

    def update(self, y) -> None:
        """Count each expert's mistakes on the round just predicted (labels ``y``, (B, kb), 0
        for padding), and the weights of the next round."""
        real = y != 0.0
        wrong = self._votes != (y > 0.0)
        wrong &= real
        if y.shape[0] == 1:             # one instance per task: no sums over the batch
            self.mistakes += wrong[:, 0]
            self.seen += real[0]
        else:
            self.mistakes += wrong.sum(axis=1)
            self.seen += real.sum(axis=0)
        self._q = self._unnormalised()

    def state(self) -> dict:
        return {"mistakes": self.mistakes.copy(), "seen": self.seen.copy(),
                "models": self.models.copy()}

    def load_state(self, state: dict) -> None:
        for key in ("mistakes", "seen"):
            setattr(self, key, np.array(state[key], dtype=np.float64))
        self.models[...] = state["models"]
        self._q = self._unnormalised()
