"""The generic checks every learner passes, in the manner of river's ``check_estimator`` and
scikit-learn's (whose own suites run on the learners too: river's on every learner with a
``task_key``, scikit-learn's on :class:`omtl_mpi.sklearn.MultiTaskClassifier`, in the project's
tests): named checks, each run on a fresh clone of the learner given.

:func:`check_learner` runs them all and raises AssertionError naming the check that failed;
:func:`learner_checks` lists them, and :func:`parametrize_with_checks` turns them into one
pytest case per learner and check. A learner may skip checks by name: a class attribute
``check_skips`` of the learner's class, or ``CHECK_SKIPS`` of its role class (a set of names,
each skip explained in a comment beside it), or ``skip=`` here.

What is checked, one check each:

* the usual: a fresh learner predicts; the same inputs give the same bits; no method changes
  its inputs, nor a role the arrays of its round; bad input raises one UserError and changes
  nothing;
* predicting changes nothing: not the state, and not any attribute of the role objects (a
  counter kept outside ``state()`` included; scratch they declare in ``NOT_STATE`` aside), and
  learning with predictions in between (progressive validation) is learning without them;
* every task is its own: a task's decision is the same alone in a round as beside the others
  (in the first rounds the active tasks are 0..j, where a role that ignores ``active`` cannot
  be told from one that reads it), and learning one task leaves every other task's rows of
  every per-task array as they were (those a role declares in ``ROW_AXES``, which the undo of
  a failed call relies on, or ``TASK_AXIS``'s of its ``state()``);
* state and copies: a state round trip (``state_dict``, and a saved file) continues bit for
  bit, and so do ``copy.copy``, ``copy.deepcopy`` and a pickle round trip, mid-stream;
* rounds: ``learn_one`` is the round it stands for; ``partial_fit`` is ``omtl-mpi run``'s
  rounds; the decision's sign is the prediction the round makes; mini-batches predict every
  active instance;
* one process equals MPI (``run_streams`` under ``mpiexec``, with several tasks on a rank),
  for the learners whose module the ranks can import.
"""
from __future__ import annotations

import copy
import os
import pickle
import re
import subprocess
import sys
import tempfile

import numpy as np

from .errors import UserError
from .learners import first_difference


def _learner(obj):
    """A learner object from a learner, a learner class or a learner's name."""
    from .learners import Learner, learner
    if isinstance(obj, Learner):
        return obj
    if isinstance(obj, type) and issubclass(obj, Learner):
        return learner(obj.algo, 3, 4, **_needed(obj.algo))
    if isinstance(obj, str):
        return learner(obj, 3, 4, **_needed(obj))
    raise TypeError(f"check_learner takes a learner, a learner class or a learner's name, got {obj!r}")


def _needed(algo: str) -> dict:
    """Parameters a learner cannot do without (eta's run length for the euclid w-step)."""
    from .learners import parameters
    return {"rounds": 40} if "eta" in parameters(algo) else {}


def _streams(m, seed: int = 0, longest: int = 40):
    """Related tasks for learner ``m`` (its K and d), of unequal lengths, labels -1/+1."""
    rng = np.random.default_rng(seed)
    K, d = m.n_tasks, m.n_features
    shared = rng.normal(size=d)
    lengths = [longest - (k * 7) % 15 for k in range(K)]
    X, y = [], []
    for k in range(K):
        w = shared + 0.5 * rng.normal(size=d)
        Xk = rng.normal(size=(lengths[k], d))
        X.append(Xk)
        y.append(np.where(Xk @ w >= 0.0, 1, -1).astype(np.int8))
    return X, y


def _round_major(X, y):
    """Streams as rounds: (X (K, 1, d), y (K, 1), active (K,)) per round, batch 1."""
    K, d = len(X), X[0].shape[1]
    for t in range(max(len(v) for v in y)):
        Xr, yr = np.zeros((K, 1, d)), np.zeros((K, 1), dtype=np.int8)
        act = np.array([t < len(v) for v in y])
        for k in np.nonzero(act)[0]:
            Xr[k, 0], yr[k, 0] = X[k][t], y[k][t]
        yield Xr, yr, act


