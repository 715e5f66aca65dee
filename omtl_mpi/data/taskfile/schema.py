"""The task-stream format's names and numbers, the types a file is read into, and the checks of
a task's values (finite numeric features, labels -1/+1 or 0/1, no empty task)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

FORMAT = "omtl-mpi-tasks"
VERSION = 2                 # what the writers write for dense features
SPARSE_VERSION = 3          # ... and for sparse ones (compressed sparse rows)
VERSIONS = (1, 2, 3)        # what the readers read
CHUNK_BYTES = 2 ** 20       # bytes of an HDF5 chunk of /X (of /y), at most
SHOWN = 10                  # a problem shared by many tasks names this many, then counts the rest
_V2 = ("X", "y", "offsets", "names", "name_offsets")      # the datasets of a version 2 file
_CSR = ("data", "indices", "indptr")                      # the arrays of a sparse /X (version 3)
SPARSE_MAX_DIM = 2 ** 31 - 1    # the largest d a sparse file holds (its columns are int32)


@dataclass(frozen=True)
class TaskMeta:
    """What a data set is, from the file's structure only: ``offsets`` (K+1, task k is instances
    offsets[k]:offsets[k+1]; None but for files), ``nnz`` (the stored features of sparse data, None
    for dense) and ``max_row_nnz`` (the most of them in one instance)."""

    path: str
    names: tuple
    lengths: np.ndarray
    dim: int
    source: str = ""
    description: str = ""
    version: int = 1
    offsets: np.ndarray | None = None
    nnz: int | None = None
    max_row_nnz: int = 0

    @property
    def n_tasks(self) -> int:
        return len(self.names)

    @property
    def sparse(self) -> bool:
        """Whether the features are stored (and read) as compressed sparse rows."""
        return self.nnz is not None

    @property
    def density(self) -> float:
        """The fraction of the N x d features stored: 1 for a dense data set."""
        if self.nnz is None:
            return 1.0
        cells = int(self.lengths.sum()) * self.dim
        return self.nnz / cells if cells else 0.0


@dataclass
class TaskStreams:
    """The streams of some tasks, loaded and validated."""

    indices: np.ndarray
    names: tuple
    X: list
    y: list
    notices: list = field(default_factory=list)


@dataclass
class FlatStreams:
    """The tasks ``start..stop-1``, loaded and validated, as flat arrays: ``X`` (N, d) float64
    (CSR if sparse), ``y`` (N,) int8; task ``start + i`` is rows ``offsets[i]:offsets[i + 1]``."""

    start: int
    stop: int
    names: tuple
    X: np.ndarray
    y: np.ndarray
    offsets: np.ndarray
    notices: list = field(default_factory=list)

    @property
    def n_tasks(self) -> int:
        return self.stop - self.start

    def split(self) -> TaskStreams:
        """The same streams as one array per task (views of the flat arrays)."""
        o = self.offsets.tolist()
        return TaskStreams(indices=np.arange(self.start, self.stop, dtype=np.int64),
                           names=self.names, X=[self.X[a:b] for a, b in zip(o[:-1], o[1:])],
                           y=[self.y[a:b] for a, b in zip(o[:-1], o[1:])], notices=self.notices)


def _label(k: int, name: str) -> str:
    return f"task {k} ({name!r})"


def _shape_problems(where: str, X: np.ndarray, y: np.ndarray, labels: bool = True) -> list:
    """What is wrong with a task's arrays before their values are read (labels: if ``labels``)."""
    if X.ndim != 2:
        return [f"{where}: features must be a 2-D array (samples x features), got shape {X.shape}"]
    # Strings or Python objects would make np.isfinite raise a bare TypeError.
    if X.dtype.kind not in "fiub":
        return [f"{where}: features must be numbers, got dtype {X.dtype}; convert them to floats"]
    problems = []
    if len(y) != X.shape[0]:
        problems.append(f"{where}: {X.shape[0]} feature rows but {len(y)} labels")
    if X.shape[0] == 0:
        problems.append(f"{where}: the task is empty (no samples); remove it or add data")
    if labels and y.size and not np.issubdtype(y.dtype, np.number):
        problems.append(f"{where}: labels must be numbers, got dtype {y.dtype}")
    return problems


def _is_csr(X) -> bool:
    """Whether ``X`` is a scipy.sparse matrix (the in-memory form of sparse features)."""
    return hasattr(X, "tocsr")


