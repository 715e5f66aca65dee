"""The ADMM multi-task math shared by C-ADMM and D-ADMM (spec sections 2-4), as pure numpy.

Three pieces, each a pure function of arrays plus a small state object:

* :class:`AdmmParams` - the hyper-parameters, validated once;
* :class:`TaskBlock` - the worker side for a contiguous block of tasks: predict, w-step
  (eq. solution1-1), message ``c_k = z_k + rho w_k`` and the z-step (eq. solution1-4);
* :class:`Consensus` - the server side: (u, V) from C by variant "exact" or "paper" and the
  Omega update every m rounds.  D-ADMM nodes run the very same object on their gossiped table.

Arrays hold one row per task (K x d): the transpose of the paper's d x K matrices, so that a
block of tasks is a contiguous slice and a row is what travels over MPI.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, asdict

import numpy as np

from ..errors import ConfigError, UserError
from .losses import LOSSES, gradient_coef, predict
from .relationship import Relationship, exact_operator, pseudo_inverse, update_omega
from .wsteps import W_STEP_CLASSES, make_w_step

VARIANTS = ("exact", "paper")
W_STEPS = tuple(W_STEP_CLASSES)
# eta of the adaptive w-steps when none is given (chosen on the synthetic family, docs/WSTEP.md)
ADAPTIVE_ETA = 1.0


class DivergenceError(UserError):
    """The chosen hyper-parameters make the iteration diverge (reported, never NaN results)."""


@dataclass(frozen=True)
class AdmmParams:
    """Hyper-parameters of the ADMM learners; defaults are the paper's (spec section 1).

    ``eta = None`` means the paper's ``sqrt(T)``, T the longest stream's number of rounds,
    for the Euclidean w-step, and :data:`ADAPTIVE_ETA` for the adaptive ones (their metric
    D_t grows by itself, so a step control that also grows with T would double-count it);
    resolved by :meth:`resolved`.

    ``w_step`` picks the Bregman divergence of the w-step (docs/WSTEP.md):
    ``euclid`` |w - w_t|^2 / 2 (the paper's), ``adagrad`` with D_t = diag(sqrt(delta + sum of
    squared past gradients)), ``arow`` with D_t = I + sum over margin errors of x x^T / arow_r.
    """

    rho: float = 0.1
    eta: float | None = None
    lambda1: float = 0.01
    lambda2: float = 0.1
    lambda3: float = 0.01
    lambda4: float = 0.01
    variant: str = "exact"
    loss: str = "hinge"
    relationship: bool = True
    omega_every: int = 1
    omega_eps: float = 1e-8
    w_step: str = "euclid"
    delta: float = 1.0
    arow_r: float = 1.0

    def __post_init__(self):
        problems = []

        def finite(name, value):
            if not (isinstance(value, (int, float)) and math.isfinite(value)):
                problems.append(f"--{name.replace('_', '-')} must be a finite number, got {value!r}")
                return False
            return True

        for name in ("rho", "lambda1", "lambda2", "delta", "arow_r"):
            value = getattr(self, name)
            if finite(name, value) and value <= 0:
                problems.append(f"--{name.replace('_', '-')} must be > 0, got {value!r}")
        if self.w_step not in W_STEPS:
            problems.append(f"--w-step must be one of {', '.join(W_STEPS)}, got {self.w_step!r}")
        for name in ("lambda3", "lambda4", "omega_eps"):
            value = getattr(self, name)
            if finite(name, value) and value < 0:
                problems.append(f"--{name.replace('_', '-')} must be >= 0, got {value!r}")
        if self.eta is not None and finite("eta", self.eta) and self.eta < 0:
            problems.append(f"--eta must be >= 0, got {self.eta!r}")
        if self.variant not in VARIANTS:
            problems.append(f"--variant must be one of {', '.join(VARIANTS)}, got {self.variant!r}")
        if self.loss not in LOSSES:
            problems.append(f"--loss must be one of {', '.join(LOSSES)}, got {self.loss!r}")
        if not isinstance(self.omega_every, int) or self.omega_every < 1:
            problems.append(f"--omega-every must be an integer >= 1 (rounds), got {self.omega_every!r}")
        if problems:
            raise ConfigError("\n".join(problems))

    @property
    def a(self) -> float:
        """``a = lambda1 + lambda3``."""
        return self.lambda1 + self.lambda3

    def resolved(self, rounds: int) -> "AdmmParams":
        """These parameters with ``eta`` fixed: the paper's ``sqrt(T)`` when it was left unset."""
        if self.eta is not None:
            return self
        eta = math.sqrt(max(rounds, 1)) if self.w_step == "euclid" else ADAPTIVE_ETA
        return AdmmParams(**{**asdict(self), "eta": eta})


