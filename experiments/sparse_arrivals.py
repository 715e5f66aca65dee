"""New and rare tasks in the Python API: one instance at a time, each to a random task of K,
all tasks one problem (a shared w, d = 5, no noise). Prints, per K, the error over the last
quarter of the calls of C-ADMM with the defaults (and with --no-experts), and the seconds.

    python experiments/sparse_arrivals.py [--tasks 100 1000 100000] [--calls 8000]

Against another revision: PYTHONPATH=../omtl-REV python experiments/sparse_arrivals.py
(the first line printed says which package ran). docs/GUIDE.md, *New and rare tasks*.
"""
import argparse
import time

import numpy as np

import omtl_mpi


def run(K: int, calls: int, **params) -> tuple[float, float]:
    rng = np.random.default_rng(0)
    d = 5
    w = rng.normal(size=d)
    m = omtl_mpi.learner("c-admm", K, d, **params)
    wrong, start = [], time.perf_counter()
    for _ in range(calls):
        k, x = int(rng.integers(K)), rng.normal(size=d)
        y = 1 if x @ w >= 0 else -1
        wrong.append(m.predict_one(x, task=k) != y)
        m.learn_one(x, y, task=k)
    return float(np.mean(wrong[-calls // 4:])), time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, nargs="+", default=[100, 1000, 100_000])
    ap.add_argument("--calls", type=int, default=8000)
    args = ap.parse_args()
    print(f"omtl_mpi from {omtl_mpi.__file__}; {args.calls} calls")
    print("| tasks K | error, last quarter (defaults) | with --no-experts | seconds (defaults) |")
    print("|---|---|---|---|")
    for K in args.tasks:
        err, secs = run(K, args.calls)
        err_plain, _ = run(K, args.calls, experts=False)
        print(f"| {K:,} | {err:.4f} | {err_plain:.4f} | {secs:.1f} |", flush=True)


if __name__ == "__main__":
    main()
