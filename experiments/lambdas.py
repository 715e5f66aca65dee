"""How strongly the ADMM model is regularised: step 2 of the defaults protocol
(experiments/PROTOCOL.md), on its selection sets, the unit-norm copies included.

    python experiments/lambdas.py [--data-dir results/data] [--seeds 0 1 2]

The lambdas (lambda1-4) weigh a penalty that the online ADMM step pays every round, so how far
they shrink a model depends on the features' scale (scaling x by s asks for lambda times s^2).
The candidates, from step 1's choice (the paper's lambdas / 10): that times 1, 0.1, 0.01 and
0.001, every round; and that times a factor fading with the round number t: 1 / t (the penalty
weighed once against the t instances seen), 1 / sqrt(t) (a penalty whose total grows as
sqrt(T), the rate of online learning's regret bounds) and 10 / (10 + t), for which the (u, V)
step's matrix is rebuilt every round. Each is C-ADMM with the defaults otherwise, with and
without the experts' vote. Prints a Markdown table of mean final cumulative errors over the
seeds, with the means over the sets of the balanced error and F1.
"""
from __future__ import annotations

import numpy as np

from selection import admm_scores, comparison, stream

from omtl_mpi.algorithms.admm import AdmmParams, Consensus
from omtl_mpi.algorithms.relationship import consensus_matrix

# step 1's lambdas: the paper's / 10
STEP1 = {"lambda1": 0.001, "lambda2": 0.01, "lambda3": 0.001, "lambda4": 0.001}
FADING = {"1 / t": lambda t: 1.0 / t, "1 / sqrt(t)": lambda t: t ** -0.5,
          "10 / (10 + t)": lambda t: 10.0 / (10.0 + t)}


class Fading(Consensus):
    """The (u, V) step of round t with every lambda times ``fading(t)`` (Omega = I/K)."""

    def __init__(self, params, n_tasks, dim, fading):
        super().__init__(params, n_tasks, dim)
        self.fading = fading

    def step(self, C):
        p, s = self.p, self.fading(self.rounds + 1)
        self._operator = consensus_matrix(self.rel, p.a * s, p.rho, p.lambda2 * s, p.lambda4 * s)
        return super().step(C)


def scores(path, seed, factor: float, fading, experts: bool) -> np.ndarray:
    data = stream(path, seed)
    p = AdmmParams(experts=experts, **{k: v * factor for k, v in STEP1.items()})
    p = p.resolved(data.rounds)
    K, d = data.n_tasks, data.X.shape[-1]
    return admm_scores(data, p, None if fading is None else Fading(p, K, d, FADING[fading]))


CANDIDATES = [("x 1", 1.0, None), ("x 0.1", 0.1, None), ("x 0.01", 0.01, None),
              ("x 0.001 (the default)", 0.001, None)] + [(f"x {name}", 1.0, name) for name in FADING]


def main() -> None:
    comparison(__doc__, ["lambdas (step 1's: the paper's / 10)", "vote"],
               [([name, "yes" if experts else "no"], factor, fading, experts)
                for experts in (True, False) for name, factor, fading in CANDIDATES], scores)


if __name__ == "__main__":
    main()