def _learn(m, X, y, rounds=None):
    """Learn streams round by round; the predictions of every round, stacked."""
    out = []
    for t, (Xr, yr, act) in enumerate(_round_major(X, y)):
        if rounds is not None and t >= rounds:
            break
        out.append(m.learn_round(Xr, yr, act))
    return np.concatenate(out, axis=1)


def _same_state(a, b, where="state") -> str | None:
    """Where two state trees differ in a single bit (None: identical)."""
    return first_difference(a, b, where, _same_bits)


def _same_bits(a, b, where: str) -> str | None:
    x, z = np.asarray(a), np.asarray(b)
    if x.shape != z.shape or x.dtype != z.dtype or x.tobytes() != z.tobytes():
        return where
    return None


# ----------------------------------------------------------------------------- the checks
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


def check_a_task_alone_decides_as_beside_others(m):
    """A task's decision is the same alone in a round as beside every other task, for each
    task, the last one included (in the first rounds of the other checks the active tasks are
    0..j, where a role that ignores its argument ``active`` cannot be told from one that
    reads it)."""
    X, y = _streams(m)
    _learn(m, X, y, rounds=10)
    K = m.n_tasks
    Xr = np.stack([X[k][-1] for k in range(K)])[:, None]          # (K, 1, d): every task
    together = m.decision_round(Xr)[:, 0]
    for k in range(K):
        alone = np.zeros(K, dtype=bool)
        alone[k] = True
        values = np.array([m.decision_round(Xr, alone)[k, 0], m.decision_one(X[k][-1], task=k)])
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
    from .algorithms import undo
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
    per-task array as they were, to the bit (a role that learns into rows other than its
    active tasks' is found, and a ``ROW_AXES`` that names an array a round changes elsewhere:
    the undo of a failed call relies on it)."""
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


def check_copies_continue(m):
    """copy.copy, copy.deepcopy and a pickle round trip, made mid-stream, continue bit for
    bit as the learner does (river's ensembles and process pools copy learners so)."""
    X, y = _streams(m)
    rounds = list(_round_major(X, y))
    half = len(rounds) // 2
    for Xr, yr, act in rounds[:half]:
        m.learn_round(Xr, yr, act)
    copies = {}
    for how, make in (("copy.copy", copy.copy), ("copy.deepcopy", copy.deepcopy),
                      ("pickle", lambda m: pickle.loads(pickle.dumps(m)))):
        try:
            copies[how] = make(m)
        except (TypeError, AttributeError, pickle.PicklingError) as exc:
            raise AssertionError(f"a {how} of the learner cannot be made: {exc}") from exc
    for Xr, yr, act in rounds[half:]:
        made = m.learn_round(Xr, yr, act)
        for how, other in copies.items():
            assert np.array_equal(made, other.learn_round(Xr, yr, act)), \
                f"a {how} of the learner predicts otherwise than the learner"
    for how, other in copies.items():
        where = _same_state(m.state_dict()["state"], other.state_dict()["state"])
        assert where is None, f"a {how} of the learner learned otherwise, at {where}"


def check_decision_is_the_rounds_prediction(m):
    """The sign of the decision before a round is the prediction the round makes."""
    X, y = _streams(m)
    for t, (Xr, yr, act) in enumerate(_round_major(X, y)):
        decided = m.decision_round(Xr, act)
        made = m.learn_round(Xr, yr, act)
        want = np.where(act[:, None], np.where(decided >= 0.0, 1, -1), 0)
        assert np.array_equal(made, want), (f"round {t}: the decision's sign is not the "
                                            "prediction the round made")


def check_state_round_trip(m):
    """A state loaded into a fresh learner (and a saved file, loaded) continues bit for bit."""
    from .learners import load
    X, y = _streams(m)
    rounds = list(_round_major(X, y))
    half = len(rounds) // 2
    for Xr, yr, act in rounds[:half]:
        m.learn_round(Xr, yr, act)
    copy_ = m.clone().load_state_dict(m.state_dict())
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "learner.h5")
        m.save(path)
        loaded = load(path)
    for Xr, yr, act in rounds[half:]:
        a = m.learn_round(Xr, yr, act)
        for other, how in ((copy_, "load_state_dict"), (loaded, "save and load")):
            assert np.array_equal(a, other.learn_round(Xr, yr, act)), \
                f"predictions differ after a state round trip ({how})"
    for other, how in ((copy_, "load_state_dict"), (loaded, "save and load")):
        where = _same_state(m.state_dict()["state"], other.state_dict()["state"])
        assert where is None, f"state differs after a state round trip ({how}) at {where}"


