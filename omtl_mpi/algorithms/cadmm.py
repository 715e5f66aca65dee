"""C-ADMM (paper Algorithm 1): rank 0 is the server, workers hold contiguous blocks of tasks.

Messages are flat float64 arrays: a worker sends its block's C rows (kb*d numbers) and gets
back ``[u, V rows of its block]`` ((kb+1)*d numbers), i.e. only c_k up and (u, v_k) down; with
``--experts`` the reply also carries the block's rows of the related models
(:func:`.experts.related_models`, kb*d more numbers).
"""
from __future__ import annotations

import numpy as np

from .admm import AdmmParams, Consensus, TaskBlock
from .experts import related_models


class CAdmmWorker:
    """Worker role for tasks ``start..stop-1``: predict, w-step, send C; receive (u, V); z-step."""

    def __init__(self, params: AdmmParams, start: int, stop: int, dim: int, n_tasks: int):
        self.start, self.stop, self.dim = start, stop, dim
        self.kb = stop - start
        self.block = TaskBlock(params, stop - start, dim)
        self.message = self.block.C.reshape(-1)   # sent every round (MPI binds to it)

    @staticmethod
    def up_size(params, n_tasks: int, dim: int) -> int:
        return n_tasks * dim

    @staticmethod
    def down_size(params, n_tasks: int, dim: int) -> int:
        return (n_tasks + 1 + (n_tasks if params.experts else 0)) * dim

    def up(self, X, y, inv_count):
        """One round's predictions (B, kb) and the flat message C to the server (the same
        buffer every round)."""
        positive, _ = self.block.predict_and_step(X, y, inv_count)
        return positive, self.message

    def down(self, msg: np.ndarray) -> None:
        d, end = self.dim, (self.kb + 1) * self.dim
        related = msg[end:].reshape(-1, d) if self.block.experts is not None else None
        self.block.dual_step(msg[:d], msg[d:end].reshape(-1, d), related)

    def state(self) -> dict:
        return self.block.state()

    def load_state(self, state: dict) -> None:
        self.block.load_state(state)

    def task_rows(self) -> dict:
        """Final per-task arrays of this block (one row per task) for the results file."""
        return {"W": self.block.W, "Z": self.block.Z}


class CAdmmServer:
    """Server role: (u, V) for all K tasks from the gathered C, Omega every m rounds."""

    def __init__(self, params: AdmmParams, n_tasks: int, dim: int, blocks):
        self.K, self.dim = n_tasks, dim
        self.consensus = Consensus(params, n_tasks, dim)
        self.experts = params.experts
        # Row indices into [u; V] (and, with --experts, the related models below them) laying
        # out each worker's reply [u, V[start:stop], related[start:stop]] in rank order, so
        # packing every reply is one take() instead of a loop over workers; with a single
        # worker and no experts the reply is [u; V] itself.
        rows = []
        for start, stop in blocks:
            rows.append(0)
            rows.extend(range(1 + start, 1 + stop))
            if self.experts:
                rows.extend(range(1 + n_tasks + start, 1 + n_tasks + stop))
        self._source = np.zeros((1 + 2 * n_tasks, dim)) if self.experts else None
        self._rows = None if len(blocks) == 1 and not self.experts else np.asarray(rows, dtype=np.intp)
        self._down = np.empty((len(rows), dim))
        self.reply = self.consensus.uv.reshape(-1) if self._rows is None else self._down.reshape(-1)

    def step(self, up_all: np.ndarray) -> np.ndarray:
        """Gathered C (flat, task order) in; every worker's reply (flat, rank order) out (the
        same buffer every round)."""
        u, V = self.consensus.step(up_all.reshape(self.K, self.dim))
        if self.experts:
            src = self._source
            src[: self.K + 1] = self.consensus.uv
            related_models(u, V, out=src[self.K + 1:])
            np.take(src, self._rows, axis=0, out=self._down, mode="clip")
        elif self._rows is not None:
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
