"""The ADMM learners' pieces with their per-round steps compiled (``--kernel numba``).

Each class here is a subclass of a numpy piece of :mod:`omtl_mpi.algorithms` that overrides
only the steps :mod:`._compiled` has, with the same arguments and state; :func:`accelerate`
turns the pieces of a learner the runtime has built into these. The algorithms layer knows
nothing of them, and every step a subclass does not override (the adaptive w-steps, the paper
variant, Omega's careful path) is the numpy one.
"""
from __future__ import annotations

import numpy as np

from ..algorithms.admm import Consensus, TaskBlock
from ..algorithms.dadmm import DAdmmNode
from ..algorithms.relationship import Relationship, consensus_matrix
from . import kernels


class CompiledTaskBlock(TaskBlock):
    """Predict + w-step + message, and the z-step, one compiled call each (euclid w-step)."""

    def _compile(self, k) -> None:
        self._k = k
        self._loss_code = kernels.LOSS_CODES[self.p.loss]
        self._keep, self._inv = float(self.w_step._keep), float(self.w_step._inv)

    def predict_and_step(self, X, y, inv_count):
        positive = np.empty(y.shape, dtype=bool)
        self._k.worker_step(self.W, self.Z, self.w_step.R, self.C, X, y, inv_count, positive,
                            self._loss_code, self._keep, self._inv, self.p.rho)
        return positive, self.C

    def dual_step(self, u, V, related=None) -> None:     # compiled only without --experts
        self.u, self.V = u, V
        self._k.dual_step(u if u.ndim == 2 else u[None], V, self.C, self.Z, self.w_step.R,
                          self._rY, self.p.rho, self._inv)


class CompiledConsensus(Consensus):
    """The exact variant's (u, V) step, Omega update and consensus matrix compiled (up to
    :data:`.kernels.MAX_TASKS` tasks: beyond a few dozen, BLAS on the numpy path wins)."""

    def _compile(self, k) -> None:
        self._k = k

    def _cached_operator(self) -> np.ndarray:
        if self._operator is None:
            p, M = self.p, np.empty((self.K + 1, self.K))
            status = self._k.consensus_matrix(self._rel.evals, self._rel.evecs, p.a, p.rho,
                                              p.lambda2, p.lambda4, M)
            self._operator = (M if status == self._k.OK else
                              consensus_matrix(self._rel, p.a, p.rho, p.lambda2, p.lambda4))
        return self._operator

    def step(self, C):
        op = self._operator if self._operator is not None else self._cached_operator()
        self._k.apply_consensus(op, C, self.uv)
        self.rounds += 1
        return self.uv[0], self.uv[1:]

    def update_relationship(self, V=None) -> None:
        p = self.p
        if p.relationship and self.rounds > 0 and self.rounds % p.omega_every == 0:
            if not self._compiled_relationship(self.V if V is None else V):
                super().update_relationship(V)      # relationship.py's careful path

    def _compiled_relationship(self, V) -> bool:
        """Omega and the consensus matrix in one call; False when relationship.py's careful
        path must redo it (a Gram matrix that is not finite or out of range, or dsyevd not
        converging)."""
        p, K = self.p, self.K
        evals, Q, M = np.empty(K), np.empty((K, K)), np.empty((K + 1, K))
        try:
            status = self._k.relationship_step(V, p.omega_eps, p.a, p.rho, p.lambda2, p.lambda4,
                                               evals, Q, M)
        except np.linalg.LinAlgError:
            return False
        if status == self._k.RESCALE:
            return False
        self.rel = Relationship(evals, Q)
        if status == self._k.OK:
            self._operator = M
        else:
            self._cached_operator()
        return True


class CompiledDAdmmNode(DAdmmNode):
    """D-ADMM's freshest-row merge of the gossiped tables in one compiled call."""

    def _compile(self, k) -> None:
        self._k = k

    def merge(self, received) -> float:
        if received is self.inbox:
            return self.round - self._k.merge_tables(self.slots) / self.K
        return super().merge(received)


def _applies(piece) -> bool:
    if isinstance(piece, Consensus):
        return piece.p.variant == "exact" and piece.K <= kernels.MAX_TASKS
    if isinstance(piece, TaskBlock):
        return piece.p.w_step == "euclid" and piece.experts is None and piece.class_seen is None
    return True


_COMPILED = {TaskBlock: CompiledTaskBlock, Consensus: CompiledConsensus,
             DAdmmNode: CompiledDAdmmNode}


def accelerate(role) -> None:
    """Give ``role`` (a worker, server or node of an ADMM learner, freshly built) and its
    ``block`` and ``consensus`` the compiled steps, in place; other roles are left as they are.

    Only the class changes: the arrays, and the buffers the exchange is bound to, stay.
    """
    k = kernels.load()
    for piece in (role, getattr(role, "block", None), getattr(role, "consensus", None)):
        compiled = _COMPILED.get(type(piece))
        if compiled is not None and _applies(piece):
            piece.__class__ = compiled
            piece._compile(k)
