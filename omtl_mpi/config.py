"""One frozen, validated description of a run, stored in every results file."""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from .algorithms.admm import AdmmParams
from .errors import ConfigError

Params = Any


@dataclass(frozen=True)
class RunConfig:
    """Everything that determines a run's results (not where they go or how they are shown).

    ``data`` is a task-stream HDF5 path or ``"synthetic"`` (then the ``synth_*`` fields apply).
    ``params`` is the algorithm's own hyper-parameter dataclass. ``topology`` and ``nodes``
    apply to the neighbour-pattern learners (``nodes=None``: one node per task in one process,
    one node per rank under MPI).
    """

    algo: str = "c-admm"
    data: str = "synthetic"
    synth_tasks: int = 5
    synth_samples: int = 10000
    synth_seed: int = 0
    synth_normalize: bool = False
    batch: int = 1
    seed: int | None = None
    params: Params = field(default_factory=AdmmParams)
    topology: str = "ring"
    nodes: int | None = None

    def __post_init__(self):
        problems = []
        if not isinstance(self.batch, int) or self.batch < 1:
            problems.append(f"--batch must be an integer >= 1 (instances per task per round), got {self.batch!r}")
        if self.data == "synthetic":
            if self.synth_tasks < 1:
                problems.append(f"--synth-tasks must be >= 1, got {self.synth_tasks}")
            if self.synth_samples < 1:
                problems.append(f"--synth-samples must be >= 1, got {self.synth_samples}")
        if self.seed is not None and (not isinstance(self.seed, int) or self.seed < 0):
            problems.append(f"--seed must be an integer >= 0, got {self.seed!r}")
        if self.nodes is not None and (not isinstance(self.nodes, int) or self.nodes < 1):
            problems.append(f"--nodes must be an integer >= 1, got {self.nodes!r}")
        if problems:
            raise ConfigError("\n".join(problems))

    def to_dict(self) -> dict:
        d = asdict(self)
        d["params"] = asdict(self.params)
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def fingerprint(self) -> str:
        """Short hash of the configuration, compared across ranks before learning starts."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:16]
