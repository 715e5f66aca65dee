"""C-ADMM (paper Algorithm 1): rank 0 is the server, workers hold contiguous blocks of tasks.

Messages are flat float64 arrays, made of parts (docs/ALGORITHMS.md section 2.5):

* up, per worker: with Omega fixed at I/K (the defaults) the change of the sum of its tasks'
  messages c_k (d numbers), since every v_k then follows from c_k and u alone; with a learned
  Omega (or the paper variant), its tasks' c_k (the paper's protocol, kb d numbers). With the
  vote (docs/ALGORITHMS.md section 2.6) also the round's mistakes of its experts (3 numbers)
  and what the related expert needs of its tasks (the change of their part of H, d x d, or
  their models, kb x d, whichever is smaller for the run: :class:`.experts.Related`); with
  more tasks than features, also the change of its tasks' statistics for the empirical-Bayes
  expert (2 d^2 + d + 2 numbers: :mod:`.bayes`).
* down, per worker: u; with a learned Omega its tasks' v_k; with the vote every task's
  mistakes and H, or its tasks' related models (kb x d), and every task's statistics for the
  empirical-Bayes expert.

So with the defaults a round's messages and the server's work do not grow with the tasks, and
a worker's work follows its tasks that have an instance in the round.
"""
from __future__ import annotations

import numpy as np

from .admm import FIXED, GIVEN, AdmmParams, Consensus, TaskBlock, coupling, omega_arrays
from .bayes import stats_size
from .experts import BAYES, MOMENT, ROWS, directions, related_rows, vote_experts
from .relationship import ExactStep, Relationship


def related_form(params, n_tasks: int, dim: int) -> str | None:
    """The form of the related expert in C-ADMM (None without the vote): H (d x d numbers in
    every message, O(d^2) per task) with more tasks than features, else the tasks' rows
    (kb x d numbers, O(K d) per task on the server), the smaller of the two."""
    if not params.experts:
        return None
    return MOMENT if n_tasks > dim else ROWS


def _vote_parts(params, n_tasks: int, kb: int, dim: int, mistakes: str) -> list:
    """(name, size) of the vote's parts of a message (none without the vote): the experts'
    mistakes (named ``mistakes``), the related expert's statistic and, where the vote has
    it, the empirical-Bayes expert's statistics."""
    form = related_form(params, n_tasks, dim)
    if form is None:
        return []
    names = vote_experts(n_tasks, dim)
    parts = [(mistakes, len(names)), ("related", dim * dim if form == MOMENT else kb * dim)]
    if BAYES in names:
        parts.append(("bayes", stats_size(dim)))
    return parts


def up_parts(params, n_tasks: int, kb: int, dim: int) -> list:
    """(name, size) of every part of a worker's message, in order."""
    parts = [("C", kb * dim) if coupling(params) == GIVEN else ("dC", dim)]
    return parts + _vote_parts(params, n_tasks, kb, dim, "mistakes")


def down_parts(params, n_tasks: int, kb: int, dim: int) -> list:
    """(name, size) of every part of the server's reply to a worker, in order."""
    parts = [("u", dim)]
    if coupling(params) == GIVEN:
        parts.append(("V", kb * dim))
    return parts + _vote_parts(params, n_tasks, kb, dim, "totals")


def _views(buffer: np.ndarray, parts: list, offset: int = 0) -> dict:
    """{name: the part's slice of ``buffer``} for consecutive ``parts`` from ``offset``."""
    out = {}
    for name, size in parts:
        out[name] = buffer[offset: offset + size]
        offset += size
    return out


