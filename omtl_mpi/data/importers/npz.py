"""NumPy .npz archives into task-stream files (pickles are never loaded)."""
from __future__ import annotations

import os
import re
import zipfile

import numpy as np

from ...errors import DataError
from ..footprint import npz_bytes
from ..taskfile import TaskMeta, read_meta, write_tasks
from .common import (SeenLabels, check_features, check_output, decide_labels, parse_label_map,
                     relabel, require_memory, tell)


def read_npz(src: str) -> dict:
    """Every array of an .npz archive; pickles, damaged and truncated archives are refused, and
    so are arrays too large for this machine's memory (before they are loaded)."""
    if not zipfile.is_zipfile(src):
        raise DataError(f"{src}: not an .npz archive (or a truncated one); expected numpy.savez output")
    require_memory(npz_bytes(src), f"{src}: its arrays", "import a smaller archive, or split it")
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


def _npz_tasks(src: str, arrays: dict):
    """(names, feature arrays, label arrays) of an archive in either layout."""
    if "xs" in arrays and "ys" in arrays:
        xs, ys = arrays["xs"], arrays["ys"]
        if ys.ndim == 3 and ys.shape[2] == 1:
            ys = ys[:, :, 0]
        if xs.ndim != 3 or ys.ndim != 2 or xs.shape[:2] != ys.shape:
            raise DataError(f"{src}: 'xs' must be (K, n, d) and 'ys' (K, n), got {xs.shape} and {ys.shape}")
        return [f"task{k}" for k in range(len(xs))], list(xs), list(ys)
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
    return ([f"task{k}" for k in order], [feats[k] for k in order],
            [labels[k].reshape(-1) for k in order])


def import_npz(src, out, *, source: str | None = None, description: str | None = None,
               label_map=None) -> TaskMeta:
    """An .npz archive: ``xs`` (K, n, d) with ``ys`` (K, n) or (K, n, 1), or ``X_0, y_0, ...`` (also
    ``X0``, ``x_0``); labels -1/+1, 0/1 or any with ``label_map``. Nothing is unpickled."""
    src, out = str(src), str(out)
    check_output(src, out, ".npz archive")
    label_map = parse_label_map(label_map)
    names, X_list, y_list = _npz_tasks(src, read_npz(src))
    seen, key_lists, notices = SeenLabels(), [], []
    for k, (name, X, y) in enumerate(zip(names, X_list, y_list)):
        if X.dtype.kind not in "fiub":
            raise DataError(f"{src}: task {k} features have dtype {X.dtype}; numbers expected")
        if X.ndim != 2 or X.shape[0] != len(y):
            raise DataError(f"{src}: task {k} has features of shape {X.shape} but {len(y)} labels; "
                            "expected (n, d) features and n labels")
        key_lists.append(seen.add_all(name, y.tolist(), f"{src}: task {k}"))
    decided = decide_labels(seen, src, label_map, notices=notices)
    names, X_list, y_list = relabel(names, X_list, key_lists, decided, src, notices)
    check_features(src, names, X_list)
    write_tasks(out, names, X_list, y_list, source=source or os.path.basename(src),
                description=description or f"imported from {os.path.basename(src)}")
    tell(notices)
    return read_meta(out)
