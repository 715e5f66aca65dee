"""D-ADMM (paper Algorithm 2, spec section 3): no server; nodes gossip a table of all tasks.

Each node holds a contiguous block of tasks and a table with one row per task j,
``[c_j (d), v_j (d), stamp_j (1)]``: its freshest knowledge of that task.  Per round t:

1. predict and take the w-step for its own tasks; write ``(c_k, v_k, t)`` into its own rows;
2. (runtime) exchange the whole table with its neighbours; keep the freshest row per task;
3. every m-th round rebuild its own Omega from the table's V;
4. compute (u, V) from the table's C with the C-ADMM server's formulas;
5. z-step; write the new v_k into its own rows.

Steps 3-4 run the very same :class:`~omtl_mpi.algorithms.admm.Consensus` object as the C-ADMM
server, which is why D-ADMM on a fully connected graph predicts exactly like C-ADMM.
"""
from __future__ import annotations

import numpy as np

from .admm import AdmmParams, Consensus, TaskBlock


class DAdmmNode:
    """One D-ADMM node holding tasks ``start..stop-1`` of ``n_tasks``."""

    def __init__(self, params: AdmmParams, n_tasks: int, dim: int, start: int, stop: int):
        self.K, self.d, self.start, self.stop = n_tasks, dim, start, stop
        self.block = TaskBlock(params, stop - start, dim)
        self.consensus = Consensus(params, n_tasks, dim)
        # the gossiped table: columns [0, d) = c, [d, 2d) = v, 2d = stamp (round of c)
        self.table = np.zeros((n_tasks, 2 * dim + 1))
        self.round = 0

    @classmethod
    def build(cls, params, n_tasks, dim, start, stop, topology, node):
        return cls(params, n_tasks, dim, start, stop)

    @property
    def message(self) -> np.ndarray:
        """What goes to every neighbour: the whole table, K (2d + 1) numbers."""
        return self.table

    def local_step(self, X, y, inv_count) -> np.ndarray:
        """Step 1: predictions (B, kb); the node's own rows now hold (c_k, v_k, t)."""
        self.round += 1
        yhat, C = self.block.predict_and_step(X, y, inv_count)
        own = self.table[self.start:self.stop]
        own[:, : self.d] = C
        own[:, 2 * self.d] = self.round
        return yhat

    def merge(self, received: np.ndarray) -> float:
        """Step 2's second half: keep the freshest row per task from ours and ``received``.

        Parameters
        ----------
        received : ndarray, shape (n_neighbours, K, 2d+1)

        Returns
        -------
        float
            Mean staleness (rounds) of the rows used this round: ``t - stamp_j`` over all tasks.
        """
        if received.shape[0]:
            candidates = np.concatenate((self.table[None], received), axis=0)
            # argmax returns the first maximum: on a tie our own copy wins (ties are copies of
            # the same version, except our own rows, which nobody else has fresher)
            best = np.argmax(candidates[:, :, 2 * self.d], axis=0)
            self.table = candidates[best, np.arange(self.K)]
        return float(self.round - self.table[:, 2 * self.d].mean())

    def finish_round(self) -> None:
        """Steps 3-5: Omega from the gossiped V, (u, V) from the gossiped C, z-step."""
        d, cons = self.d, self.consensus
        V_table = self.table[:, d: 2 * d]
        cons.update_relationship(V_table)                   # Omega from v_j(t-1)
        cons.V = np.ascontiguousarray(V_table)               # V_old of the "paper" variant
        u, V = cons.step(np.ascontiguousarray(self.table[:, :d]))
        self.block.dual_step(u, V[self.start:self.stop])
        self.table[self.start:self.stop, d: 2 * d] = self.block.V

    def state(self) -> dict:
        out = {f"block_{k}": v for k, v in self.block.state().items()}
        out.update({f"consensus_{k}": v for k, v in self.consensus.state().items()})
        out["table"] = self.table.copy()
        out["round"] = np.int64(self.round)
        return out

    def load_state(self, state: dict) -> None:
        self.block.load_state({k[6:]: v for k, v in state.items() if k.startswith("block_")})
        self.consensus.load_state({k[10:]: v for k, v in state.items() if k.startswith("consensus_")})
        self.table = np.array(state["table"], dtype=np.float64)
        self.round = int(state["round"])

    def task_rows(self) -> dict:
        return {"W": self.block.W, "Z": self.block.Z, "V": self.block.V}

    def node_arrays(self) -> dict:
        """This node's own copy of the shared quantities (each node has its own Omega and u)."""
        return {"u": self.block.u, "omega": self.consensus.omega}
