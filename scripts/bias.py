"""How the bias enters the multi-task model: issue 20 asks to measure both ways on the selection
sets of docs/SHARING.md's protocol.

    python scripts/bias.py [--data-dir results/data] [--seeds 0 1 2]

* ``shared`` (what `--intercept` does): a constant feature 1, whose weight is split as
  w_k = u + v_k like every other weight and regularised with them;
* ``per-task``: the same feature, but its weight is outside the ADMM coupling: after every
  consensus step the bias coordinate's target is the task's own current bias and its dual is 0,
  so the w-step moves it by task k's loss gradient alone (unregularised, not shared);
* ``none``: no intercept (the paper's model).

The C-ADMM model is the defaults' (AROW w-step, squared hinge, lambdas / 10), with and without
the experts' vote. Prints a Markdown table of mean final cumulative errors over the seeds.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from omtl_mpi.algorithms.admm import AdmmParams, Consensus, TaskBlock   # noqa: E402
from omtl_mpi.algorithms.experts import related_models                  # noqa: E402
from omtl_mpi.data.features import prepare                              # noqa: E402
from omtl_mpi.data.rounds import RoundBatches, rounds_needed            # noqa: E402
from omtl_mpi.data.source import FileSource, SyntheticSource, shuffled  # noqa: E402

SETS = [("identical", "testbed-identical.h5"), ("clustered", "testbed-clustered.h5"),
        ("unrelated", "testbed-unrelated.h5"), ("Synthetic", None), ("Landmine", "landmine.h5")]


def error(path, seed, bias: str, experts: bool) -> float:
    source = SyntheticSource(5, 10000, 0) if path is None else FileSource(path)
    meta = source.meta()
    s = shuffled(source.load(np.arange(meta.n_tasks)), seed)
    X = prepare(s.X, intercept=bias != "none")
    data = RoundBatches(X, s.y, 1, rounds_needed(meta.lengths, 1), X[0].shape[1])
    K, d, T = data.n_tasks, data.X.shape[-1], data.rounds
    p = AdmmParams(experts=experts).resolved(T)
    block, consensus = TaskBlock(p, K, d), Consensus(p, K, d)
    mistakes = np.zeros(K)
    for t in range(T):
        Xt, y, inv_count = data[t]
        positive, C = block.predict_and_step(Xt, y, inv_count)
        mistakes += (positive[0] != (y[0] > 0)) & (y[0] != 0)
        u, V = consensus.step(C)
        block.dual_step(u, V, related_models(u, V) if experts else None)
        if bias == "per-task":
            # the bias coordinate: target = the task's own bias, no dual, so no pull at all
            block.Z[:, -1] = 0.0
            block._rY[:, -1] = p.rho * block.W[:, -1]
            block.w_step.prepare(block._rY, block.Z)
    return float(np.mean(mistakes / data.lengths))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default="results/data")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()
    sets = [(label, None if name is None else os.path.join(args.data_dir, name)) for label, name in SETS]
    sets = [(label, path) for label, path in sets if path is None or os.path.exists(path)]
    print("| bias | vote | " + " | ".join(label for label, _ in sets) + " | mean |")
    print("|---|---|" + "---|" * (len(sets) + 1))
    for experts in (True, False):
        for bias in ("shared", "per-task", "none"):
            row = [np.mean([error(path, s, bias, experts) for s in args.seeds]) for _, path in sets]
            print(f"| {bias} | {'yes' if experts else 'no'} | " + " | ".join(f"{v:.4f}" for v in row)
                  + f" | {np.mean(row):.4f} |", flush=True)


if __name__ == "__main__":
    main()
