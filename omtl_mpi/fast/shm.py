"""Exchanges for jobs whose ranks all share one node: MPI shared memory and blocking wake-ups.

The star (C-ADMM's server and workers) and the neighbour exchange (D-ADMM, D-PSGD) with the
same verbs as :mod:`omtl_mpi.comm.mpi` and :mod:`omtl_mpi.comm.graph`, for the case that
matters on a laptop: more ranks than cores.  Messages are written straight into one MPI-3
shared-memory window (``MPI.Win.Allocate_shared`` on the node), and a rank that waits for its
peers sleeps on a :class:`~omtl_mpi.fast.doorbell.Doorbells` FIFO instead of polling MPI, so
the rank with work gets the whole core (docs/DESIGN.md, "The speed plug-in"; docs/PERFORMANCE.md).
The numbers moved are the same bits as over MPI point-to-point.

Synchronisation, and why it is enough:

* **Star.** A worker writes its message into its own slice of the *up* region and rings the
  server; the server waits for every worker, computes, writes every reply into the *down*
  region and rings the workers.  A worker cannot write its next message before it has its
  reply, which the server sends only after it has read every message, so each region needs
  one copy.  A worker copies its reply out of the window (its learner keeps references to it
  between rounds).
* **Neighbour graph.** Every node writes its message of round t into the window's copy
  ``t mod 2`` and rings its neighbours; once all of them have rung it copies their messages out.
  A node can be at most one round ahead of a neighbour (it needs the neighbour's message of
  every round), so when it writes copy ``t mod 2`` again, at round t + 2, every neighbour has
  already read round t's: two copies are enough, and the bells count tokens per sender, so an
  early token of round t + 1 is not taken for round t.
"""
from __future__ import annotations

import os
from time import perf_counter

import numpy as np
from mpi4py import MPI

from .doorbell import Doorbells


class _Shared:
    """What both exchanges hold: one shared window and this rank's bells.

    The window holds ``n_doubles`` float64 and rank 0 allocates it all, so its layout is the
    caller's; every rank gets a numpy view (:attr:`memory`). Collective, as is :meth:`free`.
    """

    def __init__(self, comm, n_doubles: int, ring, listen):
        size = 8 * n_doubles if comm.Get_rank() == 0 else 0
        self._win = MPI.Win.Allocate_shared(size, 8, comm=comm)
        buf, _ = self._win.Shared_query(0)
        self.memory = np.frombuffer(buf, dtype=np.float64, count=n_doubles)
        if comm.Get_rank() == 0:
            self.memory[...] = 0.0
        try:
            self._bells = Doorbells(comm, ring=ring, listen=listen)
        except Exception:
            self._win.Free()
            raise

    def free(self) -> None:
        """Close the bells and free the window (collective)."""
        self._bells.close()
        self._win.Free()


class ShmStar(_Shared):
    """Rank 0 is the server, every other rank a worker; the verbs of
    :class:`~omtl_mpi.comm.mpi.MpiStar`, over one node's shared memory.

    Parameters
    ----------
    comm : MPI.Intracomm
        Every rank on this node (checked by the caller).
    up_counts, down_counts : sequence of int, one per rank
        Doubles each rank sends up / receives down per round (0 for rank 0). Messages are
        copied into the window, so there are no learner buffers to bind, unlike MpiStar.
    """

    def __init__(self, comm, up_counts, down_counts):
        rank = comm.Get_rank()
        self.is_server = rank == 0
        self.is_worker = rank != 0
        up_off = np.concatenate(([0], np.cumsum(np.asarray(up_counts, dtype=np.int64))))
        down_off = np.concatenate(([0], np.cumsum(np.asarray(down_counts, dtype=np.int64))))
        n_up, n_down = int(up_off[-1]), int(down_off[-1])
        peers = list(range(1, comm.Get_size())) if self.is_server else [0]
        super().__init__(comm, n_up + n_down, ring=peers, listen=peers)
        up, down = self.memory[:n_up], self.memory[n_up:]
        if self.is_server:
            self._gathered, self._reply = up, down
        else:
            self._up = up[up_off[rank]: up_off[rank + 1]]
            self._down = down[down_off[rank]: down_off[rank + 1]]
            self._reply = np.empty_like(self._down)

    # -- worker side -------------------------------------------------------------------
    def up(self, msg: np.ndarray, clock) -> None:
        t0 = perf_counter()
        self._up[...] = msg
        self._bells.ring_all()
        clock.comm += perf_counter() - t0

    def down(self, clock) -> np.ndarray:
        t0 = perf_counter()
        self._bells.wait_all()
        t1 = perf_counter()
        np.copyto(self._reply, self._down)
        clock.comm += perf_counter() - t1
        clock.wait += t1 - t0
        return self._reply

    # -- server side -------------------------------------------------------------------
    def gather(self, clock) -> np.ndarray:
        t0 = perf_counter()
        self._bells.wait_all()
        clock.wait += perf_counter() - t0
        return self._gathered

    def scatter(self, msg: np.ndarray, clock) -> None:
        t0 = perf_counter()
        self._reply[...] = msg
        self._bells.ring_all()
        clock.comm += perf_counter() - t0


