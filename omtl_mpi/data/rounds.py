"""Task streams laid out round by round, over the tasks active in each round only: round t holds
the next mini-batch of B instances of every task whose stream has not ended (task k's rounds 0
.. ceil(n_k / B) - 1), so memory and the learners' work follow the instances, not K times the
longest stream."""
from __future__ import annotations

import math

import numpy as np

from .sparse import SparseRows

ALL = slice(None)       # every task of the block is active


def rounds_needed(lengths, batch: int) -> int:
    """Number of rounds T of a run: the longest stream divided into mini-batches of ``batch``."""
    return int(math.ceil(int(np.max(lengths)) / batch)) if len(lengths) else 0


def round_instances(lengths, batch: int, rounds: int) -> np.ndarray:
    """Instances of every round over all the tasks (T,): ``S(t B) - S((t + 1) B)`` with ``S(m) =
    sum_k max(0, n_k - m)``, from the sorted lengths."""
    n = np.sort(np.asarray(lengths, dtype=np.int64))
    tail = np.concatenate([np.cumsum(n[::-1])[::-1], [0]])          # tail[i] = sum of n[i:]
    m = np.arange(rounds + 1, dtype=np.int64) * batch
    i = np.searchsorted(n, m, side="right")                         # the first n_k > m
    S = tail[i] - m * (len(n) - i)
    return S[:-1] - S[1:]


