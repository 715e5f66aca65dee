"""The checks that learning and predicting change only what they should: not their inputs, not
the learner when predicting, nothing at all on bad input; and the same inputs, the same bits."""
import copy

import numpy as np

from ..errors import UserError
from .common import _learn, _round_major, _same_state, _streams


def check_predict_before_learning(m):
    """A fresh learner predicts every task, -1 or +1, with finite decisions."""
    X, _ = _streams(m)
    for k in range(m.n_tasks):
        assert m.predict_one(X[k][0], task=k) in (-1, 1), "predict_one is not -1 or +1"
        assert np.isfinite(m.decision_one(X[k][0], task=k)), "decision_one is not finite"
    Xr, _, act = next(_round_major(X, _streams(m)[1]))
    assert set(np.unique(m.predict_round(Xr, act))) <= {-1, 1}


def check_deterministic(m):
    """The same inputs give the same predictions and state, bit for bit."""
    X, y = _streams(m)
    other = m.clone()
    a, b = _learn(m, X, y), _learn(other, X, y)
    assert a.tobytes() == b.tobytes(), "predictions differ between two learners on the same inputs"
    where = _same_state(m.state_dict()["state"], other.state_dict()["state"])
    assert where is None, f"state differs between two learners on the same inputs at {where}"


def _watch_inputs(m) -> list:
    """Wrap the learner's role methods that take a round's arrays so that any change they make
    to them is recorded (by name) in the list returned."""
    changed = []
    for holder in m._roles.holders:
        for name in ("up", "local_step", "decide"):
            method = getattr(holder, name, None)
            if method is None:
                continue

            def watched(*args, _method=method, _name=f"{type(holder).__name__}.{name}"):
                kept = [np.array(a, copy=True) for a in args]
                out = _method(*args)
                if not all(np.array_equal(a, k) for a, k in zip(args, kept)):
                    changed.append(f"{_name} wrote into the arrays of its round")
                predictions = out[0] if _name.endswith(".up") else out
                if not _name.endswith(".decide") and np.asarray(predictions).dtype != bool:
                    changed.append(f"{_name} returned predictions of {np.asarray(predictions).dtype}; "
                                   "the contract's are booleans, True for +1")
                return out
            setattr(holder, name, watched)          # the round loops look it up per run
    return changed


def check_inputs_not_mutated(m):
    """No method changes the arrays it is given, and no role the arrays of its round."""
    changed = _watch_inputs(m)
    X, y = _streams(m)
    copies = copy.deepcopy((X, y))
    rounds = list(_round_major(X, y))[:10]
    kept_rounds = copy.deepcopy(rounds)
    for Xr, yr, act in rounds:
        m.decision_round(Xr, act)
        m.learn_round(Xr, yr, act)
    for t, (given, kept) in enumerate(zip(rounds, kept_rounds)):
        assert all(np.array_equal(a, b) for a, b in zip(given, kept)), \
            f"learn_round changed the arrays of round {t}"
    m.learn_one(X[0][0], int(y[0][0]), task=0)
    rows = np.concatenate([X[k][:3] for k in range(m.n_tasks)])
    labels = np.concatenate([y[k][:3] for k in range(m.n_tasks)])
    tasks = np.repeat(np.arange(m.n_tasks), 3)
    kept = copy.deepcopy((rows, labels, tasks))
    m.partial_fit(rows, labels, tasks=tasks)
    m.predict(rows, tasks=tasks)
    for k in range(m.n_tasks):
        assert np.array_equal(X[k], copies[0][k]) and np.array_equal(y[k], copies[1][k]), \
            f"the input stream of task {k} was changed"
    assert all(np.array_equal(a, b) for a, b in zip((rows, labels, tasks), kept)), \
        "partial_fit or predict changed its input"
    assert not changed, changed[0]


def check_predict_changes_nothing(m):
    """Predictions and decisions leave the learner as it was."""
    X, y = _streams(m)
    _learn(m, X, y, rounds=15)
    before = m.state_dict()["state"]
    for k in range(m.n_tasks):
        m.predict_one(X[k][-1], task=k)
        m.decision_one(X[k][-1], task=k)
    Xr, _, act = next(_round_major(X, y))
    m.predict_round(Xr, act)
    m.decision_round(Xr, act)
    m.predict(np.stack([x[-1] for x in X]), tasks=np.arange(m.n_tasks))
    where = _same_state(before, m.state_dict()["state"])
    assert where is None, f"predicting changed the learner's state at {where}"


