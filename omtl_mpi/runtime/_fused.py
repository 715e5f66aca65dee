"""Whole rounds in compiled code: the loops behind :mod:`.fused` (imported only by its load()).

One function per role (C-ADMM worker, C-ADMM server, D-ADMM node) runs rounds
``state[T] .. last - 1`` of the shared-memory transport with the compiled steps: the math of
:mod:`omtl_mpi.algorithms._compiled`, the messages of :mod:`omtl_mpi.comm.shm` (the same
layout in the same window) and the doorbells of :mod:`omtl_mpi.comm._compiled`, with the
phase clock of :class:`omtl_mpi.comm.clock.PhaseClock`.  Each step is the function the Python
loop calls, with the same arguments in the same order, so the results are the same bits.

A loop stops early, with the reason as its return value, when the caller must act:

* OK with ``state[T] < last``: ``deadline`` passed (the caller shows progress, then goes on);
* INTERRUPTED: a signal arrived while waiting; calling again resumes the wait;
* PEER_LOST, UNEXPECTED, IO_ERROR: as :mod:`omtl_mpi.comm._compiled` returns them;
* CAREFUL: this round's Omega update needs relationship.py's careful path (a Gram matrix out
  of range, a consensus matrix built in Omega's eigenvectors, LAPACK not converging): the
  caller finishes the round in Python (``state[PHASE]`` says from where) and goes on.

``state`` (int64) holds the loop's position and counters between calls, ``acc`` (float64)
the current round's start time and its communicate and wait seconds so far.
"""
from __future__ import annotations

from numba import boolean, float64, int64, uint32, void

from ..algorithms import _compiled as K
from ..algorithms.kernels import OK as _OK, compiled as _compile, sources_digest
from ..comm import _compiled as bells
from ..comm._compiled import OK

CAREFUL = 5
# state[...]: the next round, where in it the loop stands, Omega updates' step counter, the
# exchange's round counter (which copy of the window), the node's round counter, and errno or
# the unexpected sender
T, PHASE, STEPS, EXCHANGES, NODE_ROUND, INFO = range(6)
# phases of a round
START, WAIT, AFTER_WAIT, FINISH = range(4)

# the files this module takes code or constants from (kernels.refresh)
BUILT_FROM = sources_digest("algorithms/_compiled.py", "algorithms/kernels.py",
                            "algorithms/relationship.py", "comm/_compiled.py")

_i1, _u1 = int64[:], uint32[:]
_f1, _f2, _f3, _f4 = float64[:], float64[:, :], float64[:, :, :], float64[:, :, :, :]
# state, acc, last, deadline, clock id, the clock's rows
_LOOP = (_i1, _f1, int64, float64, int64, _f2)
# this rank's FIFO, its peers' FIFOs, its token, the listen table (every sender counted as one:
# only a round's last message rings), the token count, scratch
_BELLS = (int64, _i1, _u1, _i1, _i1, _u1)
# W, Z, R, rY, X, y, inv_count, predictions, loss code, keep, inv, rho
_BLOCK = (_f2, _f2, _f2, _f2, _f4, _f3, _f2, boolean[:, :, :], int64, float64, float64, float64)
# live M, Omega's eigenvalues and eigenvectors; scratch for an update; [u; V];
# relationship?, m, eps, a, rho, lambda2, lambda4
_CONSENSUS = (_f2, _f1, _f2, _f2, _f1, _f2, _f2, boolean, int64, float64, float64, float64,
              float64, float64)


@_compile(int64())
def built_from():
    """:data:`BUILT_FROM` as it was when this module was compiled."""
    return BUILT_FROM


@_compile(int64(int64, _f2, _f1, _f2, _f2, _f1, _f2, _f2, boolean, int64, float64, float64,
                float64, float64, float64))
def _update_relationship(steps, V, evals, Q, M, evals2, Q2, M2, relationship, every, eps, a,
                         rho, lambda2, lambda4):
    """Consensus.update_relationship after ``steps`` steps: Omega and M from V through the
    compiled kernel, into the live arrays only if it succeeded. OK, or CAREFUL."""
    if not relationship or steps == 0 or steps % every != 0:
        return OK
    try:
        status = K.relationship_step(V, eps, a, rho, lambda2, lambda4, evals2, Q2, M2)
    except Exception:                   # dsyevd did not converge
        return CAREFUL
    if status != _OK:
        return CAREFUL
    evals[:] = evals2
    Q[:, :] = Q2
    M[:, :] = M2
    return OK


