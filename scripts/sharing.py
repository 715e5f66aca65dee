"""Which experts the default vote uses: the comparison behind docs/SHARING.md, on the selection
sets of its protocol (the known-answer test beds, the paper's synthetic family, Landmine).

    python scripts/sharing.py [--data-dir results/data] [--seeds 0 1 2]

Runs C-ADMM with the defaults' model (intercept, AROW w-step, squared hinge, the paper's lambdas
/ 10) in one process, and beside it the single-task AROW of every task and one AROW on all tasks
pooled, so that every candidate vote is scored on the same stream: each candidate is a set of
experts (and a way to weigh the related tasks), voted on exactly as
:class:`omtl_mpi.algorithms.experts.ExpertVote` votes. Prints a Markdown table of mean final
cumulative errors over the seeds (stream orders). `make quality` draws the test beds and
imports Landmine into results/data first.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from omtl_mpi.algorithms.admm import AdmmParams, Consensus, TaskBlock   # noqa: E402
from omtl_mpi.algorithms.experts import ExpertVote, related_models      # noqa: E402
from omtl_mpi.algorithms.independent import ArowNode, ArowParams        # noqa: E402
from omtl_mpi.data.features import prepare                              # noqa: E402
from omtl_mpi.data.rounds import RoundBatches, rounds_needed            # noqa: E402
from omtl_mpi.data.source import FileSource, SyntheticSource, shuffled  # noqa: E402

SETS = [("identical", "testbed-identical.h5"), ("clustered", "testbed-clustered.h5"),
        ("unrelated", "testbed-unrelated.h5"), ("Synthetic", None), ("Landmine", "landmine.h5")]


def related_squared(u, V):
    """The related models with weights c |c| instead of c (stronger relations count more)."""
    A = V + u
    n = np.linalg.norm(A, axis=1)
    c = (A @ A.T) / np.outer(np.where(n > 0, n, 1), np.where(n > 0, n, 1))
    np.fill_diagonal(c, 1.0)
    c *= np.abs(c)
    return (c @ A) / np.abs(c).sum(axis=1)[:, None]


# name -> the experts' models from (W, u, related, related squared, single-task, pooled)
CANDIDATES = {
    "ADMM model alone (--no-experts)": None,
    "multi-task, shared, related (the default)": ("W", "u", "rel"),
    "multi-task, shared, single-task, related": ("W", "u", "single", "rel"),
    "multi-task, shared, single-task": ("W", "u", "single"),
    "multi-task, related": ("W", "rel"),
    "multi-task, shared, related with weights c abs(c)": ("W", "u", "rel2"),
}


def stream(path, seed):
    source = SyntheticSource(5, 10000, 0) if path is None else FileSource(path)
    meta = source.meta()
    s = shuffled(source.load(np.arange(meta.n_tasks)), seed)
    X = prepare(s.X, intercept=True)
    return RoundBatches(X, s.y, 1, rounds_needed(meta.lengths, 1), X[0].shape[1])


def errors(path, seed) -> dict:
    data = stream(path, seed)
    K, d, T = data.n_tasks, data.X.shape[-1], data.rounds
    p = AdmmParams(experts=False).resolved(T)
    block, consensus = TaskBlock(p, K, d), Consensus(p, K, d)
    single, pooled = ArowNode(ArowParams(), K, d), ArowNode(ArowParams(), 1, d)
    related = related2 = np.zeros((K, d))
    votes = {name: ExpertVote(K, d, len(parts)) for name, parts in CANDIDATES.items() if parts}
    mistakes = {name: np.zeros(K) for name in CANDIDATES}
    mistakes.update({"single-task AROW": np.zeros(K), "pooled AROW": np.zeros(K)})
    for t in range(T):
        X, y, inv_count = data[t]
        real = y[0] != 0
        models = {"W": block.W, "u": np.broadcast_to(block.u, (K, d)), "rel": related,
                  "rel2": related2, "single": single.W, "pooled": np.broadcast_to(pooled.W, (K, d))}
        for name, vote in votes.items():
            for i, part in enumerate(CANDIDATES[name]):
                vote.models[i] = models[part]
            mistakes[name] += (vote.predict(X)[0] != (y[0] > 0)) & real
            vote.update(y)
        for name, W in (("single-task AROW", single.W), ("pooled AROW", pooled.W)):
            mistakes[name] += ((np.vecdot(W, X[0]) >= 0) != (y[0] > 0)) & real
        positive, C = block.predict_and_step(X, y, inv_count)
        mistakes["ADMM model alone (--no-experts)"] += (positive[0] != (y[0] > 0)) & real
        u, V = consensus.step(C)
        consensus.update_relationship()
        block.dual_step(u, V)
        related, related2 = related_models(u, V), related_squared(u, V)
        single.local_step(X, y, inv_count)
        for k in np.nonzero(real)[0]:            # pooled: the round's instances one by one
            pooled.local_step(X[:, k:k + 1], y[:, k:k + 1], inv_count[k:k + 1])
    return {name: float(np.mean(m / data.lengths)) for name, m in mistakes.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default="results/data")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()
    columns, table = [], {}
    for label, name in SETS:
        path = None if name is None else os.path.join(args.data_dir, name)
        if path is not None and not os.path.exists(path):
            print(f"(skipped {label}: {path} not found; run make quality first)", file=sys.stderr)
            continue
        columns.append(label)
        runs = [errors(path, seed) for seed in args.seeds]
        for key in runs[0]:
            table.setdefault(key, []).append(np.mean([r[key] for r in runs]))
    print("| prediction | " + " | ".join(columns) + " |")
    print("|---|" + "---|" * len(columns))
    for key, values in table.items():
        print(f"| {key} | " + " | ".join(f"{v:.4f}" for v in values) + " |")


if __name__ == "__main__":
    main()
