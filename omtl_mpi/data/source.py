"""Where a run's data comes from: a task-stream file or the synthetic generator.

Both give cheap metadata (the same on every rank) and load only the tasks asked for, so an
MPI worker never holds other workers' streams.
"""
from __future__ import annotations

import numpy as np

from .synthetic import generate
from .taskfile import TaskMeta, TaskStreams, load_tasks, read_meta


class FileSource:
    """A task-stream HDF5 file."""

    def __init__(self, path: str):
        self.path = str(path)
        self._meta = None

    def meta(self) -> TaskMeta:
        if self._meta is None:
            self._meta = read_meta(self.path)
        return self._meta

    def load(self, indices) -> TaskStreams:
        return load_tasks(self.meta(), indices)

    def describe(self) -> str:
        return self.path


class SyntheticSource:
    """The paper's synthetic family, generated on the fly (each rank only its own tasks)."""

    def __init__(self, tasks: int = 5, samples: int = 10000, seed: int = 0, normalize: bool = False):
        self.tasks, self.samples, self.seed, self.normalize = tasks, samples, seed, normalize

    def meta(self) -> TaskMeta:
        return TaskMeta(path="synthetic", names=tuple(f"task{k}" for k in range(self.tasks)),
                        lengths=np.full(self.tasks, self.samples, dtype=np.int64), dim=9,
                        source="omtl-mpi synthetic (Li et al. 2025)", description=self.describe())

    def load(self, indices) -> TaskStreams:
        idx = np.asarray(indices, dtype=np.int64)
        names, X, y = generate(self.tasks, self.samples, self.seed, self.normalize, only=idx)
        return TaskStreams(indices=idx, names=tuple(names), X=X, y=y, notices=[])

    def describe(self) -> str:
        norm = ", normalized" if self.normalize else ""
        return f"synthetic(tasks={self.tasks}, samples={self.samples}, seed={self.seed}{norm})"