@_compile(void(_f1, int64))
def _begin(acc, clock):
    """A round starts: its start time, nothing communicated or waited yet."""
    acc[0] = bells.now(clock)
    acc[1] = 0.0
    acc[2] = 0.0


@_compile(int64(_i1, _f1, int64, *_BELLS))
def _wait(state, acc, clock, fd, peers, token, where, count, buf):
    """Sleep until this round's messages are in (the wait phase); on to AFTER_WAIT if they are."""
    t0 = bells.now(clock)
    status = bells.wait(fd, where, count, buf, state[INFO:INFO + 1])
    acc[2] += bells.now(clock) - t0
    if status == OK:
        state[PHASE] = AFTER_WAIT
    return status


@_compile(float64(_i1, _f1, int64, _f2))
def _end(state, acc, clock, rows):
    """A round ends: its clock row (compute is what is neither communicate nor wait), and on to
    the next round. Returns the time."""
    end = bells.now(clock)
    t = state[T]
    rows[t, 0] = (end - acc[0]) - acc[1] - acc[2]
    rows[t, 1] = acc[1]
    rows[t, 2] = acc[2]
    state[T] = t + 1
    state[PHASE] = START
    return end


@_compile(int64(*_LOOP, *_BLOCK, _f2, _f2, _f2, _f2, _i1, int64, *_BELLS))
def star_worker(state, acc, last, deadline, clock, rows,
                W, Z, R, rY, X, y, inv_count, preds, loss, keep, inv, rho,
                C, up, down, reply, arrivals, workers,
                fd, peers, token, where, count, buf):
    """C-ADMM worker rounds (run_star's worker side with ShmStar): predict, w-step, C up to the
    window, ring the server if this was the round's last message; wait; (u, V) from the
    window, z-step.

    ``C`` (kb x d) is the block's message buffer, ``up`` (kb x d) and ``down`` (kb+1 x d) this
    worker's parts of the window, ``reply`` (kb+1 x d) where the reply is copied (the block keeps
    views of it, as with ShmStar.down); ``arrivals[0]`` counts the ``workers`` workers' messages.
    """
    info = state[INFO:INFO + 1]
    while state[T] < last:
        t = state[T]
        if state[PHASE] == START:
            _begin(acc, clock)
            K.worker_step(W, Z, R, C, X[t], y[t], inv_count[t], preds[t], loss, keep, inv, rho)
            t0 = bells.now(clock)
            up[:, :] = C
            status = bells.arrive(arrivals, 0, workers, peers[0], token, info)
            acc[1] += bells.now(clock) - t0
            if status != OK:
                return status
            state[PHASE] = WAIT
        if state[PHASE] == WAIT:
            status = _wait(state, acc, clock, fd, peers, token, where, count, buf)
            if status != OK:
                return status
        t0 = bells.now(clock)
        reply[:, :] = down
        acc[1] += bells.now(clock) - t0
        K.dual_step(reply[0:1], reply[1:], C, Z, R, rY, rho, inv)
        if _end(state, acc, clock, rows) >= deadline:
            break
    return OK


@_compile(int64(*_LOOP, *_CONSENSUS, _f2, _f2, _i1, *_BELLS))
def star_server(state, acc, last, deadline, clock, rows,
                M, evals, Q, M2, evals2, Q2, uv, relationship, every, eps, a, rho, lambda2,
                lambda4,
                gathered, down, reply_rows,
                fd, peers, token, where, count, buf):
    """C-ADMM server rounds (run_star's server side with ShmStar): wait for the last worker's
    ring (every worker's message is in); the (u, V) step ``uv = M C`` on the gathered C (K x d, the window's up part); each worker's
    reply rows ``uv[reply_rows]`` into the window's down part; ring the workers; then the Omega
    update (after the reply, as CAdmmServer.after_reply).

    Returns CAREFUL with ``state[PHASE] == FINISH`` when the Omega update of round ``state[T]``
    must be redone in Python; everything else of that round is done.
    """
    info = state[INFO:INFO + 1]
    while state[T] < last:
        if state[PHASE] == START:
            _begin(acc, clock)
            state[PHASE] = WAIT
        if state[PHASE] == WAIT:
            status = _wait(state, acc, clock, fd, peers, token, where, count, buf)
            if status != OK:
                return status
        K.apply_consensus(M, gathered, uv)
        state[STEPS] += 1
        t0 = bells.now(clock)
        for i in range(reply_rows.shape[0]):
            down[i, :] = uv[reply_rows[i]]
        status = bells.ring(peers, token, info)
        acc[1] += bells.now(clock) - t0
        if status != OK:
            return status
        if _update_relationship(state[STEPS], uv[1:], evals, Q, M, evals2, Q2, M2,
                                relationship, every, eps, a, rho, lambda2, lambda4) != OK:
            state[PHASE] = FINISH
            return CAREFUL
        if _end(state, acc, clock, rows) >= deadline:
            break
    return OK


