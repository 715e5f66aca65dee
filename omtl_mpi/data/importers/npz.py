"""Importers from other formats into the task-stream format, and ``data info``."""
from __future__ import annotations

import os
import re
import zipfile

import numpy as np

from ...errors import DataError
from ..taskfile import TaskMeta, _open, read_meta, write_tasks


def read_npz(src: str) -> dict:
    """Every array of an .npz archive; pickles, damaged and truncated archives are refused."""
    if not zipfile.is_zipfile(src):
        raise DataError(f"{src}: not an .npz archive (or a truncated one); expected numpy.savez output")
    try:
        npz = np.load(src, allow_pickle=False)
        return {key: npz[key] for key in npz.files}
    except ValueError as exc:
        if "pickle" in str(exc).lower() or "object" in str(exc).lower():
            raise DataError(f"{src}: holds pickled Python objects, which are never loaded "
                            "(save plain numeric arrays instead)") from None
        raise DataError(f"{src}: unreadable array ({exc})") from None
    except (OSError, zipfile.BadZipFile, EOFError) as exc:
        raise DataError(f"{src}: damaged or truncated .npz archive ({exc})") from None


_PER_TASK = re.compile(r"^([Xxy])_?(\d+)$")


def import_npz(src, out, *, source: str | None = None, description: str | None = None) -> TaskMeta:
    """Import a NumPy .npz archive.

    Layouts: the paper's public code, ``xs`` (K, n, d) with ``ys`` (K, n) or (K, n, 1); or
    per-task arrays ``X_0, y_0, X_1, y_1, ...`` (also ``X0``/``x_0``). Labels -1/+1 or 0/1.
    Arrays holding Python objects are refused, never unpickled.
    """
    src, out = str(src), str(out)
    arrays = read_npz(src)
    if "xs" in arrays and "ys" in arrays:
        xs, ys = arrays["xs"], arrays["ys"]
        if ys.ndim == 3 and ys.shape[2] == 1:
            ys = ys[:, :, 0]
        if xs.ndim != 3 or ys.ndim != 2 or xs.shape[:2] != ys.shape:
            raise DataError(f"{src}: 'xs' must be (K, n, d) and 'ys' (K, n), got {xs.shape} and {ys.shape}")
        X_list, y_list = list(xs), list(ys)
        names = [f"task{k}" for k in range(len(X_list))]
    else:
        feats, labels = {}, {}
        for key, value in arrays.items():
            m = _PER_TASK.match(key)
            if m:
                (labels if m.group(1) == "y" else feats)[int(m.group(2))] = value
        if not feats:
            raise DataError(f"{src}: no task arrays found; expected 'xs' and 'ys', or X_0, y_0, X_1, y_1, ... "
                            f"(found {', '.join(sorted(arrays)) or 'nothing'})")
        missing = sorted(set(feats) ^ set(labels))
        if missing:
            raise DataError(f"{src}: task {missing[0]} has features or labels but not both")
        order = sorted(feats)
        if order != list(range(len(order))):
            raise DataError(f"{src}: per-task arrays must be numbered 0..{len(order) - 1}, got {order}")
        X_list = [feats[k] for k in order]
        y_list = [labels[k].reshape(-1) for k in order]
        names = [f"task{k}" for k in order]
    for k, X in enumerate(X_list):
        if X.dtype.kind not in "fiub":
            raise DataError(f"{src}: task {k} features have dtype {X.dtype}; numbers expected")
    write_tasks(out, names, X_list, y_list, source=source or os.path.basename(src),
                description=description or f"imported from {os.path.basename(src)}")
    return read_meta(out)


def info(path) -> dict:
    """The paper's Table 1 row of a task-stream file, plus per-task figures (reads labels only)."""
    meta = read_meta(path)
    per_task = []
    with _open(meta.path) as f:
        for k, name in enumerate(meta.names):
            y = f["tasks"][f"{k:04d}"]["y"][()]
            per_task.append({"index": k, "name": name, "samples": int(len(y)),
                             "positive_ratio": float(np.mean(y == 1)) if len(y) else 0.0})
    lengths = meta.lengths
    return {
        "path": meta.path, "tasks": meta.n_tasks, "dims": meta.dim, "total": int(lengths.sum()),
        "max": int(lengths.max()), "min": int(lengths.min()),
        "positive_ratio": float(np.mean([t["positive_ratio"] for t in per_task])),
        "per_task": per_task, "source": meta.source, "description": meta.description,
    }
