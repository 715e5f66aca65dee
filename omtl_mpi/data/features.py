"""What a learner sees of each instance: the stream's features, optionally scaled online and
with a constant feature for the intercept (``omtl-mpi run --scale online --intercept``).

Both transform each task's stream in the order it is presented, before learning, and neither
looks ahead (instance t with what the stream showed up to t), so every layout of ranks sees the
same numbers (docs/DESIGN.md, *Intercept and feature scaling*; docs/ALGORITHMS.md)."""
from __future__ import annotations

import numpy as np

SCALES = ("none", "online")


def model_dim(dim: int, intercept: bool) -> int:
    """The number of weights per task for a data set of ``dim`` features."""
    return dim + int(bool(intercept))


def online_scale(X: np.ndarray, axis: int = 0, start=None) -> np.ndarray:
    """``X`` (n, d) with column j divided by ``max |X[:t+1, j]|`` at row t (1 while 0) along
    ``axis``; ``start``: the largest absolute values seen before ``X``, of a stream in pieces."""
    if not X.size:
        return np.array(X, dtype=np.float64)
    scale = np.maximum.accumulate(np.abs(X), axis=axis)
    if start is not None:
        scale = np.maximum(scale, start)
    return X / np.where(scale > 0.0, scale, 1.0)


def prepare(X_list, intercept: bool = False, scale: str = "none") -> list:
    """Every task's features as the learners see them: each stream of ``X_list`` scaled by
    ``scale`` ("none" or "online"), with a constant feature 1 appended where ``intercept``."""
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; choose one of {', '.join(SCALES)}")
    return [np.hstack((Xs, np.ones((len(Xs), 1)))) if intercept else Xs
            for Xs in (online_scale(X) if scale == "online" else X for X in X_list)]
