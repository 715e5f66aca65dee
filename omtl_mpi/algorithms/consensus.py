"""The server side of the ADMM learners: (u, V) from every task's message C by variant "exact"
or "paper", and the Omega update every m rounds (docs/ALGORITHMS.md sections 2.2 and 4).
C-ADMM's server and every D-ADMM node run the same :class:`Consensus`.
"""
from __future__ import annotations

import numpy as np

from .admm_params import AdmmParams, DivergenceError
from .relationship import ExactStep, Relationship, paper_step, update_omega


class Consensus:
    """The (u, V) step and the Omega update of C-ADMM's server (and of every D-ADMM node),
    for the learners whose tasks are coupled through the consensus (the GIVEN coupling:
    a learned Omega, or the paper variant).

    Call :meth:`step` once per round with all tasks' messages C (K x d, task order). The exact
    step is factored in Omega's basis (:class:`.relationship.ExactStep`), rebuilt only when
    Omega changes: O(K d r) per round, r <= min(K, d), never a K x K matrix.
    """

    def __init__(self, params: AdmmParams, n_tasks: int, dim: int):
        self.p = params
        self.K = n_tasks
        self.u = np.zeros(dim)
        self.V = np.zeros((n_tasks, dim))        # of the last step (the paper's V_old)
        self._rel = Relationship.identity(n_tasks, min(n_tasks, dim))
        self.rounds = 0                          # consensus steps taken so far
        self._exact = None

    @property
    def rel(self) -> Relationship:
        return self._rel

    @rel.setter
    def rel(self, value: Relationship) -> None:
        self._rel = value
        self._exact = None

    def _operator(self):
        if self._exact is None:
            p = self.p
            self._exact = ExactStep(self._rel, p.a, p.rho, p.lambda2, p.lambda4)
        return self._exact

    def step(self, C: np.ndarray):
        """New (u, V) from C (call :meth:`update_relationship` after it, every round): u (d,)
        and V (K, d), the consensus's own arrays, valid until the next step."""
        p = self.p
        if p.variant == "exact":
            # joint minimiser of the augmented Lagrangian over (u, V), docs/ALGORITHMS.md section 2.2
            u, V = self._operator().step(C)
        else:
            # eq. solution1-2 and eq. solution1-3, the "+" sign as printed
            u, V = paper_step(self._rel, p.a, p.rho, p.lambda2, p.lambda4, C, self.V)
            # The printed "+" sign feeds V back into itself with gain lambda4 / omega_i, so large
            # lambda4 makes V grow geometrically: stop with a reason, not NaN in the results.
            if not np.abs(V).max() < 1e100:
                raise DivergenceError(
                    f"the paper variant's (u, V) step diverged at round {self.rounds + 1} "
                    f"(|V| > 1e100): its printed '+' sign on the lambda4 term makes V grow when "
                    f"lambda4 = {p.lambda4} is large against Omega's eigenvalues; lower --lambda4 "
                    f"or use --variant exact")
        self.u[...] = u
        self.V[...] = V
        self.rounds += 1
        return self.u, self.V

    def update_relationship(self, V: np.ndarray | None = None) -> None:
        """The Omega update from V (default: the V of the step just taken), every m-th step:
        apart from :meth:`step`, so that a server can send (u, V) first and update Omega while
        the workers compute; a D-ADMM node calls it before its step, with the V it gossiped."""
        p = self.p
        if p.relationship and self.rounds > 0 and self.rounds % p.omega_every == 0:
            self.rel = update_omega(self.V if V is None else V, p.omega_eps, self._rel)
            # build the next step's operator now: on a server this runs after the reply, while
            # the workers compute, instead of between their messages and the next reply
            if p.variant == "exact":
                self._operator()

    def state(self) -> dict:
        # the factors are stored: recomputing them would change the last bits
        rel = self._rel
        return {"omega_basis": rel.basis.copy(), "omega_values": rel.values.copy(),
                "omega_rest": np.float64(rel.rest), "V": self.V.copy(), "u": self.u.copy(),
                "rounds": np.int64(self.rounds)}

    def load_state(self, state: dict) -> None:
        self.rel = Relationship(np.array(state["omega_basis"], dtype=np.float64),
                                np.array(state["omega_values"], dtype=np.float64),
                                float(state["omega_rest"]))
        self.V[...] = state["V"]
        self.u[...] = state["u"]
        self.rounds = int(state["rounds"])


# Omega is written to results as a K x K matrix up to this many tasks (8 MiB); beyond, as its
# factors only (a K x K matrix at K = 100,000 would be 80 GB)
DENSE_OMEGA_MAX = 1024


def omega_arrays(rel: Relationship) -> dict:
    """{name: array} of Omega for a results file: ``omega_basis``, ``omega_values``,
    ``omega_rest`` (Omega = rest I + basis diag(values - rest) basis^T), and ``omega`` itself
    where K <= :data:`DENSE_OMEGA_MAX`."""
    out = {"omega_basis": rel.basis, "omega_values": rel.values,
           "omega_rest": np.array([rel.rest])}
    if rel.n_tasks <= DENSE_OMEGA_MAX:
        out["omega"] = rel.omega
    return out
