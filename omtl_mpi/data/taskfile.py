"""The task-stream HDF5 format: one file, validated before learning starts.

Version 2 (written by every writer of this release)::

    /              attrs: format = "omtl-mpi-tasks", format_version = 2, source, description
    /X             (N, d) float64: every task's instances, task 0's rows first, then task 1's, ...
                   (chunked by rows, about 1 MiB of features per chunk, not compressed)
    /y             (N,) int8 in {-1, +1}
    /offsets       (K+1,) int64: task k is rows offsets[k]:offsets[k+1]; offsets[0] = 0,
                   strictly increasing (no empty task), offsets[K] = N
    /names         (B,) uint8: the task names, UTF-8, one after another
    /name_offsets  (K+1,) int64: task k's name is names[name_offsets[k]:name_offsets[k+1]]

Version 3 is version 2 with the features stored as compressed sparse rows, for data whose
features are mostly zero (hashed text); the writers write it only for such data (a dense data
set stays version 2, readable by the releases before)::

    /X             group, attrs: shape = (N, d), max_row_nnz (the most entries of one row)
    /X/data        (nnz,) float64: the non-zero features, row after row
    /X/indices     (nnz,) int32: their columns, increasing within a row
    /X/indptr      (N+1,) int64: row i is data[indptr[i]:indptr[i+1]]
    /y, /offsets, /names, /name_offsets as in version 2

A process reads only its own contiguous block of tasks a..b-1: one slice of /X and one of /y
(:func:`load_block`; of a sparse /X, one slice of each of its arrays, read as a
scipy.sparse CSR matrix). Version 1 files (one group per task, below) are still read::

    /                 attrs: format = "omtl-mpi-tasks", format_version = 1, source, description
    /tasks/0000       attrs: name (any unicode);  X (n_k, d) float64,  y (n_k,) int8 in {-1, +1}
    /tasks/0001       ...

Streams may have different lengths. docs/DATASETS.md gives the measurements behind the layout.
"""
from __future__ import annotations

import functools
import hashlib
import os
import sys
from collections import Counter
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field

import h5py
import numpy as np

from .. import memory
from ..atomic import atomic_path
from ..errors import DataError, UserError
from ..paths import regular_file

FORMAT = "omtl-mpi-tasks"
VERSION = 2                 # what the writers write for dense features
SPARSE_VERSION = 3          # ... and for sparse ones (compressed sparse rows)
VERSIONS = (1, 2, 3)        # what the readers read
# what h5py (and reading what it returns) raises for a damaged file (a bad chunk, a broken link,
# an unreadable or misshapen attribute): each becomes one line naming the file (and the task
# where known), never a traceback; the checkpoint and the report readers use the same
H5_ERRORS = (OSError, KeyError, ValueError, TypeError, AttributeError, IndexError, RuntimeError)
# soft links followed before a chain is taken for a loop
_MAX_LINK_DEPTH = 16
# bytes of features per HDF5 chunk of /X (and of labels per chunk of /y), at most
CHUNK_BYTES = 2 ** 20
# a problem or notice shared by many tasks names this many of them, then counts the rest
SHOWN = 10
# the datasets of a version 2 file
_V2 = ("X", "y", "offsets", "names", "name_offsets")
# the arrays of a sparse /X (version 3)
_CSR = ("data", "indices", "indptr")
# the largest d a sparse file holds (its columns are int32)
SPARSE_MAX_DIM = 2 ** 31 - 1


@dataclass(frozen=True)
class TaskMeta:
    """What a data set is, read from the file's structure only (no feature values).

    ``offsets`` (K+1 int64, task k is instances offsets[k]:offsets[k+1] of the flat stream) is
    set for files (any version), None for data that is not one. ``nnz`` is the number of
    stored (non-zero) features of a sparse data set, None for a dense one; ``max_row_nnz`` the
    most of them in one instance.
    """

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
    """The streams of the tasks ``start..stop-1``, loaded and validated, as flat arrays.

    ``X`` is (N, d) float64 C-contiguous (a scipy.sparse CSR matrix for a sparse data set),
    ``y`` (N,) int8 in {-1, +1}; task ``start + i`` is rows ``offsets[i]:offsets[i + 1]`` (``offsets`` has stop - start + 1 entries, the first 0).
    """

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