def check_learn_one_is_a_round(m):
    """learn_one(x, y, task=k) is the round in which only task k is active."""
    X, y = _streams(m)
    other = m.clone()
    K, d = m.n_tasks, m.n_features
    for t in range(12):
        k = (3 * t) % K
        x, label = X[k][t], int(y[k][t])
        m.learn_one(x, label, task=k)
        Xr = np.zeros((K, 1, d))
        Xr[k, 0] = x
        yr = np.ones((K, 1), dtype=np.int8)
        yr[k, 0] = label
        act = np.zeros(K, dtype=bool)
        act[k] = True
        other.learn_round(Xr, yr, act)
    where = _same_state(m.state_dict()["state"], other.state_dict()["state"])
    assert where is None, f"learn_one is not the round it stands for: state differs at {where}"


def check_partial_fit_is_rounds(m):
    """partial_fit takes each task's instances in order, round j their j-th: as learn_round."""
    X, y = _streams(m)
    other = m.clone()
    rows = np.concatenate(X)
    labels = np.concatenate(y)
    tasks = np.concatenate([np.full(len(v), k) for k, v in enumerate(y)])
    m.partial_fit(rows, labels, tasks=tasks)
    _learn(other, X, y)
    where = _same_state(m.state_dict()["state"], other.state_dict()["state"])
    assert where is None, f"partial_fit does not learn as the rounds do: state differs at {where}"


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


def check_mini_batches(m):
    """Rounds of several instances per task (some of them inactive) predict every active
    instance, -1 or +1, and nothing else."""
    X, y = _streams(m)
    B, K = 3, m.n_tasks
    rng = np.random.default_rng(1)
    for t in range(8):
        Xr = np.stack([X[k][t * B:(t + 1) * B] for k in range(K)])
        yr = np.stack([y[k][t * B:(t + 1) * B] for k in range(K)])
        active = rng.random((K, B)) < 0.7
        made = m.learn_round(Xr, yr, active)
        assert made.shape == (K, B), f"learn_round with B = {B} returned shape {made.shape}"
        assert set(np.unique(made[active])) <= {-1, 1} and not made[~active].any(), \
            "mini-batch predictions are not -1/+1 where active and 0 elsewhere"
    assert m.n_seen_.sum() > 0 and np.isfinite(m.W_).all()


