"""Task streams reshaped into rounds, so that one round of a block of tasks is one array slice."""
from __future__ import annotations

import math

import numpy as np


def rounds_needed(lengths, batch: int) -> int:
    """Number of rounds T of a run: the longest stream divided into mini-batches of ``batch``."""
    return int(math.ceil(int(np.max(lengths)) / batch)) if len(lengths) else 0


class RoundBatches:
    """Round-major, zero-padded view of a block of task streams.

    ``X[t]`` is the (B, kb, d) mini-batch of round t for the kb tasks of the block, ``y[t]`` its
    (B, kb) labels with 0 marking padding (a task whose stream has ended, or a short last batch).
    Padding rows are all-zero with label 0, which every loss maps to a zero gradient.

    Parameters
    ----------
    X_list, y_list : list of arrays
        Per task: features (n_k, d) and labels (n_k,) in {-1, +1}.
    batch : int
        Mini-batch size B >= 1.
    rounds : int
        Number of rounds T of the whole run (the longest stream over *all* tasks, so that
        every rank runs the same rounds).
    """

    def __init__(self, X_list, y_list, batch: int, rounds: int, dim: int):
        kb = len(X_list)
        self.batch, self.rounds, self.n_tasks = batch, rounds, kb
        self.lengths = np.array([len(y) for y in y_list], dtype=np.int64)
        self.X = np.zeros((rounds, batch, kb, dim))
        self.y = np.zeros((rounds, batch, kb), dtype=np.int8)
        flat_X = self.X.reshape(rounds * batch, kb, dim)
        flat_y = self.y.reshape(rounds * batch, kb)
        for k, (Xk, yk) in enumerate(zip(X_list, y_list)):
            flat_X[: len(yk), k, :] = Xk
            flat_y[: len(yk), k] = yk
        # the learners take labels as floats (no int-to-float conversion on every round)
        self.y_float = self.y.astype(np.float64)
        count = (self.y != 0).sum(axis=1)                       # (T, kb) real instances
        self.count = count.astype(np.int64)
        self.inv_count = 1.0 / np.maximum(count, 1)

    def __len__(self) -> int:
        return self.rounds

    def __getitem__(self, t: int):
        return self.X[t], self.y_float[t], self.inv_count[t]
