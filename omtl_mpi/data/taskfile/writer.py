"""Writing task-stream files: chunk by chunk (:class:`TaskFileWriter`) or from one list of tasks
(:func:`write_tasks`), validated first and renamed into place only when complete."""
from __future__ import annotations

import sys
from collections import Counter
from contextlib import ExitStack

import h5py
import numpy as np

from ...atomic import atomic_path
from ...errors import DataError
from ...metrics import offsets_of
from .schema import (CHUNK_BYTES, FORMAT, SHOWN, SPARSE_MAX_DIM, SPARSE_VERSION, VERSION,
                     _check_block, _is_csr, _label, _more, _shape_problems, check_values)


def _chunk_rows(width: int, itemsize: int, rows: int | None) -> int:
    """Rows per HDF5 chunk of ``width`` values a row: about CHUNK_BYTES, fewer in a small file."""
    target = max(1, CHUNK_BYTES // max(1, width * itemsize))
    return max(1, min(target, int(rows))) if rows else target


class TaskFileWriter:
    """Write a task-stream file (version 2) chunk by chunk, atomically: a context manager.

    Every :meth:`add` appends whole tasks as flat arrays, validated as :func:`write_tasks`
    validates; the file appears under ``path`` only when the ``with`` block ends without an
    exception. It holds about one chunk in memory (docs/DATASETS.md, *The task-file format*,
    shows it in use).

    Parameters
    ----------
    path : str or path
    source, description : str
        The file's ``source`` and ``description`` attributes.
    rows : int, optional
        The number of instances the file will hold, where known (a small file gets smaller chunks).
    sparse : bool, optional
        Store the features as compressed sparse rows (version 3) or dense (version 2); by default
        as the first chunk comes. Later chunks of the other form are converted.

    Raises
    ------
    DataError
        From :meth:`add`, every problem of the chunk; on leaving the block, when no task was added.
    """

    def __init__(self, path, *, source: str = "", description: str = "", rows: int | None = None,
                 sparse: bool | None = None):
        self.path = str(path)
        self.source, self.description, self.rows = str(source), str(description), rows
        self.sparse, self._stack = sparse, None
        # _csr: a sparse /X's datasets (data, indices, indptr)
        self._file = self._X = self._y = self._csr = self._dim = None
        self._nnz = self._max_row_nnz = 0
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
            self._file.attrs.update(format=FORMAT, format_version=VERSION, source=self.source,
                                    description=self.description)
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
            Every problem of this chunk; the file is then not written.
        """
        chunk, problems = self._checked(names, X, y, lengths)
        if problems:
            raise DataError("\n".join(problems))
        self._append(*chunk)

    def _checked(self, names, X, y, lengths):
        """((UTF-8 names, X float64, labels, lengths), []) if valid, else (None, the problems)."""
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
        offsets = offsets_of(lengths)
        labels, problems, _ = _check_block(path, lambda i: _label(k0 + i, names[i]), X, y, offsets)
        if problems:
            return None, problems
        if self.sparse is None:
            self.sparse = _is_csr(X)
        self._dim = X.shape[1]
        if self.sparse:
            from ..sparse import csr_arrays
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
            g, width = self._file.create_group("X"), _chunk_rows(1, 8, None)
            self._csr = {name: g.create_dataset(name, shape=(0,), maxshape=(None,), dtype=dtype,
                                                chunks=(width,))
                         for name, dtype in (("data", np.float64), ("indices", np.int32))}
            self._csr["indptr"] = g.create_dataset("indptr", data=np.zeros(1, dtype=np.int64),
                                                   maxshape=(None,), chunks=(width,))
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
        a, b = self._written, self._written + len(labels)
        if self._y is None:
            if not self.sparse:
                self._dim = X.shape[1]
                self._X = self._file.create_dataset(
                    "X", shape=(0, self._dim), maxshape=(None, self._dim), dtype=np.float64,
                    chunks=(_chunk_rows(self._dim, 8, self.rows), self._dim))
            self._y = self._file.create_dataset("y", shape=(0,), maxshape=(None,), dtype=np.int8,
                                                chunks=(_chunk_rows(1, 1, self.rows),))
        if self.sparse:
            self._append_sparse(X, b - a)
        if b > a:
            if not self.sparse:
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
            f["X"].attrs.update(shape=np.array([self._written, self._dim], dtype=np.int64),
                                max_row_nnz=np.int64(self._max_row_nnz))
        f.create_dataset("offsets", data=offsets_of(np.concatenate(self._lengths)))
        sizes = np.fromiter(map(len, self._encoded), dtype=np.int64, count=len(self._encoded))
        f.create_dataset("names", data=np.frombuffer(b"".join(self._encoded), dtype=np.uint8))
        f.create_dataset("name_offsets", data=offsets_of(sizes))


def block_spans(lengths, most: int) -> list:
    """Consecutive tasks of stream ``lengths`` as spans (a, b) of tasks a..b-1 that hold at most
    ``most`` instances together (one task may hold more): how writers and generators cut blocks."""
    offsets = offsets_of(np.asarray(lengths, dtype=np.int64))
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
    """Validate and write a task-stream file atomically (temporary name, then rename): sparse
    (version 3) when ``sparse`` is True, or when None and any task's features are a scipy.sparse
    matrix, else dense (version 2).

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
        stored = max(int(X.nnz) if _is_csr(X) else int(X.size) for X in X_list)
        per_row = max(1, stored // max(1, max(lengths)))
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


def _stack(parts):
    """Consecutive tasks' features as one matrix: sparse if any of them is."""
    if any(_is_csr(X) for X in parts):
        from scipy.sparse import csr_matrix, vstack
        return vstack([X if _is_csr(X) else csr_matrix(X) for X in parts], format="csr")
    return np.concatenate(parts, axis=0)
