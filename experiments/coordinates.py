"""What stepping only the instances' coordinates (``--coordinates nonzero``) changes against
stepping every one (``--coordinates all``, the spec's), on sparse data.

    python experiments/coordinates.py

Four related tasks of sparse Gaussian instances (d = 60, 10% of the features non-zero, 300 to
450 instances per task, labels from a shared linear model and a task's own), stored sparse; the
defaults with AROW's diagonal, the adagrad w-step, the paper's settings, and the defaults with
the paper's lambdas, each run with both, in one process. Prints, per setting: the largest
difference of the learned W, the largest |W|, how many predictions differ, and both mean errors
(docs/ALGORITHMS.md section 2.1, *Large d*; experiments/PROTOCOL.md, step 9).
"""
from __future__ import annotations

import os
import sys
import tempfile

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from omtl_mpi.data.taskfile import write_tasks  # noqa: E402
from omtl_mpi.options import run_config  # noqa: E402
from omtl_mpi.runtime.run import run  # noqa: E402

SETTINGS = {
    "defaults (AROW's diagonal)": {"arow_covariance": "diagonal"},
    "adagrad w-step": {"w_step": "adagrad"},
    "--preset paper": {"preset": "paper"},
    "defaults with the paper's lambdas": {"arow_covariance": "diagonal", "lambda1": 0.01,
                                          "lambda2": 0.1, "lambda3": 0.01, "lambda4": 0.01},
}


def tasks(folder: str) -> str:
    rng = np.random.default_rng(0)
    d, lengths = 60, [300, 450, 250, 400]
    w = rng.normal(size=d)
    Xs, ys = [], []
    for k, n in enumerate(lengths):
        X = sp.random(n, d, density=0.1, random_state=k, format="csr")
        X.data = rng.normal(size=X.nnz)
        Xs.append(X)
        ys.append(np.where(X @ (w + 0.3 * rng.normal(size=d)) >= 0, 1, -1))
    path = os.path.join(folder, "sparse.h5")
    write_tasks(path, [f"t{k}" for k in range(len(Xs))], Xs, ys)
    return path


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        path = tasks(folder)
        print("| setting | max difference of W | max abs W | predictions that differ | mean error, all | mean error, nonzero |")
        print("|---|---|---|---|---|---|")
        for name, options in SETTINGS.items():
            if "preset" in options:
                from omtl_mpi.options import PRESETS
                options = {k: v for k, v in PRESETS["paper"].items()}
            reports = [run(run_config({"data": path, "coordinates": c, **options}))
                       for c in ("all", "nonzero")]
            a, b = (r["_written"][2] for r in reports)
            print(f"| {name} | {np.abs(a.model['W'] - b.model['W']).max():.4f} | "
                  f"{np.abs(a.model['W']).max():.2f} | {int((a.predictions != b.predictions).sum())} "
                  f"of {len(a.predictions)} | {reports[0]['mean_error']:.4f} | "
                  f"{reports[1]['mean_error']:.4f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
