"""Fault injection for testing deployments: make one rank fail at a chosen moment.

``omtl-mpi run --fail-at WHEN --fail-rank R [--fail-mode raise|kill]`` makes rank R raise an
exception (or kill itself with SIGKILL) at the start of round WHEN (1-based), or with
``WHEN = load`` just after it has read its data, or ``WHEN = write`` while the results are being
collected and written (rank 0: with the results file half-written under its temporary name), so
that what a real failure does to a job can be reproduced and tested.
"""
from __future__ import annotations

import os
import signal

from ..errors import ConfigError

MODES = ("raise", "kill")
PHASES = ("load", "write")


class InjectedFailure(RuntimeError):
    """The failure asked for with --fail-at."""


class Fault:
    """Where this rank fails: ``at`` is the 0-based round index, or -1 for never."""

    def __init__(self, when=None, rank: int = 0, mode: str = "raise", my_rank: int = 0):
        if mode not in MODES:
            raise ConfigError(f"--fail-mode must be one of {', '.join(MODES)}, got {mode!r}")
        text, round_ = None if when is None else str(when).strip().lower(), None
        if text is not None and text not in PHASES:
            try:
                round_ = int(text)
            except ValueError:
                round_ = 0
            if round_ < 1:
                raise ConfigError(f"--fail-at must be a round number >= 1, 'load' or 'write', "
                                  f"got {when!r}")
        self.asked = rank if when is not None else None     # the rank asked to fail
        mine = rank == my_rank
        self.at = round_ - 1 if round_ is not None and mine else -1
        self.phase = text if mine and text in PHASES else None
        self.mode = mode

    def check_world(self, size: int) -> None:
        """ConfigError unless the rank asked to fail is one of a job of ``size`` ranks."""
        if self.asked is not None and not 0 <= self.asked < size:
            raise ConfigError(f"--fail-rank {self.asked} is not a rank of this job (ranks 0..{size - 1})")

    def trigger(self, t: int) -> None:
        self._fail(f"at round {t + 1}")

    def check(self, phase: str) -> None:
        """Fail here if this rank was asked to fail in ``phase`` ('load' or 'write')."""
        if self.phase == phase:
            self._fail("while loading data" if phase == "load" else "while writing results")

    def _fail(self, where: str) -> None:
        if self.mode == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        raise InjectedFailure(f"injected failure {where} (--fail-at)")


NEVER = Fault()
