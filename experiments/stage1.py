"""Step 1 of the defaults protocol (experiments/PROTOCOL.md), the model, run again with the
final defaults on its nine selection sets: is the AROW w-step with the squared hinge, and no
feature scaling, still the choice once the later steps have set r and the lambdas?

    python experiments/stage1.py [--data-dir results/data] [--seeds 0 1 2]

Step 1 (`omtl-mpi sweep experiments/defaults.toml`) chose the w-step, the loss and the scaling
on Synthetic and Landmine with AROW's r = 1 and the paper's lambdas / 10. Here every candidate is
C-ADMM with the defaults otherwise (AROW's r per task, lambdas / 10^4, the vote); the same
intercept for all. Prints a Markdown table of mean final cumulative errors over the seeds, with
the means over the sets of the balanced error and F1.
"""
from __future__ import annotations

import numpy as np

from selection import admm_scores, comparison, stream

from omtl_mpi.algorithms.admm import AdmmParams

CANDIDATES = [
    ("arow", "squared-hinge", "none"),            # the defaults
    ("arow", "hinge", "none"),
    ("adagrad", "hinge", "none"),
    ("adagrad", "squared-hinge", "none"),
    ("euclid", "hinge", "none"),
    ("arow", "squared-hinge", "online"),
    ("adagrad", "hinge", "online"),
]


def scores(path, seed, w_step: str, loss: str, scale: str) -> np.ndarray:
    data = stream(path, seed, scale=scale)
    return admm_scores(data, AdmmParams(w_step=w_step, loss=loss).resolved(data.rounds))


def main() -> None:
    comparison(__doc__, ["w-step", "loss", "scaling"],
               [([w + (" (the default)" if (w, l, sc) == CANDIDATES[0] else ""), l, sc], w, l, sc)
                for w, l, sc in CANDIDATES], scores)


if __name__ == "__main__":
    main()
