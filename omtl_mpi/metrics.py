"""Online-learning metrics of docs/ALGORITHMS.md section 6, computed from mistakes and
predictions (pure numpy)."""
from __future__ import annotations

import numpy as np


def offsets_of(lengths) -> np.ndarray:
    """(K + 1,) offsets of each task's instances in a task-major flat array."""
    return np.concatenate(([0], np.cumsum(np.asarray(lengths, dtype=np.int64))))


def mean_curve(mistakes: np.ndarray, lengths, batch: int, rounds: int) -> np.ndarray:
    """The paper's Figure 1 curve: the mean over tasks of each task's cumulative error rate
    after every round, (T,), from every instance's mistake (task-major, flat): a task's rate
    after round t is its mistakes over its instances in rounds 0..t, its final value once its
    stream has ended; each round sums the tasks in task order, so it is reproducible."""
    lengths = np.asarray(lengths, dtype=np.int64)
    K = len(lengths)
    offsets = offsets_of(lengths)
    per_task = -(-lengths // batch)
    cum = np.cumsum(mistakes, dtype=np.float64)
    before = np.concatenate(([0.0], cum))[offsets[:-1]]         # mistakes before each task
    # each (task, round) pair: the task's last instance in the round, rounds 0..per_task-1
    task = np.repeat(np.arange(K), per_task)
    r = np.arange(int(per_task.sum()), dtype=np.int64) - np.repeat(offsets_of(per_task)[:-1], per_task)
    seen = np.minimum((r + 1) * batch, lengths[task])
    rate = (cum[offsets[task] + seen - 1] - before[task]) / seen
    running = np.bincount(r, weights=rate, minlength=rounds)[:rounds]
    final = (cum[offsets[1:] - 1] - before) / lengths
    ended = np.cumsum(np.bincount(per_task, weights=final, minlength=rounds + 1)[:rounds])
    return (running + ended) / max(K, 1)


def rounds_to_accuracy(curve: np.ndarray, target: float, first: int = 10):
    """First round t >= ``first`` (1-based) at which mean cumulative accuracy >= ``target``, else None."""
    ok = np.nonzero(1.0 - curve[first - 1:] >= target)[0]
    return int(ok[0]) + first if ok.size else None


def confusion(yhat: np.ndarray, y: np.ndarray, lengths) -> np.ndarray:
    """(tp, fp, fn, tn) of the positive class for every task, (K, 4), of every instance's
    prediction ``yhat`` and label ``y`` (int8 -1/+1, task-major) and the tasks' ``lengths``
    (each >= 1)."""
    pos_pred = yhat == 1
    pos = y == 1
    starts = offsets_of(lengths)[:-1]
    counts = [np.add.reduceat(c.astype(np.int64), starts) if len(starts) else np.zeros(0, np.int64)
              for c in (pos_pred & pos, pos_pred & ~pos, ~pos_pred & pos, ~pos_pred & ~pos)]
    return np.stack(counts, axis=1)


def balanced_error(conf: np.ndarray) -> np.ndarray:
    """Balanced error rate per task: mean of the false-negative and false-positive rates (a
    class absent from a task's stream left out of its mean)."""
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


# the stream-length classes of :func:`by_length`: tasks with fewer than 10 instances, 10 to 100,
# and more than 100 (the short, middling and long streams of per-customer data)
LENGTH_CLASSES = (("<10", 1, 9), ("10-100", 10, 100), (">100", 101, None))


def by_length(totals: np.ndarray, lengths) -> list:
    """The errors of the tasks in each class of :data:`LENGTH_CLASSES`: a dict per class with
    its ``tasks``, ``instances``, ``mean_error`` (the mean of their own errors) and
    ``overall_error`` (their mistakes over their instances); the errors are None for a class
    without tasks."""
    lengths = np.asarray(lengths, dtype=np.int64)
    out = []
    for name, low, high in LENGTH_CLASSES:
        inside = (lengths >= low) & (lengths <= (high if high is not None else lengths.max(initial=0)))
        n, m = lengths[inside], totals[inside]
        out.append({"lengths": name, "tasks": int(inside.sum()), "instances": int(n.sum()),
                    "mean_error": float((m / n).mean()) if n.size else None,
                    "overall_error": float(m.sum() / n.sum()) if n.size else None})
    return out


def summarise(mistakes: np.ndarray, lengths, batch: int, rounds: int, conf: np.ndarray) -> dict:
    """Every metric of a run from every instance's mistake (N,) int8, task-major, and the
    confusion counts (K, 4): ``mean_error`` is the mean over the tasks of each task's error
    (the paper's), ``overall_error`` the mistakes over all instances (the personalisation
    literature's: long streams weigh more)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    starts = offsets_of(lengths)[:-1]
    totals = (np.add.reduceat(mistakes.astype(np.int64), starts) if len(starts)
              else np.zeros(0, np.int64))
    per_task = totals / np.maximum(lengths, 1)
    ber = balanced_error(conf)
    f1 = f1_positive(conf)
    return {
        "mean_curve": mean_curve(mistakes, lengths, batch, rounds),
        "per_task_error": per_task,
        "mean_error": float(per_task.mean()) if len(per_task) else 0.0,
        "overall_error": float(totals.sum() / max(int(lengths.sum()), 1)),
        "by_length": by_length(totals, lengths),
        "per_task_balanced_error": ber,
        "balanced_error": float(ber.mean()) if len(ber) else 0.0,
        "per_task_f1": f1,
        "f1": float(f1.mean()) if len(f1) else 0.0,
        "mistakes_total": totals,
    }
