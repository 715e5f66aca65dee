"""Users' own data: CSV (features + label + task columns), LIBSVM files and Vowpal Wabbit's
text format (feature names hashed as the text importers hash n-grams)."""
from __future__ import annotations

import csv
import functools
import math
import os

import numpy as np

from ...errors import DataError
from ..footprint import parsed_bytes
from ..taskfile import SPARSE_MAX_DIM, TaskMeta, read_meta, store_sparse, write_tasks
from .common import (SeenLabels, check_output, decide_labels, distinct_columns, distinct_options,
                     folder_files, folder_option, parse_label_map, relabel,
                     require_memory, rowless_files, tell)


def _number(text: str, where: str, column: str) -> float:
    """``text`` as a finite float, else one line naming the source line and the column."""
    try:
        value = float(text)
    except ValueError:
        raise DataError(f"{where}: {text!r} is not a number in {column}") from None
    if not math.isfinite(value):
        raise DataError(f"{where}: {text!r} in {column} is not a finite number")
    return value


def _read_csv(src: str, label_col: str, task_col: str, seen: SeenLabels) -> dict:
    """{task: (feature rows, label keys)} of a CSV file, in file order."""
    tasks: dict = {}
    with open(src, newline="", encoding="utf-8-sig") as f:      # -sig: a spreadsheet's BOM
        reader = csv.reader(f)
        header = next(reader, None)
        if not header:
            raise DataError(f"{src}: empty file; expected a header row")
        distinct_columns(src, header, (label_col, task_col))
        for need in (label_col, task_col):
            if need not in header:
                raise DataError(f"{src}: no column {need!r} (columns: {', '.join(header)})")
        li, ti = header.index(label_col), header.index(task_col)
        fi = [i for i in range(len(header)) if i not in (li, ti)]       # the features' columns
        if not fi:
            raise DataError(f"{src}: no feature column: its only columns are the label "
                            f"({label_col}) and the task ({task_col}); add at least one numeric "
                            "feature column")
        for row in reader:
            if not row:
                continue
            where = f"{src}: line {reader.line_num}"
            if len(row) != len(header):
                raise DataError(f"{where}: {len(row)} fields, the header has {len(header)}")
            x = [_number(row[i], where, f"column {header[i]}") for i in fi]
            rows, keys = tasks.setdefault(row[ti], ([], []))
            rows.append(x)
            keys.append(seen.add(row[ti], row[li], src, reader.line_num))
    return tasks


def import_csv(src, out, *, label_col: str = "label", task_col: str = "task",
               label_map=None) -> TaskMeta:
    """One CSV with a header: every column other than ``label_col`` and ``task_col`` is a
    numeric feature; labels -1/+1 or 0/1, or any others with ``label_map`` (--label-map)."""
    src, out = str(src), str(out)
    check_output(src, out, "CSV file")
    label_map = parse_label_map(label_map)
    distinct_options(label_col=label_col, task_col=task_col)
    seen = SeenLabels()
    if os.path.isfile(src):
        # before reading: a value takes 2 bytes of the file at least ("0,"), 40 while it is read
        size = os.path.getsize(src)
        require_memory(20.0 * size, f"{src}: {size:,} bytes of CSV",
                       "import fewer rows at a time, or convert it to LIBSVM (sparse rows)")
    try:
        tasks = _read_csv(src, label_col, task_col, seen)
    except FileNotFoundError:
        raise DataError(f"{src}: not found") from None
    except UnicodeDecodeError:
        raise DataError(f"{src}: not UTF-8 text") from None
    except csv.Error as exc:
        raise DataError(f"{src}: malformed CSV ({exc})") from None
    if not tasks:
        raise DataError(f"{src}: no data rows")
    names, notices = sorted(tasks), []
    decided = decide_labels(seen, src, label_map, notices=notices)
    names, X_list, y_list = relabel(names, [np.array(tasks[n][0], dtype=np.float64) for n in names],
                                    [tasks[n][1] for n in names], decided, src, notices)
    n, d = sum(len(X) for X in X_list), X_list[0].shape[1]
    sparse = store_sparse(sum(int(np.count_nonzero(X)) for X in X_list), n, d)
    write_tasks(out, names, X_list, y_list, source=os.path.basename(src),
                description="imported from CSV", sparse=sparse)
    tell(notices)
    return read_meta(out)


