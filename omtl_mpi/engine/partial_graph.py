"""Asynchronous D-ADMM rounds (``--sync partial``): a node mixes with the newest table it holds
of each neighbour, none older than TAU of its own rounds (docs/ALGORITHMS.md section 2.9).

As for C-ADMM (:mod:`.partial`), everything a run computes is a function of its schedule, here
per node, round and neighbour the round of the table it merged: drawn on a simulated clock in
one process (:func:`simulate_graph`), recorded under MPI (:func:`gossip`), run in one process by
:func:`run_graph_schedule`, which replays an MPI run bit for bit.
"""
from __future__ import annotations

from time import perf_counter

import numpy as np

from ..errors import UserError
from .partial import DOWN, _next_cut


def simulate_graph(factors: np.ndarray, neighbours: list, TAU: int, every: int = 0) -> tuple:
    """The schedule ``used`` (N x T x the most neighbours, -1 padded) of nodes whose rounds
    last ``factors`` (N x T) time units, and when each round starts (N x T): node i sends its
    table as its local step ends, and merges once every neighbour's newest table is at most TAU
    of its rounds old (it waits for it otherwise), with the newest it holds of each; messages
    take no time, and the tables that arrive at an instant are there for every merge at that
    instant. With ``every``, a checkpoint's cut after every ``every``-th round: every node
    waits for the last to merge that round."""
    import heapq
    N, T = factors.shape
    width = max((len(nb) for nb in neighbours), default=0)
    used = np.full((N, T, width), -1, dtype=np.int64)
    starts = np.zeros((N, T))
    sent = [-1] * N                         # each node's newest table sent
    events = [(float(factors[i, 0]), i) for i in range(N)] if T else []
    heapq.heapify(events)
    waiting, parked = [], []                # merge due; stopped at a cut
    while events or waiting:
        now = events[0][0] if events else None
        while events and events[0][0] == now:
            _, i = heapq.heappop(events)
            sent[i] += 1
            waiting.append(i)
        merged = True
        while merged:
            merged = False
            for i in sorted(waiting):
                t = sent[i]
                if all(sent[j] >= t - TAU for j in neighbours[i]):
                    used[i, t, :len(neighbours[i])] = [sent[j] for j in neighbours[i]]
                    waiting.remove(i)
                    if t + 1 < T and every and (t + 1) % every == 0:
                        parked.append(i)
                    elif t + 1 < T:
                        starts[i, t + 1] = now
                        heapq.heappush(events, (now + float(factors[i, t + 1]), i))
                    merged = True
        if len(parked) == N:                # the cut: every node starts the next round now
            for i in parked:
                starts[i, sent[i] + 1] = now
                heapq.heappush(events, (now + float(factors[i, sent[i] + 1]), i))
            parked = []
        if not events and waiting:          # cannot happen: TAU >= 0 and every node sends
            raise RuntimeError("the simulated graph schedule is stuck")
    return used, starts


def check_graph_schedule(used: np.ndarray, neighbours: list, N: int, T: int, TAU: int) -> None:
    """UserError unless ``used`` is a schedule of N nodes and T rounds on these neighbours:
    per neighbour a table of a round it had sent, never older than TAU rounds, never older than
    the one used the round before."""
    where = "the schedule to replay (--replay)"
    width = max((len(nb) for nb in neighbours), default=0)
    if used.shape != (N, T, width):
        raise UserError(f"{where} is for {used.shape[0]} nodes and {used.shape[1]} rounds of "
                        f"{used.shape[2]} neighbours at most, the run has {N}, {T} and {width}")
    rounds = np.arange(T)[:, None]
    for i, nb in enumerate(neighbours):
        mine = used[i, :, :len(nb)]
        if ((mine < rounds - TAU).any() or (mine >= T).any()
                or (np.diff(mine, axis=0) < 0).any() or (used[i, :, len(nb):] != -1).any()):
            raise UserError(f"{where} gives node {i} tables its neighbours had not sent, or older "
                            f"than --max-delay {TAU} allows; the file is damaged")