@_compile(int64(*_LOOP, _f1, *_BLOCK, *_CONSENSUS, float64[:, :, :], _f4, int64, _i1, _i1,
                _i1, int64, int64, *_BELLS))
def graph_node(state, acc, last, deadline, clock, rows, staleness,
               W, Z, R, rY, X, y, inv_count, preds, loss, keep, inv, rho,
               M, evals, Q, M2, evals2, Q2, uv, relationship, every, eps, a, rho_c, lambda2,
               lambda4,
               slots, copies, rank, neighbours, arrivals, degrees, start, stop,
               fd, peers, token, where, count, buf):
    """D-ADMM node rounds (run_graph with ShmGraph): predict, w-step and own rows of the table
    (``slots[0]``); the table into the window's copy of this round, ringing each neighbour for
    which it is the round's last message; wait; their tables into ``slots[1:]``, the
    freshest-row merge; Omega from the table's V, (u, V) from its C, z-step, own v into the
    table.

    ``copies`` is the window (2 x ranks x K x (2d+1)) and ``arrivals`` its counts of messages
    per copy and rank (flat, 2 x ranks; ``degrees[r]`` make one round of rank r); ``peers`` are
    the neighbours' FIFOs in the order of ``neighbours``; tasks ``start..stop-1`` are this
    node's; ``rho`` and ``rho_c`` are the same rho (the block's and the consensus step's).
    Returns CAREFUL with ``state[PHASE] == FINISH`` when round ``state[T]`` must be finished in
    Python from its Omega update on (DAdmmNode.finish_round); the merge is done.
    """
    n_tasks = slots.shape[1]
    d = (slots.shape[2] - 1) // 2
    table = slots[0]
    C = table[start:stop, :d]
    info = state[INFO:INFO + 1]
    while state[T] < last:
        t = state[T]
        if state[PHASE] == START:
            _begin(acc, clock)
            state[NODE_ROUND] += 1
            K.worker_step(W, Z, R, C, X[t], y[t], inv_count[t], preds[t], loss, keep, inv, rho)
            table[start:stop, 2 * d] = state[NODE_ROUND]
            t0 = bells.now(clock)
            parity = state[EXCHANGES] & 1
            state[EXCHANGES] += 1
            copies[parity, rank] = table
            for i in range(neighbours.shape[0]):
                j = neighbours[i]
                status = bells.arrive(arrivals, parity * copies.shape[1] + j, degrees[j],
                                      peers[i], token, info)
                if status != OK:
                    return status
            acc[1] += bells.now(clock) - t0
            state[PHASE] = WAIT
        if state[PHASE] == WAIT:
            status = _wait(state, acc, clock, fd, peers, token, where, count, buf)
            if status != OK:
                return status
        t0 = bells.now(clock)
        copy = copies[(state[EXCHANGES] - 1) & 1]
        for i in range(neighbours.shape[0]):
            slots[1 + i] = copy[neighbours[i]]
        acc[1] += bells.now(clock) - t0
        staleness[t] = state[NODE_ROUND] - K.merge_tables(slots) / n_tasks
        if _update_relationship(state[STEPS], table[:, d:2 * d], evals, Q, M, evals2,
                                Q2, M2, relationship, every, eps, a, rho_c, lambda2,
                                lambda4) != OK:
            state[PHASE] = FINISH
            return CAREFUL
        K.apply_consensus(M, table[:, :d], uv)
        state[STEPS] += 1
        K.dual_step(uv[0:1], uv[1 + start:1 + stop], C, Z, R, rY, rho, inv)
        table[start:stop, d:2 * d] = uv[1 + start:1 + stop]
        if _end(state, acc, clock, rows) >= deadline:
            break
    return OK