# bytes of a LIBSVM file per entry ("123:0.25 "), the fewest a real file takes: bounds its entries
_BYTES_PER_ENTRY = 6


def _libsvm_line(line: str, where: str, task_field: str | None):
    """(label, {index: value}, task) of one LIBSVM line, None for one without a row."""
    parts = line.split("#", 1)[0].split()
    if not parts:
        return None
    feats, task = {}, None
    for tok in parts[1:]:
        key, sep, value = tok.partition(":")
        if task_field and key == task_field:
            if task is not None:
                raise DataError(f"{where}: '{task_field}:' appears twice in the row; name its "
                                "task once")
            task = value
            continue
        digits = key.lstrip("0")
        if not sep or not (key.isascii() and key.isdigit()) or not digits:
            raise DataError(f"{where}: {tok!r} is not index:value with a 1-based integer index "
                            "(expected 'label index:value ...')")
        # at the row, before the index meets an int64 array (which overflows at 2**63); the
        # digits are counted first, since int() refuses more than 4300 of them
        if len(digits) > len(str(SPARSE_MAX_DIM)) or int(digits) > SPARSE_MAX_DIM:
            shown = digits if len(digits) <= 40 else f"{digits[:20]}... ({len(digits)} digits)"
            raise DataError(f"{where}: feature index {shown} is beyond {SPARSE_MAX_DIM}, the most "
                            "columns a task file holds; check the feature indices")
        if int(key) in feats:
            # LIBSVM gives each index once: keeping or adding two values would be a guess
            raise DataError(f"{where}: feature index {int(key)} appears twice in the row; give "
                            "each index once")
        feats[int(key)] = _number(value, where, f"feature {key}")
    if task_field and task is None:
        raise DataError(f"{where}: no '{task_field}:' field naming the task")
    return parts[0], feats, task


class _SparseRows:
    """A task's LIBSVM rows as read: columns (0-based) and values in flat arrays, a chunk at a
    time, so that a row costs its entries, not a Python dict."""

    _FLUSH = 1 << 16

    def __init__(self):
        self.lengths, self._cols, self._vals, self.parts, self.most = [], [], [], [], 0

    def __len__(self) -> int:
        return len(self.lengths)

    def append(self, feats: dict) -> None:
        self.lengths.append(len(feats))
        self._cols += feats.keys()
        self._vals += feats.values()
        if len(self._cols) >= self._FLUSH:
            self.flush()

    def flush(self) -> None:
        """Move the rows read since the last flush into the arrays."""
        if self._cols:
            cols = np.array(self._cols, dtype=np.int64) - 1
            self.most = max(self.most, int(cols.max()) + 1)
            self.parts.append((cols, np.array(self._vals, dtype=np.float64)))
            self._cols, self._vals = [], []

    def matrix(self, d: int):
        """The rows as a scipy.sparse CSR matrix of ``d`` columns, each row's columns sorted."""
        from scipy.sparse import csr_matrix
        self.flush()
        cols = np.concatenate([c for c, _ in self.parts]) if self.parts else np.zeros(0, np.int64)
        vals = np.concatenate([v for _, v in self.parts]) if self.parts else np.zeros(0)
        indptr = np.zeros(len(self.lengths) + 1, dtype=np.int64)
        np.cumsum(self.lengths, out=indptr[1:])
        X = csr_matrix((vals, cols.astype(np.int32), indptr), shape=(len(self.lengths), d))
        X.sort_indices()
        return X

    @property
    def entries(self) -> int:
        return int(sum(self.lengths))


