"""D-ADMM (paper Algorithm 2, docs/ALGORITHMS.md section 3): no server; nodes gossip a table of all tasks.

Each node holds a contiguous block of tasks and a table with one row per task j,
``[c_j (d), v_j (d), m_j (3, with --experts), stamp_j (1)]``: its freshest knowledge of that
task (m_j: the experts' mistakes on task j, docs/ALGORITHMS.md section 2.6).  Per round t:

1. predict and take the w-step for its own tasks; write ``(c_k, v_k, t)`` into its own rows;
2. (runtime) exchange the whole table with its neighbours; keep the freshest row per task;
3. every m-th round rebuild its own Omega from the table's V;
4. compute (u, V) from the table's C with the C-ADMM server's formulas;
5. z-step; write the new v_k into its own rows (with ``--experts``, also this block's rows of
   the related models, :func:`~omtl_mpi.algorithms.experts.related_models`, from the same V).

Steps 3-4 run the very same :class:`~omtl_mpi.algorithms.admm.Consensus` object as the C-ADMM
server, which is why D-ADMM on a fully connected graph predicts exactly like C-ADMM.
"""
from __future__ import annotations

import numpy as np

from .admm import AdmmParams, Consensus, TaskBlock
from .experts import EXPERTS, related_models


class DAdmmNode:
    """One D-ADMM node, node ``node`` of ``topology``, holding tasks ``start..stop-1`` of
    ``n_tasks`` (:class:`.contract.Node`; without a topology, a node with no neighbours).

    ``slots`` (n_neighbours + 1, K, width) holds this node's table in slot 0 (what it sends)
    and what its neighbours sent in the others (:attr:`inbox`, where the exchange writes), so
    that merging is one argmax over the stamps and no message is copied on the way.
    """

    # its state is the node's (a table of every task, its own Omega), not its block's
    TASK_AXIS = None

    def __init__(self, params: AdmmParams, n_tasks: int, dim: int, start: int, stop: int,
                 topology=None, node: int = 0):
        n_neighbours = len(topology.neighbours(node)) if topology is not None else 0
        self.K, self.d, self.start, self.stop = n_tasks, dim, start, stop
        d = dim
        # the gossiped table: columns [0, d) = c, [d, 2d) = v, then the experts' mistakes on
        # the task (with --experts), and last the stamp (round of c)
        m = len(EXPERTS) if params.experts else 0
        self.width = width = 2 * d + m + 1
        self.slots = np.zeros((n_neighbours + 1, n_tasks, width))
        self.table = self.slots[0]
        self.inbox = self.slots[1:]
        own = self.table[start:stop]
        # the block writes its messages c_k straight into its own rows of the table
        self.block = TaskBlock(params, stop - start, dim, message=own[:, :d], total_tasks=n_tasks)
        self.consensus = Consensus(params, n_tasks, dim)
        self._own_v = own[:, d: 2 * d]
        self._own_mistakes = own[:, 2 * d: 2 * d + m]
        self._table_mistakes = self.table[:, 2 * d: 2 * d + m]
        self._totals = np.zeros(m)
        self._own_stamp = own[:, width - 1]
        self._stamps = self.slots[:, :, width - 1]
        self._table_c = self.table[:, :d]
        self._table_v = self.table[:, d: 2 * d]
        self._table_stamp = self.table[:, width - 1]
        self._tasks = np.arange(n_tasks)
        self._paper = params.variant == "paper"
        self.round = 0

    @property
    def message(self) -> np.ndarray:
        """What goes to every neighbour: the whole table, K (2d + 1) numbers (3 more per task
        with --experts)."""
        return self.table

    def local_step(self, X, y, inv_count) -> np.ndarray:
        """Step 1: predictions (B, kb); the node's own rows now hold (c_k, v_k, t)."""
        self.round += 1
        positive, _ = self.block.predict_and_step(X, y, inv_count)
        if self.block.experts is not None:
            self._own_mistakes[...] = self.block.experts.mistakes.T
        self._own_stamp[...] = self.round
        return positive

    def decide(self, X) -> np.ndarray:
        """The decision values (B, kb) behind :meth:`local_step`'s predictions, changing
        nothing."""
        return self.block.decide(X)

    def merge(self, received: np.ndarray) -> float:
        """Step 2's second half: keep the freshest row per task from ours and ``received``.

        Parameters
        ----------
        received : ndarray, shape (n_neighbours, K, width)
            The neighbours' tables (normally :attr:`inbox` itself, filled by the exchange).

        Returns
        -------
        float
            Mean staleness (rounds) of the rows used this round: ``t - stamp_j`` over all tasks.
        """
        if received.shape[0]:
            slots, stamps = self.slots, self._stamps
            if received is not self.inbox:      # not received in place: stack them here
                slots = np.concatenate((self.table[None], received))
                stamps = slots[:, :, self.width - 1]
            # argmax returns the first maximum: on a tie our own copy wins (ties are copies of
            # the same version, except our own rows, which nobody else has fresher)
            best = stamps.argmax(axis=0)
            self.table[...] = slots[best, self._tasks]
        return self.round - float(self._table_stamp.sum()) / self.K

    def finish_round(self) -> None:
        """Steps 3-5: Omega from the gossiped V, (u, V) from the gossiped C, z-step."""
        cons = self.consensus
        cons.update_relationship(self._table_v)             # Omega from v_j(t-1)
        if self._paper:
            cons.V = self._table_v                          # V_old of the "paper" variant
        u, V = cons.step(self._table_c)
        own_v = V[self.start:self.stop]
        if self.block.experts is None:
            self.block.dual_step(u, own_v)
        else:
            # every v_j and every task's mistakes are in the gossiped table, so the node computes
            # the related models and the sums itself (C-ADMM's server sends them); all K rows and
            # then its own, so that the bits do not depend on how tasks are split into blocks
            np.sum(self._table_mistakes, axis=0, out=self._totals)
            self.block.dual_step(u, own_v, related_models(u, V)[self.start:self.stop], self._totals)
        self._own_v[...] = own_v

    def state(self) -> dict:
        out = {f"block_{k}": v for k, v in self.block.state().items()}
        out.update({f"consensus_{k}": v for k, v in self.consensus.state().items()})
        out["table"] = self.table.copy()
        out["round"] = np.int64(self.round)
        return out

    def load_state(self, state: dict) -> None:
        self.block.load_state({k[6:]: v for k, v in state.items() if k.startswith("block_")})
        self.consensus.load_state({k[10:]: v for k, v in state.items() if k.startswith("consensus_")})
        self.table[...] = state["table"]          # in place: the exchange is bound to this buffer
        self.round = int(state["round"])

    def task_rows(self) -> dict:
        return {"W": self.block.W, "Z": self.block.Z, "V": self.block.V}

    def node_arrays(self) -> dict:
        """This node's own copy of the shared quantities (each node has its own Omega and u)."""
        return {"u": self.block.u, "omega": self.consensus.omega}
