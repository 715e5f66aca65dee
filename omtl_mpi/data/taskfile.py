"""The task-stream HDF5 format: one file, one group per task, validated before learning starts.

Layout::

    /                 attrs: format = "omtl-mpi-tasks", format_version = 1, source, description
    /tasks/0000       attrs: name (any unicode);  X (n_k, d) float64,  y (n_k,) int8 in {-1, +1}
    /tasks/0001       ...

Streams may have different lengths. A worker reads only its own tasks' groups.
"""
from __future__ import annotations

import functools
import hashlib
import os
from contextlib import contextmanager
from dataclasses import dataclass, field

import h5py
import numpy as np

from ..atomic import atomic_path
from ..errors import DataError, UserError
from ..paths import regular_file

FORMAT = "omtl-mpi-tasks"
VERSION = 1
# what h5py (and reading what it returns) raises for a damaged file (a bad chunk, a broken link,
# an unreadable or misshapen attribute): each becomes one line naming the file (and the task
# where known), never a traceback; the checkpoint and the report readers use the same
H5_ERRORS = (OSError, KeyError, ValueError, TypeError, AttributeError, IndexError, RuntimeError)
# soft links followed before a chain is taken for a loop
_MAX_LINK_DEPTH = 16


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


def own_item(group, key: str):
    """``group[key]`` where it is stored in this file under that name (a hard link).

    A soft or external link would be followed into another object or file (anything, a FIFO):
    the files the package writes hold none, so one is refused, never followed.

    Raises
    ------
    LookupError
        "missing" or "a link", for the caller to put in its own one-line error.
    """
    link = group.get(key, getlink=True)
    if link is None:
        raise LookupError("missing")
    if not isinstance(link, h5py.HardLink):
        raise LookupError("a link")
    return group[key]


def reason(exc: BaseException) -> str:
    """An h5py error's message on one line (HDF5 messages may span several)."""
    return " ".join(str(exc).split()) or type(exc).__name__


@contextmanager
def _open(path: str):
    """The task file at ``path``, open for reading (a context manager).

    Nothing but a regular file is opened (a FIFO would block forever), and an h5py error
    raised while the file is read in the ``with`` block becomes a DataError naming the file.

    Raises
    ------
    DataError
    """
    path = str(path)
    if not os.path.lexists(path):
        raise DataError(f"{path}: no such file")
    try:
        regular_file(path, "task-stream HDF5 file")
    except UserError as exc:
        raise DataError(str(exc)) from None
    try:
        f = h5py.File(path, "r")
    except OSError as exc:
        raise DataError(f"{path}: not a readable HDF5 file ({str(exc).split('(')[0].strip()}); "
                        "create one with 'omtl-mpi data synth' or 'omtl-mpi data import'") from None
    with f:
        try:
            yield f
        except UserError:           # the reader's own line (UserError is a ValueError)
            raise
        except H5_ERRORS as exc:
            raise DataError(f"{path}: cannot read the file ({reason(exc)}); it is damaged: "
                            "import or copy it again") from None


def _read_values(group, name: str, where: str) -> np.ndarray:
    """All values of ``group[name]``; a damaged dataset (a bad compressed chunk) is one line."""
    try:
        return group[name][()]
    except H5_ERRORS as exc:
        raise DataError(f"{where}: cannot read {name} ({reason(exc)}); the file is damaged: "
                        "import or copy it again") from None


def _check_version(path: str, f) -> None:
    """Refuse a file of another format version; a file without one (older) is read as 1."""
    version = f.attrs.get("format_version")
    if version is None:
        return
    value = np.asarray(version)
    if value.shape == () and value.dtype.kind in "iuf" and value == VERSION:
        return
    shown = value.item() if value.shape == () else value.tolist()
    if isinstance(shown, bytes):
        shown = shown.decode(errors="replace")
    raise DataError(f"{path}: task-file format version {shown}; this release of omtl-mpi reads "
                    f"version {VERSION}: use the omtl-mpi that wrote it, or import the data again")


