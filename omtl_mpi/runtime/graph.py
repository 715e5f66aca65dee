"""The round loop of neighbour-pattern learners (D-ADMM, D-PSGD).

In one process every node of the topology lives here and :class:`~omtl_mpi.comm.graph.LocalGraph`
exchanges their messages; under MPI each rank is one node on a distributed-graph communicator.
"""
from __future__ import annotations

import numpy as np

from .schedule import rounds


class NoExchange:
    """The exchange of learners that never communicate (pattern ``none``)."""

    def exchange(self, messages: list, clock) -> list:
        return [np.empty((0,) + m.shape) for m in messages]


def run_graph(comm, nodes, streams, clock, progress, preds, staleness, first_round: int = 0,
              fault=None, checkpoint=None):
    """Run rounds ``first_round..T-1``, filling each local node's predictions ``preds[i]``
    (T, B, kb) and ``staleness`` (N_local, T); ``fault`` and ``checkpoint`` as in run_star."""
    for t in rounds(first_round, clock.rows.shape[0], progress, fault, checkpoint):
        clock.start()
        for i, (node, stream) in enumerate(zip(nodes, streams)):
            preds[i][t] = node.local_step(*stream[t])
        received = comm.exchange([node.message for node in nodes], clock)
        for i, node in enumerate(nodes):
            staleness[i, t] = node.merge(received[i])
            node.finish_round()
        clock.stop(t)