def check_one_process_equals_mpi(m):
    """run_streams on 3 ranks (the learner's nodes for a neighbour learner) predicts as in
    one process (the learner's module is imported by every rank)."""
    from .algorithms import registry
    from .streams import run_streams
    spec = registry.get(m.algo)
    module = (spec.worker or spec.node).__module__
    if module == "__main__":
        raise _Skip("the learner is defined in the script itself, which MPI ranks cannot "
                    "import: put it in a module (a .py file) that the script imports")
    X, y = _streams(m, longest=30)
    params = {k: v for k, v in m.get_params().items()
              if k not in ("n_tasks", "n_features", "task_key", "default_task")}
    K = m.n_tasks
    # fewer holders than tasks, so that some rank holds several (a role that ignores which of
    # its tasks are active passes with one task a rank)
    if spec.pattern == "neighbours":
        ranks = params.get("nodes") or (K if spec.one_task_per_node else max(2, K - 1))
        params["nodes"] = ranks
    elif spec.pattern == "server":
        ranks = 1 + max(1, min(2, K - 1))
    else:
        ranks = max(1, min(2, K - 1))
    params.pop("rounds")            # a run knows its length (eta = sqrt(T) is derived from it)
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if not os.access(mpiexec, os.X_OK):
        raise _Skip("no mpiexec next to this Python")
    local = run_streams(X, y, m.algo, **params)
    with tempfile.TemporaryDirectory() as tmp:
        np.savez(os.path.join(tmp, "in.npz"), *X, *y)
        script = (
            "import sys, json, numpy as np, importlib\n"
            f"importlib.import_module({module!r})\n"
            "import omtl_mpi\n"
            f"z = np.load({os.path.join(tmp, 'in.npz')!r})\n"
            f"a = [z[f'arr_{{i}}'] for i in range({2 * K})]\n"
            f"res = omtl_mpi.run_streams(a[:{K}], a[{K}:], {m.algo!r}, **json.loads({_json(params)!r}))\n"
            f"res is None or res.save({os.path.join(tmp, 'out.h5')!r})\n"
            f"res is None or res.learner.save({os.path.join(tmp, 'learner.h5')!r})\n")
        env = {**os.environ, "MPIEXEC_TIMEOUT": "120", "PYTHONPATH": os.pathsep.join(sys.path)}
        try:
            done = subprocess.run([mpiexec, "-n", str(ranks), sys.executable, "-m", "mpi4py", "-c",
                                   script], capture_output=True, text=True, timeout=150, env=env)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the MPI run on {ranks} ranks did not end within 150 s") from None
        assert done.returncode == 0, f"the MPI run failed: {_last_error(done.stderr)}"
        from .learners import load
        from .streams import load_result
        remote = load_result(os.path.join(tmp, "out.h5"))
        fitted = load(os.path.join(tmp, "learner.h5"))
    for k in range(K):
        assert np.array_equal(local.predictions[k], remote.predictions[k]), \
            f"task {k}: predictions on {ranks} ranks differ from one process"
    for key, value in local.model.items():
        assert np.allclose(value, remote.model[key], rtol=0, atol=1e-10), \
            f"{key} on {ranks} ranks differs from one process"
    # the learner gathered from the ranks (its blocks joined by TASK_AXIS) is the one of one
    # process: the same state, and it decides alike
    where = first_difference(fitted.state_dict()["state"], local.learner.state_dict()["state"],
                             "state", _close)
    assert where is None, (f"the learner gathered from {ranks} ranks differs from one process's "
                           f"at {where} (is TASK_AXIS right?)")


def _close(a, b, where: str) -> str | None:
    x, z = np.asarray(a), np.asarray(b)
    if x.shape != z.shape or not np.allclose(x, z, rtol=0, atol=1e-10):
        return where
    return None


def _last_error(stderr: str) -> str:
    """The line of a rank's traceback that says what went wrong (the last ``...Error: ...``)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    found = [line for line in lines if re.match(r"^[\w.]*(Error|Exception)\b", line)]
    return found[-1] if found else (lines[-1] if lines else "no message")


def _json(params: dict) -> str:
    import json
    return json.dumps(params)


class _Skip(Exception):
    """A check that does not apply (the reason is the message)."""


CHECKS = (check_predict_before_learning, check_deterministic, check_inputs_not_mutated,
          check_predict_changes_nothing, check_predicting_changes_no_attribute,
          check_a_task_alone_decides_as_beside_others, check_learning_a_task_leaves_the_others,
          check_decision_is_the_rounds_prediction,
          check_state_round_trip, check_copies_continue, check_learn_one_is_a_round,
          check_partial_fit_is_rounds, check_mini_batches, check_bad_input_changes_nothing,
          check_one_process_equals_mpi)


def learner_checks(obj, skip=()) -> list:
    """The checks that apply to a learner: ``(name, check)`` pairs, ``check()`` (or
    ``check(learner)``, as scikit-learn's) running the named check on a fresh clone of it."""
    m = _learner(obj)
    skips = set(skip) | set(getattr(type(m), "check_skips", ()))
    unknown = skips - {c.__name__ for c in CHECKS}
    if unknown:
        raise ValueError(f"no such check: {', '.join(sorted(unknown))}")

    def bound(check):
        def run(learner=None):
            clone = (m if learner is None else learner).clone()
            _watch_decisions(clone)
            try:
                check(clone)
            except _Skip:
                raise
            except AssertionError as exc:       # the check's own finding says it all
                raise AssertionError(f"{check.__name__}: {exc}") from None
            except Exception as exc:
                # a learner's own bug (a TypeError in its decide) named by the check that met
                # it, the learner and where it was raised; its traceback stays chained
                raise AssertionError(f"{check.__name__}: {type(clone).__name__} raised "
                                     f"{type(exc).__name__}: {exc} ({_raised_at(exc)})") from exc
        run.__name__ = check.__name__
        return run
    return [(c.__name__, bound(c)) for c in CHECKS if c.__name__ not in skips]


def _raised_at(exc: BaseException) -> str:
    """Where ``exc`` was raised: the deepest frame of its traceback outside numpy and scipy
    (a broadcast error is the caller's line, not numpy's)."""
    import traceback
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not re.search(r"[\\/](numpy|scipy)[\\/]", f.filename)]
    if not frames:
        return "in numpy"
    f = frames[-1]
    return f"{os.path.basename(f.filename)}, line {f.lineno}, in {f.name}"


