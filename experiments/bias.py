"""How the bias enters the multi-task model, measured on the selection sets (step 6 of the
defaults protocol, experiments/PROTOCOL.md).

    python experiments/bias.py [--data-dir results/data] [--seeds 0 1 2]

* ``shared`` (what `--intercept` does): a constant feature 1, whose weight is split as
  w_k = u + v_k like every other weight and regularised with them;
* ``per-task``: the same feature, but its weight is outside the ADMM coupling: after every
  consensus step the bias coordinate's target is the task's own current bias and its dual is 0,
  so the w-step moves it by task k's loss gradient alone (unregularised, not shared);
* ``none``: no intercept (the paper's model).

The C-ADMM model is the defaults' (AROW w-step, squared hinge, the paper's lambdas / 10^4), with and without
the experts' vote. Prints a Markdown table of mean final cumulative errors over the seeds,
with the means over the sets of the balanced error and F1.
"""
from __future__ import annotations

import numpy as np

from selection import admm_scores, comparison, stream

from omtl_mpi.algorithms.admm import AdmmParams


def scores(path, seed, bias: str, experts: bool) -> np.ndarray:
    data = stream(path, seed, intercept=bias != "none")
    p = AdmmParams(experts=experts).resolved(data.rounds)

    def own_bias(block):
        # the bias coordinate: target = the task's own bias, no dual, so no pull at all
        block.Z[:, -1] = 0.0
        block._rY[:, -1] = p.rho * block.W[:, -1]
        block.w_step.prepare(block._rY, block.Z)

    return admm_scores(data, p, after_round=own_bias if bias == "per-task" else None)


def main() -> None:
    comparison(__doc__, ["bias", "vote"],
               [([bias, "yes" if experts else "no"], bias, experts)
                for experts in (True, False) for bias in ("shared", "per-task", "none")], scores)


if __name__ == "__main__":
    main()
