"""Loading the tasks a process holds (:func:`load_tasks`, :func:`load_block`): only their rows
are read, their values validated, a damaged chunk one line naming the first task it holds."""
from __future__ import annotations

import numpy as np

from ...errors import DataError
from ...metrics import offsets_of
from ..footprint import check_fits
from .hdf5 import H5_ERRORS, _open, _read_values, reason
from .schema import FlatStreams, TaskMeta, TaskStreams, _check_block, _label, check_values


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
    check_fits(meta, indices)
    X_list, y_list, problems, notices = [], [], [], []
    with _open(meta.path) as f:
        if meta.version >= 2:           # each run of consecutive tasks asked for is one block
            X, y, wanted = {}, {}, np.unique(indices)
            for run in np.split(wanted, np.flatnonzero(np.diff(wanted) != 1) + 1):
                flat, found = _block_v2(f, meta, int(run[0]), int(run[-1]) + 1)
                problems += found
                notices += flat.notices
                if not found:
                    part = flat.split()
                    X.update(zip(run.tolist(), part.X))
                    y.update(zip(run.tolist(), part.y))
            if not problems:
                X_list, y_list = [X[k] for k in indices.tolist()], [y[k] for k in indices.tolist()]
        for k in indices.tolist() if meta.version < 2 else ():
            g = f["tasks"][f"{k:04d}"]
            where = f"{meta.path}: {_label(k, meta.names[k])}"
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
    """Read and validate the tasks ``start..stop-1`` as flat arrays (a process's own block): of
    a version 2 file one slice of /X and one of /y, validated without a Python loop over the tasks.

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
    check_fits(meta, range(start, stop))
    if meta.version < 2:
        got = load_tasks(meta, range(start, stop))
        lengths = np.array([len(y) for y in got.y], dtype=np.int64)
        return FlatStreams(start=start, stop=stop, names=got.names, X=np.concatenate(got.X),
                           y=np.concatenate(got.y), offsets=offsets_of(lengths), notices=got.notices)
    with _open(meta.path) as f:
        flat, problems = _block_v2(f, meta, start, stop)
    if problems:
        raise DataError("\n".join(problems))
    return flat


def _block_v2(f, meta: TaskMeta, start: int, stop: int) -> tuple[FlatStreams, list]:
    """Tasks start..stop-1 of the open version 2 file ``f``, and the problems of their values."""
    lo, hi = int(meta.offsets[start]), int(meta.offsets[stop])
    X = (_read_sparse_rows(f, lo, hi, meta) if meta.sparse
         else np.ascontiguousarray(_read_rows(f, "X", lo, hi, meta), dtype=np.float64))
    y = _read_rows(f, "y", lo, hi, meta)
    offsets = meta.offsets[start:stop + 1] - lo
    names = meta.names[start:stop]
    labels, problems, notices = _check_block(meta.path, lambda i: _label(start + i, names[i]),
                                             X, y, offsets)
    return FlatStreams(start=start, stop=stop, names=names, X=X, y=labels, offsets=offsets,
                       notices=notices), problems


def _row_pointers(g, lo: int, hi: int, meta: TaskMeta) -> np.ndarray:
    """The row pointers of rows lo..hi-1 of the sparse /X ``g``, checked: increasing within the
    entries, no row above max_row_nnz (which sizes a run's rounds and messages)."""
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
    """Rows lo..hi-1 of a sparse /X as a scipy.sparse CSR matrix, structure checked (columns in
    0..d-1, increasing within a row): a damaged file is one line naming the first task concerned."""
    from ..sparse import csr_matrix
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
    """Rows lo..hi-1 of the dataset ``name``; unreadable, one line naming the first task concerned
    (``entries``: (first row, row pointers) placing a sparse /X's entries)."""
    ds = f[name]
    try:
        return ds[lo:hi]
    except H5_ERRORS as exc:
        step, row = (ds.chunks[0] if ds.chunks else max(1, hi - lo)), lo
        for a in [lo, *range((lo // step + 1) * step, hi, step)]:     # the first bad chunk's
            try:
                ds[a:min(hi, (a // step + 1) * step)]
            except H5_ERRORS:
                row = a
                break
        if entries is not None:
            first, indptr = entries
            row = first + int(np.searchsorted(indptr, row, side="right")) - 1
        k = int(np.searchsorted(meta.offsets, row, side="right")) - 1
        raise DataError(f"{meta.path}: {_label(k, meta.names[k])}: cannot read {name} "
                        f"({reason(exc)}); the file is damaged: import or copy it again") from None