class ShmGraph(_Shared):
    """This rank is node ``comm.rank`` of ``topology``; the verbs of
    :class:`~omtl_mpi.comm.graph.MpiGraph`, over one node's shared memory.

    Parameters
    ----------
    comm : MPI.Intracomm
        Every rank on this node (checked by the caller).
    topology : Topology
    message_shape : tuple
        Shape of what this node sends every round.
    inbox : ndarray, optional
        Where the neighbours' messages are copied, shape (number of neighbours,
        *message_shape), in ascending neighbour order as MpiGraph delivers them; by default a
        buffer of this object's own. (What this node sends is copied into the window, so there
        is no message buffer to bind, unlike MpiGraph.)
    """

    def __init__(self, comm, topology, message_shape, inbox=None):
        rank, size = comm.Get_rank(), comm.Get_size()
        self._rank = rank
        neighbours = list(topology.neighbours(rank))
        shape = tuple(int(s) for s in message_shape)
        n_copies = 2 * size * int(np.prod(shape))
        super().__init__(comm, n_copies, ring=neighbours, listen=neighbours)
        self._copies = self.memory.reshape((2, size) + shape)
        self._recv = inbox if inbox is not None else np.empty((len(neighbours),) + shape)
        self._neighbours = np.asarray(neighbours, dtype=np.intp)
        self._round = 0

    def exchange(self, messages: list, clock) -> list:
        (msg,) = messages
        t0 = perf_counter()
        copy = self._copies[self._round & 1]
        self._round += 1
        copy[self._rank] = msg
        self._bells.ring_all()
        t1 = perf_counter()
        self._bells.wait_all()
        t2 = perf_counter()
        np.take(copy, self._neighbours, axis=0, out=self._recv, mode="clip")   # unbuffered
        clock.comm += (t1 - t0) + (perf_counter() - t2)
        clock.wait += t2 - t1
        return [self._recv]


def set_batch_policy() -> object:
    """Mark this process as a batch (CPU-bound) task for the Linux scheduler, and return what
    :func:`restore_policy` needs to undo it.

    Under SCHED_BATCH a rank that rings a peer sharing its core is not pre-empted by the peer it
    just woke: it goes on to its own wait (or work) and the peer runs when it blocks, one
    context switch instead of two.  Nothing is done (None returned) where the policy does not
    exist or may not be set, or when the environment sets ``OMTL_MPI_SCHED_BATCH=0`` (for the
    benchmarks that measure what it is worth).
    """
    if not hasattr(os, "SCHED_BATCH") or os.environ.get("OMTL_MPI_SCHED_BATCH") == "0":
        return None
    try:
        before = (os.sched_getscheduler(0), os.sched_getparam(0))
        if before[0] == os.SCHED_OTHER:
            os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
            return before
    except OSError:
        pass
    return None


def restore_policy(before) -> None:
    """Undo :func:`set_batch_policy`."""
    if before is not None:
        try:
            os.sched_setscheduler(0, before[0], before[1])
        except OSError:
            pass
