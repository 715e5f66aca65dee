"""A skewed many-task family (``omtl-mpi data synth --family personal``): per-customer models.

K tasks in G latent groups, weights w_k = c_g(k) + spread * z_k / sqrt(d), labels sign(x . w_k +
noise * e), log-normal stream lengths. Task k's draws depend only on (seed, k), so generating
some tasks gives the same arrays as slicing all of them; docs/DATASETS.md (*Many skewed tasks*)
gives every draw and what should win (one model per latent group)."""
from __future__ import annotations

import math

import numpy as np

from ..errors import ConfigError
from .synthetic import BLOCK_ROWS, named_blocks, task_indices, task_rngs
from .taskfile import block_spans

DEFAULTS = {"tasks": 2000, "dims": 20, "groups": 4, "spread": 0.3, "noise": 0.5,
            "length_median": 15.0, "length_sigma": 1.25, "length_max": None}
# the family-wide generators: default_rng([seed, _STREAM + i]), apart from every task's own
_STREAM = 2 ** 31
_CENTRES, _GROUPS, _LENGTHS = 1, 2, 3
# the longest stream drawn (2^40 instances, terabytes at d = 1): beyond it lengths are refused
# before they are cast to integers, and a million of them still sum within int64
_LONGEST = float(2 ** 40)


def check_options(tasks=DEFAULTS["tasks"], dims=DEFAULTS["dims"], groups=DEFAULTS["groups"],
                  spread=DEFAULTS["spread"], noise=DEFAULTS["noise"],
                  length_median=DEFAULTS["length_median"], length_sigma=DEFAULTS["length_sigma"],
                  length_max=DEFAULTS["length_max"], seed=0) -> None:
    """Refuse bad values of the family's options: a ConfigError of one line per bad value."""
    problems = []
    for name, value, low in (("tasks", tasks, 1), ("dims", dims, 1), ("groups", groups, 1),
                             ("seed", seed, 0), ("length-max", length_max, 1)):
        if name == "length-max" and value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            problems.append(f"--{name} must be an integer >= {low}, got {value!r}")
    for name, value, positive in (("spread", spread, False), ("noise", noise, False),
                                  ("length-median", length_median, True),
                                  ("length-sigma", length_sigma, False)):
        if not (isinstance(value, (int, float, np.floating)) and not isinstance(value, bool)
                and math.isfinite(value) and (value > 0 if positive else value >= 0)):
            problems.append(f"--{name} must be a finite number {'> 0' if positive else '>= 0'}, "
                            f"got {value!r}")
    if problems:
        raise ConfigError("\n".join(problems))


def group_centres(groups: int = DEFAULTS["groups"], dims: int = DEFAULTS["dims"],
                  seed: int = 0) -> np.ndarray:
    """The groups' centres c_g: (groups, dims) unit vectors."""
    c = np.random.default_rng([seed, _STREAM + _CENTRES]).standard_normal((groups, dims))
    return c / np.linalg.norm(c, axis=1, keepdims=True)


def task_groups(tasks: int = DEFAULTS["tasks"], groups: int = DEFAULTS["groups"],
                seed: int = 0) -> np.ndarray:
    """The latent group of every task, (tasks,) int64 in 0..groups-1 (what an oracle would pool)."""
    return np.random.default_rng([seed, _STREAM + _GROUPS]).integers(0, groups, size=tasks)


def stream_lengths(tasks: int = DEFAULTS["tasks"], length_median: float = DEFAULTS["length_median"],
                   length_sigma: float = DEFAULTS["length_sigma"], length_max: int | None = None,
                   seed: int = 0) -> np.ndarray:
    """Every task's stream length, (tasks,) int64 >= 1: log-normal, capped at ``length_max``."""
    u = np.random.default_rng([seed, _STREAM + _LENGTHS]).standard_normal(tasks)
    with np.errstate(over="ignore"):                    # inf is refused below, not wrapped
        n = np.maximum(1, np.rint(length_median * np.exp(length_sigma * u)))
    if length_max is not None:
        n = np.minimum(n, length_max)
    if n.max(initial=1) > _LONGEST:
        raise ConfigError(f"--length-median {length_median} and --length-sigma {length_sigma} "
                          f"draw a stream of {n.max():.3g} instances, more than any machine holds "
                          f"({_LONGEST:.3g} at most): lower them, or cap --length-max")
    return n.astype(np.int64)


# rows whose dot products are computed together (their features stay in the cache)
_PIECE = 4096


def _row_dots(A: np.ndarray, B, owner=None) -> np.ndarray:
    """Row-wise dot products of A with B (with ``owner``, with B[owner[i]] for row i), summed over
    the columns in order: a row's bits do not depend on the rows that come with it."""
    out = np.empty(len(A))
    for a in range(0, len(A), _PIECE):
        Ap = A[a:a + _PIECE]
        Bp = B[a:a + _PIECE] if owner is None else B[owner[a:a + _PIECE]]
        piece = Ap[:, 0] * Bp[:, 0]
        for j in range(1, A.shape[1]):
            piece += Ap[:, j] * Bp[:, j]
        out[a:a + _PIECE] = piece
    return out


