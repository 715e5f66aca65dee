"""AROW's r at the features' scale: stage 1c of docs/SHARING.md's protocol, on its nine
selection sets.

    python scripts/scale.py [--data-dir results/data] [--seeds 0 1 2]

AROW's precision grows by x x^T / r at every margin error, from the identity: how much the prior
weighs against one instance depends on |x|^2, so a fixed r is not scale-free (scaling x by s
asks for r times s^2). Stage 1 fixed r = 1 (and the w-step's eta = 1). The candidates set
r = c m_k per task k, with m_k a mean squared norm of the task's instances, which makes AROW
scale-free; the w-step's metric is D_t = r I + sum x x^T, so that eta = 1 keeps its step AROW's
(docs/WSTEP.md):

* ``first``: m_k is the squared norm of the task's first instance (the mean of its first
  mini-batch), fixed from then on: nothing to redo, ever;
* ``running``: m_k is the mean over the task's instances so far, refreshed whenever the task's
  count of instances reaches a power of two; the ADMM w-step then rescales its stored
  inverse, M <- (I + (a' - a) M)^-1 M (one d x d solve per task, log2 T times in a run), and
  single-task AROW, whose r enters each update separately, uses the current mean at every update;

for c in 0.05, 0.1, 0.2, 0.5, 1, against stage 1's fixed r = 1. Each runs in C-ADMM with the
defaults otherwise (vote, lambdas of stage 1b), and in single-task AROW, whose default is chosen
by the same rule. Prints two Markdown tables of mean final cumulative errors over the seeds,
with the means over the sets of the balanced error and F1, and the spread of the candidate's
mean error over the seeds (max - min of the per-seed means over the sets).
"""
from __future__ import annotations

import numpy as np

from selection import Tally, admm_scores, arguments, print_header, selection_sets, stream

from omtl_mpi.algorithms import wsteps
from omtl_mpi.algorithms.admm import AdmmParams
from omtl_mpi.algorithms.independent import ArowNode, ArowParams
from omtl_mpi.algorithms.wsteps import inverse_rank_one, settle_r

FACTORS = (0.05, 0.1, 0.2, 0.5, 1.0)


def refresh_due(count: np.ndarray, before: np.ndarray, mode: str) -> np.ndarray:
    """Tasks whose m is (re)computed this round: at the first instance, and for ``running``
    whenever the count of instances passes a power of two."""
    first = (before == 0) & (count > 0)
    if mode == "first":
        return first
    # a power of two in (before, count]
    return first | (np.floor(np.log2(np.maximum(count, 1))) > np.floor(np.log2(np.maximum(before, 1))))


class ScaledArowStep(wsteps.ArowStep):
    """The ADMM w-step with ``eta D_t + rho I = a_k I + sum x x^T + rho I``, a_k = c m_k."""

    factor, mode = 1.0, "first"

    def __init__(self, params, n_tasks, dim):
        super().__init__(params, n_tasks, dim)
        self.a, self.count, self.squares = np.zeros((3, n_tasks))

    def step(self, W, D, X, coef, inv_count):
        p, dim = self.p, X.shape[-1]
        real = np.any(X != 0.0, axis=-1)
        before = self.count.copy()
        self.count += real.sum(axis=0)
        self.squares += np.einsum("bkd,bkd->k", X, X)
        for k in np.nonzero(refresh_due(self.count, before, self.mode))[0]:
            a = self.factor * self.squares[k] / self.count[k]
            if self.a[k] == 0.0:
                self.M[k] = np.eye(dim) / (a + p.rho)
            else:   # (P + (a - a_k) I)^-1 = (I + (a - a_k) M)^-1 M
                self.M[k] = np.linalg.solve(np.eye(dim) + (a - self.a[k]) * self.M[k], self.M[k])
            self.a[k] = a
        for b, k in zip(*np.nonzero(coef)):         # eta / r = 1: the precision grows by x x^T
            inverse_rank_one(self.M[k], X[b, k], float(inv_count[k]))
        G = W * p.rho
        G -= self.R
        G -= D
        return W - np.matmul(self.M, G[:, :, None])[:, :, 0]


class ScaledArow(ArowNode):
    """Single-task AROW with r = c m_k at every update."""

    def __init__(self, n_tasks, dim, factor, mode):
        super().__init__(ArowParams(), n_tasks, dim)
        self.factor, self.mode = factor, mode
        self.r, self.count, self.squares = np.zeros((3, n_tasks))

    def local_step(self, X, y, inv_count):
        margins = np.einsum("kd,bkd->bk", self.W, X)
        yhat = np.where(margins >= 0.0, 1, -1)
        for b in range(X.shape[0]):
            m = margins[0] if b == 0 else np.einsum("kd,kd->k", self.W, X[b])
            yb = np.asarray(y[b], dtype=np.float64)
            if self.mode == "first":        # the library's rule: its first nonzero mini-batch
                settle_r(self.r, X, self.factor)
            else:
                self.count += yb != 0
                self.squares += np.where(yb != 0, np.einsum("kd,kd->k", X[b], X[b]), 0.0)
                due = self.count > 0
                self.r[due] = self.factor * self.squares[due] / self.count[due]
            for k in np.nonzero((yb != 0) & (yb * m < 1.0) & (self.r > 0))[0]:
                r = self.r[k]
                sx, v = inverse_rank_one(self.Sigma[k], X[b, k], 1.0 / r)
                self.W[k] += ((1.0 - yb[k] * m[k]) / (v + r) * yb[k]) * sx
        return yhat


def admm(path, seed, factor, mode):
    data = stream(path, seed)
    p = AdmmParams().resolved(data.rounds)
    if mode is None:
        return admm_scores(data, AdmmParams(arow_r=1.0, eta=1.0).resolved(data.rounds))
    ScaledArowStep.factor, ScaledArowStep.mode = factor, mode
    saved = wsteps.W_STEP_CLASSES["arow"]
    wsteps.W_STEP_CLASSES["arow"] = ScaledArowStep
    try:
        return admm_scores(data, p)
    finally:
        wsteps.W_STEP_CLASSES["arow"] = saved


def single(path, seed, factor, mode):
    data = stream(path, seed)
    K, d = data.n_tasks, data.X.shape[-1]
    node = (ArowNode(ArowParams(arow_r=1.0), K, d) if mode is None
            else ScaledArow(K, d, factor, mode))
    tally = Tally(K)
    for t in range(data.rounds):
        X, y, inv_count = data[t]
        tally.add(node.local_step(X, y, inv_count)[0] > 0, y[0])
    return tally.scores()


CANDIDATES = [("r = 1 (stage 1)", None, None)] + [
    (f"{c} m, {mode}", c, mode) for mode in ("first", "running") for c in FACTORS]


def main() -> None:
    args = arguments(__doc__)
    sets = selection_sets(args.data_dir)
    for learner, scores in (("C-ADMM", admm), ("single-task AROW", single)):
        print(f"\n{learner}:\n")
        print_header(["r"], sets, ("spread over seeds",))
        for name, factor, mode in CANDIDATES:
            runs = np.array([[scores(path, s, factor, mode) for s in args.seeds]
                             for _, path in sets])          # sets x seeds x 3
            per_set, per_seed = runs.mean(axis=1), runs[:, :, 0].mean(axis=0)
            means = per_set.mean(axis=0)
            print("| " + " | ".join([name] + [f"{v:.4f}" for v in per_set[:, 0]]
                                    + [f"{v:.4f}" for v in means])
                  + f" | {np.ptp(per_seed):.4f} |", flush=True)


if __name__ == "__main__":
    main()
