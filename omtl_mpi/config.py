"""One frozen, validated description of a run, stored in every results file."""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from .algorithms.admm import AdmmParams
from .data.features import SCALES
from .errors import ConfigError

Params = Any
SYNC_MODES = ("full", "partial")
# --sync partial's bounded delay when not given: server steps a worker's newest message may age
MAX_DELAY = 8
# the run options that shape the learned model, beside the learner's hyper-parameters
MODEL_OPTIONS = ("intercept", "scale")


@dataclass(frozen=True)
class RunConfig:
    """Everything that determines a run's results (not where they go or how they are shown).

    ``data`` is a task-stream HDF5 path or ``"synthetic"`` (then the ``synth_*`` fields apply).
    ``params`` is the algorithm's own hyper-parameter dataclass. ``topology`` and ``nodes``
    apply to the neighbour-pattern learners (``nodes=None``: one node per task in one process,
    one node per rank under MPI). Each field's metadata holds its option's help
    (:mod:`omtl_mpi.options`).
    """

    algo: str = field(default="c-admm", metadata={"help": "Learner (see 'omtl-mpi algos')."})
    data: str = field(default="synthetic", metadata={
        "help": "Task-stream HDF5 file, or 'synthetic' for the paper's generated family.",
        "metavar": "PATH|synthetic"})
    synth_tasks: int = field(default=5, metadata={"help": "Synthetic data: number of tasks K."})
    synth_samples: int = field(default=10000, metadata={"help": "Synthetic data: instances per task."})
    synth_seed: int = field(default=0, metadata={"help": "Synthetic data: generator seed."})
    synth_normalize: bool = field(default=False, metadata={
        "help": "Synthetic data: L2-normalise every feature vector."})
    batch: int = field(default=1, metadata={"help": "Mini-batch: instances per task per round."})
    seed: int | None = field(default=None, metadata={
        "help": "Present each task's stream in a random order drawn from this seed (default: the "
                "file's order). Sweeps repeat runs over seeds this way."})
    intercept: bool = field(default=True, metadata={
        "help": "Append a constant feature 1 to every instance: its weight is the bias (the ADMM "
                "learners share it through u and V like any weight). --no-intercept, and "
                "--preset paper, leave it out, as the paper's model does."})
    scale: str = field(default="none", metadata={
        "help": "Feature scaling without look-ahead. online: each feature divided by the largest "
                "absolute value it has taken so far in its task's stream; none: as they are.",
        "choices": SCALES})
    params: Params = field(default_factory=AdmmParams)
    topology: str = field(default="ring", metadata={
        "help": "Neighbour graph of d-admm/d-psgd: ring, full, star, torus, random-regular, "
                "erdos-renyi, watts-strogatz, a shipped file (topologies/) or a TOML path.",
        "metavar": "NAME|PATH"})
    nodes: int | None = field(default=None, metadata={
        "help": "d-admm/d-psgd in one process: nodes to simulate (default: one per task). Under "
                "MPI every rank is a node. With --sync partial in one process: the workers."})
    sync: str = field(default="full", metadata={
        "help": "Rounds of c-admm and d-admm: full: every round waits for every worker (the "
                "server) or neighbour (a node), the paper's; partial: c-admm's server steps once "
                "--min-workers have sent and a worker goes on with the newest reply it holds, a "
                "d-admm node mixes with the newest table it holds of each neighbour. In one "
                "process, partial runs on a simulated clock (--slow and --delays set the pace).",
        "choices": SYNC_MODES})
    min_workers: int | None = field(default=None, metadata={
        "help": "--sync partial: the server steps once this many workers have sent since its "
                "last step (default: half the workers, at least 1).", "metavar": "S"})
    max_delay: int | None = field(default=None, metadata={
        "help": "--sync partial: the newest message of a worker that the server uses is at most "
                "this many of its steps old, a neighbour's table that a node uses this many of "
                "its rounds; it waits for that one first (default: 8).",
        "metavar": "TAU"})

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
        if self.sync not in SYNC_MODES:
            problems.append(f"--sync must be one of {', '.join(SYNC_MODES)}, got {self.sync!r}")
        for name, low in (("min_workers", 1), ("max_delay", 0)):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
                problems.append(f"--{name.replace('_', '-')} must be an integer >= {low}, got {value!r}")
        if self.scale not in SCALES:
            problems.append(f"--scale must be one of {', '.join(SCALES)}, got {self.scale!r}")
        if problems:
            raise ConfigError("\n".join(problems))

    def inactive(self, pattern: str) -> dict:
        """The fields that have no effect for a learner of communication ``pattern`` with this
        data, each with the reason (:meth:`omtl_mpi.options.run_config` refuses them if given)."""
        out = {}
        if pattern != "neighbours":
            why = f"only d-admm and d-psgd exchange with neighbours, and {self.algo} does not"
            out["topology"] = why
            if pattern != "server" or self.sync != "partial":
                out["nodes"] = why + " (and --sync partial is not given)" * (pattern == "server")
        if pattern == "none":
            out["sync"] = f"{self.algo} learns every task alone, with no rounds to wait for"
        if self.sync != "partial":
            why = "it applies to --sync partial only"
            out["min_workers"] = out["max_delay"] = why
        elif pattern == "neighbours":
            out["min_workers"] = (f"{self.algo}'s nodes wait for no number of others: "
                                  "--max-delay bounds the age of each neighbour's table")
        if self.data != "synthetic":
            why = f"it describes the built-in synthetic data, and --data is {self.data}"
            for name in ("synth_tasks", "synth_samples", "synth_seed", "synth_normalize"):
                out[name] = why
        return out

    def to_dict(self) -> dict:
        d = asdict(self)
        d["params"] = asdict(self.params)
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def fingerprint(self) -> str:
        """Short hash of the configuration, compared across ranks before learning starts."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:16]