class RoundLayout:
    """A block of task streams, round-major, over each round's active tasks: round t has
    ``B * na_t`` slots, its na_t active tasks as a (B, na_t) array (batch position major), tasks in
    increasing order; a slot past the end of a stream has zero features and label 0 (no gradient).

    Parameters
    ----------
    lengths : array of int, shape (kb,)
        The block's stream lengths (every one >= 1).
    batch, dim : int
        Mini-batch size B >= 1; weights per instance (the features, plus the intercept's).
    rounds : int
        Rounds T of the whole run (its longest stream over *all* tasks, the same on every rank).
    sparse : bool
        Hold the features as compressed sparse rows, each round's given as
        :class:`~omtl_mpi.data.sparse.SparseRows`; :meth:`fill` then takes scipy.sparse matrices.

    Attributes
    ----------
    X : ndarray, shape (slots, dim)
        The features (dense layouts; None for sparse ones, whose rows are in ``csr``).
    y : ndarray of float64, shape (slots,)
        Labels -1/+1, 0 for padding (kept as int8: a round's are converted as it is read).
    """

    def __init__(self, lengths, batch: int, rounds: int, dim: int, sparse: bool = False):
        n = np.asarray(lengths, dtype=np.int64)
        kb = len(n)
        self.n_tasks, self.batch, self.rounds, self.dim = kb, batch, rounds, dim
        self.lengths = n
        per_task = -(-n // batch)                               # rounds each task is active
        if kb and int(per_task.max()) > rounds:
            raise ValueError("a stream is longer than the run's rounds")
        ended = np.bincount(per_task, minlength=rounds + 1)[:rounds]
        self.active_counts = kb - np.cumsum(ended)              # na_t, (T,)
        self.round_ptr = np.concatenate(([0], np.cumsum(self.active_counts)))     # in (task, round) pairs
        self.slot_ptr = self.round_ptr * batch
        pairs = int(self.round_ptr[-1])
        index = np.int32 if max(pairs, kb) < 2 ** 31 else np.int64
        # the (task, round) pairs, task-major, and their position sorted round-major (stably)
        self._task_first_pair = np.concatenate(([0], np.cumsum(per_task)))
        pair_round = (np.arange(pairs, dtype=np.int64)
                      - np.repeat(self._task_first_pair[:-1], per_task)).astype(index)
        order = np.argsort(pair_round, kind="stable")
        del pair_round
        self.active = np.repeat(np.arange(kb, dtype=index), per_task)[order]
        self._pair_position = np.empty(pairs, dtype=index)
        self._pair_position[order] = np.arange(pairs, dtype=index)
        del order
        if batch > 1:
            remaining = n[self.active] - batch * np.repeat(np.arange(rounds, dtype=np.int64),
                                                           self.active_counts)
            self.inv_count = 1.0 / np.minimum(remaining, batch)
        else:
            self.inv_count = None                               # every count is 1
        self._ones = np.ones(kb)
        slots = pairs * batch
        self.sparse = sparse
        self.X = None if sparse else np.zeros((slots, dim))
        self.csr = None                 # (data, indices, indptr) of every slot, once laid out
        self._pieces, self._column = [], None
        self._y = np.zeros(slots, dtype=np.int8)

    @property
    def y(self) -> np.ndarray:
        """Every slot's label, float64 (-1/+1, 0 for padding)."""
        return self._y.astype(np.float64)

    @property
    def n_slots(self) -> int:
        return int(self.slot_ptr[-1])

    def __len__(self) -> int:
        return self.rounds

    def slots_of(self, first: int, lengths) -> np.ndarray:
        """The slot of every instance of tasks ``first, first + 1, ...`` (``lengths``), in order."""
        lengths = np.asarray(lengths, dtype=np.int64)
        B = self.batch
        k = np.repeat(np.arange(first, first + len(lengths), dtype=np.int64), lengths)
        j = np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(
            np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
        r, b = np.divmod(j, B)
        position = self._pair_position[self._task_first_pair[k] + r]
        return self.slot_ptr[r] + b * self.active_counts[r] + (position - self.round_ptr[r])

    def fill(self, first: int, X: np.ndarray, y: np.ndarray, lengths) -> None:
        """Write the streams of tasks ``first, first + 1, ...`` in the order they are presented
        (X (n, d'), y (n,); d' <= dim: the intercept's column is written by :meth:`set_column`)."""
        dest = self.slots_of(first, lengths)
        if self.sparse:
            from .sparse import csr_arrays
            if not hasattr(X, "tocsr"):         # a dense part of sparse streams
                from scipy.sparse import csr_matrix
                X = csr_matrix(X)
            data, indices, indptr, _ = csr_arrays(X)
            self._pieces.append((dest, data, indices.astype(np.int32, copy=False), indptr))
        else:
            self.X[dest, : X.shape[1]] = X
        self._y[dest] = y

    def set_column(self, column: int, value: float) -> None:
        """Set one column of every real slot to ``value`` (sparse rows: an entry appended)."""
        if self.sparse:
            self._column = (column, value)
            return
        self.X[self._y != 0, column] = value

    def _lay_out(self) -> None:
        """Sparse rows: put the rows :meth:`fill` took in their slots, once."""
        slots = self.n_slots
        counts = np.zeros(slots, dtype=np.int64)
        for dest, _, _, indptr in self._pieces:
            counts[dest] = np.diff(indptr)
        real = np.flatnonzero(self._y != 0) if self._column is not None else None
        if real is not None:
            counts[real] += 1
        indptr = np.zeros(slots + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        data = np.empty(int(indptr[-1]))
        indices = np.empty(int(indptr[-1]), dtype=np.int32)
        for dest, values, cols, rows in self._pieces:
            sizes = np.diff(rows)
            where = np.repeat(indptr[dest] - rows[:-1], sizes) + np.arange(len(values))
            data[where] = values
            indices[where] = cols
        if real is not None:
            data[indptr[real + 1] - 1] = self._column[1]
            indices[indptr[real + 1] - 1] = self._column[0]
        self._pieces = []
        self.csr = (data, indices, indptr)

    def __getitem__(self, t: int):
        """Round t: X (B, na, d), y (B, na), inv_count (na,), active tasks (``ALL`` or indices)."""
        a, b = int(self.round_ptr[t]), int(self.round_ptr[t + 1])
        na, B = b - a, self.batch
        s0 = a * B
        if self.sparse:
            if self.csr is None:
                self._lay_out()
            data, indices, indptr = self.csr
            ptr = indptr[s0: s0 + na * B + 1]
            p0, p1 = int(ptr[0]), int(ptr[-1])
            X = SparseRows(data[p0:p1], indices[p0:p1], ptr - p0, (B, na, self.dim))
        else:
            X = self.X[s0: s0 + na * B].reshape(B, na, self.dim)
        y = self._y[s0: s0 + na * B].reshape(B, na).astype(np.float64)
        active = ALL if na == self.n_tasks else self.active[a:b]
        return X, y, self._ones[:na] if self.inv_count is None else self.inv_count[a:b], active

    def labels(self, order: np.ndarray) -> np.ndarray:
        """The labels (int8) of the slots ``order``."""
        return self._y[order]

    def task_order(self) -> np.ndarray:
        """Every real slot, task by task in stream order (``values[task_order()]``: task-major)."""
        return self.slots_of(0, self.lengths)