class TaskBlock:
    """Worker-side ADMM state and steps for a contiguous block of tasks.

    Holds ``W`` and ``Z`` (kb x d) and the latest ``u`` (d,) and ``V`` rows (kb x d) received
    from the consensus step.  All steps are vectorised over the block and the mini-batch.
    """

    def __init__(self, params: AdmmParams, n_tasks: int, dim: int, shared_u: bool = True):
        if params.eta is None:
            raise ValueError("resolve eta (AdmmParams.resolved) before building a TaskBlock")
        self.p = params
        self.W = np.zeros((n_tasks, dim))
        self.Z = np.zeros((n_tasks, dim))
        # one shared u for the block (multi-task), or one per task (tasks learned alone)
        self.u = np.zeros(dim) if shared_u else np.zeros((n_tasks, dim))
        self.V = np.zeros((n_tasks, dim))
        self.w_step = make_w_step(params, n_tasks, dim)

    def predict_and_step(self, X: np.ndarray, y: np.ndarray, inv_count: np.ndarray):
        """Predict a round's instances, then take the w-step and return the message C.

        Parameters
        ----------
        X : ndarray, shape (B, kb, d)
            The round's mini-batch for every task of the block (zero rows for padding).
        y : ndarray of int8, shape (B, kb)
            Labels, 0 for padding.
        inv_count : ndarray, shape (kb,)
            1 / (number of real instances of each task in this batch), 1 where there are none.

        Returns
        -------
        yhat : ndarray of int8, shape (B, kb)
            Predictions made before the labels were revealed.
        C : ndarray, shape (kb, d)
            ``c_k = z_k + rho w_k`` for each task, the message to the consensus step.
        """
        p = self.p
        margins = np.einsum("kd,bkd->bk", self.W, X)
        yhat = predict(margins)
        coef = gradient_coef(p.loss, y, margins, yhat)
        G = np.einsum("bk,bkd->kd", coef, X)
        if X.shape[0] > 1:          # with B = 1 every count is 1 (padding has a zero gradient)
            G *= inv_count[:, None]
        # eq. solution1-1: the Bregman-proximal linearised w-step (wsteps.py)
        self.W = W = self.w_step.step(self.W, self.u + self.V, G, self.Z, X, coef, inv_count)
        return yhat, self.Z + p.rho * W

    def dual_step(self, u: np.ndarray, V: np.ndarray) -> None:
        """Store the consensus (u, V rows of this block) and take the z-step (eq. solution1-4)."""
        # copy, not alias: under MPI, u and V live in a receive buffer that the next round reuses
        self.u[...] = u
        self.V[...] = V
        self.Z += self.p.rho * (self.W - self.u - self.V)

    def state(self) -> dict:
        """Arrays that fully describe this block's state (for checkpoints and checks)."""
        out = {"W": self.W.copy(), "Z": self.Z.copy(), "u": self.u.copy(), "V": self.V.copy()}
        out.update({f"wstep_{k}": v for k, v in self.w_step.state().items()})
        return out

    def load_state(self, state: dict) -> None:
        """Restore a :meth:`state`."""
        for key in ("W", "Z", "u", "V"):
            setattr(self, key, np.array(state[key], dtype=np.float64))
        self.w_step.load_state({k[6:]: v for k, v in state.items() if k.startswith("wstep_")})


