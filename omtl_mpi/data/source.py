"""Where a run's data comes from: a task-stream file or the synthetic generator, each giving
cheap metadata and loading only the tasks asked for (:func:`block_of`), which :func:`presented`
puts in the order and at the scale a run presents them."""
from __future__ import annotations

import numpy as np

from .synthetic import generate, generate_tasks, task_parameters, task_rngs
from .taskfile import FlatStreams, TaskMeta, TaskStreams, load_block, load_tasks, read_meta


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

    def load_block(self, start: int, stop: int) -> FlatStreams:
        """Tasks ``start..stop-1`` as flat arrays (one slice of the file's arrays)."""
        return load_block(self.meta(), start, stop)

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

    def load_block(self, start: int, stop: int) -> FlatStreams:
        """Tasks ``start..stop-1`` as flat arrays, generated (each value as for the task alone)."""
        a, theta = task_parameters(self.tasks, self.seed)
        X, y = generate_tasks(a, theta, self.seed, range(start, stop), self.samples, self.normalize)
        return FlatStreams(start=start, stop=stop, names=tuple(f"task{k}" for k in range(start, stop)),
                           X=X, y=y, offsets=np.arange(stop - start + 1, dtype=np.int64) * self.samples,
                           notices=[])

    def describe(self) -> str:
        norm = ", normalized" if self.normalize else ""
        return f"synthetic(tasks={self.tasks}, samples={self.samples}, seed={self.seed}{norm})"


def shuffled(streams: TaskStreams, seed: int | None) -> TaskStreams:
    """``streams`` with each task's instances in a seeded random order (``seed=None``: unchanged),
    task k's depending only on (seed, k), so that every layout of ranks sees the same streams."""
    if seed is None:
        return streams
    order = [np.random.default_rng([seed, int(k)]).permutation(len(y))
             for k, y in zip(streams.indices, streams.y)]
    return TaskStreams(indices=streams.indices, names=streams.names,
                       X=[X[o] for X, o in zip(streams.X, order)],
                       y=[y[o] for y, o in zip(streams.y, order)], notices=streams.notices)


def block_of(source, start: int, stop: int):
    """Tasks ``start..stop-1`` of ``source`` as flat arrays: X (n, d) float64, y (n,) int8, their
    lengths and the notices about them (through ``load`` where it has no ``load_block``)."""
    block = getattr(source, "load_block", None)
    if block is not None:
        flat = block(start, stop)
        return flat.X, flat.y, np.diff(flat.offsets), list(flat.notices)
    streams = source.load(np.arange(start, stop))
    lengths = np.array([len(y) for y in streams.y], dtype=np.int64)
    if any(hasattr(x, "tocsr") for x in streams.X):         # sparse rows stay sparse
        from .taskfile import _stack
        X = _stack(streams.X)
    else:
        X = np.concatenate(streams.X) if len(streams.X) > 1 else np.asarray(streams.X[0])
    y = np.concatenate(streams.y) if len(streams.y) > 1 else np.asarray(streams.y[0])
    return X, y, lengths, list(streams.notices)


def presented(X: np.ndarray, y: np.ndarray, lengths, first: int, seed: int | None,
              scale: str = "none"):
    """A block of tasks' streams (``first``: its first task) in the order a run presents them
    (:func:`shuffled`'s for ``seed``), scaled if ``scale="online"``: new X, y (sparse stay so)."""
    from .features import online_scale
    lengths = np.asarray(lengths, dtype=np.int64)
    if seed is not None:
        offsets = np.concatenate(([0], np.cumsum(lengths)))
        # task_rngs: the generators of default_rng([seed, k]), seeded faster
        gens = task_rngs(seed, range(first, first + len(lengths)))
        order = np.concatenate([offsets[i] + gen.permutation(n)
                                for i, (gen, n) in enumerate(zip(gens, lengths.tolist()))])
        X, y = X[order], y[order]
    if scale == "online" and hasattr(X, "tocsr"):
        from .sparse import csr_arrays, csr_matrix, online_scale_csr
        data, indices, indptr, shape = csr_arrays(X)
        X = csr_matrix(online_scale_csr(data, indices, indptr, lengths), indices, indptr, shape)
    elif scale == "online":
        X = np.concatenate([online_scale(part) for part in np.split(X, np.cumsum(lengths)[:-1])])
    return X, y
