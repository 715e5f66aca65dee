"""A caller's inputs as the learner sees them: checked (one UserError a mistake, nothing
changed), features scaled online and the intercept appended, dense and sparse, one instance, a
round or a batch of instances of any tasks."""
from __future__ import annotations

import numbers
import reprlib
import warnings

import numpy as np

from ..errors import UserError

# what numpy raises for a value that is no array of numbers (ragged, text, too large, ...)
_NOT_NUMBERS = (TypeError, ValueError, OverflowError)


def as_array(value, what: str, dtype=None) -> np.ndarray:
    """A caller's value as a numpy array (a copy with ``dtype``, from booleans, integers or
    real numbers only: complex numbers, dates and text are refused, not cast), or one
    UserError saying what ``what`` should be."""
    try:
        a = np.asarray(value)
        if dtype is not None:
            if a.dtype.kind not in "biuf":
                raise TypeError(a.dtype)
            # a longdouble beyond float64 becomes inf here, which the checks after refuse in
            # one line: numpy's overflow warning would be a second
            with np.errstate(over="ignore", invalid="ignore"):
                a = np.array(a, dtype=dtype)
        return a
    except _NOT_NUMBERS:
        raise UserError(f"{what}") from None


def _encodes(text: str) -> bool:
    """Whether UTF-8 can write ``text`` (a lone surrogate it cannot)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _is_number(value) -> bool:
    """What a dict feature's value must be: a real number that a float can hold."""
    if not isinstance(value, numbers.Real):
        return False
    try:
        float(value)
    except _NOT_NUMBERS:
        return False
    return True


def _sparse_rows(X):
    """A scipy.sparse matrix as (a CSR copy with its columns sorted and repeats summed,
    indices, values); a matrix whose values are not numbers is one UserError."""
    if X.dtype.kind not in "fiub":
        raise UserError(f"a sparse X holds numbers, got dtype {X.dtype}")
    from ..data.sparse import csr_arrays, csr_matrix
    data, indices, indptr, shape = csr_arrays(X)
    return csr_matrix(data, indices, indptr, shape), indices, data