def run_graph_schedule(nodes, streams, preds, staleness, used, neighbours, clock,
                       hooks=None, first_round: int = 0, saved: dict | None = None,
                       keep=None) -> None:
    """Every node's rounds of the schedule ``used`` in this process: node i's round t after
    its round t - 1 and after each neighbour's local step of the round whose table it uses;
    the tables are the copies their nodes sent (kept until no neighbour can use them). With
    ``hooks.checkpoint``, at every cut (:func:`simulate_graph`'s) ``keep(state)`` gets every
    node's last table sent and ``save(round)`` is called; ``first_round`` and ``saved`` resume
    there."""
    N, T = used.shape[:2]
    sent = [{} for _ in range(N)]           # per node: {round: its table then}
    if saved is not None:
        for j in range(N):
            sent[j][first_round - 1] = np.array(saved[f"table_{j}"])
    slots = [s.slot_ptr.tolist() for s in streams]
    stepped = [first_round] * N             # rounds whose local step is done
    finished = [first_round] * N            # rounds merged and finished
    every, save = hooks.checkpoint if hooks is not None and hooks.checkpoint else (0, None)
    cut = _next_cut(first_round, every, T)
    rows = clock.rows
    progress = hooks.progress if hooks is not None else None
    fault = hooks.fault if hooks is not None else None
    fail_at = fault.at if fault is not None else -1
    while min(finished, default=T) < T:
        limit = T if cut is None else cut
        if min(finished) == limit:          # the cut: every node ended the round
            keep({f"table_{j}": sent[j][limit - 1] for j in range(N)})
            save(limit)
            cut = _next_cut(limit, every, T)
            continue
        moved = False
        for i in range(N):
            node, nb = nodes[i], neighbours[i]
            while finished[i] < limit:
                t = finished[i]
                if stepped[i] == t:
                    if t == fail_at:
                        fault.trigger(t)
                    t0 = perf_counter()
                    preds[i][slots[i][t]:slots[i][t + 1]] = node.local_step(*streams[i][t]).reshape(-1)
                    sent[i][t] = node.message.copy()
                    stepped[i] = t + 1
                    rows[t, 0] += perf_counter() - t0
                    moved = True
                wanted = used[i, t, :len(nb)]
                if any(r >= 0 and r not in sent[j] for r, j in zip(wanted, nb)):
                    break
                t0 = perf_counter()
                # no table of a neighbour yet (-1): zeros, whose stamps lose to every row's
                received = np.zeros((len(nb), node.message.size))
                for n, (j, r) in enumerate(zip(nb, wanted)):
                    if r >= 0:
                        received[n] = sent[j][int(r)]
                staleness[i, t] = node.merge(received)
                node.finish_round()
                finished[i] = t + 1
                rows[t, 0] += perf_counter() - t0
                moved = True
        # a table no neighbour can use any more (each uses ever newer ones) is dropped
        for j in range(N):
            users = [used[k, finished[k], list(neighbours[k]).index(j)]
                     for k in neighbours[j] if finished[k] < T]
            low = min((max(int(u), 0) for u in users), default=T)
            if limit < T:
                low = min(low, limit - 1)   # the cut keeps every node's last table
            for r in [r for r in sent[j] if r < low]:
                del sent[j][r]
        if progress is not None:
            progress.update(min(finished))
        if not moved:
            raise UserError("the schedule to replay (--replay) cannot be run: a round waits for "
                            "a table that waits for it; the file is damaged")
    if progress is not None:
        progress.close()


