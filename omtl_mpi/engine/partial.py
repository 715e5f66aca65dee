"""Asynchronous C-ADMM rounds (``--sync partial``): a partial barrier with bounded delay.

The server steps once ``S`` workers (``--min-workers``) have sent since its last step, folding
each worker's messages since then into one (changes add up, states are the newest:
:func:`omtl_mpi.algorithms.cadmm.merges`) and using every other worker's newest; a worker whose
newest message the server took more than ``TAU`` steps ago (``--max-delay``) is waited for
first. It replies to the workers whose messages it took. A worker sends its round's message and
goes on: its z-step uses the newest reply it holds, so its tasks learn at their own pace
(Zhang & Kwok, ICML 2014; docs/ALGORITHMS.md section 2.9).

Everything a run computes is a function of its *schedule*: for every worker and round, the
server step that took its message (``taken``) and the step whose reply its z-step used
(``used``, -1 before its first reply). Under MPI the schedule is what happened, recorded in the
results file; in one process it is drawn on a simulated clock (a worker's round lasts its
straggler factor, messages and replies take no time), so it is a function of the seed; and
:func:`run_schedule` runs any schedule in one process, which replays an MPI run bit for bit.
"""
from __future__ import annotations

from time import perf_counter

import numpy as np

from ..algorithms.cadmm import NEWEST, SUM
from ..errors import UserError


class PartialBarrier:
    """When the server steps: ``W`` workers of ``T`` rounds each, at least ``S`` of them new
    (of those not yet done) and none left more than ``TAU`` steps behind.

    ``arrive(w)`` counts a message of worker ``w``; when :meth:`ready`, :meth:`take` makes the
    step, records it in :attr:`taken` and returns the workers whose messages it took.
    """

    def __init__(self, W: int, T: int, S: int, TAU: int):
        self.W, self.T, self.S, self.TAU = W, T, S, TAU
        self.sent = [0] * W             # messages arrived, per worker
        self.took = [0] * W             # messages taken by a step
        self.last = [-1] * W            # the step that took the newest one
        self.steps = 0
        self.taken = np.full((W, T), -1, dtype=np.int64)

    def arrive(self, w: int) -> None:
        self.sent[w] += 1

    def done(self) -> bool:
        return all(t == self.T for t in self.took)

    def ready(self) -> bool:
        new = [w for w in range(self.W) if self.sent[w] > self.took[w]]
        waiting = [w for w in range(self.W) if self.took[w] < self.T]
        if not new or len(new) < min(self.S, len(waiting)):
            return False
        # a worker left behind too long is waited for: the step must take its message
        return all(self.sent[w] > self.took[w] for w in waiting if self.steps - self.last[w] > self.TAU)

    def take(self) -> list:
        s, taken = self.steps, []
        for w in range(self.W):
            if self.sent[w] > self.took[w]:
                self.taken[w, self.took[w]:self.sent[w]] = s
                self.took[w], self.last[w] = self.sent[w], s
                taken.append(w)
        self.steps += 1
        return taken


def simulate(factors: np.ndarray, S: int, TAU: int, every: int = 0) -> tuple:
    """The schedule ``(taken, used)`` (W x T each) of workers whose rounds last ``factors``
    (W x T) time units, on a simulated clock, and when each round starts (W x T): a message
    arrives as its round ends, the server steps as soon as it may, and a round's z-step uses
    the newest reply its worker holds when every message of that instant has arrived and been
    taken. Ties go in worker order. With ``every``, a checkpoint's cut after every ``every``-th
    round (:func:`run_schedule`): the workers wait for the slowest to end that round, and the
    server takes every message not yet taken in one step."""
    W, T = factors.shape
    barrier = PartialBarrier(W, T, S, TAU)
    used = np.full((W, T), -1, dtype=np.int64)
    starts = np.zeros((W, T))
    newest = [-1] * W
    now = 0.0
    for c0 in range(0, T, every or T or 1):
        c1 = min(c0 + (every or T), T)
        span = factors[:, c0:c1]
        ends = now + np.cumsum(span, axis=1)
        starts[:, c0:c1] = ends - span
        n = c1 - c0
        # every round's end, in time order (ties: round, then worker, as a stable sort keeps them)
        order = np.lexsort((np.repeat(np.arange(W), n), np.tile(np.arange(n), W), ends.reshape(-1)))
        i = 0
        while i < order.size:
            j = i
            while j < order.size and ends.flat[order[j]] == ends.flat[order[i]]:
                j += 1
            instant = [divmod(int(k), n) for k in order[i:j]]
            for w, _ in instant:
                barrier.arrive(w)
                while barrier.ready():
                    s = barrier.steps
                    for taken in barrier.take():
                        newest[taken] = s
            for w, r in instant:
                used[w, c0 + r] = newest[w]
            i = j
        if c1 < T and any(barrier.sent[w] > barrier.took[w] for w in range(W)):
            s = barrier.steps                       # the cut: every message taken
            for taken in barrier.take():
                newest[taken] = s
        now = float(ends[:, -1].max()) if n else now
    if not barrier.done():          # cannot happen: the last arrivals always make a step
        raise RuntimeError("the simulated schedule left messages untaken")
    return barrier.taken, used, starts


