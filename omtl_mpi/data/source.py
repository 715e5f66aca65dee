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


def shuffled(streams: TaskStreams, seed: int | None) -> TaskStreams:
    """``streams`` with each task's instances in a seeded random order (``seed=None``: unchanged).

    Task k's order depends only on (seed, k), never on which tasks a rank holds, so every
    layout of ranks sees the same streams. Sweeps repeat a run over seeds this way.
    """
    if seed is None:
        return streams
    order = [np.random.default_rng([seed, int(k)]).permutation(len(y))
             for k, y in zip(streams.indices, streams.y)]
    return TaskStreams(indices=streams.indices, names=streams.names,
                       X=[X[o] for X, o in zip(streams.X, order)],
                       y=[y[o] for y, o in zip(streams.y, order)], notices=streams.notices)
