"""Online-learning metrics of docs/ALGORITHMS.md section 6, computed from mistakes and
predictions (pure numpy)."""
from __future__ import annotations

import numpy as np


def seen_per_round(lengths, batch: int, rounds: int) -> np.ndarray:
    """Instances of each task delivered in each round, shape (K, T)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    start = np.arange(rounds, dtype=np.int64) * batch
    return np.clip(lengths[:, None] - start[None, :], 0, batch)


def cumulative_error(mistakes: np.ndarray, seen: np.ndarray) -> np.ndarray:
    """Cumulative error rate of every task after every round, shape (K, T).

    After a task's stream has ended its rate stays at its final value.
    """
    cum_m = np.cumsum(mistakes, axis=1, dtype=np.float64)
    cum_n = np.cumsum(seen, axis=1, dtype=np.float64)
    return cum_m / np.maximum(cum_n, 1.0)


def mean_curve(cum_err: np.ndarray) -> np.ndarray:
    """The paper's Figure 1 curve: mean over tasks of the cumulative error rate, per round.

    The sum runs over tasks in task order (axis 0, sequential), so it is reproducible.
    """
    return cum_err.mean(axis=0)


def rounds_to_accuracy(curve: np.ndarray, target: float, first: int = 10):
    """First round t >= ``first`` (1-based) at which mean cumulative accuracy >= ``target``, else None."""
    ok = np.nonzero(1.0 - curve[first - 1:] >= target)[0]
    return int(ok[0]) + first if ok.size else None


def confusion(yhat: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(tp, fp, fn, tn) of the positive class for every task row; label 0 marks padding.

    Parameters
    ----------
    yhat, y : ndarray of int8, shape (K, n)
    """
    real = y != 0
    pos_pred = yhat == 1
    pos = y == 1
    tp = (pos_pred & pos).sum(axis=1)
    fp = (pos_pred & ~pos & real).sum(axis=1)
    fn = (~pos_pred & pos).sum(axis=1)
    tn = (~pos_pred & ~pos & real).sum(axis=1)
    return np.stack([tp, fp, fn, tn], axis=1).astype(np.int64)


def balanced_error(conf: np.ndarray) -> np.ndarray:
    """Balanced error rate per task: mean of the false-negative and false-positive rates.

    A class absent from a task's stream is left out of its mean.
    """
    tp, fp, fn, tn = conf.T.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        fnr = np.where(tp + fn > 0, fn / (tp + fn), np.nan)
        fpr = np.where(fp + tn > 0, fp / (fp + tn), np.nan)
    return np.nanmean(np.stack([fnr, fpr]), axis=0)


def f1_positive(conf: np.ndarray) -> np.ndarray:
    """F1 score of the positive class per task (0 when there is nothing to score)."""
    tp, fp, fn, _ = conf.T.astype(np.float64)
    denom = 2 * tp + fp + fn
    return np.where(denom > 0, 2 * tp / np.maximum(denom, 1.0), 0.0)


def summarise(mistakes: np.ndarray, lengths, batch: int, conf: np.ndarray) -> dict:
    """Every metric of a run from per-round mistakes (K, T) and confusion counts (K, 4)."""
    rounds = mistakes.shape[1]
    seen = seen_per_round(lengths, batch, rounds)
    cum = cumulative_error(mistakes, seen)
    curve = mean_curve(cum)
    per_task = cum[:, -1] if rounds else np.zeros(len(lengths))
    ber = balanced_error(conf)
    f1 = f1_positive(conf)
    return {
        "cumulative_error": cum,
        "mean_curve": curve,
        "per_task_error": per_task,
        "mean_error": float(per_task.mean()),
        "per_task_balanced_error": ber,
        "balanced_error": float(ber.mean()),
        "per_task_f1": f1,
        "f1": float(f1.mean()),
        "mistakes_total": mistakes.sum(axis=1),
    }
