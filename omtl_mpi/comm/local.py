"""In-process implementations: every role lives in this one process (world size 1)."""
from __future__ import annotations

import numpy as np


class LocalWorld:
    """The one-process world: rank 0 of 1; collective helpers are identities."""

    rank = 0
    size = 1

    def agree(self, value):
        """All ranks' values, in rank order (here: just ours)."""
        return [value]

    def gather_objects(self, value):
        return [value]

    def scatter_objects(self, values):
        return values[0]

    def gather_rows(self, rows: np.ndarray, counts=None) -> np.ndarray:
        return rows

    def barrier(self) -> None:
        pass

    def hosts(self) -> tuple[list, list, str]:
        """This process's host, its shared-memory group 0, and no MPI library."""
        import socket
        return [socket.gethostname()], [0], "none (one process)"


class LocalStar:
    """Server and workers in one process: ``up``/``gather`` and ``scatter``/``down`` hand over arrays."""

    is_server = True
    is_worker = True
    NOT_STATE = ("_up", "_down")   # a round's messages, handed over within it (..algorithms.undo)

    def __init__(self):
        self._up = self._down = None

    def up(self, msg: np.ndarray, clock) -> None:
        self._up = msg

    def gather(self, clock) -> np.ndarray:
        return self._up

    def scatter(self, msg: np.ndarray, clock) -> None:
        self._down = msg

    def down(self, clock) -> np.ndarray:
        return self._down
