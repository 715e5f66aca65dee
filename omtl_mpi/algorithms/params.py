"""Validation shared by the learners' hyper-parameter classes (one line per bad value)."""
from __future__ import annotations

import math

from ..errors import ConfigError


def require_positive(name: str, value, allow_zero: bool = False) -> None:
    """ConfigError unless ``value`` is a finite number > 0 (>= 0 with ``allow_zero``)."""
    ok = isinstance(value, (int, float)) and math.isfinite(value) and (value >= 0 if allow_zero else value > 0)
    if not ok:
        raise ConfigError(f"--{name.replace('_', '-')} must be a finite number {'>=' if allow_zero else '>'} 0, "
                          f"got {value!r}")


class Settled:
    """A base of the hyper-parameter classes of which nothing depends on the run's length."""

    def resolved(self, rounds: int):
        """``self``: there is nothing to fill in for a run of ``rounds`` rounds."""
        return self