def _offsets_of(lengths) -> np.ndarray:
    """(K+1,) int64: 0, then the running total of ``lengths``."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


def _shape_problems(where: str, X: np.ndarray, y: np.ndarray) -> list:
    """What is wrong with one task's arrays before their values are looked at: features not a
    2-D array of numbers, a row count that differs from the labels', no rows, labels that are
    not numbers."""
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
    if y.size and not np.issubdtype(y.dtype, np.number):
        problems.append(f"{where}: labels must be numbers, got dtype {y.dtype}")
    return problems


def _is_csr(X) -> bool:
    """Whether ``X`` is a scipy.sparse matrix (the in-memory form of sparse features)."""
    return hasattr(X, "tocsr")


def check_values(where: str, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, list, list]:
    """Validate one task's features (dense, or a scipy.sparse matrix) and labels.

    Returns the labels as int8 in {-1, +1} (``{0, 1}`` mapped, with a notice), the problems
    found (one line each) and the notices.
    """
    problems, notices = [], []
    if X.ndim != 2 or X.dtype.kind not in "fiub":
        return y, _shape_problems(where, X, np.asarray(y)), []
    if len(y) != X.shape[0]:
        problems.append(f"{where}: {X.shape[0]} feature rows but {len(y)} labels")
    if X.shape[0] == 0:
        problems.append(f"{where}: the task is empty (no samples); remove it or add data")
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
    """Whether each row of ``X`` holds only finite values (computed in pieces of about 8 MiB,
    so that the boolean temporary stays small; of a sparse matrix, from its entries)."""
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
    """Validate the values of consecutive tasks held as flat arrays, vectorised over the tasks.

    Parameters
    ----------
    path : str
        The file, for lines that are about several tasks.
    label : callable
        ``label(i)`` names the block's task i ("task 12 ('a')").
    X : ndarray (N, d), numbers
    y : ndarray (N,), numbers
    offsets : ndarray (n+1,) int64
        Task i is rows offsets[i]:offsets[i+1]; offsets[0] = 0, strictly increasing,
        offsets[n] = N.

    Returns
    -------
    labels : ndarray (N,) int8 in {-1, +1}, or None where there are problems
    problems : list of str
        :func:`check_values`' lines for each task with non-finite features or labels other than
        -1/+1 or 0/1 (the first :data:`SHOWN` such tasks, then one line counting the others).
    notices : list of str
        Tasks whose labels are 0/1 (mapped 0 -> -1): one line per task for up to three, else
        one line with their count and the first three.
    """
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


# ---------------------------------------------------------------- writing (version 2)
def _chunk_rows(width: int, itemsize: int, rows: int | None) -> int:
    """Rows per HDF5 chunk of a dataset of rows of ``width`` values: about CHUNK_BYTES, or the
    whole dataset where it is known to be smaller."""
    target = max(1, CHUNK_BYTES // max(1, width * itemsize))
    return max(1, min(target, int(rows))) if rows else target


class TaskFileWriter:
    """Write a task-stream file (version 2) chunk by chunk, atomically: a context manager.

    Every :meth:`add` appends whole tasks as flat arrays, validated as :func:`write_tasks`
    validates (unique names, finite numeric features of one d, labels -1/+1 or 0/1 written as
    -1/+1, no empty task). The file appears under ``path`` only when the ``with`` block ends
    without an exception; otherwise nothing is left there. It holds about one chunk in memory,
    so data too large to hold twice can be written::

        with TaskFileWriter("tasks.h5", source="mine", description="...") as w:
            for names, X, y, lengths in chunks:   # X (sum(lengths), d), y (sum(lengths),)
                w.add(names, X, y, lengths)

    Parameters
    ----------
    path : str or path
    source, description : str
        The file's ``source`` and ``description`` attributes.
    rows : int, optional
        The number of instances the file will hold, where known: a small file then gets HDF5
        chunks of its own size instead of 1 MiB ones.
    sparse : bool, optional
        Store the features as compressed sparse rows (format version 3) or dense (version 2);
        by default as the first chunk comes (a scipy.sparse matrix, or an array). Later chunks
        of the other form are converted.

    Raises
    ------
    DataError
        From :meth:`add`, listing every problem of the chunk (one line each, naming the task and
        the first bad row); on leaving the block, when no task was added.
    """

    def __init__(self, path, *, source: str = "", description: str = "", rows: int | None = None,
                 sparse: bool | None = None):
        self.path = str(path)
        self.source, self.description, self.rows = str(source), str(description), rows
        self.sparse = sparse
        self._stack = None
        self._file = self._X = self._y = None
        self._csr = None            # a sparse /X's datasets: data, indices, indptr
        self._nnz = self._max_row_nnz = 0
        self._dim = None
        self._written = 0           # instances written
        self._counted = 0           # tasks validated (the index of the next one)
        self._lengths = []          # one array of stream lengths per chunk written
        self._encoded = []          # every task's name, UTF-8
        self._seen = set()

    @property
    def n_tasks(self) -> int:
        """Tasks written so far."""
        return len(self._encoded)

    def __enter__(self) -> TaskFileWriter:
        self._stack = ExitStack()
        try:
            tmp = self._stack.enter_context(atomic_path(self.path))
            self._file = self._stack.enter_context(h5py.File(tmp, "w", rdcc_nbytes=4 * CHUNK_BYTES))
            self._file.attrs["format"] = FORMAT
            self._file.attrs["format_version"] = VERSION
            self._file.attrs["source"] = self.source
            self._file.attrs["description"] = self.description
        except BaseException:
            if not self._stack.__exit__(*sys.exc_info()):
                raise
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            try:
                self._finish()
            except BaseException:
                if not self._stack.__exit__(*sys.exc_info()):
                    raise
                return False
        return self._stack.__exit__(exc_type, exc, tb)

    def add(self, names, X, y, lengths) -> None:
        """Append the tasks ``names``, whose streams follow one another in ``X`` and ``y``.

        Parameters
        ----------
        names : sequence of str
            One per task, unique in the file.
        X : array (N, d), or a scipy.sparse matrix
            Numbers, finite; written as float64.
        y : array (N,)
            -1/+1, or 0/1 (written as -1/+1).
        lengths : sequence of int
            Each task's number of instances (>= 1), summing to N.

        Raises
        ------
        DataError
            Every problem of this chunk; the file is then not written (leave the ``with``
            block by the exception).
        """
        chunk, problems = self._checked(names, X, y, lengths)
        if problems:
            raise DataError("\n".join(problems))
        self._append(*chunk)

    def _checked(self, names, X, y, lengths):
        """((the names in UTF-8, X as float64, labels, lengths), []) for a valid chunk, else
        (None, the problems)."""
        path, k0 = self.path, self._counted
        names = [str(n) for n in names]
        self._counted += len(names)
        where = f"{path}: task {k0}" if len(names) == 1 else f"{path}: tasks {k0}..{k0 + len(names) - 1}"
        X = X if _is_csr(X) else np.asarray(X)
        y, lengths = np.asarray(y).reshape(-1), np.asarray(lengths)
        problems = []
        if lengths.ndim != 1 or (lengths.size and lengths.dtype.kind not in "iu"):
            problems.append(f"{where}: lengths must be a 1-D sequence of whole numbers, got "
                            f"shape {lengths.shape} and dtype {lengths.dtype}")
        elif len(lengths) != len(names):
            problems.append(f"{where}: {len(names)} names but {len(lengths)} lengths; give one "
                            "length per task")
        if X.ndim != 2:
            problems.append(f"{where}: features must be a 2-D array (instances x features), got "
                            f"shape {X.shape}")
        elif X.dtype.kind not in "fiub":
            problems.append(f"{where}: features must be numbers, got dtype {X.dtype}; convert "
                            "them to floats")
        elif X.shape[1] == 0:
            problems.append(f"{where}: the features have no column (shape {X.shape})")
        elif X.shape[1] > SPARSE_MAX_DIM and (self.sparse or _is_csr(X)):
            problems.append(f"{where}: {X.shape[1]} features; a sparse task file holds at most "
                            f"{SPARSE_MAX_DIM}")
        elif self._dim is not None and X.shape[1] != self._dim:
            problems.append(f"{path}: tasks have different numbers of features "
                            f"{sorted({self._dim, X.shape[1]})}; every task must have the same d")
        if y.size and not np.issubdtype(y.dtype, np.number):
            problems.append(f"{where}: labels must be numbers, got dtype {y.dtype}")
        if not problems:
            total = int(lengths.sum())
            if not total == X.shape[0] == len(y):
                problems.append(f"{where}: the lengths add up to {total} instances but there are "
                                f"{X.shape[0]} feature rows and {len(y)} labels")
            empty = np.flatnonzero(lengths < 1).tolist()
            problems += [f"{path}: {_label(k0 + i, names[i])}: the task is empty (no samples); "
                         "remove it or add data" for i in empty[:SHOWN]]
            if len(empty) > SHOWN:
                problems.append(f"{path}: {_more(len(empty) - SHOWN, 'are empty')}")
        encoded, twice = [], None
        for i, name in enumerate(names):
            if name in self._seen and twice is None:
                twice = name
            self._seen.add(name)
            try:
                encoded.append(name.encode("utf-8"))
            except UnicodeEncodeError:
                problems.append(f"{path}: {_label(k0 + i, name)}: the name cannot be written as "
                                "UTF-8 (it holds a lone surrogate); rename the task")
        if twice is not None:
            problems.insert(0, f"{path}: task name {twice!r} is used twice; task names must be unique")
        if problems:
            return None, problems
        offsets = _offsets_of(lengths)
        labels, problems, _ = _check_block(path, lambda i: _label(k0 + i, names[i]), X, y, offsets)
        if problems:
            return None, problems
        if self.sparse is None:
            self.sparse = _is_csr(X)
        self._dim = X.shape[1]
        if self.sparse:
            from .sparse import csr_arrays
            if not _is_csr(X):
                from scipy.sparse import csr_matrix
                X = csr_matrix(X)
            data, indices, indptr, _ = csr_arrays(X.astype(np.float64))
            X = (data, indices.astype(np.int32), indptr)
        else:
            X = np.ascontiguousarray(X.toarray() if _is_csr(X) else X, dtype=np.float64)
        return (encoded, X, labels, lengths.astype(np.int64)), []

    def _append_sparse(self, X, n_rows: int) -> None:
        """Append the CSR arrays ``X`` = (data, indices, indptr) of ``n_rows`` rows to /X."""
        data, indices, indptr = X
        if self._csr is None:
            g = self._file.create_group("X")
            width = _chunk_rows(1, 8, None)
            self._csr = {
                "data": g.create_dataset("data", shape=(0,), maxshape=(None,), dtype=np.float64,
                                         chunks=(width,)),
                "indices": g.create_dataset("indices", shape=(0,), maxshape=(None,),
                                            dtype=np.int32, chunks=(width,)),
                "indptr": g.create_dataset("indptr", data=np.zeros(1, dtype=np.int64),
                                           maxshape=(None,), chunks=(_chunk_rows(1, 8, None),))}
        a, b = self._nnz, self._nnz + len(data)
        for name, values in (("data", data), ("indices", indices)):
            ds = self._csr[name]
            ds.resize(b, axis=0)
            ds[a:b] = values
        ds = self._csr["indptr"]
        r = ds.shape[0]
        ds.resize(r + n_rows, axis=0)
        ds[r:] = indptr[1:] + a
        self._nnz = b
        if n_rows:
            self._max_row_nnz = max(self._max_row_nnz, int(np.diff(indptr).max()))

    def _append(self, encoded, X, labels, lengths) -> None:
        if self.sparse:
            n = len(labels)
            if self._y is None:
                self._y = self._file.create_dataset("y", shape=(0,), maxshape=(None,), dtype=np.int8,
                                                    chunks=(_chunk_rows(1, 1, self.rows),))
            self._append_sparse(X, n)
            a, b = self._written, self._written + n
            if b > a:
                self._y.resize(b, axis=0)
                self._y[a:b] = labels
            self._written = b
            self._lengths.append(lengths)
            self._encoded += encoded
            return
        if self._X is None:
            self._dim = X.shape[1]
            self._X = self._file.create_dataset(
                "X", shape=(0, self._dim), maxshape=(None, self._dim), dtype=np.float64,
                chunks=(_chunk_rows(self._dim, 8, self.rows), self._dim))
            self._y = self._file.create_dataset("y", shape=(0,), maxshape=(None,), dtype=np.int8,
                                                chunks=(_chunk_rows(1, 1, self.rows),))
        a, b = self._written, self._written + len(X)
        if b > a:
            self._X.resize(b, axis=0)
            self._X[a:b] = X
            self._y.resize(b, axis=0)
            self._y[a:b] = labels
        self._written = b
        self._lengths.append(lengths)
        self._encoded += encoded

    def _finish(self) -> None:
        if not self._encoded:
            raise DataError(f"{self.path}: no tasks to write")
        f = self._file
        if self.sparse:
            f.attrs["format_version"] = SPARSE_VERSION
            f["X"].attrs["shape"] = np.array([self._written, self._dim], dtype=np.int64)
            f["X"].attrs["max_row_nnz"] = np.int64(self._max_row_nnz)
        f.create_dataset("offsets", data=_offsets_of(np.concatenate(self._lengths)))
        sizes = np.fromiter(map(len, self._encoded), dtype=np.int64, count=len(self._encoded))
        f.create_dataset("names", data=np.frombuffer(b"".join(self._encoded), dtype=np.uint8))
        f.create_dataset("name_offsets", data=_offsets_of(sizes))


def block_spans(lengths, most: int) -> list:
    """Consecutive tasks, of stream ``lengths``, grouped into spans (a, b) of tasks a..b-1 that
    hold at most ``most`` instances together (a span of one task may hold more): how the
    writers and generators cut data into blocks."""
    offsets = _offsets_of(np.asarray(lengths, dtype=np.int64))
    spans, a, count = [], 0, len(offsets) - 1
    while a < count:
        b = max(a + 1, int(np.searchsorted(offsets, offsets[a] + most, side="right")) - 1)
        spans.append((a, b))
        a = b
    return spans


# features validated and written together by write_tasks: 32 MiB of float64
_GROUP_VALUES = 2 ** 22


def write_tasks(path, names, X_list, y_list, *, source: str = "", description: str = "",
                sparse: bool | None = None) -> None:
    """Validate and write a task-stream file atomically (temporary name, then rename).

    The features are arrays or scipy.sparse matrices; they are stored as compressed sparse rows
    (version 3) when ``sparse`` is True, or when it is None and any task's are a sparse matrix,
    else dense (version 2).

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
    counts = Counter(names)
    if len(counts) != len(names):
        dup = next(n for n in names if counts[n] > 1)
        problems.append(f"{path}: task name {dup!r} is used twice; task names must be unique")
    X_list = [X if _is_csr(X) else np.asarray(X) for X in X_list]
    y_list = [np.asarray(y).reshape(-1) for y in y_list]
    if sparse is None:
        sparse = any(_is_csr(X) for X in X_list)
    dims, fine = set(), []
    for k, (name, X, y) in enumerate(zip(names, X_list, y_list)):
        found = _shape_problems(f"{path}: {_label(k, name)}", X, y)
        problems += found
        if X.ndim == 2:
            dims.add(X.shape[1])
        if not found:
            fine.append(k)
    if len(dims) > 1:
        problems.append(f"{path}: tasks have different numbers of features {sorted(dims)}; "
                        "every task must have the same d")
    if problems:
        # the values of the other tasks too, so that every problem is listed at once
        for k in fine:
            problems += check_values(f"{path}: {_label(k, names[k])}", X_list[k], y_list[k])[1]
        raise DataError("\n".join(problems))
    lengths = [len(y) for y in y_list]
    per_row = max(1, X_list[0].shape[1])
    if sparse:      # a block's entries, not its rows x d, are what it holds
        per_row = max(1, max(_stored(X) for X in X_list) // max(1, max(lengths)))
    with TaskFileWriter(path, source=source, description=description, rows=sum(lengths),
                        sparse=sparse) as w:
        for a, b in block_spans(lengths, max(1, _GROUP_VALUES // per_row)):
            X = X_list[a] if b == a + 1 else _stack(X_list[a:b])
            chunk, found = w._checked(names[a:b], X, np.concatenate(y_list[a:b]), lengths[a:b])
            problems += found
            if not problems:
                w._append(*chunk)
        if problems:
            raise DataError("\n".join(problems))


# features are stored sparse (format version 3) by the importers when at most this fraction of
# them is non-zero and there are at least SPARSE_MIN_DIM of them: below that a dense row is at
# most 8 KiB and dense rounds cost the learners less (docs/DATASETS.md, *Sparse storage*)
SPARSE_DENSITY, SPARSE_MIN_DIM = 0.25, 1024


def store_sparse(nnz: int, rows: int, dims: int) -> bool:
    """Whether the importers store ``rows`` instances of ``dims`` features of which ``nnz`` are
    non-zero as compressed sparse rows (:data:`SPARSE_DENSITY`, :data:`SPARSE_MIN_DIM`)."""
    return dims >= SPARSE_MIN_DIM and nnz <= SPARSE_DENSITY * rows * dims


def _stored(X) -> int:
    """Numbers stored of a task's features: its entries if sparse, else rows x d."""
    return int(X.nnz) if _is_csr(X) else int(X.size)


def _stack(parts):
    """Consecutive tasks' features as one matrix: sparse if any of them is."""
    if any(_is_csr(X) for X in parts):
        from scipy.sparse import csr_matrix, vstack
        return vstack([X if _is_csr(X) else csr_matrix(X) for X in parts], format="csr")
    return np.concatenate(parts, axis=0)


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


def _check_version(path: str, f) -> int:
    """The file's format version (1 or 2); a file without one (older) is read as 1, a file of
    another version is refused."""
    version = f.attrs.get("format_version")
    if version is None:
        return 1
    value = np.asarray(version)
    if value.shape == () and value.dtype.kind in "iuf":
        for known in VERSIONS:
            if value == known:
                return known
    shown = value.item() if value.shape == () else value.tolist()
    if isinstance(shown, bytes):
        shown = shown.decode(errors="replace")
    known = f"{', '.join(map(str, VERSIONS[:-1]))} and {VERSIONS[-1]}"
    raise DataError(f"{path}: task-file format version {shown}; this release of omtl-mpi reads "
                    f"versions {known}: use the omtl-mpi that wrote it, or import the data again")


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

    Version 2 costs no Python work per task beyond decoding the names.

    Raises
    ------
    DataError
        Listing every structural problem, one per line.
    """
    path = str(path)
    with _open(path) as f:
        version = _check_version(path, f)
        if version >= 2:
            return _read_meta_v2(path, f, version)
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
        lengths = np.array(lengths, dtype=np.int64)
        return TaskMeta(path=path, names=tuple(names), lengths=lengths,
                        dim=int(dims[min(dims)]), version=1, offsets=_offsets_of(lengths),
                        **_described(f))


def _described(f) -> dict:
    return {"source": str(f.attrs.get("source", "")),
            "description": str(f.attrs.get("description", ""))}


# ---------------------------------------------------------------- version 2 structure
def _v2_datasets(path: str, f, sparse: bool = False) -> tuple[dict, list]:
    """The datasets of a version 2 file by name, and the lines about those that are missing,
    links (refused without being followed: the files the writers make hold none) or groups
    (``sparse``, version 3: /X is the group of a sparse matrix's arrays)."""
    missing = [name for name in _V2 if not _has(f, name)]
    if len(missing) == len(_V2):
        raise DataError(f"{path}: no /X, /y or /offsets; this is not an omtl-mpi task-stream file "
                        "(convert it with 'omtl-mpi data import')")
    problems = []
    if missing:
        shown = ", ".join(f"/{name}" for name in missing)
        problems.append(f"{path}: {shown} missing; a version 2 task file holds /X, /y, /offsets, "
                        "/names and /name_offsets: import or copy it again")
    found = {}
    for name in _V2:
        if name in missing:
            continue
        link = f.get(name, getlink=True)
        if not isinstance(link, h5py.HardLink):
            why = _link_problem(f, f, name)
            problems.append(f"{path}: /{name} " + (why.strip() if why else (
                f"is a soft link to {link.path}; a task file holds its arrays under their own "
                "names (links are refused): import or copy it again")))
            continue
        obj = f[name]
        if sparse and name == "X":
            if not isinstance(obj, h5py.Group):
                problems.append(f"{path}: /X must be a group of the arrays {', '.join(_CSR)} in "
                                "a version 3 (sparse) file: import or copy it again")
                continue
            parts = [p for p in _CSR if not _has(obj, p)]
            parts += [p for p in _CSR if p not in parts and not (
                isinstance(obj.get(p, getlink=True), h5py.HardLink) and isinstance(obj[p], h5py.Dataset))]
            if parts:
                problems.append(f"{path}: /X/{parts[0]} is missing, a link or not an array; a "
                                f"sparse /X holds the arrays {', '.join(_CSR)}: import or copy it "
                                "again")
                continue
        elif not isinstance(obj, h5py.Dataset):
            problems.append(f"{path}: /{name} must be a dataset (an array), not a group")
            continue
        found[name] = obj
    return found, problems


def _sparse_shape(path: str, X, problems: list):
    """(rows, d, nnz, most entries of a row) of a sparse /X group, checked from its attributes
    and its arrays' shapes (no values read but two of indptr); None where they are wrong."""
    shape = np.asarray(X.attrs.get("shape", []))
    data, indices, indptr = (X[p] for p in _CSR)
    before = len(problems)
    if shape.shape != (2,) or shape.dtype.kind not in "iu" or (shape < 0).any():
        problems.append(f"{path}: /X has no valid shape attribute (rows, features)")
        return None
    rows, d = int(shape[0]), int(shape[1])
    if d < 1 or d > SPARSE_MAX_DIM:
        problems.append(f"{path}: /X has {d} features; a sparse file holds 1 to {SPARSE_MAX_DIM}")
    for ds, name, kinds in ((data, "data", "fiu"), (indices, "indices", "iu"), (indptr, "indptr", "iu")):
        if ds.ndim != 1 or ds.dtype.kind not in kinds:
            problems.append(f"{path}: /X/{name} must be a 1-D array of "
                            f"{'numbers' if kinds == 'fiu' else 'integers'}, got shape {ds.shape} "
                            f"and dtype {ds.dtype}")
    if len(problems) > before:
        return None
    if data.shape != indices.shape:
        problems.append(f"{path}: /X/data holds {data.shape[0]} values but /X/indices "
                        f"{indices.shape[0]} columns; they must match")
    if indptr.shape[0] != rows + 1:
        problems.append(f"{path}: /X/indptr holds {indptr.shape[0]} values; a sparse /X of "
                        f"{rows} rows needs {rows + 1}")
    elif len(problems) == before:
        ends = indptr[[0, rows]] if rows else indptr[[0, 0]]
        if int(ends[0]) != 0 or int(ends[1]) != data.shape[0]:
            problems.append(f"{path}: /X/indptr runs from {int(ends[0])} to {int(ends[1])}; it "
                            f"must run from 0 to {data.shape[0]} (the entries)")
    most = np.asarray(X.attrs.get("max_row_nnz", []))
    if most.shape != () or most.dtype.kind not in "iu" or not 0 <= int(most) <= d:
        problems.append(f"{path}: /X has no valid max_row_nnz attribute (the most entries of a row)")
    if len(problems) > before:
        return None
    most, nnz = int(most), int(data.shape[0])
    # the attributes size what a run allocates (each round's rows, the messages): checked
    # against the arrays they describe, so that a wrong one is a damaged file, not a broadcast
    # error in the middle of a run or a memory refusal of a file of a few KiB. Every row holds
    # at most max_row_nnz entries and one row holds that many, so max_row_nnz <= nnz <=
    # rows x max_row_nnz (<= rows x d); each block's rows are checked against it as read
    if not most <= nnz <= rows * most:
        problems.append(f"{path}: /X holds {nnz:,} entries in {rows:,} rows, which its "
                        f"max_row_nnz attribute of {most:,} (the most entries of a row) "
                        "contradicts; the file is damaged: import or copy it again")
        return None
    return rows, d, nnz, most


def _index_values(path: str, ds, name: str, problems: list):
    """The values of /offsets or /name_offsets as int64 where they are a 1-D array of at least
    two integers starting at 0, else None (with the reason in ``problems``)."""
    if ds.dtype.kind not in "iu":
        problems.append(f"{path}: /{name} must be integers, got dtype {ds.dtype}")
        return None
    if ds.ndim != 1:
        problems.append(f"{path}: /{name} must be 1-D, got shape {ds.shape}")
        return None
    if ds.shape[0] < 2:
        problems.append(f"{path}: /{name} holds {ds.shape[0]} value(s); it must hold K+1 >= 2 "
                        "(one task at least)")
        return None
    _check_declared(path, f"/{name}", ds.shape[0] * 8)
    values = _read_values(ds.parent, name, path)
    if values.dtype.kind == "u" and values.max() > np.iinfo(np.int64).max:
        problems.append(f"{path}: /{name} holds values beyond 2^63; the file is damaged")
        return None
    values = values.astype(np.int64)
    if values[0] != 0:
        problems.append(f"{path}: /{name} must start at 0, got {int(values[0])}")
        return None
    return values


def _decoded_names(path: str, found: dict, count: int | None, problems: list) -> list | None:
    """The task names of /names and /name_offsets (UTF-8; undecodable bytes replaced), None
    where they cannot be read (with the reason in ``problems``)."""
    blob, ends = found.get("names"), found.get("name_offsets")
    if blob is None or ends is None:
        return None
    if blob.ndim != 1 or blob.dtype != np.uint8:
        problems.append(f"{path}: /names must be a 1-D array of bytes (uint8, UTF-8), got shape "
                        f"{blob.shape} and dtype {blob.dtype}")
        return None
    before = len(problems)
    offsets = _index_values(path, ends, "name_offsets", problems)
    if offsets is None:
        return None
    if count is not None and len(offsets) != count + 1:
        problems.append(f"{path}: /name_offsets gives {len(offsets) - 1} name(s) but /offsets "
                        f"{count} task(s); there must be one name per task")
    if np.any(np.diff(offsets) < 0):
        k = int(np.flatnonzero(np.diff(offsets) < 0)[0])
        problems.append(f"{path}: /name_offsets decreases at task {k}; it must not decrease")
    if offsets[-1] != blob.shape[0]:
        problems.append(f"{path}: /name_offsets ends at {int(offsets[-1])} but /names holds "
                        f"{blob.shape[0]} bytes; it must end at their number")
    if len(problems) > before:
        return None
    _check_declared(path, "/names", blob.shape[0])
    raw = _read_values(blob.parent, "names", path).tobytes()
    o = offsets.tolist()
    return [raw[a:b].decode("utf-8", "replace") for a, b in zip(o[:-1], o[1:])]


def _offset_problems(path: str, offsets: np.ndarray, names, rows) -> list:
    """Lines for task offsets that do not increase strictly (an empty task, naming it) or do
    not end at the number of rows."""
    problems = []
    steps = np.diff(offsets)
    wrong = np.flatnonzero(steps <= 0)
    for k in wrong[:SHOWN].tolist():
        name = names[k] if names is not None else f"task{k}"
        a, b = int(offsets[k]), int(offsets[k + 1])
        problems.append(f"{path}: {_label(k, name)}: the task is empty (no samples): /offsets "
                        f"{k} and {k + 1} are both {a}" if a == b else
                        f"{path}: {_label(k, name)}: /offsets decreases from {a} to {b}; "
                        "offsets must increase strictly")
    if len(wrong) > SHOWN:
        problems.append(f"{path}: /offsets: {_more(len(wrong) - SHOWN, 'are empty or out of order')}")
    if rows is not None and offsets[-1] != rows:
        problems.append(f"{path}: /offsets ends at {int(offsets[-1])} but /X has {rows} rows; "
                        "it must end at the number of instances")
    return problems


def _check_declared(path: str, what: str, nbytes: int) -> None:
    """Refuse, before reading it, an array that would take more than half the memory available
    (a damaged or hostile file may declare any size, compressed to nothing)."""
    free = available_memory()
    if free is not None and 2 * nbytes > free:
        raise DataError(f"{path}: {what} would need {memory.size_text(nbytes)}, more than half the "
                        f"{memory.size_text(free)} of memory available; the file is damaged, or too "
                        "large for this machine")


def _read_meta_v2(path: str, f, version: int = 2) -> TaskMeta:
    found, problems = _v2_datasets(path, f, sparse=version == SPARSE_VERSION)
    X, y, rows = found.get("X"), found.get("y"), None
    sparse, dim = None, None
    if X is not None and version == SPARSE_VERSION:
        sparse = _sparse_shape(path, X, problems)
        if sparse is not None:
            rows, dim = sparse[0], sparse[1]
    elif X is not None:
        dim = int(X.shape[1]) if X.ndim == 2 else None
        if X.ndim != 2:
            problems.append(f"{path}: X must be 2-D (samples x features), got shape {X.shape}")
        elif X.shape[1] == 0:
            problems.append(f"{path}: X has no feature column (shape {X.shape})")
        else:
            rows = int(X.shape[0])
        if X.dtype.kind not in "fiu":
            problems.append(f"{path}: X must be numeric, got dtype {X.dtype}")
    if y is not None:
        if y.ndim != 1:
            problems.append(f"{path}: y must be 1-D, got shape {y.shape}")
        elif rows is not None and y.shape[0] != rows:
            problems.append(f"{path}: {rows} feature rows but {y.shape[0]} labels")
        if y.dtype.kind not in "fiu":
            problems.append(f"{path}: y must be numeric, got dtype {y.dtype}")
    offsets = None
    if "offsets" in found:
        offsets = _index_values(path, found["offsets"], "offsets", problems)
    names = _decoded_names(path, found, None if offsets is None else len(offsets) - 1, problems)
    if offsets is not None:
        problems += _offset_problems(path, offsets, names, rows)
    if problems:
        raise DataError("\n".join(problems))
    return TaskMeta(path=path, names=tuple(names), lengths=np.diff(offsets), dim=dim,
                    version=version, offsets=offsets, nnz=None if sparse is None else sparse[2],
                    max_row_nnz=dim if sparse is None else sparse[3], **_described(f))


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
    """Bytes of memory this process may still allocate (the machine's MemAvailable, or less
    under a cgroup's limit: :func:`omtl_mpi.memory.available`), None if unknown."""
    return memory.available()


def features_bytes(meta: TaskMeta, rows: int) -> int:
    """Bytes ``rows`` instances of the data set take in memory: 8 per feature dense; sparse,
    12 per entry (value and column; their share of the entries, at the data set's mean) and 8
    per row."""
    if meta.sparse:
        total = int(meta.lengths.sum())
        return int(12 * meta.nnz * rows / max(total, 1)) + 8 * (rows + 1)
    return rows * meta.dim * 8


def _check_fits(meta: TaskMeta, indices) -> None:
    """Refuse, before reading, tasks whose features cannot fit in this machine's memory."""
    if isinstance(indices, range) and indices.step == 1:
        rows = int(meta.lengths[indices.start:indices.stop].sum())
    else:
        rows = int(meta.lengths[np.asarray(indices, dtype=np.int64).reshape(-1)].sum())
    need = features_bytes(meta, rows)
    free = available_memory()
    # the features are read once and copied at most once more (validation, batching)
    if free is not None and 2 * need > free:
        raise DataError(f"{meta.path}: the {len(indices)} task(s) this process would hold need "
                        f"{memory.size_text(need)} of features (d = {meta.dim}), more than half the "
                        f"{memory.size_text(free)} of memory available: start more ranks (or nodes) so "
                        "that each holds fewer tasks, or reduce the dimension when importing")


def _out_of_range(meta: TaskMeta, index: int) -> DataError:
    # A wrong index is a caller's (or a world-size) mistake; say so rather than an h5py KeyError.
    return DataError(f"{meta.path}: task index {index} out of range; the file has "
                     f"{meta.n_tasks} task(s), numbered 0..{meta.n_tasks - 1}")


def load_tasks(meta: TaskMeta, indices) -> TaskStreams:
    """Read and validate only the tasks in ``indices`` (a worker's own block).

    Raises
    ------
    DataError
        Naming the task and the first bad row of every problem found.
    """
    indices = np.asarray(indices, dtype=np.int64).reshape(-1)
    outside = indices[(indices < 0) | (indices >= meta.n_tasks)]
    if outside.size:
        raise _out_of_range(meta, int(outside[0]))
    _check_fits(meta, indices)
    if meta.version >= 2:
        return _load_tasks_v2(meta, indices)
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


def load_block(meta: TaskMeta, start: int, stop: int) -> FlatStreams:
    """Read and validate the tasks ``start..stop-1`` as flat arrays (a process's own block).

    A version 2 file is read in one slice of /X and one of /y, and validated without a Python
    loop over the tasks (only the tasks with a problem are looked at one by one, to name them).

    Raises
    ------
    DataError
        Naming the task and the first bad row of every problem found (the first few tasks of
        each kind, then their count), or the block that would not fit in memory.
    """
    start, stop = int(start), int(stop)
    if stop <= start:
        raise DataError(f"{meta.path}: no task in the block {start}..{stop - 1}; ask for "
                        f"0 <= start < stop <= {meta.n_tasks}")
    for index in (start, stop - 1):
        if not 0 <= index < meta.n_tasks:
            raise _out_of_range(meta, index)
    _check_fits(meta, range(start, stop))
    if meta.version < 2:
        got = load_tasks(meta, range(start, stop))
        lengths = np.array([len(y) for y in got.y], dtype=np.int64)
        return FlatStreams(start=start, stop=stop, names=got.names, X=np.concatenate(got.X),
                           y=np.concatenate(got.y), offsets=_offsets_of(lengths), notices=got.notices)
    with _open(meta.path) as f:
        flat, problems = _block_v2(f, meta, start, stop)
    if problems:
        raise DataError("\n".join(problems))
    return flat


def _block_v2(f, meta: TaskMeta, start: int, stop: int) -> tuple[FlatStreams, list]:
    """Tasks start..stop-1 of the open version 2 file ``f``, and the problems of their values."""
    lo, hi = int(meta.offsets[start]), int(meta.offsets[stop])
    if meta.sparse:
        X = _read_sparse_rows(f, lo, hi, meta)
    else:
        X = np.ascontiguousarray(_read_rows(f, "X", lo, hi, meta), dtype=np.float64)
    y = _read_rows(f, "y", lo, hi, meta)
    offsets = meta.offsets[start:stop + 1] - lo
    names = meta.names[start:stop]
    labels, problems, notices = _check_block(meta.path, lambda i: _label(start + i, names[i]),
                                             X, y, offsets)
    return FlatStreams(start=start, stop=stop, names=names, X=X, y=labels, offsets=offsets,
                       notices=notices), problems


def _row_pointers(g, lo: int, hi: int, meta: TaskMeta) -> np.ndarray:
    """The row pointers of rows lo..hi-1 of the sparse /X group ``g`` (hi - lo + 1 of them),
    checked: they increase within the entries, and no row holds more entries than the file's
    max_row_nnz, which sizes each round's rows and messages in a run (a row holding more is a
    damaged file, said by the rank that reads it, not a broadcast error rounds later)."""
    indptr = _read_rows(g, "indptr", lo, hi + 1, meta).astype(np.int64)
    a, b = int(indptr[0]), int(indptr[-1])
    steps = np.diff(indptr)
    if a < 0 or b > meta.nnz or (steps < 0).any():
        raise DataError(_damaged(meta, lo + int(np.argmax(steps < 0)) if (steps < 0).any() else lo,
                                 "its row pointers /X/indptr do not increase within the entries"))
    over = steps > meta.max_row_nnz
    if over.any():
        row = int(np.argmax(over))
        raise DataError(_damaged(meta, lo + row, f"it holds {int(steps[row])} entries, more than "
                                 f"the file's max_row_nnz attribute ({meta.max_row_nnz})"))
    return indptr


def _read_sparse_rows(f, lo: int, hi: int, meta: TaskMeta):
    """Rows lo..hi-1 of a sparse /X as a scipy.sparse CSR matrix, its structure checked (the
    row pointers increase, no row holds more than max_row_nnz entries, the columns lie in
    0..d-1 and increase within each row): a damaged file is one line naming the first task
    concerned."""
    from .sparse import csr_matrix
    g = f["X"]
    indptr = _row_pointers(g, lo, hi, meta)
    a, b = int(indptr[0]), int(indptr[-1])
    steps = np.diff(indptr)
    data = np.asarray(_read_rows(g, "data", a, b, meta, (lo, indptr)), dtype=np.float64)
    indices = _read_rows(g, "indices", a, b, meta, (lo, indptr))
    if len(indices):
        bad = (indices < 0) | (indices >= meta.dim)
        starts = indptr[:-1] - a
        # within a row the columns increase: every step but the first of each row is > 0
        step_ok = np.ones(len(indices), dtype=bool)
        step_ok[1:] = indices[1:] > indices[:-1]
        step_ok[starts[steps > 0]] = True
        bad |= ~step_ok
        if bad.any():
            row = lo + int(np.searchsorted(indptr, a + int(np.argmax(bad)), side="right")) - 1
            raise DataError(_damaged(meta, row, "its columns /X/indices lie outside 0..d-1 or do "
                                     "not increase within a row"))
    return csr_matrix(data, indices.astype(np.int32, copy=False), indptr - a, (hi - lo, meta.dim))


def _damaged(meta: TaskMeta, row: int, why: str) -> str:
    k = int(np.searchsorted(meta.offsets, row, side="right")) - 1
    return (f"{meta.path}: {_label(k, meta.names[k])}: row {row - int(meta.offsets[k])}: {why}; "
            "the file is damaged: import or copy it again")


def _read_rows(f, name: str, lo: int, hi: int, meta: TaskMeta, entries=None) -> np.ndarray:
    """Rows lo..hi-1 of the version 2 dataset ``name``; where they cannot be read (a damaged
    chunk), one line naming the first task whose rows cannot be (``entries``: the dataset holds
    a sparse /X's entries, these the row pointers (first row, pointers) that place them)."""
    ds = f[name]
    try:
        return ds[lo:hi]
    except H5_ERRORS as exc:
        row = _first_unreadable(ds, lo, hi)
        if entries is not None:
            first, indptr = entries
            row = first + int(np.searchsorted(indptr, row, side="right")) - 1
        k = int(np.searchsorted(meta.offsets, row, side="right")) - 1
        raise DataError(f"{meta.path}: {_label(k, meta.names[k])}: cannot read {name} "
                        f"({reason(exc)}); the file is damaged: import or copy it again") from None


def _first_unreadable(ds, lo: int, hi: int) -> int:
    """The first row of lo..hi-1 whose chunk cannot be read (lo if every chunk alone can)."""
    step = ds.chunks[0] if ds.chunks else max(1, hi - lo)
    a = lo
    while a < hi:
        b = min(hi, (a // step + 1) * step)
        try:
            ds[a:b]
        except H5_ERRORS:
            return a
        a = b
    return lo


def _load_tasks_v2(meta: TaskMeta, indices: np.ndarray) -> TaskStreams:
    """load_tasks for a version 2 file: each run of consecutive tasks asked for is one block."""
    wanted = np.unique(indices)
    runs = np.split(wanted, np.flatnonzero(np.diff(wanted) != 1) + 1)
    X, y, problems, notices = {}, {}, [], []
    with _open(meta.path) as f:
        for run in runs:
            flat, found = _block_v2(f, meta, int(run[0]), int(run[-1]) + 1)
            problems += found
            notices += flat.notices
            if not found:
                part = flat.split()
                X.update(zip(run.tolist(), part.X))
                y.update(zip(run.tolist(), part.y))
    if problems:
        raise DataError("\n".join(problems))
    order = indices.tolist()
    return TaskStreams(indices=indices, names=tuple(meta.names[k] for k in order),
                       X=[X[k] for k in order], y=[y[k] for k in order], notices=notices)


# a file (or a run's summary) of more tasks than INFO_ALL lists its first and last INFO_EDGES
INFO_ALL, INFO_EDGES = 100, 5


def info(path, *, edges: int | None = None) -> dict:
    """The paper's Table 1 row of a task-stream file, plus per-task figures (reads labels only).

    Parameters
    ----------
    edges : int, optional
        For a file of more than :data:`INFO_ALL` tasks, list only the first and the last
        ``edges`` tasks in ``per_task`` (``per_task_omitted`` counts the others). By default
        every task is listed.

    Returns
    -------
    dict
        ``path``, ``tasks``, ``dims``, ``total``, ``max``, ``min``, ``median`` and ``mean``
        (stream lengths), ``positive_ratio`` (the mean over tasks of the fraction of +1
        labels), ``per_task`` (``index``, ``name``, ``samples``, ``positive_ratio``),
        ``per_task_omitted``, ``format_version``, ``source``, ``description``, ``storage``
        ("dense" or "sparse"), ``density`` (the fraction of the N x d features stored: 1 for
        dense storage) and ``nnz`` (the features stored).

    Raises
    ------
    DataError
        For a file that is not a valid task-stream file, or whose labels cannot be read
        (naming the task).
    """
    meta = read_meta(path)
    lengths = meta.lengths
    with _open(meta.path) as f:
        if meta.version >= 2:
            _check_declared(meta.path, "/y", int(meta.offsets[-1]) * f["y"].dtype.itemsize)
            y = _read_rows(f, "y", 0, int(meta.offsets[-1]), meta)
            positives = np.add.reduceat((y == 1).view(np.int8), meta.offsets[:-1], dtype=np.int64)
            ratios = positives / lengths
            if meta.sparse:         # the row counts it prints, checked as a run checks them
                _check_declared(meta.path, "/X/indptr", 8 * (int(meta.offsets[-1]) + 1))
                _row_pointers(f["X"], 0, int(meta.offsets[-1]), meta)
        else:
            ratios = np.empty(meta.n_tasks)
            for k, name in enumerate(meta.names):
                y = _read_values(f["tasks"][f"{k:04d}"], "y", f"{meta.path}: {_label(k, name)}")
                ratios[k] = float(np.mean(y == 1)) if len(y) else 0.0
    K = meta.n_tasks
    shown = range(K)
    if edges is not None and K > INFO_ALL and K > 2 * edges:
        shown = [*range(edges), *range(K - edges, K)]
    per_task = [{"index": k, "name": meta.names[k], "samples": int(lengths[k]),
                 "positive_ratio": float(ratios[k])} for k in shown]
    return {
        "path": meta.path, "tasks": K, "dims": meta.dim, "total": int(lengths.sum()),
        "max": int(lengths.max()), "min": int(lengths.min()),
        "median": float(np.median(lengths)), "mean": float(lengths.mean()),
        "positive_ratio": float(np.mean(ratios)),
        "per_task": per_task, "per_task_omitted": K - len(per_task),
        "format_version": meta.version, "source": meta.source, "description": meta.description,
        "storage": "sparse" if meta.sparse else "dense", "density": meta.density,
        "nnz": meta.nnz if meta.sparse else int(lengths.sum()) * meta.dim,
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
