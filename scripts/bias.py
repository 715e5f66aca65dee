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

import numpy as np
from selection import comparison, stream

from omtl_mpi.algorithms.admm import AdmmParams, Consensus, TaskBlock
from omtl_mpi.algorithms.experts import related_models


def error(path, seed, bias: str, experts: bool) -> float:
    data = stream(path, seed, intercept=bias != "none")
    K, d, T = data.n_tasks, data.X.shape[-1], data.rounds
    p = AdmmParams(experts=experts).resolved(T)
    block, consensus = TaskBlock(p, K, d), Consensus(p, K, d)
    mistakes = np.zeros(K)
    for t in range(T):
        Xt, y, inv_count = data[t]
        positive, C = block.predict_and_step(Xt, y, inv_count)
        mistakes += (positive[0] != (y[0] > 0)) & (y[0] != 0)
        u, V = consensus.step(C)
        block.dual_step(u, V, *((related_models(u, V), block.experts.partial()) if experts else ()))
        if bias == "per-task":
            # the bias coordinate: target = the task's own bias, no dual, so no pull at all
            block.Z[:, -1] = 0.0
            block._rY[:, -1] = p.rho * block.W[:, -1]
            block.w_step.prepare(block._rY, block.Z)
    return float(np.mean(mistakes / data.lengths))


def main() -> None:
    comparison(__doc__, ["bias", "vote"],
               [([bias, "yes" if experts else "no"], bias, experts)
                for experts in (True, False) for bias in ("shared", "per-task", "none")], error)


if __name__ == "__main__":
    main()
