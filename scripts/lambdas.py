"""How strongly the ADMM model is regularised: stage 1b of docs/SHARING.md's protocol, on its
selection sets, the unit-norm copies included.

    python scripts/lambdas.py [--data-dir results/data] [--seeds 0 1 2]

The lambdas (lambda1-4) multiply a penalty that the online ADMM step pays every round, so a
fixed lambda regularises as if the batch objective's penalty grew with the number of instances,
and how much that shrinks a model depends on the features' scale (scaling x by s asks for
lambda times s^2). The candidates: the paper's lambdas / 10 (stage 1's choice) times 1, 0.1,
0.01 and 0.001, every round; and the same / 10 times a factor that fades with the round number
t: 1 / t (``lambda_decay``, which weighs the penalty once against the t instances seen),
1 / sqrt(t) (a penalty whose total grows as sqrt(T), the rate of online learning's regret
bounds) and 10 / (10 + t). Each is C-ADMM with the defaults otherwise, with and without the
experts' vote. Prints a Markdown table of mean final cumulative
errors over the seeds.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from selection import admm_error, comparison, stream

from omtl_mpi.algorithms.admm import AdmmParams


@dataclass(frozen=True)
class Fading(AdmmParams):
    """The parameters with another factor of t than ``lambda_decay``'s 1 / t."""

    fading: str = "sqrt"

    def lambda_scale(self, rounds: int) -> float:
        return FADING[self.fading](rounds)


FADING = {"sqrt": lambda t: t ** -0.5, "10": lambda t: 10.0 / (10.0 + t)}


def error(path, seed, factor: float, decay, experts: bool) -> float:
    data = stream(path, seed)
    base = AdmmParams()
    p = AdmmParams(experts=experts, lambda_decay=decay is True,
                   **{f"lambda{i}": getattr(base, f"lambda{i}") * factor for i in range(1, 5)})
    p = p.resolved(data.rounds)
    if decay in FADING:
        p = Fading(**asdict(p), fading=decay)
    return admm_error(data, p)


CANDIDATES = [("x 1", 1.0, False), ("x 0.1", 0.1, False), ("x 0.01", 0.01, False),
              ("x 0.001", 0.001, False), ("x 1 / t (the default)", 1.0, True),
              ("x 1 / sqrt(t)", 1.0, "sqrt"), ("x 10 / (10 + t)", 1.0, "10")]


def main() -> None:
    comparison(__doc__, ["lambdas (the paper's / 10)", "vote"],
               [([name, "yes" if experts else "no"], factor, decay, experts)
                for experts in (True, False) for name, factor, decay in CANDIDATES], error)


if __name__ == "__main__":
    main()
