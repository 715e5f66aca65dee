"""What every importer decides the same way: which output it may write, which option values it
takes, how much memory it may ask for, and how the source's labels become -1/+1; each refuses a
bad command line in one line before anything is read, and says each decision on stderr."""
from __future__ import annotations

import math
import os
import shutil
import sys
from contextlib import suppress

import numpy as np

from ...errors import ConfigError, DataError, UserError
from ...memory import size_text
from ...paths import inside, output_file, refuse_inputs, regular_file
from .. import footprint, taskfile


def check_output(src, out, what: str = "file", option: str = "-o", every_file: bool = False) -> None:
    """Refuse (UserError), before the source is read, an output ``out`` (``option``) that would
    replace the file or folder ``src`` or a file in it (with ``every_file``, a new one: it would be
    read next time), a folder, or one whose folder is missing or not writable; a pipe ``src``."""
    src, out = os.fspath(src), os.fspath(out)
    if os.path.isdir(src):
        refuse_inputs(out, [(src, f"inside the {what} being imported")], option)
        if every_file and inside(out, src):
            raise UserError(f"{option} {out} is inside the {what} being imported ({src}), whose "
                            f"every file is read as a task: choose another {option}")
    else:
        if os.path.exists(src):
            regular_file(src, what)
        refuse_inputs(out, [(src, f"the {what} being imported")], option)
    output_file(out, option)


def folder_files(src: str, what: str, suffix: str = "", notices: list | None = None) -> dict:
    """{task: path}, sorted, of a folder whose every file (``what``) not starting with a dot and
    ending in ``suffix`` is a task named after it; a file that is no regular file, or two that would
    be one task, refused (UserError); a subfolder left out, with a notice in ``notices``."""
    tasks: dict = {}
    folders = []
    for name in sorted(os.listdir(src)):
        path = os.path.join(src, name)
        if name.startswith(".") or not name.endswith(suffix):
            continue
        if os.path.isdir(path):
            folders.append(name)
            continue
        regular_file(path, what)
        task = os.path.splitext(name)[0]
        if task in tasks:
            raise DataError(f"{src}: {os.path.basename(tasks[task])} and {name} would both be task "
                            f"{task!r}; rename one of them")
        tasks[task] = path
    if folders and notices is not None:
        notices.append(f"{src}: {len(folders)} folder(s) inside it left out ({_listed(folders, 4)}): "
                       f"only its files are tasks")
    return tasks


def rowless_files(src: str, files, read, notices: list) -> None:
    """Add to ``notices`` the ``files`` of ``src`` not in ``read``: no row, so no task."""
    empty = [os.path.basename(f) for f in files if f not in read]
    if empty:
        notices.append(f"{src}: {len(empty)} file(s) hold no data row (empty, comments or a header "
                       f"only) and are no task: {_listed(empty, 4)}")


def folder_option(src: str, option: str, value) -> None:
    """Refuse an option naming lines' tasks (``--task-field``) with a folder: it does nothing."""
    if value is not None and os.path.isdir(src):
        raise ConfigError(f"{option} {value} does nothing with a folder: each file of {src} is one "
                          f"task, named after it; leave {option} out, or give one file whose lines "
                          "name their tasks")


def distinct_options(**columns) -> None:
    """Refuse two column options (``text_col``, ...; None: not given) naming one column: the label
    read as the text, or as the task, would be learned from silently."""
    given = [(f"--{k.replace('_', '-')}", v) for k, v in columns.items() if v is not None]
    for i, (a, value) in enumerate(given):
        for b, other in given[i + 1:]:
            if value == other:
                raise ConfigError(f"{a} and {b} both name column {value!r}; each needs a column "
                                  "of its own")


def require_file(path, what: str) -> None:
    if not os.path.isfile(path):
        raise DataError(f"{path}: {what} not found")


# every numeric option of the data commands: (smallest, largest) accepted value
LIMITS = {"tasks": (1, None), "samples": (1, None), "dims": (1, None), "clusters": (2, None),
          "seed": (0, 2 ** 63 - 1), "iterations": (0, 50), "groups": (1, None)}