class _Family:
    """The family's draws for some options: centres, groups and lengths of every task."""

    def __init__(self, tasks, dims, groups, spread, noise, length_median, length_sigma,
                 length_max, seed):
        check_options(tasks, dims, groups, spread, noise, length_median, length_sigma,
                      length_max, seed)
        self.spread, self.noise, self.seed = spread, noise, seed
        self.centres = group_centres(groups, dims, seed)
        self.groups = task_groups(tasks, groups, seed)
        self.lengths = stream_lengths(tasks, length_median, length_sigma, length_max, seed)

    def draw(self, ks, normalize: bool):
        """Weights (len(ks), d), features and labels (one task after another) of tasks ``ks``."""
        ks = np.asarray(ks, dtype=np.int64)
        d = self.centres.shape[1]
        n = self.lengths[ks]
        offsets = np.concatenate(([0], np.cumsum(n))).tolist()
        Z, X, e = np.empty((len(ks), d)), np.empty((offsets[-1], d)), np.empty(offsets[-1])
        for i, rng in enumerate(task_rngs(self.seed, ks)):
            a, b = offsets[i], offsets[i + 1]
            rng.standard_normal(out=Z[i])           # z_k, then the instances, then the noise
            rng.standard_normal(out=X[a:b])
            rng.standard_normal(out=e[a:b])
        W = self.centres[self.groups[ks]] + self.spread * Z / np.sqrt(d)
        margin = _row_dots(X, W, np.repeat(np.arange(len(ks)), n)) + self.noise * e
        y = np.where(margin >= 0.0, 1, -1).astype(np.int8)
        if normalize:
            X /= np.sqrt(_row_dots(X, X))[:, None]
        return W, X, y


def task_weights(tasks: int = DEFAULTS["tasks"], dims: int = DEFAULTS["dims"],
                 groups: int = DEFAULTS["groups"], spread: float = DEFAULTS["spread"],
                 seed: int = 0, only=None) -> np.ndarray:
    """The true weight vectors w_k of the tasks (all, or ``only`` these), one row per task."""
    check_options(tasks=tasks, dims=dims, groups=groups, spread=spread, seed=seed)
    wanted = task_indices(only, tasks, "personal")
    Z = np.empty((len(wanted), dims))
    for i, rng in enumerate(task_rngs(seed, wanted)):      # z_k: the first d draws of task k
        Z[i] = rng.standard_normal(dims)
    centres = group_centres(groups, dims, seed)
    return centres[task_groups(tasks, groups, seed)[wanted]] + spread * Z / np.sqrt(dims)


def generate_personal(tasks: int = DEFAULTS["tasks"], dims: int = DEFAULTS["dims"],
                      groups: int = DEFAULTS["groups"], spread: float = DEFAULTS["spread"],
                      noise: float = DEFAULTS["noise"],
                      length_median: float = DEFAULTS["length_median"],
                      length_sigma: float = DEFAULTS["length_sigma"],
                      length_max: int | None = DEFAULTS["length_max"], seed: int = 0,
                      normalize: bool = False, only=None):
    """Generate the family; ``only`` restricts it to some task indices (bit-identical slice):
    names, X_list ((n_k, dims) float64) and y_list ((n_k,) int8); a ConfigError per bad value."""
    family = _Family(tasks, dims, groups, spread, noise, length_median, length_sigma,
                     length_max, seed)
    wanted = task_indices(only, tasks, "personal")
    X_list, y_list = [], []
    for lo, hi in block_spans(family.lengths[wanted], BLOCK_ROWS):
        _, X, y = family.draw(wanted[lo:hi], normalize)
        cut = np.cumsum(family.lengths[wanted[lo:hi]])[:-1]
        X_list += np.split(X, cut)
        y_list += np.split(y, cut)
    return [f"task{k}" for k in wanted], X_list, y_list


def personal_blocks(tasks: int = DEFAULTS["tasks"], dims: int = DEFAULTS["dims"],
                    groups: int = DEFAULTS["groups"], spread: float = DEFAULTS["spread"],
                    noise: float = DEFAULTS["noise"],
                    length_median: float = DEFAULTS["length_median"],
                    length_sigma: float = DEFAULTS["length_sigma"],
                    length_max: int | None = DEFAULTS["length_max"], seed: int = 0,
                    normalize: bool = False, rows: int = BLOCK_ROWS):
    """The family a block of whole tasks at a time, for a writer: (names, X, y, lengths) of about
    ``rows`` instances each, :func:`generate_personal`'s values; bad values refused at once."""
    family = _Family(tasks, dims, groups, spread, noise, length_median, length_sigma,
                     length_max, seed)
    return named_blocks(lambda ks: family.draw(ks, normalize)[1:], family.lengths, rows)
