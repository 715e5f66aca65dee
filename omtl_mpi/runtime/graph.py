"""The round loop of neighbour-pattern learners (D-ADMM, D-PSGD).

In one process every node of the topology lives here and :class:`~omtl_mpi.comm.graph.LocalGraph`
exchanges their messages; under MPI each rank is one node on a distributed-graph communicator.
"""
from __future__ import annotations

import numpy as np


class NoExchange:
    """The exchange of learners that never communicate (pattern ``none``)."""

    def exchange(self, messages: list, clock) -> list:
        return [np.empty((0,) + m.shape) for m in messages]


def run_graph(comm, nodes, streams, clock, progress, first_round: int = 0, fault=None):
    """Run rounds ``first_round..T-1``; return per local node its predictions (T, B, kb) and
    the staleness (N_local, T)."""
    rounds = clock.rows.shape[0]
    preds = [np.zeros((rounds,) + s.y.shape[1:], dtype=np.int8) for s in streams]
    staleness = np.zeros((len(nodes), rounds))
    fail_at = fault.at if fault is not None else -1
    for t in range(first_round, rounds):
        if t == fail_at:
            fault.trigger(t)
        clock.start()
        for i, (node, stream) in enumerate(zip(nodes, streams)):
            preds[i][t] = node.local_step(*stream[t])
        received = comm.exchange([node.message for node in nodes], clock)
        for i, node in enumerate(nodes):
            staleness[i, t] = node.merge(received[i])
            node.finish_round()
        clock.stop(t)
        progress.update(t + 1)
    progress.close()
    return preds, staleness