class CAdmmWorker:
    """Worker role for tasks ``start..stop-1`` of ``n_tasks``: predict, w-step, send; receive
    the consensus; z-step (:class:`.contract.Worker`)."""

    TASK_AXIS = TaskBlock.task_axis()

    def __init__(self, params: AdmmParams, n_tasks: int, dim: int, start: int, stop: int):
        self.start, self.stop, self.dim = start, stop, dim
        self.kb = kb = stop - start
        # sent every round, the same buffer (MPI binds to it)
        self.message = np.zeros(self.up_size(params, n_tasks, kb, dim))
        self._up = _views(self.message, up_parts(params, n_tasks, kb, dim))
        self._down = down_parts(params, n_tasks, kb, dim)
        self._cached = None
        given = coupling(params) == GIVEN
        self.block = TaskBlock(params, kb, dim, mode=GIVEN if given else FIXED,
                               message=self._up["C"].reshape(kb, dim) if given else None,
                               total_tasks=n_tasks, related_mode=related_form(params, n_tasks, dim))

    @staticmethod
    def up_size(params, n_tasks: int, kb: int, dim: int) -> int:
        return sum(size for _, size in up_parts(params, n_tasks, kb, dim))

    @staticmethod
    def down_size(params, n_tasks: int, kb: int, dim: int) -> int:
        return sum(size for _, size in down_parts(params, n_tasks, kb, dim))

    def up(self, X, y, inv_count, active=slice(None)):
        """One round's predictions (B, na) and the flat message to the server (the same
        buffer every round)."""
        block, up = self.block, self._up
        positive = block.predict_and_step(X, y, inv_count, active)
        if "dC" in up:
            up["dC"][...] = block.delta_C
        if "mistakes" in up:
            up["mistakes"][...] = block.delta_mistakes
            if block.related.mode == MOMENT:
                up["related"][...] = block.delta_H.reshape(-1)
            else:
                up["related"][...] = block.W.reshape(-1)
            if "bayes" in up:
                up["bayes"][...] = block.bayes.delta
        return positive, self.message

    def decide(self, X, active=slice(None)) -> np.ndarray:
        """The decision values (B, na) behind :meth:`up`'s predictions, changing nothing."""
        return self.block.decide(X, active)

    def down(self, msg: np.ndarray) -> None:
        d, block = self.dim, self.block
        down = self._down_views(msg)
        if "totals" in down:
            block.experts.set_totals(down["totals"])
            related = block.related
            (related.H if related.mode == MOMENT else related.rows).reshape(-1)[...] = down["related"]
            if "bayes" in down:
                block.bayes.set_totals(down["bayes"])
        block.dual_step(down["u"], down["V"].reshape(-1, d) if "V" in down else None)

    def _down_views(self, msg: np.ndarray) -> dict:
        """The reply's parts (cached for the buffer the reply arrives in every round)."""
        if self._cached is None or self._cached[0] is not msg:
            self._cached = (msg, _views(msg, self._down))
        return self._cached[1]

    def state(self) -> dict:
        return self.block.state()

    def load_state(self, state: dict) -> None:
        self.block.load_state(state)

    def finite(self, rows=None) -> bool:
        """Whether the tasks ``rows`` (None: all) and the shared variables are finite."""
        return self.block.finite(rows)

    def task_rows(self) -> dict:
        """Final per-task arrays of this block (one row per task) for the results file."""
        rows = self.block.task_rows()
        return {k: rows[k] for k in ("W", "Z", "V")}


