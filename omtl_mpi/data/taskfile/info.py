"""What a task file holds (:func:`info`, the paper's Table 1 row) and its digest."""
from __future__ import annotations

import functools
import hashlib
import os

import numpy as np

from ...errors import DataError, UserError
from ...paths import regular_file
from ..footprint import check_declared
from .hdf5 import _open, _read_values
from .meta import read_meta
from .reader import _read_rows, _row_pointers
from .schema import _label


# a file (or a run's summary) of more tasks than INFO_ALL lists its first and last INFO_EDGES
INFO_ALL, INFO_EDGES = 100, 5


def info(path, *, edges: int | None = None) -> dict:
    """The paper's Table 1 row of a task-stream file, plus per-task figures (reads labels only).

    Parameters
    ----------
    edges : int, optional
        For a file of more than :data:`INFO_ALL` tasks, list only the first and the last
        ``edges`` tasks in ``per_task`` (``per_task_omitted`` counts the others); by default all.

    Returns
    -------
    dict
        ``path``, ``tasks``, ``dims``, ``total``, ``max``, ``min``, ``median`` and ``mean`` (stream
        lengths), ``positive_ratio`` (the mean over tasks of their fraction of +1 labels),
        ``per_task`` (``index``, ``name``, ``samples``, ``positive_ratio``), ``per_task_omitted``,
        ``format_version``, ``source``, ``description``, ``storage`` ("dense" or "sparse"),
        ``density`` (the fraction of the N x d features stored) and ``nnz`` (the features stored).

    Raises
    ------
    DataError
        For a file that is not a valid task-stream file, or whose labels cannot be read.
    """
    meta = read_meta(path)
    lengths = meta.lengths
    with _open(meta.path) as f:
        if meta.version >= 2:
            check_declared(meta.path, "/y", int(meta.offsets[-1]) * f["y"].dtype.itemsize)
            y = _read_rows(f, "y", 0, int(meta.offsets[-1]), meta)
            positives = np.add.reduceat((y == 1).view(np.int8), meta.offsets[:-1], dtype=np.int64)
            ratios = positives / lengths
            if meta.sparse:         # the row counts it prints, checked as a run checks them
                check_declared(meta.path, "/X/indptr", 8 * (int(meta.offsets[-1]) + 1))
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
    """A SHA-256 digest of the file's bytes, which a checkpoint records of its data set (computed
    once per process while the file is unchanged); a DataError when the file cannot be read."""
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
    with open(path, "rb") as f:
        return "sha256:" + hashlib.file_digest(f, "sha256").hexdigest()