def _read_lines(path: str, parse, seen: SeenLabels, per_task: dict,
                file_task: str | None = None) -> bool:
    """Add to ``per_task`` ({task: (rows, keys)}) the rows of a file of one a line, each parsed by
    ``parse(line, where)`` (None: no row); ``file_task``: every row's task. True if it held one."""
    held = False
    try:
        with open(path, encoding="utf-8-sig") as f:
            for line_no, line in enumerate(f, start=1):
                parsed = parse(line, f"{path}: line {line_no}")
                if parsed is None:
                    continue
                label, feats, task = parsed
                task = file_task if file_task is not None else task
                rows, keys = per_task.setdefault(task, (_SparseRows(), []))
                rows.append(feats)
                keys.append(seen.add(task, label, path, line_no))
                held = True
    except FileNotFoundError:
        raise DataError(f"{path}: not found") from None
    except UnicodeDecodeError:
        raise DataError(f"{path}: not UTF-8 text") from None
    return held


def import_libsvm(src, out, *, task_field: str | None = None, label_map=None) -> TaskMeta:
    """LIBSVM text: a folder of files (one task each) or one file whose lines carry a
    ``TASK_FIELD:name`` token (``qid``); d is the largest index. Labels as :func:`import_csv`."""
    src, out = str(src), str(out)
    check_output(src, out, "LIBSVM folder" if os.path.isdir(src) else "LIBSVM file", every_file=True)
    folder_option(src, "--task-field", task_field)
    label_map = parse_label_map(label_map)
    seen, per_task, notices = SeenLabels(), {}, []
    tasks = folder_files(src, "LIBSVM file", notices=notices) if os.path.isdir(src) else {}
    files = list(tasks.values()) if os.path.isdir(src) else [src]
    # before reading: entries of _BYTES_PER_ENTRY bytes, held as 12 (twice while written)
    size = sum(os.path.getsize(f) for f in files if os.path.isfile(f))
    require_memory(24.0 * size / _BYTES_PER_ENTRY, f"{src}: {size:,} bytes of LIBSVM rows",
                   "import fewer rows at a time")
    if os.path.isdir(src):
        held = {path for task, path in tasks.items()
                if _read_lines(path, lambda line, where: _libsvm_line(line, where, None), seen,
                               per_task, file_task=task)}
        rowless_files(src, files, held, notices)
    else:
        if not task_field:
            raise DataError(f"{src}: one LIBSVM file needs --task-field (for example qid) naming "
                            "each line's task, or give a folder with one file per task")
        _read_lines(src, lambda line, where: _libsvm_line(line, where, task_field), seen, per_task)
    if not per_task or not any(len(r) for r, _ in per_task.values()):
        raise DataError(f"{src}: no data lines")
    return _write_rows(src, out, per_task, None, ("rows x {d} features (d is the largest index)",
                       "check the feature indices, or import fewer rows at a time"),
                       seen, label_map, notices, "imported from LIBSVM")


def _write_rows(src: str, out: str, per_task: dict, dims: int | None, said: tuple,
                seen: SeenLabels, label_map, notices: list, description: str) -> TaskMeta:
    """Write every task's rows (``per_task``: {task: (_SparseRows, keys)}) of ``dims`` columns
    (None: the largest index), once their memory is checked (``said``: what, with ``{d}``; fix)."""
    for rows, _ in per_task.values():
        rows.flush()
    d = dims or max(max((rows.most for rows, _ in per_task.values()), default=1), 1)
    n = sum(len(rows) for rows, _ in per_task.values())
    entries = sum(rows.entries for rows, _ in per_task.values())
    sparse = store_sparse(entries, n, d)
    require_memory(parsed_bytes(entries, n, d, sparse), f"{src}: {n} " + said[0].format(d=d),
                   said[1])
    names = sorted(per_task)
    decided = decide_labels(seen, src, label_map, notices=notices)
    keys = [per_task[t][1] for t in names]
    names, X_list, y_list = relabel(names, [per_task[t][0].matrix(d) for t in names], keys,
                                    decided, src, notices)
    write_tasks(out, names, X_list if sparse else [X.toarray() for X in X_list], y_list,
                source=os.path.basename(src), description=description)
    tell(notices)
    return read_meta(out)