def _watch_decisions(m) -> None:
    """Wrap each of the learner's role holders' ``decide`` so that a result off the contract's
    (decision values: an array (B, na) for instances X (B, na, d)) fails where it is returned,
    naming the role, rather than as a broadcast error later, or not at all (a row (na,)
    broadcasts over the instances silently)."""
    for holder in getattr(getattr(m, "_roles", None), "holders", ()):
        method = getattr(holder, "decide", None)
        if method is None:
            continue

        def decide(X, *args, _method=method, _name=f"{type(holder).__name__}.decide", **kwargs):
            out = _method(X, *args, **kwargs)
            want = tuple(np.shape(X)[:2])
            if not isinstance(out, np.ndarray) or out.shape != want or out.dtype.kind not in "fiu":
                got = (f"an array of shape {out.shape} and dtype {out.dtype}"
                       if isinstance(out, np.ndarray) else
                       "None" if out is None else f"a {type(out).__name__}")
                raise AssertionError(f"{_name} returned {got} for instances of shape "
                                     f"{tuple(np.shape(X))}; the contract's decision values are "
                                     f"an array of numbers of shape (B, na) = {want}")
            return out
        setattr(holder, "decide", decide)           # the learner looks it up per call


def check_learner(obj, skip=(), mpi: bool = True) -> list:
    """Run every generic check on a learner (each on a fresh clone).

    Parameters
    ----------
    obj : Learner, learner class or str
        The learner to check (a class or a name is built with 3 tasks and 4 features).
    skip : iterable of str
        Checks to leave out, by name.
    mpi : bool
        Include the one-process == MPI check (it starts ``mpiexec``: seconds).

    Returns
    -------
    list of str
        The checks that were skipped as not applying, each with its reason.

    Raises
    ------
    AssertionError
        Naming the first check that failed and what it found; where the learner itself raised
        (a TypeError in its ``decide``), the learner, the exception and where it was raised,
        with the exception chained.

    Examples
    --------
    >>> import omtl_mpi
    >>> omtl_mpi.check_learner("pa", mpi=False)
    []
    """
    skipped = []
    skip = set(skip) | (set() if mpi else {"check_one_process_equals_mpi"})
    for name, run in learner_checks(obj, skip):
        try:
            run()                   # a failure names its check (learner_checks)
        except _Skip as why:
            skipped.append(f"{name}: {why}")
    return skipped


def parametrize_with_checks(learners, skip=()):
    """A pytest decorator: one case per learner and check, with the arguments ``learner`` and
    ``check``; ``check(learner)`` runs the check on a clone of it (scikit-learn's habit), and a
    check that does not apply is skipped with its reason.

    Examples
    --------
    >>> from omtl_mpi.checks import parametrize_with_checks
    >>> @parametrize_with_checks(["pa", "arow"])
    ... def test_learner(learner, check):
    ...     check(learner)
    """
    import pytest
    cases, ids = [], []
    for obj in learners:
        m = _learner(obj)
        for name, run in learner_checks(m, skip):
            cases.append((m, run))
            ids.append(f"{type(m).__name__}-{name}")

    def skipping(run):
        def call(learner=None):
            try:
                run(learner)
            except _Skip as why:
                pytest.skip(str(why))
        return call
    return pytest.mark.parametrize("learner,check", [(m, skipping(r)) for m, r in cases], ids=ids)
