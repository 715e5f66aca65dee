"""MPI implementations over mpi4py, buffer-based on every per-round path.

Only this module (and :mod:`omtl_mpi.comm.graph`) imports mpi4py.
"""
from __future__ import annotations

from time import perf_counter

import numpy as np
from mpi4py import MPI
from mpi4py.util.dtlib import from_numpy_dtype

from .waiting import wait


def _displacements(counts) -> np.ndarray:
    counts = np.asarray(counts, dtype=np.int64)
    return np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)


class MpiWorld:
    """Rank, size and the rare collective helpers of a communicator (default COMM_WORLD)."""

    def __init__(self, comm=None):
        self.comm = comm if comm is not None else MPI.COMM_WORLD
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()

    def agree(self, value):
        """Every rank's ``value`` in rank order, on every rank (a rare, small control message)."""
        return self.comm.allgather(value)

    def gather_objects(self, value):
        """Every rank's ``value`` on rank 0 (None elsewhere): checkpoints only, rare, and only
        the job's own arrays (never data read from outside the job)."""
        return self.comm.gather(value, root=0)

    def scatter_objects(self, values):
        """Rank r gets ``values[r]`` from rank 0 (restoring a checkpoint)."""
        return self.comm.scatter(values, root=0)

    def gather_rows(self, rows: np.ndarray, counts=None, root: int = 0):
        """Concatenate every rank's ``rows`` (n_i, ...) on ``root`` in rank order (Gatherv).

        The trailing shape and dtype must agree on all ranks; other ranks get None.
        """
        rows = np.ascontiguousarray(rows)
        tail = rows.shape[1:]
        per_row = int(np.prod(tail)) if tail else 1
        if counts is None:
            counts = self.comm.allgather(rows.shape[0])
        mpitype = from_numpy_dtype(rows.dtype)
        if self.rank == root:
            out = np.empty((int(sum(counts)),) + tail, dtype=rows.dtype)
            sizes = np.asarray(counts, dtype=np.int64) * per_row
            self.comm.Gatherv([rows, mpitype], [out, (sizes, _displacements(sizes)), mpitype], root)
            return out
        self.comm.Gatherv([rows, mpitype], None, root)
        return None

    def abort(self, code: int) -> None:
        self.comm.Abort(code)

    def barrier(self) -> None:
        self.comm.Barrier()


class MpiStar:
    """Rank 0 is the server, every other rank a worker.

    Per round each worker's flat message goes up once (``Igatherv`` to rank 0) and the
    server's reply comes down once (``Iscatterv``); both are nonblocking and completed with
    :func:`omtl_mpi.comm.waiting.wait`, so a waiting rank sleeps instead of spinning.

    Parameters
    ----------
    comm : MPI.Comm
    up_counts, down_counts : sequence of int, one per rank
        Doubles each rank sends up / receives down per round (0 for rank 0).
    """

    def __init__(self, comm, up_counts, down_counts):
        self.comm = comm
        rank = comm.Get_rank()
        self.is_server = rank == 0
        self.is_worker = rank != 0
        self._empty = np.empty(0)
        up_counts = np.asarray(up_counts, dtype=np.int64)
        down_counts = np.asarray(down_counts, dtype=np.int64)
        self._up_spec = (up_counts, _displacements(up_counts))
        self._down_spec = (down_counts, _displacements(down_counts))
        self._gathered = np.empty(int(up_counts.sum())) if self.is_server else None
        self._down_buf = np.empty(int(down_counts[rank]))
        self._req_up = self._req_down = None

    # -- worker side -------------------------------------------------------------------
    def up(self, msg: np.ndarray, clock) -> None:
        t0 = perf_counter()
        self._req_up = self.comm.Igatherv([msg, MPI.DOUBLE], None, 0)
        # post the receive of the reply now, so the server never waits for us to get there
        self._req_down = self.comm.Iscatterv(None, [self._down_buf, MPI.DOUBLE], 0)
        clock.comm += perf_counter() - t0

    def down(self, clock) -> np.ndarray:
        wait(self._req_up, clock)
        wait(self._req_down, clock)
        return self._down_buf

    # -- server side -------------------------------------------------------------------
    def gather(self, clock) -> np.ndarray:
        t0 = perf_counter()
        req = self.comm.Igatherv([self._empty, MPI.DOUBLE],
                                 [self._gathered, self._up_spec, MPI.DOUBLE], 0)
        clock.comm += perf_counter() - t0
        wait(req, clock)
        return self._gathered

    def scatter(self, msg: np.ndarray, clock) -> None:
        t0 = perf_counter()
        req = self.comm.Iscatterv([msg, self._down_spec, MPI.DOUBLE], [self._empty, MPI.DOUBLE], 0)
        clock.comm += perf_counter() - t0
        wait(req, clock)
