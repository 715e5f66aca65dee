"""Hashed personalisation (``--algo hashed``): one linear model on the features and their copies
crossed with the task, hashed into a table of 2^b weights (Weinberger, Dasgupta, Langford, Smola
and Attenberg, ICML 2009; without hashing, Daume's feature augmentation, ACL 2007): what a new
task knows is the shared part. The table lives on the server (rank 0); a worker holds its
values at its tasks' indices and sends its instances' steps there, which the server adds up in
rank order (so that one process and MPI agree).

The keys, the signs and the two steps per weight (``adagrad``, ``arow``): docs/ALGORITHMS.md
section 5.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..data.sparse import SparseRows
from ..errors import ConfigError
from .contract import QuietServer
from .independent import AROW_R_PER_MEAN_SQ_NORM
from .losses import predict
from .params import Settled, require_positive
from .wsteps import settle_r

HASH_STEPS = ("adagrad", "arow")
# keys of the shared features are j, those of task k's own copies (k + 1) * 2^32 + j
_TASK_KEY = np.uint64(2 ** 32)


def hashed(tasks: np.ndarray, dim: int, bits: int):
    """Table indices and signs (n + 1, dim) of the shared features (row 0) and of the own
    copies of ``tasks`` (the following rows), for a table of 2^bits weights."""
    j = np.arange(dim, dtype=np.uint64)
    keys = np.concatenate([j[None], (np.asarray(tasks, dtype=np.uint64)[:, None] + np.uint64(1))
                           * _TASK_KEY + j[None]])
    # splitmix64 of the keys: 64 well-mixed bits per key, the same on every machine (its
    # products are modulo 2^64)
    with np.errstate(over="ignore"):
        z = keys + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        h = z ^ (z >> np.uint64(31))
    index = (h & np.uint64((1 << bits) - 1)).astype(np.int64)
    sign = np.where(h >> np.uint64(63), -1.0, 1.0)
    return index, sign


@dataclass(frozen=True)
class HashedParams(Settled):
    """Hashed personalisation: the table's size and its per-coordinate step."""

    bits: int = field(default=18, metadata={
        "help": "The table holds 2^BITS weights, shared by the features and their "
                "copies per task (collisions cancel on average; 18: Vowpal Wabbit's default).",
        "metavar": "BITS"})
    hash_step: str = field(default="adagrad", metadata={
        "help": "The step of each weight of the table: adagrad (gamma0 / sqrt(delta + "
                "sum of squared gradients)) or arow (diagonal AROW).", "choices": HASH_STEPS})
    gamma0: float = field(default=0.1, metadata={
        "help": "Step size of the table's AdaGrad steps (> 0)."})
    delta: float = field(default=1.0, metadata={
        "help": "Initial accumulator of the table's squared gradients (> 0)."})
    arow_r: float | None = field(default=None, metadata={
        "help": "AROW's r (> 0). auto: each task's own, from its first nonzero instance.",
        "none_text": "auto"})

    def __post_init__(self):
        if isinstance(self.bits, bool) or not isinstance(self.bits, int) or not 1 <= self.bits <= 40:
            raise ConfigError(f"--bits must be an integer from 1 to 40, got {self.bits!r}")
        if self.hash_step not in HASH_STEPS:
            raise ConfigError(f"--hash-step must be one of {', '.join(HASH_STEPS)}, got "
                              f"{self.hash_step!r}")
        require_positive("gamma0", self.gamma0)
        require_positive("delta", self.delta)
        if self.arow_r is not None:
            require_positive("arow_r", self.arow_r)

    def inactive(self) -> dict:
        """The fields that have no effect with this step, each with the reason."""
        if self.hash_step == "adagrad":
            return {"arow_r": "it is the arow step's r, and the step is adagrad"}
        why = "it is the adagrad step's, and the step is arow"
        return {"gamma0": why, "delta": why}


