"""The task-stream HDF5 format: one file, one group per task, validated before learning starts.

Layout::

    /                 attrs: format = "omtl-mpi-tasks", format_version = 1, source, description
    /tasks/0000       attrs: name (any unicode);  X (n_k, d) float64,  y (n_k,) int8 in {-1, +1}
    /tasks/0001       ...

Streams may have different lengths. A worker reads only its own tasks' groups.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import h5py
import numpy as np

from ..atomic import atomic_path
from ..errors import DataError

FORMAT = "omtl-mpi-tasks"


@dataclass(frozen=True)
class TaskMeta:
    """What a data set is, read from the file's structure only (no feature values)."""

    path: str
    names: tuple
    lengths: np.ndarray
    dim: int
    source: str = ""
    description: str = ""

    @property
    def n_tasks(self) -> int:
        return len(self.names)


@dataclass
class TaskStreams:
    """The streams of some tasks, loaded and validated."""

    indices: np.ndarray
    names: tuple
    X: list
    y: list
    notices: list = field(default_factory=list)


def _label(k: int, name: str) -> str:
    return f"task {k} ({name!r})"


def check_values(where: str, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, list, list]:
    """Validate one task's features and labels.

    Returns the labels as int8 in {-1, +1} (``{0, 1}`` mapped, with a notice), the problems
    found (one line each) and the notices.
    """
    problems, notices = [], []
    if X.ndim != 2:
        return y, [f"{where}: features must be a 2-D array (samples x features), got shape {X.shape}"], []
    # Strings or Python objects would make np.isfinite raise a bare TypeError below.
    if X.dtype.kind not in "fiub":
        return y, [f"{where}: features must be numbers, got dtype {X.dtype}; convert them to floats"], []
    if len(y) != X.shape[0]:
        problems.append(f"{where}: {X.shape[0]} feature rows but {len(y)} labels")
    if X.shape[0] == 0:
        problems.append(f"{where}: the task is empty (no samples); remove it or add data")
    bad = ~np.isfinite(X).all(axis=1)
    if bad.any():
        rows = np.nonzero(bad)[0]
        problems.append(f"{where}: non-finite feature values (NaN or inf) in {rows.size} row(s), "
                        f"first at row {int(rows[0])}; clean or drop those rows")
    yv = np.asarray(y)
    if yv.size and not np.issubdtype(yv.dtype, np.number):
        problems.append(f"{where}: labels must be numbers, got dtype {yv.dtype}")
        return y, problems, notices
    if yv.size and not np.isfinite(yv.astype(np.float64)).all():
        row = int(np.nonzero(~np.isfinite(yv.astype(np.float64)))[0][0])
        problems.append(f"{where}: non-finite label at row {row}")
        return y, problems, notices
    values = set(np.unique(yv).tolist())
    if values <= {-1, 1}:
        labels = yv.astype(np.int8)
    elif values <= {0, 1}:
        labels = np.where(yv == 1, 1, -1).astype(np.int8)
        notices.append(f"{where}: labels are 0/1; mapped 0 -> -1")
    else:
        odd = sorted(values - {-1, 1, 0})[:3] or [0]
        row = int(np.nonzero(np.isin(yv, odd))[0][0])
        problems.append(f"{where}: labels must be -1/+1 (or 0/1), found {odd[0]!r} at row {row}")
        labels = yv
    return labels, problems, notices


def write_tasks(path, names, X_list, y_list, *, source: str = "", description: str = "") -> None:
    """Validate and write a task-stream file atomically (temporary name, then rename).

    Raises
    ------
    DataError
        Listing every problem; nothing is left under ``path``.
    """
    names = [str(n) for n in names]
    problems = []
    if not (len(names) == len(X_list) == len(y_list)):
        raise DataError(f"{path}: {len(names)} names, {len(X_list)} feature arrays and "
                        f"{len(y_list)} label arrays; they must match (one per task)")
    if not names:
        raise DataError(f"{path}: no tasks to write")
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        problems.append(f"{path}: task name {dup!r} is used twice; task names must be unique")
    labels, dims = [], set()
    for k, (name, X, y) in enumerate(zip(names, X_list, y_list)):
        X = np.asarray(X)
        yk, probs, _ = check_values(f"{path}: {_label(k, name)}", X, np.asarray(y).reshape(-1))
        problems += probs
        labels.append(yk)
        if X.ndim == 2:
            dims.add(X.shape[1])
    if len(dims) > 1:
        problems.append(f"{path}: tasks have different numbers of features {sorted(dims)}; "
                        "every task must have the same d")
    if problems:
        raise DataError("\n".join(problems))
    with atomic_path(path) as tmp, h5py.File(tmp, "w") as f:
        f.attrs["format"] = FORMAT
        f.attrs["format_version"] = 1
        f.attrs["source"] = source
        f.attrs["description"] = description
        g = f.create_group("tasks")
        for k, (name, X, y) in enumerate(zip(names, X_list, labels)):
            t = g.create_group(f"{k:04d}")
            t.attrs["name"] = name
            t.create_dataset("X", data=np.ascontiguousarray(X, dtype=np.float64))
            t.create_dataset("y", data=np.asarray(y, dtype=np.int8))


def _open(path: str) -> h5py.File:
    if not os.path.exists(path):
        raise DataError(f"{path}: no such file")
    if os.path.isdir(path):
        raise DataError(f"{path}: is a folder, not a task-stream HDF5 file")
    try:
        return h5py.File(path, "r")
    except OSError as exc:
        raise DataError(f"{path}: not a readable HDF5 file ({str(exc).split('(')[0].strip()}); "
                        "create one with 'omtl-mpi data synth' or 'omtl-mpi data import'") from None