def _link_problem(f, group, name: str, depth: int = 0) -> str | None:
    """Why the link ``group[name]`` may not be followed (it dangles, or leaves the file), as
    the rest of a sentence whose subject is the link ("is a soft link to /x, which does not
    exist in the file"); None for a link that stays in the file.

    Links are inspected without being followed: following an external link would open
    another file, which could be anything (a FIFO blocks forever).
    """
    link = group.get(name, getlink=True)
    via = f"is a soft link to {link.path}, which" if isinstance(link, h5py.SoftLink) else ""
    for _ in range(_MAX_LINK_DEPTH - depth):
        if not isinstance(link, h5py.SoftLink):
            break
        link, group, why = _walk(f, group, link.path, depth + 1)
        if why is not None:
            return f"{via} {why}"
    else:
        return f"{via} leads back to itself; the file is damaged"
    if isinstance(link, h5py.ExternalLink):
        return (f"{via + ' is' if via else 'is'} an external link to {link.path} in "
                f"{link.filename}; links leaving the file are refused: copy the data into the file")
    return None


def _has(group, name: str) -> bool:
    """Whether ``group`` has a member ``name``, asked without following any link."""
    return isinstance(group, h5py.Group) and group.get(name, getlink=True) is not None


def _walk(f, group, target: str, depth: int):
    """(the last link of the path ``target``, the group that holds it, None), or (None, None,
    why the path cannot be followed)."""
    here = f if target.startswith("/") else group
    parts = [p for p in target.split("/") if p]
    for i, part in enumerate(parts):
        if not _has(here, part):
            return None, None, "does not exist in the file"
        link = here.get(part, getlink=True)
        if i == len(parts) - 1:
            return link, here, None
        # a link in the middle of the path is followed only if it stays in the file
        if not isinstance(link, h5py.HardLink) and _link_problem(f, here, part, depth) is not None:
            return None, None, f"goes through {part}, a link that dangles or leaves the file"
        here = here[part]
    return h5py.HardLink(), here, None


def _dataset_links(f, g, where: str) -> list:
    """One line for each of a task group's X and y that is a link that cannot be followed."""
    found = []
    for name in ("X", "y"):
        why = _link_problem(f, g, name) if _has(g, name) else None
        if why is not None:
            found.append(f"{where}: {name} {why}")
    return found


def read_meta(path) -> TaskMeta:
    """Read and check a task-stream file's structure (no feature values are read).

    Raises
    ------
    DataError
        Listing every structural problem, one per line.
    """
    path = str(path)
    with _open(path) as f:
        _check_version(path, f)
        groups, indices, problems = _task_groups(path, f)
        names, lengths, dims = [], [], {}
        for k, key in sorted(indices.items()):         # 0..K-1, without gaps
            name, rows, dim, found = _task_structure(path, f, groups, key, k)
            names.append(name)
            lengths.append(rows)
            if dim is not None:
                dims[k] = dim
            problems += found
        problems += _dim_mismatches(path, dims, names)
        if problems:
            raise DataError("\n".join(problems))
        src = f.attrs.get("source", "")
        desc = f.attrs.get("description", "")
        return TaskMeta(path=path, names=tuple(names), lengths=np.array(lengths, dtype=np.int64),
                        dim=int(dims[min(dims)]), source=str(src), description=str(desc))


def _task_groups(path: str, f) -> tuple:
    """The /tasks group, its task groups' names by index (0..K-1, no gaps) and the lines
    about entries that are not task groups. Raises DataError where no task can be read."""
    why = _link_problem(f, f, "tasks") if _has(f, "tasks") else None
    if why is not None:
        raise DataError(f"{path}: /tasks {why}")
    if "tasks" not in f or not isinstance(f["tasks"], h5py.Group):
        raise DataError(f"{path}: no /tasks group; this is not an omtl-mpi task-stream file "
                        "(convert it with 'omtl-mpi data import')")
    groups = f["tasks"]
    problems = []
    indices = {}
    for key in groups.keys():
        if key.isdigit():
            indices[int(key)] = key
        else:
            problems.append(f"{path}: unexpected entry /tasks/{key}; task groups are named 0000, 0001, ...")
    if not indices and not problems:
        raise DataError(f"{path}: /tasks holds no task groups")
    K = max(indices) + 1 if indices else 0
    if len(indices) < K:
        # one line, not one per gap: a group named 99999999 would otherwise give millions
        gaps = K - len(indices)
        first = next(k for k in range(K) if k not in indices)
        raise DataError("\n".join(problems + [
            f"{path}: task group /tasks/{first:04d} is missing"
            f"{f' (and {gaps - 1} more)' if gaps > 1 else ''}; groups must be numbered "
            f"0..{K - 1} without gaps"]))
    return groups, indices, problems