class HashedWorker:
    """A worker of tasks ``start..stop-1``: predicts from the table's values at its tasks'
    indices and sends its instances' steps at them (:class:`.contract.Worker`)."""

    TASK_AXIS = {"w_own": 0, "P_own": 0, "r": 0}

    def __init__(self, params: HashedParams, n_tasks: int, dim: int, start: int, stop: int):
        self.p, self.dim, self.kb = params, dim, stop - start
        self.index, self.sign = hashed(np.arange(start, stop), dim, params.bits)
        rows = self.kb + 1
        self.w = np.zeros((rows, dim))           # the table at row 0: shared, row 1 + i: task i
        self.P = np.ones((rows, dim))            # arow: the precision there (adagrad: unused)
        self.r = np.full(self.kb, 0.0 if params.arow_r is None else float(params.arow_r))
        self.message = np.zeros(self.up_size(params, n_tasks, self.kb, dim))
        self._sent = np.zeros(0, dtype=np.int64)     # the message's rows written last round

    @staticmethod
    def up_size(params, n_tasks, kb, dim):
        return 2 * (kb + 1) * dim

    down_size = up_size             # the reply is as long as the message

    def _parts(self, active):
        """The signed shared weights (d,) and the active tasks' own (na, d)."""
        own = np.arange(self.kb)[active] + 1
        return self.w[0] * self.sign[0], self.w[own] * self.sign[own], own

    @staticmethod
    def _margins(X, shared, own) -> np.ndarray:
        """(shared + own_k) . x for every instance (B, na), X dense or sparse rows."""
        if isinstance(X, SparseRows):
            return X.dot(shared) + X.margins(own)
        return X @ shared + np.einsum("kd,bkd->bk", own, X)

    def decide(self, X, active=slice(None)) -> np.ndarray:
        """The margins (B, na) :meth:`up` predicts from, changing nothing."""
        shared, own, _ = self._parts(active)
        return self._margins(X, shared, own)

    def up(self, X, y, inv_count, active=slice(None)):
        shared, own, rows = self._parts(active)
        margins = self._margins(X, shared, own)
        yhat = predict(margins)
        step = self.message[: self.message.size // 2].reshape(-1, self.dim)
        extra = self.message[self.message.size // 2:].reshape(-1, self.dim)
        for part in (step, extra):          # only last round's rows were written
            part[self._sent] = 0.0
        self._sent = np.concatenate(([0], rows))
        wrong = (y != 0.0) & (y * margins < 1.0)         # hinge: a margin error
        if isinstance(X, SparseRows):       # O(non-zeros): the same sums over the entries
            own_step, own_extra = self._sparse_steps(X, y, margins, wrong, rows, active)
        elif self.p.hash_step == "adagrad":
            coef = np.where(wrong, -y, 0.0)              # the hinge gradient is coef x
            G = coef[:, :, None] * X                     # every instance's gradient (B, na, d)
            own_step, own_extra = G.sum(axis=0), (G * G).sum(axis=0)
        else:
            r = self._settled_r(X, active)
            inverse = 1.0 / self.P[0] + 1.0 / self.P[rows][None]     # (1, na, d): both copies
            v = np.einsum("bkd,bkd->bk", X * X, inverse)
            alpha = np.where(wrong, (1.0 - y * margins) / (v + r) * y, 0.0)
            own_step = np.einsum("bk,bkd->kd", alpha, X)
            own_extra = np.einsum("bk,bkd->kd", np.where(wrong, 1.0 / r, 0.0), X * X)
        # the same instance steps its shared and its own copy; signs map them to the table
        step[rows] = own_step * self.sign[rows]
        step[0] = own_step.sum(axis=0) * self.sign[0]
        extra[rows] = own_extra
        extra[0] = own_extra.sum(axis=0)
        return yhat, self.message

    def _sparse_steps(self, X: SparseRows, y, margins, wrong, rows, active):
        """The active tasks' steps and squared terms (na, d each) of sparse rows: the dense
        branch's sums of :meth:`up`, over the non-zero entries only."""
        squares = SparseRows(X.data * X.data, X.indices, X.indptr, X.shape)
        if self.p.hash_step == "adagrad":
            coef = np.where(wrong, -y, 0.0)
            return X.combine(coef), squares.combine(coef * coef)
        r = self._settled_r(X, active)
        inverse = 1.0 / self.P[0] + 1.0 / self.P[rows]               # (na, d): both copies
        alpha = np.where(wrong, (1.0 - y * margins) / (squares.margins(inverse) + r) * y, 0.0)
        return X.combine(alpha), squares.combine(np.where(wrong, 1.0 / r, 0.0))

    def _settled_r(self, X, active) -> np.ndarray:
        """Each active task's r (1, na), settled from its first nonzero instance."""
        r = self.r[active]
        settle_r(r, X, AROW_R_PER_MEAN_SQ_NORM)
        self.r[active] = r
        return np.where(r > 0.0, r, 1.0)[None]

    def down(self, msg: np.ndarray) -> None:
        half = msg.size // 2
        self.w[...] = msg[:half].reshape(-1, self.dim)
        self.P[...] = msg[half:].reshape(-1, self.dim)

    def state(self) -> dict:
        return {"w_shared": self.w[0].copy(), "w_own": self.w[1:].copy(),
                "P_shared": self.P[0].copy(), "P_own": self.P[1:].copy(), "r": self.r.copy()}

    def load_state(self, state: dict) -> None:
        self.w[0], self.w[1:] = state["w_shared"], state["w_own"]
        self.P[0], self.P[1:] = state["P_shared"], state["P_own"]
        self.r[...] = state["r"]

    def checked(self, rows=None) -> list:
        return [self.w, self.P]

    def task_rows(self) -> dict:
        """Each task's effective model: its shared part plus its own (kb, d)."""
        return {"W": self.w[0] * self.sign[0] + self.w[1:] * self.sign[1:]}


class HashedServer(QuietServer):
    """The table: adds the workers' steps (rank order) at their indices, steps the weights
    they touched, and sends each worker the table at its indices."""

    # for .undo: the tasks' indices, and what a step sends within its round (its sums, zero
    # between rounds, are kept: a step undone midway leaves some)
    NOT_STATE = ("_index", "_offsets", "reply")

    def __init__(self, params: HashedParams, n_tasks: int, dim: int, blocks):
        self.p, self.dim = params, dim
        size = 1 << params.bits
        self.w = np.zeros(size)
        # adagrad: the sum of squared gradients; arow: the precision
        self.acc = np.full(size, params.delta if params.hash_step == "adagrad" else 1.0)
        self._index = [hashed(np.arange(a, b), dim, params.bits)[0].reshape(-1) for a, b in blocks]
        sizes = [2 * idx.size for idx in self._index]
        self.reply = np.zeros(sum(sizes))
        self._offsets = np.concatenate(([0], np.cumsum(sizes)))
        self._step = np.zeros(size)
        self._extra = np.zeros(size)
        self._unchecked = []            # the weights each round since the last check changed

    def step(self, up_all: np.ndarray) -> np.ndarray:
        # the step's sums are zero but at the weights the last round touched (a round's work
        # follows its instances, not the table's 2^bits weights)
        at = []
        for idx, lo, hi in zip(self._index, self._offsets[:-1], self._offsets[1:]):
            half = (hi - lo) // 2
            # only the indices of the round's active tasks carry a step (a weight with no
            # squared gradient, or no precision added, has no step either)
            used = np.flatnonzero(up_all[lo + half:hi])
            np.add.at(self._step, idx[used], up_all[lo:lo + half][used])
            np.add.at(self._extra, idx[used], up_all[lo + half:hi][used])
            at.append(idx[used])
        every = np.unique(np.concatenate(at))
        touched = every[self._extra[every] != 0.0]          # as flatnonzero of the sums
        self.acc[touched] += self._extra[touched]
        if self.p.hash_step == "adagrad":
            self.w[touched] -= self.p.gamma0 * self._step[touched] / np.sqrt(self.acc[touched])
        else:
            self.w[touched] += self._step[touched] / self.acc[touched]
        self._step[every] = 0.0
        self._extra[every] = 0.0
        self._unchecked.append(touched)
        for idx, lo, hi in zip(self._index, self._offsets[:-1], self._offsets[1:]):
            half = (hi - lo) // 2
            self.reply[lo:lo + half] = self.w[idx]
            self.reply[lo + half:hi] = self.acc[idx]
        return self.reply

    def state(self) -> dict:
        return {"w": self.w.copy(), "acc": self.acc.copy()}

    def checked(self) -> list:
        """The weights of the table the rounds since the last check changed, to be finite
        (the others were, and no round changed them)."""
        changed = np.unique(np.concatenate(self._unchecked)) if self._unchecked else []
        self._unchecked.clear()
        return [self.w[changed], self.acc[changed]]

    def load_state(self, state: dict) -> None:
        self.w[...] = state["w"]
        self.acc[...] = state["acc"]
