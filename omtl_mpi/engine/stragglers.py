"""Stragglers on purpose: ranks whose rounds take longer, by a fixed factor or a seeded model.

``--slow RANK:FACTOR`` makes that rank's local work of every round (predict, w-step, message)
take FACTOR times as long; ``--delays MODEL`` draws a factor for every rank and round from a
named model of a shared cluster, seeded, so that two runs with the same seed slow the same
rounds. The delay is a sleep after the rank's work and before it sends, so the rank yields its
core and the others wait as they would for a busy node (docs/RELIABILITY.md, *Stragglers*).

The models (``factor`` is a round's time over the rank's own work):

* ``srad``: a round takes U(0.8, 1.2) time units, or with probability 0.3 U(3, 8) units
  (the straggler model of SRAD-ADMM, IEEE TSP 2025), one unit being the work at its fastest
  (0.8): factors in [1, 1.5], or [3.75, 10].
* ``stall``: at 1.5% of rounds the rank stalls for 20 rounds' work (factor 21), else none
  (the stall model of PyTorch's hierarchical SGD study: 1-2% of steps, about 20 steps long).
"""
from __future__ import annotations

import time

import numpy as np

from ..errors import ConfigError

# name: (probability of a slow round, (low, high) of a slow round's factor, (low, high) of
# another round's), with factors in time units; DELAY_UNIT is the unit of the rank's own work
MODELS = {
    "srad": (0.3, (3.0, 8.0), (0.8, 1.2)),
    "stall": (0.015, (21.0, 21.0), (1.0, 1.0)),
}
DELAY_UNIT = {"srad": 0.8, "stall": 1.0}
# one generator stream per rank, apart from the run's other seeded draws
_STREAM = 0x5157


def parse_slow(values) -> dict:
    """``{rank: factor}`` from ``--slow RANK:FACTOR`` values (each may list several, separated
    by commas: ``1:3,2:2``); ConfigError with one line if any is not of that form, a rank is
    named twice or a factor is below 1."""
    out = {}
    for text in (part for value in values or () for part in str(value).split(",")):
        rank, sep, factor = str(text).partition(":")
        try:
            rank, factor = int(rank), float(factor)
        except ValueError:
            rank = factor = None
        if not sep or rank is None or rank < 0 or not np.isfinite(factor) or factor < 1.0:
            raise ConfigError(f"--slow takes RANK:FACTOR, a rank >= 0 and a factor >= 1 (its "
                              f"rounds take FACTOR times as long), e.g. --slow 1:3; got {text!r}")
        if rank in out:
            raise ConfigError(f"--slow names rank {rank} twice; give each rank once")
        out[rank] = factor
    return out


class Stragglers:
    """Which ranks are slowed and how: ``slow`` ({rank: factor}) and ``model`` (a name of
    :data:`MODELS` or None) with its ``seed``.

    Examples
    --------
    >>> s = Stragglers({1: 3.0})
    >>> s.factors(1, 4).tolist(), s.factors(2, 4).tolist()
    ([3.0, 3.0, 3.0, 3.0], [1.0, 1.0, 1.0, 1.0])
    >>> Stragglers(model="stall", seed=0).factors(0, 1000).max()
    21.0
    """

    def __init__(self, slow: dict | None = None, model: str | None = None, seed: int = 0):
        if model is not None and model not in MODELS:
            raise ConfigError(f"--delays must be one of {', '.join(MODELS)}, got {model!r}")
        self.slow, self.model, self.seed = dict(slow or {}), model, int(seed)

    def __bool__(self) -> bool:
        return bool(self.slow) or self.model is not None

    def check_world(self, size: int) -> None:
        """ConfigError unless every rank --slow names is one of a job of ``size`` ranks."""
        for rank in self.slow:
            if rank >= size:
                raise ConfigError(f"--slow {rank}:... names no rank of this job (ranks 0..{size - 1})")

    def factors(self, rank: int, rounds: int) -> np.ndarray:
        """Every round's factor for ``rank`` (>= 1; 1 is its own pace): --slow's times the
        model's, the model's drawn from (seed, rank) alone."""
        out = np.full(rounds, self.slow.get(rank, 1.0))
        if self.model is not None:
            p, slow, usual = MODELS[self.model]
            # three numbers a round, so that a round's factor does not depend on the run's length
            u = np.random.default_rng([self.seed, rank, _STREAM]).random((rounds, 3))
            drawn = np.where(u[:, 0] < p, slow[0] + (slow[1] - slow[0]) * u[:, 1],
                             usual[0] + (usual[1] - usual[0]) * u[:, 2])
            out *= np.maximum(drawn / DELAY_UNIT[self.model], 1.0)
        return out

    def delay(self, rank: int, rounds: int) -> "Delay | None":
        """This rank's :class:`Delay` (None when it is never slowed)."""
        factors = self.factors(rank, rounds)
        return Delay(factors) if (factors > 1.0).any() else None

    def describe(self) -> str:
        """What was injected, as the results file and the report record it ("none" if nothing)."""
        parts = [f"--slow {r}:{f:g}" for r, f in sorted(self.slow.items())]
        if self.model is not None:
            parts.append(f"--delays {self.model} (seed {self.seed})")
        return ", ".join(parts) or "none"


class Delay:
    """One rank's slowed rounds: :meth:`after` sleeps ``(factor - 1)`` times the work it is
    given, and ``injected`` adds up the seconds asked for."""

    def __init__(self, factors: np.ndarray):
        self.factors = factors.tolist()
        self.injected = 0.0

    def after(self, t: int, work: float) -> None:
        extra = (self.factors[t] - 1.0) * work
        if extra > 0.0:
            time.sleep(extra)
            self.injected += extra


def last_at_barrier(seconds: np.ndarray, ranks) -> np.ndarray:
    """How many rounds each rank was the last to arrive, from the per-rank timings ``seconds``
    (P, T, 3): among ``ranks`` (those that wait for each other: a star's workers, a graph's
    nodes), the one that waited least in a round is the one the others waited for. Counts per
    rank (P,), 0 for ranks not in ``ranks``; all zeros with fewer than two such ranks."""
    counts = np.zeros(seconds.shape[0], dtype=np.int64)
    ranks = list(ranks)
    if len(ranks) < 2 or seconds.shape[1] == 0:
        return counts
    waits = seconds[ranks, :, 2]
    np.add.at(counts, np.asarray(ranks)[np.argmin(waits, axis=0)], 1)
    return counts
