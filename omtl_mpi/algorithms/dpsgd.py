"""D-PSGD (Lian et al. 2017): decentralised SGD with Metropolis-Hastings mixing, one task per
node (the step and its decay: docs/ALGORITHMS.md section 5).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..data.sparse import combine, margins as margins_of
from ..errors import ConfigError
from .contract import ArrayState, QuietNode
from .losses import gradient_coef, predict
from .params import Settled, require_positive

DECAYS = ("sqrt", "linear")


@dataclass(frozen=True)
class DpsgdParams(Settled):
    """Hyper-parameters of D-PSGD. ``gamma0`` is ours to choose (the paper gives none)."""

    gamma0: float = field(default=0.1, metadata={
        "help": "Initial step size of each node's hinge subgradient step, decayed by --decay (> 0)."})
    decay: str = field(default="sqrt", metadata={"help": "Step gamma0/sqrt(t) or gamma0/t.",
                                                 "choices": DECAYS})

    def __post_init__(self):
        require_positive("gamma0", self.gamma0)
        if self.decay not in DECAYS:
            raise ConfigError(f"--decay must be 'sqrt' (gamma0/sqrt(t)) or 'linear' (gamma0/t), got {self.decay!r}")


class DPsgdNode(ArrayState, QuietNode):
    """Node ``node`` of ``topology``, holding exactly one task, ``start`` (:class:`.contract.Node`;
    without a topology, a lone node that mixes with nobody)."""

    # its state is the node's (the model it mixes with its neighbours'), not a block's
    TASK_AXIS = None
    # every node averages its model with its neighbours' each round, whether its task has an
    # instance or not (Lian et al.'s gossip): learning one task moves the others'
    CHECK_SKIPS = ("check_learning_a_task_leaves_the_others",)
    _STATE, _COUNTS = ("w",), ("round",)

    def __init__(self, params: DpsgdParams, n_tasks: int, dim: int, start: int, stop: int,
                 topology=None, node: int = 0):
        if stop - start != 1:
            raise ConfigError("d-psgd runs one task per node: use as many nodes (ranks) as tasks")
        self.p = params
        self.w = np.zeros((1, dim))
        if topology is None:
            self_weight, weights = 1.0, np.zeros(0)
        else:
            # the Metropolis-Hastings weights M_kj of this node's row
            M = topology.mixing_matrix()
            self_weight, weights = M[node, node], M[node, list(topology.neighbours(node))]
        self.self_weight = float(self_weight)
        self.weights = np.asarray(weights, dtype=np.float64)   # M_kj, ascending neighbour order
        self.g = np.zeros((1, dim))
        self.round = 0

    @property
    def message(self) -> np.ndarray:
        return self.w

    def local_step(self, X, y, inv_count, active=slice(None)) -> np.ndarray:
        self.round += 1
        w = self.w[active]
        margins = margins_of(w, X)
        yhat = predict(margins)
        coef = gradient_coef("hinge", y, margins, yhat)
        # a node whose task has no instance this round still mixes, with a zero gradient
        self.g = np.zeros_like(self.w)
        self.g[active] = combine(coef, X) * inv_count[:, None]
        return yhat

    def decide(self, X, active=slice(None)) -> np.ndarray:
        """The margins (B, na) :meth:`local_step` predicts from, changing nothing."""
        return margins_of(self.w[active], X)

    def merge(self, received: np.ndarray) -> float:
        """Mix with the neighbours' pre-mixing models (received: (n_neighbours, 1, d)) and step."""
        t = self.round
        gamma = self.p.gamma0 / (math.sqrt(t) if self.p.decay == "sqrt" else t)
        mixed = self.self_weight * self.w
        if received.shape[0]:
            mixed = mixed + np.tensordot(self.weights, received, axes=1)
        self.w = mixed - gamma * self.g
        return 0.0

    def task_rows(self) -> dict:
        return {"W": self.w}
