"""Per-round seconds spent computing, communicating and waiting, for one rank."""
from __future__ import annotations

from time import perf_counter

import numpy as np

PHASES = ("compute", "communicate", "wait")


class PhaseClock:
    """Accumulates the current round's phase seconds and stores one row per round.

    *communicate* is time inside MPI calls that move data (posting, copying); *wait* is time
    blocked until peers have sent (another rank still computing, or the scheduler running
    someone else); *compute* is everything else in the round.
    """

    __slots__ = ("rows", "started", "comm", "wait", "_t0", "sent", "received", "traffic", "peers")

    def __init__(self, rounds: int, ranks: int = 1):
        self.rows = np.zeros((rounds, 3))
        # bytes this rank sent and received: per round (the exchange adds to sent / received
        # as it goes), and per peer rank over the run
        self.sent = self.received = 0
        self.traffic = np.zeros((rounds, 2))
        self.peers = np.zeros((ranks, 2))
        # when each round started (perf_counter seconds): when its instances were predicted
        self.started = np.zeros(rounds)
        self.comm = self.wait = self._t0 = 0.0

    def peers_of(self, size: int) -> np.ndarray:
        """:attr:`peers` for a world of ``size`` ranks (widened, zeros added, if it is not)."""
        if self.peers.shape[0] < size:
            self.peers = np.pad(self.peers, ((0, size - self.peers.shape[0]), (0, 0)))
        return self.peers

    def start(self) -> None:
        self.comm = self.wait = 0.0
        self.sent = self.received = 0
        self._t0 = perf_counter()

    def stop(self, t: int) -> None:
        total = perf_counter() - self._t0
        self.started[t] = self._t0
        # item by item: a tuple assigned to a row is made into an array first, every round
        row = self.rows[t]
        row[0], row[1], row[2] = total - self.comm - self.wait, self.comm, self.wait
        if self.sent or self.received:
            traffic = self.traffic[t]
            traffic[0], traffic[1] = self.sent, self.received
