"""What the generic checks share: the learner they are given, its streams and rounds, and
bit-for-bit comparison of states."""
import numpy as np

from ..learners import first_difference


def _learner(obj):
    """A learner object from a learner, a learner class or a learner's name."""
    from ..learners import Learner, learner
    if isinstance(obj, Learner):
        return obj
    if isinstance(obj, type) and issubclass(obj, Learner):
        return learner(obj.algo, 3, 4, **_needed(obj.algo))
    if isinstance(obj, str):
        return learner(obj, 3, 4, **_needed(obj))
    raise TypeError(f"check_learner takes a learner, a learner class or a learner's name, got {obj!r}")


def _needed(algo: str) -> dict:
    """Parameters a learner cannot do without (eta's run length for the euclid w-step)."""
    from ..learners import parameters
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
    return where if x.shape != z.shape or x.dtype != z.dtype or x.tobytes() != z.tobytes() else None


class _Skip(Exception):
    """A check that does not apply (the reason is the message)."""