def read_meta(path) -> TaskMeta:
    """Read and check a task-stream file's structure (no feature values are read).

    Raises
    ------
    DataError
        Listing every structural problem, one per line.
    """
    path = str(path)
    with _open(path) as f:
        if "tasks" not in f or not isinstance(f["tasks"], h5py.Group):
            raise DataError(f"{path}: no /tasks group; this is not an omtl-mpi task-stream file "
                            "(convert it with 'omtl-mpi data import')")
        groups = f["tasks"]
        keys = list(groups.keys())
        problems = []
        indices = {}
        for key in keys:
            if key.isdigit():
                indices[int(key)] = key
            else:
                problems.append(f"{path}: unexpected entry /tasks/{key}; task groups are named 0000, 0001, ...")
        if not indices and not problems:
            raise DataError(f"{path}: /tasks holds no task groups")
        K = max(indices) + 1 if indices else 0
        names, lengths, dims = [], [], {}
        for k in range(K):
            if k not in indices:
                problems.append(f"{path}: task group /tasks/{k:04d} is missing (groups must be numbered 0..{K - 1})")
                names.append(f"task{k}")
                lengths.append(0)
                continue
            g = groups[indices[k]]
            name = g.attrs.get("name", f"task{k}")
            name = name.decode() if isinstance(name, bytes) else str(name)
            names.append(name)
            where = f"{path}: {_label(k, name)}"
            if not isinstance(g, h5py.Group) or "X" not in g or "y" not in g:
                problems.append(f"{where}: missing dataset X or y")
                lengths.append(0)
                continue
            X, y = g["X"], g["y"]
            if X.ndim != 2:
                problems.append(f"{where}: X must be 2-D (samples x features), got shape {X.shape}")
            if y.ndim != 1:
                problems.append(f"{where}: y must be 1-D, got shape {y.shape}")
            for ds, label in ((X, "X"), (y, "y")):
                if ds.dtype.kind not in "fiub":
                    problems.append(f"{where}: {label} must be numeric, got dtype {ds.dtype}")
            if X.ndim == 2 and y.ndim == 1 and X.shape[0] != y.shape[0]:
                problems.append(f"{where}: {X.shape[0]} feature rows but {y.shape[0]} labels")
            # A scalar X has no rows; its shape problem is already reported above.
            rows = int(X.shape[0]) if X.ndim else 0
            if X.ndim and rows == 0:
                problems.append(f"{where}: the task is empty (no samples)")
            if X.ndim == 2:
                dims[k] = X.shape[1]
            lengths.append(rows)
        if dims:
            first_k = min(dims)
            for k, dk in dims.items():
                if dk != dims[first_k]:
                    problems.append(f"{path}: {_label(k, names[k])} has d={dk} features but "
                                    f"{_label(first_k, names[first_k])} has d={dims[first_k]}; "
                                    "all tasks must have the same features")
        if problems:
            raise DataError("\n".join(problems))
        src = f.attrs.get("source", "")
        desc = f.attrs.get("description", "")
        return TaskMeta(path=path, names=tuple(names), lengths=np.array(lengths, dtype=np.int64),
                        dim=int(dims[min(dims)]), source=str(src), description=str(desc))


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation (Linux MemAvailable), None if unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _check_fits(meta: TaskMeta, indices) -> None:
    """Refuse, before reading, tasks whose features cannot fit in this machine's memory."""
    need = sum(int(meta.lengths[k]) * meta.dim * 8 for k in indices)
    free = available_memory()
    # the features are read once and copied at most once more (validation, batching)
    if free is not None and 2 * need > free:
        gib = 2 ** 30
        raise DataError(f"{meta.path}: the {len(indices)} task(s) this process would hold need "
                        f"{need / gib:.1f} GiB of features (d = {meta.dim}), more than half the "
                        f"{free / gib:.1f} GiB of memory available: start more ranks (or nodes) so "
                        "that each holds fewer tasks, or reduce the dimension when importing")


def load_tasks(meta: TaskMeta, indices) -> TaskStreams:
    """Read and validate only the tasks in ``indices`` (a worker's own block).

    Raises
    ------
    DataError
        Naming the task and the first bad row of every problem found.
    """
    indices = np.asarray(indices, dtype=np.int64).reshape(-1)
    # A wrong index is a caller's (or a world-size) mistake; say so rather than an h5py KeyError.
    outside = [int(k) for k in indices if not 0 <= k < meta.n_tasks]
    if outside:
        raise DataError(f"{meta.path}: task index {outside[0]} out of range; the file has "
                        f"{meta.n_tasks} task(s), numbered 0..{meta.n_tasks - 1}")
    _check_fits(meta, indices)
    X_list, y_list, problems, notices = [], [], [], []
    with _open(meta.path) as f:
        for k in indices:
            g = f["tasks"][f"{int(k):04d}"]
            where = f"{meta.path}: {_label(int(k), meta.names[k])}"
            X = np.ascontiguousarray(g["X"][()], dtype=np.float64)
            y, probs, notes = check_values(where, X, g["y"][()])
            problems += probs
            notices += notes
            X_list.append(X)
            y_list.append(y)
    if problems:
        raise DataError("\n".join(problems))
    return TaskStreams(indices=indices, names=tuple(meta.names[k] for k in indices),
                       X=X_list, y=y_list, notices=notices)
