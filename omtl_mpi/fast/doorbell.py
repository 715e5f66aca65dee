"""Wake-ups between the ranks of one node: a rank that waits sleeps in the kernel, off the CPU.

MPI libraries wait by polling, and so does omtl-mpi's own MPI wait (test, then yield the CPU).
With more ranks than cores, a polling rank is runnable all the time, and the scheduler gives it
its fair share of the core it shares with the rank everybody is waiting for (CPU per round in
docs/PERFORMANCE.md, *More ranks than cores*). A rank blocked in ``read`` is not runnable at
all, so the rank with work gets the whole core.

Each rank of the node owns one named pipe (FIFO), its *bell*.  Ringing a peer writes a 4-byte
token (the ringer's rank) into the peer's bell; waiting reads tokens until every peer it waits
for has rung.  Tokens are counted per sender, so a peer that is already a round ahead (possible
on a neighbour graph) is credited to the next round, never to this one.  The FIFOs are removed
from the file system as soon as every rank has opened them, so a job that is killed leaves
nothing behind.

The bells carry no data and give no ordering beyond this: what a rank wrote to shared memory
before ringing is visible to the peer once the peer has read the token (the kernel's pipe lock
orders both sides).

A rank blocked on its bell cannot see a peer die.  Launchers end the whole job when a rank
fails (that is how the MPI path behaves too), but not all of them do (``srun`` without
``--kill-on-bad-exit``), so a watchdog thread checks every second that the node's other ranks
still exist and, if one has gone, wakes this rank with a poison token: the wait then raises
:class:`PeerLost` naming the rank, and the job ends instead of hanging.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading

_POISON = 0xFFFFFFFF
_TOKEN = 4                      # bytes per token (an unsigned 32-bit rank, native byte order)


class PeerLost(RuntimeError):
    """A rank this one waits for has exited."""


class SetupError(RuntimeError):
    """The bells could not be set up on this rank (reason in the message)."""


class Doorbells:
    """This rank's bell and the bells of the peers it rings, over a node's communicator.

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
        Ranks that all run on this node. Collective: every rank of ``comm`` constructs its
        Doorbells at the same time.
    ring : sequence of int
        Ranks of ``comm`` that this rank wakes (:meth:`ring_all`), in the order to ring them.
    listen : sequence of int
        Ranks of ``comm`` that :meth:`wait_all` waits for.
    watchdog : float
        Seconds between checks that the node's other ranks are alive (0: no watchdog).

    Raises
    ------
    SetupError
        On every rank, if any rank could not create or open its FIFOs (for example a
        temporary folder that is not shared by the ranks, or not writable).
    """

    def __init__(self, comm, ring, listen, watchdog: float = 1.0):
        rank = comm.Get_rank()
        self._fd = -1
        self._peers: list[int] = []
        self._watch = None
        folder, problem = None, None
        if rank == 0:
            try:
                folder = tempfile.mkdtemp(prefix="omtl-mpi-bells-")
                for r in range(comm.Get_size()):
                    os.mkfifo(os.path.join(folder, str(r)), 0o600)
            except OSError as exc:
                problem = f"cannot create the ranks' FIFOs in {tempfile.gettempdir()}: {exc}"
        folder, problem = comm.bcast((folder, problem), root=0)
        try:
            if problem is None:
                try:
                    # read-write: opening never blocks, and the pipe never reports end-of-file
                    self._fd = os.open(os.path.join(folder, str(rank)), os.O_RDWR)
                except OSError as exc:
                    problem = f"rank {rank} cannot open its FIFO in {folder}: {exc}"
            problem = _first(comm.allgather(problem))
            if problem is None:
                try:
                    # every reader is open now, so a non-blocking open for writing succeeds
                    self._peers = [os.open(os.path.join(folder, str(r)), os.O_WRONLY | os.O_NONBLOCK)
                                   for r in ring]
                except OSError as exc:
                    problem = f"rank {rank} cannot open a peer's FIFO in {folder}: {exc}"
            problem = _first(comm.allgather(problem))
        finally:
            comm.Barrier()              # nobody still opens a FIFO when they are removed
            if rank == 0 and folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
        if problem is not None:
            self.close()
            raise SetupError(problem)
        self._token = rank.to_bytes(_TOKEN, sys.byteorder)
        self._listen = {int(r): i for i, r in enumerate(listen)}
        self._count = [0] * len(self._listen)
        self._single = len(self._listen) == 1
        pids = comm.allgather(os.getpid())
        if watchdog > 0:
            others = {r: pid for r, pid in enumerate(pids) if r != rank}
            self._watch = _Watchdog(self._fd, others, watchdog)

    def ring_all(self) -> None:
        """Wake every peer of ``ring`` (one token each)."""
        write, token = os.write, self._token
        for fd in self._peers:
            write(fd, token)

    def wait_all(self) -> None:
        """Block until every rank of ``listen`` has rung once more since the last wait.

        Raises
        ------
        PeerLost
            A rank of the node has exited (found by the watchdog).
        """
        if self._single:
            # one peer: each of its tokens is one round, so read exactly one (a token of the
            # next round stays in the pipe)
            self._check(os.read(self._fd, _TOKEN))
            return
        count, where, read, fd = self._count, self._listen, os.read, self._fd
        missing = count.count(0)
        while missing:
            data = read(fd, _TOKEN * 64)
            for sender in memoryview(data).cast("I"):
                i = where.get(sender)
                if i is None:
                    self._check(sender.to_bytes(_TOKEN, sys.byteorder))
                    continue
                if not count[i]:
                    missing -= 1
                count[i] += 1
        for i in range(len(count)):
            count[i] -= 1

    def lost(self) -> PeerLost:
        """The error of a wait that the watchdog's poison token ended."""
        lost = self._watch.lost if self._watch is not None else None
        return PeerLost(f"rank {lost[0]} (process {lost[1]}) on this node has exited"
                        if lost else "a rank on this node has exited")

    def _check(self, token: bytes) -> None:
        sender = int.from_bytes(token, sys.byteorder)
        if sender == _POISON:
            raise self.lost()
        if sender not in self._listen:
            raise RuntimeError(f"unexpected wake-up from rank {sender}")

    def close(self) -> None:
        """Stop the watchdog and close every FIFO (idempotent)."""
        if self._watch is not None:
            self._watch.stop()
            self._watch = None
        for fd in self._peers:
            os.close(fd)
        self._peers = []
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _first(problems):
    return next((p for p in problems if p is not None), None)


class _Watchdog:
    """Checks every ``interval`` seconds that the processes ``pids`` (rank -> pid) exist; when
    one has gone, records it in :attr:`lost` and writes the poison token into ``fd``."""

    def __init__(self, fd: int, pids: dict, interval: float):
        self.lost = None
        self._stop = threading.Event()
        self._pids, self._interval = pids, interval
        self._poison = os.dup(fd)           # ours: close() of the bell cannot race with a write
        self._thread = threading.Thread(target=self._run, name="omtl-mpi-watchdog", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            for rank, pid in self._pids.items():
                if not _alive(pid):
                    self.lost = (rank, pid)
                    os.write(self._poison, _POISON.to_bytes(_TOKEN, sys.byteorder))
                    return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        os.close(self._poison)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:         # exists, owned by someone else (cannot be: same job)
        return True
    return True
