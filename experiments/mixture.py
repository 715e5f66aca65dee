"""A prototype for issue 35 (sharing that finds the groups): the empirical-Bayes expert with a
mixture prior, measured on the selection sets of step 8 (experiments/PROTOCOL.md).

    python experiments/mixture.py [--baseline] [--groups 4 8] [--temper 1 16] [--em-steps 0 20]
        [--within-moments] [--isotropic] [--within V] [--true-groups [--pooled]]
        [--per-round [--steps-at-estimate M] [--init gaussian|kmeans|axes] [--relax F]]
        [--folder DIR] [--raw ../shared/data]

(The package now has the chosen form of this expert, omtl_mpi/algorithms/mixture.py; this
script is the prototype that led to it, kept to run its table again.)

The package's expert (omtl_mpi/algorithms/bayes.py) puts one Gaussian prior N(mu, Sigma) on
the tasks' models. Tasks in a few latent groups are better described by a mixture
``sum_g pi_g N(c_g, Sigma_w)`` with one within-group covariance. With Sigma_w shared, the
mixture costs little more than the Gaussian: a task's posterior precision ``Pi_w + Q_k / s2``
is the same under every component, so A_k is shared, and under component g

    h_kg = A_k (Pi_w c_g + s_k / s2) = h0_k + A_k v_g,   v_g = Pi_w c_g,
    log p(data_k | g) = log pi_g - c_g . v_g / 2 + v_g . A_k v_g / 2 + v_g . h0_k + const_k,

so a task keeps h0_k = A_k s_k / s2 and the G vectors A_k v_g (each updated with A_k by
Sherman-Morrison), and predicts with the posterior mean ``sum_g r_kg h_kg``, r_kg its
posterior responsibilities: exact Bayes for the mixture, whatever the stream's length.

The mixture is estimated where the package estimates its Gaussian prior (at 1.2x growth of
the instances): Sigma_total and mu by the package's method of moments; the centres c_g by
weighted k-means (weights n_k, k-means++ from a fixed seed, warm-started) of the tasks'
posterior means under that Gaussian prior, then (``--em-steps``) by EM for a mixture of linear
regressions over the tasks: responsibilities from each task's likelihood under a component's
model, ``c_g = (sum_k r_kg Q_k + ridge I)^-1 sum_k r_kg s_k`` (G (d^2 + d) sums over the tasks:
what blocks could send); Sigma_w = Sigma_total less the centres' weighted spread, or
(``--within-moments``) by the method of moments within each component, floored as the
package floors Sigma, or (``--isotropic``) its mean eigenvalue times I: the moments of a few
instances per task are noise of either sign in every direction, which their mean cancels. This prototype reads every task's arrays in one process (neither
the k-means seeding nor the EM steps are distributed); it answers only whether the mixture's
posterior pays, before anyone builds its messages. ``--true-groups``, ``--pooled`` and
``--within`` are diagnoses (centres from the draws' latent groups, a fixed within variance):
bounds on what better estimates could give, not candidates.

``--per-round`` asks what blocks could do, each EM step being one exchange of the blocks' sums:
``--em-steps`` steps in every round and ``--steps-at-estimate`` steps in a round that ends in
an estimate (as many exchanges), the prior taken only at the estimates, Sigma_w by moments made
isotropic; the first estimate takes the Gaussian prior and draws the centres from it
(``--init gaussian``; ``kmeans``: k-means of the posterior means, which no block can send, as
a diagnosis; ``axes``: mu plus and minus Sigma's principal axes), ``--relax``: the centres
moved by that multiple of an EM step (over-relaxed EM).

It runs C-ADMM with the defaults (``omtl_mpi.run_streams``), the expert replaced (the package's
mixture prior turned off, ``mixture.GROUPS = 1``, so that the baseline is the Gaussian prior), on the
personal draws 100, 101 and 102 (draw 100 + i in stream order i) and on Landmine (orders 0,
1, 2), and prints the mean per-task error of each.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import omtl_mpi                                            # noqa: E402
from omtl_mpi.algorithms import admm, bayes, mixture       # noqa: E402
from omtl_mpi.algorithms.bayes import EmpiricalBayes, FLOOR, inverse_tasks_last  # noqa: E402
import groups                                              # noqa: E402
from omtl_mpi.data.personal import task_groups             # noqa: E402


def kmeans(points: np.ndarray, weights: np.ndarray, centres, G: int, rng, steps: int = 10):
    """Weighted k-means of ``points`` (n, d): (centres (G, d), their weights' shares (G,)).
    The prototype weighs tasks by their instances here (a long stream's posterior mean is its
    model) and counts each task once in the EM steps' shares (pi_g is over tasks)."""
    total = weights.sum()
    if centres is None:                                    # k-means++ from the rng
        first = rng.choice(len(points), p=weights / total)
        centres = [points[first]]
        for _ in range(1, G):
            dist = np.min([((points - c) ** 2).sum(axis=1) for c in centres], axis=0) * weights
            centres.append(points[rng.choice(len(points), p=dist / dist.sum())])
        centres = np.array(centres)
    for _ in range(steps):
        dist = ((points[:, None, :] - centres[None]) ** 2).sum(axis=2)       # (n, G)
        label = dist.argmin(axis=1)
        for g in range(G):
            w = weights[label == g]
            if w.sum() > 0:
                centres[g] = (points[label == g] * w[:, None]).sum(axis=0) / w.sum()
    label = ((points[:, None, :] - centres[None]) ** 2).sum(axis=2).argmin(axis=1)
    share = np.array([weights[label == g].sum() for g in range(G)]) / total
    return centres, share


class MixtureBayes(EmpiricalBayes):
    """The expert with a mixture prior (one process only: see the module's text)."""

    GROUPS = 4
    TEMPER = 1.0          # the log responsibilities' multiple, prior weights included (1: exact Bayes)
    TRUE_GROUPS = None    # diagnosis only: every task's latent group
    EM_STEPS = 0          # EM steps of the mixture of regressions per estimate (0: k-means only)
    RIDGE = 1.0           # the components' least squares' ridge
    WITHIN = None         # diagnosis only: a fixed, isotropic within-group variance
    WITHIN_MOMENTS = False  # Sigma_w by moments within each component (with EM steps)
    ISOTROPIC = False     # Sigma_w as its mean eigenvalue times I
    POOLED = False        # diagnosis only (with TRUE_GROUPS): the groups' pooled least squares
    INIT = "gaussian"
    RELAX = 1.0
    STEPS = 1
    STEPS_AT_ESTIMATE = 0
    PER_ROUND = False     # one EM step every round (what blocks' sums allow), the prior taken
                          # at the estimates; the first estimate takes the Gaussian prior and
                          # draws the centres from it (no k-means: nothing a block can send)

    def __init__(self, n_tasks: int, dim: int):
        super().__init__(n_tasks, dim)
        G = self.GROUPS
        self._h0 = np.zeros((dim, n_tasks))
        self._AV = np.zeros((dim, G, n_tasks))
        self._V = np.zeros((dim, G))
        self._const = np.zeros(G)
        self._centres = None
        self._rng = np.random.default_rng(12345)

    # -- the prior ---------------------------------------------------------------------------
    def set_totals(self, totals: np.ndarray) -> None:
        """At the package's estimates (1.2x growth): the mixture, taken every time."""
        self.totals[...] = totals
        N = self.totals[-2]
        if self.PER_ROUND:
            return self._per_round(N)
        if N > 0 and N >= bayes.GROWTH * self.estimated_at:
            self.estimated_at = N
            self._estimate_mixture(bayes.prior(self.totals, self.d))

    def _estimate_mixture(self, gaussian) -> None:
        Pi, Pi_mu = gaussian
        mu = np.linalg.solve(Pi, Pi_mu)
        Sigma = np.linalg.inv(Pi)
        started = np.flatnonzero(self.n > 0)
        # the tasks' posterior means under the Gaussian prior
        P = np.take(self._Q[:, started], self._unpack, axis=0) / bayes.NOISE + Pi[:, :, None]
        inverse_tasks_last(P, np.empty_like(P))
        b = self._s[:, started] / bayes.NOISE + Pi_mu[:, None]
        h = np.einsum("ijk,jk->ik", P, b).T                          # (n, d)
        G = self.GROUPS
        if self.TRUE_GROUPS is not None:        # diagnosis: the centres of the true groups
            label, w = self.TRUE_GROUPS[started], self.n[started]
            if self.POOLED:                 # the group's pooled least squares
                Qs = np.take(self._Q[:, started], self._unpack, axis=0)
                self._centres = np.array([np.linalg.solve(
                    Qs[..., label == g].sum(axis=2) + 1e-3 * np.eye(self.d),
                    self._s[:, started][:, label == g].sum(axis=1)) for g in range(G)])
            else:
                self._centres = np.array([(h[label == g] * w[label == g, None]).sum(axis=0)
                                          / max(w[label == g].sum(), 1e-12) for g in range(G)])
            share = np.array([w[label == g].sum() for g in range(G)]) / w.sum()
        else:
            first = self._centres is None
            self._centres, share = kmeans(h, self.n[started], self._centres, G, self._rng,
                                          steps=10 if first or not self.EM_STEPS else 0)
            if self.EM_STEPS:
                self._centres, share, r = self._regressions(started, share)
        share = np.maximum(share, 1e-3)
        share /= share.sum()
        spread = self._centres - mu
        between = (spread.T * share) @ spread
        within = Sigma - between
        if self.WITHIN_MOMENTS and self.EM_STEPS and self.TRUE_GROUPS is None:
            within = self._within_by_moments(started, r, share)
        within = (within + within.T) / 2.0
        values, vectors = np.linalg.eigh(within)
        if self.ISOTROPIC:          # one variance, the mean eigenvalue: its noise averages out
            values[:] = values.mean()
        scale = self.d / max(float(np.trace(self.totals[self.d ** 2:2 * self.d ** 2]
                                            .reshape(self.d, self.d))
                                   / max(self.totals[-2], 1.0)), np.finfo(float).tiny)
        values = np.maximum(values, FLOOR * max(float(values[-1]), scale))
        if self.WITHIN is not None:            # diagnosis: a fixed within-group variance
            values[:] = self.WITHIN
        Pi_w = (vectors / values) @ vectors.T
        self._V = Pi_w @ self._centres.T                              # (d, G)
        self._const = np.log(share) - 0.5 * np.einsum("gd,dg->g", self._centres, self._V)
        self._prior = (Pi_w, Pi_w @ mu)
        self.prior_version += 1

    def _per_round(self, N) -> None:
        """One EM step from this round's statistics; at an estimate, the prior taken from the
        EM's centres (the first: the Gaussian prior, and centres drawn from it)."""
        d, G = self.d, self.GROUPS
        started = np.flatnonzero(self.n > 0)
        estimate = N > 0 and N >= bayes.GROWTH * self.estimated_at
        if self._centres is not None and len(started) and (estimate or self.STEPS):
            self.EM_STEPS = self.STEPS_AT_ESTIMATE if estimate and self.STEPS_AT_ESTIMATE else self.STEPS
            old = self._centres
            self._centres, self._share, r = self._regressions(started, self._share)
            self._centres = old + self.RELAX * (self._centres - old)
            share = np.maximum(self._share, 1e-3)
            share /= share.sum()
            self._pending_within = self._within_by_moments(started, r, share)
        if not (N > 0 and N >= bayes.GROWTH * self.estimated_at):
            return
        self.estimated_at = N
        gaussian = bayes.prior(self.totals, d)
        if self._centres is None:
            Pi, Pi_mu = gaussian
            mu = np.linalg.solve(Pi, Pi_mu)
            L = np.linalg.cholesky(np.linalg.inv(Pi))
            if self.INIT == "kmeans":
                P = np.take(self._Q[:, started], self._unpack, axis=0) / bayes.NOISE + Pi[:, :, None]
                inverse_tasks_last(P, np.empty_like(P))
                b = self._s[:, started] / bayes.NOISE + Pi_mu[:, None]
                h = np.einsum("ijk,jk->ik", P, b).T
                self._centres, self._share = kmeans(h, self.n[started], None, G, self._rng)
            elif self.INIT == "axes":
                values, vectors = np.linalg.eigh(np.linalg.inv(Pi))
                axes = (vectors * np.sqrt(values))[:, ::-1].T          # largest first
                self._centres = mu + np.concatenate([axes, -axes])[
                    np.arange(G) // 2 + (np.arange(G) % 2) * d]
                self._share = np.full(G, 1.0 / G)
            else:
                self._centres = mu + self._rng.standard_normal((G, d)) @ L.T
                self._share = np.full(G, 1.0 / G)
            self._V = Pi_mu[:, None]                            # one component: the Gaussian
            self._const = np.zeros(1)
            self._prior = gaussian
            self.prior_version += 1
            return
        share = np.maximum(self._share, 1e-3)
        share /= share.sum()
        within = (self._pending_within + self._pending_within.T) / 2.0
        mean = np.trace(within) / d
        scale = d / max(float(np.trace(self.totals[d * d:2 * d * d].reshape(d, d))
                              / max(self.totals[-2], 1.0)), np.finfo(float).tiny)
        value = max(mean, FLOOR * max(mean, scale))
        Pi_w = np.eye(d) / value
        self._V = Pi_w @ self._centres.T
        self._const = np.log(share) - 0.5 * np.einsum("gd,dg->g", self._centres, self._V)
        self._prior = (Pi_w, Pi_w @ np.linalg.solve(gaussian[0], gaussian[1]))
        self.prior_version += 1

    def _regressions(self, started, share):
        """EM for a mixture of linear regressions over the tasks (each task's data from one
        component's model, noise s2): E-step r_kg from the likelihood, M-step each
        component's least squares over its tasks' pooled statistics (G (d^2 + d) sums)."""
        d, G = self.d, self.GROUPS
        Q, s = self._Q[:, started], self._s[:, started]          # packed (p, n), (d, n)
        double = np.where(self._rows == self._cols, 1.0, 2.0)
        C = self._centres
        for _ in range(self.EM_STEPS):
            quad = (C[:, self._rows] * C[:, self._cols] * double) @ Q   # c^T Q_k c (G, n)
            log_r = (C @ s - 0.5 * quad) / bayes.NOISE + np.log(np.maximum(share, 1e-12))[:, None]
            log_r -= log_r.max(axis=0)
            r = np.exp(log_r)
            r /= r.sum(axis=0)
            pooled = (Q @ r.T)[self._unpack]                   # (d, d, G)
            rhs = s @ r.T                                      # (d, G)
            C = np.array([np.linalg.solve(pooled[..., g] + self.RIDGE * np.eye(d), rhs[:, g])
                          for g in range(G)])
            share = r.sum(axis=1) / r.shape[1]
        return C, share, r

    def _within_by_moments(self, started, r, share):
        """Sigma_w by the method of moments within each component (bayes.py's for Sigma, with
        each task's statistics weighted by its responsibilities): E[b b^T | g] from
        M_g = sum_k r_kg (s_k s_k^T - Q_k) / n_k over N1_g = sum_k r_kg (n_k - 1), b = Sx beta;
        Sigma_g = Sx^+ E[b b^T | g] Sx^+ - c_g c_g^T, pooled with the components' shares."""
        d = self.d
        N = max(self.totals[-2], 1.0)
        Sx_inv = np.linalg.pinv(self.totals[d * d:2 * d * d].reshape(d, d) / N, hermitian=True)
        n, s, Q = self.n[started], self._s[:, started], self._Q[:, started]
        weights = r / n                                              # (G, n)
        within = np.zeros((d, d))
        for g in range(self.GROUPS):
            N1 = float(r[g] @ (n - 1.0))
            if N1 <= 0.0:
                continue
            M = (s * weights[g]) @ s.T - (Q @ weights[g])[self._unpack]
            second = Sx_inv @ (M / N1) @ Sx_inv
            within += share[g] * (second - np.outer(self._centres[g], self._centres[g]))
        return within

    # -- the tasks' matrices -----------------------------------------------------------------
    def _matrices(self, active, store: bool):
        """A (d, d, na) of the tasks ``active``, with h0 and A V computed afresh where stale
        (the prior and its centres are always set together: no Gaussian h is needed)."""
        stale = self.version[active] != self.prior_version
        if stale.any():
            Pi = self._prior[0]
            idx = np.arange(len(self.n))[active][stale]
            fresh = np.take(self._Q[:, idx], self._unpack, axis=0) / bayes.NOISE + Pi[:, :, None]
            inverse_tasks_last(fresh, np.empty_like(fresh))
            self._A[..., idx] = fresh
            self._h0[:, idx] = np.einsum("ijk,jk->ik", fresh, self._s[:, idx] / bayes.NOISE)
            if self._AV.shape[1] != self._V.shape[1]:
                self._AV = np.zeros((self.d, self._V.shape[1], len(self.n)))
            self._AV[:, :, idx] = np.einsum("ijk,jg->igk", fresh, self._V)
            self.version[idx] = self.prior_version
        return self._A[..., active]

    def margins(self, X, active=slice(None), store: bool = False):
        if X.shape[0] != 1:
            raise SystemExit("the prototype learns one instance per task a round (batch 1) only")
        self._Ax = self._x = None
        if self._prior is None:
            return np.zeros(X.shape[:2])
        A = self._matrices(active, store)
        x = X[0].T.copy()
        Ax = np.einsum("ijk,jk->ik", A, x)
        if store:
            self._x, self._Ax = x, Ax
        h0, AV = self._h0[:, active], self._AV[:, :, active]
        log_r = self._const[:, None] + 0.5 * np.einsum("dgk,dg->gk", AV, self._V) \
            + self._V.T @ h0
        log_r *= self.TEMPER
        log_r -= log_r.max(axis=0)
        r = np.exp(log_r)
        r /= r.sum(axis=0)
        # sum_g r_g h_kg . x = h0 . x + sum_g r_g v_g . (A x)
        return (np.einsum("ik,ik->k", h0, x) + (r * (self._V.T @ Ax)).sum(axis=0))[None]

    def _update_matrices(self, x, y, count, active) -> None:
        if x is None:
            raise SystemExit("the prototype learns one instance per task a round (batch 1) only")
        current = self.version[active] == self.prior_version
        Ax = self._Ax if self._Ax is not None else np.einsum("ijk,jk->ik", self._A[..., active], x)
        scale = 1.0 / (bayes.NOISE + np.einsum("ik,ik->k", x, Ax))
        scale *= current & (y != 0.0)
        h0 = self._h0[:, active]
        h0 += Ax * ((y - np.einsum("ik,ik->k", x, h0)) * scale)
        self._h0[:, active] = h0
        AV = self._AV[:, :, active]
        AV -= Ax[:, None, :] * ((self._V.T @ Ax) * scale)[None]
        self._AV[:, :, active] = AV
        A = self._A[..., active]
        u = Ax * np.sqrt(scale)
        A -= u[:, None, :] * u[None, :, :]
        self._A[..., active] = A


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, nargs="+", default=[4])
    parser.add_argument("--temper", type=float, nargs="+", default=[1.0])
    parser.add_argument("--raw", default=os.path.join(ROOT, "..", "shared", "data"))
    parser.add_argument("--folder", help="where the sets are drawn (default: a temporary folder)")
    parser.add_argument("--baseline", action="store_true", help="also run the package's expert")
    parser.add_argument("--em-steps", type=int, nargs="+", default=[0],
                        help="EM steps of the mixture of regressions per estimate (0: k-means)")
    parser.add_argument("--within-moments", action="store_true",
                        help="with EM steps: Sigma_w by moments within each component")
    parser.add_argument("--isotropic", action="store_true",
                        help="Sigma_w as its mean eigenvalue times the identity")
    parser.add_argument("--per-round", action="store_true",
                        help="one EM step a round, the prior taken at the estimates (as blocks could)")
    parser.add_argument("--init", default="gaussian", choices=["gaussian", "kmeans", "axes"])
    parser.add_argument("--relax", type=float, default=1.0)
    parser.add_argument("--steps-at-estimate", type=int, default=0)
    parser.add_argument("--within", type=float,
                        help="diagnosis: a fixed, isotropic within-group variance")
    parser.add_argument("--true-groups", action="store_true",
                        help="diagnosis: centres from the draws' latent groups (G = 4)")
    parser.add_argument("--pooled", action="store_true",
                        help="diagnosis, with --true-groups: each group's pooled least squares")
    args = parser.parse_args()
    if args.pooled and not args.true_groups:
        parser.error("--pooled needs --true-groups (it pools each latent group's tasks)")
    if (args.within_moments or args.isotropic) and not any(args.em_steps) and not args.per_round:
        parser.error("--within-moments and --isotropic need --em-steps above 0")
    if args.true_groups and args.groups != [4]:
        parser.error("--true-groups needs --groups 4 (the family's latent groups)")
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.folder or tmp
        os.makedirs(folder, exist_ok=True)
        draws = []
        for i, seed in enumerate(groups.PERSONAL_DRAWS):
            path = os.path.join(folder, f"personal-{seed}.h5")
            if not os.path.exists(path):
                groups.omtl(["data", "synth", "--family", "personal", "--seed", str(seed), "-o", path])
            draws.append((path, i))
        landmine = os.path.join(folder, "landmine.h5")
        mat = os.path.join(args.raw, "landmine", "LandmineData.mat")
        if not os.path.exists(landmine) and os.path.exists(mat):
            groups.omtl(["data", "import", "landmine", mat, "-o", landmine])
        runs = draws + ([(landmine, s) for s in (0, 1, 2)] if os.path.exists(landmine) else [])
        data = {path: groups.streams(path) for path, _ in runs}
        candidates = ([("the package's expert", None, None, 0)] if args.baseline else []) + \
            [(f"mixture, G = {g}, temper {t}, EM steps {e}", g, t, e) for g in args.groups
             for t in args.temper for e in args.em_steps]
        print("| candidate | personal 100 | 101 | 102 | personal mean | over all instances "
              "| Landmine | s |")
        print("|---|---|---|---|---|---|---|---|")
        MixtureBayes.WITHIN, MixtureBayes.POOLED = args.within, args.pooled
        MixtureBayes.WITHIN_MOMENTS, MixtureBayes.ISOTROPIC = args.within_moments, args.isotropic
        MixtureBayes.PER_ROUND = args.per_round
        MixtureBayes.INIT = args.init
        MixtureBayes.RELAX = args.relax
        MixtureBayes.STEPS_AT_ESTIMATE = args.steps_at_estimate
        # the package's own mixture off: the expert is the Gaussian one or this prototype's
        mixture.GROUPS = 1
        for label, G, temper, steps in candidates:
            admm.EmpiricalBayes = EmpiricalBayes if G is None else MixtureBayes
            MixtureBayes.GROUPS, MixtureBayes.TEMPER = G or 1, temper or 1.0
            MixtureBayes.EM_STEPS = MixtureBayes.STEPS = steps
            start = time.perf_counter()
            res = []
            for path, s in runs:
                draw = next((seed for seed in groups.PERSONAL_DRAWS if path.endswith(f"-{seed}.h5")), None)
                MixtureBayes.TRUE_GROUPS = (task_groups(2000, 4, draw)
                                            if args.true_groups and draw is not None else None)
                res.append(omtl_mpi.run_streams(*data[path], algo="c-admm", seed=s))
            personal = res[:len(draws)]
            lm = [r.mean_error for r in res[len(draws):]]
            print(f"| {label} | " + " | ".join(f"{r.mean_error:.4f}" for r in personal)
                  + f" | {np.mean([r.mean_error for r in personal]):.4f}"
                  + f" | {np.mean([r.overall_error for r in personal]):.4f}"
                  + (" | n/a" if args.true_groups or not lm else f" | {np.mean(lm):.4f}")
                  + f" | {time.perf_counter() - start:.0f} |", flush=True)
    admm.EmpiricalBayes = EmpiricalBayes
    assert bayes.EmpiricalBayes is EmpiricalBayes


if __name__ == "__main__":
    main()