class Folder:
    """Every worker's messages since the server's last step, folded into the server's gathered
    layout: one flat buffer, worker by worker, each part added up or replaced (``kinds``)."""

    def __init__(self, parts_of: list, kinds: dict):
        # parts_of: per worker, (name, start, stop) within its message
        sizes = [parts[-1][2] if parts else 0 for parts in parts_of]
        self.offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        self.buffer = np.zeros(int(self.offsets[-1]))
        self.views = [self.buffer[self.offsets[w]:self.offsets[w + 1]] for w in range(len(sizes))]
        self.sums = [[(a, b) for name, a, b in parts if kinds[name] == SUM] for parts in parts_of]
        self.newest = [[(a, b) for name, a, b in parts if kinds[name] == NEWEST] for parts in parts_of]

    def add(self, w: int, message: np.ndarray) -> None:
        view = self.views[w]
        for a, b in self.sums[w]:
            view[a:b] += message[a:b]
        for a, b in self.newest[w]:
            view[a:b] = message[a:b]

    def taken(self, workers) -> None:
        """The step took these workers' messages: their changes start again from zero."""
        for w in workers:
            view = self.views[w]
            for a, b in self.sums[w]:
                view[a:b] = 0.0


def check_schedule(taken: np.ndarray, used: np.ndarray, W: int, T: int) -> None:
    """UserError unless ``(taken, used)`` is a schedule of W workers and T rounds that can run:
    every message taken once, in order, by steps 0, 1, ...; a round's reply from a step that
    took one of its worker's messages up to that round."""
    where = "the schedule to replay (--replay)"
    if taken.shape != (W, T) or used.shape != (W, T):
        raise UserError(f"{where} is for {taken.shape[0]} workers and {taken.shape[1]} rounds, "
                        f"the run has {W} and {T}")
    if not T:
        return
    if ((taken < 0).any() or (np.diff(taken, axis=1) < 0).any()
            or not np.array_equal(np.unique(taken), np.arange(int(taken.max()) + 1))):
        raise UserError(f"{where} does not take every message once, in order; the file is damaged")
    rounds = np.arange(T)
    for w in range(W):
        first = np.searchsorted(taken[w], used[w])      # where each used step first took one
        ok = (used[w] == -1) | ((first <= rounds) & (taken[w][np.minimum(first, T - 1)] == used[w]))
        if not ok.all():
            r = int(np.flatnonzero(~ok)[0])
            raise UserError(f"{where} gives worker {w + 1} in round {r + 1} the reply of a step "
                            "that took none of its messages so far; the file is damaged")


