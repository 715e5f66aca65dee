"""The vote's mixture prior under D-ADMM's ``--sync partial``: every node estimates it from sums
it finds in the gossiped table, where a synchronous run sums over every node in one round.

D-ADMM has no server to agree the components with (:mod:`.served_prior` is C-ADMM's), and
asynchronous nodes never enter an exchange in the same round, so the agreement is built in the
table itself: each node's row carries, besides its consensus parts, the numbers of the estimate
in progress (:func:`columns`): a snapshot of its tasks' statistics tagged with the estimate e,
and its E-step sums of the EM step s it is at and of step s - 1, tagged (e, s). Estimates are
numbered 1, 2, ... alike on every node. A node

- starts estimate e + 1 (writes its snapshot) at its first round after it finished e in which
  the instances seen over all tasks (the run's plan, the same on every node) have reached
  :data:`.bayes.GROWTH` times the instances of e's totals (after the first estimate, also once
  its table shows that every node finished it: see :meth:`GossipedPrior._advanced`); the first
  as soon as any instance is seen;
- once its table holds every node's snapshot of e, sums them in node order (the totals): the
  first estimate takes the Gaussian prior and draws the centres (:func:`.mixture.first_centres`,
  as a synchronous run's first; until then, the Gaussian prior of the snapshots it holds); a
  later one takes ``moments_of(totals)`` and computes its E-step sums of step 1 under the last
  centres;
- once its table holds every node's E-step sums of step s, sums them in node order and makes
  the M-step; after the last (:data:`.mixture.EM_STEPS`), it takes the mixture
  (:func:`.mixture.mixture_prior`) and marks e finished (tag (e, :data:`DONE`)).

Every node thus computes every estimate from the same numbers in the same order: the same
prior to the bit, at different rounds, and the rounds never wait for it. Why two E-step slots:
node j moves to step s + 1 as soon as it holds every node's step-s sums, possibly before node i
has seen j's; j's row keeps them beside, and j cannot move to s + 2 before i has written s + 1,
which needs j's s. Why a snapshot is never overwritten before every node has read it: a node
finishes a later estimate e only once it holds every node's last E-step sums, so every node is
then past step 0 of e; the first estimate has no EM steps, hence the second's extra wait.
docs/ALGORITHMS.md section 2.9.
"""
from __future__ import annotations

import numpy as np

from . import bayes, mixture
from .bayes import stats_size

# the E-step tag's step once an estimate is finished (its last step's sums in the earlier slot)
DONE = mixture.EM_STEPS + 1


def columns(dim: int, start: int) -> tuple[dict, int]:
    """The prior's columns of a node's row from ``start``: {name: slice} and the row's width
    after them. ``snap_tag`` (1) and ``snap`` (:func:`.bayes.stats_size`), ``em_tag`` (e, s),
    ``em`` and ``em_last`` (:func:`.mixture.sums_size` each: steps s and s - 1)."""
    out = {}
    for name, size in (("snap_tag", 1), ("snap", stats_size(dim)), ("em_tag", 2),
                       ("em", mixture.sums_size(dim)), ("em_last", mixture.sums_size(dim))):
        out[name] = slice(start, start + size)
        start += size
    return out, start


def row_size(dim: int) -> int:
    """Numbers the prior adds to every node's row: 5 + 2 d^2 + d + 2 G (d (d + 1) / 2 + d + 3)."""
    return columns(dim, 0)[1]


