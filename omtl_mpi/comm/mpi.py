"""MPI implementations over mpi4py, buffer-based on every per-round path.

Only this module (and :mod:`omtl_mpi.comm.graph`) imports mpi4py.
"""
from __future__ import annotations

from time import perf_counter

import numpy as np
from mpi4py import MPI
from mpi4py.util.dtlib import from_numpy_dtype

from .waiting import arrive, wait_all


class MpiWorld:
    """Rank, size and the rare collective helpers of a communicator (default COMM_WORLD)."""

    def __init__(self, comm=None):
        self.comm = comm if comm is not None else MPI.COMM_WORLD
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()

    # Rare set-up and tear-down collectives, where the ranks can arrive far apart: each first
    # waits for every rank without polling (waiting.arrive), then runs among ranks all there.

    def agree(self, value):
        """Every rank's ``value`` in rank order, on every rank (a rare, small control message)."""
        arrive(self.comm)
        return self.comm.allgather(value)

    def gather_objects(self, value):
        """Every rank's ``value`` on rank 0 (None elsewhere): checkpoints only, rare, and only
        the job's own arrays (never data read from outside the job)."""
        arrive(self.comm)
        return self.comm.gather(value, root=0)

    def scatter_objects(self, values):
        """Rank r gets ``values[r]`` from rank 0 (restoring a checkpoint)."""
        arrive(self.comm)
        return self.comm.scatter(values, root=0)

    def gather_rows(self, rows: np.ndarray, counts=None):
        """Concatenate every rank's ``rows`` (n_i, ...) on rank 0 in rank order (Gatherv).

        The trailing shape and dtype must agree on all ranks; other ranks get None.
        """
        arrive(self.comm)
        rows = np.ascontiguousarray(rows)
        tail = rows.shape[1:]
        per_row = int(np.prod(tail)) if tail else 1
        if counts is None:
            counts = self.comm.allgather(rows.shape[0])
        mpitype = from_numpy_dtype(rows.dtype)
        if self.rank == 0:
            out = np.empty((int(sum(counts)),) + tail, dtype=rows.dtype)
            sizes = np.asarray(counts, dtype=np.int64) * per_row
            offsets = np.concatenate(([0], np.cumsum(sizes)[:-1]))
            self.comm.Gatherv([rows, mpitype], [out, (sizes, offsets), mpitype], 0)
            return out
        self.comm.Gatherv([rows, mpitype], None, 0)
        return None

    def hosts(self) -> tuple[list, list, str]:
        """Every rank's host name and shared-memory group (the lowest rank of the ranks it can
        share memory with, ``COMM_TYPE_SHARED``), in rank order, and the MPI library (its
        version and device). Collective (set-up only)."""
        import socket
        local = self.comm.Split_type(MPI.COMM_TYPE_SHARED)
        lowest = local.allreduce(self.rank, op=MPI.MIN)
        local.Free()
        pairs = self.agree((socket.gethostname(), lowest))
        # the version line and, where the library names it (MPICH), its device
        # (Open MPI's ends in NUL characters, which no HDF5 string may hold)
        text = MPI.Get_library_version().replace("\x00", "")
        lines = [" ".join(line.split()) for line in text.splitlines()] or ["unknown"]
        library = "; ".join([lines[0]] + [x for x in lines[1:] if x.startswith("MPICH Device")])
        return [h for h, _ in pairs], [g for _, g in pairs], library

    def barrier(self) -> None:
        arrive(self.comm)
        self.comm.Barrier()         # everyone is here: leave together, within microseconds


