"""The paper's synthetic multi-task family (Li et al. 2025, section 5.1), seeded and reproducible.

Each instance is a point p uniform in [-3, 3]^2 with the 9 monomial features
(p1, p2, p1 p2, p1^2, p2^2, p1^3, p2^3, p1 p2^2, p1^2 p2); its label is
sign(q2 - h(q1 - a0)) with q = R(theta) p and h(s) = a1 sin s + a2 sin 2s + a3 cos s + a4 cos 2s.
Task parameters follow a random walk, so neighbouring tasks are related.
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError


def task_parameters(tasks: int, seed: int):
    """The random walk of task parameters: ``a`` (K, 5) and ``theta`` (K,).

    Task 0 has a = (0, 1, 1, 1, 1) and theta = 0; each next task adds N(0, 0.1^2) to every a_i
    and N(0, (0.1 pi / 4)^2) to theta.
    """
    rng = np.random.default_rng(seed)
    a = np.empty((tasks, 5))
    theta = np.empty(tasks)
    a[0] = (0.0, 1.0, 1.0, 1.0, 1.0)
    theta[0] = 0.0
    for k in range(1, tasks):
        a[k] = a[k - 1] + rng.normal(0.0, 0.1, size=5)
        theta[k] = theta[k - 1] + rng.normal(0.0, 0.1 * np.pi / 4)
    return a, theta


def footprint(tasks: int, samples: int, dims: int = 9) -> float:
    """Bytes a generated data set holds at its peak, for ``tasks`` x ``samples`` instances of
    ``dims`` features (9 for the paper's family): every task's features and labels, one task's
    temporaries while it is generated, the weights, and the check of the features when written."""
    tasks, samples, dims = float(tasks), float(samples), float(dims)
    return tasks * samples * (8 * dims + 1) + samples * (9 * dims + 16 * 8) + tasks * 8 * (dims + 6)


def features(p: np.ndarray) -> np.ndarray:
    """The 9 monomials of points p (n, 2), in the paper's order."""
    p1, p2 = p[:, 0], p[:, 1]
    return np.stack([p1, p2, p1 * p2, p1 ** 2, p2 ** 2, p1 ** 3, p2 ** 3, p1 * p2 ** 2, p1 ** 2 * p2],
                    axis=1)


def generate(tasks: int = 5, samples: int = 10000, seed: int = 0, normalize: bool = False,
             only=None):
    """Generate the family; ``only`` restricts it to some task indices (bit-identical slice).

    Returns
    -------
    names : list of str
    X_list : list of ndarray (samples, 9) float64
    y_list : list of ndarray (samples,) int8 in {-1, +1}
    """
    if int(tasks) < 1 or int(samples) < 1:
        raise ConfigError(f"synthetic data needs tasks >= 1 and samples >= 1, got {tasks} and {samples}")
    if int(seed) < 0:
        raise ConfigError(f"--seed must be >= 0, got {seed}")
    a, theta = task_parameters(tasks, seed)
    wanted = range(tasks) if only is None else [int(k) for k in only]
    names, X_list, y_list = [], [], []
    for k in wanted:
        if not 0 <= k < tasks:
            raise ConfigError(f"synthetic task index {k} out of range 0..{tasks - 1}")
        p = np.random.default_rng([seed, k]).uniform(-3.0, 3.0, size=(samples, 2))
        c, s = np.cos(theta[k]), np.sin(theta[k])
        q1 = c * p[:, 0] - s * p[:, 1]
        q2 = s * p[:, 0] + c * p[:, 1]
        a0, a1, a2, a3, a4 = a[k]
        z = q1 - a0
        h = a1 * np.sin(z) + a2 * np.sin(2 * z) + a3 * np.cos(z) + a4 * np.cos(2 * z)
        X = features(p)
        if normalize:
            X /= np.linalg.norm(X, axis=1, keepdims=True)
        names.append(f"task{k}")
        X_list.append(X)
        y_list.append(np.where(q2 - h >= 0.0, 1, -1).astype(np.int8))
    return names, X_list, y_list
