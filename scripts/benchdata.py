"""Random related tasks for the benchmarks: K linear problems around one shared direction."""
import os

import numpy as np


def make_random_tasks(folder, K, d, samples, write_tasks):
    """Write K tasks of ``samples`` Gaussian instances with labels from perturbed copies of one
    random linear model; return the file path and the arrays."""
    rng = np.random.default_rng(0)
    w = rng.normal(size=d)
    X = [rng.normal(size=(samples, d)) for _ in range(K)]
    y = [np.where(x @ (w + 0.3 * rng.normal(size=d)) >= 0, 1, -1) for x in X]
    path = os.path.join(folder, f"random-K{K}-d{d}.h5")
    write_tasks(path, [f"t{k}" for k in range(K)], X, y)
    return path, X, y