class MpiStar:
    """Rank 0 is the server, every other rank a worker.

    Per round each worker's flat message goes up once and the server's reply comes down once,
    as persistent point-to-point requests started every round (buffers, counts and peers never
    change: nothing is set up per round), completed by :func:`.waiting.wait_all`.

    ``up_counts``, ``down_counts``: the doubles each rank sends up / receives down per round (0
    for rank 0). ``up_buffer``, ``reply_buffer``, optional: the array a worker's learner sends
    every round and the one the server's learner replies from; the requests are bound to them,
    so sending copies nothing (without them: buffers of this object's own). ``sized``: the
    counts are capacities, and a message's first number says how many of its numbers it uses (a
    round's entries of sparse instances); each round then posts nonblocking requests of the
    sizes used (``Irecv`` of the capacity, ``Isend`` of the prefix).
    """

    UP, DOWN = 11, 12          # message tags

    def __init__(self, comm, up_counts, down_counts, up_buffer=None, reply_buffer=None,
                 sized=False):
        self.comm = comm
        rank = comm.Get_rank()
        self._size = comm.Get_size()
        self.is_server = rank == 0
        self.is_worker = rank != 0
        up_counts = np.asarray(up_counts, dtype=np.int64)
        down_counts = np.asarray(down_counts, dtype=np.int64)
        up_offsets = np.concatenate(([0], np.cumsum(up_counts)))
        down_offsets = np.concatenate(([0], np.cumsum(down_counts)))
        # the bytes of a round's messages, per worker (the sized ones count what they use)
        self._up_bytes, self._down_bytes = 8.0 * up_counts[1:], 8.0 * down_counts[1:]
        self._up_total, self._down_total = float(self._up_bytes.sum()), float(self._down_bytes.sum())
        self._requests = []
        self.sized = sized

        def bind(init, buf, offsets, r, tag):
            req = init([buf[offsets[r]: offsets[r + 1]], MPI.DOUBLE], r, tag)
            self._requests.append(req)
            return req

        if self.is_server:
            workers = range(1, len(up_counts))
            self._gathered = np.empty(int(up_counts.sum()))
            self._reply = (reply_buffer if reply_buffer is not None
                           else np.empty(int(down_counts.sum())))
            if sized:
                self._ups = [self._gathered[up_offsets[r]: up_offsets[r + 1]] for r in workers]
                self._downs = [self._reply[down_offsets[r]: down_offsets[r + 1]] for r in workers]
                return
            self._recv_up = [bind(comm.Recv_init, self._gathered, up_offsets, r, self.UP)
                             for r in workers]
            self._send_down = [bind(comm.Send_init, self._reply, down_offsets, r, self.DOWN)
                               for r in workers]
        else:
            self._down_buf = np.empty(int(down_counts[rank]))
            self._up_msg = up_buffer if up_buffer is not None else np.empty(int(up_counts[rank]))
            if sized:
                return
            # the receive of the reply is started first, so the server never waits for us to
            # get there
            self._worker_round = [
                bind(comm.Recv_init, self._down_buf, [0, down_counts[rank]], 0, self.DOWN),
                bind(comm.Send_init, self._up_msg, [0, up_counts[rank]], 0, self.UP)]

    def up(self, msg: np.ndarray, clock) -> None:
        t0 = perf_counter()
        if msg is not self._up_msg:
            self._up_msg[...] = msg
        if self.sized:
            used = int(self._up_msg[0])
            self._worker_round = [
                self.comm.Irecv([self._down_buf, MPI.DOUBLE], 0, self.DOWN),
                self.comm.Isend([self._up_msg[:used], MPI.DOUBLE], 0, self.UP)]
            sent = 8.0 * used
        else:
            MPI.Prequest.Startall(self._worker_round)
            sent = self._up_msg.nbytes
        clock.sent += sent
        clock.peers_of(self._size)[0, 0] += sent
        clock.comm += perf_counter() - t0

    def down(self, clock) -> np.ndarray:
        wait_all(self._worker_round, clock)
        got = 8.0 * int(self._down_buf[0]) if self.sized else self._down_buf.nbytes
        clock.received += got
        clock.peers_of(self._size)[0, 1] += got
        return self._down_buf

    def gather(self, clock) -> np.ndarray:
        t0 = perf_counter()
        if self.sized:
            self._recv_up = [self.comm.Irecv([buf, MPI.DOUBLE], r, self.UP)
                             for r, buf in enumerate(self._ups, start=1)]
        else:
            MPI.Prequest.Startall(self._recv_up)
        clock.comm += perf_counter() - t0
        wait_all(self._recv_up, clock)
        got = 8.0 * np.array([buf[0] for buf in self._ups]) if self.sized else self._up_bytes
        clock.received += float(got.sum()) if self.sized else self._up_total
        clock.peers_of(self._size)[1:, 1] += got
        return self._gathered

    def scatter(self, msg: np.ndarray, clock) -> None:
        t0 = perf_counter()
        if msg is not self._reply:
            self._reply[...] = msg
        if self.sized:
            self._send_down = [self.comm.Isend([buf[:int(buf[0])], MPI.DOUBLE], r, self.DOWN)
                               for r, buf in enumerate(self._downs, start=1)]
            sent = 8.0 * np.array([buf[0] for buf in self._downs])
        else:
            MPI.Prequest.Startall(self._send_down)
            sent = self._down_bytes
        clock.sent += float(sent.sum()) if self.sized else self._down_total
        clock.peers_of(self._size)[1:, 0] += sent
        clock.comm += perf_counter() - t0
        wait_all(self._send_down, clock)

    def reduce(self, values: np.ndarray, clock) -> np.ndarray:
        """The sum over the workers of ``values`` (the server gives zeros), in rank order, on
        every rank: the mixture prior's EM steps (a few dozen rounds a run; ``Igather`` to the
        server, which sums, then ``Ibcast``, both completed without spinning)."""
        n = len(values)
        if getattr(self, "_sum", None) is None or len(self._sum) != n:
            self._sum = np.empty(n)
            self._rows = np.empty((self._size, n)) if self.is_server else None
        send = np.ascontiguousarray(values, dtype=np.float64)
        # up to the server and back down: n numbers each way per worker
        each = send.nbytes * (self._size - 1 if self.is_server else 1)
        clock.sent += each
        clock.received += each
        clock.peers_of(self._size)[slice(1, None) if self.is_server else 0] += send.nbytes
        t0 = perf_counter()
        request = self.comm.Igather([send, MPI.DOUBLE],
                                    [self._rows, MPI.DOUBLE] if self.is_server else None, root=0)
        clock.comm += perf_counter() - t0
        wait_all([request], clock)
        if self.is_server:
            self._sum[...] = self._rows[1]
            for row in self._rows[2:]:                  # rank order
                self._sum += row
        t0 = perf_counter()
        request = self.comm.Ibcast([self._sum, MPI.DOUBLE], root=0)
        clock.comm += perf_counter() - t0
        wait_all([request], clock)
        return self._sum

    def free(self) -> None:
        """Release the persistent requests (all are inactive between rounds)."""
        for req in self._requests:
            req.Free()
        self._requests = []