def check_values(where: str, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, list, list]:
    """Validate one task's features (dense, or a scipy.sparse matrix) and labels: (labels as int8
    in {-1, +1}, ``{0, 1}`` mapped with a notice; the problems, one line each; the notices)."""
    notices = []
    if X.ndim != 2 or X.dtype.kind not in "fiub":
        return y, _shape_problems(where, X, np.asarray(y)), []
    problems = _shape_problems(where, X, np.asarray(y), labels=False)
    bad = ~_finite_rows(X)
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


def _finite_rows(X: np.ndarray) -> np.ndarray:
    """Whether each row of ``X`` holds only finite values (in pieces of about 8 MiB, so that the
    temporary stays small; of a sparse matrix, from its entries)."""
    if _is_csr(X):
        X = X.tocsr()
        out = np.ones(X.shape[0], dtype=bool)
        bad = ~np.isfinite(X.data)
        if bad.any():
            out[np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))[bad]] = False
        return out
    if X.dtype.kind not in "fc":
        return np.ones(len(X), dtype=bool)
    out = np.empty(len(X), dtype=bool)
    step = max(1, 2 ** 23 // max(1, X.shape[1]))
    for a in range(0, len(X), step):
        np.isfinite(X[a:a + step]).all(axis=1, out=out[a:a + step])
    return out


def _more(count: int, what: str) -> str:
    return f"and {count} more task(s) {what}" if count else ""


def _check_block(path: str, label, X: np.ndarray, y: np.ndarray, offsets: np.ndarray):
    """:func:`check_values` of consecutive tasks as flat arrays (task i, ``label(i)``, is rows
    offsets[i]:offsets[i+1]), vectorised: (labels or None; the first :data:`SHOWN` tasks' lines and
    a count of the others; the notices of 0/1 labels, one per task for up to three, else one)."""
    n = len(offsets) - 1
    if n == 0 or len(y) == 0:
        return np.zeros(0, dtype=np.int8), [], []
    starts = offsets[:-1]
    finite = _finite_rows(X)
    bad = ~np.logical_and.reduceat(finite, starts) if not finite.all() else np.zeros(n, bool)
    is_pm = (y == 1) | (y == -1)
    is_01 = (y == 0) | (y == 1)
    task_pm = np.logical_and.reduceat(is_pm, starts)
    task_01 = np.logical_and.reduceat(is_01, starts)
    bad |= ~(task_pm | task_01)
    problems = []
    flagged = np.flatnonzero(bad)
    for i in flagged[:SHOWN].tolist():
        a, b = int(offsets[i]), int(offsets[i + 1])
        problems += check_values(f"{path}: {label(i)}", X[a:b], y[a:b])[1]
    if len(flagged) > SHOWN:
        problems.append(f"{path}: {_more(len(flagged) - SHOWN, 'with such problems')} (the first "
                        f"{SHOWN} are listed)")
    if problems:
        return None, problems, []
    zero_one = task_01 & ~task_pm
    notices = []
    if zero_one.any():
        labels = y.astype(np.int8)
        rows = np.repeat(zero_one, np.diff(offsets))
        labels[rows] = np.where(y[rows] == 1, 1, -1)
        which = np.flatnonzero(zero_one)
        if len(which) <= 3:
            notices += [f"{path}: {label(i)}: labels are 0/1; mapped 0 -> -1" for i in which.tolist()]
        else:
            first = ", ".join(label(i) for i in which[:3].tolist())
            notices.append(f"{path}: labels are 0/1 in {len(which)} tasks ({first}, ...); "
                           "mapped 0 -> -1")
    else:
        labels = y if y.dtype == np.int8 else y.astype(np.int8)
    return labels, [], notices


# the importers store features sparse (version 3) when at most this fraction is non-zero and
# there are SPARSE_MIN_DIM at least (docs/DATASETS.md, *Sparse storage*)
SPARSE_DENSITY, SPARSE_MIN_DIM = 0.25, 1024


def store_sparse(nnz: int, rows: int, dims: int) -> bool:
    """Whether the importers store ``rows`` instances of ``dims`` features, ``nnz`` non-zero, as
    compressed sparse rows (:data:`SPARSE_DENSITY`, :data:`SPARSE_MIN_DIM`)."""
    return dims >= SPARSE_MIN_DIM and nnz <= SPARSE_DENSITY * rows * dims
