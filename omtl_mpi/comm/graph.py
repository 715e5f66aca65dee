"""Neighbourhood exchange: every node sends one array to all its neighbours, once per round.

:class:`LocalGraph` runs all nodes of a topology in this one process; :class:`MpiGraph` is one
node per rank on an MPI distributed-graph communicator (``Create_dist_graph_adjacent``) with a
buffer-based ``Ineighbor_allgather``.  Both return, for each local node, an array of shape
(number of neighbours, *message shape) with rows in ascending neighbour order.
"""
from __future__ import annotations

from time import perf_counter

import numpy as np


class LocalGraph:
    """All nodes of ``topology`` in one process."""

    def __init__(self, topology):
        self.neighbours = [np.asarray(topology.neighbours(i), dtype=np.intp)
                           for i in range(topology.n_nodes)]

    def exchange(self, messages: list, clock) -> list:
        stacked = np.stack(messages)
        return [stacked[nb] for nb in self.neighbours]


class MpiGraph:
    """This rank is node ``comm.rank`` of ``topology``; its neighbours are the graph's."""

    def __init__(self, comm, topology, message_shape):
        from mpi4py import MPI

        self._mpi = MPI
        rank = comm.Get_rank()
        nb = list(topology.neighbours(rank))
        # reorder=False: rank i must stay node i, which holds task block i
        self.comm = comm.Create_dist_graph_adjacent(nb, nb, reorder=False)
        self._recv = np.empty((len(nb),) + tuple(message_shape))

    def exchange(self, messages: list, clock) -> list:
        from .waiting import wait

        (msg,) = messages
        t0 = perf_counter()
        req = self.comm.Ineighbor_allgather([msg, self._mpi.DOUBLE], [self._recv, self._mpi.DOUBLE])
        clock.comm += perf_counter() - t0
        wait(req, clock)
        return [self._recv]

    def free(self) -> None:
        self.comm.Free()