def gossip(comm, node, me: int, neighbours: list, stream, preds, staleness, T: int, TAU: int,
           clock, hooks, first_round: int = 0, saved: dict | None = None,
           keep=None) -> np.ndarray:
    """A D-ADMM node's side under MPI (node ``me`` is rank ``me``): every round, step, send
    the table to every neighbour and merge the newest table it holds of each, waiting only for
    one older than TAU rounds. Returns the round of each neighbour's table it used (T x n).
    At a checkpoint's cut it waits for its sends and its neighbours' tables of the round,
    then ``keep(state)`` and ``save(round)``."""
    from mpi4py import MPI

    from ..comm.waiting import wait_some
    size = node.message.size
    n = len(neighbours)
    outbox = [np.empty(size + 1), np.empty(size + 1)]       # this round's and the last one's
    sends = [[], []]
    inbox = [np.empty(size + 1) for _ in range(n)]
    newest = np.zeros((n, size))
    have = [-1] * n
    used = np.full((T, n), -1, dtype=np.int64)
    if saved is not None:
        newest[...] = saved["newest"]
        have[:] = np.asarray(saved["have"]).tolist()
        used[...] = saved["used"]
    receives = [comm.Irecv([inbox[k], MPI.DOUBLE], j, DOWN) if have[k] < T - 1
                else MPI.REQUEST_NULL for k, j in enumerate(neighbours)]
    every, save = hooks.checkpoint if hooks.checkpoint else (0, None)
    cut = _next_cut(first_round, every, T)
    slots = stream.slot_ptr.tolist()
    delay = hooks.delay.after if hooks.delay is not None else None
    fail_at = hooks.fault.at if hooks.fault is not None else -1

    def take(k) -> None:
        clock.received += inbox[k].nbytes
        clock.peers[neighbours[k], 1] += inbox[k].nbytes
        newest[k] = inbox[k][:-1]
        have[k] = int(inbox[k][-1])
        receives[k] = (comm.Irecv([inbox[k], MPI.DOUBLE], neighbours[k], DOWN)
                       if have[k] < T - 1 else MPI.REQUEST_NULL)

    def serve(sends: list, until=lambda: True) -> None:
        """Wait until every send of ``sends`` is complete and ``until()``, taking every table
        that arrives meanwhile, from any neighbour. A table above MPI's eager limit is sent
        only once its receiver has posted a receive, and a node holds one receive a
        neighbour, posted again when it takes what came: a node that waited for its sends, or
        for one neighbour, without taking the others' tables could wait for a neighbour that
        waits for it (tables of tens of KiB: many tasks with --preset paper, or the mixture
        prior's columns)."""
        since = perf_counter()
        while True:
            pending = [r for r in sends if r != MPI.REQUEST_NULL]
            if not pending and until():
                return
            posted = [k for k in range(n) if receives[k] != MPI.REQUEST_NULL]
            for i in wait_some(pending + [receives[k] for k in posted], clock, since):
                if i >= len(pending):
                    take(posted[i - len(pending)])
    for t in range(first_round, T):
        if t == cut:                # every table sent delivered, the neighbours' of the round in
            serve(sends[0] + sends[1], lambda: min(have, default=t) >= t - 1)
            keep({"newest": newest.copy(), "have": np.array(have, dtype=np.int64),
                  "used": used.copy()})
            save(t)
            cut = _next_cut(t, every, T)
        if t == fail_at:
            hooks.fault.trigger(t)
        clock.start()
        t0 = perf_counter()
        preds[slots[t]:slots[t + 1]] = node.local_step(*stream[t]).reshape(-1)
        if delay is not None:
            delay(t, perf_counter() - t0)
        box = outbox[t % 2]
        serve(sends[t % 2])
        t1 = perf_counter()
        box[:-1] = node.message
        box[-1] = t
        sends[t % 2] = [comm.Isend([box, MPI.DOUBLE], j, DOWN) for j in neighbours]
        clock.sent += box.nbytes * n
        clock.peers[neighbours, 0] += box.nbytes
        for k in range(n):
            while receives[k] != MPI.REQUEST_NULL and receives[k].Test():
                take(k)
        clock.comm += perf_counter() - t1
        # a table too old: wait for that neighbour
        serve([], lambda: min(have, default=t) >= t - TAU)
        used[t] = have
        staleness[t] = node.merge(newest)
        node.finish_round()
        clock.stop(t)
    # the neighbours' last tables: not used, but received
    serve(sends[0] + sends[1], lambda: min(have, default=T - 1) >= T - 1)
    return used