def _vw_line(line: str, where: str, task_namespace: str | None, columns):
    """(label text, {column: value}, task or None) of a Vowpal Wabbit line (``label |ns f[:v]``):
    ``ns^f`` hashed to a column and sign, values 1 where none is given, a column's added up."""
    head, bar, rest = line.partition("|")
    parts = head.split()
    if not bar or not parts:
        raise DataError(f"{where}: expected 'label |namespace feature[:value] ...' (Vowpal "
                        "Wabbit's text format)")
    feats, task = {}, None
    for chunk in rest.split("|"):
        tokens = chunk.split()
        if not chunk[:1].strip():               # '| f1 f2': the default namespace
            space = ""
        else:
            space = tokens.pop(0).partition(":")[0] if tokens else ""
        if task_namespace is not None and space == task_namespace:
            if not tokens:
                raise DataError(f"{where}: the namespace {task_namespace!r} names no task")
            if task is not None:
                # which of two tasks the line is of would be a guess (as a LIBSVM row's two)
                raise DataError(f"{where}: '|{task_namespace}' appears twice in the line; name "
                                "its task once")
            task = tokens[0].partition(":")[0]
            continue
        for tok in tokens:
            name, colon, text = tok.rpartition(":") if ":" in tok else (tok, "", "")
            value = _number(text, where, f"feature {name!r}") if colon else 1.0
            column, sign = columns(f"{space}^{name}" if space else name)
            feats[column] = feats.get(column, 0.0) + sign * value
    if task_namespace is not None and task is None:
        raise DataError(f"{where}: no '|{task_namespace} NAME' naming the line's task")
    return parts[0], {k + 1: v for k, v in feats.items() if v != 0.0}, task


def import_vw(src, out, *, dims: int | None = None, task_namespace: str | None = None,
              label_map=None) -> TaskMeta:
    """Vowpal Wabbit's text format: a folder of files (one task each), or one file whose lines
    name their task in the namespace ``task_namespace`` (``|task de``); names hashed to ``dims``
    columns (default :data:`~omtl_mpi.data.embed.DEFAULT_HASH_DIMS`) into sparse rows, importance
    weights and tags not used. Labels -1/+1 or 0/1, or any with ``label_map`` (--label-map)."""
    from ..embed import check_featuriser
    from ..featurise import feature_column
    src, out = str(src), str(out)
    check_output(src, out, "Vowpal Wabbit folder" if os.path.isdir(src) else "Vowpal Wabbit file",
                 every_file=True)
    folder_option(src, "--task-namespace", task_namespace)
    dims = check_featuriser("hashing", dims)
    label_map = parse_label_map(label_map)
    notices: list = []
    files = folder_files(src, "Vowpal Wabbit file", notices=notices) if os.path.isdir(src) \
        else {None: src}
    if not os.path.isdir(src) and not task_namespace:
        raise DataError(f"{src}: one Vowpal Wabbit file needs --task-namespace NS (each line's "
                        "'|NS name' names its task), or give a folder with one file per task")
    size = sum(os.path.getsize(f) for f in files.values() if os.path.isfile(f))
    require_memory(24.0 * size / 2, f"{src}: {size:,} bytes of Vowpal Wabbit lines",
                   "import fewer lines at a time")
    columns = functools.cache(lambda name: feature_column(name, dims))     # names repeat
    seen, per_task, weighted = SeenLabels(), {}, 0
    namespace = None if os.path.isdir(src) else task_namespace

    def parse(line: str, where: str):
        nonlocal weighted
        if not line.strip():
            return None
        parsed = _vw_line(line, where, namespace, columns)
        weighted += len(line.partition("|")[0].split()) > 1
        return parsed

    held = {path for file_task, path in files.items()
            if _read_lines(path, parse, seen, per_task, file_task)}
    if os.path.isdir(src):
        rowless_files(src, files.values(), held, notices)
    if not per_task:
        raise DataError(f"{src}: no data lines")
    if weighted:
        notices.append(f"{src}: {weighted} line(s) give an importance weight or a tag; they are "
                       "not used (every instance counts once)")
    return _write_rows(src, out, per_task, dims, ("lines x {d} features", "lower --dims"), seen,
                       label_map, notices,
                       f"imported from Vowpal Wabbit's format; hashed features, d={dims}")
