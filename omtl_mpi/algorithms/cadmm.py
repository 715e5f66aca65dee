"""C-ADMM (paper Algorithm 1): rank 0 is the server, workers hold contiguous blocks of tasks.

Messages are flat float64 arrays: a worker sends its block's C rows (kb*d numbers) and gets
back ``[u, V rows of its block]`` ((kb+1)*d numbers), i.e. only c_k up and (u, v_k) down. With
``--experts`` (docs/ALGORITHMS.md section 2.6) a worker also sends its tasks' experts' mistakes
(3 numbers), and the reply also carries the block's rows of the related models
(:func:`.experts.related_models`, kb*d numbers) and every task's experts' mistakes (3 numbers).
"""
from __future__ import annotations

import numpy as np

from .admm import AdmmParams, Consensus, TaskBlock
from .experts import EXPERTS, related_models

_N_EXPERTS = len(EXPERTS)


class CAdmmWorker:
    """Worker role for tasks ``start..stop-1`` of ``n_tasks``: predict, w-step, send C; receive
    (u, V); z-step (:class:`.contract.Worker`)."""

    TASK_AXIS = TaskBlock.task_axis()

    def __init__(self, params: AdmmParams, n_tasks: int, dim: int, start: int, stop: int):
        self.start, self.stop, self.dim = start, stop, dim
        self.kb = kb = stop - start
        # sent every round, the same buffer (MPI binds to it): C, and the experts' mistakes
        self.message = np.zeros(self.up_size(params, kb, dim))
        self.block = TaskBlock(params, kb, dim, message=self.message[: kb * dim].reshape(kb, dim),
                               total_tasks=n_tasks)
        self._partial = self.message[kb * dim:]

    @staticmethod
    def up_size(params, kb: int, dim: int) -> int:
        return kb * dim + (_N_EXPERTS if params.experts else 0)

    @staticmethod
    def down_size(params, kb: int, dim: int) -> int:
        return (kb + 1) * dim + ((kb * dim + _N_EXPERTS) if params.experts else 0)

    def up(self, X, y, inv_count):
        """One round's predictions (B, kb) and the flat message to the server (the same
        buffer every round)."""
        positive, _ = self.block.predict_and_step(X, y, inv_count)
        if self.block.experts is not None:
            self._partial[...] = self.block.experts.partial()
        return positive, self.message

    def decide(self, X) -> np.ndarray:
        """The decision values (B, kb) behind :meth:`up`'s predictions, changing nothing."""
        return self.block.decide(X)

    def down(self, msg: np.ndarray) -> None:
        d, end = self.dim, (self.kb + 1) * self.dim
        if self.block.experts is None:
            self.block.dual_step(msg[:d], msg[d:end].reshape(-1, d))
            return
        related = msg[end: end + self.kb * d].reshape(-1, d)
        self.block.dual_step(msg[:d], msg[d:end].reshape(-1, d), related, msg[end + self.kb * d:])

    def state(self) -> dict:
        return self.block.state()

    def load_state(self, state: dict) -> None:
        self.block.load_state(state)
        if self.block.experts is not None:
            self._partial[...] = self.block.experts.partial()

    def task_rows(self) -> dict:
        """Final per-task arrays of this block (one row per task) for the results file."""
        return {"W": self.block.W, "Z": self.block.Z}


class CAdmmServer:
    """Server role: (u, V) for all K tasks from the gathered C, Omega every m rounds."""

    def __init__(self, params: AdmmParams, n_tasks: int, dim: int, blocks):
        self.K, self.dim = n_tasks, dim
        self.consensus = Consensus(params, n_tasks, dim)
        self.experts = params.experts
        d = dim
        if not self.experts:
            # Row indices into [u; V] laying out each worker's reply [u, V[start:stop]] in rank
            # order, so packing every reply is one take() instead of a loop over workers; with a
            # single worker the reply is [u; V] itself.
            rows = []
            for start, stop in blocks:
                rows.append(0)
                rows.extend(range(1 + start, 1 + stop))
            self._rows = None if len(blocks) == 1 else np.asarray(rows, dtype=np.intp)
            self._down = np.empty((len(rows), dim))
            self.reply = self.consensus.uv.reshape(-1) if self._rows is None else self._down.reshape(-1)
            return
        # With the experts, the gathered messages are [C rows, mistakes] per worker and every
        # reply is [u, V rows, related rows, every task's mistakes]: flat indices into the
        # gathered buffer and into [u; V; related; totals] pack both with one take() each.
        K, c_index, m_index, reply = n_tasks, [], [], []
        offset = 0
        for start, stop in blocks:
            kb = stop - start
            c_index.extend(range(offset, offset + kb * d))
            m_index.append(range(offset + kb * d, offset + kb * d + _N_EXPERTS))
            offset += kb * d + _N_EXPERTS
            reply.extend(range(d))                                              # u
            reply.extend(range((1 + start) * d, (1 + stop) * d))                # V rows
            reply.extend(range((1 + K + start) * d, (1 + K + stop) * d))        # related rows
            reply.extend(range((1 + 2 * K) * d, (1 + 2 * K) * d + _N_EXPERTS))          # totals
        self._c_index = np.asarray(c_index, dtype=np.intp)
        self._m_index = np.asarray(m_index, dtype=np.intp)
        self._C = np.empty((K, d))
        self._source = np.zeros((1 + 2 * K) * d + _N_EXPERTS)       # [u; V; related; totals], flat
        self._related = self._source[(1 + K) * d: (1 + 2 * K) * d].reshape(K, d)
        self._totals = self._source[(1 + 2 * K) * d:]
        self._reply_index = np.asarray(reply, dtype=np.intp)
        # one worker (one process): its message is [C; mistakes] and its reply the whole source
        self._single = len(blocks) == 1
        self.reply = self._source if self._single else np.empty(len(reply))

    def step(self, up_all: np.ndarray) -> np.ndarray:
        """Gathered messages (flat, rank order) in; every worker's reply (flat, rank order) out
        (the same buffer every round)."""
        if self.experts:
            src, K, d = self._source, self.K, self.dim
            if self._single:
                u, V = self.consensus.step(up_all[: K * d].reshape(K, d))
                self._totals[...] = up_all[K * d:]
            else:
                np.take(up_all, self._c_index, out=self._C.reshape(-1), mode="clip")
                u, V = self.consensus.step(self._C)
                # every task's mistakes: the workers' sums added in rank order (integers: exact)
                np.sum(up_all[self._m_index], axis=0, out=self._totals)
            src[: (K + 1) * d] = self.consensus.uv.reshape(-1)
            related_models(u, V, out=self._related)
            if not self._single:
                np.take(src, self._reply_index, out=self.reply, mode="clip")
            return self.reply
        self.consensus.step(up_all.reshape(self.K, self.dim))
        if self._rows is not None:
            # mode="clip": the indices are valid, and with the default mode numpy copies through a
            # temporary buffer
            np.take(self.consensus.uv, self._rows, axis=0, out=self._down, mode="clip")
        return self.reply

    def after_reply(self) -> None:
        """Work that the replies need not wait for: the Omega update."""
        self.consensus.update_relationship()

    def state(self) -> dict:
        return self.consensus.state()

    def load_state(self, state: dict) -> None:
        self.consensus.load_state(state)

    def global_arrays(self) -> dict:
        """Final shared arrays for the results file."""
        c = self.consensus
        return {"u": c.u, "V": c.V, "omega": c.omega}
