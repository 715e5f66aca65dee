"""The round loop of server-pattern learners (C-ADMM and friends).

One loop serves every layout: in one process the rank is both server and worker (with
:class:`~omtl_mpi.comm.local.LocalStar`); under MPI rank 0 is only the server and the others only
workers (with :class:`~omtl_mpi.comm.mpi.MpiStar`).  The math objects are the same.

The loop runs once per round for microseconds of math, so it looks everything up once, before
the first round.
"""
from __future__ import annotations

from time import perf_counter

from .schedule import NO_HOOKS, Hooks, rounds


def run_star(comm, worker, server, stream, clock, preds=None, first_round: int = 0,
             hooks: Hooks = NO_HOOKS):
    """Run rounds ``first_round..T-1``, filling the worker's predictions ``preds``.

    Parameters
    ----------
    comm : LocalStar or MpiStar
    worker, server : role objects or None
        This rank's roles (both in one process).
    stream : RoundLayout or None
        The worker's tasks, round-major over each round's active tasks.
    clock : PhaseClock
    preds : ndarray of bool, shape (slots,)
        Predictions (True for +1), filled round by round in the layout's slots.
    hooks : Hooks
        The between-round work (progress, --fail-at, checkpoints, the finiteness check) and
        this rank's injected delay, after a worker's step and before it sends.
    """
    every = getattr(worker if worker is not None else server, "sync_every", 1)
    start, stop = clock.start, clock.stop
    # the mixture prior's EM steps sum every worker's E-step through the server; in one
    # process the one block holds every task and needs no exchange
    if not (comm.is_server and comm.is_worker):
        def reduce(values):
            return comm.reduce(values, clock)
        for role in (worker, server):
            if role is not None and hasattr(role, "bind"):
                role.bind(reduce)
    if worker is not None:
        slot = stream.slot_ptr.tolist()
        up, down, comm_up, comm_down = worker.up, worker.down, comm.up, comm.down
    delay = hooks.delay.after if hooks.delay is not None and worker is not None else None
    if server is not None:
        step, after_reply, gather, scatter = server.step, server.after_reply, comm.gather, comm.scatter
    for t in rounds(first_round, clock.rows.shape[0], hooks):
        start()
        sync = every == 1 or (t + 1) % every == 0      # the same on every rank
        if worker is not None:
            if delay is not None:
                t0 = perf_counter()
            positive, msg = up(*stream[t])
            preds[slot[t]:slot[t + 1]] = positive.reshape(-1)
            if delay is not None:
                delay(t, perf_counter() - t0)
            if sync:
                comm_up(msg, clock)
        if server is not None and sync:
            scatter(step(gather(clock)), clock)
            after_reply()
        if worker is not None and sync:
            down(comm_down(clock))
        stop(t)
