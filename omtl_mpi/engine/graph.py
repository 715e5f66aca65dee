"""The round loop of neighbour-pattern learners (D-ADMM, D-PSGD).

In one process every node of the topology lives here and :class:`~omtl_mpi.comm.graph.LocalGraph`
exchanges their messages; under MPI each rank is one node on a distributed-graph communicator.
"""
from __future__ import annotations

from time import perf_counter

import numpy as np

from ..algorithms.contract import drive_sums
from .schedule import NO_HOOKS, Hooks, rounds


class NoExchange:
    """The exchange of learners that never communicate (pattern ``none``)."""

    def exchange(self, messages: list, clock) -> list:
        return [np.empty((0,) + m.shape) for m in messages]

    def sum_nodes(self, messages: list, clock) -> list:
        """A lone node's sums are its own."""
        return list(messages)


def run_graph(comm, nodes, streams, clock, preds, staleness, first_round: int = 0,
              hooks: Hooks = NO_HOOKS):
    """Run rounds ``first_round..T-1``, filling each local node's predictions ``preds[i]``
    (the slots of its stream's layout; True for +1) and ``staleness`` (N_local, T); ``hooks``
    as in run_star."""
    start, stop, exchange = clock.start, clock.stop, comm.exchange
    data = [(node.local_step, s, s.slot_ptr.tolist(), p) for node, s, p in zip(nodes, streams, preds)]
    finish = [(node.merge, node.finish_round) for node in nodes]
    # the nodes whose rounds may end in sums over every node (the same on every rank)
    sums = [node.sums for node in nodes if getattr(node, "sums", None) is not None]

    def add_over_graph(parts):
        return comm.sum_nodes(parts, clock)
    delay = hooks.delay.after if hooks.delay is not None else None
    for t in rounds(first_round, clock.rows.shape[0], hooks):
        start()
        if delay is not None:
            t0 = perf_counter()
        for local_step, stream, slot, pred in data:
            pred[slot[t]:slot[t + 1]] = local_step(*stream[t]).reshape(-1)
        if delay is not None:
            delay(t, perf_counter() - t0)
        received = exchange([node.message for node in nodes], clock)
        for i, (merge, finish_round) in enumerate(finish):
            staleness[i, t] = merge(received[i])
            finish_round()
        if sums:
            drive_sums([node_sums() for node_sums in sums], add_over_graph)
        stop(t)
