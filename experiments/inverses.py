"""The tasks' d x d inverses after a new prior: the in-place Gauss-Jordan over the tasks
(``bayes.inverse_tasks_last``, over chunks of ``bayes.IN_PLACE_INVERSE_MAX`` numbers) against
LAPACK's batched inverse (``numpy.linalg.inv``, one matrix at a time), at the block sizes where
both are candidates. What chose ``bayes.IN_PLACE_INVERSE_DIM`` (docs/DESIGN.md, *The round's
hot path*).

    python experiments/inverses.py [--repeats 3]

Prints a Markdown table: the fastest of the repeats of each, in ms, and their largest
difference. Run it on an idle machine.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from omtl_mpi.algorithms.bayes import chunk_of, inverse_in_chunks  # noqa: E402

SIZES = ((10, 100_000), (12, 70_000), (13, 60_000), (14, 50_000), (16, 40_000), (20, 25_000))


def lapack(P: np.ndarray) -> np.ndarray:
    return np.moveaxis(np.linalg.inv(np.moveaxis(P, -1, 0)), 0, -1)


def chunked(P: np.ndarray) -> np.ndarray:
    d, n = P.shape[0], P.shape[-1]
    # a copy, as the expert's matrices are a new array: timed, as LAPACK's output is
    return inverse_in_chunks(P.copy(), np.empty((d, d, min(n, chunk_of(d)))))


def fastest(f, P, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        f(P)
        times.append(time.perf_counter() - t)
    return min(times) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print("| d | tasks | in place, chunked: ms | LAPACK: ms | LAPACK / in place | largest difference |")
    print("|---|---|---|---|---|---|")
    for d, n in SIZES:
        X = np.random.default_rng(0).standard_normal((d, 3, n))
        P = np.einsum("ijk,ljk->ilk", X, X) + np.eye(d)[:, :, None]    # Pi + Q_k / s2's shape
        ours, theirs = fastest(chunked, P, args.repeats), fastest(lapack, P, args.repeats)
        diff = float(np.abs(chunked(P) - lapack(P)).max())
        print(f"| {d} | {n:,} | {ours:.0f} | {theirs:.0f} | {theirs / ours:.2f} | {diff:.1e} |")


if __name__ == "__main__":
    main()
