"""The paper's model (Omega learned every round) run with the factored Omega, as omtl-mpi runs
it, against the same run with the spec's K x K formulas, on the paper's synthetic family.

    python experiments/dense_reference.py [--tasks 1024] [--samples 300] [--seed 0] [--omega-eps E]

The K x K run replaces the consensus step (`omtl_mpi.algorithms.admm.Consensus`) by one that
forms Omega as a K x K matrix from the eigendecomposition of V V^T (its rounding-size
eigenvalues set to zero, as V's rank says they are) and takes the exact (u, V) step with P as
a K x K matrix (docs/ALGORITHMS.md sections 2.2 and 4, as written; tests/test_admm_math.py's
reference). It prints how many predictions the two runs differ in, the largest difference of
their final W, and each run's mean error and seconds; then the same for the factored run
against itself with every message of round 2 multiplied by 1 + 1e-15, which shows how much
of the difference a learned Omega makes of rounding alone. O(K^3) per round: at 1024 tasks a
few minutes on 2 cores.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from omtl_mpi.algorithms import admm, cadmm                     # noqa: E402
from omtl_mpi.algorithms.admm import AdmmParams                 # noqa: E402
from omtl_mpi.data.synthetic import generate                    # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from support.drive import simulate                               # noqa: E402


def dense_omega(V: np.ndarray, eps: float) -> np.ndarray:
    lam, Q = np.linalg.eigh(V @ V.T)
    cut = max(V.shape) * np.finfo(float).eps * max(lam.max(), 0.0)
    s = np.sqrt(np.where(lam > cut, lam, 0.0)) + eps
    omega = (Q * (s / s.sum())) @ Q.T
    return (omega + omega.T) / 2


class DenseConsensus(admm.Consensus):
    """The exact step and the Omega update with K x K matrices, as the spec writes them."""

    def __init__(self, params, n_tasks, dim):
        super().__init__(params, n_tasks, dim)
        self.dense = np.eye(n_tasks) / n_tasks

    def step(self, C):
        p, K = self.p, self.K
        w, Q = np.linalg.eigh(self.dense)
        w = np.maximum(w, 0.0)
        P = (Q * (w / ((p.a + p.rho) * w + p.lambda4))) @ Q.T
        pv = P.sum(axis=1)
        u = C.T @ (1 - p.rho * pv) / (p.lambda2 + p.rho * K - p.rho ** 2 * pv.sum())
        self.u[...] = u
        self.V[...] = P @ (C - p.rho * u)
        self.rounds += 1
        return self.u, self.V

    def update_relationship(self, V=None):
        p = self.p
        if p.relationship and self.rounds > 0 and self.rounds % p.omega_every == 0:
            self.dense = dense_omega(self.V if V is None else V, p.omega_eps)


class NudgedConsensus(admm.Consensus):
    """The factored step with one perturbation of rounding size: in round 2, every message
    c_k is multiplied by 1 + 1e-15 (what another order of a sum could do)."""

    def step(self, C):
        if self.rounds == 1:
            C = C * (1.0 + 1e-15)
        return super().step(C)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=1024)
    ap.add_argument("--samples", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--omega-eps", type=float, default=None,
                    help="Omega's ridge (default: the paper preset's, 1e-8)")
    args = ap.parse_args()
    _, X, y = generate(args.tasks, args.samples, args.seed)
    params = AdmmParams.paper()
    if args.omega_eps is not None:
        params = AdmmParams.paper(omega_eps=args.omega_eps)
    out = {}
    for name, consensus in (("factored", admm.Consensus), ("K x K", DenseConsensus),
                            ("nudged", NudgedConsensus)):
        cadmm.Consensus = consensus             # what the C-ADMM server builds
        start = time.perf_counter()
        preds, rows = simulate("c-admm", X, y, params=params)
        out[name] = (preds, rows, time.perf_counter() - start)
    (a, ra, ta), (b, rb, tb), (c, rc, _) = out.values()
    differ = sum(int((p != q).sum()) for p, q in zip(a, b))
    nudged = sum(int((p != q).sum()) for p, q in zip(a, c))
    errors = [np.mean([np.mean(p != t) for p, t in zip(preds, y)]) for preds in (a, b, c)]
    print(f"K = {args.tasks}, {args.samples} rounds, --preset paper, omega_eps "
          f"{params.omega_eps:g}: {differ} of {sum(len(t) for t in y)} predictions differ; "
          f"max |W difference| {np.abs(ra['W'] - rb['W']).max():.2e}; mean error "
          f"{errors[0]:.5f} (factored, {ta:.1f} s) and {errors[1]:.5f} (K x K, {tb:.1f} s). "
          f"The factored run with every message of round 2 times 1 + 1e-15: {nudged} "
          f"predictions differ, max |W difference| {np.abs(ra['W'] - rc['W']).max():.2e}, "
          f"mean error {errors[2]:.5f}")


if __name__ == "__main__":
    main()
