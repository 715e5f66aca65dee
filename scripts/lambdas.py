"""How strongly the ADMM model is regularised: stage 1b of docs/SHARING.md's protocol, on its
selection sets, the unit-norm copies included.

    python scripts/lambdas.py [--data-dir results/data] [--seeds 0 1 2]

The lambdas (lambda1-4) multiply a penalty that the online ADMM step pays every round, so a
fixed lambda regularises as if the batch objective's penalty grew with the number of instances,
and how much that shrinks a model depends on the features' scale (scaling x by s asks for
lambda times s^2). The candidates: the paper's lambdas / 10 (stage 1's choice) times 1, 0.1,
0.01 and 0.001, every round; and the same / 10 divided by the round number t (``lambda_decay``),
which weighs the penalty once against the t instances seen. Each is C-ADMM with the defaults
otherwise, with and without the experts' vote. Prints a Markdown table of mean final cumulative
errors over the seeds.
"""
from __future__ import annotations

from selection import admm_error, comparison, stream

from omtl_mpi.algorithms.admm import AdmmParams


def error(path, seed, factor: float, decay: bool, experts: bool) -> float:
    data = stream(path, seed)
    base = AdmmParams()
    p = AdmmParams(experts=experts, lambda_decay=decay,
                   **{f"lambda{i}": getattr(base, f"lambda{i}") * factor for i in range(1, 5)})
    return admm_error(data, p.resolved(data.rounds))


CANDIDATES = [("x 1", 1.0, False), ("x 0.1", 0.1, False), ("x 0.01", 0.01, False),
              ("x 0.001", 0.001, False), ("x 1, divided by t", 1.0, True)]


def main() -> None:
    comparison(__doc__, ["lambdas (the paper's / 10)", "vote"],
               [([name, "yes" if experts else "no"], factor, decay, experts)
                for experts in (True, False) for name, factor, decay in CANDIDATES], error)


if __name__ == "__main__":
    main()
