"""The vote's empirical-Bayes prior under ``--sync partial``: estimated by C-ADMM's server and
sent to the workers, where a synchronous run has every worker estimate it from the same totals.

Asynchronous workers hold replies of different server steps, so priors each estimated from its
own totals would differ from worker to worker, and the mixture prior's EM steps, each a sum of
every block's E-step sums under the same centres, cannot be exchanges that every rank enters
in the same round. So the server, which sums every worker's newest statistics (each a state
of its tasks: :func:`.cadmm.merges` takes the newest), decides the estimates as a worker would
(:func:`.mixture.em_steps`, the :data:`.bayes.GROWTH` rule) and publishes the prior in its
replies with a version; a worker takes a version newer than its own. An estimate's EM steps
are the synchronous ones, each made once every worker's E-step sums under that step's centres
(tagged with the step) have arrived: a worker computes them when a reply asks (a newer tag)
and sends them with its next message. The rounds never wait for them; an estimate's prior
comes some server steps later than a synchronous run's, and, with TAU bounding every worker's
delay, at most about ``EM_STEPS (TAU + 2)`` steps after it began. docs/ALGORITHMS.md section 2.9.
"""
from __future__ import annotations

import numpy as np

from . import bayes, mixture


def groups_of(dim: int) -> int:
    """The prior's components: the mixture's, or one (the Gaussian prior) where it has none."""
    return mixture.GROUPS if mixture.used(dim) else 1


def reply_size(dim: int) -> int:
    """Numbers of the prior in a reply: version, width, tag; Pi and P = Sx^-2 (d x d each);
    V (d x G); the log weights' constants (G); the EM step's centres (G x d) and weights (G)."""
    G = groups_of(dim)
    return 3 + 2 * dim * dim + 2 * dim * G + 2 * G


def sums_size(dim: int) -> int:
    """Numbers of a worker's E-step sums in its message (the sums and their tag; none without
    a mixture prior)."""
    return mixture.sums_size(dim) + 1 if mixture.used(dim) else 0


def _views(flat: np.ndarray, d: int) -> dict:
    """The named parts of a reply's prior (:func:`reply_size` numbers), views of ``flat``."""
    G = groups_of(d)
    out, offset = {}, 3
    for name, shape in (("Pi", (d, d)), ("P", (d, d)), ("V", (d, G)), ("const", (G,)),
                        ("centres", (G, d)), ("share", (G,))):
        size = int(np.prod(shape))
        out[name] = flat[offset: offset + size].reshape(shape)
        offset += size
    return out


class ServedPrior:
    """The server's side: the prior (:attr:`flat`, what every reply carries) from every
    worker's newest statistics and E-step sums, one :meth:`step` per server step."""

    def __init__(self, dim: int):
        self.d, self.mix = dim, mixture.used(dim)
        self.flat = np.zeros(reply_size(dim))
        self.parts = _views(self.flat, dim)
        self.estimated_at = 0.0
        self.em_left = 0            # EM steps left of the estimate in progress
        self._Sx = np.zeros((dim, dim))

    @property
    def version(self) -> int:
        return int(self.flat[0])

    @property
    def tag(self) -> int:
        return int(self.flat[2])

    def step(self, totals: np.ndarray, sums: list) -> None:
        """A server step: ``totals`` every task's statistics (the sum of every worker's newest),
        ``sums`` every worker's newest E-step sums (views, tag last), in rank order."""
        p, d = self.parts, self.d
        if self.em_left:
            if any(int(s[-1]) != self.tag for s in sums):
                return                      # a worker's sums for this EM step still to come
            total = sums[0][:-1].copy()
            for s in sums[1:]:               # rank order
                total += s[:-1]
            p["centres"][...], p["share"][...] = mixture.m_step(total, d)
            self.em_left -= 1
            if self.em_left:
                self.flat[2] += 1               # the next EM step's E-step sums, please
            else:
                self._take(*mixture.mixture_prior(p["centres"], p["share"], total, self._Sx))
            return
        N = float(totals[-2])
        if not (N > 0 and N >= bayes.GROWTH * self.estimated_at):
            return
        self.estimated_at = N
        Pi, Pi_mu = bayes.prior(totals, d)
        if not self.mix:
            if not self.version or bayes.moved((p["Pi"], p["V"][:, 0]), (Pi, Pi_mu)):
                self._take(Pi, Pi_mu[:, None], np.zeros(1))
        elif not self.version:
            p["centres"][...], p["share"][...] = mixture.first_centres(Pi, Pi_mu)
            self._take(Pi, Pi_mu[:, None], np.zeros(1))
        else:
            self._Sx[...], p["P"][...] = mixture.moments_of(totals, d)
            self.em_left = mixture.EM_STEPS
            self.flat[2] += 1

    def _take(self, Pi, V, const) -> None:
        p, width = self.parts, V.shape[1]
        p["Pi"][...] = Pi
        p["V"][:, :width] = V
        p["const"][:width] = const
        self.flat[1] = width
        self.flat[0] += 1

    def arrays(self) -> list:
        return [self.flat, self._Sx]

    def state(self) -> dict:
        return {"served": self.flat.copy(), "served_Sx": self._Sx.copy(),
                "served_estimated_at": np.float64(self.estimated_at),
                "served_em_left": np.int64(self.em_left)}

    def load_state(self, state: dict) -> None:
        self.flat[...] = state["served"]
        self._Sx[...] = state["served_Sx"]
        self.estimated_at = float(state["served_estimated_at"])
        self.em_left = int(state["served_em_left"])


class TakenPrior:
    """A worker's side: take a reply's prior when newer than the one in use, and compute the
    block's E-step sums into its message when the reply asks for an EM step not yet sent."""

    def __init__(self, expert, sums: np.ndarray | None):
        self.expert, self.sums = expert, sums       # sums: the message's part (tag last)
        self.version = self.tag = 0

    def receive(self, flat: np.ndarray) -> None:
        version, width, tag = int(flat[0]), int(flat[1]), int(flat[2])
        asked = self.sums is not None and tag > self.tag
        if version <= self.version and not asked:
            return                  # most rounds: the reply holds nothing new for the prior
        expert = self.expert
        p = _views(flat, expert.d)
        if self.sums is not None:
            # the components as the prior or the EM step left them (the E-step's, beside)
            expert.centres_, expert.share_ = p["centres"].copy(), p["share"].copy()
        if version > self.version:
            expert._take(p["Pi"].copy(), p["V"][:, :width].copy(), p["const"][:width].copy())
            self.version = version
        if asked:
            self.sums[:-1] = expert._e_step(p["P"])
            self.sums[-1] = tag
            self.tag = tag

    def state(self) -> dict:
        out = {"served_version": np.int64(self.version), "served_tag": np.int64(self.tag)}
        if self.sums is not None:
            out["served_sums"] = self.sums.copy()
        return out

    def load_state(self, state: dict) -> None:
        self.version, self.tag = int(state["served_version"]), int(state["served_tag"])
        if self.sums is not None:
            self.sums[...] = state["served_sums"]
