"""Users' own numeric data: CSV (features + label + task columns) and LIBSVM files."""
from __future__ import annotations

import csv
import os

import numpy as np

from ...errors import DataError
from ..taskfile import TaskMeta, read_meta, write_tasks
from .common import binary_labels


def import_csv(src, out, *, label_col: str = "label", task_col: str = "task") -> TaskMeta:
    """One CSV with a header: every column other than ``label_col`` and ``task_col`` is a feature."""
    src, out = str(src), str(out)
    tasks: dict = {}
    try:
        with open(src, newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if not header:
                raise DataError(f"{src}: empty file; expected a header row")
            for need in (label_col, task_col):
                if need not in header:
                    raise DataError(f"{src}: no column {need!r} (columns: {', '.join(header)})")
            li, ti = header.index(label_col), header.index(task_col)
            fi = [i for i in range(len(header)) if i not in (li, ti)]
            for line, row in enumerate(reader, start=2):
                if not row:
                    continue
                if len(row) != len(header):
                    raise DataError(f"{src}: line {line}: {len(row)} fields, the header has {len(header)}")
                try:
                    x = [float(row[i]) for i in fi]
                    label = float(row[li])
                except ValueError:
                    raise DataError(f"{src}: line {line}: a feature or the label is not a number") from None
                tasks.setdefault(row[ti], ([], []))
                tasks[row[ti]][0].append(x)
                tasks[row[ti]][1].append(label)
    except FileNotFoundError:
        raise DataError(f"{src}: not found") from None
    except UnicodeDecodeError:
        raise DataError(f"{src}: not UTF-8 text") from None
    if not tasks:
        raise DataError(f"{src}: no data rows")
    names = sorted(tasks)
    notices: list = []
    write_tasks(out, names, [np.array(tasks[n][0]) for n in names],
                [binary_labels(tasks[n][1], f"{src}: task {n!r}", notices) for n in names],
                source=os.path.basename(src), description="imported from CSV")
    return read_meta(out)


def _read_libsvm(path: str, task_field: str | None):
    rows, labels, tasks = [], [], []
    try:
        with open(path, encoding="utf-8") as f:
            for line_no, line in enumerate(f, start=1):
                line = line.split("#", 1)[0].strip()
                if not line:
                    continue
                parts = line.split()
                try:
                    labels.append(float(parts[0]))
                    feats, task = {}, None
                    for tok in parts[1:]:
                        key, value = tok.split(":", 1)
                        if task_field and key == task_field:
                            task = value
                            continue
                        idx = int(key)
                        if idx < 1:
                            raise ValueError
                        feats[idx] = float(value)
                except ValueError:
                    raise DataError(f"{path}: line {line_no}: expected 'label index:value ...' "
                                    "with 1-based integer indices") from None
                if task_field and task is None:
                    raise DataError(f"{path}: line {line_no}: no '{task_field}:' field naming the task")
                rows.append(feats)
                tasks.append(task)
    except FileNotFoundError:
        raise DataError(f"{path}: not found") from None
    except UnicodeDecodeError:
        raise DataError(f"{path}: not UTF-8 text") from None
    return rows, labels, tasks


def import_libsvm(src, out, *, task_field: str | None = None) -> TaskMeta:
    """LIBSVM text: a folder of files (one task each) or one file whose lines carry a
    ``TASK_FIELD:name`` token (e.g. ``qid``). Indices are 1-based; d is the largest index seen."""
    src, out = str(src), str(out)
    if os.path.isdir(src):
        files = sorted(os.path.join(src, f) for f in os.listdir(src) if not f.startswith("."))
        per_task = {}
        for path in files:
            rows, labels, _ = _read_libsvm(path, None)
            per_task[os.path.splitext(os.path.basename(path))[0]] = (rows, labels)
    else:
        if not task_field:
            raise DataError(f"{src}: one LIBSVM file needs --task-field (for example qid) naming "
                            "each line's task, or give a folder with one file per task")
        rows, labels, tasks = _read_libsvm(src, task_field)
        per_task = {}
        for r, l, t in zip(rows, labels, tasks):
            per_task.setdefault(t, ([], []))
            per_task[t][0].append(r)
            per_task[t][1].append(l)
    if not per_task or not any(r for r, _ in per_task.values()):
        raise DataError(f"{src}: no data lines")
    d = max((max(r) for rows, _ in per_task.values() for r in rows if r), default=1)
    names = sorted(per_task)
    X_list, y_list, notices = [], [], []
    for n in names:
        rows, labels = per_task[n]
        X = np.zeros((len(rows), d))
        for i, r in enumerate(rows):
            for idx, value in r.items():
                X[i, idx - 1] = value
        X_list.append(X)
        y_list.append(binary_labels(labels, f"{src}: task {n!r}", notices))
    write_tasks(out, names, X_list, y_list, source=os.path.basename(src), description="imported from LIBSVM")
    return read_meta(out)
