"""Neighbourhood exchange: every node sends one array to all its neighbours, once per round.

:class:`LocalGraph` runs all nodes of a topology in this one process; :class:`MpiGraph` is one
node per rank on an MPI distributed-graph communicator (``Create_dist_graph_adjacent``).  Both
return, for each local node, an array of shape (number of neighbours, *message shape) with rows
in ascending neighbour order, written into the node's ``inbox`` when it has one.
"""
from __future__ import annotations

from time import perf_counter

import numpy as np


class LocalGraph:
    """All nodes of ``topology`` in one process.

    Parameters
    ----------
    topology : Topology
    inboxes : list of (ndarray or None), optional
        Per node, where to write what its neighbours sent (None: a new array every round).
    """

    def __init__(self, topology, inboxes=None):
        self.neighbours = [np.asarray(topology.neighbours(i), dtype=np.intp)
                           for i in range(topology.n_nodes)]
        self.inboxes = inboxes if inboxes is not None else [None] * topology.n_nodes

    def exchange(self, messages: list, clock) -> list:
        stacked = np.stack(messages)
        return [stacked[nb] if box is None else np.take(stacked, nb, axis=0, out=box, mode="clip")
                for nb, box in zip(self.neighbours, self.inboxes)]

    def sum_nodes(self, messages: list, clock) -> list:
        """The sum over every node of their ``messages`` (arrays of one size), in node order,
        for every node (as :meth:`MpiGraph.sum_nodes` gives it)."""
        total = np.array(messages[0], dtype=np.float64)
        for message in messages[1:]:
            total += message
        return [total] + [total.copy() for _ in messages[1:]]


class MpiGraph:
    """This rank is node ``comm.rank`` of ``topology``; its neighbours are the graph's.

    The exchange is one neighbourhood collective per round on the distributed-graph
    communicator: a persistent ``Neighbor_allgather_init`` (MPI-4), bound once to the node's
    message and inbox and started every round, or ``Ineighbor_allgather`` where the MPI
    library predates MPI-4.

    Parameters
    ----------
    comm : MPI.Comm
    topology : Topology
    message_shape : tuple
        Shape of what this node sends every round.
    message, inbox : ndarray, optional
        The array a node's learner sends every round and the one it reads its neighbours'
        messages from (shape (number of neighbours, *message_shape)): the request is bound to
        them, so nothing is copied.  Learners that send a new array each round leave them out:
        their messages are copied into, and received in, buffers of this object's own.
    """

    def __init__(self, comm, topology, message_shape, message=None, inbox=None):
        from mpi4py import MPI

        rank = comm.Get_rank()
        nb = list(topology.neighbours(rank))
        self._topology, self._rank, self._hops = topology, rank, None
        # reorder=False: rank i must stay node i, which holds task block i
        self.comm = comm.Create_dist_graph_adjacent(nb, nb, reorder=False)
        shape = tuple(message_shape)
        self._send = message if message is not None else np.empty(shape)
        self._recv = inbox if inbox is not None else np.empty((len(nb),) + shape)
        self._args = ([self._send, MPI.DOUBLE], [self._recv, MPI.DOUBLE])
        try:
            self._request = self.comm.Neighbor_allgather_init(*self._args)
        except NotImplementedError:          # an MPI-3 library
            self._request = None

    def exchange(self, messages: list, clock) -> list:
        from .waiting import wait

        (msg,) = messages
        t0 = perf_counter()
        if msg is not self._send:
            self._send[...] = msg
        if self._request is not None:
            self._request.Start()
            req = self._request
        else:
            req = self.comm.Ineighbor_allgather(*self._args)
        clock.comm += perf_counter() - t0
        wait(req, clock)
        return [self._recv]

    def sum_nodes(self, messages: list, clock) -> list:
        """The sum over every node of the graph of their ``messages`` (arrays of one size), the
        same bits on every node: each node floods a table of every node's part through its
        neighbours (one ``Ineighbor_allgather`` per hop, as many hops as the graph's diameter,
        each node keeping the parts it had not yet had), then adds the parts in node order,
        as C-ADMM's server adds its workers' (:meth:`.mpi.MpiStar.reduce`). For a few sums a
        run (the mixture prior's estimates: docs/ALGORITHMS.md section 3)."""
        from mpi4py import MPI

        from .waiting import wait

        (message,) = messages
        n, nodes = len(message), self._topology.n_nodes
        if self._hops is None:
            self._hops = self._topology.diameter
        table = np.zeros((nodes, n + 1))               # per node: [known, part]
        table[self._rank, 0] = 1.0
        table[self._rank, 1:] = message
        received = np.empty((len(self._recv), nodes, n + 1))
        for _ in range(self._hops):
            t0 = perf_counter()
            request = self.comm.Ineighbor_allgather([table, MPI.DOUBLE], [received, MPI.DOUBLE])
            clock.comm += perf_counter() - t0
            wait(request, clock)
            have = received[:, :, 0] > 0.0
            new = (table[:, 0] == 0.0) & have.any(axis=0)
            table[new] = received[have.argmax(axis=0)[new], new]
        if not (table[:, 0] > 0.0).all():
            raise RuntimeError("a sum over the graph's nodes did not reach every node")
        total = table[0, 1:].copy()
        for row in table[1:, 1:]:
            total += row
        return [total]

    def free(self) -> None:
        if self._request is not None:
            self._request.Free()
        self.comm.Free()
