"""AROW's r at the features' scale: step 3 of the defaults protocol (experiments/PROTOCOL.md), on
its nine selection sets.

    python experiments/scale.py [--data-dir results/data] [--seeds 0 1 2]

AROW's precision grows by x x^T / r at every margin error, from the identity: how much the prior
weighs against one instance depends on |x|^2, so a fixed r is not scale-free (scaling x by s
asks for r times s^2). Step 1 fixed r = 1 (and the w-step's eta = 1). The candidates set
r = c m_k per task k, with m_k a mean squared norm of the task's instances, which makes AROW
scale-free; the w-step's metric is D_t = r I + sum x x^T, so that eta = 1 keeps its step AROW's
(docs/ALGORITHMS.md section 2.1):

* ``first``: m_k is the squared norm of the task's first instance (the mean of its first
  mini-batch), fixed from then on: nothing to redo, ever;
* ``running``: m_k is the mean over the task's instances so far, refreshed whenever the task's
  count of instances reaches a power of two; the ADMM w-step then rescales its stored
  inverse, M <- (I + eta (r' - r) M)^-1 M (one d x d solve per task, log2 T times in a run), and
  single-task AROW, whose r enters each update separately, uses the current mean at every update;

for c in 0.05, 0.1, 0.2, 0.5, 1, against step 1's fixed r = 1. Each runs in C-ADMM with the
defaults otherwise (vote, lambdas of step 2), and in single-task AROW, whose default is chosen
by the same rule. Prints two Markdown tables of mean final cumulative errors over the seeds,
with the means over the sets of the balanced error and F1, and the spread of the candidate's
mean error over the seeds (max - min of the per-seed means over the sets).
"""
from __future__ import annotations

import numpy as np

from selection import Tally, admm_scores, arguments, print_header, selection_sets, stream

from omtl_mpi.algorithms import wsteps
from omtl_mpi.algorithms.admm import AdmmParams
from omtl_mpi.algorithms.independent import AROW_R_PER_MEAN_SQ_NORM, ArowNode, ArowParams

FACTORS = (0.05, 0.1, 0.2, 0.5, 1.0)


def passed_power_of_two(count: np.ndarray, before: np.ndarray) -> np.ndarray:
    """Tasks whose count of instances passed a power of two (2, 4, 8, ...) this round."""
    return np.floor(np.log2(np.maximum(count, 1))) > np.floor(np.log2(np.maximum(before, 1)))


class FirstArowStep(wsteps.ArowStep):
    """The library's arow w-step with r = ``factor`` times the mean squared norm of the task's
    first instances (``first``), where the library takes AROW_W_STEP_R_PER_MEAN_SQ_NORM."""

    factor = wsteps.AROW_W_STEP_R_PER_MEAN_SQ_NORM

    def step(self, W, D, X, coef, inv_count):
        # r settled here with this candidate's factor: the library's own settle_r, which comes
        # next on the same X, then finds every task it could set already set
        if not self._settled:
            self._start_metric(wsteps.settle_r(self.r, X, self.factor))
            self._settled = bool(self.r.all())
        return super().step(W, D, X, coef, inv_count)


class RunningArowStep(FirstArowStep):
    """:class:`FirstArowStep`, with r refreshed to ``factor`` times the mean squared norm of all
    the task's instances so far whenever their count passes a power of two (``running``):
    M <- (I + eta (r' - r) M)^-1 M."""

    def __init__(self, params, n_tasks, dim):
        super().__init__(params, n_tasks, dim)
        self.count, self.squares = np.zeros((2, n_tasks))

    def step(self, W, D, X, coef, inv_count):
        before = self.count.copy()
        self.count += np.any(X != 0.0, axis=-1).sum(axis=0)
        self.squares += np.einsum("bkd,bkd->k", X, X)
        eye = np.eye(X.shape[-1])
        # a task's first r is FirstArowStep's (r still 0 here)
        for k in np.nonzero(passed_power_of_two(self.count, before) & (self.r > 0.0))[0]:
            r = self.factor * self.squares[k] / self.count[k]
            self.M[k] = np.linalg.solve(eye + self.p.eta * (r - self.r[k]) * self.M[k], self.M[k])
            self.r[k] = r
        return super().step(W, D, X, coef, inv_count)


class FirstArow(ArowNode):
    """The library's single-task AROW with r = ``factor`` times the mean squared norm of the
    task's first instances (``first``), where the library takes AROW_R_PER_MEAN_SQ_NORM."""

    factor = AROW_R_PER_MEAN_SQ_NORM

    def local_step(self, X, y, inv_count):
        # as FirstArowStep.step: the library's settle_r that follows finds nothing left to set
        if not self._settled:
            wsteps.settle_r(self.r, X, self.factor)
            self._settled = bool(self.r.all())
        return super().local_step(X, y, inv_count)


class RunningArow(FirstArow):
    """Single-task AROW with r = ``factor`` times the mean squared norm of the task's instances
    so far, at every update (one instance per task per round, as these streams are)."""

    def __init__(self, params, n_tasks, dim, start, stop, topology=None, node=0):
        super().__init__(params, n_tasks, dim, start, stop, topology, node)
        self.count, self.squares = np.zeros((2, stop - start))

    def local_step(self, X, y, inv_count):
        assert X.shape[0] == 1
        real = y[0] != 0
        self.count += real
        self.squares += np.where(real, np.einsum("kd,kd->k", X[0], X[0]), 0.0)
        seen = self.count > 0
        self.r[seen] = self.factor * self.squares[seen] / self.count[seen]
        return super().local_step(X, y, inv_count)


def admm(path, seed, factor, mode):
    data = stream(path, seed)
    if mode is None:
        return admm_scores(data, AdmmParams(arow_r=1.0).resolved(data.rounds))
    base = FirstArowStep if mode == "first" else RunningArowStep
    # the block builds its w-step from the library's table: the candidate takes arow's place
    saved = wsteps.W_STEP_CLASSES["arow"]
    wsteps.W_STEP_CLASSES["arow"] = type("Candidate", (base,), {"factor": factor})
    try:
        return admm_scores(data, AdmmParams().resolved(data.rounds))
    finally:
        wsteps.W_STEP_CLASSES["arow"] = saved


def single(path, seed, factor, mode):
    data = stream(path, seed)
    K, d = data.n_tasks, data.X.shape[-1]
    if mode is None:
        node = ArowNode(ArowParams(arow_r=1.0), K, d, 0, K)
    else:
        node = (FirstArow if mode == "first" else RunningArow)(ArowParams(), K, d, 0, K)
        node.factor = factor
    tally = Tally(K)
    for t in range(data.rounds):
        X, y, inv_count = data[t]
        tally.add(node.local_step(X, y, inv_count)[0] > 0, y[0])
    return tally.scores()


CANDIDATES = [("r = 1 (step 1)", None, None)] + [
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
