"""An example learner written outside the package: an independent perceptron per task.

Importing this module registers it as ``perceptron``; then ``omtl_mpi.learner("perceptron",
...)``, ``omtl_mpi.run_streams(..., algo="perceptron")`` (in one process and under mpiexec,
where every rank imports this module) and ``omtl_mpi.check_learner("perceptron")`` work.
docs/DESIGN.md, *Adding a learner*, walks through it; the tests run it through every check.
"""
from dataclasses import dataclass, field

import numpy as np

from omtl_mpi.algorithms.params import require_positive
from omtl_mpi.algorithms.registry import REGISTRY, Algorithm, register


@dataclass(frozen=True)
class PerceptronParams:
    """The perceptron's hyper-parameters: each field is an option, with its help."""

    step: float = field(default=1.0, metadata={"help": "Step size of a mistake's update (> 0)."})

    def __post_init__(self):
        require_positive("step", self.step)        # one line: "--step must be ... > 0"

    def resolved(self, rounds: int) -> "PerceptronParams":
        return self                                # nothing depends on the run's length


class PerceptronNode:
    """Tasks ``start..stop-1`` of a run, each with its own perceptron (no communication)."""

    TASK_AXIS = {"W": 0}            # state()'s per-task arrays, by the axis of their tasks
    message = np.zeros(0)           # nothing to send: the "none" pattern

    def __init__(self, params, n_tasks, dim, start, stop, topology=None, node=0):
        self.step = params.step
        self.W = np.zeros((stop - start, dim))     # one row per task of the block

    def decide(self, X, active=slice(None)):
        """w_k . x for every instance (B, na) of the tasks `active`: the prediction is its
        sign; changes nothing."""
        return np.einsum("kd,bkd->bk", self.W[active], X)

    def local_step(self, X, y, inv_count, active=slice(None)):
        # X (B, na, d): the instances of the block's tasks `active` (those with one this round)
        W = self.W[active]
        positive = np.einsum("kd,bkd->bk", W, X) >= 0.0        # before the labels are read
        wrong = (y != 0) & ((y > 0) != positive)                # padding (y = 0) is no mistake
        self.W[active] = W + self.step * np.einsum("bk,bkd->kd", wrong * y, X) * inv_count[:, None]
        return positive

    def merge(self, received):
        return 0.0                  # nothing was received: nothing is stale

    def finish_round(self):
        pass

    def node_arrays(self):
        return {}

    def state(self):
        return {"W": self.W.copy()}

    def load_state(self, state):
        self.W = np.array(state["W"], dtype=np.float64)

    def task_rows(self):
        return {"W": self.W}


if "perceptron" not in REGISTRY:    # importing twice registers once
    register(Algorithm(name="perceptron", summary="Independent perceptron per task.",
                       citation="Rosenblatt 1958", pattern="none", reconstruction=False,
                       params=PerceptronParams, node=PerceptronNode))
