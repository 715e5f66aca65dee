"""Fault injection for testing deployments: make one rank fail at a chosen round.

``omtl-mpi run --fail-at ROUND --fail-rank R [--fail-mode raise|kill]`` makes rank R raise an
exception (or kill itself with SIGKILL) at the start of round ROUND (1-based), so that what a
real failure does to a job can be reproduced and tested.
"""
from __future__ import annotations

import os
import signal

from ..errors import ConfigError

MODES = ("raise", "kill")


class InjectedFailure(RuntimeError):
    """The failure asked for with --fail-at."""


class Fault:
    """Where this rank fails: ``at`` is the 0-based round index, or -1 for never."""

    def __init__(self, round_=None, rank: int = 0, mode: str = "raise", my_rank: int = 0):
        if mode not in MODES:
            raise ConfigError(f"--fail-mode must be one of {', '.join(MODES)}, got {mode!r}")
        if round_ is not None and round_ < 1:
            raise ConfigError(f"--fail-at must be a round number >= 1, got {round_}")
        self.at = round_ - 1 if round_ is not None and rank == my_rank else -1
        self.mode, self.rank = mode, my_rank

    def trigger(self, t: int) -> None:
        if self.mode == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        raise InjectedFailure(f"injected failure at round {t + 1} (--fail-at)")


NEVER = Fault()