def check_options(**values) -> None:
    """Refuse out-of-range values of numeric options (``dims=0``...; None: not given): a
    ConfigError of one line per bad value, naming the option and the accepted range."""
    problems = []
    for name, value in values.items():
        if value is None:
            continue
        low, high = LIMITS[name]
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            problems.append(f"--{name} must be a whole number, got {value!r}")
        elif value < low or (high is not None and value > high):
            span = f">= {low}" if high is None else f"between {low} and {high}"
            problems.append(f"--{name} must be {span}, got {value}")
    if problems:
        raise ConfigError("\n".join(problems))


def require_memory(need: float, what: str, fix: str) -> None:
    """Refuse (ConfigError), before allocating it, work of ``need`` bytes at its peak for ``what``
    ("1000 tasks x 100 samples x 9 features") beyond this machine's free memory, saying ``fix``."""
    free = footprint.available_memory()
    if free is not None and need > free:
        raise ConfigError(f"{what} would need {size_text(need)} of memory, but only "
                          f"{size_text(free)} are available: {fix}")


def available_disk(path) -> int | None:
    """Bytes free for a new file in the folder of ``path``, None if unknown."""
    with suppress(OSError):
        return shutil.disk_usage(os.path.dirname(os.path.abspath(os.fspath(path)))).free
    return None


def require_disk(need: float, out, what: str, fix: str) -> None:
    """Refuse (ConfigError), before writing it, an output ``out`` of ``need`` bytes (``what``)
    beyond the free space of its file system, saying ``fix``."""
    free = available_disk(out)
    if free is not None and need > free:
        raise ConfigError(f"{what} would take {size_text(need)} on disk, but only "
                          f"{size_text(free)} are free for {out}: {fix}, or write elsewhere")


BINARY_SETS = ({-1.0, 1.0}, {0.0, 1.0})
BINARY = {-1.0: -1, 0.0: -1, 1.0: 1}
LABEL_MAP_SYNTAX = "LABEL=+1, LABEL=-1 or LABEL=drop, comma-separated"


def label_key(value):
    """A label as compared with --label-map's: a number (``1``, ``+1`` and ``1.0`` are one label),
    or else its text, stripped and case-folded."""
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        number = float(value)
    else:
        text = str(value).strip()
        try:
            number = float(text)
        except ValueError:
            return text.casefold()
    return number if math.isfinite(number) else str(value).strip().casefold()


def show_label(key) -> str:
    """A label key as the user would type it (``2`` rather than ``2.0``)."""
    if key == "":
        return '""'
    if isinstance(key, float) and key.is_integer():
        return str(int(key))
    return str(key)


def parse_label_map(text) -> dict | None:
    """``--label-map`` ("1=-1,2=+1,neutral=drop") as {label key: +1, -1 or None (drop)}; a dict
    is taken as parsed; None or "" is not given. A malformed entry is a ConfigError."""
    if text is None or isinstance(text, dict):
        return None if text is None else {label_key(k): v for k, v in text.items()}
    if not text.strip():
        return None
    out = {}
    for part in text.split(","):
        name, sep, value = part.rpartition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name:
            raise ConfigError(f"--label-map entry {part.strip()!r} must look like {LABEL_MAP_SYNTAX} "
                              "(for example --label-map \"1=-1,2=+1\")")
        if value not in ("1", "+1", "-1", "drop"):
            raise ConfigError(f"--label-map {name}={value}: the value must be +1, -1 or drop")
        key, target = label_key(name), None if value == "drop" else int(value)
        if key in out and out[key] != target:
            raise ConfigError(f"--label-map gives label {name} two different values; give it once")
        out[key] = target
    return out