class CAdmmServer:
    """Server role: the consensus over every task's messages, the vote's sums and statistic,
    Omega every m rounds."""

    def __init__(self, params: AdmmParams, n_tasks: int, dim: int, blocks):
        K, d = n_tasks, dim
        self.K, self.dim = K, d
        self.given = coupling(params) == GIVEN
        self.form = related_form(params, K, d)
        self.consensus = Consensus(params, K, d) if self.given else None
        # with Omega fixed at I/K only the sum of every task's message is needed: u = w S
        self._u_weight = ExactStep(Relationship.identity(K), params.a, params.rho,
                                   params.lambda2, params.lambda4)._sum_weight
        self.S = np.zeros(d)                     # sum of every task's last message c_k
        self.u = np.zeros(d)
        names = vote_experts(K, d)
        self.totals = np.zeros(len(names))
        # the vote's related expert: H, or every task's model as last sent
        self.related = (np.zeros((d, d) if self.form == MOMENT else (K, d))
                        if self.form is not None else None)
        # the empirical-Bayes expert's statistics, summed over every task
        self.bayes = (np.zeros(stats_size(d)) if self.form is not None and BAYES in names
                      else None)
        self._C = np.zeros((K, d)) if self.given else None
        self._ups, self._downs, offset, reply = [], [], 0, 0
        for a, b in blocks:
            parts = up_parts(params, K, b - a, d)
            self._ups.append((a, b, offset, parts))
            offset += sum(size for _, size in parts)
            parts = down_parts(params, K, b - a, d)
            self._downs.append((a, b, reply, parts))
            reply += sum(size for _, size in parts)
        self.reply = np.zeros(reply)
        self._replies = [(a, b, _views(self.reply, parts, offset))
                         for a, b, offset, parts in self._downs]
        self._cached = None

    def _parts(self, up_all: np.ndarray) -> list:
        """Every worker's (start, stop, {part: view}) in the gathered messages (cached for the
        buffer they arrive in every round)."""
        if self._cached is None or self._cached[0] is not up_all:
            self._cached = (up_all, [(a, b, _views(up_all, parts, offset))
                                     for a, b, offset, parts in self._ups])
        return self._cached[1]

    def step(self, up_all: np.ndarray) -> np.ndarray:
        """Gathered messages (flat, rank order) in; every worker's reply (flat, rank order) out
        (the same buffer every round)."""
        d = self.dim
        parts = self._parts(up_all)
        V = None
        if self.given:
            for a, b, part in parts:
                self._C[a:b] = part["C"].reshape(-1, d)
            u, V = self.consensus.step(self._C)
            self.u[...] = u
        else:
            for _, _, part in parts:             # rank order
                self.S += part["dC"]
            np.multiply(self.S, self._u_weight, out=self.u)
        related = self.related
        if self.form is not None:
            for a, b, part in parts:
                self.totals += part["mistakes"]
                if self.bayes is not None:
                    self.bayes += part["bayes"]
                if self.form == MOMENT:
                    related += part["related"].reshape(d, d)
                else:
                    related[a:b] = part["related"].reshape(-1, d)
            if self.form == ROWS:
                unit = directions(related)
                related = related_rows(unit, related, self.K, unit)
        for a, b, reply in self._replies:
            reply["u"][...] = self.u
            if V is not None:
                reply["V"][...] = V[a:b].reshape(-1)
            if self.form is not None:
                reply["totals"][...] = self.totals
                reply["related"][...] = (related if self.form == MOMENT else related[a:b]).reshape(-1)
                if self.bayes is not None:
                    reply["bayes"][...] = self.bayes
        return self.reply

    def after_reply(self) -> None:
        """Work that the replies need not wait for: the Omega update."""
        if self.given:
            self.consensus.update_relationship()

    def state(self) -> dict:
        out = {"S": self.S.copy(), "u": self.u.copy(), "totals": self.totals.copy()}
        if self.related is not None:
            out["related"] = self.related.copy()
        if self.bayes is not None:
            out["bayes"] = self.bayes.copy()
        if self.given:
            out.update({f"consensus_{k}": v for k, v in self.consensus.state().items()})
        return out

    def load_state(self, state: dict) -> None:
        self.S[...] = state["S"]
        self.u[...] = state["u"]
        self.totals[...] = state["totals"]
        if self.related is not None:
            self.related[...] = state["related"]
        if self.bayes is not None:
            self.bayes[...] = state["bayes"]
        if self.given:
            self.consensus.load_state({k[10:]: v for k, v in state.items()
                                       if k.startswith("consensus_")})

    def global_arrays(self) -> dict:
        """Final shared arrays for the results file: u and Omega (fixed at I/K, or learned)."""
        rel = self.consensus.rel if self.given else Relationship.identity(self.K)
        return {"u": self.u, **omega_arrays(rel)}