def _task_structure(path: str, f, groups, key: str, k: int) -> tuple:
    """Task ``k``'s (group ``key``) name, stream length, feature count (None where X is not
    2-D) and the lines about what is wrong with its structure (a task that cannot be read
    counts 0 instances)."""
    why = _link_problem(f, groups, key)
    if why is not None:
        return f"task{k}", 0, None, [f"{path}: task {k}: /tasks/{key} {why}"]
    g = groups[key]
    name = g.attrs.get("name", f"task{k}")
    name = name.decode(errors="replace") if isinstance(name, bytes) else str(name)
    where = f"{path}: {_label(k, name)}"
    links = _dataset_links(f, g, where)
    if links:
        return name, 0, None, links
    if not isinstance(g, h5py.Group) or "X" not in g or "y" not in g:
        return name, 0, None, [f"{where}: missing dataset X or y"]
    X, y = g["X"], g["y"]
    if not (isinstance(X, h5py.Dataset) and isinstance(y, h5py.Dataset)):
        return name, 0, None, [f"{where}: X and y must be datasets (arrays), not groups"]
    problems = []
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
    return name, rows, (X.shape[1] if X.ndim == 2 else None), problems


def _dim_mismatches(path: str, dims: dict, names: list) -> list:
    """One line for each task whose feature count differs from the first task's."""
    if not dims:
        return []
    first_k = min(dims)
    return [f"{path}: {_label(k, names[k])} has d={dk} features but "
            f"{_label(first_k, names[first_k])} has d={dims[first_k]}; "
            "all tasks must have the same features"
            for k, dk in dims.items() if dk != dims[first_k]]


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
            X = np.ascontiguousarray(_read_values(g, "X", where), dtype=np.float64)
            y, probs, notes = check_values(where, X, _read_values(g, "y", where))
            problems += probs
            notices += notes
            X_list.append(X)
            y_list.append(y)
    if problems:
        raise DataError("\n".join(problems))
    return TaskStreams(indices=indices, names=tuple(meta.names[k] for k in indices),
                       X=X_list, y=y_list, notices=notices)


def info(path) -> dict:
    """The paper's Table 1 row of a task-stream file, plus per-task figures (reads labels only).

    Raises
    ------
    DataError
        For a file that is not a valid task-stream file, or whose labels cannot be read
        (naming the task).
    """
    meta = read_meta(path)
    per_task = []
    with _open(meta.path) as f:
        for k, name in enumerate(meta.names):
            y = _read_values(f["tasks"][f"{k:04d}"], "y", f"{meta.path}: {_label(k, name)}")
            per_task.append({"index": k, "name": name, "samples": int(len(y)),
                             "positive_ratio": float(np.mean(y == 1)) if len(y) else 0.0})
    lengths = meta.lengths
    return {
        "path": meta.path, "tasks": meta.n_tasks, "dims": meta.dim, "total": int(lengths.sum()),
        "max": int(lengths.max()), "min": int(lengths.min()),
        "positive_ratio": float(np.mean([t["positive_ratio"] for t in per_task])),
        "per_task": per_task, "source": meta.source, "description": meta.description,
    }


def file_digest(path) -> str:
    """A SHA-256 digest of the file's bytes: what a checkpoint records of its data set, so a
    different file under the same name is noticed (computed once per process while the file
    is unchanged).

    Raises
    ------
    DataError
        When the file cannot be read.
    """
    path = os.path.abspath(os.fspath(path))
    try:
        regular_file(path, "data file")
        st = os.stat(path)
        return _file_digest(path, st.st_size, st.st_mtime_ns)
    except UserError as exc:
        raise DataError(str(exc)) from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read the file ({exc.strerror})") from None


@functools.cache
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return "sha256:" + h.hexdigest()