def run_schedule(workers, server, streams, preds, taken, used, parts_of, kinds, clock,
                 hooks=None, first_round: int = 0, saved: dict | None = None,
                 keep=None) -> None:
    """Run every worker's rounds and the server's steps of the schedule ``(taken, used)`` in
    this process, in an order that keeps to it: a worker's round after its previous one, once
    every step before the one that takes its message is made; its z-step once the step whose
    reply it uses is; a step once every message it takes has been sent.

    ``workers`` and ``streams`` are in worker (rank) order, ``parts_of`` and ``kinds`` how
    their messages fold (:class:`Folder`); ``preds[w]`` gets worker w's predictions in its
    layout's slots; ``clock.rows[r]`` the seconds of every worker's round r and of the steps
    whose newest message is of round r. With ``hooks.checkpoint`` ``(every, save)``, every
    ``every``-th round is a cut (:func:`simulate`'s): once every worker has ended it and every
    step taking its messages is made, ``keep(state)`` is given what a run resumed there
    continues from (as ``first_round`` and ``saved``) and ``save(round)`` is called.
    """
    W, T = taken.shape
    steps = int(taken.max()) + 1 if taken.size else 0
    folder = Folder(parts_of, kinds)
    down_of = server.reply_slices()
    held = [{} for _ in range(W)]           # per worker: {step: its reply}, until used
    slots = [s.slot_ptr.tolist() for s in streams]
    sent = [first_round] * W                # rounds whose message was sent
    ready = [first_round] * W               # rounds done (the z-step too)
    taken_to = [first_round] * W            # messages taken by the steps made
    made = 0
    if saved is not None:
        folder.buffer[...] = saved["folder"]
        made = int(saved["made"])
        for w, step in enumerate(np.asarray(saved["held_steps"]).tolist()):
            if step >= 0:
                held[w][step] = np.array(saved[f"held_{w}"])
    rows = clock.rows
    progress = hooks.progress if hooks is not None else None
    fault = hooks.fault if hooks is not None else None
    fail_at = fault.at if fault is not None else -1
    every, save = hooks.checkpoint if hooks is not None and hooks.checkpoint else (0, None)
    cuts = list(range((first_round // every + 1) * every, T, every)) if every else []
    for limit in cuts + [T]:
        while True:
            moved = False
            for w in range(W):
                worker, stream, row_used, row_taken = workers[w], streams[w], used[w], taken[w]
                while ready[w] < limit:
                    r = ready[w]
                    if sent[w] == r:                # its step: once every earlier step is made
                        if row_taken[r] != made:
                            break
                        if r == fail_at:
                            fault.trigger(r)
                        t0 = perf_counter()
                        positive, message = worker.up(*stream[r])
                        preds[w][slots[w][r]:slots[w][r + 1]] = positive.reshape(-1)
                        folder.add(w, message)
                        sent[w] = r + 1
                        rows[r, 0] += perf_counter() - t0
                    s = row_used[r]
                    if s >= made:                   # its reply is not made yet
                        break
                    if s >= 0:
                        t0 = perf_counter()
                        worker.down(held[w][s])
                        for old in [k for k in held[w] if k < s]:
                            del held[w][old]
                        rows[r, 0] += perf_counter() - t0
                    ready[w] = r + 1
                    moved = True
            # where the messages the next step takes end, per worker
            ends = [_last_taken(taken[w], taken_to[w], made) for w in range(W)]
            if made < steps and all(n >= end for n, end in zip(sent, ends)):
                t0 = perf_counter()
                reply = server.step(folder.buffer)
                took, newest = [], 0
                for w, end in enumerate(ends):
                    if end > taken_to[w]:
                        a, b = down_of[w]
                        held[w][made] = reply[a:b].copy()
                        took.append(w)
                        newest = max(newest, end - 1)
                        taken_to[w] = end
                folder.taken(took)
                server.after_reply()
                rows[newest, 0] += perf_counter() - t0
                made += 1
                moved = True
                if progress is not None:
                    progress.update(min(ready))
            if not moved:
                break
        if min(ready) < limit or min(taken_to) < limit or (limit == T and made < steps):
            raise UserError("the schedule to replay (--replay) cannot be run: a round waits for a "
                            "step that waits for it; the file is damaged")
        if limit < T and save is not None:
            # a round after the cut uses its worker's newest reply or a later one
            steps_held = [max(held[w], default=-1) for w in range(W)]
            state = {"made": np.int64(made), "folder": folder.buffer.copy(),
                     "held_steps": np.array(steps_held, dtype=np.int64)}
            for w, step in enumerate(steps_held):
                a, b = down_of[w]
                state[f"held_{w}"] = held[w][step] if step >= 0 else np.zeros(b - a)
            keep(state)
            save(limit)
    if progress is not None:
        progress.close()


def _last_taken(row: np.ndarray, start: int, step: int) -> int:
    """The end of the messages ``row`` (a worker's taken steps, non-decreasing) that steps up
    to ``step`` take, from ``start`` (those before are taken)."""
    end = start
    while end < row.shape[0] and row[end] <= step:
        end += 1
    return end


# the tags of the asynchronous messages (apart from the synchronous star's 11 and 12)
UP, DOWN = 21, 22


def _next_cut(done: int, every: int, T: int):
    """The round after which the next checkpoint's cut comes (None: no more)."""
    cut = (done // every + 1) * every if every else T
    return cut if cut < T else None


def serve(comm, server, barrier: PartialBarrier, folder: Folder, down_of, clock, hooks,
          first_round: int = 0, saved: dict | None = None, keep=None) -> None:
    """The server's side under MPI (rank 0; worker w is rank w + 1): take every message that
    has arrived, step whenever the barrier lets it, reply to the workers a step took (their
    reply, then the step's number and how many of their messages the steps took so far). At a
    checkpoint's cut (``hooks.checkpoint``) every worker stops after the round, the server
    takes every message left in one step, and ``keep(state)`` then ``save(round)`` run."""
    from mpi4py import MPI

    from ..comm.waiting import wait, wait_all, wait_some
    W, T = barrier.W, barrier.T
    if saved is not None:
        barrier.sent = np.asarray(saved["sent"]).tolist()
        barrier.took = np.asarray(saved["took"]).tolist()
        barrier.last = np.asarray(saved["last"]).tolist()
        barrier.steps = int(saved["steps"])
        barrier.taken[...] = saved["taken"]
        folder.buffer[...] = saved["folder"]
    every, save = hooks.checkpoint if hooks.checkpoint else (0, None)
    cut = _next_cut(first_round, every, T)
    inbox = [np.empty(folder.views[w].size) for w in range(W)]
    outbox = [np.empty(b - a + 2) for a, b in down_of]
    receives = [comm.Irecv([inbox[w], MPI.DOUBLE], w + 1, UP) if barrier.sent[w] < T
                else MPI.REQUEST_NULL for w in range(W)]
    sends = [MPI.REQUEST_NULL] * W
    rows, fewest = clock.rows, first_round
    progress = hooks.progress
    fail_at = hooks.fault.at if hooks.fault is not None else -1
    clock.start()
    while not barrier.done():
        arrived = MPI.Request.Testsome(receives) or []
        at_cut = cut is not None and all(n == cut for n in barrier.sent)
        if not arrived and not barrier.ready() and not at_cut:
            arrived = wait_some(receives, clock)
        while arrived:
            for w in arrived:
                folder.add(w, inbox[w])
                barrier.arrive(w)
                clock.received += inbox[w].nbytes
                clock.peers[w + 1, 1] += inbox[w].nbytes
                receives[w] = (comm.Irecv([inbox[w], MPI.DOUBLE], w + 1, UP)
                               if barrier.sent[w] < T else MPI.REQUEST_NULL)
            arrived = MPI.Request.Testsome(receives) or []
        if 0 <= fail_at < max(barrier.sent):
            hooks.fault.trigger(fail_at)
        at_cut = cut is not None and all(n == cut for n in barrier.sent)
        pending = any(n > k for n, k in zip(barrier.sent, barrier.took))
        if barrier.ready() or (at_cut and pending):
            t0 = perf_counter()
            s = barrier.steps
            took = barrier.take()
            reply = server.step(folder.buffer)
            for w in took:
                wait(sends[w], clock)
                a, b = down_of[w]
                box = outbox[w]
                box[:-2] = reply[a:b]
                box[-2], box[-1] = s, barrier.took[w]
                sends[w] = comm.Isend([box, MPI.DOUBLE], w + 1, DOWN)
                clock.sent += box.nbytes
                clock.peers[w + 1, 0] += box.nbytes
            folder.taken(took)
            server.after_reply()
            # a step's seconds and bytes count in the row of the newest round it took
            newest = max(barrier.took[w] for w in took) - 1
            row = rows[newest]
            row[0] += perf_counter() - t0
            row[1] += clock.comm
            row[2] += clock.wait
            clock.comm = clock.wait = 0.0
            traffic = clock.traffic[newest]
            traffic[0] += clock.sent
            traffic[1] += clock.received
            clock.sent = clock.received = 0
            if progress is not None and min(barrier.took) > fewest:
                fewest = min(barrier.took)
                progress.update(fewest)
        if at_cut and all(k == cut for k in barrier.took):
            wait_all(sends, clock)              # every reply delivered: nothing in flight
            keep({"sent": np.array(barrier.sent), "took": np.array(barrier.took),
                  "last": np.array(barrier.last), "steps": np.int64(barrier.steps),
                  "taken": barrier.taken.copy(), "folder": folder.buffer.copy()})
            save(cut)
            cut = _next_cut(cut, every, T)
    for request in sends:
        wait(request, clock)
    if progress is not None:
        progress.close()


def work(comm, worker, stream, preds, T: int, down_size: int, clock, hooks,
         first_round: int = 0, saved: dict | None = None, keep=None) -> np.ndarray:
    """A worker's side under MPI: every round, predict and step, send, and take the z-step
    with the newest reply it holds (none before its first). Returns the step whose reply
    each round used (T,), -1 before the first. At a checkpoint's cut it waits for the
    replies to every message it sent, then ``keep(state)`` and ``save(round)``."""
    from mpi4py import MPI

    from ..comm.waiting import wait
    slots = stream.slot_ptr.tolist()
    outbox = np.empty(worker.message.size)
    inbox = np.empty(down_size + 2)
    newest = np.empty(down_size)
    send = MPI.REQUEST_NULL
    used = np.full(T, -1, dtype=np.int64)
    have, replied = -1, 0
    if saved is not None:
        newest[...] = saved["newest"]
        have, replied = int(saved["have"]), int(saved["replied"])
        used[...] = saved["used"]
    receive = comm.Irecv([inbox, MPI.DOUBLE], 0, DOWN) if replied < T else MPI.REQUEST_NULL
    every, save = hooks.checkpoint if hooks.checkpoint else (0, None)
    cut = _next_cut(first_round, every, T)
    delay = hooks.delay.after if hooks.delay is not None else None
    fail_at = hooks.fault.at if hooks.fault is not None else -1
    start, stop = clock.start, clock.stop
    for t in range(first_round, T):
        if t == cut:                # every message sent so far taken and replied to
            wait(send, clock)
            while replied < t:
                wait(receive, clock)
                newest[...] = inbox[:-2]
                have, replied = int(inbox[-2]), int(inbox[-1])
                receive = comm.Irecv([inbox, MPI.DOUBLE], 0, DOWN)
            keep({"newest": newest.copy(), "have": np.int64(have), "replied": np.int64(replied),
                  "used": used.copy()})
            save(t)
            cut = _next_cut(t, every, T)
        if t == fail_at:
            hooks.fault.trigger(t)
        start()
        t0 = perf_counter()
        positive, message = worker.up(*stream[t])
        preds[slots[t]:slots[t + 1]] = positive.reshape(-1)
        if delay is not None:
            delay(t, perf_counter() - t0)
        wait(send, clock)
        t1 = perf_counter()
        outbox[...] = message
        send = comm.Isend([outbox, MPI.DOUBLE], 0, UP)
        clock.sent += outbox.nbytes
        clock.peers[0, 0] += outbox.nbytes
        while replied < T and receive.Test():
            clock.received += inbox.nbytes
            clock.peers[0, 1] += inbox.nbytes
            newest[...] = inbox[:-2]
            have, replied = int(inbox[-2]), int(inbox[-1])
            receive = comm.Irecv([inbox, MPI.DOUBLE], 0, DOWN) if replied < T else MPI.REQUEST_NULL
        clock.comm += perf_counter() - t1
        if have >= 0:
            worker.down(newest)
        used[t] = have
        stop(t)
    wait(send, clock)
    while replied < T:          # the replies to its last messages: not used, but received
        wait(receive, clock)
        replied = int(inbox[-1])
        if replied < T:
            receive = comm.Irecv([inbox, MPI.DOUBLE], 0, DOWN)
    return used


class Partial:
    """The settings of ``--sync partial`` for the engine: the barrier's ``min_workers`` (S)
    and ``max_delay`` (TAU); in one process the ``stragglers`` that set the simulated clock,
    or a recorded ``schedule`` (taken, used) to replay; the run's ``rounds``."""

    def __init__(self, min_workers: int, max_delay: int, stragglers=None, schedule=None,
                 rounds: int = 0):
        from .stragglers import Stragglers
        self.min_workers, self.max_delay, self.rounds = min_workers, max_delay, rounds
        self.stragglers = stragglers if stragglers is not None else Stragglers()
        self.schedule = schedule
