"""The round loop of server-pattern learners (C-ADMM and friends).

One loop serves every layout: in one process the rank is both server and worker (with
:class:`~omtl_mpi.comm.LocalStar`); under MPI rank 0 is only the server and the others only
workers (with :class:`~omtl_mpi.comm.mpi.MpiStar`).  The math objects are the same.
"""
from __future__ import annotations

from .schedule import rounds


def run_star(comm, worker, server, stream, clock, progress, preds=None, first_round: int = 0,
             fault=None, checkpoint=None):
    """Run rounds ``first_round..T-1``, filling the worker's predictions ``preds`` (T, B, kb).

    Parameters
    ----------
    comm : LocalStar or MpiStar
    worker, server : role objects or None
        This rank's roles (both in one process).
    stream : RoundBatches or None
        The worker's tasks, round-major.
    clock : PhaseClock
    progress : Progress
    fault : Fault, optional
        Where this rank fails on purpose (--fail-at).
    checkpoint : (int, callable), optional
        ``(every, save)``: ``save(t)`` after every ``every``-th round, on every rank.
    """
    every = getattr(worker if worker is not None else server, "sync_every", 1)
    for t in rounds(first_round, clock.rows.shape[0], progress, fault, checkpoint):
        clock.start()
        sync = (t + 1) % every == 0      # the same on every rank: talk on every m-th round only
        if worker is not None:
            X, y, inv_count = stream[t]
            yhat, msg = worker.up(X, y, inv_count)
            preds[t] = yhat
            if sync:
                comm.up(msg, clock)
        if server is not None and sync:
            comm.scatter(server.step(comm.gather(clock)), clock)
            server.after_reply()
        if worker is not None and sync:
            worker.down(comm.down(clock))
        clock.stop(t)