class Inputs:
    """The learner's input methods (mixed into :class:`~omtl_mpi.learners.Learner`)."""

    def _task(self, x, task):
        if task is not None and self.task_key is not None and isinstance(x, dict) \
                and self.task_key in x and x[self.task_key] != task:
            raise UserError(f"task={task!r} but x[{self.task_key!r}] is {x[self.task_key]!r}: "
                            "give the task once")
        if task is None:
            if self.task_key is None or not isinstance(x, dict):
                raise UserError("which task? give task=k (0..n_tasks-1), or build the learner "
                                "with task_key= and pass x as a dict holding the task")
            if self.task_key not in x:
                if self.default_task is None:
                    raise UserError(f"x has no {self.task_key!r} (the learner's task_key), and "
                                    "default_task is None: every instance must say its task")
                if not self._defaulted:         # said once: a misspelt task_key is not silent
                    self._defaulted = True
                    warnings.warn(f"x has no {self.task_key!r} (the learner's task_key): such "
                                  f"an x is of task {self.default_task} (default_task); give "
                                  "default_task=None to make it an error", UserWarning,
                                  stacklevel=3)
                return self.default_task
            task = x[self.task_key]
        if isinstance(task, (bool, np.bool_)) or not isinstance(task, (int, np.integer)) \
                or not 0 <= task < self.n_tasks:
            raise UserError(f"task must be an integer from 0 to {self.n_tasks - 1}, got {task!r}")
        return int(task)

    def _entries(self, x):
        """One sparse instance's (columns, values) of its non-zero features, checked: a dict
        of feature -> value hashed into n_features as the text importer hashes n-grams, or a
        scipy.sparse row (1, n_features). No dense row is made."""
        if isinstance(x, dict):
            from ..data.featurise import hash_entries
            items = {k: v for k, v in x.items() if k != self.task_key}
            try:
                cols, values = hash_entries(items, self.n_features)
            except UnicodeEncodeError:
                bad = next(k for k in items if not _encodes(str(k)))
                raise UserError(f"a dict x's feature names are hashed as UTF-8 text, and "
                                f"{reprlib.repr(bad)} is not text that UTF-8 can write (a lone "
                                "surrogate)") from None
            except _NOT_NUMBERS:
                bad = next(k for k, value in items.items() if not _is_number(value))
                raise UserError(f"a dict x maps feature names to numbers; "
                                f"x[{reprlib.repr(bad)}] is {reprlib.repr(items[bad])}, not a "
                                "number") from None
        else:
            if x.ndim != 2 or x.shape != (1, self.n_features):
                raise UserError(f"a sparse x must have shape (1, {self.n_features}) (one row of "
                                f"n_features), got {x.shape}")
            cols, values = _sparse_rows(x)[1:3]
        if not np.isfinite(values).all():
            raise UserError("x holds NaN or inf; every feature must be a finite number")
        return cols, values

    def _label(self, y) -> float:
        if isinstance(y, (bool, np.bool_)):
            return 1.0 if y else -1.0
        if isinstance(y, (int, float, np.integer, np.floating)) and y in (-1, 1):
            return float(y)
        raise UserError(f"a label is -1 or +1 (or a bool), got {y!r}")

    def _labels(self, y, shape) -> np.ndarray:
        a = as_array(y, f"y must be an array of labels of shape {shape}")
        if a.shape != shape:
            raise UserError(f"y must have shape {shape}, got {a.shape}")
        if a.dtype == bool:
            return np.where(a, 1.0, -1.0)
        if a.dtype.kind not in "iuf":
            raise UserError(f"labels are -1 or +1 (or bools), got an array of {a.dtype}")
        return a.astype(np.float64)

    def _prepared_sparse(self, indptr, cols, values, tasks: np.ndarray, update: bool):
        """CSR rows (``indptr``, ``cols``, ``values``), one instance of each of ``tasks``, as the
        learner sees them (:class:`SparseRows` (1, n, d')): as :meth:`_prepared` does dense
        ones."""
        from ..data.sparse import SparseRows, online_scale_csr
        n = len(tasks)
        values = np.array(values, dtype=np.float64)
        if self._scale_max is not None and len(values):
            # the data layer's online scaling (omtl-mpi run --scale online), from the maxima
            # of the calls before
            scaled = online_scale_csr(values, cols, indptr, np.ones(n, np.int64),
                                      start=self._scale_max[tasks])
            if update:      # one row a task: its (task, column) pairs are distinct
                task = np.repeat(tasks, np.diff(indptr))
                self._scale_max[task, cols] = np.maximum(self._scale_max[task, cols],
                                                         np.abs(values))
            values = scaled
        if self.intercept:
            where = np.asarray(indptr[1:]) + np.arange(n)        # each row's end, shifted
            cols = np.insert(np.asarray(cols, dtype=np.int64), indptr[1:], self.n_features)
            values = np.insert(values, indptr[1:], 1.0)
            indptr = np.concatenate(([0], where + 1))
        return SparseRows(values, np.asarray(cols, dtype=np.int32), np.asarray(indptr, dtype=np.int64),
                          (1, n, self._dim))

    def _prepared(self, X: np.ndarray, active, tasks: np.ndarray,
                  update: bool) -> np.ndarray:
        """Features as the learner sees them, (B, n, d'), of ``X`` (n, B, d), instances of
        ``tasks``: scaled online (the running maximum updated only when ``update``), the
        intercept appended, inactive instances all zero (as ``omtl-mpi run`` pads a short
        mini-batch); ``active`` (n, B) booleans, or None when every instance is."""
        n, B, d = X.shape
        if active is not None:
            X = np.where(active[:, :, None], X, 0.0)
        if self._scale_max is not None:
            # instance t of a task is scaled by the largest |value| of its stream up to t, as
            # omtl-mpi run --scale online scales (data/features.py), from the calls before
            from ..data.features import online_scale
            before = self._scale_max[tasks]
            if update:
                self._scale_max[tasks] = np.maximum(before, np.abs(X).max(axis=1))
            X = online_scale(X, axis=1, start=before[:, None])
        out = np.zeros((B, n, self._dim))
        out[:, :, :d] = X.transpose(1, 0, 2)
        if self.intercept:
            out[:, :, d] = 1.0 if active is None else active.T
        return out

    def _round_inputs(self, X, y, active):
        """Checked copies of a round's inputs: X (K, B, d), y (K, B) floats, active (K, B)."""
        K, d = self.n_tasks, self.n_features
        Xa = as_array(X, "X must be an array of numbers of shape (n_tasks, B, n_features)", np.float64)
        if Xa.ndim != 3 or Xa.shape[0] != K or Xa.shape[2] != d or Xa.shape[1] < 1:
            raise UserError(f"X must have shape (n_tasks, B, n_features) = ({K}, B, {d}) with B >= 1, "
                            f"got {Xa.shape}")
        B = Xa.shape[1]
        if active is None:
            act = np.ones((K, B), dtype=bool)
        else:
            act = as_array(active, f"active must be booleans of shape ({K},) or ({K}, {B})")
            if act.dtype != bool or act.shape not in ((K,), (K, B)):
                raise UserError(f"active must be booleans of shape ({K},) or ({K}, {B}), got "
                                f"{act.dtype} of shape {act.shape}")
            act = np.broadcast_to(act[:, None] if act.ndim == 1 else act, (K, B))
        if not np.isfinite(Xa[act]).all():
            raise UserError("X holds NaN or inf in an active instance; every feature must be finite")
        ya = None
        if y is not None:
            ya = self._labels(y, (K, B))
            bad = act & (ya != 1.0) & (ya != -1.0)
            if bad.any():
                k, b = np.argwhere(bad)[0]
                raise UserError(f"labels are -1 or +1 (or bools): y[{k}, {b}] is {ya[k, b]:g}")
            ya = np.where(act, ya, 0.0)
        return Xa, ya, act

    def _one(self, x, task, update: bool, known: bool = False):
        """Task k and its one instance, prepared (1, 1, d'): the round holds only task k (a
        dict or a scipy.sparse row as sparse rows, whose non-zero features alone are read);
        ``known``: ``task`` is the checked task of ``x`` already."""
        k = task if known else self._task(x, task)
        if isinstance(x, dict) or hasattr(x, "tocsr"):
            cols, values = self._entries(x)
            return k, self._prepared_sparse(np.array([0, len(cols)]), cols, values,
                                            np.array([k]), update)
        v = as_array(x, f"x must be a 1-D array of {self.n_features} numbers or a dict of "
                        "feature -> number", np.float64)
        if v.shape != (self.n_features,):
            raise UserError(f"x must have shape ({self.n_features},) (n_features), got {v.shape}")
        if not np.isfinite(v).all():
            raise UserError("x holds NaN or inf; every feature must be a finite number")
        return k, self._prepared(v[None, None], None, np.array([k]), update)

    def _batch(self, X, tasks, y=None):
        """Checked inputs of partial_fit/predict: X (n, d) (an array, or a scipy.sparse matrix
        kept sparse), tasks (n,), y (n,) or None; and the round of each instance (its rank
        among the instances of its task)."""
        Xa = (_sparse_rows(X)[0] if hasattr(X, "tocsr") else
              as_array(X, "X must be an array of numbers of shape (n, n_features)", np.float64))
        if Xa.ndim != 2 or Xa.shape[1] != self.n_features:
            raise UserError(f"X must have shape (n, {self.n_features}) (n_features columns), got "
                            f"{Xa.shape}")
        n = Xa.shape[0]
        if tasks is None:
            raise UserError("give tasks=, the task (0..n_tasks-1) of every row of X")
        if isinstance(tasks, (int, np.integer)) and not isinstance(tasks, (bool, np.bool_)):
            tasks = np.full(n, tasks)           # every row of one task
        t = as_array(tasks, f"tasks must be {n} integers (one per row of X)")
        if t.shape != (n,) or (n and t.dtype.kind not in "iu"):
            raise UserError(f"tasks must be {n} integers (one per row of X), got {t.dtype} of "
                            f"shape {t.shape}")
        if n and (t.min() < 0 or t.max() >= self.n_tasks):
            raise UserError(f"tasks must lie in 0..{self.n_tasks - 1}, got {int(t.min())}..{int(t.max())}")
        if not np.isfinite(Xa.data if hasattr(Xa, "tocsr") else Xa).all():
            raise UserError("X holds NaN or inf; every feature must be a finite number")
        ya = None
        if y is not None:
            ya = self._labels(y, (n,))
            if not np.isin(ya, (-1.0, 1.0)).all():
                raise UserError("labels are -1 or +1 (or bools); y holds "
                                f"{ya[~np.isin(ya, (-1.0, 1.0))][0]:g}")
        t = t.astype(np.int64)
        order = np.argsort(t, kind="stable")
        counts = np.bincount(t, minlength=self.n_tasks)
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n) - starts[t[order]]
        return Xa, t, ya, rank

    def _by_round(self, Xa, t, rank):
        """Yield, round by round, the rows of X in it in task order, their tasks, X of the
        round (n, 1, d) and active (n, 1): only the tasks with an instance in the round."""
        order = np.lexsort((t, rank))                      # by round, then by task
        bounds = np.searchsorted(rank[order], np.arange(int(rank.max()) + 2 if len(rank) else 1))
        for j in range(len(bounds) - 1):
            rows = order[bounds[j]:bounds[j + 1]]
            yield rows, t[rows], Xa[rows] if hasattr(Xa, "tocsr") else Xa[rows][:, None], \
                np.ones((len(rows), 1), dtype=bool)

    def _round_prepared(self, Xr, act, tr, update: bool):
        """A round of :meth:`_by_round`, prepared: dense (B, n, d'), or sparse rows."""
        if hasattr(Xr, "tocsr"):
            return self._prepared_sparse(Xr.indptr, Xr.indices, Xr.data, tr, update)
        return self._prepared(Xr, act, tr, update=update)

