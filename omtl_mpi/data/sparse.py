"""Sparse instances: a round's rows that hold only their non-zero features, and the
compressed-sparse-row (CSR) arrays task files and importers keep them in.

Sparse data sets are stored as CSR, held in memory as :mod:`scipy.sparse` matrices, and handed
to the learners a round at a time as :class:`SparseRows`, whose every operation costs
O(non-zeros), never O(d) (docs/DESIGN.md, *Sparse rows*). scipy is imported only where a
scipy.sparse matrix is made or read."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# the index dtype of the columns (d < 2^31 everywhere: the task files refuse larger)
INDEX = np.int32


@dataclass(frozen=True)
class RowFormat:
    """At most ``nonzeros`` non-zero features an instance (the intercept's included), ``batch``
    instances per task per round: what C-ADMM with ``--coordinates nonzero`` sizes messages by."""

    nonzeros: int
    batch: int = 1

    def pairs(self, n_tasks: int, dim: int) -> int:
        """The most (task, coordinate) pairs the rounds of ``n_tasks`` tasks touch."""
        return n_tasks * min(dim, self.nonzeros * self.batch)


class SparseRows:
    """The instances of one round, (B, na, d), as compressed sparse rows.

    Row ``r = b * na + i`` is instance b of active task i (as a C-ordered (B, na, d) array lays
    them out); a row of padding has no entry; columns within a row increase and do not repeat.

    Parameters
    ----------
    data : ndarray (nnz,) float64
    indices : ndarray (nnz,) int
    indptr : ndarray (B * na + 1,) int64, starting at 0
    shape : (B, na, d)

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[[0.0, 2.0, 0.0], [1.0, 0.0, 3.0]]])      # B = 1, two tasks, d = 3
    >>> rows = SparseRows.from_dense(X)
    >>> rows.nnz, rows.margins(np.ones((2, 3))).tolist(), np.array_equal(rows.dense(), X)
    (3, [[2.0, 4.0]], True)
    """

    ndim = 3
    __slots__ = ("data", "indices", "indptr", "shape", "_row", "_task")

    def __init__(self, data, indices, indptr, shape):
        self.data, self.indices, self.indptr = data, indices, indptr
        self.shape = tuple(int(s) for s in shape)
        self._row = self._task = None

    @classmethod
    def from_dense(cls, X: np.ndarray) -> "SparseRows":
        """The non-zero entries of a dense (B, na, d) array."""
        B, na, d = X.shape
        flat = X.reshape(B * na, d)
        rows, cols = np.nonzero(flat)
        indptr = np.zeros(B * na + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=B * na), out=indptr[1:])
        return cls(flat[rows, cols], cols.astype(INDEX), indptr, X.shape)

    def __getitem__(self, key) -> "SparseRows":
        """``rows[:, tasks]`` (indices or a slice), as a dense (B, na, d) array is indexed."""
        if not (isinstance(key, tuple) and len(key) == 2 and key[0] == slice(None)):
            raise TypeError("sparse rows are indexed as rows[:, tasks]")
        B, na, d = self.shape
        tasks = np.arange(na)[key[1]]
        rows = (np.arange(B)[:, None] * na + tasks[None, :]).reshape(-1)
        starts, ends = self.indptr[rows], self.indptr[rows + 1]
        counts = ends - starts
        indptr = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        take = np.repeat(starts - indptr[:-1], counts) + np.arange(int(indptr[-1]))
        return SparseRows(self.data[take], self.indices[take], indptr, (B, len(tasks), d))

    @property
    def nnz(self) -> int:
        return int(self.data.shape[0])

    @property
    def n_rows(self) -> int:
        return self.shape[0] * self.shape[1]

    def row_ids(self) -> np.ndarray:
        """The row of every entry (nnz,)."""
        if self._row is None:
            self._row = np.repeat(np.arange(self.n_rows, dtype=np.intp), np.diff(self.indptr))
        return self._row

    def task_ids(self) -> np.ndarray:
        """The active task (0..na-1) of every entry (nnz,)."""
        if self._task is None:
            na = self.shape[1]
            self._task = self.row_ids() if self.shape[0] == 1 else self.row_ids() % na
        return self._task

    def row_tasks(self) -> np.ndarray:
        """The active task (0..na-1) of every row (n_rows,)."""
        return np.tile(np.arange(self.shape[1], dtype=np.intp), self.shape[0])

    def _per_row(self, values: np.ndarray) -> np.ndarray:
        """(B, na) sums of ``values`` (one per entry) by row."""
        return np.bincount(self.row_ids(), weights=values,
                           minlength=self.n_rows).reshape(self.shape[:2])

    def row_sums(self, values: np.ndarray) -> np.ndarray:
        """Sums by row of ``values`` (nnz, ...), one per entry along axis 0: (n_rows, ...)."""
        out = np.zeros((self.n_rows,) + values.shape[1:])
        if self.nnz:
            # a row's sum runs to the next row with entries (the empty ones between add nothing)
            filled = np.diff(self.indptr) > 0
            out[filled] = np.add.reduceat(values, self.indptr[:-1][filled], axis=0)
        return out

    def dense(self) -> np.ndarray:
        """The same instances as a dense (B, na, d) array (for a learner with dense math)."""
        out = np.zeros((self.n_rows, self.shape[2]))
        out[self.row_ids(), self.indices] = self.data
        return out.reshape(self.shape)

    def sq_norms(self) -> np.ndarray:
        """|x|^2 of every instance, (B, na)."""
        return self._per_row(self.data * self.data)

    def dot(self, v: np.ndarray) -> np.ndarray:
        """``x . v`` for every instance, (B, na), of one vector v (d,)."""
        return self._per_row(self.data * v[self.indices])

    def margins(self, W: np.ndarray, rows=None) -> np.ndarray:
        """``w_i . x`` of every instance of task i, (B, na), for W (na, d); with ``rows`` (na,), W
        holds a block's every task and task i is row ``rows[i]`` (no row is copied)."""
        tasks = self.task_ids() if rows is None else rows[self.task_ids()]
        return self._per_row(self.data * W[tasks, self.indices])

    def combine(self, coef: np.ndarray) -> np.ndarray:
        """``sum_b coef[b, i] x_(b, i)`` for every active task i, as a dense (na, d) array."""
        out = np.zeros((self.shape[1], self.shape[2]))
        self.add_to(out, coef)
        return out

    def add_to(self, W: np.ndarray, coef: np.ndarray, scale=None) -> None:
        """``W[i] += scale[i] * sum_b coef[b, i] x_(b, i)`` in place, at the entries only."""
        values = self.data * coef.reshape(-1)[self.row_ids()]
        if scale is not None:
            values *= scale[self.task_ids()]
        if self.shape[0] == 1:          # one row per task: no (task, column) repeats
            W[self.task_ids(), self.indices] += values
        else:
            np.add.at(W, (self.task_ids(), self.indices), values)

    def pairs(self):
        """The (task, column) pairs the round's instances touch, each once.

        Returns
        -------
        tasks, cols : ndarray (m,)
            The pairs, by task then column.
        inverse : ndarray (nnz,) or None
            The pair of every entry (None with B = 1, where the entries are the pairs).
        """
        if self.shape[0] == 1:
            return self.task_ids(), self.indices, None
        d = self.shape[2]
        key = self.task_ids().astype(np.int64) * d + self.indices
        unique, inverse = np.unique(key, return_inverse=True)
        return (unique // d).astype(np.intp), (unique % d).astype(INDEX), inverse

    def pair_sums(self, values: np.ndarray, inverse) -> np.ndarray:
        """Per-entry ``values`` summed onto the pairs of :meth:`pairs` (float64, also for a
        round without entries: a block whose tasks have all ended, where numpy's bincount of
        nothing is an int64 array that the gradient's scaling could not write into)."""
        if inverse is None:
            return values
        if not len(inverse):
            return np.zeros(0)
        return np.bincount(inverse, weights=values, minlength=int(inverse.max()) + 1)


def rows_dense(X) -> np.ndarray:
    """A round's instances as a dense (B, na, d) array, whatever their form."""
    return X.dense() if isinstance(X, SparseRows) else X


def csr_arrays(X):
    """(data float64, indices, indptr int64, shape) of a scipy.sparse matrix in canonical CSR form
    (a copy where the caller's is not); :func:`checked_csr`'s UserError."""
    X = checked_csr(X)
    if not X.has_canonical_format or (X.data == 0).any():
        X = X.copy()                     # the caller's matrix stays as it was given
        X.sum_duplicates()
        X.eliminate_zeros()
    return (np.asarray(X.data, dtype=np.float64), np.asarray(X.indices),
            np.asarray(X.indptr, dtype=np.int64), X.shape)


def checked_csr(X):
    """A scipy.sparse matrix as float64 CSR (the caller's, where it is one), its indices checked
    against its shape before anything reads them (scipy does not): a UserError if they don't fit."""
    from ..errors import UserError
    if X.dtype.kind not in "biuf":
        raise UserError(f"a sparse matrix holds numbers, got dtype {X.dtype}")
    try:
        if X.format == "csr":
            X.check_format(full_check=True)
        X = X.astype(np.float64).tocsr()
        X.check_format(full_check=True)
    except ValueError as exc:
        raise UserError(f"a sparse matrix of shape {X.shape} whose stored indices do not fit "
                        f"it ({exc}); build it with indices from 0 to {X.shape[1] - 1}") from None
    return X


def csr_matrix(data, indices, indptr, shape):
    """A scipy.sparse CSR matrix of these arrays (shared, not copied)."""
    from scipy.sparse import csr_matrix as csr
    return csr((data, indices, indptr), shape=shape, copy=False)


def segment_running_max(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """The running maximum of ``values`` in each run of equal ``groups`` (a scan by doubling)."""
    out = values.copy()
    n, shift = len(out), 1
    while shift < n:
        same = groups[shift:] == groups[:-shift]
        np.maximum(out[shift:], np.where(same, out[:-shift], out[shift:]), out=out[shift:])
        shift *= 2
    return out


def online_scale_csr(data, indices, indptr, lengths, start=None) -> np.ndarray:
    """The values ``data`` of consecutive task streams (CSR rows, ``lengths`` a task) scaled as
    :func:`omtl_mpi.data.features.online_scale` scales dense ones; ``start``: the values before."""
    if not len(data):
        return np.array(data, dtype=np.float64)
    rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    if len(lengths) == len(indptr) - 1:     # a row a task (a learner's call): its own values
        task, running = rows, np.abs(data)
    else:
        task = np.repeat(np.arange(len(lengths)), lengths)[rows]
        order = np.lexsort((rows, indices, task))               # by task, column, then row
        key = task[order].astype(np.int64) * (int(indices.max()) + 1) + indices[order]
        running = np.empty(len(data))
        running[order] = segment_running_max(np.abs(data[order]), key)
    if start is not None:
        running = np.maximum(running, start[task, indices])
    return data / running


def margins(W: np.ndarray, X) -> np.ndarray:
    """``w_i . x`` (B, na) of a round's instances, dense or :class:`SparseRows`, for W (na, d)."""
    return X.margins(W) if isinstance(X, SparseRows) else np.einsum("kd,bkd->bk", W, X)


def combine(coef: np.ndarray, X) -> np.ndarray:
    """``sum_b coef[b, i] x_(b, i)`` (na, d) of a round's instances, dense or sparse."""
    return X.combine(coef) if isinstance(X, SparseRows) else np.einsum("bk,bkd->kd", coef, X)
