"""Which experts the default vote uses: step 4 of the defaults protocol (experiments/PROTOCOL.md),
on its selection sets (the known-answer test beds, the paper's synthetic family, Landmine, and
their unit-norm copies).

    python experiments/sharing.py [--data-dir results/data] [--seeds 0 1 2]

Runs C-ADMM with the defaults' model (intercept, AROW w-step, squared hinge, the defaults'
lambdas) in one process, and beside it the single-task AROW of every task and one AROW on all tasks
pooled, so that every candidate vote is scored on the same stream: each candidate is a set of
experts (and a way to weigh the related tasks), voted on exactly as
:class:`omtl_mpi.algorithms.experts.ExpertVote` votes (weights shared by every task), or with
weights of its own per task. Prints a Markdown table of mean final
cumulative errors over the seeds (stream orders), with the means over the sets of the balanced
error and F1. `make quality` draws the test beds and
imports Landmine into results/data first.
"""
from __future__ import annotations

import math

import numpy as np
from selection import Tally, arguments, print_header, selection_sets, stream, table_row

from omtl_mpi.algorithms.admm import AdmmParams, Consensus, TaskBlock
from omtl_mpi.algorithms.experts import PRIOR_FIRST, STEP_MULTIPLE, ExpertVote, related_models
from omtl_mpi.algorithms.independent import ArowNode, ArowParams


def related_squared(u, V):
    """The related models with weights c |c| instead of c (stronger relations count more)."""
    A = V + u
    n = np.linalg.norm(A, axis=1)
    c = (A @ A.T) / np.outer(np.where(n > 0, n, 1), np.where(n > 0, n, 1))
    np.fill_diagonal(c, 1.0)
    c *= np.abs(c)
    return (c @ A) / np.abs(c).sum(axis=1)[:, None]


class Vote(ExpertVote):
    """The library's vote, over ``n_experts`` experts where the library's has len(EXPERTS): the
    first with the prior weight PRIOR_FIRST, the others sharing the rest, as the library
    weighs its three."""

    def __init__(self, n_tasks, dim, total_tasks, n_experts):
        super().__init__(n_tasks, dim, total_tasks)
        self._rate = 8.0 * math.log(n_experts) * STEP_MULTIPLE ** 2     # eta_t^2 t
        rest = (1.0 - PRIOR_FIRST) / (n_experts - 1)
        self._log_prior = [math.log(p) for p in [PRIOR_FIRST] + [rest] * (n_experts - 1)]
        self.mistakes = np.zeros((n_experts, n_tasks))
        self.totals = np.zeros(n_experts)
        self.models = np.zeros((n_experts, n_tasks, dim))
        self._q = self._unnormalised()


class PerTaskVote(Vote):
    """The candidate with weights of its own per task: exp(-eta_k m_(k,e)), with the anytime
    step eta_k = sqrt(8 ln N / n_k) of task k's own n_k instances (no sums to exchange)."""

    def _unnormalised(self):
        m = self.mistakes
        q = (m - m.min(axis=0)) * -np.sqrt(self._rate / STEP_MULTIPLE ** 2 / max(self.steps, 1.0))
        # (equal prior weights: the candidate as it was first measured)
        return np.exp(q)[:, None, :]


# name -> the experts' models from (W, u, related, related squared, single-task, pooled)
CANDIDATES = {
    "ADMM model alone (--no-experts)": None,
    "multi-task, shared, related (the default)": ("W", "u", "rel"),
    "the same, weights per task (c = 1, equal prior)": ("W", "u", "rel"),
    "the same, equal prior": ("W", "u", "rel"),
    "the same, prior 0.5 on the multi-task model": ("W", "u", "rel"),
    "the same, prior 0.999 on the multi-task model": ("W", "u", "rel"),
    "the same, c = 1": ("W", "u", "rel"),
    "the same, c = 4": ("W", "u", "rel"),
    "the same, c = 64": ("W", "u", "rel"),
    "multi-task, shared, single-task, related": ("W", "u", "single", "rel"),
    "multi-task, shared, single-task": ("W", "u", "single"),
    "multi-task, related": ("W", "rel"),
    "multi-task, shared, related with weights c abs(c)": ("W", "u", "rel2"),
}


def scores(path, seed) -> dict:
    data = stream(path, seed)
    K, d, T = data.n_tasks, data.X.shape[-1], data.rounds
    p = AdmmParams(experts=False).resolved(T)
    block, consensus = TaskBlock(p, K, d), Consensus(p, K, d)
    single, pooled = ArowNode(ArowParams(), K, d, 0, K), ArowNode(ArowParams(), 1, d, 0, 1)
    related = related2 = np.zeros((K, d))
    votes = {name: (PerTaskVote if "per task" in name else Vote)(K, d, K, len(parts))
             for name, parts in CANDIDATES.items() if parts}
    for name, vote in votes.items():
        if name.startswith("the same, c = "):    # another multiple of the anytime step
            vote._rate *= (float(name.split("c = ")[1]) / STEP_MULTIPLE) ** 2
        if "equal prior" in name:
            vote._log_prior = [-np.log(len(vote._log_prior))] * len(vote._log_prior)
        elif "prior 0." in name:
            first = float(name.split("prior ")[1].split()[0])
            vote._log_prior = list(np.log([first] + [(1 - first) / 2] * 2))
        vote.set_totals(vote.totals)                 # the weights with this prior
    tallies = {name: Tally(K) for name in [*CANDIDATES, "single-task AROW", "pooled AROW"]}
    for t in range(T):
        X, y, inv_count = data[t]
        models = {"W": block.W, "u": np.broadcast_to(block.u, (K, d)), "rel": related,
                  "rel2": related2, "single": single.W, "pooled": np.broadcast_to(pooled.W, (K, d))}
        for name, vote in votes.items():
            for i, part in enumerate(CANDIDATES[name]):
                vote.models[i] = models[part]
            tallies[name].add(vote.predict(X)[0], y[0])
            vote.update(y)
            vote.set_totals(vote.partial())      # one block holds every task
        for name, W in (("single-task AROW", single.W), ("pooled AROW", pooled.W)):
            tallies[name].add(np.vecdot(W, X[0]) >= 0, y[0])
        positive, C = block.predict_and_step(X, y, inv_count)
        tallies["ADMM model alone (--no-experts)"].add(positive[0], y[0])
        u, V = consensus.step(C)
        consensus.update_relationship()
        block.dual_step(u, V)
        related, related2 = related_models(u, V), related_squared(u, V)
        single.local_step(X, y, inv_count)
        for k in np.nonzero(y[0])[0]:            # pooled: the round's instances one by one
            pooled.local_step(X[:, k:k + 1], y[:, k:k + 1], inv_count[k:k + 1])
    return {name: tally.scores() for name, tally in tallies.items()}


def main() -> None:
    args = arguments(__doc__)
    sets = selection_sets(args.data_dir)
    table = {}
    for _, path in sets:
        runs = [scores(path, seed) for seed in args.seeds]
        for key in runs[0]:
            table.setdefault(key, []).append(np.mean([r[key] for r in runs], axis=0))
    print_header(["prediction"], sets)
    for key, values in table.items():
        print(table_row([key], values))


if __name__ == "__main__":
    main()
