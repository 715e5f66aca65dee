"""Learners with no communication at all: every task alone (spec section 5).

* ``admm-single`` - the C-ADMM math with K = 1 for every task (its own u, no Omega, no lambda4
  term): the paper's ADMM-Single baseline and the ablation's "Indpt" column.
* ``pa`` - independent Passive-Aggressive PA-I (Crammer et al. 2006).

Both hold a contiguous block of tasks per rank and are vectorised over it.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from ..errors import ConfigError
from .admm import AdmmParams, TaskBlock
from .losses import predict


class _NoMessage:
    """Nodes that never talk still go through the neighbour loop, with an empty exchange."""

    message = np.zeros((0,))

    def merge(self, received) -> float:
        return 0.0

    def node_arrays(self) -> dict:
        return {}


class AdmmSingleNode(_NoMessage):
    """Each task of the block runs C-ADMM alone: u_k and v_k from its own c_k (K = 1).

    With K = 1 and no lambda4 term the exact (u, v) step is, per task,
    ``u_k = c_k (1 - rho p) / (lambda2 + rho - rho^2 p)`` and ``v_k = (c_k - rho u_k) p``
    with ``p = 1 / (a + rho)``.
    """

    def __init__(self, params: AdmmParams, dim: int, start: int, stop: int):
        self.p = params
        self.block = TaskBlock(params, stop - start, dim, shared_u=False)
        self._P = 1.0 / (params.a + params.rho)
        self._u_scale = (1.0 - params.rho * self._P) / (params.lambda2 + params.rho - params.rho ** 2 * self._P)

    @classmethod
    def build(cls, params, n_tasks, dim, start, stop, topology, node):
        return cls(params, dim, start, stop)

    def local_step(self, X, y, inv_count) -> np.ndarray:
        yhat, C = self.block.predict_and_step(X, y, inv_count)
        u = self._u_scale * C
        self.block.dual_step(u, (C - self.p.rho * u) * self._P)
        return yhat

    def finish_round(self) -> None:
        pass

    def state(self) -> dict:
        return self.block.state()

    def load_state(self, state: dict) -> None:
        self.block.load_state(state)

    def task_rows(self) -> dict:
        return {"W": self.block.W, "Z": self.block.Z, "V": self.block.V, "U": self.block.u}


@dataclass(frozen=True)
class PaParams:
    """PA-I: ``tau = min(C, hinge loss / |x|^2)``, ``w += tau y x``. Default C = 1."""

    C: float = 1.0

    def __post_init__(self):
        if not (isinstance(self.C, (int, float)) and math.isfinite(self.C) and self.C > 0):
            raise ConfigError(f"--C must be a finite number > 0, got {self.C!r}")

    def resolved(self, rounds: int) -> "PaParams":
        return self


class PaNode(_NoMessage):
    """Independent PA-I for every task of the block; a mini-batch takes the mean of the
    per-instance PA steps, all computed at the same w."""

    def __init__(self, params: PaParams, n_tasks: int, dim: int):
        self.p = params
        self.W = np.zeros((n_tasks, dim))

    @classmethod
    def build(cls, params, n_tasks, dim, start, stop, topology, node):
        return cls(params, stop - start, dim)

    def local_step(self, X, y, inv_count) -> np.ndarray:
        margins = np.einsum("kd,bkd->bk", self.W, X)
        yhat = predict(margins)
        loss = np.maximum(0.0, 1.0 - y * margins) * (y != 0)
        sq = np.einsum("bkd,bkd->bk", X, X)
        tau = np.minimum(self.p.C, np.divide(loss, sq, out=np.zeros_like(loss), where=sq > 0))
        self.W += np.einsum("bk,bkd->kd", tau * y, X) * inv_count[:, None]
        return yhat

    def finish_round(self) -> None:
        pass

    def state(self) -> dict:
        return {"W": self.W.copy()}

    def load_state(self, state: dict) -> None:
        self.W = np.array(state["W"], dtype=np.float64)

    def task_rows(self) -> dict:
        return {"W": self.W}


@dataclass(frozen=True)
class SingleParams(AdmmParams):
    """C-ADMM's hyper-parameters for tasks learned alone; lambda4 and Omega do not apply."""

    lambda4: float = 0.0
    relationship: bool = False

    def resolved(self, rounds: int) -> AdmmParams:
        return AdmmParams(**{**asdict(super().resolved(rounds)), "lambda4": 0.0, "relationship": False})
