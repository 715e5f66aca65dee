"""Does a different Omega make relationship learning pay? Step 5 of the defaults protocol
(experiments/PROTOCOL.md), measured on its selection sets (the test beds, the paper's synthetic
family, Landmine, and their unit-norm copies), for the paper's model and for the defaults' model.

    python experiments/relationship.py [--data-dir results/data] [--seeds 0 1 2]

Each variant changes only how Omega is formed (docs/ALGORITHMS.md section 4 is the reference,
"V"):

* ``W``: Omega from the rows of u + V (the task models w_k, as in Zhang and Yeung's MTRL) instead
  of V alone;
* ``shrink``: Omega shrunk towards I/K with a weight that falls as evidence grows,
  ``(1 - s_t) Omega + s_t I/K``, s_t = 100 / (100 + t) after t rounds;
* ``warm-up``: Omega = I/K for the first 100 rounds, then the usual update;
* ``lambda4 / K``: the relationship term's weight divided by K, since tr(V Omega^-1 V^T) grows
  with K when Omega has trace 1;
* ``W/O RL``: Omega = I/K throughout (the paper's ablation).

Prints a Markdown table of mean final cumulative errors over the seeds (stream orders), with
the means over the sets of the balanced error and F1: for the
defaults' model with the experts' vote (what `omtl-mpi run` predicts), for the same model alone
(`--no-experts`), and for the paper's model (`--preset paper`). experiments/PROTOCOL.md, step 5,
holds its output.
"""
from __future__ import annotations

import numpy as np

from selection import admm_scores, comparison, stream

from omtl_mpi.algorithms.admm import AdmmParams, Consensus
from omtl_mpi.algorithms.relationship import Relationship, update_omega

EVIDENCE = 100          # rounds: the shrinkage's half-weight point, and the warm-up's length


class Variant(Consensus):
    """The consensus step with one of the variants' Omega updates."""

    kind = "V"

    def update_relationship(self, V=None) -> None:
        p, t = self.p, self.rounds
        if not (p.relationship and t > 0 and t % p.omega_every == 0):
            return
        V = self.V if V is None else V
        if self.kind == "warm-up" and t < EVIDENCE:
            return
        source = V + self.u if self.kind == "W" else V
        rel = update_omega(source, p.omega_eps, self.rel)
        if self.kind == "shrink":
            s = EVIDENCE / (EVIDENCE + t)
            rel = Relationship((1.0 - s) * rel.evals + s / self.K, rel.evecs)
        self.rel = rel
        self._cached_operator()


VARIANTS = ["V", "W", "shrink", "warm-up", "lambda4 / K", "W/O RL"]


def scores(path, seed, model: str, variant: str) -> np.ndarray:
    paper = model == "paper"
    data = stream(path, seed, intercept=not paper)
    K, d, T = data.n_tasks, data.X.shape[-1], data.rounds
    changes = {"experts": model == "vote", "relationship": variant != "W/O RL"}
    p = (AdmmParams.paper(**changes) if paper else AdmmParams(**changes))
    if variant == "lambda4 / K":
        p = AdmmParams(**{**p.__dict__, "lambda4": p.lambda4 / K})
    p = p.resolved(T)
    consensus = Variant(p, K, d)
    consensus.kind = variant
    return admm_scores(data, p, consensus)


def main() -> None:
    models = (("vote", "defaults"), ("alone", "defaults, `--no-experts`"), ("paper", "`--preset paper`"))
    comparison(__doc__, ["model", "Omega"],
               [([shown, variant], model, variant) for model, shown in models for variant in VARIANTS],
               scores)


if __name__ == "__main__":
    main()
