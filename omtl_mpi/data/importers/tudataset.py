"""TU graph data sets (one task per set) as Weisfeiler-Lehman subtree label histograms."""
from __future__ import annotations

import hashlib
import os

import numpy as np

from ...errors import DataError
from ...paths import regular_file
from ..footprint import matrix_bytes
from ..taskfile import TaskMeta, read_meta, write_tasks
from .common import (SeenLabels, check_features, check_groups, check_options, check_output,
                     decide_labels, parse_label_map, relabel, require_memory, tell)

DEFAULT_SETS = ("MUTAG", "NCI1", "AIDS", "BZR", "COX2", "PTC_MR")


def _ints(path: str, columns: int | None = None) -> np.ndarray:
    if os.path.lexists(path):
        regular_file(path, "TU text file")      # a FIFO in a source folder would block
    rows = []
    try:
        with open(path, encoding="ascii") as f:
            for i, line in enumerate(f, start=1):
                line = line.strip()
                if not line:
                    continue
                try:
                    vals = [int(float(v)) for v in line.replace(",", " ").split()]
                    if any(abs(v) >= 2**62 for v in vals):
                        raise ValueError
                except (ValueError, OverflowError):
                    raise DataError(f"{path}: line {i}: {line[:40]!r} is not a row of integers") from None
                if columns is not None and len(vals) != columns:
                    raise DataError(f"{path}: line {i}: expected {columns} values, got {len(vals)}")
                rows.append(vals)
    except FileNotFoundError:
        raise DataError(f"{path}: not found (TU format: <DS>_A.txt, _graph_indicator.txt, "
                        "_graph_labels.txt, optional _node_labels.txt)") from None
    except UnicodeDecodeError:
        raise DataError(f"{path}: not a text file") from None
    if not rows:
        return np.zeros((0, columns or 1), dtype=np.int64)
    if columns is None and len({len(r) for r in rows}) > 1:
        raise DataError(f"{path}: rows have different numbers of values")
    return np.array(rows, dtype=np.int64).reshape(len(rows), -1)


def _h(label) -> int:
    return int.from_bytes(hashlib.blake2b(repr(label).encode(), digest_size=8).digest(), "little")


def wl_features(edges: np.ndarray, graph_of: np.ndarray, node_labels: np.ndarray, n_graphs: int,
                dims: int, iterations: int = 3) -> np.ndarray:
    """WL subtree features: labels refined ``iterations`` times, each round's hashed into ``dims``
    buckets and counted per graph (``edges``, ``graph_of``: 0-based ids); rows L2-normalised."""
    N = len(graph_of)
    neighbours = [[] for _ in range(N)]
    for u, v in edges:
        neighbours[u].append(v)
    labels = [_h(("init", int(l))) for l in node_labels]
    X = np.zeros((n_graphs, dims))
    for it in range(iterations + 1):
        buckets = np.array([lab % dims for lab in labels], dtype=np.int64)
        np.add.at(X, (graph_of, buckets), 1.0)
        if it == iterations:
            break
        labels = [_h((labels[i], tuple(sorted(labels[j] for j in neighbours[i])))) for i in range(N)]
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    np.divide(X, norms, out=X, where=norms > 0)
    return X


def read_tu(folder: str, name: str, dims: int, iterations: int, notices: list, seen: SeenLabels,
            held: float = 0.0):
    """One TU data set: (features (G, dims), label keys (G,)); ``held``: bytes of features
    already read (the other sets), for the memory check."""
    base = os.path.join(folder, name, name) if os.path.isdir(os.path.join(folder, name)) else os.path.join(folder, name)
    # before reading: a number takes 2 bytes of the text at least ("1,"), and its row of Python
    # ints and the arrays made of them about 40 while it is read; the neighbour lists, as much
    size = sum(os.path.getsize(base + part) for part in ("_A.txt", "_graph_indicator.txt",
                                                          "_graph_labels.txt", "_node_labels.txt")
               if os.path.isfile(base + part))
    require_memory(held + 40.0 * size, f"{base}: {size:,} bytes of graph files",
                   "import fewer sets at a time")
    edges = _ints(base + "_A.txt", 2) - 1
    graph_of = _ints(base + "_graph_indicator.txt", 1).ravel() - 1
    glabels = _ints(base + "_graph_labels.txt", 1).ravel()
    N, G = len(graph_of), len(glabels)
    if N == 0 or G == 0:
        raise DataError(f"{base}: no nodes or no graphs")
    if graph_of.min() < 0 or graph_of.max() >= G:
        raise DataError(f"{base}_graph_indicator.txt: names graph {int(graph_of.max()) + 1} but "
                        f"{base}_graph_labels.txt has {G} graphs")
    bad = np.nonzero((edges < 0) | (edges >= N))[0]
    if bad.size:
        raise DataError(f"{base}_A.txt: line {int(bad[0]) + 1}: edge names node "
                        f"{int(edges[bad[0]].max()) + 1} but there are {N} nodes")
    cross = np.nonzero(graph_of[edges[:, 0]] != graph_of[edges[:, 1]])[0]
    if cross.size:
        raise DataError(f"{base}_A.txt: line {int(cross[0]) + 1}: edge joins two different graphs")
    if os.path.exists(base + "_node_labels.txt"):
        node_labels = _ints(base + "_node_labels.txt", None)[:, 0]
        if len(node_labels) != N:
            raise DataError(f"{base}_node_labels.txt: {len(node_labels)} labels for {N} nodes")
    else:
        node_labels = np.bincount(edges[:, 0], minlength=N)          # degree when unlabelled
        notices.append(f"{name}: no node labels; node degrees used instead")
    require_memory(held + matrix_bytes(G, dims), f"{base}: {G} graphs x {dims} features"
                   + (" (with the sets before it)" if held else ""), "lower --dims (64 is the default)")
    X = wl_features(edges, graph_of, node_labels, G, dims, iterations)
    return X, seen.add_all(name, glabels.tolist(), f"{base}_graph_labels.txt", lines=True)


def import_tudataset(src, out, *, dims: int = 64, sets=DEFAULT_SETS, iterations: int = 3,
                     label_map=None) -> TaskMeta:
    """One task per TU data set (default the paper's chemistry stand-ins), WL features of ``dims``;
    graph labels -1/+1 or 0/1, or any others with ``label_map`` (--label-map)."""
    src, out = str(src), str(out)
    check_output(src, out, "TU data folder")
    check_options(dims=dims, iterations=iterations)
    label_map = parse_label_map(label_map)
    sets = check_groups(sets, "--sets")
    seen, notices, X_list, key_lists = SeenLabels(), [], [], []
    for name in sets:
        X, keys = read_tu(src, name, dims, iterations, notices, seen,
                          held=sum(matrix_bytes(*X.shape) for X in X_list))
        X_list.append(X)
        key_lists.append(keys)
    decided = decide_labels(seen, src, label_map, notices=notices)
    names, X_list, y_list = relabel(list(sets), X_list, key_lists, decided, src, notices)
    check_features(src, names, X_list)
    write_tasks(out, names, X_list, y_list, source="TUDataset (Morris et al. 2020)",
                description=f"Weisfeiler-Lehman subtree histograms, {iterations} iterations, "
                            f"hashed to {dims} dims")
    tell(notices)
    return read_meta(out)
