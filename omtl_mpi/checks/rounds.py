"""The checks of rounds and state: each way of learning is the round it stands for, and a
state round trip or a copy continues bit for bit."""
import copy
import os
import pickle
import tempfile

import numpy as np

from .common import _learn, _round_major, _same_state, _streams


def check_decision_is_the_rounds_prediction(m):
    """The sign of the decision before a round is the prediction the round makes."""
    X, y = _streams(m)
    for t, (Xr, yr, act) in enumerate(_round_major(X, y)):
        decided = m.decision_round(Xr, act)
        made = m.learn_round(Xr, yr, act)
        want = np.where(act[:, None], np.where(decided >= 0.0, 1, -1), 0)
        assert np.array_equal(made, want), (f"round {t}: the decision's sign is not the "
                                            "prediction the round made")


def check_learn_one_is_a_round(m):
    """learn_one(x, y, task=k) is the round in which only task k is active."""
    X, y = _streams(m)
    other = m.clone()
    K, d = m.n_tasks, m.n_features
    for t in range(12):
        k = (3 * t) % K
        x, label = X[k][t], int(y[k][t])
        m.learn_one(x, label, task=k)
        Xr, yr = np.zeros((K, 1, d)), np.ones((K, 1), dtype=np.int8)
        Xr[k, 0], yr[k, 0] = x, label
        other.learn_round(Xr, yr, np.arange(K) == k)
    where = _same_state(m.state_dict()["state"], other.state_dict()["state"])
    assert where is None, f"learn_one is not the round it stands for: state differs at {where}"


def check_partial_fit_is_rounds(m):
    """partial_fit takes each task's instances in order, round j their j-th: as learn_round."""
    X, y = _streams(m)
    other = m.clone()
    tasks = np.concatenate([np.full(len(v), k) for k, v in enumerate(y)])
    m.partial_fit(np.concatenate(X), np.concatenate(y), tasks=tasks)
    _learn(other, X, y)
    where = _same_state(m.state_dict()["state"], other.state_dict()["state"])
    assert where is None, f"partial_fit does not learn as the rounds do: state differs at {where}"


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


def _continues_alike(m, make, predicts: str, learned: str) -> None:
    """Learn the first half of the streams, then make the other learners (``make(m)``: {how:
    learner}) and learn the rest with each: they predict and end as ``m`` does, bit for bit, or
    AssertionError with ``predicts`` or ``learned`` (formatted with ``how``, ``where``)."""
    X, y = _streams(m)
    rounds = list(_round_major(X, y))
    half = len(rounds) // 2
    for Xr, yr, act in rounds[:half]:
        m.learn_round(Xr, yr, act)
    others = make(m)
    for Xr, yr, act in rounds[half:]:
        made = m.learn_round(Xr, yr, act)
        for how, other in others.items():
            assert np.array_equal(made, other.learn_round(Xr, yr, act)), predicts.format(how=how)
    for how, other in others.items():
        where = _same_state(m.state_dict()["state"], other.state_dict()["state"])
        assert where is None, learned.format(how=how, where=where)


def check_state_round_trip(m):
    """A state loaded into a fresh learner (and a saved file, loaded) continues bit for bit."""
    from ..learners import load

    def loaded(m):
        copied = m.clone().load_state_dict(m.state_dict())
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "learner.h5")
            m.save(path)
            return {"load_state_dict": copied, "save and load": load(path)}
    _continues_alike(m, loaded, "predictions differ after a state round trip ({how})",
                     "state differs after a state round trip ({how}) at {where}")


def check_copies_continue(m):
    """copy.copy, copy.deepcopy and a pickle round trip, made mid-stream, continue bit for
    bit as the learner does (river's ensembles and process pools copy learners so)."""
    def copied(m):
        copies = {}
        for how, make in (("copy.copy", copy.copy), ("copy.deepcopy", copy.deepcopy),
                          ("pickle", lambda m: pickle.loads(pickle.dumps(m)))):
            try:
                copies[how] = make(m)
            except (TypeError, AttributeError, pickle.PicklingError) as exc:
                raise AssertionError(f"a {how} of the learner cannot be made: {exc}") from exc
        return copies
    _continues_alike(m, copied, "a {how} of the learner predicts otherwise than the learner",
                     "a {how} of the learner learned otherwise, at {where}")
