"""Landmine (MATLAB cells) and MNIST (idx files or npz) into task-stream files."""
from __future__ import annotations

import gzip
import os

import numpy as np

from ...errors import DataError
from ...paths import regular_file
from ..footprint import images_bytes
from ..taskfile import TaskMeta, read_meta, write_tasks
from .common import (SeenLabels, check_features, check_options, check_output, decide_labels,
                     parse_label_map, relabel, require_file, require_memory, tell)

MNIST_PAIRS = ((0, 5), (1, 6), (2, 7), (3, 8), (4, 9))


def import_landmine(src, out, *, label_map=None) -> TaskMeta:
    """``LandmineData.mat``: cells ``feature`` (1 x K of n_k x d) and ``label`` (1 x K of n_k x 1,
    0/1; other labels with ``label_map``, the --label-map)."""
    from scipy.io import loadmat
    src, out = str(src), str(out)
    check_output(src, out, "Landmine MAT file")
    label_map = parse_label_map(label_map)
    require_file(src, "Landmine MAT file")
    # before reading: its arrays (a MAT file may be compressed, and its cells add their
    # headers): at most about 16 times the file
    require_memory(16.0 * os.path.getsize(src), f"{src}: {os.path.getsize(src):,} bytes of MATLAB cells",
                   "check the file: Landmine's is about 1 MB")
    try:
        mat = loadmat(src)
    except Exception as exc:                  # scipy raises several types for damaged files
        raise DataError(f"{src}: not a readable MATLAB file ({type(exc).__name__}: {exc})") from None
    for key in ("feature", "label"):
        if key not in mat:
            raise DataError(f"{src}: no '{key}' cell array; expected Landmine's 'feature' and 'label'")
    feats, labels = mat["feature"].ravel(), mat["label"].ravel()
    if len(feats) != len(labels) or len(feats) == 0:
        raise DataError(f"{src}: {len(feats)} feature cells but {len(labels)} label cells")
    names = [f"field{k + 1:02d}" for k in range(len(feats))]
    seen, X_list, key_lists, notices = SeenLabels(), [], [], []
    for k, (X, y) in enumerate(zip(feats, labels)):
        try:
            X = np.asarray(X, dtype=np.float64)
            y = np.asarray(y, dtype=np.float64).ravel()
        except (TypeError, ValueError):
            raise DataError(f"{src}: task {k} holds something other than numbers") from None
        if X.ndim != 2 or X.shape[0] != len(y):
            raise DataError(f"{src}: task {k} has features of shape {X.shape} but {len(y)} labels")
        X_list.append(X)
        key_lists.append(seen.add_all(names[k], list(y), f"{src}: task {k}"))
    decided = decide_labels(seen, src, label_map, notices=notices)
    names, X_list, y_list = relabel(names, X_list, key_lists, decided, src, notices)
    check_features(src, names, X_list)
    write_tasks(out, names, X_list, y_list,
                source="Landmine (Xue et al. 2007)", description=f"imported from {os.path.basename(src)}")
    tell(notices)
    return read_meta(out)


def _read_idx(path: str) -> np.ndarray:
    opener = gzip.open if path.endswith(".gz") else open
    if os.path.lexists(path):
        regular_file(path, "MNIST file")        # a FIFO in a source folder would block
    try:
        with opener(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError) as exc:
        raise DataError(f"{path}: unreadable idx file ({exc})") from None
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise DataError(f"{path}: not an idx file of unsigned bytes (bad magic number)")
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    body = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(shape)):
        raise DataError(f"{path}: truncated idx file ({body.size} bytes of data, header says {int(np.prod(shape))})")
    return body.reshape(shape)


def _load_mnist(src: str):
    if os.path.isdir(src):
        found = {key: os.path.join(src, name) for name in os.listdir(src)
                 for key in ("train-images", "train-labels") if name.startswith(key)}
        if len(found) < 2:
            raise DataError(f"{src}: expected train-images-idx3-ubyte[.gz] and train-labels-idx1-ubyte[.gz]")
        return _read_idx(found["train-images"]), _read_idx(found["train-labels"])
    require_file(src, "MNIST file")
    from .npz import read_npz
    arrays = read_npz(src)            # refuses pickles, truncated and damaged archives
    missing = [k for k in ("x_train", "y_train") if k not in arrays]
    if missing:
        raise DataError(f"{src}: no array {missing[0]!r}; expected x_train and y_train "
                        f"(found {', '.join(sorted(arrays)) or 'none'})")
    return arrays["x_train"], arrays["y_train"]


def import_mnist(src, out, *, dims: int | None = None, seed: int = 0) -> TaskMeta:
    """The paper's five tasks 0v5, 1v6, 2v7, 3v8, 4v9 (the first digit positive) on the training
    images: pixels scaled to [0, 1], optionally reduced to ``dims`` by a seeded Gaussian random
    projection (the paper's 512-d ResNet18 features cannot be downloaded here)."""
    src, out = str(src), str(out)
    check_output(src, out, "MNIST folder" if os.path.isdir(src) else "MNIST file")
    check_options(dims=dims, seed=seed)
    images, labels = _load_mnist(src)
    if images.dtype.kind not in "fiub" or labels.dtype.kind not in "fiub":
        raise DataError(f"{src}: images of dtype {images.dtype} and labels of dtype {labels.dtype}; "
                        "numbers expected")
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise DataError(f"{src}: {images.shape} images but labels of shape {labels.shape}; "
                        "expected (n, rows, cols) images and n labels")
    n, pixels = len(images), images.shape[1] * images.shape[2]      # before converting them
    require_memory(images_bytes(n, pixels, dims), f"{src}: {n} images of {pixels} pixels"
                   + (f" projected to {dims} dims" if dims else ""), "lower --dims" if dims else
                   "give --dims to project the pixels to fewer dimensions")
    X = images.reshape(len(images), -1).astype(np.float64) / 255.0
    if dims is not None:
        R = np.random.default_rng(seed).normal(size=(X.shape[1], dims)) / np.sqrt(dims)
        X = X @ R
    names, X_list, y_list = [], [], []
    for a, b in MNIST_PAIRS:
        mask = (labels == a) | (labels == b)
        if not mask.any():
            raise DataError(f"{src}: no image of digit {a} or {b}; expected the digits 0-9 as labels")
        names.append(f"{a}v{b}")
        X_list.append(X[mask])
        y_list.append(np.where(labels[mask] == a, 1, -1).astype(np.int8))
    check_features(src, names, X_list)
    proj = f", random projection to {dims} dims (seed {seed})" if dims else ", raw pixels"
    write_tasks(out, names, X_list, y_list, source="MNIST (LeCun et al.)",
                description=f"tasks 0v5..4v9 on the training images{proj}")
    return read_meta(out)