class SeenLabels:
    """The labels a source holds, per task, each with where it was first seen (for messages)."""

    def __init__(self):
        self.tasks: dict = {}

    def add(self, task, raw, path: str, line: int | None = None):
        """The key of label ``raw`` of ``task``, read from ``path`` (at ``line``, 1-based)."""
        key = label_key(raw)
        seen = self.tasks.setdefault(task, {})
        if key not in seen:
            seen[key] = (raw, path, line)
        return key

    def add_all(self, task, values, path: str, lines: bool = False) -> list:
        """The keys of a task's labels ``values``; ``lines``: value i is on line i + 1 of ``path``."""
        self.tasks.setdefault(task, {})
        return [self.add(task, raw, path, i + 1 if lines else None) for i, raw in enumerate(values)]

    def first(self, wanted):
        """(where, raw label) of the earliest label whose key is ``wanted``, None if none is."""
        hits = [(line or 0, path, raw) for seen in self.tasks.values()
                for key, (raw, path, line) in seen.items() if wanted(key)]
        if not hits:
            return None
        line, path, raw = min(hits, key=lambda h: h[0])
        return (f"{path}: line {line}" if line else path), raw

    def found(self) -> list:
        """Every label key seen, sorted (numbers first)."""
        keys = {k for seen in self.tasks.values() for k in seen}
        return sorted(keys, key=lambda k: (isinstance(k, str), k))


def _listed(keys, most: int = 6) -> str:
    shown = ", ".join(show_label(k) for k in keys[:most])
    return shown + (f", ... ({len(keys)} in all)" if len(keys) > most else "")


def _example(keys) -> str:
    """A --label-map that would import ``keys``: the first -1, the last +1, the others dropped."""
    keys = [show_label(k) for k in keys]
    if len(keys) == 1:
        return f"{keys[0]}=+1"
    if len(keys) > 6:
        return f"{keys[0]}=-1,{keys[1]}=+1,...=drop"
    return ",".join([f"{keys[0]}=-1"] + [f"{k}=drop" for k in keys[1:-1]] + [f"{keys[-1]}=+1"])


def _differ(seen: SeenLabels) -> str:
    """' (tasks a: 1, 2; b: 2, 3)' when the tasks' label sets differ, else ''."""
    sets = {t: sorted(s, key=lambda k: (isinstance(k, str), k)) for t, s in seen.tasks.items()}
    distinct = list({tuple(v): t for t, v in sets.items()}.values())
    if len(distinct) < 2:
        return ""
    return " (their label sets differ: " + "; ".join(
        f"task {t}: {_listed(sets[t], 4)}" for t in distinct[:2]) + ")"


def decide_labels(seen: SeenLabels, source: str, label_map=None, default: dict | None = None,
                  notices: list | None = None) -> dict:
    """How the labels seen become -1/+1: {label key: +1, -1 or None (drop)}. With ``label_map``,
    exactly that (a label it does not name refused at its first line); without, -1/+1 kept and 0/1
    read as -1/+1 (with a notice) where every task's labels are one of those pairs; other labels are
    ``default``'s where the importer has one, else refused, naming them and an example map."""
    decided = parse_label_map(label_map)
    found = seen.found()
    if decided is None and all(any(set(s) <= b for b in BINARY_SETS) for s in seen.tasks.values()):
        zeros = [t for t, s in seen.tasks.items() if 0.0 in s]
        if zeros and notices is not None:
            which = "" if len(zeros) == len(seen.tasks) else f" in task(s) {_listed(zeros, 4)}"
            notices.append(f"{source}: labels 0/1 read as -1/+1 (0 -> -1){which}")
        return dict(BINARY)
    if decided is None and default is not None:
        decided = parse_label_map(default)
    if decided is None:
        word = seen.first(lambda key: isinstance(key, str))        # refused where it first is
        if word:
            raise DataError(f"{word[0]}: label {str(word[1]).strip()!r} is not a number; labels "
                            "must be -1/+1 or 0/1, or each be given a value with --label-map, e.g. "
                            f"--label-map \"{_example(found)}\"")
        what = (f"labels {_listed(found)} found" if len(found) <= 2 else
                f"labels must take two values, found {len(found)}: {_listed(found)}")
        raise DataError(f"{source}: {what}{_differ(seen)}; only -1/+1 and 0/1 are imported without "
                        "a mapping: say which label is +1 (and which to drop) with --label-map, "
                        f"e.g. --label-map \"{_example(found)}\"")
    missing = seen.first(lambda key: key not in decided)
    if missing:
        at, raw = missing
        label = str(raw).strip()
        if not label:
            raise DataError(f"{at}: the label is empty; give the row a label, or remove it")
        raise DataError(f"{at}: label {label!r} is not in the label map "
                        f"({', '.join(show_label(k) for k in decided)}); add {label}=+1, "
                        f"{label}=-1 or {label}=drop to --label-map")
    return decided