def _fingerprint(m) -> list:
    """Every attribute of the learner's role objects, as comparable values: arrays by dtype,
    shape and bytes, other values by repr, objects by their attributes, walked depth first
    (the scratch a class declares in ``NOT_STATE`` left out: it is rewritten before it is
    read). A counter a role keeps outside its ``state()`` shows here."""
    out, seen = [], set()

    def walk(value, where):
        if isinstance(value, np.ndarray):
            out.append((where, value.dtype.str, value.shape, value.tobytes()))
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                walk(item, f"{where}[{i}]")
        elif isinstance(value, dict):
            for key in sorted(value, key=repr):
                walk(value[key], f"{where}[{key!r}]")
        elif hasattr(value, "__dict__") and not isinstance(value, type) and not callable(value):
            if id(value) in seen:
                return
            seen.add(id(value))
            scratch = set(getattr(value, "NOT_STATE", ()))
            for key in sorted(vars(value)):
                if key not in scratch:
                    walk(vars(value)[key], f"{where}.{key}")
        elif isinstance(value, (int, float, str, bool, bytes, type(None), np.generic)):
            out.append((where, repr(value)))
    roles = m._roles
    walk(roles.holders, "holders")
    walk(roles.server, "server")
    return out


def _first_change(before: list, after: list) -> str | None:
    """Where two fingerprints first differ (None: identical)."""
    for a, b in zip(before, after):
        if a != b:
            return a[0]
    if len(before) != len(after):
        return (after if len(after) > len(before) else before)[min(len(before), len(after))][0]
    return None


def check_predicting_changes_no_attribute(m):
    """Predicting leaves every attribute of the role objects as it was, and learning with
    predictions between the calls (river's progressive validation) is learning without."""
    X, y = _streams(m)
    quiet = m.clone()
    K = m.n_tasks
    for t in range(12):
        for k in range(K):
            if t < len(y[k]):
                before = _fingerprint(m)
                m.predict_one(X[k][t], task=k)
                m.decision_one(X[k][t], task=k)
                m.predict_proba_one(X[k][t], task=k)
                where = _first_change(before, _fingerprint(m))
                assert where is None, f"predicting task {k} changed {where}"
                m.learn_one(X[k][t], int(y[k][t]), task=k)
                quiet.learn_one(X[k][t], int(y[k][t]), task=k)
    where = _same_state(m.state_dict()["state"], quiet.state_dict()["state"])
    assert where is None, (f"learning with predictions between the calls differs from learning "
                           f"without them at {where}")


def check_bad_input_changes_nothing(m):
    """Bad inputs raise omtl_mpi.UserError (a ValueError) and change nothing."""
    X, y = _streams(m)
    _learn(m, X, y, rounds=5)
    before = m.state_dict()["state"]
    x = X[0][0]
    nan = x.copy()
    nan[0] = np.nan
    K, d = m.n_tasks, m.n_features
    bad = [lambda: m.learn_one(nan, 1, task=0),
           lambda: m.learn_one(x, 0, task=0),
           lambda: m.learn_one(x, 1, task=K),
           lambda: m.learn_one(x[:-1] if d > 1 else np.zeros(2), 1, task=0),
           lambda: m.learn_round(np.zeros((K + 1, 1, d)), np.ones((K + 1, 1))),
           lambda: m.partial_fit(np.zeros((2, d)), [1, 2], tasks=[0, 0]),
           lambda: m.predict(np.zeros((1, d)), tasks=[-1]),
           lambda: m.load_state_dict({"format": "something else"})]
    for i, call in enumerate(bad):
        try:
            call()
        except UserError:
            pass
        else:
            raise AssertionError(f"bad input {i} was accepted")
        where = _same_state(before, m.state_dict()["state"])
        assert where is None, f"bad input {i} changed the state at {where}"