class Consensus:
    """The (u, V) step and the Omega update of C-ADMM's server (and of every D-ADMM node).

    Call :meth:`step` once per round with all tasks' messages C (K x d, task order).
    """

    def __init__(self, params: AdmmParams, n_tasks: int, dim: int):
        self.p = params
        self.K = n_tasks
        self.rel = Relationship.identity(n_tasks)
        self.V = np.zeros((n_tasks, dim))     # V of the previous round (the paper's V_old)
        self.u = np.zeros(dim)
        self.rounds = 0                       # consensus steps taken so far
        self._operator = None                 # cached P or Omega^+ for the current Omega

    def _cached_operator(self) -> np.ndarray:
        if self._operator is None:
            p = self.p
            if p.variant == "exact":
                self._operator = exact_operator(self.rel, p.a, p.rho, p.lambda4)
            else:
                pinv = pseudo_inverse(self.rel)
                self._operator = (p.lambda4 / 2.0) * (pinv + pinv.T)
        return self._operator

    def step(self, C: np.ndarray):
        """New (u, V) from C (call :meth:`update_relationship` after it, every round).

        Returns
        -------
        u : ndarray, shape (d,)
        V : ndarray, shape (K, d)
        """
        p, K = self.p, self.K
        op = self._cached_operator()
        if p.variant == "exact":
            # joint minimiser of the augmented Lagrangian over (u, V), spec section 2
            ones_p = op.sum(axis=1)
            s = float(ones_p.sum())
            u = ((1.0 - p.rho * ones_p) @ C) / (p.lambda2 + p.rho * K - p.rho * p.rho * s)
            V = op @ (C - p.rho * u)
        else:
            a = p.a
            # eq. solution1-2 and eq. solution1-3, the "+" sign as printed
            u = a * C.sum(axis=0) / (a * (p.lambda2 + p.rho * K) + p.lambda2 * p.rho)
            V = (p.lambda2 / (p.lambda2 * (a + p.rho) + p.rho * K * a)) * C + op @ self.V
            # The printed "+" sign feeds V back into itself with gain lambda4 / omega_i, so large
            # lambda4 makes V grow geometrically: stop with a reason, not NaN in the results.
            if not np.abs(V).max() < 1e100:
                raise DivergenceError(
                    f"the paper variant's (u, V) step diverged at round {self.rounds + 1} "
                    f"(|V| > 1e100): its printed '+' sign on the lambda4 term makes V grow when "
                    f"lambda4 = {p.lambda4} is large against Omega's eigenvalues; lower --lambda4 "
                    f"or use --variant exact")
        self.u, self.V = u, V
        self.rounds += 1
        return u, V

    def update_relationship(self, V: np.ndarray | None = None) -> None:
        """The Omega update from V (default: the V of the step just taken), every m-th step.

        Separate from :meth:`step` so that a server can send (u, V) first and update Omega
        while the workers compute: the numbers are the same, the critical path is shorter.
        A D-ADMM node calls it before its step, with the V it gossiped (spec section 3).
        """
        p = self.p
        if p.relationship and self.rounds > 0 and self.rounds % p.omega_every == 0:
            self.rel = update_omega(self.V if V is None else V, p.omega_eps, self.rel)
            self._operator = None

    @property
    def omega(self) -> np.ndarray:
        return self.rel.omega

    def state(self) -> dict:
        # the eigendecomposition is stored too: recomputing it would change the last bits
        return {"omega_evals": self.rel.evals.copy(), "omega_evecs": self.rel.evecs.copy(),
                "V": self.V.copy(), "u": self.u.copy(),
                "rounds": np.int64(self.rounds)}

    def load_state(self, state: dict) -> None:
        self.rel = Relationship(np.array(state["omega_evals"], dtype=np.float64),
                                np.array(state["omega_evecs"], dtype=np.float64))
        self.V = np.array(state["V"], dtype=np.float64)
        self.u = np.array(state["u"], dtype=np.float64)
        self.rounds = int(state["rounds"])
        self._operator = None