def distinct_columns(path: str, header, read) -> None:
    """Refuse a CSV header naming a column the import reads (``read``: the text, label or task
    column) more than once: which is meant would be a guess. Other columns may repeat."""
    twice = [c for c in read if c is not None and header.count(c) > 1]
    if twice:
        raise DataError(f"{path}: the header names column(s) {_listed(twice, 4)} more than once; "
                        "give the column it means its own name")


def relabel(names, X_list, key_lists, decided: dict, source: str, notices: list):
    """(names, X_list, y_list) of every task's rows and -1/+1 labels under ``decided``: rows mapped
    to drop removed, tasks left empty left out (with a notice; a DataError if every one is)."""
    names_out, X_out, y_out, dropped, emptied = [], [], [], 0, []
    for name, X, keys in zip(names, X_list, key_lists):
        y = np.array([decided[k] or 0 for k in keys], dtype=np.int8)
        keep = y != 0
        if not keep.all():
            dropped += int((~keep).sum())
            X = X[keep] if isinstance(X, np.ndarray) or hasattr(X, "tocsr") else \
                [x for x, k in zip(X, keep) if k]
            y = y[keep]
        if not len(y):
            emptied.append(name)
            continue
        names_out.append(name)
        X_out.append(X)
        y_out.append(y)
    one_class = [n for n, y in zip(names_out, y_out) if len(y) and (y == y[0]).all()]
    if one_class:
        notices.append(f"{source}: {len(one_class)} of {len(names_out)} task(s) hold one class "
                       f"only ({_listed(one_class, 4)}), so their learners never see the other; "
                       "if that is not so, check the label column or --label-map")
    if dropped:
        notices.append(f"{source}: {dropped} row(s) dropped, their labels mapped to drop"
                       + (f"; task(s) {_listed(emptied, 4)} left out, no row left" if emptied else ""))
    if not names_out:
        raise DataError(f"{source}: no rows left once the labels are mapped (the label map drops "
                        "every row)")
    return names_out, X_out, y_out


def check_groups(names, option: str) -> tuple:
    """The task folders or data sets named by ``option`` (--tasks, --sets): some, each once."""
    names = tuple(names)
    if not names:
        raise ConfigError(f"{option}: name at least one, comma-separated")
    twice = [n for n in names if names.count(n) > 1]
    if twice:
        raise ConfigError(f"{option} names {twice[0]} twice; name each once")
    return names


def check_features(source: str, names, X_list) -> None:
    """Refuse, naming the source (not the output), tasks whose features the output would refuse."""
    problems, dims = [], {}
    for name, X in zip(names, X_list):
        X = np.asarray(X)
        problems += taskfile.check_values(f"{source}: task {name!r}", X, np.ones(len(X), dtype=np.int8))[1]
        if X.ndim == 2:
            dims.setdefault(X.shape[1], name)
    if len(dims) > 1:
        (d0, t0), (d1, t1) = list(dims.items())[:2]
        problems.append(f"{source}: task {t0!r} has {d0} features but task {t1!r} has {d1}; every "
                        "task must have the same features")
    if problems:
        raise DataError("\n".join(problems))


def tell(notices) -> None:
    """Say on stderr what an import decided (one ``notice:`` line each, repeats once)."""
    for line in dict.fromkeys(notices):
        print(f"notice: {line}", file=sys.stderr)

