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
    """All nodes of ``topology`` in one process; ``inboxes``, per node, where to write what its
    neighbours sent (None, or without them: a new array every round)."""

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
        for every node (as :meth:`MpiGraph.sum_nodes` gives it; one array, which they read)."""
        total = np.array(messages[0], dtype=np.float64)
        for message in messages[1:]:
            total += message
        return [total] * len(messages)


class MpiGraph:
    """This rank is node ``comm.rank`` of ``topology``; its neighbours are the graph's.

    The exchange is one neighbourhood collective a round on the distributed-graph communicator:
    a persistent ``Neighbor_allgather_init`` (MPI-4) started every round, else
    ``Ineighbor_allgather``. ``message`` (of ``message_shape``) and ``inbox`` (number of
    neighbours x ``message_shape``), optional: the arrays a node's learner sends every round and
    reads its neighbours' from; the request is bound to them, so nothing is copied (without
    them: buffers of this object's own).
    """

    def __init__(self, comm, topology, message_shape, message=None, inbox=None):
        from mpi4py import MPI

        rank = comm.Get_rank()
        nb = list(topology.neighbours(rank))
        self._topology, self._rank, self._neighbours = topology, rank, nb
        self._peer_rows = np.asarray(nb, dtype=np.intp)      # the byte counters' rows, per round
        self._layers = None                 # the flood's schedule (sum_nodes), when first used
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
        # the same table to every neighbour, one from each
        each = self._send.nbytes
        clock.sent += each * len(self._neighbours)
        clock.received += each * len(self._neighbours)
        clock.peers_of(self._topology.n_nodes)[self._peer_rows] += each
        return [self._recv]

    def sum_nodes(self, messages: list, clock) -> list:
        """The sum over every node of the graph of their ``messages`` (arrays of one size), the
        same bits on every node, for a few sums a run (the mixture prior's estimates).

        Each node's part floods the graph, one ``Ineighbor_allgatherv`` a hop for as many hops
        as its diameter, at hop h the parts of the nodes h - 1 hops away (docs/ALGORITHMS.md
        section 2.8); each node then adds them in node order, as :meth:`.mpi.MpiStar.reduce`.
        """
        from mpi4py import MPI

        from .waiting import wait

        (message,) = messages
        n = len(message)
        if self._layers is None:
            self._layers = self._flood_layers(clock)
        mine, theirs = self._layers
        parts = np.empty((self._topology.n_nodes, n))
        parts[self._rank] = message
        for hop in range(len(mine)):
            send = np.ascontiguousarray(parts[mine[hop]])
            sources = theirs[hop]
            counts = [len(s) * n for s in sources]
            displacements = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(int).tolist()
            received = np.empty(sum(counts))
            t0 = perf_counter()
            request = self.comm.Ineighbor_allgatherv([send, MPI.DOUBLE],
                                                     [received, (counts, displacements), MPI.DOUBLE])
            clock.comm += perf_counter() - t0
            wait(request, clock)
            clock.sent += send.nbytes * len(sources)
            clock.received += received.nbytes
            clock.peers_of(self._topology.n_nodes)[self._neighbours, 0] += send.nbytes
            clock.peers_of(self._topology.n_nodes)[self._neighbours, 1] += 8.0 * np.asarray(counts)
            for nodes, a in zip(sources, displacements):
                parts[nodes] = received[a:a + len(nodes) * n].reshape(len(nodes), n)
        total = parts[0].copy()
        for row in parts[1:]:
            total += row
        return [total]

    def _flood_layers(self, clock) -> tuple:
        """Per hop h (1 .. the graph's diameter): the nodes h - 1 hops from this node (whose
        parts it sends) and, per neighbour in the exchange's order, those h - 1 hops from the
        neighbour (whose parts it receives). The diameter is the one number the ranks agree on
        (a nonblocking reduction, waited for without spinning)."""
        from mpi4py import MPI

        from .waiting import wait

        hops = self._topology.hops([self._rank] + self._neighbours)
        diameter = np.array([hops[0].max()], dtype=np.int64)
        wait(self.comm.Iallreduce(MPI.IN_PLACE, diameter, op=MPI.MAX), clock)
        layers = [[np.flatnonzero(row == h) for row in hops] for h in range(int(diameter[0]))]
        return [layer[0] for layer in layers], [layer[1:] for layer in layers]

    def free(self) -> None:
        if self._request is not None:
            self._request.Free()
        self.comm.Free()