class GossipedPrior:
    """A node's side of the estimates (module text): its ``expert`` (a
    :class:`.mixture.MixtureBayes` of the node's tasks) takes every prior; ``rows`` is the
    node's table of node rows (N, width), a view it merges into, ``cols`` the prior's columns
    (:func:`columns`) and ``node`` this node's row.

    Attributes
    ----------
    estimate : int
        The estimate in progress, or the last finished (0: none yet).
    step : int
        0: waiting for every node's snapshot; 1..EM_STEPS: for every node's E-step sums of that
        step; :data:`DONE`: ``estimate`` is finished.
    """

    def __init__(self, expert, rows: np.ndarray, cols: dict, node: int):
        self.expert, self.rows, self.cols, self.node = expert, rows, cols, node
        self.d, self.G = expert.d, expert.G
        self.estimate, self.step = 0, DONE
        self.at = 0.0                   # the instances in the totals of the estimate in progress
        self.held = 0                   # the snapshots of the provisional prior in use
        self.Sx = np.zeros((self.d, self.d))
        self.P = np.zeros((self.d, self.d))

    def advance(self, seen: float) -> None:
        """After a round's merge: go as far as the table allows (several steps in a round where
        it already holds every node's part, as with one node); ``seen``: the instances over all
        tasks up to this round (the plan's)."""
        while self._advanced(seen):
            pass

    def _advanced(self, seen: float) -> bool:
        rows, cols, e = self.rows, self.cols, self.estimate
        if self.step == DONE:
            if not (seen > 0 and seen >= bayes.GROWTH * self.expert.estimated_at):
                return False
            # the first estimate has no EM steps: a node may finish it before another has read
            # its snapshot, so the second waits until every node has finished the first (a
            # later estimate e is finished only once every node's last E-step sums are in,
            # so every node is then past reading the snapshots of e)
            if e == 1 and not all(_tag(r) == (1, DONE) for r in rows[:, cols["em_tag"]]):
                return False
            self.estimate, self.step = e + 1, 0
            own = rows[self.node]
            own[cols["snap"]] = self.expert.statistics()
            own[cols["snap_tag"]] = e + 1
            return True
        if self.step == 0:
            held = rows[:, cols["snap_tag"]][:, 0] == e
            if not held.all():
                if e == 1:
                    self._provisional(held)
                return False
            totals = _node_sum([r[cols["snap"]] for r in rows])
            self.at = float(totals[-2])
            expert = self.expert
            if e == 1:          # the synchronous first estimate: the Gaussian prior
                Pi, Pi_mu = bayes.prior(totals, self.d)
                expert.centres_, expert.share_ = mixture.first_centres(Pi, Pi_mu, self.G)
                expert._take(Pi, Pi_mu[:, None], np.zeros(1))
                self._finish()
                return True
            self.Sx[...], self.P[...] = mixture.moments_of(totals, self.d)
            self._e_step(1)
            return True
        s, parts = self.step, []
        for r in rows:
            tag = _tag(r[cols["em_tag"]])
            if tag == (e, s):
                parts.append(r[cols["em"]])
            elif tag == (e, s + 1):         # moved on: step s's sums are kept beside
                parts.append(r[cols["em_last"]])
            else:
                return False
        total = _node_sum(parts)
        expert = self.expert
        expert.centres_, expert.share_ = mixture.m_step(total, self.d, self.G)
        if s < mixture.EM_STEPS:
            self._e_step(s + 1)
        else:
            expert._take(*mixture.mixture_prior(expert.centres_, expert.share_, total, self.Sx))
            self._finish()
        return True

    def _provisional(self, held: np.ndarray) -> None:
        """Before the first estimate is agreed (its snapshots take the graph's diameter in
        rounds to reach every node), the Gaussian prior of the snapshots this node holds, taken
        again when more have come: an expert without a prior predicts +1 with margin 0, and
        its mistakes in those rounds would weigh it down in the vote for the rest of the run."""
        count = int(held.sum())
        if count == self.held:
            return
        self.held = count
        totals = _node_sum([r[self.cols["snap"]] for r in self.rows[held]])
        if totals[-2] > 0:
            Pi, Pi_mu = bayes.prior(totals, self.d)
            self.expert._take(Pi, Pi_mu[:, None], np.zeros(1))

    def _e_step(self, s: int) -> None:
        """This node's E-step sums of step ``s`` under the current centres into its row, the
        last step's kept beside (only the last step's within moments are read: P there)."""
        own, cols = self.rows[self.node], self.cols
        own[cols["em_last"]] = own[cols["em"]]
        own[cols["em"]] = self.expert._e_step(self.P if s == mixture.EM_STEPS else None)
        own[cols["em_tag"]] = (self.estimate, s)
        self.step = s

    def _finish(self) -> None:
        own, cols = self.rows[self.node], self.cols
        own[cols["em_last"]] = own[cols["em"]]
        own[cols["em"]] = 0.0
        own[cols["em_tag"]] = (self.estimate, DONE)
        self.step = DONE
        self.expert.estimated_at = self.at

    def state(self) -> dict:
        return {"gossiped_estimate": np.int64(self.estimate), "gossiped_step": np.int64(self.step),
                "gossiped_at": np.float64(self.at), "gossiped_held": np.int64(self.held),
                "gossiped_Sx": self.Sx.copy(), "gossiped_P": self.P.copy()}

    def load_state(self, state: dict) -> None:
        self.estimate, self.step = int(state["gossiped_estimate"]), int(state["gossiped_step"])
        self.at, self.held = float(state["gossiped_at"]), int(state["gossiped_held"])
        self.Sx[...] = state["gossiped_Sx"]
        self.P[...] = state["gossiped_P"]


def _tag(values) -> tuple:
    """An E-step tag (estimate, step) as ints."""
    return int(values[0]), int(values[1])


def _node_sum(parts: list) -> np.ndarray:
    """The sum of every node's part, in node order (the same bits on every node)."""
    total = parts[0].copy()
    for part in parts[1:]:
        total += part
    return total
