#!/usr/bin/env python
"""Microseconds of each piece of a round, in one process: where a round's time goes.

Usage: python scripts/bench_parts.py [--repeats 9] [--rounds 2000] [--out docs/PERFORMANCE.md]

Drives the learner objects directly (no MPI, no clocks of the runtime) on K=5 tasks of random
data, d=9 and d=784, round by round, timing each call with perf_counter; every figure is the
mean per round of the fastest of --repeats passes (the least disturbed by other work on the
machine). Pieces: a C-ADMM worker holding one task (the MPI layout) and one holding all five
(the one-process layout), the server's (u, V) step and its Omega update (which also builds
the next step's consensus matrix), and a D-ADMM node of a ring (one task); each with the numpy
steps and, when numba is installed, the compiled ones (--kernel numba).
"""
from __future__ import annotations

import argparse
import os
import sys
from time import perf_counter

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from docsection import replace_section, run_on  # noqa: E402
from omtl_mpi.algorithms.admm import AdmmParams  # noqa: E402
from omtl_mpi.algorithms.cadmm import CAdmmServer, CAdmmWorker  # noqa: E402
from omtl_mpi.algorithms.dadmm import DAdmmNode  # noqa: E402
from omtl_mpi.algorithms.kernels import available  # noqa: E402
from omtl_mpi.data.rounds import RoundBatches  # noqa: E402

K = 5


def streams(d, rounds):
    rng = np.random.default_rng(0)
    w = rng.normal(size=d)
    X = [rng.normal(size=(rounds, d)) for _ in range(K)]
    y = [np.where(x @ (w + 0.3 * rng.normal(size=d)) >= 0, 1, -1).astype(np.int8) for x in X]
    return X, y


def star_pass(d, rounds, kb, kernel):
    """One pass of C-ADMM rounds with a worker of kb tasks; per-round means of each piece."""
    X, y = streams(d, rounds)
    p = AdmmParams(kernel=kernel).resolved(rounds)
    b = RoundBatches(X[:kb], y[:kb], 1, rounds, d)
    worker = CAdmmWorker(p, 0, kb, d, K)
    server = CAdmmServer(p, K, d, [(0, K)])
    full = np.zeros(K * d)
    acc = np.zeros(4)
    for t in range(rounds):
        t0 = perf_counter()
        _, msg = worker.up(b.X[t], b.y_float[t], b.inv_count[t])
        t1 = perf_counter()
        full[: kb * d] = msg
        reply = server.step(full)
        t2 = perf_counter()
        worker.down(reply[: (kb + 1) * d])      # [u, v_0..v_kb-1]: this worker's share
        t3 = perf_counter()
        server.after_reply()
        t4 = perf_counter()
        acc += (t1 - t0, t3 - t2, t2 - t1, t4 - t3)
    return acc / rounds * 1e6


def node_pass(d, rounds, kernel):
    """One pass of a D-ADMM ring node (task 0) whose neighbours send fresh random tables."""
    X, y = streams(d, rounds)
    p = AdmmParams(kernel=kernel).resolved(rounds)
    b = RoundBatches(X[:1], y[:1], 1, rounds, d)
    node = DAdmmNode(p, K, d, 0, 1, 2)
    rng = np.random.default_rng(1)
    tables = rng.normal(size=(8,) + node.inbox.shape)
    acc = np.zeros(3)
    for t in range(rounds):
        t0 = perf_counter()
        node.local_step(b.X[t], b.y_float[t], b.inv_count[t])
        node.inbox[...] = tables[t % 8]
        node.inbox[:, :, 2 * d] = t            # neighbours' rows one round old
        t1 = perf_counter()
        node.merge(node.inbox)
        t2 = perf_counter()
        node.finish_round()
        t3 = perf_counter()
        acc += (t1 - t0, t2 - t1, t3 - t2)
    return acc / rounds * 1e6


def fastest(passes):
    return min(passes, key=lambda a: a.sum())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--rounds", type=int, default=2000)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "PERFORMANCE.md"))
    args = ap.parse_args()
    kernels = ("numpy", "numba") if available() else ("numpy",)
    rows = {}
    for kernel in kernels:
        for d in (9, 784):
            for kb in (1, K):
                up, down, step, omega = fastest([star_pass(d, args.rounds, kb, kernel)
                                                 for _ in range(args.repeats)])
                tasks = f"{kb} task{'s' if kb > 1 else ''}"
                rows.setdefault((d, f"C-ADMM worker, {tasks}: predict + w-step"), []).append(up)
                rows.setdefault((d, f"C-ADMM worker, {tasks}: z-step"), []).append(down)
                if kb == K:
                    rows.setdefault((d, "C-ADMM server: (u, V) step and packing the replies"), []).append(step)
                    rows.setdefault((d, "C-ADMM server: Omega update and next consensus matrix"), []).append(omega)
            local, merge, finish = fastest([node_pass(d, args.rounds, kernel) for _ in range(args.repeats)])
            rows.setdefault((d, "D-ADMM node (1 task, ring): predict + w-step + own rows"), []).append(local)
            rows.setdefault((d, "D-ADMM node: merge the neighbours' tables"), []).append(merge)
            rows.setdefault((d, "D-ADMM node: Omega, consensus matrix, (u, V), z-step"), []).append(finish)
    rows = sorted(rows.items(), key=lambda item: item[0][0])     # stable: pieces in order per d
    for (d, label), us in rows:
        print(f"d={d:<4} {label:<58} " + " ".join(f"{x:7.2f}" for x in us) + " us", flush=True)
    lines = [
        "## Where a round's time goes, piece by piece",
        "",
        f"Generated by `python scripts/bench_parts.py --repeats {args.repeats} --rounds {args.rounds}` "
        f"on {run_on()}. K={K} tasks "
        "of random data, paper defaults, one process, no MPI; microseconds per round, mean over "
        f"{args.rounds} rounds of the fastest of {args.repeats} passes.",
        "",
        "| d | piece | " + " | ".join(f"us per round, {k}" for k in kernels) + " |",
        "|---|---|" + "---|" * len(kernels),
    ]
    lines += [f"| {d} | {label} | " + " | ".join(f"{x:.2f}" for x in us) + " |"
              for (d, label), us in rows]
    replace_section(args.out, "parts", "\n".join(lines))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
