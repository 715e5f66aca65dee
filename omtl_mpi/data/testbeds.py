"""Known-answer test beds: linear tasks whose relationship is known, so that a multi-task learner
can be checked against what should win (``omtl-mpi data synth --family ...``).

Task k has weights w_k, instances x ~ N(0, I) and labels ``sign(x . w_k + noise * N(0, 1))``;
``identical``, ``clustered`` and ``unrelated`` differ only in the w_k (docs/DATASETS.md,
*Known-answer test beds*). Task k's instances depend only on (seed, k), the weights on the seed."""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from .synthetic import BLOCK_ROWS, named_blocks, task_indices, task_rngs

FAMILIES = ("identical", "clustered", "unrelated")
DEFAULTS = {"tasks": 10, "samples": 300, "dims": 50}


def task_weights(family: str, tasks: int, dims: int, clusters: int = 2, spread: float = 0.3,
                 seed: int = 0) -> np.ndarray:
    """The true weight vectors, one row per task (tasks x dims)."""
    rng = np.random.default_rng([seed, 2 ** 31])         # apart from every task's own stream
    if family == "unrelated":
        return rng.normal(size=(tasks, dims))
    if family == "identical":
        centres = rng.normal(size=(1, dims))
        group = np.zeros(tasks, dtype=np.intp)
    elif family == "clustered":
        w = rng.normal(size=dims)
        centres = np.stack([w, -w]) if clusters == 2 else rng.normal(size=(clusters, dims))
        group = (np.arange(tasks) * clusters) // tasks    # contiguous groups, sizes within one
    else:
        raise ConfigError(f"unknown family {family!r}; choose one of paper, {', '.join(FAMILIES)}")
    return centres[group] + spread * rng.normal(size=(tasks, dims))


def _check(family, tasks, samples, dims, clusters, spread, noise) -> None:
    problems = []
    for name, value, low in (("tasks", tasks, 1), ("samples", samples, 1), ("dims", dims, 1),
                             ("clusters", clusters, 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            problems.append(f"--{name} must be an integer >= {low}, got {value!r}")
    for name, value in (("spread", spread), ("noise", noise)):
        if not (isinstance(value, (int, float)) and np.isfinite(value) and value >= 0):
            problems.append(f"--{name} must be a finite number >= 0, got {value!r}")
    if not problems and family == "clustered" and not 2 <= clusters <= tasks:
        problems.append(f"--clusters must be between 2 and the number of tasks ({tasks}), got {clusters}")
    if problems:
        raise ConfigError("\n".join(problems))


def _draw(W, seed: int, ks, samples: int, dims: int, noise: float, normalize: bool):
    """Features (len(ks) * samples, dims) and labels of tasks ``ks``, each from its own rng."""
    X, y = np.empty((len(ks) * samples, dims)), np.empty(len(ks) * samples, dtype=np.int8)
    for i, (k, rng) in enumerate(zip(ks, task_rngs(seed, ks))):
        Xk = rng.normal(size=(samples, dims))
        margin = Xk @ W[k] + noise * rng.normal(size=samples)
        if normalize:
            Xk /= np.linalg.norm(Xk, axis=1, keepdims=True)
        X[i * samples:(i + 1) * samples] = Xk
        y[i * samples:(i + 1) * samples] = np.where(margin >= 0.0, 1, -1)
    return X, y


def testbed_blocks(family: str, tasks: int = 10, samples: int = 300, dims: int = 50,
                   clusters: int = 2, spread: float = 0.3, noise: float = 0.5, seed: int = 0,
                   normalize: bool = False, rows: int = BLOCK_ROWS):
    """A test bed a block of whole tasks at a time, for a writer: (names, X, y, lengths) of about
    ``rows`` instances each, :func:`generate_testbed`'s values; bad values refused at once."""
    _check(family, tasks, samples, dims, clusters, spread, noise)
    W = task_weights(family, tasks, dims, clusters, spread, seed)
    return named_blocks(lambda ks: _draw(W, seed, ks, samples, dims, noise, normalize),
                        np.full(tasks, samples, dtype=np.int64), rows)


def generate_testbed(family: str, tasks: int = 10, samples: int = 300, dims: int = 50,
                     clusters: int = 2, spread: float = 0.3, noise: float = 0.5, seed: int = 0,
                     normalize: bool = False, only=None):
    """A test bed, of ``only`` these tasks (a bit-identical slice), ``normalize`` dividing instances
    by their norm after labelling: names, X_list, y_list; a ConfigError per bad value."""
    _check(family, tasks, samples, dims, clusters, spread, noise)
    W = task_weights(family, tasks, dims, clusters, spread, seed)
    wanted = task_indices(only, tasks, "test-bed")
    X, y = _draw(W, seed, wanted, samples, dims, noise, normalize)
    return ([f"task{k}" for k in wanted], list(X.reshape(len(wanted), samples, dims)),
            list(y.reshape(len(wanted), samples)))
