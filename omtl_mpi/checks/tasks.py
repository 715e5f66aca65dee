"""The checks that every task is its own: its decision alone in a round is the one beside the
others, and learning it leaves the other tasks' rows as they were."""
import numpy as np

from .common import _learn, _streams


def check_a_task_alone_decides_as_beside_others(m):
    """A task's decision is the same alone in a round as beside every other task, for each task,
    the last included (where the other checks' active tasks 0..j cannot tell a role that ignores
    ``active`` from one that reads it)."""
    X, y = _streams(m)
    _learn(m, X, y, rounds=10)
    K = m.n_tasks
    Xr = np.stack([X[k][-1] for k in range(K)])[:, None]          # (K, 1, d): every task
    together = m.decision_round(Xr)[:, 0]
    for k in range(K):
        values = np.array([m.decision_round(Xr, np.arange(K) == k)[k, 0],
                           m.decision_one(X[k][-1], task=k)])
        # equal up to rounding: a sum over one task's row or over every task's rows
        assert np.allclose(values, together[k], rtol=1e-9, atol=1e-12), (
            f"task {k}'s decision alone in a round ({values[0]!r}, decision_one {values[1]!r}) "
            f"is not the one beside the other tasks ({together[k]!r}): does a role read the "
            "rows of the round's active tasks (its argument active)?")


def _task_rows(m) -> dict:
    """Every per-task array of the learner's task holders by name, the tasks first, with the
    run's task of each row: the arrays a role of this package declares in ``ROW_AXES`` (those
    the undo of a failed call relies on a round to change at its active tasks only), walked as
    the undo walks them; for a role of another package, the ``TASK_AXIS`` arrays of its
    ``state()``."""
    from ..algorithms import undo
    out = {}

    def walk(obj, where, first):
        if id(obj) in seen:
            return
        seen.add(id(obj))
        axes = obj.row_axes() if hasattr(obj, "row_axes") else getattr(obj, "ROW_AXES", {})
        for name, value in vars(obj).items():
            if isinstance(value, np.ndarray) and name in axes:
                out[f"{where}.{name}"] = (first, np.moveaxis(value, axes[name], 0).copy())
            elif undo.walkable(value) and not isinstance(value, type):
                walk(value, f"{where}.{name}", first)
    for i, (holder, (a, _)) in enumerate(zip(m._roles.holders, m._roles.blocks)):
        seen: set = set()
        if undo.walkable(holder):
            walk(holder, f"holder{i}", a)
            continue
        state = holder.state()
        for key, axis in (getattr(type(holder), "TASK_AXIS", None) or {}).items():
            out[f"holder{i}.{key}"] = (a, np.moveaxis(np.asarray(state[key]), axis, 0).copy())
    return out


def check_learning_a_task_leaves_the_others(m):
    """Learning one task (the last, then the first) leaves every other task's rows of every
    per-task array as they were, to the bit (which the undo of a failed call relies on)."""
    X, y = _streams(m)
    _learn(m, X, y, rounds=10)
    K = m.n_tasks
    for k in (K - 1, 0):
        before = _task_rows(m)
        m.learn_one(X[k][-1], int(y[k][-1]), task=k)
        after = _task_rows(m)
        for name in before.keys() & after.keys():       # a cache dropped is no row changed
            first, old = before[name]
            new = after[name][1]
            others = [i for i in range(len(old)) if first + i != k]
            if old.shape != new.shape or not np.array_equal(old[others], new[others]):
                moved = [first + i for i in others if i >= len(new) or not np.array_equal(old[i], new[i])]
                raise AssertionError(f"learning task {k} changed {name} of task "
                                     f"{moved[0] if moved else '?'}, which had no instance in "
                                     "the round")
